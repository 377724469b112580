'use strict';
// The batched reader: every query the hub runs for its streams (names and
// channels, snapshots, the log after a cursor, heads), each batched across
// streams (one statement per batch, never one per stream), run one at a
// time on the reader connection by a single pump that coalesces the
// requests that arrive while it is busy.  The statements are sql.js's.
//
// It knows streams only as their entries (entry.js) and hands every
// result to its host (the callbacks the hub gives it), which applies it
// to the subscriptions.
//
// Errors:
//   - a connection error (isConnectionError, or the connection died):
//     what the statement was for is requested again, and the host is told
//     (it reconnects; the pump resumes on the new connection);
//   - a data error (class 22: a key that its type rejects) in a batch of
//     names or snapshots: the batch is halved until the bad keys stand
//     alone, so that they fail alone;
//   - any other statement error leaves the connection alone (a statement
//     that fails on every connection, for want of a privilege say, must
//     not cost a reconnect each time): the host is told, with the streams
//     it concerns (their subscriptions hear of it, SQLSTATE and all), and
//     the statement is tried again after a backoff that grows until one of
//     its kind succeeds.  A name lookup that fails for good (no such
//     table, no trigger, no such function) fails its subscriptions, as
//     does a snapshot read for those that have not started yet, unless
//     the error may pass (isTransient: a cancelled statement, a deadlock).
const pg = require('pg');
const sql = require('./sql');
const { Backoff } = require('./backoff');
const { isConnectionError, isDataError, isTransient } = require('./errors');
const { noop } = require('./emit');

// jsonb and json columns parsed with their size: {value, bytes}, the bytes
// of the JSON text as the server sent it (the queue's bounds in bytes)
const JSON_OIDS = new Set([114, 3802]);
const sized = (text) => ({ value: JSON.parse(text), bytes: Buffer.byteLength(text) });
const SIZED_TYPES = {
  getTypeParser(oid, format) {
    return JSON_OIDS.has(oid) && format !== 'binary' ? sized : pg.types.getTypeParser(oid, format);
  },
};

const RECHECK_MS = 100;

class Reader {
  /**
   * @param {object} host what the hub gives it (the hub's _readerHost):
   *   tick() (a number that orders reads and joins), sourceOf(name) ({fn}
   *   or {table}), readFrom(entry) (the seq a read of its log starts
   *   after, or null), and what it hears of the reads: onNames,
   *   onNamesFailed, onChannels, onChannelsFailed, snapshotSent,
   *   onSnapshotUnsent, retrySnapshots, onSnapshots, onSnapshotsFailed,
   *   onPage, onHeads, onReadFailed, onConnectionError (their arguments
   *   below, where each is called)
   * @param {object} o batchSize, batchEvents, pageSize, headsBatch, batchDelay, reconnect ({min, max})
   */
  constructor(host, o) {
    this._host = host;
    this._o = o;
    this._conn = null;           // {client, alive}
    this._schema = null;         // the extension's schema, quoted
    this._active = false;
    this._pumping = false;
    this._pumpHandle = null;
    this.done = Promise.resolve(); // the pump running now
    this._timers = new Set();    // retries of failed statements
    this._backoff = new Map();   // kind -> Backoff
    this._recheck = new Set();
    this._recheckTimer = null;

    this._namesQ = new Map();    // source -> Set(key)
    this._channelQ = new Set();  // streams whose channel is needed
    this._snapQ = new Set();     // entries to snapshot
    this._catchQ = new Set();    // entries to read the log of
    this._headsQ = new Set();    // entries whose head to read
    this._kinds = ['catchup', 'snapshot', 'names', 'heads', 'read'];
    this._readQ = [];            // the hub's callers' reads: {fn, resolve, reject}
    this._stopped = false;
    this._rr = 0;

    /** Counters (the hub's stats show them). */
    this.stats = { queries: 0, nameReads: 0, snapshotReads: 0, snapshots: 0, pages: 0, headReads: 0 };
  }

  // -- life cycle ------------------------------------------------------------

  /** Run the queries on conn, in the extension's schema (quoted). */
  use(conn, schema) {
    this._conn = conn;
    this._schema = schema;
    this._active = true;
  }

  /** No statement starts after this; resolves when the one running ends. */
  stop() {
    this._active = false;
    this._stopped = true;
    for (const r of this._readQ.splice(0)) r.reject(new Error('hxstate: the hub stopped before the read ran'));
    for (const t of this._timers) clearTimeout(t);
    this._timers.clear();
    clearTimeout(this._recheckTimer);
    this._recheckTimer = null;
    if (this._pumpHandle) {
      clearTimeout(this._pumpHandle);
      clearImmediate(this._pumpHandle);
      this._pumpHandle = null;
    }
    return this.done;
  }

  // -- requests --------------------------------------------------------------

  /** The stream and channel of key in source (a table, or a source of the hub). */
  names(source, key) {
    let keys = this._namesQ.get(source);
    if (!keys) {
      keys = new Set();
      this._namesQ.set(source, keys);
    }
    keys.add(key);
    this.kick();
  }

  channel(stream) {
    this._channelQ.add(stream);
    this.kick();
  }

  snapshot(entry) {
    this._snapQ.add(entry);
    this.kick();
  }

  catchup(entry) {
    this._catchQ.add(entry);
    this.kick();
  }

  heads(entry) {
    this._headsQ.add(entry);
    this.kick();
  }

  /**
   * A caller's read (HxHub.read): fn(query) runs on the reader connection
   * between the hub's own batches, one at a time; query(text, values)
   * resolves to the rows (jsonb parsed as JSON.parse does).  A promise of
   * what fn resolves to; it rejects with fn's error (a lost connection's
   * too: the read is not run again), or when the hub stops first.
   */
  read(fn) {
    if (this._stopped) return Promise.reject(new Error('hxstate: the hub stopped'));
    return new Promise((resolve, reject) => {
      this._readQ.push({ fn, resolve, reject });
      this.kick();
    });
  }

  /** Look at the entry's head again shortly (see StreamEntry.settle). */
  recheck(entry) {
    this._recheck.add(entry);
    if (this._recheckTimer || !this._active) return;
    this._recheckTimer = setTimeout(() => {
      this._recheckTimer = null;
      for (const e of this._recheck) if (!e.dropped) this._headsQ.add(e);
      this._recheck.clear();
      this.kick();
    }, RECHECK_MS);
  }

  /** The entry is no longer followed. */
  forget(entry) {
    this._snapQ.delete(entry);
    this._catchQ.delete(entry);
    this._headsQ.delete(entry);
    this._recheck.delete(entry);
  }

  /** Snapshot requests not sent yet: dropped (the streams are asked for again once armed). */
  dropSnapshots() {
    const entries = [...this._snapQ];
    this._snapQ.clear();
    return entries;
  }

  /** fn, after the backoff of kind (grown by each failure of a statement of that kind). */
  later(kind, fn) {
    let b = this._backoff.get(kind);
    if (!b) {
      b = new Backoff(this._o.reconnect);
      this._backoff.set(kind, b);
    }
    const t = setTimeout(() => {
      this._timers.delete(t);
      if (this._active) fn();
    }, b.next());
    this._timers.add(t);
  }

  /** fn after ms (the timer is cleared when the reader stops). */
  wait(ms, fn) {
    const t = setTimeout(() => {
      this._timers.delete(t);
      if (this._active) fn();
    }, ms);
    this._timers.add(t);
  }

  _succeeded(kind) {
    const b = this._backoff.get(kind);
    if (b) b.healthy();
  }

  // -- the pump ----------------------------------------------------------------

  kick() {
    if (!this._active || this._pumping || this._pumpHandle) return;
    if (!this._conn || !this._conn.alive) return;
    const run = () => {
      this._pumpHandle = null;
      this.done = this._pump();
    };
    this._pumpHandle = this._o.batchDelay > 0 ? setTimeout(run, this._o.batchDelay) : setImmediate(run);
  }

  async _pump() {
    if (this._pumping) return;
    this._pumping = true;
    try {
      for (;;) {
        const conn = this._conn;
        if (!this._active || !conn || !conn.alive) return;
        const job = this._nextJob();
        if (!job) return;
        try {
          await job(conn);
        } catch (err) {
          // only a lost connection gets here: the jobs handle statement errors
          if (this._active) this._host.onConnectionError(conn, err);
          return;
        }
      }
    } finally {
      this._pumping = false;
    }
  }

  /** The next batch to run, round robin over the kinds of work. */
  _nextJob() {
    for (let i = 0; i < this._kinds.length; i++) {
      const kind = this._kinds[(this._rr + i) % this._kinds.length];
      let job = null;
      if (kind === 'catchup') job = this._catchupJob();
      else if (kind === 'snapshot') job = this._snapshotJob();
      else if (kind === 'names') job = this._namesJob();
      else if (kind === 'read') job = this._readJob();
      else job = this._headsJob();
      if (job) {
        this._rr = (this._rr + i + 1) % this._kinds.length;
        return job;
      }
    }
    return null;
  }

  _readJob() {
    const r = this._readQ.shift();
    if (!r) return null;
    return (conn) => this._runRead(conn, r);
  }

  /**
   * A caller's read (read() above).  fn gets query(); what fn leaves of
   * the connection is checked once fn has settled and every statement it
   * sent has ended (query() refuses statements after that, HX_READ_ENDED):
   * the connection goes back to the hub's reads as fn found it, outside a
   * transaction.  A transaction left open (a BEGIN without COMMIT or
   * ROLLBACK, or one a statement error aborted) is rolled back, as
   * PostgreSQL does when a session ends inside one; then the read rejects
   * with fn's error if fn threw, else with HX_READ_OPEN_TRANSACTION (what
   * fn did in it is undone, so its result is not handed out).  With
   * sharedConnection the connection is also the LISTEN one, and a LISTEN
   * the transport sent meanwhile took effect only at a COMMIT: it is
   * replaced instead (the hub reconnects and LISTENs again).  A connection
   * error of fn's statements, or a connection that died, is the hub's to
   * handle (it reconnects); fn's own errors are not.
   */
  async _runRead(conn, r) {
    const pending = new Set();
    let sent = 0;
    let settled = false;
    let lostErr = null;
    const query = (text, values) => {
      if (settled) {
        const err = new Error('hxstate: HxHub.read: query() called after fn settled');
        err.code = 'HX_READ_ENDED';
        return Promise.reject(err);
      }
      this.stats.queries++;
      sent++;
      const p = conn.client.query(text, values).then((res) => res.rows, (err) => {
        // a socket's error has a code (ECONNRESET...), and the connection's
        // 'error' or 'end' has marked it dead; one without a code is an
        // argument pg refused (no text, values not an array): not the connection's
        if (err && err.code !== undefined && isConnectionError(err)) lostErr = lostErr || err;
        throw err;
      });
      const done = p.then(noop, noop);
      pending.add(done);
      done.then(() => pending.delete(done));
      return p;
    };
    let out;
    let failure = null;
    let failed = false;
    try {
      out = await r.fn(query);
    } catch (err) {
      failed = true;
      failure = err;
    }
    settled = true;
    while (pending.size > 0) await Promise.all([...pending]);
    if (lostErr || !conn.alive) {
      if (failed) r.reject(failure);
      else r.reject(lostErr || new Error('hxstate: the hub lost its connection during the read'));
      throw lostErr || new Error('hxstate: connection closed');
    }
    const status = conn.client.getTransactionStatus();
    if (status === 'T' || status === 'E') {
      const open = new Error(`hxstate: HxHub.read: fn left a transaction ${status === 'E' ? 'aborted' : 'open'} on the hub's reader connection ` +
        '(a BEGIN without COMMIT or ROLLBACK); it was rolled back: end each transaction fn begins');
      open.code = 'HX_READ_OPEN_TRANSACTION';
      r.reject(failed ? failure : open);
      if (this._o.sharedConnection) throw open; // a LISTEN inside it was undone: a new connection
      this.stats.queries++;
      await conn.client.query('ROLLBACK'); // if it fails, the hub replaces the connection
      await this._resetSession(conn);
      return;
    }
    if (failed) r.reject(failure);
    else r.resolve(out);
    // before the hub's next statement (the caller has its result already)
    if (sent > 0) await this._resetSession(conn);
  }

  /**
   * What fn set in the session, back to the connection's own: RESET ALL
   * (every setting to its value at connection start: a statement_timeout
   * of 1 ms would cancel every later read of the hub), and RESET ROLE.
   * One statement; if it fails, the hub replaces the connection.
   */
  async _resetSession(conn) {
    this.stats.queries++;
    await conn.client.query('RESET ALL; RESET ROLE');
  }

  async _query(conn, q) {
    this.stats.queries++;
    return conn.client.query({ text: q.text, values: q.values, types: SIZED_TYPES });
  }

  /** Is err the connection's (rethrow it), rather than the statement's? */
  _lost(conn, err) {
    return isConnectionError(err) || !conn.alive;
  }

  /**
   * A data error in a batch of more than one: run each half on its own, so
   * that the bad items fail alone.  Returns whether it did.
   */
  async _halve(err, items, run) {
    if (!isDataError(err) || items.length < 2) return false;
    const half = items.length >> 1;
    await run(items.slice(0, half));
    await run(items.slice(half));
    return true;
  }

  /**
   * A read of the entries' log or heads (kind) failed: a lost connection's
   * error is rethrown, the entries requested again for the next one; any
   * other goes to the host, and the entries are requested again later.
   */
  _readFailed(kind, conn, err, entries, queue) {
    if (this._lost(conn, err)) {
      for (const e of entries) queue.add(e);
      throw err;
    }
    this._host.onReadFailed(entries, err);
    this.later(kind, () => {
      for (const e of entries) if (!e.dropped) queue.add(e);
      this.kick();
    });
  }

  /** Up to n items taken out of a set. */
  static _take(set, n, keep = () => true) {
    const out = [];
    for (const x of set) {
      set.delete(x);
      if (!keep(x)) continue;
      out.push(x);
      if (out.length >= n) break;
    }
    return out;
  }

  // -- names and channels ------------------------------------------------------

  _namesJob() {
    if (this._namesQ.size > 0) {
      const [source, keys] = this._namesQ.entries().next().value;
      const batch = Reader._take(keys, this._o.batchSize);
      if (keys.size === 0) this._namesQ.delete(source);
      return (conn) => this._runNames(conn, source, batch);
    }
    if (this._channelQ.size > 0) {
      const batch = Reader._take(this._channelQ, this._o.batchSize);
      return (conn) => this._runChannels(conn, batch);
    }
    return null;
  }

  async _runNames(conn, source, keys) {
    let rows;
    try {
      this.stats.nameReads++;
      ({ rows } = await this._query(conn, sql.names(this._schema, this._host.sourceOf(source), keys)));
    } catch (err) {
      if (this._lost(conn, err)) {
        for (const k of keys) this.names(source, k);
        throw err;
      }
      if (await this._halve(err, keys, (part) => this._runNames(conn, source, part))) return;
      // a cancelled statement, say: try again; anything else fails every key
      const retry = isTransient(err);
      this._host.onNamesFailed(source, keys, err, retry);
      if (retry) this.later('names', () => { for (const k of keys) this.names(source, k); });
      return;
    }
    this._succeeded('names');
    this._host.onNames(source, keys, rows);
  }

  async _runChannels(conn, streams) {
    let rows;
    try {
      this.stats.nameReads++;
      ({ rows } = await this._query(conn, sql.channels(this._schema, streams)));
    } catch (err) {
      if (this._lost(conn, err)) {
        for (const s of streams) this._channelQ.add(s);
        throw err;
      }
      this._host.onChannelsFailed(streams, err);
      this.later('channels', () => { for (const s of streams) this.channel(s); });
      return;
    }
    this._succeeded('channels');
    this._host.onChannels(rows);
  }

  // -- snapshots -------------------------------------------------------------

  _snapshotJob() {
    if (this._snapQ.size === 0) return null;
    let source = null;
    const batch = [];
    for (const entry of this._snapQ) {
      if (entry.dropped || !entry.armed || entry.source === null) {
        this._snapQ.delete(entry);
        this._host.onSnapshotUnsent(entry);
        continue;
      }
      if (source === null) source = entry.source;
      if (entry.source !== source) continue;
      this._snapQ.delete(entry);
      batch.push(entry);
      if (batch.length >= this._o.batchSize) break;
    }
    if (batch.length === 0) return null;
    return (conn) => this._runSnapshots(conn, source, batch);
  }

  async _runSnapshots(conn, source, entries) {
    const tick = this._host.snapshotSent(entries);
    let rows;
    try {
      this.stats.snapshotReads++;
      ({ rows } = await this._query(conn, sql.snapshots(this._schema, this._host.sourceOf(source), entries.map((e) => e.key))));
    } catch (err) {
      if (this._lost(conn, err)) {
        this._host.retrySnapshots(entries, tick);
        throw err;
      }
      if (await this._halve(err, entries, (part) => this._runSnapshots(conn, source, part))) return;
      // the table lost its trigger, say: a subscription that has not
      // started fails (unless the error may pass); one that has tries
      // again after a while
      this._host.onSnapshotsFailed(entries, tick, err, isTransient(err));
      this.later('snapshot', () => this._host.retrySnapshots(entries, tick));
      return;
    }
    this._succeeded('snapshot');
    this.stats.snapshots += rows.length;
    this._host.onSnapshots(entries, tick, rows);
  }

  // -- the log ---------------------------------------------------------------

  _catchupJob() {
    if (this._catchQ.size === 0) return null;
    const batch = [];
    for (const entry of this._catchQ) {
      this._catchQ.delete(entry);
      if (entry.dropped) continue;
      const after = this._host.readFrom(entry);
      if (after === null) continue;
      batch.push({ entry, after, seen: 0 });
      if (batch.length >= this._o.batchSize) break;
    }
    if (batch.length === 0) return null;
    // at most batchEvents rows in all: the page per stream shrinks with the batch
    const limit = Math.max(1, Math.min(this._o.pageSize, Math.floor(this._o.batchEvents / batch.length)));
    return (conn) => this._runCatchup(conn, batch, limit);
  }

  async _runCatchup(conn, batch, limit) {
    const tick = this._host.tick();
    for (const b of batch) b.seen = b.entry.seen;
    let rows;
    try {
      ({ rows } = await this._query(conn,
        sql.eventsAfter(this._schema, batch.map((b) => b.entry.stream), batch.map((b) => b.after), limit)));
    } catch (err) {
      this._readFailed('catchup', conn, err, batch.map((b) => b.entry), this._catchQ);
      return;
    }
    this._succeeded('catchup');
    this.stats.pages++;
    const byStream = new Map();
    for (const r of rows) {
      let list = byStream.get(r.stream);
      if (!list) {
        list = [];
        byStream.set(r.stream, list);
      }
      list.push({ seq: Number(r.seq), event: r.event.value, bytes: r.event.bytes });
    }
    this._host.onPage(batch, byStream, limit, tick);
  }

  // -- heads -----------------------------------------------------------------

  _headsJob() {
    if (this._headsQ.size === 0) return null;
    const batch = Reader._take(this._headsQ, this._o.headsBatch, (e) => !e.dropped);
    if (batch.length === 0) return null;
    return (conn) => this._runHeads(conn, batch);
  }

  async _runHeads(conn, entries) {
    const tick = this._host.tick();
    let rows;
    try {
      this.stats.headReads++;
      ({ rows } = await this._query(conn, sql.heads(this._schema, entries.map((e) => e.stream))));
    } catch (err) {
      this._readFailed('heads', conn, err, entries, this._headsQ);
      return;
    }
    this._succeeded('heads');
    this._host.onHeads(entries, new Map(rows.map((r) => [r.stream, Number(r.seq)])), tick);
  }
}

module.exports = { Reader };
