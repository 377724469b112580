'use strict';
// The JavaScript side of the cross-language tests: runs a script of puts
// and writes on the JS HxSaver, or reads a thread with it, and returns
// what it read in the canonical form driver.py prints (publicJson of each
// value's encoding), so the two compare as JSON text, keys in order.

const messages = require('@langchain/core/messages');
const { HxSaver, EncryptedSerializer, ThreadConflict } = require('../..');
const { encode, publicJson } = require('../../lib/codec');
const { encodeWrite } = require('../../lib/writes');

/** @type {Record<string, new (fields: any) => any>} */
const CLASSES = {
  human: messages.HumanMessage,
  ai: messages.AIMessage,
  tool: messages.ToolMessage,
  system: messages.SystemMessage,
};

/**
 * A script's value as JS's: {"$msg": {...}} a message, {"$interrupts"}
 * an array of {id, value}.
 * @param {any} v
 * @returns {any}
 */
function native(v) {
  if (Array.isArray(v)) return v.map(native);
  if (v && typeof v === 'object') {
    if (v.$msg) {
      const { type, ...fields } = v.$msg;
      return new CLASSES[type](fields);
    }
    if (v.$interrupts) return v.$interrupts.map((/** @type {any} */ i) => ({ id: i.id, value: native(i.value) }));
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, native(x)]));
  }
  return v;
}

/**
 * @param {import('pg').Pool} pool
 * @param {{ schema: string, options?: object, key?: string }} job
 */
function saverOf(pool, job) {
  return new HxSaver(pool, {
    schema: job.schema,
    ...(job.options ?? {}),
    ...(job.key ? { serde: new EncryptedSerializer({ k1: Buffer.from(job.key, 'base64') }) } : {}),
  });
}

/**
 * @param {import('pg').Pool} pool
 * @param {any} job
 */
async function write(pool, job) {
  const saver = saverOf(pool, job);
  const results = [];
  for (const step of job.steps) {
    /** @type {Record<string, unknown>} */
    const conf = { thread_id: job.thread, checkpoint_ns: step.ns ?? '' };
    if (step.op === 'put') {
      if (step.parent) conf.checkpoint_id = step.parent;
      if (step.fork_of) conf.hx_fork_of = step.fork_of;
      const checkpoint = { ...step.checkpoint, id: step.id, channel_values: native(step.values) };
      try {
        await saver.put({ configurable: conf }, checkpoint, native(step.metadata), step.new_versions);
        results.push('ok');
      } catch (err) {
        if (!(err instanceof ThreadConflict)) throw err;
        results.push(`conflict ${err.code}`);
      }
    } else {
      conf.checkpoint_id = step.checkpoint;
      const writes = step.writes.map((/** @type {[string, unknown]} */ [ch, v]) => [ch, native(v)]);
      await saver.putWrites({ configurable: conf }, writes, step.task, step.task_path ?? '');
      results.push('ok');
    }
  }
  return results;
}

/**
 * @param {any} t
 */
function entry(t) {
  const { channel_values: values, id, ...checkpoint } = t.checkpoint;
  return {
    config: t.config.configurable,
    parent: t.parentConfig ? t.parentConfig.configurable.checkpoint_id : null,
    checkpoint,
    values: Object.fromEntries(Object.entries(values).map(([ch, v]) => [ch, publicJson(encode(v))])),
    metadata: publicJson(encode(t.metadata)),
    writes: (t.pendingWrites ?? []).map((/** @type {any[]} */ w) => [w[0], w[1], publicJson(encodeWrite(w[1], w[2]))]),
  };
}

/**
 * @param {import('pg').Pool} pool
 * @param {any} job
 */
async function read(pool, job) {
  const saver = saverOf(pool, job);
  /** @type {Record<string, any>} */
  const out = {};
  for (const ns of job.namespaces) {
    const base = { thread_id: job.thread, checkpoint_ns: ns };
    const head = await saver.getTuple({ configurable: base });
    const list = [];
    for await (const t of saver.list({ configurable: base })) list.push(entry(t));
    out[ns] = { head: head ? entry(head) : null, list };
  }
  out.forks = {};
  for (const [ns, cid] of job.forks ?? []) {
    const t = await saver.getTuple({ configurable: { thread_id: job.thread, checkpoint_ns: ns, checkpoint_id: cid } });
    out.forks[cid] = entry(t);
  }
  return out;
}

module.exports = { write, read };
