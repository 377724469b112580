'use strict';
// HxHub: follow any number of hxstate streams over at most three
// connections, with the per-stream guarantees of HxStream: a snapshot and
// its seq, then every seq exactly once and in order, gaps and hints filled
// from the log, a resync from a fresh snapshot when the log no longer
// holds the next event, hx.stream_end handed out like any event.
//
// The hub coordinates; the work is in modules of their own, each of which
// hears of the others only through the callbacks it is given (the reader's
// host, the link's host, a subscription core's host: see _readerHost,
// _linkHost and _coreHost below):
//   subscription.js  one follower: its core (cursor, queue, delivery), and
//                    the HxSubscription that follow() returns
//   cursor.js        the cursor rules, as pure functions
//   entry.js         one followed stream, shared by its subscriptions
//   reader.js        the batched reads (sql.js has every statement)
//   link.js          the connections (connections.js), their transport and
//                    their reconnects (backoff.js)
//   listen.js        the LISTEN transport; wal.js + pgoutput.js, the WAL's
//
// Connections (each opened with the config that options.pg gives for it):
//   - the reader runs every query (reader.js);
//   - the transport tells of events as they commit: a replication
//     connection decoding hx_event's inserts from the WAL (pgoutput, a
//     temporary slot), or a connection that LISTENs on every followed
//     stream's channel.  With sharedConnection (LISTEN only) the reader is
//     the transport too: one connection in all (HxStream's own hub does
//     this).
// A connection that is replaced is closed before its successor opens, so
// the hub never holds more than three (two in steady state).
//
// The rules every subscription follows (a "cursor" is the seq of the last
// event it accepted, with the state after it):
//   1. a stream is armed (its channel LISTENed, or the WAL slot made) before
//      its snapshot is read, so every event after the snapshot either comes
//      through the transport or is in the log;
//   2. the WAL carries the log's own rows: an event with seq <= cursor is
//      old news, seq == cursor + 1 is accepted, a higher one means: read
//      the log after the cursor (a catch-up, batched with the other
//      streams');
//   3. a notification is only a hint, whatever its payload (any role that
//      can connect can NOTIFY): the seq it names, if any, is known to
//      exist, and the events themselves are read from the log; a payload
//      that names no seq of the channel's stream costs a read of the
//      stream's head;
//   4. a log read that does not continue from cursor + 1 (trimmed, or an
//      event deleted) means a resync: a fresh snapshot, announced by
//      'resync' and handed out as a synthetic STATE_SNAPSHOT;
//   5. after the transport (re)connects, the heads of all followed streams
//      are read (one query), and every stream behind its head catches up;
//      the same poll runs every pollInterval ms and catches whatever a
//      transport missed (payload=none under LISTEN, a notification queue
//      above hxstate.notify_queue_threshold, an unlucky race);
//   6. after the reader (re)connects, which may be to another server (a
//      failover), a subscription takes nothing more until it has read the
//      log at its cursor's seq and found there the event it accepted: a
//      commit the old primary showed and the new one lost means a resync
//      (reason 'diverged'), to a snapshot that may be older than its
//      cursor.
// All cursor updates run synchronously in the event loop (a query result
// or a transport message is applied in one go), so events from the
// transport and from the log can interleave in any order: rule 2 sorts
// them out.
//
// Delivery and backpressure: each subscription has its own queue of
// accepted events, delivered to its 'event' listeners one at a time; a
// listener may return a promise, and the next event waits for it.  The
// queue never holds more than maxQueue events, nor (but for one event
// alone) more than maxQueueBytes bytes:
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
const sql = require('./sql');
const { StreamEntry } = require('./entry');
const { SubscriptionCore, HxSubscription, markOfRow } = require('./subscription');
const { Drainer } = require('./drainer');
const { Reader } = require('./reader');
const { Link } = require('./link');
const { isConnectionError } = require('./errors');
const { emitSafe, emitError, warnUnheard } = require('./emit');
const { holdbackProblem } = require('./holdback');
const { DECODERS } = require('./decoder');

/** The longest a hub leaves its replication socket unread (coalesceMs). */
const MAX_COALESCE_MS = 1000;

// reads of a log that ends below a subscription's resume point before it is judged (_aheadOf)
const AHEAD_CHECKS = 8;

const DEFAULTS = {
  transport: 'auto',
  decoder: 'auto',
  coalesceMs: 0,
  publication: 'hxstate_events',
  pollInterval: null,   // 2000 over LISTEN, 10000 over the WAL
  pageSize: 1000,
  maxQueue: 1000,
  maxQueueBytes: 16 * 1024 * 1024,
  maxStateBytes: 64 * 1024 * 1024,
  batchSize: 1000,
  batchEvents: 10000,
  headsBatch: 2000,
  batchDelay: 0,
  statusInterval: 10000,
  slotTimeout: 30000,
  applicationName: 'hxstate-hub',
  sharedConnection: false,
  sources: {},
  slotName: null,
  failoverSlot: false,
  holdback: null,          // check the holdback (default: with failoverSlot)
  holdbackInterval: 5000,
};

class HxHub extends EventEmitter {
  /**
   * @param {object} [options]
   * @param {object|string|function} [options.pg] a pg.Client config, a
   *   connection string, or a function (role) => config (or a promise of
   *   one) called for every new connection; role is 'reader', 'listen' or
   *   'replication'.  By default pg's own (PGHOST, PGDATABASE, ...).
   * @param {'auto'|'wal'|'listen'} [options.transport='auto']
   * @param {'auto'|'hxstate'|'pgoutput'} [options.decoder='auto'] the
   *   output plugin that decodes the WAL: hxstate's own (one message per
   *   transaction; the server must name it in output_plugin_libraries)
   *   or pgoutput (through the publication); 'auto' takes hxstate's where
   *   the server allows it (decoder.js)
   * @param {number} [options.coalesceMs=0] over the WAL, after the
   *   replication socket gave messages, leave it unread this many ms, so
   *   that what comes meanwhile is read and handed on in one go: less CPU
   *   per event under load, for more latency (none for a stream quieter
   *   than that; more than coalesceMs when the process is too busy to run
   *   its timers on time).  Off by default
   * @param {string} [options.publication='hxstate_events'] pgoutput's
   *   publication of hx_event
   * @param {number} [options.pollInterval] ms between polls of the heads
   *   of every followed stream (default 2000 over LISTEN, 10000 over the
   *   WAL); 0 turns polling off
   * @param {{min: number, max: number}} [options.reconnect] backoff bounds
   *   in ms (default 100 to 5000, doubling, with jitter)
   * @param {number} [options.pageSize=1000] events per stream per log read
   * @param {number} [options.maxQueue=1000] events a subscription may have
   *   waiting for its consumer (each follow() may set its own)
   * @param {number} [options.maxQueueBytes=16 MiB] bytes a subscription
   *   may have waiting for its consumer (each follow() may set its own)
   * @param {number} [options.maxStateBytes=64 MiB] bytes of the state a
   *   subscription with state: true may keep (each follow() may set its
   *   own); past it the subscription fails with HX_STATE_TOO_LARGE
   * @param {Object<string, string>} [options.sources] sources whose
   *   snapshots come from a function: {name: 'schema.function'}, each
   *   function (keys text[]) RETURNS TABLE (key text, stream text, seq
   *   bigint, state jsonb); follow({table: name, key}) reads from it
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
   * @param {boolean} [options.failoverSlot=false] decode through a
   *   persistent failover slot (PostgreSQL 17 and later) named slotName,
   *   which synchronized_standby_slots holds back until the standbys have
   *   the WAL: no follower then shows a commit that a failover loses
   * @param {string} [options.slotName] that slot's name (lower case
   *   letters, digits, underscores; one per hub), dropped when the hub
   *   stops, and dropped if idle when it starts
   * @param {boolean} [options.holdback] check every holdbackInterval ms
   *   that the server holds the slot back (synchronized_standby_slots, or
   *   pg_failover_slots before 17) with every named standby slot present
   *   and streaming; what is wrong is an 'error' with code HX_HOLDBACK and
   *   the holdback property (default: with failoverSlot)
   * @param {number} [options.holdbackInterval=5000]
   */
  constructor(options) {
    super();
    const o = { ...DEFAULTS, ...(options || {}) };
    if (!DECODERS.includes(o.decoder)) throw new TypeError("HxHub: options.decoder is 'auto', 'hxstate' or 'pgoutput'");
    if (!(Number.isFinite(o.coalesceMs) && o.coalesceMs >= 0 && o.coalesceMs <= MAX_COALESCE_MS)) {
      throw new TypeError(`HxHub: options.coalesceMs is a number of milliseconds from 0 to ${MAX_COALESCE_MS}`);
    }
    if (!['auto', 'wal', 'listen'].includes(o.transport)) {
      throw new TypeError("HxHub: options.transport is 'auto', 'wal' or 'listen'");
    }
    if (o.sharedConnection && o.transport !== 'listen') {
      throw new TypeError("HxHub: sharedConnection needs transport: 'listen'");
    }
    o.pollInterval = o.pollInterval === null || o.pollInterval === undefined ? null : Number(o.pollInterval) || 0;
    o.pageSize = Math.max(1, Math.floor(o.pageSize));
    o.maxQueue = Math.max(1, Math.floor(o.maxQueue));
    o.maxQueueBytes = Math.max(1, Math.floor(o.maxQueueBytes));
    o.maxStateBytes = Math.max(1, Math.floor(o.maxStateBytes));
    o.batchSize = Math.max(1, Math.floor(o.batchSize));
    o.batchEvents = Math.max(1, Math.floor(o.batchEvents));
    o.headsBatch = Math.max(1, Math.floor(o.headsBatch));
    o.reconnect = { min: 100, max: 5000, ...(o.reconnect || {}) };
    if (o.failoverSlot && o.transport === 'listen') throw new TypeError("HxHub: failoverSlot needs the WAL (transport 'wal' or 'auto')");
    if (o.failoverSlot && !(typeof o.slotName === 'string' && /^[a-z0-9_]{1,63}$/.test(o.slotName))) {
      throw new TypeError('HxHub: failoverSlot needs slotName: lower case letters, digits and underscores, 63 at most');
    }
    if (o.slotName !== null && o.slotName !== undefined && !o.failoverSlot) {
      throw new TypeError('HxHub: slotName names a failover slot (failoverSlot: true); temporary slots are named by the hub');
    }
    if (o.holdback === null || o.holdback === undefined) o.holdback = !!o.failoverSlot;
    o.holdbackInterval = Math.max(100, Number(o.holdbackInterval) || 5000);
    this._o = o;
    this._holdbackTimer = null;
    /** What is wrong with the holdback (holdback option), or null; undefined before the first check. */
    this.holdback = undefined;
    this._sources = new Map(); // name -> the function's quoted, qualified name
    for (const [name, fn] of Object.entries(o.sources || {})) {
      if (typeof fn !== 'string') throw new TypeError(`HxHub: options.sources.${name} must be 'schema.function'`);
      try {
        this._sources.set(name, sql.functionName(fn));
      } catch (err) {
        throw new TypeError(`HxHub: options.sources.${name}: ${err.message}`);
      }
    }

    this._phase = 'idle';        // idle | starting | running | stopped
    this._starting = null;
    this._stopping = null;
    // the seams: each part hears of the others through the callbacks it is given
    this._link = new Link(o, this._linkHost());
    this._reader = new Reader(this._readerHost(), o);
    this._coreHost = {
      unfollow: (core) => this._unfollowCore(core),
      delivered: (core) => this._delivered(core),
      listenerFailed: (err, core) => this._listenerFailed(err, core),
      schedule: (core) => this._drainer.add(core),
    };
    this._drainer = new Drainer(); // one microtask for the subscriptions that have something to hand out
    this._pollTimer = null;
    this._tick = 0;              // orders requests and joins

    this._subs = new Set();      // SubscriptionCore
    this._cores = new WeakMap(); // HxSubscription -> its SubscriptionCore
    this._entries = new Map();   // stream -> StreamEntry
    this._targets = new Map();   // source \0 key -> {table, key, stream|null, subs: Set}
    this._streamWaits = new Map(); // stream -> Set(sub) waiting for the channel lookup
    this._channels = new Map();  // channel -> Set(entry)

    /** Counters, for monitoring and tests. */
    this.stats = {
      streams: 0,          // streams followed now
      subscriptions: 0,    // subscriptions now
      polls: 0,            // timed polls
      notifications: 0,    // notifications received (hints)
      references: 0,       // ... of which references
      walInserts: 0,       // hx_event inserts decoded (every stream's)
      walEvents: 0,        // ... of followed streams
      resyncs: 0,
      divergences: 0,      // resyncs because a new connection's server lost an event already read (rule 6)
      overflows: 0,
      disconnects: 0,
      reconnects: 0,
      errors: 0,
    };
    const shown = (get) => ({ get, enumerable: true });
    Object.defineProperties(this.stats, {
      connections: shown(() => this._link.connections.open),      // connections open now
      maxConnections: shown(() => this._link.connections.maxOpen), // the most open at once
      queries: shown(() => this._reader.stats.queries),        // statements run on the reader
      nameReads: shown(() => this._reader.stats.nameReads),    // ... of which name and channel lookups
      snapshotReads: shown(() => this._reader.stats.snapshotReads), // ... snapshot reads
      snapshots: shown(() => this._reader.stats.snapshots),    // snapshot rows read
      pages: shown(() => this._reader.stats.pages),            // catch-up queries
      headReads: shown(() => this._reader.stats.headReads),    // hx_stream_heads queries
      listening: shown(() => (this._link.tx && this._link.tx.listening ? this._link.tx.listening.size : 0)), // channels LISTENed now
    });
  }

  /** 'wal' or 'listen': the transport in use (null before start). */
  get transport() { return this._link.transport; }
  /** Why 'auto' chose LISTEN (null when it chose the WAL or was not asked to choose). */
  get transportReason() { return this._link.transportReason; }
  /** The output plugin decoding the WAL: 'hxstate' or 'pgoutput' (null over LISTEN). */
  get decoder() { return this._link.decoder; }
  /** Why it is not hxstate's (null when it is, or when pgoutput was asked for). */
  get decoderReason() { return this._link.decoderReason; }
  /** Are the reader and the transport connected now? */
  get connected() { return this._link.connected; }
  /** The temporary replication slot in use (WAL transport), else null. */
  get slot() { return this._link.tx && this._link.tx.kind === 'wal' ? this._link.tx.wal.slot : null; }
  /** The subscriptions now. */
  get subscriptions() { return [...this._subs].map((core) => core.subscription); }

  /**
   * The reader's host (reader.js): what it asks (tick, sourceOf, readFrom)
   * and what it tells of its reads' results.
   */
  _readerHost() {
    return {
      tick: () => this._nextTick(),
      sourceOf: (name) => this._sourceOf(name),
      readFrom: (entry) => this._readFrom(entry),
      onNames: (source, keys, rows) => this._onNames(source, keys, rows),
      onNamesFailed: (source, keys, err, retrying) => this._onNamesFailed(source, keys, err, retrying),
      onChannels: (rows) => this._onChannels(rows),
      onChannelsFailed: (streams, err) => this._onChannelsFailed(streams, err),
      snapshotSent: (entries) => this._snapshotSent(entries),
      onSnapshotUnsent: (entry) => this._onSnapshotUnsent(entry),
      retrySnapshots: (entries, tick) => this._retrySnapshots(entries, tick),
      onSnapshots: (entries, tick, rows) => this._onSnapshots(entries, tick, rows),
      onSnapshotsFailed: (entries, tick, err, transient) => this._onSnapshotsFailed(entries, tick, err, transient),
      onPage: (batch, byStream, limit, tick) => this._onPage(batch, byStream, limit, tick),
      onHeads: (entries, heads, tick) => this._onHeads(entries, heads, tick),
      onReadFailed: (entries, err) => this._onReadFailed(entries, err),
      onConnectionError: (conn, err) => this._onConnectionError(conn, err),
    };
  }

  /** The link's host (link.js): its connections' news, and its transport's. */
  _linkHost() {
    return {
      reader: (conn, schema) => this._linkReader(conn, schema),
      up: (tx) => this._linkUp(tx),
      ready: () => this._linkReady(),
      down: () => this._linkDown(),
      lost: (err, role) => this._linkLost(err, role),
      back: () => this._linkBack(),
      transport: (transport, reason) => this._linkTransport(transport, reason),
      error: (err) => this._linkError(err),
      wants: (stream) => this._wantsStream(stream),
      walInsert: (stream, seq, event, bytes) => this._onWalInsert(stream, seq, event, bytes),
      hint: (channel, hint) => this._onHint(channel, hint),
      listening: (channels) => this._onListening(channels),
      unlistened: (channels) => this._onUnlistened(channels),
    };
  }

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
        await this._link.open();
      } catch (err) {
        await this.stop();
        throw err;
      }
      if (this._phase !== 'starting') throw new Error('HxHub: stopped while starting');
      this._phase = 'running';
      this._link.run();
      this._schedulePoll();
      this._reader.kick();
      if (this._o.holdback) this._checkHoldback();
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
    this._pollTimer = null;
    clearTimeout(this._holdbackTimer);
    this._holdbackTimer = null;
    // the statement in flight finishes first (no new one starts), then the
    // connections close
    this._stopping = this._link.stop(this._reader.stop());
    return this._stopping;
  }

  /**
   * Run fn(query) on the hub's reader connection, between its own reads
   * (no connection of its own): query(text, values) resolves to the rows.
   * For short reads a follower needs beside its events (RunFollower and
   * the gateway read back what a run has open at a seq); a long one holds
   * up the hub's snapshots and catch-ups while it runs.  Resolves to what
   * fn resolves to; rejects with fn's error, or when the hub stops first.
   * Waits while the hub is not connected.
   * @template T
   * @param {(query: (text: string, values?: any[]) => Promise<object[]>) => Promise<T>} fn
   * @returns {Promise<T>}
   */
  read(fn) {
    if (typeof fn !== 'function') throw new TypeError('HxHub.read: fn is a function (query)');
    if (this._phase === 'stopped') return Promise.reject(new Error('hxstate: the hub stopped'));
    return this._reader.read(fn);
  }

  // -------------------------------------------------------------------
  // Following
  // -------------------------------------------------------------------

  /**
   * Follow a stream: target is {table, key} (the row's stream, whatever
   * stream= prefix its trigger has; or, when table names one of the
   * sources option's functions, the stream that function gives the key)
   * or {stream} (a stream by name; without a table it cannot read a
   * snapshot, so it starts from the log: see the README).  Options: after
   * (a seq: start with the events after it, read from the log, instead of
   * a snapshot), base (the state at after), state (keep and hand out
   * states; default true, false with after and no base), maxQueue,
   * maxQueueBytes, maxStateBytes, overflow ('log' | 'snapshot').
   * @returns {HxSubscription}
   */
  follow(target, options) {
    if (this._phase === 'stopped') throw new Error('HxHub: stopped');
    const sub = new SubscriptionCore(this._coreHost, target || {}, options || {},
      { maxQueue: this._o.maxQueue, maxQueueBytes: this._o.maxQueueBytes, maxStateBytes: this._o.maxStateBytes, tick: ++this._tick });
    this._subs.add(sub);
    this._cores.set(sub.subscription, sub);
    this.stats.subscriptions = this._subs.size;
    if (sub.table !== null) {
      const id = `${sub.table}\u0000${sub.key}`;
      let t = this._targets.get(id);
      if (!t) {
        t = { table: sub.table, key: sub.key, stream: null, subs: new Set() };
        this._targets.set(id, t);
      }
      t.subs.add(sub);
      sub.bindTarget(t);
      const entry = t.stream !== null ? this._entries.get(t.stream) : null;
      if (entry) this._attach(sub, entry);
      else this._reader.names(sub.table, sub.key);
    } else {
      const entry = this._entries.get(sub.stream);
      if (entry) {
        this._attach(sub, entry);
      } else {
        let waits = this._streamWaits.get(sub.stream);
        if (!waits) {
          waits = new Set();
          this._streamWaits.set(sub.stream, waits);
        }
        waits.add(sub);
        this._reader.channel(sub.stream);
      }
    }
    return sub.subscription;
  }

  /** Stop a subscription (the same as sub.stop()). */
  unfollow(sub) {
    const core = sub ? this._cores.get(sub) : undefined;
    if (core) this._unfollowCore(core);
  }

  _unfollowCore(core) {
    if (core.stopped) return;
    this._stopSub(core, new Error('hxstate: subscription stopped'));
  }

  _stopSub(sub, why) {
    if (!sub.halt(why)) return;
    this._subs.delete(sub);
    this.stats.subscriptions = this._subs.size;
    const t = sub.target;
    if (t) {
      t.subs.delete(sub);
      if (t.subs.size === 0) this._targets.delete(`${t.table}\u0000${t.key}`);
    }
    const waits = sub.stream !== null ? this._streamWaits.get(sub.stream) : null;
    if (waits) {
      waits.delete(sub);
      if (waits.size === 0) this._streamWaits.delete(sub.stream);
    }
    const entry = sub.entry;
    if (entry) {
      if (entry.leave(sub) === 0) this._dropEntry(entry);
    }
  }

  /** A subscription that cannot go on: 'error', then stopped (ready rejects with err). */
  _failSub(sub, err) {
    if (sub.stopped) return;
    sub.failed(err);
    this._stopSub(sub, err);
  }

  _failTarget(source, key, err) {
    const t = this._targets.get(`${source}\u0000${key}`);
    if (t) for (const sub of [...t.subs]) this._failSub(sub, err);
  }

  // -------------------------------------------------------------------
  // Streams (entries)
  // -------------------------------------------------------------------

  _entryFor(stream, channel, source, key) {
    let entry = this._entries.get(stream);
    if (!entry) {
      entry = new StreamEntry(stream, channel, source, key);
      this._entries.set(stream, entry);
      this.stats.streams = this._entries.size;
      let set = this._channels.get(channel);
      if (!set) {
        set = new Set();
        this._channels.set(channel, set);
      }
      set.add(entry);
      // armed at once under the WAL, after its LISTEN otherwise
      const tx = this._link.tx;
      if (tx && tx.up) {
        tx.listen(channel);
        if (tx.armed(channel)) entry.arm();
      }
    } else {
      entry.learn(source, key);
    }
    return entry;
  }

  _dropEntry(entry) {
    this._entries.delete(entry.stream);
    this.stats.streams = this._entries.size;
    entry.drop();
    this._reader.forget(entry);
    const set = this._channels.get(entry.channel);
    if (!set) return;
    set.delete(entry);
    if (set.size > 0) return;
    this._channels.delete(entry.channel);
    if (this._link.tx) this._link.tx.unlisten(entry.channel);
  }

  _attach(sub, entry) {
    entry.join(sub);
    sub.attach(entry);
    this._check(sub);
  }

  /** The entries became armed: snapshots may be read, and the log after each cursor. */
  _armed(entries) {
    for (const entry of entries) {
      if (entry.dropped || entry.armed) continue;
      entry.arm();
      // a subscription that has a position may have missed events while
      // unarmed: rule 5 (those waiting for a snapshot need no head)
      for (const sub of entry.subs) {
        if (sub.phase === 'live') {
          this._reader.heads(entry);
          break;
        }
      }
      for (const sub of entry.subs) this._check(sub);
    }
  }

  _disarmAll() {
    for (const entry of this._entries.values()) {
      entry.disarm();
      this._onSnapshotUnsent(entry);
    }
    this._reader.dropSnapshots(); // requested again once armed
  }

  // -------------------------------------------------------------------
  // From the transports
  // -------------------------------------------------------------------

  /** An insert of the log decoded: is its stream followed?  (Those that are not are not even kept.) */
  _wantsStream(stream) {
    this.stats.walInserts++;
    return this._entries.has(stream);
  }

  /** An insert of the log, at its commit: its event's JSON text (null: read it from the log). */
  _onWalInsert(stream, seq, text, bytes) {
    const entry = this._entries.get(stream);
    if (!entry) return; // not followed (any more)
    this.stats.walEvents++;
    if (text === null) {
      // a transaction too large to hold: its events are read from the log
      entry.saw(seq);
      for (const sub of [...entry.subs]) {
        sub.noticed('wal');
        this._check(sub);
      }
      return;
    }
    let event;
    try {
      event = JSON.parse(text);
    } catch (err) {
      return; // cannot happen for jsonb; the log has it anyway
    }
    this._onLogEvent(entry, seq, event, bytes, 'wal');
  }

  /** An event the log holds at seq, bytes long (rule 2): the WAL brings the log's own rows. */
  _onLogEvent(entry, seq, event, bytes, via) {
    entry.saw(seq);
    // a copy of the set (offering may stop a subscription), unless it has one
    const subs = entry.subs.size === 1 ? entry.subs : [...entry.subs];
    for (const sub of subs) {
      sub.noticed(via);
      const r = sub.offer(seq, event, bytes);
      if (r === 'old') continue;
      if (r === 'overflow') {
        this.stats.overflows++;
      } else if (r instanceof Error) {
        this._invalid(sub, r);
      }
      this._check(sub);
    }
  }

  /**
   * A notification on channel (rule 3): hint is {stream, seq, ref} when its
   * payload named them, else null.  Only the channel's own streams are
   * concerned; a seq that a stream names is known to exist (its
   * subscriptions behind it read the log), anything else costs a read of
   * the heads of the channel's streams.
   */
  _onHint(channel, hint) {
    this.stats.notifications++;
    if (hint && hint.ref) this.stats.references++;
    const set = this._channels.get(channel);
    if (!set) return;
    for (const entry of set) {
      const named = hint !== null && hint.stream === entry.stream;
      for (const sub of entry.subs) sub.noticed(hint && hint.ref ? 'ref' : 'notify');
      if (!named) {
        this._reader.heads(entry);
        continue;
      }
      entry.saw(hint.seq);
      for (const sub of [...entry.subs]) this._check(sub);
    }
  }

  _onListening(channels) {
    const armed = [];
    for (const c of channels) {
      const set = this._channels.get(c);
      if (set) for (const entry of set) armed.push(entry);
    }
    // rule 1: the channel is LISTENed; what commits from now on is announced
    this._armed(armed);
  }

  _onUnlistened(channels) {
    for (const c of channels) {
      const set = this._channels.get(c);
      if (!set) continue;
      // followed again while the UNLISTEN was on its way: LISTEN again, and
      // until then the streams are not armed
      for (const entry of set) entry.disarm();
      this._link.tx.listen(c);
    }
  }

  // -------------------------------------------------------------------
  // What a subscription needs next
  // -------------------------------------------------------------------

  /** Read a fresh snapshot (rule 4). */
  _resync(sub, reason) {
    const entry = sub.entry;
    if (entry.source === null) {
      const diverged = reason === 'diverged';
      const why = diverged
        ? `the server no longer has event ${sub.cursor} of ${sub.stream} as it was read (a failover lost that commit)`
        : `the log of ${sub.stream} no longer holds seq ${sub.cursor + 1}`;
      const ahead = reason === 'ahead';
      const err = new Error(ahead
        ? `hxstate: the log of ${sub.stream} ends below seq ${sub.cursor} (the after option): it holds no event at or after it, ` +
          'and a subscription by stream name cannot read a snapshot: follow {table, key} to resync, or resume from a seq the log holds'
        : `hxstate: ${why}, and a subscription by stream name cannot read a snapshot: follow {table, key} to resync`);
      err.code = ahead ? 'HX_AFTER_BEYOND_HEAD' : diverged ? 'HX_DIVERGED' : 'HX_TRIMMED';
      this._failSub(sub, err);
      return;
    }
    if (reason === 'diverged') this.stats.divergences++;
    sub.beginResync(reason);
    this._check(sub);
  }

  /**
   * What a subscription needs next, requested (batched) if it needs
   * anything: a snapshot (or a sibling's position), a log read, or nothing.
   */
  _check(sub) {
    const entry = sub.entry;
    if (!entry || this._phase === 'stopped') return;
    switch (sub.need(entry)) {
      case 'seed':
        // a sibling that follows the stream live has an exact state at
        // its cursor, and the stream is armed: start from there, no read
        for (const sib of entry.subs) {
          const seed = sib === sub ? null : sib.seed();
          if (seed) {
            this._takeSnapshot(sub, seed.seq, seed.state, null, seed.bytes, seed.mark);
            return;
          }
        }
      // falls through
      case 'snapshot':
        sub.snapshotRequested();
        this._reader.snapshot(entry);
        return;
      case 'read':
        this._reader.catchup(entry);
        return;
      default:
    }
  }

  /** The subscription handed something out: it may want more now. */
  _delivered(sub) {
    this._check(sub);
  }

  _takeSnapshot(sub, seq, state, last, bytes, mark) {
    const r = sub.takeSnapshot(seq, state, last, bytes, mark);
    if (r instanceof Error) {
      this._failSub(sub, r);
      return;
    }
    if (r === 'resync') this.stats.resyncs++;
    this._check(sub);
  }

  /**
   * An event the subscription could not accept: a delta that does not
   * apply (a resync, from a fresh snapshot), or a state past its
   * maxStateBytes (it fails: the state is not kept past its bound, and
   * nothing else is touched).
   */
  _invalid(sub, err) {
    if (err.code === 'HX_STATE_TOO_LARGE') {
      this._failSub(sub, err);
      return;
    }
    this._error(err, [sub]);
    this._resync(sub, 'invalid');
  }

  // -------------------------------------------------------------------
  // The reader's results (through _readerHost)
  // -------------------------------------------------------------------

  _nextTick() { return ++this._tick; }

  /** A source by name: one of the sources option's functions, else a table. */
  _sourceOf(name) {
    const fn = this._sources.get(name);
    return fn !== undefined ? { fn } : { table: name };
  }

  _onNames(source, keys, rows) {
    const found = new Map(rows.map((r) => [r.key, r]));
    for (const key of keys) {
      const t = this._targets.get(`${source}\u0000${key}`);
      if (!t || t.subs.size === 0) continue;
      const r = found.get(key);
      if (!r) {
        this._failTarget(source, key, new Error(`hxstate: no stream for key ${key} of ${source}`));
        continue;
      }
      t.stream = r.stream;
      const entry = this._entryFor(r.stream, r.channel, source, key);
      for (const sub of [...t.subs]) if (sub.phase === 'resolving') this._attach(sub, entry);
    }
  }

  _onNamesFailed(source, keys, err, retrying) {
    if (!retrying) {
      for (const key of keys) this._failTarget(source, key, err);
      return;
    }
    const subs = [];
    for (const key of keys) {
      const t = this._targets.get(`${source}\u0000${key}`);
      if (t) subs.push(...t.subs);
    }
    this._error(err, subs);
  }

  _onChannels(rows) {
    for (const r of rows) {
      const waits = this._streamWaits.get(r.stream);
      if (!waits) continue;
      this._streamWaits.delete(r.stream);
      const entry = this._entryFor(r.stream, r.channel, null, null);
      for (const sub of waits) if (sub.phase === 'resolving') this._attach(sub, entry);
    }
  }

  _onChannelsFailed(streams, err) {
    const subs = [];
    for (const s of streams) subs.push(...(this._streamWaits.get(s) || []));
    this._error(err, subs);
  }

  /** A snapshot read of entries goes out now: its tick, for the subscriptions waiting. */
  _snapshotSent(entries) {
    const tick = ++this._tick;
    for (const entry of entries) for (const sub of entry.subs) sub.snapshotSent(tick);
    return tick;
  }

  _onSnapshotUnsent(entry) {
    for (const sub of entry.subs) sub.snapshotUnsent();
  }

  /** The read at tick did not bring their snapshots: those that waited for it ask again. */
  _retrySnapshots(entries, tick) {
    for (const entry of entries) {
      for (const sub of [...entry.subs]) {
        if (!sub.waitsFor(tick)) continue;
        sub.snapshotRetry();
        this._check(sub);
      }
    }
  }

  _onSnapshots(entries, tick, rows) {
    const byKey = new Map(rows.map((r) => [r.key, r]));
    for (const entry of entries) {
      if (entry.dropped) continue;
      const r = byKey.get(entry.key);
      if (!r) { // a source gives a row per key it knows: the key is not there (yet)
        this._reader.later('snapshot', () => this._retrySnapshots([entry], tick));
        continue;
      }
      const seq = Number(r.seq);
      entry.saw(seq);
      const state = r.state === null ? null : r.state.value;
      const bytes = r.state === null ? 0 : r.state.bytes;
      const last = r.last === null ? null : r.last.value;
      const mark = r.mark === null || r.mark === undefined ? null : markOfRow(r.mark.value);
      for (const sub of [...entry.subs]) if (sub.waitsFor(tick)) this._takeSnapshot(sub, seq, state, last, bytes, mark);
      // subscriptions that started waiting after the read was sent ask again
      for (const sub of [...entry.subs]) {
        if (sub.phase === 'snapshot' && !sub.waitsFor(tick)) {
          sub.snapshotRetry();
          this._check(sub);
        }
      }
    }
  }

  _onSnapshotsFailed(entries, tick, err, transient) {
    const told = [];
    for (const entry of entries) {
      for (const sub of [...entry.subs]) {
        if (!sub.waitsFor(tick)) continue;
        // one that has not started fails (no trigger, no such function,
        // no privilege), unless the error may pass; one that has tries again
        if (!transient && !sub.hasPosition()) this._failSub(sub, err);
        else told.push(sub);
      }
    }
    this._error(err, told);
  }

  /** Where a read of entry's log starts: the lowest cursor of those that want one, or null. */
  _readFrom(entry) {
    let after = null;
    for (const sub of entry.subs) {
      const a = sub.readFrom(entry);
      if (a !== null && (after === null || a < after)) after = a;
    }
    return after;
  }

  /** Rules 2 and 4 over a page of the log: [{entry, after, seen}], byStream: stream -> rows. */
  _onPage(batch, byStream, limit, tick) {
    for (const b of batch) {
      const entry = b.entry;
      if (entry.dropped) continue;
      const list = byStream.get(entry.stream) || [];
      const top = list.length > 0 ? list[list.length - 1].seq : b.after;
      // (b.after need not exist: a resume point beyond the log's end)
      if (list.length > 0) entry.saw(top);
      for (const sub of [...entry.subs]) {
        const r = sub.page(b.after, list, limit, tick);
        if (r === 'trimmed' || r === 'diverged') {
          this._resync(sub, r);
        } else if (r === 'ahead') {
          this._aheadOf(sub);
        } else if (r instanceof Error) {
          this._invalid(sub, r);
        }
      }
      // The log ended below a seq we were told exists (a head, a hint):
      // decoding can announce a commit a moment before it is visible, and
      // a stray or forged notification can announce anything.  Take the
      // log's word for now and look again shortly.
      if (list.length < limit && entry.settle(top, b.seen)) this._reader.recheck(entry);
      for (const sub of [...entry.subs]) this._check(sub);
    }
  }

  /**
   * A read found the log ending below the subscription's resume point
   * (its after option).  A commit can be announced an instant before it
   * is visible, and the seq may come from a server the reader lags behind:
   * read again AHEAD_CHECKS times, each after a wait that doubles from
   * reconnect.min up to reconnect.max; then the log is taken at its word,
   * and the subscription resyncs to a snapshot (reason 'ahead'), or one by
   * stream name fails (HX_AFTER_BEYOND_HEAD).  Never a silent wait.
   */
  _aheadOf(sub) {
    const n = sub.aheadChecks;
    if (n > AHEAD_CHECKS) {
      this._resync(sub, 'ahead');
      return;
    }
    const { min, max } = this._o.reconnect;
    this._reader.wait(Math.min(max, min * 2 ** (n - 1)), () => {
      if (sub.stopped) return;
      sub.aheadRetry();
      this._check(sub);
    });
  }

  _onHeads(entries, heads, tick) {
    for (const entry of entries) {
      if (entry.dropped) continue;
      entry.saw(heads.get(entry.stream) || 0);
      for (const sub of [...entry.subs]) {
        sub.headRead(tick);
        this._check(sub);
      }
    }
  }

  /** A read of the log or of the heads failed on a working connection; it is tried again later. */
  _onReadFailed(entries, err) {
    const subs = [];
    for (const entry of entries) subs.push(...entry.subs);
    this._error(err, subs);
  }

  /** The reader's connection is gone: reconnect. */
  _onConnectionError(conn, err) {
    this._link.lose(conn, err);
  }

  // -------------------------------------------------------------------
  // The holdback (holdback.js)
  // -------------------------------------------------------------------

  _checkHoldback() {
    this._holdbackTimer = null;
    if (this._phase !== 'running') return;
    const conn = this._link.reader;
    const next = () => {
      if (this._phase === 'running') this._holdbackTimer = setTimeout(() => this._checkHoldback(), this._o.holdbackInterval);
    };
    if (!conn || !conn.alive) {
      next();
      return;
    }
    conn.client.query(sql.holdback()).then(({ rows: [row] }) => {
      const standby = this._link.tx && this._link.tx.kind === 'wal' && this._link.tx.wal.standby;
      const problem = standby ? null : holdbackProblem(row, this._o.failoverSlot ? this._o.slotName : null);
      const was = this.holdback;
      this.holdback = problem;
      if (problem !== null && problem !== was) {
        const err = new Error(`hxstate: the WAL is not held back for the standbys: ${problem}`);
        err.code = 'HX_HOLDBACK';
        this._error(err);
      }
      if (problem === null && was !== null && was !== undefined) this._emitSafe('holdback', { ok: true });
    }, (err) => {
      if (!isConnectionError(err)) this._error(err);
    }).finally(next);
  }

  // -------------------------------------------------------------------
  // Polling
  // -------------------------------------------------------------------

  /** Heads of every followed stream, now (rule 5). */
  _pollAll() {
    for (const entry of this._entries.values()) this._reader.heads(entry);
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
  // The link's news (through _linkHost)
  // -------------------------------------------------------------------

  /**
   * A new reader connection, maybe to another server: every subscription
   * first checks that the event at its cursor is still there (rule 6).
   */
  _linkReader(conn, schema) {
    this._reader.use(conn, schema);
    for (const entry of this._entries.values()) {
      for (const sub of [...entry.subs]) {
        sub.reverify();
        this._check(sub);
      }
    }
  }

  /** The transport is up: the WAL arms every stream (rule 1), LISTEN starts on every channel. */
  _linkUp(tx) {
    if (tx.kind === 'wal') this._armed([...this._entries.values()]);
    else for (const channel of this._channels.keys()) tx.listen(channel);
  }

  /** The reader and the transport are connected: run what waits. */
  _linkReady() {
    this._reader.kick();
  }

  /** The transport is gone: nothing is armed until it is back. */
  _linkDown() {
    this._disarmAll();
  }

  _linkLost(err, role) {
    this.stats.disconnects++;
    this._emitSafe('disconnect', err, role);
    this._error(err);
  }

  _linkBack() {
    this.stats.reconnects++;
    this._emitSafe('reconnect');
  }

  _linkTransport(transport, reason) {
    this._emitSafe('transport', { transport, reason });
  }

  _linkError(err) {
    this._error(err);
  }

  // -------------------------------------------------------------------
  // Emitting
  // -------------------------------------------------------------------

  _emitSafe(name, ...args) {
    if (this._phase === 'stopped') return;
    emitSafe(this, name, args, (err) => this._listenerFailed(err, null));
  }

  /**
   * 'error' reports what the hub recovers from by itself (a lost
   * connection, a failed statement): on each subscription it concerns, and
   * once on the hub; each only when someone listens.
   */
  _error(err, subs = []) {
    this.stats.errors++;
    for (const sub of subs) sub.error(err);
    if (this._phase !== 'stopped') emitError(this, err);
  }

  /**
   * A listener threw or rejected: its error goes to the subscription's
   * 'error' if someone listens there, else the hub's, else a process
   * warning; the subscription goes on with its next event.
   */
  _listenerFailed(err, sub) {
    this.stats.errors++;
    if (sub && sub.error(err)) return;
    if (this._phase !== 'stopped' && emitError(this, err)) return;
    warnUnheard(err);
  }
}

module.exports = { HxHub, HxSubscription, isConnectionError };
