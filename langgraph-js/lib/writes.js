'use strict';
// putWrites: a task's pending writes stored exactly once, as the Python
// package's writes.py stores them.  Writing the same values again (a
// retry) is a no-op; other values for the same task and index throw
// NonDeterministicRetry (XH201).  LangGraph's records of an attempt
// (__error__, __scheduled__, __interrupt__, __resume__, at fixed negative
// indexes) are overwritten by the last attempt; an interrupt of the root
// namespace's head is published to the thread's stream.
//
// A write's value is its JSON (codec.js) in `value`, or zlib with the
// dictionary in `packed` when that saves a quarter; interrupts are
// {"$hx": "tuple", "items": [{"$hx": "interrupt", "id", "value"}]}, as
// Python writes them.  A write whose value the checkpoint's state holds in
// LangGraph's `__start__` channel is stored as a reference to it,
// {"$hx": "state", "path": "/__start__/<channel>"}.

const { WRITES_IDX_MAP } = require('@langchain/langgraph-checkpoint');
const { DataCorrupted, NonDeterministicRetry, InvalidParameterValue } = require('./errors');
const D = require('./delta');
const { encode } = require('./codec');
const { checkId, checkKey } = require('./limits');
const { configurableOf, kindOf } = require('./keys');
const { ownerOf, refused, checkOwner } = require('./ownership');
const { rebuildFrom } = require('./rebuild');
const { openWrite, sealWrite } = require('./sealing');
const { equalJson } = require('./equal');
const { dumps, pack, unpack, parse, isObject, hasOwn } = require('./storage');
const { INTERRUPT, interruptItems } = require('./stream');

const START = '__start__';
/** The tag of a write stored as a reference into its checkpoint's state. */
const STATE_REF = 'state';

/**
 * A write's value encoded: an interrupt write as Python's tuple of
 * interrupts, anything else by the codec.
 * @param {string} channel
 * @param {unknown} value
 */
function encodeWrite(channel, value) {
  if (channel === INTERRUPT && Array.isArray(value) && value.every(isInterrupt)) {
    return {
      $hx: 'tuple',
      items: value.map((i) => ({ $hx: 'interrupt', id: i.id, value: encode(i.value) })),
    };
  }
  return encode(value);
}

/**
 * An interrupt of LangGraph.js, {id, value}, as Python's Interrupt holds it.
 * @param {unknown} i
 * @returns {i is { id: string, value: unknown }}
 */
function isInterrupt(i) {
  return isObject(i) && typeof i.id === 'string' && Object.keys(i).every((k) => k === 'id' || k === 'value');
}

/**
 * The reference to store for a write of `enc` to `channel` when the
 * checkpoint's `__start__` value holds it.
 * @param {unknown} start
 * @param {string} channel
 * @param {unknown} enc
 */
function stateRef(start, channel, enc) {
  if (isObject(start) && hasOwn(start, channel) && equalJson(start[channel], enc)) {
    return { $hx: STATE_REF, path: '/' + START + D.pointer(channel) };
  }
  return null;
}

/** @param {unknown} v */
function isStateRef(v) {
  return isObject(v) && v.$hx === STATE_REF && Object.keys(v).length === 2 && typeof v.path === 'string';
}

/**
 * A stored write's value (encoded): itself, or for a reference the value
 * it names in the checkpoint's state.
 * @param {Record<string, unknown>} state
 * @param {unknown} value
 */
function resolveWrite(state, value) {
  if (!isStateRef(value)) return value;
  const path = /** @type {string} */ (/** @type {any} */ (value).path);
  const found = path.startsWith('/' + START + '/') ? D.resolve(state, path) : undefined;
  if (found === undefined) {
    throw new DataCorrupted(`a pending write refers to ${path.slice(0, 80)}, which its checkpoint's state does not hold`, {
      detail: "The write is stored as a reference into its checkpoint's state.",
    });
  }
  return found;
}

/**
 * @param {import('./db').Database} db
 * @param {import('./put').Context} ctx
 * @param {() => Promise<import('./sql').Server>} server
 * @param {import('@langchain/core/runnables').RunnableConfig} config
 * @param {[string, unknown][]} writes
 * @param {string} taskId
 * @param {string} taskPath
 */
async function putWrites(db, ctx, server, config, writes, taskId, taskPath) {
  const conf = configurableOf('putWrites', config);
  const threadId = checkKey('thread id', conf.thread_id);
  const ns = checkKey('checkpoint namespace', conf.checkpoint_ns ?? '');
  const cid = checkId('checkpoint id', conf.checkpoint_id);
  checkId('task id', taskId);
  checkKey('task path', taskPath);
  if (!Array.isArray(writes) || !writes.every((w) => Array.isArray(w) && w.length === 2)) {
    throw new InvalidParameterValue("putWrites's writes are an array of [channel, value] pairs", {
      detail: `It was given ${kindOf(writes)}${Array.isArray(writes) ? ' holding something else' : ''}.`,
    });
  }
  const where = /** @type {[string, string, string]} */ ([threadId, ns, cid]);
  /** @typedef {{ idx: number[], channels: string[], values: (string | null)[], packed: (Buffer | null)[] }} Columns */
  /** @type {Columns} */
  const regular = { idx: [], channels: [], values: [], packed: [] };
  /** @type {Columns} */
  const special = { idx: [], channels: [], values: [], packed: [] };
  /** @type {Map<number, [string, unknown]>} */
  const mine = new Map();
  /** @type {Map<number, unknown>} */
  const storedAs = new Map();
  const head = ctx.heads.get(threadId, ns);
  const start = head !== undefined && head.checkpointId === cid ? head.state[START] : undefined;
  writes.forEach(([ch, value], i) => {
    const channel = checkKey('channel', ch);
    const isSpecial = hasOwn(WRITES_IDX_MAP, channel);
    const target = isSpecial ? special : regular;
    const idx = isSpecial ? WRITES_IDX_MAP[channel] : i;
    const enc = encodeWrite(channel, value);
    const ref = !isSpecial && ctx.sealer === null ? stateRef(start, channel, enc) : null;
    /** @type {string} */
    let text;
    /** @type {Buffer | null} */
    let packed = null;
    if (ctx.sealer !== null) {
      text = sealWrite(ctx.sealer, where, taskId, idx, channel, enc);
    } else if (ref !== null) {
      storedAs.set(idx, ref);
      text = dumps(ref);
    } else {
      text = dumps(enc);
      if (!isSpecial) packed = pack(text);
    }
    target.idx.push(idx);
    target.channels.push(channel);
    target.values.push(packed !== null ? null : text);
    target.packed.push(packed);
    mine.set(idx, [channel, enc]);
  });
  const key = [threadId, ns, cid, taskId, taskPath];
  const owner = ownerOf(config);
  if (special.idx.length) {
    const srv = await server();
    await db.transaction(async (client) => {
      await checkOwner(client, ctx.sql, threadId, owner);
      await client.query(ctx.sql.UPSERT_WRITES_SQL, [...key, special.idx, special.channels, special.values, special.packed]);
      if (special.channels.includes(INTERRUPT) && ns === '' && ctx.sealer === null && srv.publishing) {
        await publishInterrupts(client, ctx, threadId, cid);
      }
    });
  }
  if (!regular.idx.length) return;
  const [{ stored }] = await db.query(ctx.sql.FAST_WRITES_SQL, [
    ...key,
    regular.idx,
    regular.channels,
    regular.values,
    regular.packed,
    owner,
  ]);
  if (stored === null) {
    const rows = await db.query(ctx.sql.EPOCH_SQL, [threadId]);
    throw refused(threadId, owner, rows.length ? rows[0].epoch : null);
  }
  const there = regular.idx.filter((i) => !stored.includes(i)).sort((a, b) => a - b);
  if (!there.length) return;
  // a retry: the writes stored first must be these
  const found = await db.query(ctx.sql.STORED_WRITES_SQL, [threadId, ns, cid, taskId, there]);
  /** @type {Record<string, any> | null} */
  let state = null;
  const bad = [];
  for (const r of found) {
    const text = r.packed === null ? r.value : unpack(r.packed);
    const got = openWrite(ctx.sealer, where, taskId, r.idx, r.channel, parse(text, 'a stored write'));
    const [ch, enc] = /** @type {[string, unknown]} */ (mine.get(r.idx));
    if (r.channel === ch && (equalJson(got, enc) || (storedAs.has(r.idx) && equalJson(got, storedAs.get(r.idx))))) continue;
    if (isStateRef(got) && state === null) {
      // stored by another process as a reference: to the value
      state = await db.withClient((client) => rebuildFrom(client, ctx, threadId, ns, cid, '', []));
    }
    if (state !== null && isStateRef(got) && r.channel === ch && equalJson(resolveWrite(state, got), enc)) continue;
    bad.push(r.idx);
  }
  if (bad.length) {
    throw new NonDeterministicRetry(`task ${taskId} of checkpoint ${cid} wrote other values for the same writes before`, {
      detail: `The writes at index ${bad.sort((a, b) => a - b).join(', ')} differ from the ones stored.`,
      hint: "A task's writes are stored once: a retry must write the same values.",
    });
  }
}

/**
 * Interrupts written after the put of their checkpoint, when it is the
 * thread's head, go to its stream.
 * @param {import('./db').Queryable} client
 * @param {import('./put').Context} ctx
 * @param {string} threadId
 * @param {string} cid
 */
async function publishInterrupts(client, ctx, threadId, cid) {
  await client.query(ctx.sql.LOCK_SQL, [ctx.sql.lockKey, threadId, '']);
  const [row] = (await client.query(ctx.sql.INTERRUPTS_SQL, [threadId, cid])).rows;
  if (row && row.head) {
    const stored = row.interrupts === null ? [] : parse(row.interrupts, 'stored interrupts');
    const items = (Array.isArray(stored) ? stored : []).flatMap(interruptItems);
    const event = { type: 'STATE_DELTA', delta: [{ op: 'add', path: '/' + INTERRUPT, value: items }] };
    await client.query(ctx.sql.PUBLISH_SQL, [threadId, dumps(event)]);
  }
}

module.exports = { encodeWrite, resolveWrite, isStateRef, putWrites };
