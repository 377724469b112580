'use strict';
// RunWriter: a process's agent runs, written to their streams as they make
// their events, in batches that share commits.
//
//   const writer = new RunWriter({ pg: process.env.DATABASE_URL });
//   const run = writer.open({ table: 'sessions', key: 's-42' });
//   const m = run.text({ messageId: 'a1' });
//   for await (const token of model) m.append(token);
//   await m.end();      // committed: the END and the message in the state, together
//   await run.close();
//   await writer.close();
//
// A run (agentrun.js) keeps its events in a batch (batch.js) until the
// batch is due: flushMs after its first event, at once for an event that
// ends something or maxBatchBytes of events.  The writer commits every run
// due at that moment in one transaction on one of its connections (at most
// `connections`), each run's events with one hx_stream_emit (a row's
// stream: the row is locked as an UPDATE locks it) or hx_stream_send (a
// log stream), in one statement for all rows and one for all log streams;
// then, for rows, the messages that ended merged into the row's state
// (hx_merge: an upsert by id at the messages path), so that the END and the
// message in the state commit together; then the run's own statements
// (options.inTransaction).  Rows are locked in the order of their table and
// key, so two connections of one writer never wait on each other in a
// cycle.  A run has at most one batch in flight: its batches commit in the
// order it made them.
//
// Failures:
//   - a statement error (a row that is gone, P0002; a privilege, 42501; an
//     event the database refuses, 22023): the transaction is rolled back,
//     and when it held several runs each is tried again alone, so that
//     only the run at fault fails: its error is the rejection of its
//     promises and its 'error' event, and nothing of its batch is written;
//     a transient error (class 40, 53, 55P03, 57014) is tried again later;
//   - a connection lost before COMMIT was sent: nothing was committed; the
//     batches go again, after a backoff, on a new connection;
//   - a connection lost while COMMIT was in flight: the commit is in doubt.
//     Each run's batch is looked for in its stream (the run's start marker
//     for its first batch, else its events right after its last seq): found,
//     it is not written again; not found, it goes again.  So a batch is
//     written once, whatever the connection does.
//
// Memory: a run holds at most maxPendingBytes of events waiting (its
// append() says false past maxBatchBytes, for a producer that can wait:
// run.drain()); past maxPendingBytes the run fails (HX_RUN_BACKLOG).  At
// most maxRuns runs are open at once.
const { EventEmitter } = require('node:events');
const pg = require('pg');
const { isDeepStrictEqual } = require('node:util');
const { Backoff } = require('./backoff');
const { isConnectionError, isTransient } = require('./errors');
const { quoteIdent } = require('./sql');
const { emitError } = require('./emit');
const { RUN_MARKER } = require('./constructs');
const { Run } = require('./agentrun');
const sql = require('./writersql');

const DEFAULTS = {
  flushMs: 50,
  maxBatchBytes: 64 * 1024,
  maxPendingBytes: 4 * 1024 * 1024,
  maxTransactionBytes: 8 * 1024 * 1024,
  maxMessageBytes: 16 * 1024 * 1024,
  maxRuns: 10000,
  connections: 2,
  reconnect: { min: 100, max: 5000 },
  applicationName: 'hxstate-writer',
};

// the longest delay a Node timer holds (a longer one fires after 1 ms)
const MAX_TIMER_MS = 2 ** 31 - 1;

function positive(o, name, min = 1) {
  if (!Number.isSafeInteger(o[name]) || o[name] < min) throw new TypeError(`RunWriter: options.${name} is an integer >= ${min}`);
}

class RunWriter extends EventEmitter {
  /**
   * @param {object} options {pg, flushMs, maxBatchBytes, maxPendingBytes,
   *   maxTransactionBytes, maxMessageBytes, maxRuns, connections, reconnect,
   *   applicationName}
   */
  constructor(options = {}) {
    super();
    const o = { ...DEFAULTS, ...options };
    positive(o, 'flushMs', 0);
    if (o.flushMs > MAX_TIMER_MS) throw new TypeError(`RunWriter: options.flushMs is at most ${MAX_TIMER_MS}`);
    for (const n of ['maxBatchBytes', 'maxPendingBytes', 'maxTransactionBytes', 'maxMessageBytes', 'maxRuns', 'connections']) positive(o, n);
    if (o.maxPendingBytes < o.maxBatchBytes) throw new TypeError('RunWriter: options.maxPendingBytes is at least maxBatchBytes');
    this.options = Object.freeze(o);
    this._runs = new Set();
    this._idle = [];            // connections ready for a transaction
    this._opening = 0;          // connections being opened
    this._busy = 0;             // transactions under way
    this._timer = null;
    this._timerAt = null;
    this._schema = null;        // the extension's schema, quoted
    this._tables = new Map();   // table name -> promise of {rel, state, key, keyType}
    this._backoff = new Backoff(o.reconnect);
    this._waitUntil = 0;        // no new connection before (after a failure)
    this._closed = false;
    this._closing = null;
    this.stats = { commits: 0, transactions: 0, events: 0, bytes: 0, retries: 0, inDoubt: 0, failedRuns: 0, runs: 0, connections: 0 };
  }

  /**
   * A run on target: {table, key} (a row of a table with an hx_stream
   * trigger) or {stream: '@name'} (a log stream).  options: {runId,
   * messages (the state's messages path for a row: '/messages' by
   * default; null: the writer writes no message into the state),
   * inTransaction(client, info) (statements of the run's own, in each of
   * its transactions), marker (false: no start marker), resumeAt
   * ({seq, open}: a run whose start marker and first events its stream
   * holds already, written by a process that died: it goes on after seq,
   * with open (openAt(...).state) open, and writes no start marker)}.
   */
  open(target, options = {}) {
    if (this._closed) throw new Error('RunWriter: closed');
    if (this._runs.size >= this.options.maxRuns) {
      throw Object.assign(new Error(`RunWriter: ${this.options.maxRuns} runs are open already (maxRuns)`), { code: 'HX_TOO_MANY_RUNS' });
    }
    // (the run's constructor queues its start marker: open() schedules it below)
    let run = null;
    run = new Run(target, options, this.options, {
      changed: () => { if (run !== null) this._changed(run); },
      ended: (r) => this._runs.delete(r),
      failed: (r, err) => {
        this.stats.failedRuns++;
        emitError(this, Object.assign(err, { runId: r.id }));
      },
    });
    for (const other of this._runs) {
      // two runs of one id in one stream would interleave their events (a
      // message of one continued by the other's fragments, for a reader)
      if (other.id === run.id && other.lockKey === run.lockKey && !other.closed && !other.error) {
        throw new TypeError(`RunWriter: run ${run.id} is open already in this stream (one run of an id at a time)`);
      }
    }
    this._runs.add(run);
    this.stats.runs++;
    this._schedule();
    return run;
  }

  /** Commit everything every run has queued; resolves once committed (rejects with the first run's failure). */
  async flush() {
    await Promise.all([...this._runs].map((r) => r.flush()));
  }

  /** Flush, then close the connections; further open() calls throw. */
  close() {
    if (this._closing) return this._closing;
    this._closing = (async () => {
      await Promise.allSettled([...this._runs].map((r) => r.flush()));
      this._closed = true;
      clearTimeout(this._timer);
      this._timer = null;
      const idle = this._idle.splice(0);
      await Promise.all(idle.map((c) => c.end().catch(() => {})));
    })();
    return this._closing;
  }

  /**
   * Stop at once: every run not yet committed whole fails (HX_WRITER_CLOSED:
   * what it had not committed is not written), the connections close;
   * further open() calls throw.  For a process that must end while the
   * database is out of reach (close() waits for it).
   */
  async destroy() {
    this._closed = true;
    clearTimeout(this._timer);
    this._timer = null;
    for (const r of [...this._runs]) {
      r.fail(Object.assign(new Error(`RunWriter: destroyed before run ${r.id} was committed whole`), { code: 'HX_WRITER_CLOSED' }));
    }
    const idle = this._idle.splice(0);
    await Promise.all(idle.map((c) => c.end().catch(() => {})));
  }

  // -- scheduling ------------------------------------------------------------

  /**
   * A run queued something (an event, a flush): only that run is looked
   * at, so that a token costs the same however many runs are open.  Due
   * now, the whole pass starts a transaction; due later, the timer is
   * brought forward if it would fire after.  (The timer's pass, and the
   * one after each commit, look at every run.)
   */
  _changed(run) {
    if (this._closed) return;
    const at = run.dueAt();
    if (at === null) return;
    const now = Date.now();
    if (at <= now) this._schedule();
    else this._arm(at, now);
  }

  /** Start what is due now; set the timer for the next batch due. */
  _schedule() {
    if (this._closed) return;
    const now = Date.now();
    let next = null;
    let due = false;
    for (const r of this._runs) {
      const at = r.dueAt();
      if (at === null) continue;
      if (at <= now) due = true;
      else if (next === null || at < next) next = at;
    }
    if (due) {
      if (now < this._waitUntil) next = next === null ? this._waitUntil : Math.min(next, this._waitUntil);
      else this._start();
    }
    if (next !== null) this._arm(next, now);
  }

  /** The timer fires at next (ms since the epoch), unless it fires before. */
  _arm(next, now) {
    if (this._timerAt !== null && next >= this._timerAt) return;
    clearTimeout(this._timer);
    this._timerAt = next;
    this._timer = setTimeout(() => {
      this._timer = null;
      this._timerAt = null;
      this._schedule();
    }, Math.max(0, next - now));
  }

  /** A transaction for the runs due now, on an idle connection (or a new one). */
  _start() {
    if (this._idle.length === 0) {
      if (this._busy + this._opening < this.options.connections) this._connect();
      return; // a connection that frees up schedules again
    }
    const now = Date.now();
    const items = [];
    let bytes = 0;
    const runs = [...this._runs].filter((r) => { const at = r.dueAt(); return at !== null && at <= now; });
    for (const r of runs) {
      if (bytes > 0 && bytes + r.pendingBytes > this.options.maxTransactionBytes) break;
      const item = r.takeBatch();
      if (!item) continue;
      bytes += item.bytes;
      items.push(item);
    }
    if (items.length === 0) return;
    const client = this._idle.pop();
    this._busy++;
    this._commit(client, items).then((ok) => {
      this._busy--;
      if (ok && this._closed) client.end().catch(() => {});
      else if (ok) this._idle.push(client);
      this._schedule();
    });
    if (this._idle.length > 0) this._schedule(); // more due runs may fit another connection
  }

  async _connect() {
    this._opening++;
    let client = null;
    try {
      client = new pg.Client(await this._config());
      client.on('error', () => {}); // a dead connection is noticed by its next statement
      await client.connect();
      if (this._schema === null) {
        const { rows } = await client.query(sql.extensionSchema());
        if (rows.length === 0) throw Object.assign(new Error('RunWriter: the database has no hxstate extension'), { code: 'HX_NO_EXTENSION' });
        this._schema = quoteIdent(rows[0].nspname);
      }
      this.stats.connections++;
      this._backoff.up(Date.now());
      this._opening--;
      if (this._closed) {
        await client.end().catch(() => {});
        return;
      }
      this._idle.push(client);
    } catch (err) {
      this._opening--;
      if (client) client.end().catch(() => {});
      this._lost(err);
    }
    this._schedule();
  }

  async _config() {
    const option = this.options.pg;
    let c = typeof option === 'function' ? await option('writer') : option;
    if (typeof c === 'string') c = { connectionString: c };
    return { keepAlive: true, fallback_application_name: this.options.applicationName, ...(c || {}) };
  }

  /** A connection failed (or could not be opened): no new one before the backoff's delay. */
  _lost(err) {
    this._backoff.lost(Date.now());
    this._waitUntil = Date.now() + this._backoff.next();
    emitError(this, err);
  }

  // -- one transaction -----------------------------------------------------

  /**
   * Commit items (one batch of each of several runs) on client; true when
   * the connection is still good.  Every item ends committed, failed, or
   * back in its run (to go again).
   */
  async _commit(client, items) {
    let sent = false; // COMMIT is in flight
    try {
      await this._resolve(client, items);
      await client.query('BEGIN');
      await this._write(client, items);
      sent = true;
      await client.query('COMMIT');
      this._committed(items);
      this._backoff.healthy();
      return true;
    } catch (err) {
      if (isConnectionError(err)) {
        client.end().catch(() => {});
        this._lost(err);
        if (sent) await this._inDoubt(items);
        else for (const it of items) it.run.putBack(it);
        return false;
      }
      await client.query('ROLLBACK').catch(() => {});
      if (items.length > 1) {
        // one of them is at fault: each alone
        for (const it of items) {
          const ok = await this._commit(client, [it]);
          if (!ok) {
            for (const rest of items.slice(items.indexOf(it) + 1)) rest.run.putBack(rest);
            return false;
          }
        }
        return true;
      }
      const [it] = items;
      if (isTransient(err)) {
        this.stats.retries++;
        it.run.putBack(it, this._backoff.next());
      } else {
        it.run.fail(err);
      }
      return true;
    }
  }

  /** What items need to know of their targets (a table's columns, once per table). */
  async _resolve(client, items) {
    for (const it of items) {
      if (it.target.table === undefined || it.table) continue;
      if (it.stateOps.length === 0) continue;
      let p = this._tables.get(it.target.table);
      if (!p) {
        p = this._describe(client, it.target.table);
        this._tables.set(it.target.table, p);
        p.catch(() => this._tables.delete(it.target.table));
      }
      it.table = await p;
    }
  }

  async _describe(client, table) {
    const { rows } = await client.query(sql.streamedTable(this._schema, table));
    if (rows.length === 0) {
      throw Object.assign(new Error(`RunWriter: ${table} has no hx_stream trigger`), { code: '42704' });
    }
    const args = rows[0].tgargs.toString('utf8').split('\u0000');
    const [state, key] = args;
    const keyType = rows[0].columns[key];
    if (!keyType || !rows[0].columns[state]) throw Object.assign(new Error(`RunWriter: ${table}'s hx_stream columns are not found`), { code: '42703' });
    return { rel: rows[0].rel, state, key, keyType };
  }

  async _write(client, items) {
    const order = (a, b) => (a.lockKey < b.lockKey ? -1 : a.lockKey > b.lockKey ? 1 : 0);
    const rows = items.filter((it) => it.target.table !== undefined).sort(order);
    const logs = items.filter((it) => it.target.stream !== undefined).sort(order);
    if (rows.length > 0) {
      const { rows: out } = await client.query(sql.emitRows(this._schema,
        rows.map((it, i) => ({ i, source: it.target.table, key: it.target.key, events: it.events }))));
      for (const r of out) rows[r.i].seq = Number(r.seq);
    }
    if (logs.length > 0) {
      const { rows: out } = await client.query(sql.sendLogs(this._schema, logs.map((it, i) => ({ i, stream: it.target.stream, events: it.events }))));
      for (const r of out) logs[r.i].seq = Math.max(logs[r.i].seq || 0, Number(r.seq));
    }
    // the messages that ended, into their rows' states: one statement per table
    const byTable = new Map();
    for (const it of rows) {
      if (it.stateOps.length === 0) continue;
      const list = byTable.get(it.table.rel) || [];
      list.push(it);
      byTable.set(it.table.rel, list);
    }
    for (const list of byTable.values()) {
      await client.query(sql.mergeStates(this._schema, list[0].table, list.map((it) => ({ key: it.target.key, ops: it.stateOps }))));
    }
    for (const it of items) {
      if (it.inTransaction) await it.inTransaction(client, { runId: it.run.id, seq: it.seq, events: it.events, note: it.note });
    }
  }

  _committed(items) {
    this.stats.transactions++;
    this.stats.commits++;
    for (const it of items) {
      this.stats.events += it.events.length;
      this.stats.bytes += it.bytes;
      it.run.committed(it);
    }
  }

  /**
   * COMMIT was in flight when the connection went: for each item, is its
   * batch in its stream?  Found: committed (not written again); not found:
   * back to its run.  The questions go on a new connection; if that fails
   * too, the items wait and are asked about again.
   */
  async _inDoubt(items) {
    this.stats.inDoubt++;
    let client = null;
    try {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, this._waitUntil - Date.now())));
      client = new pg.Client(await this._config());
      client.on('error', () => {});
      await client.connect();
      const found = [];
      for (const it of items) {
        if (await this._landed(client, it)) found.push(it);
        else it.run.putBack(it);
      }
      if (found.length > 0) this._committed(found);
    } catch (err) {
      this._lost(err);
      // asked again once a connection can be had
      setTimeout(() => this._inDoubt(items).then(() => this._schedule()), Math.max(10, this._waitUntil - Date.now())).unref();
      return;
    } finally {
      if (client) client.end().catch(() => {});
    }
  }

  /** Is item's batch in its stream? (seq set to its last event's when it is.) */
  async _landed(client, it) {
    const stream = it.target.stream !== undefined ? it.target.stream : await it.run.streamName(client, this._schema);
    if (stream === null) return false;
    let after = it.run.lastSeq;
    if (after === null) {
      // the run's first batch holds its start marker, which names the run
      const { rows } = await client.query(sql.runStart(this._schema, stream, RUN_MARKER, it.run.id));
      if (rows.length === 0) return false;
      after = Number(rows[0].seq) - 1;
    }
    const n = it.events.length;
    const { rows } = await client.query(sql.eventsAfter(this._schema, stream, after, n + 10000));
    for (let i = 0; i + n <= rows.length; i++) {
      let same = true;
      for (let j = 0; j < n && same; j++) same = sameEvent(rows[i + j].event, it.events[j]);
      if (same) {
        it.seq = Number(rows[i + n - 1].seq);
        return true;
      }
    }
    return false;
  }
}

/** Is logged (an event of the log) the event ours, but for what the log adds (metadata, timestamp)? */
function sameEvent(logged, ours) {
  const a = { ...logged };
  delete a.metadata;
  delete a.timestamp;
  const b = JSON.parse(JSON.stringify(ours));
  delete b.metadata;
  if (!('timestamp' in ours)) delete a.timestamp;
  delete b.timestamp;
  return isDeepStrictEqual(a, b);
}

module.exports = { RunWriter, DEFAULTS, sameEvent };
