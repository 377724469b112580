'use strict';
// Reading: getTuple (a checkpoint and its pending writes, its state
// rebuilt from the rows from its snapshot to it, in one statement) and
// list (the checkpoints of a filter, newest first, a page at a time, each
// page in a short read-only transaction of its own).

const { maxChannelVersion, TASKS } = require('@langchain/langgraph-checkpoint');
const { decode, encode } = require('./codec');
const { itemsOf } = require('./heads');
const { readKeyOrNull: readKey, configurableOf, askedCheckpointId, filterOf, limitOf } = require('./keys');
const { checkText } = require('./limits');
const { FORK_KEY } = require('./put');
const { Replayer } = require('./delta');
const { rebuildFrom } = require('./rebuild');
const { openPart, openWrite } = require('./sealing');
const { dumps, unpack, parse, setOwn, isObject } = require('./storage');
const { resolveWrite } = require('./writes');
const { DataCorrupted } = require('./errors');

/** The checkpoints a page of list() holds. */
const PAGE_SIZE = 100;

/**
 * @typedef {{
 *   thread_id: string, checkpoint_ns: string, checkpoint_id: string, parent_checkpoint_id: string | null,
 *   packed: string, metadata: string, chain_bytes: number | string, chain_len: number | string,
 *   snapshot_bytes: number | string, state_bytes: number | string, base_id: string, writes: string | null,
 * }} Row
 */

/**
 * The checkpoint `config` names, or its namespace's newest.
 * @param {import('./db').Database} db
 * @param {import('./put').Context} ctx
 * @param {import('@langchain/core/runnables').RunnableConfig} config
 * @returns {Promise<import('@langchain/langgraph-checkpoint').CheckpointTuple | undefined>}
 */
async function getTuple(db, ctx, config) {
  const conf = configurableOf('getTuple', config);
  const threadId = readKey('thread id', conf.thread_id);
  const ns = readKey('checkpoint namespace', conf.checkpoint_ns ?? '');
  const asked = askedCheckpointId(conf);
  if (threadId === null || ns === null || asked === null) return undefined;
  const cid = asked ?? null;
  return db.withClient(async (client) => {
    const cached = ctx.heads.get(threadId, ns);
    const known = cached ? cached.checkpointId : null;
    const rows = (await client.query(ctx.sql.GET_SQL, [threadId, ns, cid, known])).rows;
    if (!rows.length) return undefined;
    const last = rows[rows.length - 1];
    /** @type {Row} */
    const row = parse(last.row, 'a checkpoint row');
    if (cached !== undefined && row.checkpoint_id === known) {
      return migrateSends(client, ctx, toTuple(ctx, row, cached.state, { fork: Boolean(last.superseded), remember: false }));
    }
    const state = await rebuildFrom(client, ctx, threadId, ns, row.checkpoint_id, row.base_id, rows);
    // a run from a checkpoint that is not its namespace's newest, asked
    // for by id, branches from it (time travel): its config says so
    return migrateSends(client, ctx, toTuple(ctx, row, state, { fork: Boolean(last.superseded), remember: true }));
  });
}

/**
 * A checkpoint of LangGraph's format before v4 kept the sends of its
 * step as its parent's writes to __pregel_tasks; since v4 they are the
 * channel's value.  Such a checkpoint is handed out in v4's form, as
 * LangGraph's own savers hand it out.
 * @param {import('./db').Queryable} client
 * @param {import('./put').Context} ctx
 * @param {import('@langchain/langgraph-checkpoint').CheckpointTuple} tuple
 */
async function migrateSends(client, ctx, tuple) {
  const parent = tuple.parentConfig?.configurable?.checkpoint_id;
  if (!(Number(tuple.checkpoint.v) < 4) || !parent) return tuple;
  const { thread_id: threadId, checkpoint_ns: ns } = /** @type {Record<string, string>} */ (tuple.config.configurable);
  const rows = (await client.query(ctx.sql.SENDS_SQL, [threadId, ns, parent])).rows;
  if (!rows.length) return tuple;
  const where = /** @type {[string, string, string]} */ ([threadId, ns, parent]);
  const sends = rows.map((/** @type {any} */ r) =>
    decode(openWrite(ctx.sealer, where, r.task_id, r.idx, r.channel, parse(r.packed === null ? r.value : unpack(r.packed), 'a stored write'))),
  );
  const checkpoint = tuple.checkpoint;
  const versions = Object.values(checkpoint.channel_versions);
  checkpoint.channel_values = { ...checkpoint.channel_values, [TASKS]: sends };
  checkpoint.channel_versions = { ...checkpoint.channel_versions, [TASKS]: versions.length ? maxChannelVersion(...versions) : 1 };
  return tuple;
}

/**
 * A checkpoint's tuple from its row and its state (encoded).
 * @param {import('./put').Context} ctx
 * @param {Row} row
 * @param {Record<string, any>} state
 * @param {{ fork?: boolean, remember?: boolean, decoded?: Map<unknown, unknown> }} options
 * @returns {import('@langchain/langgraph-checkpoint').CheckpointTuple}
 */
function toTuple(ctx, row, state, { fork = false, remember = false, decoded } = {}) {
  const { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: cid, parent_checkpoint_id: parent } = row;
  const bookkeeping = parse(unpack(Buffer.from(row.packed, 'base64')), "a checkpoint's bookkeeping");
  if (!isObject(bookkeeping)) throw new DataCorrupted(`the bookkeeping of checkpoint ${cid} is not an object`);
  /** @type {Record<string, unknown>} */
  const values = {};
  /** @type {Map<string, import('./heads').Items>} */
  const objects = new Map();
  for (const [ch, enc] of Object.entries(state)) {
    const v = Array.isArray(enc) && decoded ? enc.map((x) => decodeShared(x, decoded)) : decode(enc);
    setOwn(values, ch, v);
    if (Array.isArray(v) && Array.isArray(enc)) objects.set(ch, itemsOf(v, enc));
  }
  if (remember) {
    ctx.heads.remember(threadId, ns, {
      checkpointId: cid,
      versions: isObject(bookkeeping.channel_versions) ? { ...bookkeeping.channel_versions } : {},
      state: { ...state },
      objects,
      chainBytes: Number(row.chain_bytes),
      chainLen: Number(row.chain_len),
      snapshotBytes: Number(row.snapshot_bytes),
      stateBytes: Number(row.state_bytes),
      sizes: new Map(),
      baseId: row.base_id,
    });
  }
  const writes = row.writes === null ? [] : parse(row.writes, "a checkpoint's pending writes");
  const where = /** @type {[string, string, string]} */ ([threadId, ns, cid]);
  const pendingWrites = (Array.isArray(writes) ? writes : []).map((w) => {
    const [taskId, channel, value, , idx, packed] = /** @type {any[]} */ (w);
    const stored = packed === null ? value : parse(unpack(Buffer.from(packed, 'base64')), 'a packed write');
    const opened = openWrite(ctx.sealer, where, taskId, idx, channel, stored);
    return /** @type {[string, string, unknown]} */ ([taskId, channel, decode(resolveWrite(state, opened))]);
  });
  /** @type {Record<string, unknown>} */
  const configurable = { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: cid };
  if (fork) configurable[FORK_KEY] = cid;
  return {
    config: { configurable },
    checkpoint: /** @type {any} */ ({ ...bookkeeping, id: cid, channel_values: values }),
    metadata: /** @type {any} */ (decode(parse(row.metadata, "a checkpoint's metadata"))),
    parentConfig: parent ? { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: parent } } : undefined,
    pendingWrites,
  };
}

/**
 * An encoded list item decoded once for all the tuples of a page that share it.
 * @param {unknown} enc
 * @param {Map<unknown, unknown>} decoded
 */
function decodeShared(enc, decoded) {
  if (typeof enc !== 'object' || enc === null) return decode(enc);
  if (!decoded.has(enc)) decoded.set(enc, decode(enc));
  return decoded.get(enc);
}

/**
 * list(): the checkpoints of a filter, newest first, a page at a time.
 * @param {import('./db').Database} db
 * @param {import('./put').Context} ctx
 * @param {import('@langchain/core/runnables').RunnableConfig | undefined} config
 * @param {import('@langchain/langgraph-checkpoint').CheckpointListOptions} [options]
 * @returns {AsyncGenerator<import('@langchain/langgraph-checkpoint').CheckpointTuple>}
 */
async function* list(db, ctx, config, options = {}) {
  const { filter: given, before, limit } = options ?? {};
  const filter = filterOf(given);
  let remaining = limitOf(limit);
  /** @type {string[]} */
  const wheres = [];
  /** @type {unknown[]} */
  const params = [];
  /** @param {unknown} v */
  const param = (v) => {
    params.push(v);
    return `$${params.length + 4}`;
  };
  const conf = config === undefined || config === null ? {} : configurableOf('list', config);
  if (conf.thread_id !== undefined && conf.thread_id !== null && conf.thread_id !== '') {
    const threadId = readKey('thread id', conf.thread_id);
    if (threadId === null) return;
    wheres.push(`c.thread_id = ${param(threadId)}`);
  }
  if (conf.checkpoint_ns !== undefined && conf.checkpoint_ns !== null) {
    const ns = readKey('checkpoint namespace', conf.checkpoint_ns);
    if (ns === null) return;
    wheres.push(`c.checkpoint_ns = ${param(ns)}`);
  }
  const asked = askedCheckpointId(conf);
  if (asked === null) return;
  if (asked !== undefined) wheres.push(`c.checkpoint_id = ${param(asked)}`);
  if (filter !== null) wheres.push(`c.metadata @> ${param(dumps(encode(filter)))}::jsonb`);
  const beforeId = before === undefined || before === null ? undefined : configurableOf("list()'s before", before).checkpoint_id;
  if (beforeId !== undefined && beforeId !== null) wheres.push(`c.checkpoint_id < ${param(checkText('checkpoint id', beforeId))}`);
  const sql = ctx.sql.listSql(wheres);
  /** @type {[string | null, string | null, string | null]} */
  let after = [null, null, null];
  /** @type {Map<unknown, unknown>} */
  const decoded = new Map();
  while (remaining > 0) {
    const n = Math.min(PAGE_SIZE, remaining);
    const page = await db.transaction(async (client) => {
      /** @type {Row[]} */
      const rows = (await client.query(sql, [...after, n, ...params])).rows;
      /** @type {Map<string, Record<string, any>>} */
      const states = new Map();
      /** @type {Map<string, Row[]>} */
      const groups = new Map();
      for (const r of rows) {
        const k = JSON.stringify([r.thread_id, r.checkpoint_ns]);
        groups.set(k, [...(groups.get(k) ?? []), r]);
      }
      for (const targets of groups.values()) {
        const found = await rangeStates(client, ctx, targets);
        for (const r of targets) states.set(JSON.stringify([r.thread_id, r.checkpoint_ns, r.checkpoint_id]), /** @type {any} */ (found.get(r.checkpoint_id)));
      }
      return { rows, states };
    }, 'ISOLATION LEVEL REPEATABLE READ, READ ONLY');
    decoded.clear();
    for (const r of page.rows) {
      const tuple = toTuple(ctx, r, /** @type {Record<string, any>} */ (page.states.get(JSON.stringify([r.thread_id, r.checkpoint_ns, r.checkpoint_id]))), { decoded });
      yield Number(tuple.checkpoint.v) < 4 ? await db.withClient((client) => migrateSends(client, ctx, tuple)) : tuple;
    }
    remaining -= page.rows.length;
    if (page.rows.length < n) return;
    const last = page.rows[page.rows.length - 1];
    after = [last.checkpoint_id, last.thread_id, last.checkpoint_ns];
  }
}

/**
 * The states of checkpoints `targets` of one thread's namespace: the rows
 * from the oldest snapshot they need to the newest of them, read once,
 * each row's delta parsed once; each target replayed from its snapshot
 * (a chain the rows do not hold is walked by parents).
 * @param {import('./db').Queryable} client
 * @param {import('./put').Context} ctx
 * @param {Row[]} targets
 * @returns {Promise<Map<string, Record<string, any>>>}
 */
async function rangeStates(client, ctx, targets) {
  const { thread_id: threadId, checkpoint_ns: ns } = targets[0];
  let first = targets[0].checkpoint_id;
  let last = first;
  for (const t of targets) {
    for (const id of [t.checkpoint_id, t.base_id]) if (id < first) first = id;
    if (t.checkpoint_id > last) last = t.checkpoint_id;
  }
  /** @type {{ id: string, parent: string | null, snapshot: string | null, delta: string | null }[]} */
  const rows = (await client.query(ctx.sql.RANGE_SQL, [threadId, ns, first, last])).rows;
  const byId = new Map(rows.map((r) => [r.id, r]));
  /** @type {Map<string, unknown>} */
  const deltas = new Map();
  /** @type {Map<string, Record<string, any>>} */
  const snapshots = new Map();
  /** @type {Map<string, Record<string, any>>} */
  const out = new Map();
  for (const t of targets) {
    /** @type {string[]} */
    const path = [];
    /** @type {string | null} */
    let at = t.checkpoint_id;
    let found = false;
    while (at !== null && path.length <= rows.length) {
      const r = byId.get(at);
      if (r === undefined) break;
      if (at === t.base_id) {
        found = r.snapshot !== null;
        break;
      }
      if (r.delta === null) break;
      path.push(at);
      at = r.parent;
    }
    if (!found) {
      out.set(t.checkpoint_id, await rebuildFrom(client, ctx, threadId, ns, t.checkpoint_id, t.base_id, []));
      continue;
    }
    let snapshot = snapshots.get(t.base_id);
    if (snapshot === undefined) {
      const text = /** @type {string} */ (/** @type {any} */ (byId.get(t.base_id)).snapshot);
      snapshot = openPart(ctx.sealer, [threadId, ns, t.base_id], 'snapshot', parse(text, 'a stored snapshot'));
      if (!isObject(snapshot)) throw new DataCorrupted(`the snapshot of checkpoint ${t.base_id} is not an object`);
      snapshots.set(t.base_id, snapshot);
    }
    const replayer = new Replayer({});
    for (const [ch, v] of Object.entries(/** @type {Record<string, any>} */ (snapshot))) setOwn(replayer.state, ch, Array.isArray(v) ? v.slice() : v);
    for (const id of path.reverse()) {
      if (!deltas.has(id)) {
        const text = /** @type {string} */ (/** @type {any} */ (byId.get(id)).delta);
        deltas.set(id, openPart(ctx.sealer, [threadId, ns, id], 'delta', parse(text, 'a stored delta')));
      }
      replayer.apply(deltas.get(id));
    }
    out.set(t.checkpoint_id, replayer.state);
  }
  return out;
}

module.exports = { PAGE_SIZE, getTuple, list, toTuple };
