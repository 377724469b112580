'use strict';
// HxSaver: a LangGraph.js checkpointer (BaseCheckpointSaver) over the
// tables, functions and log streams of the Python package's HxSaver, so a
// thread written in one language reads in the other.  Each operation
// lives in a module of its own: put.js, writes.js, read.js,
// retention.js, ownership.js, runs.js; server.js checks the schema.

const pg = require('pg');
const { BaseCheckpointSaver } = require('@langchain/langgraph-checkpoint');
const { Database } = require('./db');
const { HeadCache } = require('./heads');
const { Statements } = require('./sql');
const { askServer } = require('./server');
const { targetOf, checkVersions, fastPut, slowPut } = require('./put');
const { putWrites } = require('./writes');
const { getTuple, list } = require('./read');
const { deleteThread } = require('./retention');
const ownership = require('./ownership');
const runs = require('./runs');
const { checkKey, checkText } = require('./limits');
const { readKeyOrNull } = require('./keys');
const { InvalidParameterValue, NonDeterministicRetry } = require('./errors');

/**
 * @typedef {{
 *   schema?: string,
 *   serde?: import('./crypto').EncryptedSerializer,
 *   snapshotMinBytes?: number,
 *   rebuildFactor?: number,
 *   maxChain?: number,
 *   cacheThreads?: number,
 * }} HxSaverOptions
 */

/**
 * @param {import('@langchain/core/runnables').RunnableConfig} config
 * @returns {string | null}
 */
function checkpointKey(config) {
  const conf = /** @type {Record<string, unknown>} */ (config?.configurable ?? {});
  const parts = [conf.thread_id, conf.checkpoint_ns ?? '', conf.checkpoint_id];
  // (a key that is no string names no checkpoint: the write refuses it)
  if (!conf.checkpoint_id || !parts.every((p) => typeof p === 'string' || typeof p === 'number')) return null;
  return JSON.stringify(parts.map(String));
}

/**
 * A numeric option: a number, at least `min` (an integer when `integer`).
 * @param {string} name
 * @param {unknown} value
 * @param {number} min
 * @param {boolean} integer
 * @param {string} what
 */
function atLeast(name, value, min, integer, what) {
  if (typeof value !== 'number' || !(value >= min) || (integer && !Number.isInteger(value) && value !== Infinity)) {
    throw new InvalidParameterValue(`HxSaver's ${name} is ${integer ? 'an integer' : 'a number'} of at least ${min} (${what})`);
  }
}

class HxSaver extends BaseCheckpointSaver {
  /**
   * @param {import('pg').Pool | import('pg').Client} conn a pg Pool, or a connected Client (operations take turns on it)
   * @param {HxSaverOptions} [options]
   */
  constructor(conn, options = {}) {
    super();
    const {
      schema = 'langgraph',
      serde,
      snapshotMinBytes = 65536,
      rebuildFactor = 2,
      maxChain = 10000,
      cacheThreads = 256,
    } = options ?? {};
    if (serde !== undefined && (typeof serde?.seal !== 'function' || typeof serde?.unseal !== 'function')) {
      throw new InvalidParameterValue('HxSaver stores values as JSON: its serde may only be an EncryptedSerializer');
    }
    if (typeof schema !== 'string' || schema === '' || schema.includes('\u0000') || !schema.isWellFormed()) {
      throw new InvalidParameterValue('HxSaver\'s schema is the name of the schema the Python package set up, a non-empty string without a NUL');
    }
    atLeast('rebuildFactor', rebuildFactor, 1, false, 'a rebuild reads at least the state');
    atLeast('snapshotMinBytes', snapshotMinBytes, 0, false, 'bytes');
    atLeast('maxChain', maxChain, 1, true, 'deltas before a snapshot');
    atLeast('cacheThreads', cacheThreads, 0, true, 'threads remembered');
    /** @private */
    this.db = new Database(conn);
    /** @private */
    this.ownsPool = false;
    /** @type {import('./put').Context} */
    this.ctx = {
      sql: new Statements(schema),
      heads: new HeadCache(cacheThreads),
      sealer: serde ?? null,
      snapshotMinBytes,
      rebuildFactor,
      maxChain,
    };
    /** @private @type {Promise<import('./sql').Server> | null} */
    this.serverInfo = null;
    /**
     * putWrites calls under way, by checkpoint, and the last failure of
     * each: a put waits for those on its parent
     * @private @type {Map<string, Set<Promise<void>>>}
     */
    this.writing = new Map();
    /** @private @type {Map<string, unknown>} */
    this.writeFailed = new Map();
  }

  /**
   * A saver on a pool of its own, closed by end().
   * @param {string} connectionString
   * @param {HxSaverOptions} [options]
   */
  static fromConnString(connectionString, options) {
    const saver = new HxSaver(new pg.Pool({ connectionString }), options);
    saver.ownsPool = true;
    return saver;
  }

  /** The saver's schema. */
  get schema() {
    return this.ctx.sql.schema;
  }

  /**
   * Checks that the schema was set up (by the Python package's setup(),
   * which makes the tables and functions this saver uses) and asks the
   * server what its writes depend on; throws NotSetUp (42P01) otherwise.
   * It creates nothing.
   */
  async setup() {
    this.serverInfo = null;
    await this.server();
  }

  /** @private */
  server() {
    if (this.serverInfo === null) {
      const asked = this.db.withClient((client) => askServer(client, this.ctx.sql));
      this.serverInfo = asked;
      asked.catch(() => {
        if (this.serverInfo === asked) this.serverInfo = null;
      });
    }
    return this.serverInfo;
  }

  /**
   * @param {import('@langchain/core/runnables').RunnableConfig} config
   * @returns {Promise<import('@langchain/langgraph-checkpoint').CheckpointTuple | undefined>}
   */
  async getTuple(config) {
    return getTuple(this.db, this.ctx, config);
  }

  /**
   * @param {import('@langchain/core/runnables').RunnableConfig} config
   * @param {import('@langchain/langgraph-checkpoint').CheckpointListOptions} [options]
   * @returns {AsyncGenerator<import('@langchain/langgraph-checkpoint').CheckpointTuple>}
   */
  async *list(config, options) {
    yield* list(this.db, this.ctx, config, options);
  }

  /**
   * @param {import('@langchain/core/runnables').RunnableConfig} config
   * @param {import('@langchain/langgraph-checkpoint').Checkpoint} checkpoint
   * @param {import('@langchain/langgraph-checkpoint').CheckpointMetadata} metadata
   * @param {import('@langchain/langgraph-checkpoint').ChannelVersions} [newVersions]
   * @returns {Promise<import('@langchain/core/runnables').RunnableConfig>}
   */
  async put(config, checkpoint, metadata, newVersions = {}) {
    newVersions ??= {};
    const t = targetOf(config, checkpoint, metadata);
    checkVersions('newVersions', newVersions);
    await this.writesDone(config);
    const server = await this.server();
    if (!(await fastPut(this.db, this.ctx, server, t, newVersions))) {
      await slowPut(this.db, this.ctx, server, t, newVersions);
    }
    return { configurable: { thread_id: t.threadId, checkpoint_ns: t.ns, checkpoint_id: t.cid } };
  }

  /**
   * Wait until the putWrites calls on the checkpoint `config` names (the
   * parent of the one being put) have ended, and fail if the last of them
   * failed: a checkpoint never becomes durable before the writes that
   * produced it.
   * @private
   * @param {import('@langchain/core/runnables').RunnableConfig} config
   */
  async writesDone(config) {
    const key = checkpointKey(config);
    if (key === null) return;
    while (this.writing.has(key)) await Promise.allSettled([...(/** @type {Set<Promise<void>>} */ (this.writing.get(key)))]);
    if (this.writeFailed.has(key)) {
      throw new Error(
        `the writes of a task at checkpoint ${JSON.parse(key)[2]} were not stored, so the next checkpoint is not either`,
        { cause: this.writeFailed.get(key) },
      );
    }
  }

  /**
   * @param {import('@langchain/core/runnables').RunnableConfig} config
   * @param {import('@langchain/langgraph-checkpoint').PendingWrite[]} writes
   * @param {string} taskId
   * @param {string} [taskPath]
   */
  async putWrites(config, writes, taskId, taskPath = '') {
    const key = checkpointKey(config);
    const run = putWrites(this.db, this.ctx, () => this.server(), config, writes, taskId, taskPath);
    if (key === null) return run;
    const pending = this.writing.get(key) ?? new Set();
    this.writing.set(key, pending);
    pending.add(run);
    try {
      await run;
      this.writeFailed.delete(key);
    } catch (err) {
      if (!(err instanceof NonDeterministicRetry)) this.writeFailed.set(key, err); // what was stored first stays stored
      throw err;
    } finally {
      pending.delete(run);
      if (!pending.size) this.writing.delete(key);
    }
  }

  /** @param {string} threadId */
  async deleteThread(threadId) {
    await deleteThread(this.db, this.ctx, await this.server(), threadId);
  }

  /**
   * Take the thread: from now on a write to it must carry the token
   * returned (`configurable.hx_owner`); the writer that had it is
   * refused from now on (OwnerSuperseded).  Waits for the writes under way.
   * @param {string} threadId
   * @returns {Promise<string>}
   */
  async acquire(threadId) {
    const id = checkKey('thread id', threadId);
    return this.db.transaction((client) => ownership.acquire(client, this.ctx.sql, id));
  }

  /**
   * Give the thread up; whether `token` owned it.
   * @param {string} threadId
   * @param {string} token
   * @returns {Promise<boolean>}
   */
  async release(threadId, token) {
    const id = readKeyOrNull('thread id', threadId);
    const owner = checkText('owner token', token);
    if (id === null) return false; // longer than any thread id stored
    return this.db.transaction((client) => ownership.release(client, this.ctx.sql, id, owner));
  }

  /**
   * The epoch of the thread's owner (null: it has none).
   * @param {string} threadId
   * @returns {Promise<number | null>}
   */
  async ownerEpoch(threadId) {
    const id = readKeyOrNull('thread id', threadId);
    if (id === null) return null; // longer than any thread id stored
    const rows = await this.db.query(this.ctx.sql.EPOCH_SQL, [id]);
    return rows.length ? Number(rows[0].epoch) : null;
  }

  /**
   * Record a run on its thread, with its input, before it is dispatched
   * (durable before anything else of it); idempotent.
   * @param {string} threadId
   * @param {string} runId
   * @param {unknown} input JSON
   */
  async admit(threadId, runId, input) {
    return runs.admit(this.db, this.ctx.sql, threadId, runId, input);
  }

  /**
   * Record how an admitted run ended (success, interrupt, error,
   * cancelled); the first end only.
   * @param {string} threadId
   * @param {string} runId
   * @param {'success' | 'interrupt' | 'error' | 'cancelled'} outcome
   * @param {string | null} [detail]
   */
  async finish(threadId, runId, outcome, detail = null) {
    return runs.finish(this.db, this.ctx.sql, threadId, runId, outcome, detail);
  }

  /**
   * The admitted runs (of a thread, or all) that have not ended, or all.
   * @param {string | null} [threadId]
   * @param {{ unfinished?: boolean }} [options]
   */
  async admissions(threadId = null, { unfinished = true } = {}) {
    return runs.admissions(this.db, this.ctx.sql, threadId, unfinished);
  }

  /**
   * Integers, as the base class's; a thread begun with string versions
   * (PostgresSaver's `<counter>.<random>`, which the Python saver keeps)
   * keeps their form: LangGraph compares a checkpoint's versions together.
   * @param {number | undefined} current
   * @returns {number}
   */
  getNextVersion(current) {
    if (typeof current === 'string') {
      const head = /** @type {string} */ (current).split('.')[0];
      if (!/^[0-9]{1,256}$/.test(head)) {
        throw new InvalidParameterValue(`a channel version is an integer or <counter>.<random>, not ${JSON.stringify(String(current).slice(0, 40))}`);
      }
      const next = String(BigInt(head) + 1n).padStart(head.length, '0');
      return /** @type {any} */ (`${next}.${String(Math.random()).slice(2).padEnd(16, '0').slice(0, 16)}`);
    }
    if (current === undefined || current === null) return 1;
    if (typeof current !== 'number' || !Number.isFinite(current)) {
      throw new InvalidParameterValue(`a channel version is an integer or <counter>.<random>, not ${typeof current === 'number' ? current : typeof current}`);
    }
    return current + 1;
  }

  /** Close the pool fromConnString opened (a pool or client given to the constructor stays open). */
  async end() {
    if (this.ownsPool) await /** @type {import('pg').Pool} */ (this.db.conn).end();
  }
}

module.exports = { HxSaver };
