'use strict';
// put: a checkpoint stored as what changed since its parent, now and then
// with a snapshot of the whole state, and published to the thread's log
// stream in the same transaction, by the rules of the Python package's
// put.py (its manual, "A writer keeps these rules"):
//
//   - turns: a put holds the thread's ownership lock shared, then its
//     namespace's advisory lock, and reads what committed before;
//   - ownership: when `owners` has the thread, a write carries its token;
//   - one writer per parent: a run's checkpoint (source input or loop)
//     is refused (ThreadConflict) when another checkpoint already has its
//     parent, unless the run asked to branch from it (hx_fork_of);
//   - snapshots: a root has one; a checkpoint has one when rebuilding it
//     would read more than rebuildFactor times its state (and at least
//     snapshotMinBytes), or after maxChain deltas;
//   - the stream: a put of the root namespace publishes a STATE_DELTA
//     when it extends its namespace's newest checkpoint, else a
//     STATE_SNAPSHOT.
//
// A put whose parent the saver remembers is one statement
// (put_checkpoint(), which the Python package's setup() makes); any
// other reads what it needs first, in a transaction.

const { ThreadConflict, InvalidParameterValue } = require('./errors');
const D = require('./delta');
const { encodeChannel } = require('./heads');
const { encode } = require('./codec');
const { checkId, checkKey, checkText } = require('./limits');
const { configurableOf, given, kindOf } = require('./keys');
const { OWNER_KEY, ownerOf, refused, checkOwner } = require('./ownership');
const { rebuildFrom } = require('./rebuild');
const { sealPart } = require('./sealing');
const { dumps, pack, unpack, parse, setOwn, hasOwn, isObject } = require('./storage');
const { checkpointEvent, internal, interruptItems, publicState } = require('./stream');

/** Sources of checkpoints a run writes as it advances a thread; the others ("update", "fork") are forks. */
const RUN_SOURCES = new Set(['input', 'loop']);
/** The config key naming the checkpoint a run branches from (set by getTuple on a superseded checkpoint). */
const FORK_KEY = 'hx_fork_of';

/**
 * @typedef {import('./heads').Head} Head
 * @typedef {{
 *   sql: import('./sql').Statements,
 *   heads: import('./heads').HeadCache,
 *   sealer: import('./sealing').Sealer | null,
 *   snapshotMinBytes: number,
 *   rebuildFactor: number,
 *   maxChain: number,
 * }} Context
 * @typedef {{
 *   threadId: string, ns: string, cid: string, parent: string | null,
 *   metadata: Record<string, unknown>, values: Record<string, unknown>,
 *   versions: Record<string, number | string>, forkOf: string | null, owner: string | null,
 *   bookkeeping: Record<string, unknown>,
 * }} Target
 */

/**
 * The checkpoint's keys, checked before anything is written.
 * @param {import('@langchain/core/runnables').RunnableConfig} config
 * @param {import('@langchain/langgraph-checkpoint').Checkpoint} checkpoint
 * @param {import('@langchain/langgraph-checkpoint').CheckpointMetadata} metadata
 * @returns {Target}
 */
function targetOf(config, checkpoint, metadata) {
  const conf = configurableOf('put', config);
  if (conf.thread_id === undefined || conf.thread_id === null) {
    throw new InvalidParameterValue('put needs config.configurable.thread_id');
  }
  objectOrNone('checkpoint', checkpoint, false);
  objectOrNone('metadata', metadata, true);
  objectOrNone("checkpoint's channel_values", checkpoint.channel_values, true);
  checkVersions("checkpoint's channel_versions", checkpoint.channel_versions);
  /** @type {Record<string, unknown>} */
  const md = { ...metadata };
  // a config's keys copied into the metadata: not the saver's own (an
  // ownership token is a writer's, not the thread's)
  delete md[OWNER_KEY];
  delete md[FORK_KEY];
  /** @type {Record<string, unknown>} */
  const bookkeeping = { ...checkpoint };
  delete bookkeeping.channel_values;
  delete bookkeeping.id;
  const runId = md.run_id;
  if (typeof runId === 'string') checkId('run id', runId);
  return {
    threadId: checkKey('thread id', conf.thread_id),
    ns: checkKey('checkpoint namespace', conf.checkpoint_ns ?? ''),
    cid: checkId('checkpoint id', checkpoint.id),
    parent: given(conf.checkpoint_id) ? checkId('checkpoint id', conf.checkpoint_id) : null,
    metadata: md,
    values: checkpoint.channel_values ?? {},
    versions: { ...(checkpoint.channel_versions ?? {}) },
    forkOf: given(conf[FORK_KEY]) ? checkId(`checkpoint id (${FORK_KEY})`, conf[FORK_KEY]) : null,
    owner: ownerOf(config),
    bookkeeping,
  };
}

/**
 * Channels' versions: an object of numbers or strings (LangGraph's
 * integers, or PostgresSaver's `<counter>.<random>`), or none.
 * @param {string} what
 * @param {unknown} versions
 */
function checkVersions(what, versions) {
  objectOrNone(what, versions, true);
  for (const [ch, v] of Object.entries(/** @type {object} */ (versions ?? {}))) {
    if (typeof v === 'number' ? !Number.isFinite(v) : typeof v !== 'string') {
      throw new InvalidParameterValue(`put's ${what} are numbers or strings: the version of channel ${JSON.stringify(ch.slice(0, 40))} is ${typeof v === 'number' ? v : kindOf(v)}`);
    }
    checkText('channel version', v);
  }
}

/**
 * `value` is an object (not an array), or (when `optional`) none.
 * @param {string} what
 * @param {unknown} value
 * @param {boolean} optional
 */
function objectOrNone(what, value, optional) {
  if (optional && (value === undefined || value === null)) return;
  if (!isObject(value)) throw new InvalidParameterValue(`put's ${what} is an object, not ${kindOf(value)}`);
}

/**
 * The new state: the parent's with the channels whose versions changed;
 * the ops from the parent's, the patch of what followers see, and sizes.
 * @param {Target} t
 * @param {Record<string, number | string>} newVersions
 * @param {Head | null} base
 */
function newState(t, newVersions, base) {
  /** @type {Record<string, any>} */
  const state = {};
  /** @type {Map<string, import('./heads').Items>} */
  const objects = new Map();
  /** @type {D.Op[]} */
  const ops = [];
  /** @type {D.Op[]} */
  const later = [];
  /** @type {D.Op[]} */
  const patch = [];
  /** @type {Map<string, number>} */
  const sizes = new Map();
  const oldState = base ? base.state : {};
  const oldVersions = base ? base.versions : {};
  let stateBytes = base ? base.stateBytes : 2;
  /** @type {Map<string, [string, unknown]> | null} */
  let sources = null;
  for (const [ch, value] of Object.entries(t.values)) {
    const had = hasOwn(oldState, ch);
    const old = had ? oldState[ch] : undefined;
    if (base && had && !hasOwn(newVersions, ch) && hasOwn(t.versions, ch) && oldVersions[ch] === t.versions[ch]) {
      setOwn(state, ch, old);
      const items = base.objects.get(ch);
      if (items) objects.set(ch, items);
      const size = base.sizes.get(ch);
      if (size !== undefined) sizes.set(ch, size);
      continue;
    }
    if (!t.parent && !hasOwn(newVersions, ch)) {
      // a root stores the channels its new versions name (a value whose
      // version is not new was stored with that version before: LangGraph's
      // contract, which its validation suite checks)
      continue;
    }
    const enc = encodeChannel(value, old, base ? base.objects.get(ch) : undefined);
    setOwn(state, ch, enc.value);
    if (enc.items) objects.set(ch, enc.items);
    const pub = !internal(ch);
    if (sources === null && pub) sources = D.sourcesOf(oldState, ch);
    const oldSize = had ? (base?.sizes.get(ch) ?? D.size(old)) : 0;
    /** @type {D.Op[]} */
    let chOps;
    let newSize;
    if (had && enc.tail !== null && Array.isArray(old)) {
      chOps = D.appendedOps(ch, enc.tail, { keyed: Boolean(enc.items?.ids), sources: pub ? sources : null });
      newSize = oldSize + enc.tail.reduce((/** @type {number} */ n, x) => n + D.size(x) + 1, 0) - (enc.tail.length && !old.length ? 1 : 0);
      if (pub) for (const it of enc.tail) patch.push({ op: 'add', path: D.pointer(ch) + '/-', value: it });
    } else {
      chOps = D.valueOps(ch, old, enc.value, { had, sources: pub ? sources : null });
      newSize = chOps.length || !had ? D.size(enc.value) : oldSize;
      if (pub && chOps.length) patch.push(...D.toPatch(chOps, oldState));
    }
    (ch.startsWith('__') ? later : ops).push(...chOps);
    sizes.set(ch, newSize);
    stateBytes += had ? newSize - oldSize : newSize + ch.length + 4;
  }
  ops.push(...later);
  for (const ch of Object.keys(oldState)) {
    if (hasOwn(t.values, ch)) continue;
    ops.push({ op: 'delete', path: D.pointer(ch) });
    if (!internal(ch)) patch.push({ op: 'remove', path: D.pointer(ch) });
    stateBytes -= (base?.sizes.get(ch) ?? D.size(oldState[ch])) + ch.length + 4;
  }
  return { state, objects, ops, patch, sizes, stateBytes };
}

/**
 * What the checkpoint's row stores of its state: the delta, and a
 * snapshot by the rule.
 * @param {Context} ctx
 * @param {Target} t
 * @param {Head | null} base
 * @param {string} baseId
 * @param {ReturnType<typeof newState>} change
 */
function chainRow(ctx, t, base, baseId, change) {
  const delta = dumps(change.ops);
  /** @type {{ delta: string | null, snapshot: string | null, chainBytes: number, chainLen: number, snapshotBytes: number, stateBytes: number, baseId: string }} */
  let row;
  if (base === null) {
    const snapshot = dumps(change.state);
    row = { delta: null, snapshot, chainBytes: 0, chainLen: 0, snapshotBytes: snapshot.length, stateBytes: snapshot.length, baseId: t.cid };
  } else {
    const chainBytes = base.chainBytes + delta.length;
    const chainLen = base.chainLen + 1;
    const rebuild = base.snapshotBytes + chainBytes;
    if (rebuild > Math.max(ctx.rebuildFactor * change.stateBytes, ctx.snapshotMinBytes) || chainLen >= ctx.maxChain) {
      const snapshot = dumps(change.state);
      row = { delta, snapshot, chainBytes: 0, chainLen: 0, snapshotBytes: snapshot.length, stateBytes: snapshot.length, baseId: t.cid };
    } else {
      row = { delta, snapshot: null, chainBytes, chainLen, snapshotBytes: base.snapshotBytes, stateBytes: change.stateBytes, baseId };
    }
  }
  if (ctx.sealer === null) return row;
  // an encrypting saver's row: its delta and snapshot sealed where they
  // belong (its sizes stay the plaintext's)
  const where = /** @type {[string, string, string]} */ ([t.threadId, t.ns, t.cid]);
  /** @param {Iterable<string>} chs */
  const versionsOf = (chs) => Object.fromEntries([...chs].map((ch) => [ch, hasOwn(t.versions, ch) ? String(t.versions[ch]) : '']));
  return {
    ...row,
    delta: row.delta === null ? null : sealPart(ctx.sealer, where, 'delta', change.ops, versionsOf(new Set(change.ops.map((op) => D.channelOf(op.path))))),
    snapshot: row.snapshot === null ? null : sealPart(ctx.sealer, where, 'snapshot', change.state, versionsOf(Object.keys(change.state))),
  };
}

/**
 * @param {Target} t
 * @param {string} continued
 */
function conflict(t, continued) {
  return new ThreadConflict(
    `thread ${JSON.stringify(t.threadId)} moved on from checkpoint ${t.parent}: checkpoint ${continued}, ` +
      'which continues it, was written after this run read it (another run on the thread)',
    {
      hint:
        "Run again from the thread's head.  To branch from an older checkpoint on purpose, " +
        'run with its checkpoint_id in the config.',
    },
  );
}

/**
 * @param {Context} ctx
 * @param {Target} t
 * @param {ReturnType<typeof newState>} change
 * @param {ReturnType<typeof chainRow>} row
 */
function remember(ctx, t, change, row) {
  ctx.heads.remember(t.threadId, t.ns, {
    checkpointId: t.cid,
    versions: t.versions,
    state: change.state,
    objects: change.objects,
    chainBytes: row.chainBytes,
    chainLen: row.chainLen,
    snapshotBytes: row.snapshotBytes,
    stateBytes: row.stateBytes,
    sizes: change.sizes,
    baseId: row.baseId,
  });
}

/**
 * @param {Target} t
 * @param {ReturnType<typeof chainRow>} row
 */
function rowValues(t, row) {
  return [
    t.threadId,
    t.ns,
    t.cid,
    t.parent,
    pack(dumps(t.bookkeeping), { always: true }),
    dumps(encode(t.metadata)),
    row.delta,
    row.snapshot,
    row.chainBytes,
    row.chainLen,
    row.snapshotBytes,
    row.stateBytes,
    row.baseId,
  ];
}

/**
 * A put in one statement (put_checkpoint()) when the saver remembers its
 * parent (or it is a root); null, having written nothing, when the slow
 * put must do it.
 * @param {import('./db').Database} db
 * @param {Context} ctx
 * @param {import('./sql').Server} server
 * @param {Target} t
 * @param {Record<string, number | string>} newVersions
 */
async function fastPut(db, ctx, server, t, newVersions) {
  const base = t.parent ? (ctx.heads.get(t.threadId, t.ns) ?? null) : null;
  if (t.parent && (base === null || base.checkpointId !== t.parent || !base.baseId)) return null;
  const change = newState(t, newVersions, base);
  const row = chainRow(ctx, t, base, base ? base.baseId : t.cid, change);
  // an encrypting saver publishes nothing: its events would be plaintext
  const publish = server.publishing && t.ns === '' && ctx.sealer === null;
  const patch = publish && base ? dumps(change.patch) : null;
  const rootState = publish && !base ? dumps(publicState(change.state)) : null;
  const [result] = await db.query(ctx.sql.PUT_SQL, [
    ...rowValues(t, row),
    RUN_SOURCES.has(/** @type {any} */ (t.metadata.source)),
    t.forkOf,
    publish,
    patch,
    rootState,
    t.owner,
  ]);
  const status = String(result.status);
  if (status === 'slow') return null;
  if (status.startsWith('owner:')) throw refused(t.threadId, t.owner, status.slice(6) || null);
  if (status.startsWith('conflict:')) throw conflict(t, status.slice(9));
  remember(ctx, t, change, row);
  return true;
}

/**
 * The put that reads what it needs first, in a transaction: its
 * ownership, its turn, its parent (rebuilt when the saver does not
 * remember it), the checks, the event, the row.
 * @param {import('./db').Database} db
 * @param {Context} ctx
 * @param {import('./sql').Server} server
 * @param {Target} t
 * @param {Record<string, number | string>} newVersions
 */
async function slowPut(db, ctx, server, t, newVersions) {
  await db.transaction(async (client) => {
    await checkOwner(client, ctx.sql, t.threadId, t.owner);
    await client.query(ctx.sql.LOCK_SQL, [ctx.sql.lockKey, t.threadId, t.ns]);
    /** @type {Head | null} */
    let base = null;
    let baseId = t.cid;
    let newest = false;
    let interrupted = false;
    if (t.parent) {
      const [p] = (await client.query(ctx.sql.PARENT_SQL, [t.threadId, t.ns, t.parent, t.cid])).rows;
      if (p !== undefined) {
        const [own] = (await client.query(ctx.sql.EXISTS_SQL, [t.threadId, t.ns, t.cid])).rows;
        if (p.continued !== null && RUN_SOURCES.has(/** @type {any} */ (t.metadata.source)) && !own.exists && t.forkOf !== t.parent) {
          throw conflict(t, p.continued);
        }
        const sizes = {
          chainBytes: Number(p.chain_bytes),
          chainLen: Number(p.chain_len),
          snapshotBytes: Number(p.snapshot_bytes),
          stateBytes: Number(p.state_bytes),
          baseId: p.base_id,
        };
        const cached = ctx.heads.get(t.threadId, t.ns);
        if (cached !== undefined && cached.checkpointId === t.parent) {
          base = { ...cached, ...sizes };
        } else {
          const chain = (await client.query(ctx.sql.CHAIN_SQL, [t.threadId, t.ns, p.base_id, t.parent])).rows;
          const state = await rebuildFrom(client, ctx, t.threadId, t.ns, t.parent, p.base_id, chain);
          const packed = parse(unpack(Buffer.from(p.packed, 'base64')), 'a checkpoint\'s bookkeeping');
          base = {
            checkpointId: t.parent,
            versions: isObject(packed) && isObject(packed.channel_versions) ? packed.channel_versions : {},
            state,
            objects: new Map(),
            sizes: new Map(),
            ...sizes,
          };
        }
        baseId = p.base_id;
        newest = p.newer === null;
        interrupted = Boolean(p.interrupted);
      }
    }
    const change = newState(t, newVersions, base);
    const row = chainRow(ctx, t, base, baseId, change);
    /** @type {string | null} */
    let seq = null;
    if (server.publishing && t.ns === '' && ctx.sealer === null) {
      const [own] = (await client.query(ctx.sql.EXISTS_SQL, [t.threadId, t.ns, t.cid])).rows;
      if (!own.exists) {
        const stored = own.own === null ? [] : parse(own.own, 'stored interrupts');
        const event = checkpointEvent(base ? change.patch : null, change.state, {
          extendsHead: newest,
          hadInterrupts: interrupted,
          interrupts: (Array.isArray(stored) ? stored : []).flatMap(interruptItems),
        });
        if (event !== null) [{ seq }] = (await client.query(ctx.sql.PUBLISH_SQL, [t.threadId, dumps(event)])).rows;
      }
    }
    await client.query(ctx.sql.insertSql(server), [...rowValues(t, row), seq]);
    remember(ctx, t, change, row);
  });
}

module.exports = { RUN_SOURCES, FORK_KEY, targetOf, checkVersions, newState, fastPut, slowPut };
