'use strict';
// HxHub: follow any number of hxstate streams over at most three
// connections, with the per-stream guarantees of HxStream: a snapshot and
// its seq, then every seq exactly once and in order, gaps and references
// filled from the log, a resync from a fresh snapshot when the log no
// longer holds the next event, hx.stream_end handed out like any event.
//
// Connections (each opened with the config that options.pg gives for it):
//   - the reader runs every query: name lookups, snapshots, log reads and
//     polls, each batched across streams (one statement per batch, never
//     one per stream) by a single pump that coalesces the requests that
//     arrive while it is busy;
//   - the transport brings the events as they commit: a replication
//     connection decoding hx_event's inserts from the WAL (pgoutput, a
//     temporary slot; wal.js), or a connection that LISTENs on every
//     followed stream's channel.  With sharedConnection (LISTEN only) the
//     reader is the transport too: one connection in all (HxStream's own
//     hub does this).
// A connection that is replaced is closed before its successor opens, so
// the hub never holds more than three (two in steady state).
//
// The rules every subscription follows (a "cursor" is the seq of the last
// event it accepted, with the state after it):
//   1. a stream is armed (its channel LISTENed, or the WAL slot made) before
//      its snapshot is read, so every event after the snapshot either comes
//      through the transport or is in the log;
//   2. an event with seq <= cursor is old news; seq == cursor + 1 is
//      accepted; a higher seq, a reference, or a head (the stream's last
//      seq, from a poll) above the cursor means: read the log after the
//      cursor (a catch-up, batched with the other streams');
//   3. a log read that does not continue from cursor + 1 (trimmed, or an
//      event deleted) means a resync: a fresh snapshot, announced by
//      'resync' and handed out as a synthetic STATE_SNAPSHOT;
//   4. after the transport (re)connects, the heads of all followed streams
//      are read (one query), and every stream behind its head catches up;
//      the same poll runs every pollInterval ms and catches whatever a
//      transport missed (payload=none under LISTEN, a notification queue
//      above hxstate.notify_queue_threshold, an unlucky race).
// All cursor updates run synchronously in the event loop (a query result
// or a transport message is applied in one go), so events from the
// transport and from the log can interleave in any order: rule 2 sorts
// them out.
//
// Delivery and backpressure: each subscription has its own queue of
// accepted events, delivered to its 'event' listeners one at a time; a
// listener may return a promise, and the next event waits for it.  The
// queue never holds more than maxQueue events:
//   - overflow 'log' (the default): when the queue is full, events from the
//     transport are not accepted for that subscription (its cursor stays);
//     once its consumer has brought the queue down to half, it reads the
//     log after its cursor like any stream that is behind, so it still sees
//     every seq exactly once, just later (a resync only if the log was
//     trimmed past it meanwhile).  Log reads never overfill a queue: they
//     are applied only as far as the queue has room.
//   - overflow 'snapshot': when the queue is full, it is dropped (the
//     cursor goes back to the last event handed out) and, once the event
//     in the consumer's hands is done, a fresh snapshot is handed out after
//     'resync' (reason 'overflow'): the consumer skips to the present.
// Either way the transport keeps reading for every other subscription.
const { EventEmitter } = require('node:events');
const pg = require('pg');
const { applyEvent, isStreamEnd } = require('./apply');
const { WalStream } = require('./wal');

const noop = () => {};

const DEFAULTS = {
  transport: 'auto',
  publication: 'hxstate_events',
  pollInterval: null,   // 2000 over LISTEN, 10000 over the WAL
  pageSize: 1000,
  maxQueue: 1000,
  batchSize: 1000,
  batchEvents: 10000,
  headsBatch: 2000,
  batchDelay: 0,
  statusInterval: 10000,
  slotTimeout: 30000,
  applicationName: 'hxstate-hub',
  sharedConnection: false,
};

// What the hub needs from the database: the batched functions of 0.5.0.
const MIN_VERSION = [0, 5, 0];

/**
 * Errors that mean the connection is gone (or about to be): a socket error
 * (no SQLSTATE), or SQLSTATE class 08 (connection exception), 57P01-57P03
 * (administrator command, crash shutdown, cannot connect now), 53300 (too
 * many connections).  Anything else is an error of the statement on a
 * connection that still works.
 */
function isConnectionError(err) {
  const code = err && err.code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true;
  return code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || code === '53300';
}

/** SQLSTATE class 22 (data exception): a value that its type rejects, e.g. a key. */
function isDataError(err) {
  return !!err && typeof err.code === 'string' && err.code.startsWith('22');
}

function syntheticSnapshot(stream, seq, state) {
  return {
    type: 'STATE_SNAPSHOT',
    snapshot: state,
    timestamp: Date.now(),
    metadata: { stream, seq, synthetic: true },
  };
}

function versionAtLeast(text, min) {
  const v = String(text).split('.').map((x) => parseInt(x, 10) || 0);
  for (let i = 0; i < min.length; i++) {
    if ((v[i] || 0) !== min[i]) return (v[i] || 0) > min[i];
  }
  return true;
}

/** Wait for promise, at most ms (a hung statement must not hold stop() forever). */
function settle(promise, ms) {
  let timer;
  return Promise.race([
    promise.then(noop, noop),
    new Promise((resolve) => { timer = setTimeout(resolve, ms); }),
  ]).finally(() => clearTimeout(timer));
}

function quoteIdent(name) {
  return `"${String(name).replace(/"/g, '""')}"`;
}

// ---------------------------------------------------------------------
// Subscriptions
// ---------------------------------------------------------------------

/**
 * One follower of one stream, made by hub.follow().  Emits 'event'
 * (event, state), 'end' (event, lastState), 'resync' ({seq, previousSeq,
 * state, reason}) and 'error' (err; only when listened to).
 */
class HxSubscription extends EventEmitter {
  constructor(hub, target, o) {
    super();
    this._hub = hub;
    this.table = target.table === undefined || target.table === null ? null : String(target.table);
    this.key = target.key === undefined || target.key === null ? null : String(target.key);
    /** The stream's name, known once resolved ("<table>:<key>"). */
    this.stream = target.stream === undefined || target.stream === null ? null : String(target.stream);
    /** The stream's LISTEN channel, known once resolved. */
    this.channel = null;
    const after = o.after === undefined || o.after === null ? null : Number(o.after);
    if (after !== null && !(Number.isSafeInteger(after) && after >= 0)) {
      throw new TypeError('HxHub: options.after must be a seq (an integer >= 0)');
    }
    const hasBase = Object.prototype.hasOwnProperty.call(o, 'base');
    if (o.state === true && after !== null && after > 0 && !hasBase) {
      throw new TypeError('HxHub: state: true with after needs base, the state at that seq');
    }
    if (this.table === null && this.stream === null) {
      throw new TypeError('HxHub: follow() needs {table, key} or {stream}');
    }
    if (this.table !== null && this.key === null) throw new TypeError('HxHub: follow({table}) needs a key');
    this._after = after;
    // Keep states unless told not to; resuming from a seq without the
    // state at it cannot compute states (deltas need a base).
    this._keepState = o.state === undefined ? (after === null || after === 0 || hasBase) : !!o.state;
    this._maxQueue = Math.max(1, Math.floor(o.maxQueue === undefined ? hub._o.maxQueue : o.maxQueue));
    this._lowWater = Math.floor(this._maxQueue / 2);
    this._overflow = o.overflow === undefined ? 'log' : o.overflow;
    if (this._overflow !== 'log' && this._overflow !== 'snapshot') {
      throw new TypeError("HxHub: options.overflow is 'log' or 'snapshot'");
    }

    // handed out (delivered to the listeners)
    /** The seq of the last event handed out (0: none yet). */
    this.seq = after === null ? 0 : after;
    /** The state after the last event handed out (with state: true). */
    this.state = this._keepState ? (hasBase ? o.base : null) : undefined;
    /** Has the stream ended (hx.stream_end) with no re-insert since? */
    this.ended = false;

    // accepted (the cursor)
    this._seq = this.seq;
    this._state = this.state;
    this._ended = false;

    this._entry = null;
    this._phase = 'resolving'; // resolving | snapshot | live | paused | stopped
    this._started = after !== null; // has a position (a snapshot or a resume point)
    this._queue = [];
    this._queued = 0;          // events in _queue
    this._inflight = false;    // a listener's promise is pending
    this._drainQueued = false;
    this._held = false;        // an event was refused for want of room
    this._more = false;        // the last log read stopped before the log's end
    this._force = false;       // read the log whatever the heads say
    this._synced = false;      // a read that started after it joined has come back
    this._joinTick = 0;
    this._snapTick = -1;       // the snapshot request it waits for
    this._resyncReason = null;
    this._exact = false;       // its state comes from a snapshot the hub read (not from a base, nor
                               // from a log that starts at seq 1 of a row that may predate its trigger)
    this._readyQueued = false;
    this._readyDone = false;
    this._failure = null;

    /** Counters, for monitoring and tests. */
    this.stats = {
      events: 0,        // events handed out
      notifications: 0, // events and references that came by NOTIFY
      references: 0,    // ... of which references
      walEvents: 0,     // events decoded from the WAL
      pages: 0,         // log reads that included this stream
      resyncs: 0,
      overflows: 0,     // times its queue was full when an event came
      maxQueued: 0,     // the most events it ever had queued
    };
    /** Resolves once the subscription has its position: the snapshot handed
     * out, or (with after) the log read up to the stream's head. */
    this.ready = new Promise((resolve, reject) => {
      this._resolveReady = resolve;
      this._rejectReady = reject;
    });
    this.ready.catch(noop); // rejections are for whoever awaits it
  }

  /** Events accepted and not yet handed out. */
  get queued() { return this._queued; }
  /** Not keeping up: the queue was full and events wait in the log (or for a snapshot). */
  get behind() { return this._held || this._phase === 'paused'; }
  /** 'resolving' | 'snapshot' | 'live' | 'paused' | 'stopped' */
  get phase() { return this._phase; }
  get stopped() { return this._phase === 'stopped'; }

  /** Stop following; no event is handed out after this. */
  stop() { this._hub.unfollow(this); }

  /** The state now as a synthetic STATE_SNAPSHOT (state: true only). */
  snapshotEvent() {
    return syntheticSnapshot(this.stream, this.seq, this.state === undefined ? null : this.state);
  }

  // -- the queue ---------------------------------------------------------

  _push(item) {
    this._queue.push(item);
    if (item.kind === 'event') {
      this._queued++;
      if (this._queued > this.stats.maxQueued) this.stats.maxQueued = this._queued;
    }
    if (!this._drainQueued && !this._inflight) {
      this._drainQueued = true;
      queueMicrotask(() => this._drain());
    }
  }

  /** Hand queued items to the listeners, one at a time. */
  _drain() {
    this._drainQueued = false;
    while (!this._inflight && this._queue.length > 0 && this._phase !== 'stopped') {
      const item = this._queue.shift();
      if (item.kind === 'ready') {
        this._readyDone = true;
        this._resolveReady();
        continue;
      }
      this._queued--;
      this.seq = item.seq;
      this.state = item.state;
      this.ended = item.ended;
      this.stats.events++;
      if (item.resync) this._emitSafe('resync', item.resync);
      const pending = this._emitEvent(item.event, item.state);
      if (pending) {
        this._inflight = true;
        pending.then(() => this._settled(item), (err) => {
          process.nextTick(() => { throw err; });
          this._settled(item);
        });
        return;
      }
      if (item.end) this._emitSafe('end', item.event, item.before);
      this._hub._delivered(this);
    }
    if (this._queue.length === 0) this._hub._delivered(this);
  }

  _settled(item) {
    this._inflight = false;
    if (this._phase === 'stopped') return;
    if (item.end) this._emitSafe('end', item.event, item.before);
    this._hub._delivered(this);
    this._drain();
  }

  /**
   * Call the 'event' listeners; a promise when any returned one.  A
   * listener that throws does not disturb the bookkeeping: its exception is
   * rethrown on its own tick (an uncaught exception, as from any callback).
   */
  _emitEvent(event, state) {
    let waits = null;
    for (const fn of this.rawListeners('event')) {
      try {
        const r = fn.call(this, event, state);
        if (r && typeof r.then === 'function') (waits || (waits = [])).push(r);
      } catch (err) {
        process.nextTick(() => { throw err; });
      }
    }
    if (!waits) return null;
    return waits.length === 1 ? Promise.resolve(waits[0]) : Promise.all(waits);
  }

  _emitSafe(name, ...args) {
    if (this._phase === 'stopped') return;
    try {
      this.emit(name, ...args);
    } catch (err) {
      process.nextTick(() => { throw err; });
    }
  }

  /** 'error' only when someone listens: an unheard 'error' would crash the process. */
  _emitError(err) {
    if (this.listenerCount('error') > 0) this._emitSafe('error', err);
  }
}

// ---------------------------------------------------------------------
// The hub
// ---------------------------------------------------------------------

class HxHub extends EventEmitter {
  /**
   * @param {object} [options]
   * @param {object|string|function} [options.pg] a pg.Client config, a
   *   connection string, or a function (role) => config (or a promise of
   *   one) called for every new connection; role is 'reader', 'listen' or
   *   'replication'.  By default pg's own (PGHOST, PGDATABASE, ...).
   * @param {'auto'|'wal'|'listen'} [options.transport='auto']
   * @param {string} [options.publication='hxstate_events']
   * @param {number} [options.pollInterval] ms between polls of the heads
   *   of every followed stream (default 2000 over LISTEN, 10000 over the
   *   WAL); 0 turns polling off
   * @param {{min: number, max: number}} [options.reconnect] backoff bounds
   *   in ms (default 100 to 5000, doubling, with jitter)
   * @param {number} [options.pageSize=1000] events per stream per log read
   * @param {number} [options.maxQueue=1000] events a subscription may have
   *   waiting for its consumer (each follow() may set its own)
   * @param {number} [options.batchSize=1000] streams per snapshot or
   *   catch-up query
   * @param {number} [options.headsBatch=2000] streams per poll query (a
   *   poll of more streams is several statements, interleaved with the
   *   catch-ups that wait)
   * @param {number} [options.batchEvents=10000] events per catch-up query
   *   at most (the per-stream page shrinks when many streams are read)
   * @param {number} [options.batchDelay=0] ms to wait for more requests
   *   before running a batch (0: the next turn of the event loop)
   * @param {string} [options.applicationName='hxstate-hub'] the connections'
   *   application_name unless the config sets one
   * @param {number} [options.slotTimeout=30000] ms to wait for the
   *   replication slot (a long transaction delays it); then 'auto' follows
   *   over LISTEN until the next reconnect
   * @param {boolean} [options.sharedConnection=false] with transport
   *   'listen', run the queries on the LISTEN connection: one connection
   */
  constructor(options) {
    super();
    const o = { ...DEFAULTS, ...(options || {}) };
    if (!['auto', 'wal', 'listen'].includes(o.transport)) {
      throw new TypeError("HxHub: options.transport is 'auto', 'wal' or 'listen'");
    }
    if (o.sharedConnection && o.transport !== 'listen') {
      throw new TypeError("HxHub: sharedConnection needs transport: 'listen'");
    }
    o.pollInterval = o.pollInterval === null || o.pollInterval === undefined ? null : Number(o.pollInterval) || 0;
    o.pageSize = Math.max(1, Math.floor(o.pageSize));
    o.maxQueue = Math.max(1, Math.floor(o.maxQueue));
    o.batchSize = Math.max(1, Math.floor(o.batchSize));
    o.batchEvents = Math.max(1, Math.floor(o.batchEvents));
    o.headsBatch = Math.max(1, Math.floor(o.headsBatch));
    o.reconnect = { min: 100, max: 5000, ...(o.reconnect || {}) };
    this._o = o;

    this._phase = 'idle';        // idle | starting | running | stopped
    this._starting = null;
    this._stopping = null;
    this._schema = null;         // the extension's schema, quoted
    this._reader = null;         // {role, client, alive}
    this._tx = null;             // {kind: 'wal'|'listen', conn, wal, listening: Set}
    this._transport = null;      // 'wal' | 'listen' once chosen
    this._transportReason = null;
    this._closing = new Set();   // client.end() promises
    this._opening = new Set();   // connections being opened
    this._reconnectTimer = null;
    this._establishing = null;   // the reconnect attempt running
    this._attempt = 0;
    this._down = false;          // lost a connection, not yet back
    this._pollTimer = null;
    this._recheckTimer = null;
    this._recheck = new Set();   // entries to look at again shortly
    this._laterTimers = new Set(); // retries of failed statements
    this._tick = 0;              // orders requests and joins

    this._subs = new Set();
    this._entries = new Map();   // stream -> entry
    this._targets = new Map();   // table \0 key -> {table, key, stream|null, subs: Set}
    this._streamWaits = new Map(); // stream -> Set(sub) waiting for the channel lookup
    this._channels = new Map();  // channel -> Set(entry)

    // work for the reader, coalesced into batches
    this._resolveQ = new Map();  // table -> Set(key)
    this._channelQ = new Set();  // streams whose channel we need
    this._snapQ = new Set();     // entries to snapshot
    this._catchQ = new Set();    // entries to read the log of
    this._headsQ = new Set();    // entries whose head to read
    this._kinds = ['catchup', 'snapshot', 'resolve', 'heads'];
    this._rr = 0;
    this._pumping = false;
    this._pumpHandle = null;
    this._pumpDone = Promise.resolve();
    // LISTEN / UNLISTEN on the transport
    this._listenQ = new Set();
    this._unlistenQ = new Set();
    this._listenPumping = false;
    this._listenDone = Promise.resolve();

    /** Counters, for monitoring and tests. */
    this.stats = {
      streams: 0,          // streams followed now
      subscriptions: 0,    // subscriptions now
      connections: 0,      // connections open now
      maxConnections: 0,   // the most open at once
      queries: 0,          // statements run on the reader
      nameReads: 0,        // ... of which name and channel lookups
      snapshotReads: 0,    // ... snapshot reads
      snapshots: 0,        // snapshot rows read
      pages: 0,            // catch-up queries
      polls: 0,            // timed polls
      headReads: 0,        // hx_stream_heads queries
      notifications: 0,    // NOTIFY payloads received
      references: 0,       // ... of which references
      listening: 0,        // channels LISTENed now
      walInserts: 0,       // hx_event inserts decoded (every stream's)
      walEvents: 0,        // ... of followed streams
      resyncs: 0,
      overflows: 0,
      disconnects: 0,
      reconnects: 0,
      errors: 0,
    };
  }

  /** 'wal' or 'listen': the transport in use (null before start). */
  get transport() { return this._transport; }
  /** Why 'auto' chose LISTEN (null when it chose the WAL or was not asked to choose). */
  get transportReason() { return this._transportReason; }
  /** Are the reader and the transport connected now? */
  get connected() {
    return !!(this._reader && this._reader.alive && this._tx && this._tx.conn.alive);
  }
  /** The temporary replication slot in use (WAL transport), else null. */
  get slot() { return this._tx && this._tx.wal ? this._tx.wal.slot : null; }
  /** The subscriptions now. */
  get subscriptions() { return [...this._subs]; }

  // -------------------------------------------------------------------
  // Life cycle
  // -------------------------------------------------------------------

  /**
   * Connect, choose the transport, and start following; resolves once
   * connected.  Rejects (and cleans up) when that first attempt fails;
   * afterwards failures are retried with no limit.  Calling it again
   * returns the same promise.
   */
  start() {
    if (this._starting) return this._starting;
    if (this._phase === 'stopped') return Promise.reject(new Error('HxHub: stopped'));
    this._phase = 'starting';
    this._starting = (async () => {
      try {
        await this._establish();
      } catch (err) {
        await this.stop();
        throw err;
      }
      if (this._phase !== 'starting') throw new Error('HxHub: stopped while starting');
      this._phase = 'running';
      this._schedulePoll();
      this._kick();
      if (!this.connected) { // lost while starting
        this._down = true;
        this._scheduleReconnect();
      }
    })();
    return this._starting;
  }

  /**
   * Stop: every subscription stops (no event is handed out after this),
   * timers are cleared and the connections closed; resolves when they are.
   */
  stop() {
    if (this._stopping) return this._stopping;
    this._phase = 'stopped';
    for (const sub of [...this._subs]) this._stopSub(sub, new Error('hxstate: subscription stopped (the hub stopped)'));
    clearTimeout(this._pollTimer);
    clearTimeout(this._reconnectTimer);
    clearTimeout(this._recheckTimer);
    for (const t of this._laterTimers) clearTimeout(t);
    this._laterTimers.clear();
    if (this._pumpHandle) {
      clearTimeout(this._pumpHandle);
      clearImmediate(this._pumpHandle);
    }
    this._pollTimer = this._reconnectTimer = this._recheckTimer = this._pumpHandle = null;
    const tx = this._tx;
    const reader = this._reader;
    this._tx = null;
    this._reader = null;
    if (tx) tx.up = false;
    this._stopping = (async () => {
      // The statement in flight finishes first (no new one starts: the hub
      // is stopped), so that each connection closes with a Terminate, not
      // by dropping its socket: the server then ends the backend before it
      // closes the socket, and stop() resolves with the backends gone.
      await settle(Promise.all([this._pumpDone, this._listenDone, this._establishing]), 2000);
      if (tx && tx.wal) await tx.wal.finish(2000);
      if (tx && tx.conn !== reader) this._close(tx.conn);
      if (reader) this._close(reader);
      // connections being opened are closed as soon as they are open, and
      // dropped ones too: stop() leaves no socket behind
      while (this._opening.size > 0 || this._closing.size > 0) {
        await Promise.all([...this._opening, ...this._closing]);
      }
    })();
    return this._stopping;
  }

  // -------------------------------------------------------------------
  // Following
  // -------------------------------------------------------------------

  /**
   * Follow a stream: target is {table, key} (the row's stream, whatever
   * stream= prefix its trigger has) or {stream} (a stream by name; without
   * a table it cannot read a snapshot, so it starts from the log: see the
   * README).  Options: after (a seq: start with the events after it, read
   * from the log, instead of a snapshot), base (the state at after),
   * state (keep and hand out states; default true, false with after and
   * no base), maxQueue, overflow ('log' | 'snapshot').
   * @returns {HxSubscription}
   */
  follow(target, options) {
    if (this._phase === 'stopped') throw new Error('HxHub: stopped');
    const sub = new HxSubscription(this, target || {}, options || {});
    this._subs.add(sub);
    this.stats.subscriptions = this._subs.size;
    sub._joinTick = ++this._tick;
    if (sub.table !== null && sub.key !== null) {
      const id = `${sub.table}\u0000${sub.key}`;
      let t = this._targets.get(id);
      if (!t) {
        t = { table: sub.table, key: sub.key, stream: null, subs: new Set() };
        this._targets.set(id, t);
      }
      t.subs.add(sub);
      sub._target = t;
      const entry = t.stream !== null ? this._entries.get(t.stream) : null;
      if (entry) {
        this._attach(sub, entry);
      } else {
        this._need(this._resolveQ, sub.table).add(sub.key);
        this._kick();
      }
    } else {
      const entry = this._entries.get(sub.stream);
      if (entry) {
        this._attach(sub, entry);
      } else {
        this._need(this._streamWaits, sub.stream).add(sub);
        this._channelQ.add(sub.stream);
        this._kick();
      }
    }
    return sub;
  }

  /** Stop a subscription (the same as sub.stop()). */
  unfollow(sub) {
    if (!sub || sub._hub !== this || sub._phase === 'stopped') return;
    this._stopSub(sub, new Error('hxstate: subscription stopped'));
  }

  _need(map, k) {
    let s = map.get(k);
    if (!s) {
      s = new Set();
      map.set(k, s);
    }
    return s;
  }

  _stopSub(sub, why) {
    if (sub._phase === 'stopped') return;
    sub._phase = 'stopped';
    sub._queue = [];
    sub._queued = 0;
    if (!sub._readyDone) sub._rejectReady(sub._failure || why);
    this._subs.delete(sub);
    this.stats.subscriptions = this._subs.size;
    const t = sub._target;
    if (t) {
      t.subs.delete(sub);
      if (t.subs.size === 0) this._targets.delete(`${t.table}\u0000${t.key}`);
    }
    const waits = sub.stream !== null ? this._streamWaits.get(sub.stream) : null;
    if (waits) {
      waits.delete(sub);
      if (waits.size === 0) this._streamWaits.delete(sub.stream);
    }
    const entry = sub._entry;
    if (entry) {
      entry.subs.delete(sub);
      if (entry.subs.size === 0) this._dropEntry(entry);
    }
  }

  /** A subscription that cannot go on: 'error', then stopped (ready rejects with err). */
  _failSub(sub, err) {
    if (sub._phase === 'stopped') return;
    sub._failure = err;
    sub._emitError(err);
    this._stopSub(sub, err);
  }

  // -------------------------------------------------------------------
  // Streams (entries)
  // -------------------------------------------------------------------

  _entryFor(stream, channel, table, key) {
    let entry = this._entries.get(stream);
    if (!entry) {
      entry = {
        stream, channel, table, key,
        subs: new Set(),
        seen: 0,          // the highest seq known to exist
        armed: false,     // events after now will come through the transport
        memo: null,       // {event, before, after}: one delta applied once for every subscription
      };
      this._entries.set(stream, entry);
      this.stats.streams = this._entries.size;
      this._need(this._channels, channel).add(entry);
      this._armNew(entry);
    } else if (entry.table === null && table !== null) {
      entry.table = table;
      entry.key = key;
    }
    return entry;
  }

  _dropEntry(entry) {
    this._entries.delete(entry.stream);
    this.stats.streams = this._entries.size;
    this._snapQ.delete(entry);
    this._catchQ.delete(entry);
    this._headsQ.delete(entry);
    this._recheck.delete(entry);
    const set = this._channels.get(entry.channel);
    if (set) {
      set.delete(entry);
      if (set.size === 0) {
        this._channels.delete(entry.channel);
        this._listenQ.delete(entry.channel);
        if (this._tx && this._tx.kind === 'listen' && this._tx.listening.has(entry.channel)) {
          this._unlistenQ.add(entry.channel);
          this._kickListen();
        }
      }
    }
  }

  /** A new entry: armed at once under the WAL, after its LISTEN otherwise. */
  _armNew(entry) {
    const tx = this._tx;
    if (!tx || !tx.up) return;
    if (tx.kind === 'wal' || tx.listening.has(entry.channel)) {
      this._unlistenQ.delete(entry.channel); // an UNLISTEN not sent yet: keep listening
      entry.armed = true;
    } else {
      this._unlistenQ.delete(entry.channel);
      this._listenQ.add(entry.channel);
      this._kickListen();
    }
  }

  _attach(sub, entry) {
    sub._entry = entry;
    sub.stream = entry.stream;
    sub.channel = entry.channel;
    entry.subs.add(sub);
    if (sub._after !== null) {
      sub._phase = 'live';
      sub._force = true; // it does not know the head: read the log after its seq
    } else if (entry.table !== null) {
      sub._phase = 'snapshot';
    } else {
      // {stream} alone: no snapshot; the state builds up from the log's
      // first event (an insert's STATE_SNAPSHOT)
      sub._phase = 'live';
      sub._started = true;
      sub._force = true;
    }
    this._check(sub);
  }

  /** The entries became armed: snapshots may be read, and the log after each cursor. */
  _armed(entries) {
    for (const entry of entries) {
      if (!this._entries.has(entry.stream) || entry.armed) continue;
      entry.armed = true;
      // a subscription that has a position may have missed events while
      // unarmed: rule 4 (those waiting for a snapshot need no head)
      for (const sub of entry.subs) {
        if (sub._phase === 'live') {
          this._headsQ.add(entry);
          break;
        }
      }
      for (const sub of entry.subs) this._check(sub);
    }
    this._kick();
  }

  _disarmAll() {
    for (const entry of this._entries.values()) {
      entry.armed = false;
      this._unrequestSnapshot(entry);
    }
    this._snapQ.clear(); // requested again once armed
  }

  /** Snapshot requests of the entry that were not sent: to be made again. */
  _unrequestSnapshot(entry) {
    for (const sub of entry.subs) if (sub._phase === 'snapshot' && sub._snapTick === 0) sub._snapTick = -1;
  }

  // -------------------------------------------------------------------
  // Events in
  // -------------------------------------------------------------------

  /** An event from the transport. */
  _onEvent(stream, seq, event, via) {
    const entry = this._entries.get(stream);
    if (!entry) return;
    if (seq > entry.seen) entry.seen = seq;
    for (const sub of entry.subs) {
      if (via === 'notify') sub.stats.notifications++;
      else sub.stats.walEvents++;
      this._offer(sub, seq, event);
    }
  }

  /** A reference: the event is in the log. */
  _onReference(stream, seq) {
    const entry = this._entries.get(stream);
    if (!entry) return;
    if (seq > entry.seen) entry.seen = seq;
    for (const sub of entry.subs) {
      sub.stats.notifications++;
      sub.stats.references++;
      this._check(sub);
    }
  }

  /** Something on a channel that we cannot read: the log has whatever it announced. */
  _onUnknown(channel) {
    const set = this._channels.get(channel);
    if (!set) return;
    for (const entry of set) {
      for (const sub of entry.subs) {
        sub.stats.notifications++;
        if (sub._phase === 'live') sub._force = true;
        this._check(sub);
      }
    }
  }

  /** Rule 2 for one subscription and one event. */
  _offer(sub, seq, event) {
    if (sub._phase !== 'live' || seq <= sub._seq) return;
    if (seq === sub._seq + 1) {
      if (sub._queued < sub._maxQueue) {
        this._accept(sub, seq, event);
      } else {
        this._overflow(sub);
      }
    }
    this._check(sub);
  }

  /** Its queue is full and an event came. */
  _overflow(sub) {
    sub.stats.overflows++;
    this.stats.overflows++;
    if (sub._overflow === 'log') {
      sub._held = true;
      return;
    }
    // 'snapshot': drop what waits, go back to what was handed out, and
    // read a fresh snapshot once the consumer is done with its event
    sub._queue = sub._queue.filter((item) => item.kind !== 'event');
    sub._queued = 0;
    if (!sub._readyDone) sub._readyQueued = false;
    sub._queue = sub._queue.filter((item) => item.kind !== 'ready');
    sub._seq = sub.seq;
    sub._state = sub.state;
    sub._ended = sub.ended;
    sub._more = sub._force = false;
    sub._phase = 'paused';
    sub._resyncReason = 'overflow';
  }

  /** Accept the next event: the state after it, queued for the consumer. */
  _accept(sub, seq, event) {
    const before = sub._state;
    let after;
    if (sub._keepState) {
      const entry = sub._entry;
      const m = entry.memo;
      if (m && m.event === event && m.before === before) {
        after = m.after;
      } else {
        try {
          after = applyEvent(before, event);
        } catch (err) {
          err.message = `hxstate: event ${seq} of ${sub.stream} does not apply: ${err.message}`;
          this._error(err, sub);
          this._resync(sub, 'invalid');
          return;
        }
        entry.memo = { event, before, after };
      }
    }
    const end = isStreamEnd(event);
    sub._seq = seq;
    sub._state = after;
    if (end) sub._ended = true;
    else if (event.type === 'STATE_SNAPSHOT') sub._ended = false;
    sub._push({ kind: 'event', seq, event, state: after, ended: sub._ended, end, before: end ? before : undefined });
  }

  /** Read a fresh snapshot (rule 3). */
  _resync(sub, reason) {
    const entry = sub._entry;
    if (entry.table === null) {
      const err = new Error(`hxstate: the log of ${sub.stream} no longer holds seq ${sub._seq + 1}, ` +
        'and a subscription by stream name cannot read a snapshot: follow {table, key} to resync');
      err.code = 'HX_TRIMMED';
      this._failSub(sub, err);
      return;
    }
    sub._phase = 'snapshot';
    sub._resyncReason = reason;
    sub._more = sub._force = false;
    this._check(sub);
  }

  /**
   * What a subscription needs next, requested (batched) if it needs
   * anything: a snapshot, a log read, or nothing (then it is ready).
   */
  _check(sub) {
    const entry = sub._entry;
    if (!entry || this._phase === 'stopped') return;
    switch (sub._phase) {
      case 'paused':
        if (sub._queue.length === 0 && !sub._inflight) {
          sub._phase = 'snapshot';
          this._check(sub);
        }
        return;
      case 'snapshot':
        if (!entry.armed || sub._snapTick >= 0) return;
        if (!sub._started) {
          // a sibling that follows the stream live has an exact state at
          // its cursor, and the stream is armed: start from there, no read
          for (const sib of entry.subs) {
            if (sib !== sub && sib._phase === 'live' && sib._exact && !sib._ended && sib._keepState) {
              this._takeSnapshot(sub, sib._seq, sib._state, null);
              return;
            }
          }
        }
        if (sub._queued < sub._maxQueue) {
          sub._snapTick = 0; // requested; the request's tick is set when it is sent
          this._snapQ.add(entry);
          this._kick();
        }
        return;
      case 'live': {
        if (sub._queued > sub._lowWater) return; // its consumer first
        sub._held = false;
        if (sub._force || sub._more || entry.seen > sub._seq) {
          this._catchQ.add(entry);
          this._kick();
        } else if (!sub._readyQueued && sub._synced) {
          sub._readyQueued = true;
          sub._push({ kind: 'ready' });
        }
        return;
      }
      default:
    }
  }

  /** The subscription handed something out: it may want more now. */
  _delivered(sub) {
    const entry = sub._entry;
    if (!entry) return;
    switch (sub._phase) {
      case 'paused':
        this._check(sub);
        break;
      case 'snapshot':
        if (sub._snapTick < 0) this._check(sub);
        break;
      case 'live':
        if (sub._queued <= sub._lowWater && (sub._held || sub._more || sub._force || entry.seen > sub._seq)) {
          this._check(sub);
        }
        break;
      default:
    }
  }

  // -------------------------------------------------------------------
  // The reader's pump: batched queries
  // -------------------------------------------------------------------

  _kick() {
    if (this._pumping || this._pumpHandle || this._phase === 'stopped' || this._phase === 'idle') return;
    if (!this._reader || !this._reader.alive) return;
    const run = () => {
      this._pumpHandle = null;
      this._pumpDone = this._pump().catch((err) => this._error(err));
    };
    this._pumpHandle = this._o.batchDelay > 0 ? setTimeout(run, this._o.batchDelay) : setImmediate(run);
  }

  async _pump() {
    if (this._pumping) return;
    this._pumping = true;
    try {
      for (;;) {
        if (this._phase === 'stopped') return;
        const conn = this._reader;
        if (!conn || !conn.alive) return;
        const job = this._nextJob();
        if (!job) return;
        try {
          await job(conn);
        } catch (err) {
          if (this._phase === 'stopped') return;
          if (isConnectionError(err) || !conn.alive) {
            this._lost(conn, err);
            return;
          }
          // a statement failed on a working connection: start over on a new one
          this._error(err);
          this._lost(conn, err);
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
      else if (kind === 'resolve') job = this._resolveJob();
      else job = this._headsJob();
      if (job) {
        this._rr = (this._rr + i + 1) % this._kinds.length;
        return job;
      }
    }
    return null;
  }

  async _query(conn, text, values) {
    this.stats.queries++;
    return conn.client.query(text, values);
  }

  // -- names and channels ----------------------------------------------

  _resolveJob() {
    if (this._resolveQ.size > 0) {
      const [table, keys] = this._resolveQ.entries().next().value;
      const batch = [];
      for (const k of keys) {
        batch.push(k);
        keys.delete(k);
        if (batch.length >= this._o.batchSize) break;
      }
      if (keys.size === 0) this._resolveQ.delete(table);
      return (conn) => this._runResolve(conn, table, batch);
    }
    if (this._channelQ.size > 0) {
      const batch = [];
      for (const s of this._channelQ) {
        batch.push(s);
        this._channelQ.delete(s);
        if (batch.length >= this._o.batchSize) break;
      }
      return (conn) => this._runChannels(conn, batch);
    }
    return null;
  }

  async _runResolve(conn, table, keys) {
    let rows;
    try {
      this.stats.nameReads++;
      ({ rows } = await this._query(conn,
        `SELECT s.key, s.stream, ${this._schema}.hx_stream_channel(s.stream) AS channel
           FROM ${this._schema}.hx_stream_snapshots($1::regclass, $2::text[]) s`, [table, keys]));
    } catch (err) {
      if (isConnectionError(err) || !conn.alive) {
        for (const k of keys) this._need(this._resolveQ, table).add(k);
        throw err;
      }
      // a key its type rejects fails the whole batch: halve it until the
      // bad keys stand alone; anything else fails every key of the table
      if (isDataError(err) && keys.length > 1) {
        const half = keys.length >> 1;
        await this._runResolve(conn, table, keys.slice(0, half));
        await this._runResolve(conn, table, keys.slice(half));
        return;
      }
      for (const key of keys) this._failTarget(table, key, err);
      return;
    }
    const found = new Map(rows.map((r) => [r.key, r]));
    for (const key of keys) {
      const t = this._targets.get(`${table}\u0000${key}`);
      if (!t || t.subs.size === 0) continue;
      const r = found.get(key);
      if (!r) {
        this._failTarget(table, key, new Error(`hxstate: no stream for key ${key} of ${table}`));
        continue;
      }
      t.stream = r.stream;
      const entry = this._entryFor(r.stream, r.channel, table, key);
      for (const sub of [...t.subs]) {
        if (sub._entry === null && sub._phase === 'resolving') this._attach(sub, entry);
      }
    }
  }

  _failTarget(table, key, err) {
    const t = this._targets.get(`${table}\u0000${key}`);
    if (!t) return;
    for (const sub of [...t.subs]) this._failSub(sub, err);
  }

  async _runChannels(conn, streams) {
    let rows;
    try {
      this.stats.nameReads++;
      ({ rows } = await this._query(conn,
        `SELECT s AS stream, ${this._schema}.hx_stream_channel(s) AS channel FROM unnest($1::text[]) s`, [streams]));
    } catch (err) {
      for (const s of streams) this._channelQ.add(s);
      throw err;
    }
    for (const r of rows) {
      const waits = this._streamWaits.get(r.stream);
      if (!waits) continue;
      this._streamWaits.delete(r.stream);
      const entry = this._entryFor(r.stream, r.channel, null, null);
      for (const sub of waits) if (sub._phase === 'resolving') this._attach(sub, entry);
    }
  }

  // -- snapshots -------------------------------------------------------

  _snapshotJob() {
    if (this._snapQ.size === 0) return null;
    let table = null;
    const batch = [];
    for (const entry of this._snapQ) {
      if (!this._entries.has(entry.stream) || !entry.armed || entry.table === null) {
        this._snapQ.delete(entry);
        this._unrequestSnapshot(entry);
        continue;
      }
      if (table === null) table = entry.table;
      if (entry.table !== table) continue;
      this._snapQ.delete(entry);
      batch.push(entry);
      if (batch.length >= this._o.batchSize) break;
    }
    if (batch.length === 0) return null;
    return (conn) => this._runSnapshots(conn, table, batch);
  }

  async _runSnapshots(conn, table, entries) {
    const tick = ++this._tick;
    // the subscriptions this read is for: those waiting for a snapshot now
    for (const entry of entries) {
      for (const sub of entry.subs) if (sub._phase === 'snapshot') sub._snapTick = tick;
    }
    let rows;
    try {
      // The state, the seq, and when the state is NULL the last event (is
      // the row gone, after hx.stream_end?), all in one statement: one
      // snapshot.
      this.stats.snapshotReads++;
      ({ rows } = await this._query(conn,
        `SELECT s.key, s.stream, s.seq, s.state,
                (SELECT e.event FROM ${this._schema}.hx_event e
                  WHERE s.state IS NULL AND s.seq > 0 AND e.stream = s.stream AND e.seq = s.seq) AS last
           FROM ${this._schema}.hx_stream_snapshots($1::regclass, $2::text[]) s`,
        [table, entries.map((e) => e.key)]));
    } catch (err) {
      if (isConnectionError(err) || !conn.alive) {
        for (const entry of entries) this._retrySnapshot(entry, tick);
        throw err;
      }
      if (isDataError(err) && entries.length > 1) {
        const half = entries.length >> 1;
        await this._runSnapshots(conn, table, entries.slice(0, half));
        await this._runSnapshots(conn, table, entries.slice(half));
        return;
      }
      // the table lost its trigger, say: a subscription that has not
      // started fails; one that has tries again after a while
      for (const entry of entries) {
        for (const sub of [...entry.subs]) {
          if (sub._snapTick !== tick) continue;
          if (!sub._started) this._failSub(sub, err);
        }
      }
      this._error(err);
      this._later(() => { for (const entry of entries) this._retrySnapshot(entry, tick); });
      return;
    }
    const byKey = new Map(rows.map((r) => [r.key, r]));
    for (const entry of entries) {
      if (this._entries.get(entry.stream) !== entry) continue;
      const r = byKey.get(entry.key);
      if (!r) { // hx_stream_snapshots gives a row per key: should not happen
        this._later(() => this._retrySnapshot(entry, tick));
        continue;
      }
      this.stats.snapshots++;
      const seq = Number(r.seq);
      if (seq > entry.seen) entry.seen = seq;
      for (const sub of [...entry.subs]) {
        if (sub._phase === 'snapshot' && sub._snapTick === tick) {
          this._takeSnapshot(sub, seq, r.state === undefined ? null : r.state, r.last || null);
        }
      }
      // subscriptions that started waiting after the read was sent ask again
      for (const sub of entry.subs) if (sub._phase === 'snapshot' && sub._snapTick !== tick) this._retrySnapshotSub(sub);
    }
  }

  _retrySnapshot(entry, tick) {
    for (const sub of entry.subs) if (sub._phase === 'snapshot' && sub._snapTick === tick) this._retrySnapshotSub(sub);
  }

  _retrySnapshotSub(sub) {
    sub._snapTick = -1;
    this._check(sub);
  }

  /** Start (again) from a snapshot: seq, state, and the last event when the state is NULL. */
  _takeSnapshot(sub, seq, state, last) {
    sub._snapTick = -1;
    if (sub._started && seq < sub._seq) { // older than what it has: read again
      this._check(sub);
      return;
    }
    const initial = !sub._started;
    const previousSeq = sub._seq;
    const ended = isStreamEnd(last);
    sub._started = true;
    sub._seq = seq;
    sub._state = sub._keepState ? (ended ? null : state) : undefined;
    sub._ended = ended;
    sub._phase = 'live';
    sub._synced = true;
    sub._exact = sub._keepState;
    sub._more = sub._force = false;
    let resync;
    if (!initial) {
      sub.stats.resyncs++;
      this.stats.resyncs++;
      resync = { seq, previousSeq, state: ended ? null : state, reason: sub._resyncReason || 'trimmed' };
    }
    sub._resyncReason = null;
    const event = ended ? last : syntheticSnapshot(sub.stream, seq, state);
    sub._push({ kind: 'event', seq, event, state: sub._state, ended, end: ended, before: null, resync });
    if (!sub._readyQueued) {
      sub._readyQueued = true;
      sub._push({ kind: 'ready' });
    }
    this._check(sub);
  }

  // -- the log -----------------------------------------------------------

  _catchupJob() {
    if (this._catchQ.size === 0) return null;
    const batch = [];
    for (const entry of this._catchQ) {
      this._catchQ.delete(entry);
      if (this._entries.get(entry.stream) !== entry) continue;
      // the lowest cursor of the subscriptions that want to read
      let after = Infinity;
      for (const sub of entry.subs) {
        if (sub._phase !== 'live' || sub._queued > sub._lowWater) continue;
        if (sub._force || sub._more || entry.seen > sub._seq) after = Math.min(after, sub._seq);
      }
      if (after === Infinity) continue;
      batch.push({ entry, after });
      if (batch.length >= this._o.batchSize) break;
    }
    if (batch.length === 0) return null;
    // at most batchEvents rows in all: the page per stream shrinks with the batch
    const limit = Math.max(1, Math.min(this._o.pageSize, Math.floor(this._o.batchEvents / batch.length)));
    return (conn) => this._runCatchup(conn, batch, limit);
  }

  async _runCatchup(conn, batch, limit) {
    const tick = ++this._tick;
    for (const b of batch) b.seen = b.entry.seen;
    let rows;
    try {
      ({ rows } = await this._query(conn,
        `SELECT stream, seq, event FROM ${this._schema}.hx_stream_events_after($1::text[], $2::int8[], $3)`,
        [batch.map((b) => b.entry.stream), batch.map((b) => String(b.after)), limit]));
    } catch (err) {
      for (const b of batch) this._catchQ.add(b.entry);
      throw err;
    }
    this.stats.pages++;
    const byStream = new Map();
    for (const r of rows) {
      let list = byStream.get(r.stream);
      if (!list) {
        list = [];
        byStream.set(r.stream, list);
      }
      list.push({ seq: Number(r.seq), event: r.event });
    }
    for (const b of batch) {
      const entry = b.entry;
      if (this._entries.get(entry.stream) !== entry) continue;
      const list = byStream.get(entry.stream) || [];
      const top = list.length > 0 ? list[list.length - 1].seq : b.after;
      if (top > entry.seen) entry.seen = top;
      for (const sub of [...entry.subs]) this._applyPage(sub, b, list, limit, tick);
      // The log ended below a seq we were told exists (a head, a
      // notification): decoding can announce a commit a moment before it
      // is visible, and a stray notification can announce anything.  Take
      // the log's word for now and look again shortly.
      if (list.length < limit && entry.seen > top && entry.seen === b.seen) {
        entry.seen = top;
        this._recheckSoon(entry);
      }
      for (const sub of entry.subs) this._check(sub);
    }
  }

  /** Rule 2 and 3 over one page of the log, for one subscription. */
  _applyPage(sub, b, list, limit, tick) {
    if (sub._phase !== 'live') return;
    if (sub._seq < b.after) { // it moved back (a resync older than the read): read again
      sub._force = true;
      return;
    }
    sub.stats.pages++;
    let hole = false;
    let full = false;
    for (const row of list) {
      if (row.seq <= sub._seq) continue;
      if (row.seq !== sub._seq + 1) {
        hole = true;
        break;
      }
      if (sub._queued >= sub._maxQueue) {
        full = true;
        break;
      }
      this._accept(sub, row.seq, row.event);
      if (sub._phase !== 'live') return; // did not apply: resyncing
    }
    if (sub._joinTick < tick) sub._synced = true;
    sub._force = false;
    if (hole) {
      this._resync(sub, 'trimmed');
      return;
    }
    const top = list.length > 0 ? list[list.length - 1].seq : b.after;
    sub._more = full || (list.length >= limit && sub._seq >= top);
  }

  _recheckSoon(entry) {
    this._recheck.add(entry);
    if (this._recheckTimer || this._phase === 'stopped') return;
    this._recheckTimer = setTimeout(() => {
      this._recheckTimer = null;
      for (const e of this._recheck) if (this._entries.get(e.stream) === e) this._headsQ.add(e);
      this._recheck.clear();
      this._kick();
    }, 100);
  }

  // -- heads -------------------------------------------------------------

  _headsJob() {
    if (this._headsQ.size === 0) return null;
    const batch = [];
    for (const entry of this._headsQ) {
      this._headsQ.delete(entry);
      if (this._entries.get(entry.stream) !== entry) continue;
      batch.push(entry);
      if (batch.length >= this._o.headsBatch) break;
    }
    if (batch.length === 0) return null;
    return (conn) => this._runHeads(conn, batch);
  }

  async _runHeads(conn, entries) {
    const tick = ++this._tick;
    let rows;
    try {
      this.stats.headReads++;
      ({ rows } = await this._query(conn,
        `SELECT stream, seq FROM ${this._schema}.hx_stream_heads($1::text[])`, [entries.map((e) => e.stream)]));
    } catch (err) {
      for (const e of entries) this._headsQ.add(e);
      throw err;
    }
    const heads = new Map(rows.map((r) => [r.stream, Number(r.seq)]));
    for (const entry of entries) {
      if (this._entries.get(entry.stream) !== entry) continue;
      const head = heads.get(entry.stream) || 0;
      if (head > entry.seen) entry.seen = head;
      for (const sub of [...entry.subs]) {
        if (sub._joinTick < tick) sub._synced = true;
        this._check(sub);
      }
    }
  }

  /** Heads of every followed stream, now (rule 4). */
  _pollAll() {
    for (const entry of this._entries.values()) this._headsQ.add(entry);
    this._kick();
  }

  /**
   * ms between polls: the option, else 2000 over LISTEN (which loses what
   * it is not sent, and drops notifications when its queue fills) and
   * 10000 over the WAL (which loses nothing while connected: there the
   * poll is a safety net, and after a reconnect the heads are read anyway).
   */
  get _pollEvery() {
    if (this._o.pollInterval !== null) return this._o.pollInterval;
    return this._transport === 'wal' ? 10000 : 2000;
  }

  _schedulePoll() {
    if (this._phase !== 'running' || !(this._pollEvery > 0) || this._pollTimer) return;
    this._pollTimer = setTimeout(() => {
      this._pollTimer = null;
      this.stats.polls++;
      this._pollAll();
      this._schedulePoll();
    }, this._pollEvery);
  }

  // -------------------------------------------------------------------
  // Connections
  // -------------------------------------------------------------------

  async _config(role) {
    const option = this._o.pg;
    let c = typeof option === 'function' ? await option(role) : option;
    if (typeof c === 'string') c = { connectionString: c };
    c = {
      keepAlive: true, // notice half-open connections (a transport is mostly idle)
      fallback_application_name: this._o.applicationName,
      ...(c || {}),
    };
    if (role === 'replication') c.replication = 'database';
    return c;
  }

  /** Open a connection; stop() waits for opens in flight. */
  _open(role) {
    const opening = this._openNow(role);
    const settled = opening.then(noop, noop);
    this._opening.add(settled);
    settled.then(() => this._opening.delete(settled));
    return opening;
  }

  async _openNow(role) {
    const client = new pg.Client(await this._config(role));
    const conn = { role, client, alive: false };
    // The listeners stay for the client's lifetime: an 'error' without a
    // listener would crash the process.  _lost ignores dead connections.
    client.on('error', (err) => this._lost(conn, err));
    client.on('end', () => this._lost(conn, new Error('hxstate: connection closed')));
    try {
      await client.connect();
    } catch (err) {
      this._close(conn);
      throw err;
    }
    if (this._phase === 'stopped') {
      this._close(conn);
      throw new Error('HxHub: stopped');
    }
    conn.alive = true;
    this.stats.connections++;
    if (this.stats.connections > this.stats.maxConnections) this.stats.maxConnections = this.stats.connections;
    return conn;
  }

  /** Close a connection; stop() waits for it. */
  _close(conn) {
    if (conn.alive) {
      conn.alive = false;
      this.stats.connections--;
    }
    const closing = conn.client.end().catch(noop);
    this._closing.add(closing);
    closing.then(() => this._closing.delete(closing));
  }

  _closeTx() {
    const tx = this._tx;
    this._tx = null;
    if (!tx) return;
    tx.up = false;
    this.stats.listening = 0;
    if (tx.wal) tx.wal.close();
    if (tx.conn !== this._reader) this._close(tx.conn);
    this._disarmAll();
  }

  /** A connection failed or ended: forget it, and reconnect what is missing. */
  _lost(conn, err) {
    if (!conn.alive) return;
    this._close(conn);
    if (this._phase === 'stopped') return;
    if (this._tx && this._tx.conn === conn) this._closeTx();
    if (this._reader === conn) this._reader = null;
    if (this._phase !== 'running') return; // start() reports it
    this._down = true;
    this.stats.disconnects++;
    this._emitSafe('disconnect', err, conn.role);
    this._error(err);
    this._scheduleReconnect();
  }

  /**
   * Reconnect what is missing, after a backoff delay; one attempt at a
   * time (a second lost connection while an attempt runs waits for it, so
   * no connection is ever opened twice).
   */
  _scheduleReconnect() {
    if (this._phase !== 'running' || this._reconnectTimer || this._establishing) return;
    const { min, max } = this._o.reconnect;
    const base = Math.min(max, min * 2 ** Math.min(this._attempt, 30));
    const delay = base / 2 + (Math.random() * base) / 2;
    this._attempt++;
    this._reconnectTimer = setTimeout(() => {
      this._reconnectTimer = null;
      this._establishing = this._establish().then(() => {
        if (this._phase !== 'running' || !this.connected) return;
        this._attempt = 0;
        if (this._down) {
          this._down = false;
          this.stats.reconnects++;
          this._emitSafe('reconnect');
        }
      }, (err) => {
        if (this._phase === 'running') this._error(err);
      }).then(() => {
        this._establishing = null;
        if (this._phase === 'running' && !this.connected) this._scheduleReconnect();
      });
    }, delay);
  }

  /** Later, after the reconnect backoff's longest delay: retries of failed statements. */
  _later(fn) {
    const t = setTimeout(() => {
      this._laterTimers.delete(t);
      if (this._phase === 'running') fn();
    }, this._o.reconnect.max);
    this._laterTimers.add(t);
  }

  /** Open whatever is missing: the reader, then the transport. */
  async _establish() {
    if (!this._reader || !this._reader.alive) {
      const conn = await this._open(this._o.sharedConnection ? 'listen' : 'reader');
      try {
        // every time: a reconnect may reach another server (a failover)
        await this._checkExtension(conn);
      } catch (err) {
        this._close(conn);
        throw err;
      }
      if (this._phase === 'stopped') {
        this._close(conn);
        throw new Error('HxHub: stopped');
      }
      this._reader = conn;
    }
    if (!this._tx) await this._openTransport();
    this._kick();
  }

  async _checkExtension(conn) {
    const { rows } = await conn.client.query(
      `SELECT e.extversion, n.nspname FROM pg_catalog.pg_extension e
         JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'hxstate'`);
    if (rows.length === 0) throw new Error('HxHub: the hxstate extension is not installed in this database');
    if (!versionAtLeast(rows[0].extversion, MIN_VERSION)) {
      throw new Error(`HxHub: hxstate ${rows[0].extversion} is too old: 0.5.0 or later is needed ` +
        '(ALTER EXTENSION hxstate UPDATE)');
    }
    this._schemaName = rows[0].nspname;
    this._schema = quoteIdent(rows[0].nspname);
  }

  /**
   * Why the WAL transport cannot be used here (null: it can): wal_level,
   * max_wal_senders, the role's REPLICATION attribute, the publication.
   */
  async _walBlocker(conn) {
    const { rows } = await conn.client.query(
      `SELECT current_setting('wal_level') AS wal_level,
              current_setting('max_wal_senders')::int AS senders,
              current_user AS role,
              (SELECT r.rolreplication OR r.rolsuper FROM pg_catalog.pg_roles r
                WHERE r.rolname = current_user) AS replication,
              EXISTS (SELECT 1 FROM pg_catalog.pg_publication p WHERE p.pubname = $1) AS publication,
              EXISTS (SELECT 1 FROM pg_catalog.pg_publication_tables t
                       WHERE t.pubname = $1 AND t.schemaname = $2
                         AND (t.tablename = 'hx_event' OR t.tablename ~ '^hx_event_[0-9]+$')) AS publishes`,
      [this._o.publication, this._schemaName]);
    const r = rows[0];
    const pub = this._o.publication;
    if (r.wal_level !== 'logical') return `wal_level is ${r.wal_level}, not logical`;
    if (!(r.senders > 0)) return 'max_wal_senders is 0';
    if (!r.replication) return `role "${r.role}" has no REPLICATION attribute`;
    if (!r.publication) return `publication "${pub}" does not exist (SELECT hx_stream_publication() creates it)`;
    if (!r.publishes) return `publication "${pub}" does not publish hx_event`;
    return null;
  }

  async _openTransport() {
    let kind = this._o.transport;
    let reason = null;
    if (kind !== 'listen') {
      const blocker = await this._walBlocker(this._reader);
      if (blocker) {
        if (kind === 'wal') throw new Error(`HxHub: cannot follow over the WAL: ${blocker}`);
        kind = 'listen';
        reason = `${blocker}: following over LISTEN`;
      }
    }
    if (kind !== 'listen') {
      try {
        await this._openWal();
        this._setTransport('wal', null);
        return;
      } catch (err) {
        const refused = err.code === 'HX_SLOT_TIMEOUT' || !isConnectionError(err);
        if (this._o.transport === 'wal' || !refused || this._phase === 'stopped') throw err;
        // the server refused the replication connection or the slot
        // (pg_hba.conf, max_replication_slots, ...), or the slot took too
        // long: LISTEN instead, until the next reconnect tries again
        kind = 'listen';
        reason = `the WAL transport failed (${err.message}): following over LISTEN`;
      }
    }
    await this._openListen();
    this._setTransport('listen', reason);
  }

  _setTransport(kind, reason) {
    const changed = this._transport !== kind || this._transportReason !== reason;
    this._transport = kind;
    this._transportReason = reason;
    if (changed) this._emitSafe('transport', { transport: kind, reason });
  }

  async _openWal() {
    const conn = await this._open('replication');
    let tx;
    try {
      const wal = new WalStream(conn.client, {
        publication: this._o.publication,
        schema: this._schemaName,
        statusInterval: this._o.statusInterval,
        onInsert: (stream, seq, event) => this._onWalInsert(stream, seq, event),
        onError: (err) => this._lost(conn, err),
      });
      // Creating a logical slot waits until every transaction that holds
      // a transaction id when it starts has ended: a long transaction can
      // hold it back indefinitely.  Give up after slotTimeout (closing the
      // connection ends the attempt, and its slot with it).
      let timer;
      const timeout = new Promise((resolve, reject) => {
        timer = setTimeout(() => {
          const err = new Error(`the replication slot was not ready within ${this._o.slotTimeout} ms ` +
            '(a long transaction holds it back)');
          err.code = 'HX_SLOT_TIMEOUT';
          reject(err);
        }, this._o.slotTimeout);
      });
      const creating = wal.createSlot();
      creating.catch(noop); // after a timeout, its failure is the closed connection's
      try {
        await Promise.race([creating, timeout]);
      } finally {
        clearTimeout(timer);
      }
      if (this._phase === 'stopped' || !conn.alive) throw new Error('HxHub: stopped');
      tx = { kind: 'wal', conn, wal, listening: null, up: true };
      this._tx = tx;
      wal.start();
    } catch (err) {
      if (!tx) this._close(conn);
      throw err;
    }
    // rule 1: from the slot's consistent point on, every commit is streamed
    this._armed([...this._entries.values()]);
  }

  _onWalInsert(streamBuf, seqBuf, eventBuf) {
    this.stats.walInserts++;
    const stream = streamBuf.toString('utf8');
    if (!this._entries.has(stream)) return; // not followed: not even parsed
    this.stats.walEvents++;
    let event;
    try {
      event = JSON.parse(eventBuf.toString('utf8'));
    } catch (err) {
      return; // cannot happen for jsonb; the log has it anyway
    }
    this._onEvent(stream, Number(seqBuf.toString('latin1')), event, 'wal');
  }

  async _openListen() {
    const conn = this._o.sharedConnection ? this._reader : await this._open('listen');
    const tx = { kind: 'listen', conn, wal: null, listening: new Set(), up: true };
    conn.client.on('notification', (msg) => {
      if (this._tx === tx) this._onNotification(msg);
    });
    this._tx = tx;
    this._unlistenQ.clear();
    for (const channel of this._channels.keys()) this._listenQ.add(channel);
    this._kickListen();
  }

  _onNotification(msg) {
    this.stats.notifications++;
    let payload = null;
    try {
      payload = JSON.parse(msg.payload);
    } catch (err) {
      // not ours to interpret: the log has whatever it announced
    }
    if (payload && payload.ref === true && typeof payload.stream === 'string' && Number.isSafeInteger(payload.seq)) {
      this.stats.references++;
      this._onReference(payload.stream, payload.seq);
      return;
    }
    const meta = payload && payload.metadata;
    if (meta && typeof meta.stream === 'string' && Number.isSafeInteger(meta.seq) && payload.ref === undefined) {
      this._onEvent(meta.stream, meta.seq, payload, 'notify');
      return;
    }
    this._onUnknown(msg.channel);
  }

  // -- LISTEN / UNLISTEN ---------------------------------------------------

  _kickListen() {
    if (this._listenPumping || !this._tx || this._tx.kind !== 'listen' || this._phase === 'stopped') return;
    this._listenDone = this._pumpListen().catch((err) => this._error(err));
  }

  /** LISTEN and UNLISTEN in batches: one simple-protocol query of many statements each. */
  async _pumpListen() {
    this._listenPumping = true;
    try {
      for (;;) {
        const tx = this._tx;
        if (!tx || tx.kind !== 'listen' || !tx.conn.alive || this._phase === 'stopped') return;
        const q = this._unlistenQ.size > 0 ? this._unlistenQ : this._listenQ;
        if (q.size === 0) return;
        const verb = q === this._unlistenQ ? 'UNLISTEN' : 'LISTEN';
        const batch = [];
        for (const c of q) {
          q.delete(c);
          batch.push(c);
          if (batch.length >= this._o.batchSize) break;
        }
        try {
          await tx.conn.client.query(batch.map((c) => `${verb} ${quoteIdent(c)}`).join(';'));
        } catch (err) {
          for (const c of batch) q.add(c);
          if (this._tx === tx) this._lost(tx.conn, err);
          return;
        }
        if (this._tx !== tx) return;
        if (verb === 'UNLISTEN') {
          for (const c of batch) {
            tx.listening.delete(c);
            // followed again while the UNLISTEN was on its way: LISTEN again,
            // and until then the stream is not armed
            const set = this._channels.get(c);
            if (set) {
              for (const entry of set) entry.armed = false;
              this._listenQ.add(c);
            }
          }
          this.stats.listening = tx.listening.size;
          continue;
        }
        const armed = [];
        for (const c of batch) {
          tx.listening.add(c);
          this.stats.listening = tx.listening.size;
          const set = this._channels.get(c);
          if (set) for (const entry of set) armed.push(entry);
        }
        // rule 1: the channel is LISTENed; what commits from now on is announced
        this._armed(armed);
      }
    } finally {
      this._listenPumping = false;
    }
  }

  // -------------------------------------------------------------------
  // Emitting
  // -------------------------------------------------------------------

  _emitSafe(name, ...args) {
    if (this._phase === 'stopped') return;
    try {
      this.emit(name, ...args);
    } catch (err) {
      process.nextTick(() => { throw err; });
    }
  }

  /**
   * 'error' reports what the hub recovers from by itself (a lost
   * connection, a failed statement); only when someone listens.
   */
  _error(err, sub) {
    this.stats.errors++;
    if (sub) sub._emitError(err);
    if (this.listenerCount('error') > 0) this._emitSafe('error', err);
  }
}

module.exports = { HxHub, HxSubscription, isConnectionError };
