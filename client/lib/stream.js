'use strict';
// HxStream: follow one hxstate stream (one row of a table with an hx_stream
// trigger) and hand the application every AG-UI event exactly once, in seq
// order, with the state after it.
//
// It is one subscription of an HxHub (hub.js), which does the work:
//
//   1. LISTEN on the stream's channel (hx_stream_channel(stream)) first, so
//      that every transaction committing from now on is announced to us;
//   2. read the snapshot (hx_stream_snapshots): the state and the seq of
//      the stream's last event, in one snapshot.  state + the events after
//      seq is the current state, and every such event either committed
//      after the LISTEN (we will hear of it) or is in the log (we can read
//      it);
//   3. apply events in seq order: seq <= ours is old news, seq == ours + 1
//      is applied, anything else is a gap that we fill from the log, page
//      by page; a reference ({"ref": true, ...}) is filled the same way.
//      When the log no longer holds our seq + 1 we resync: read the
//      snapshot again, exactly as in step 2.
//
// The log is also polled every pollInterval ms, and after a dropped
// connection the hub reconnects with exponential backoff, LISTENs again and
// catches up from the log after our seq (resyncing if it was trimmed).
//
// By default an HxStream has a hub of its own, following over LISTEN on
// one connection that also runs the queries (what the stream did before
// hubs existed).  Pass options.hub to share a hub (and its two or three
// connections) with other streams instead; that hub is then its owner's to
// start and stop.
const { EventEmitter } = require('node:events');
const { HxHub } = require('./hub');
const { syntheticSnapshot } = require('./subscription');
const { callListeners, emitSafe, emitError, warnUnheard } = require('./emit');

class HxStream extends EventEmitter {
  /**
   * @param {object} options
   * @param {object|string|function} [options.pg] pg.Client config, a
   *   connection string, or a function returning the config for each new
   *   connection; by default pg's own defaults (PGHOST, PGDATABASE, ...)
   * @param {string} options.table the table with the hx_stream trigger
   *   (regclass syntax: 'sessions', 'app.sessions', '"Mixed"')
   * @param {string} options.key the row's key, as text
   * @param {number} [options.pollInterval=2000] ms between reads of the log;
   *   0 turns polling off (then only notifications bring news)
   * @param {{min: number, max: number}} [options.reconnect] backoff bounds
   *   in ms (default 100 to 5000, doubling, with jitter)
   * @param {number} [options.pageSize=1000] events per log read
   * @param {HxHub} [options.hub] a hub to share instead of a private one
   *   (pg, pollInterval, reconnect and pageSize are then the hub's)
   * @param {number} [options.maxQueue] events waiting for a slow 'event'
   *   listener (one that returns a promise) at most; see the hub
   * @param {number} [options.maxQueueBytes] bytes of those events at most
   * @param {number} [options.maxStateBytes] bytes of its state at most (the
   *   hub's, 64 MiB, by default); past it the stream fails (HX_STATE_TOO_LARGE)
   */
  constructor(options) {
    super();
    const o = options || {};
    if (o.table === undefined || o.table === null || o.key === undefined || o.key === null) {
      throw new TypeError('HxStream: options.table and options.key are required');
    }
    this.table = String(o.table);
    this.key = String(o.key);
    this._ownHub = !o.hub;
    this._hub = o.hub || new HxHub({
      pg: o.pg,
      transport: 'listen',
      sharedConnection: true,
      pollInterval: o.pollInterval === undefined ? 2000 : Number(o.pollInterval),
      reconnect: o.reconnect,
      pageSize: o.pageSize === undefined ? 1000 : o.pageSize,
    });
    this._queueOptions = {};
    if (o.maxQueue !== undefined) this._queueOptions.maxQueue = o.maxQueue;
    if (o.maxQueueBytes !== undefined) this._queueOptions.maxQueueBytes = o.maxQueueBytes;
    if (o.maxStateBytes !== undefined) this._queueOptions.maxStateBytes = o.maxStateBytes;
    this._phase = 'idle';          // idle | starting | running | stopped
    this._sub = null;
    this._stopping = null;
    this._hubListeners = [];
    this._counts = { resyncs: 0, disconnects: 0, reconnects: 0 };
  }

  /** Counters, for monitoring and tests. */
  get stats() {
    const s = this._sub ? this._sub.stats : { notifications: 0, references: 0, pages: 0 };
    return {
      notifications: s.notifications, // notifications received on the stream's channel
      references: s.references,       // ... of which references to the log
      polls: this._hub.stats.polls,   // timed reads of the log (the hub's)
      pages: s.pages,                 // log reads that included this stream
      resyncs: this._counts.resyncs,  // snapshot reloads after the start
      disconnects: this._counts.disconnects,
      reconnects: this._counts.reconnects,
    };
  }

  /** The state after the last event handed out (treat it as read-only). */
  get state() { return this._sub ? this._sub.state : null; }
  /** The seq of the last event handed out (0: before the first event). */
  get seq() { return this._sub ? this._sub.seq : 0; }
  /** The stream's name ("<table>:<key>"), known once started. */
  get stream() { return this._sub ? this._sub.stream : null; }
  /** The LISTEN channel, known once started. */
  get channel() { return this._sub ? this._sub.channel : null; }
  /** Has the stream ended (row deleted, or key changed) with no re-insert since? */
  get ended() { return this._sub ? this._sub.ended : false; }
  /** Is there a live connection right now? */
  get connected() { return this._phase === 'running' && this._hub.connected; }
  /** The hub that does the work. */
  get hub() { return this._hub; }

  /**
   * Connect, LISTEN, read the snapshot and hand it out as the first
   * 'event'; resolves once that is done.  Rejects (and cleans up) when the
   * first connection fails; later failures are retried.
   */
  async start() {
    if (this._phase !== 'idle') throw new Error('HxStream: start() may be called once');
    this._phase = 'starting';
    const sub = this._hub.follow({ table: this.table, key: this.key }, this._queueOptions);
    this._sub = sub;
    sub.on('event', (event, state) => this._emitEvent(event, state));
    sub.on('end', (event, before) => this._emitSafe('end', event, before));
    sub.on('resync', ({ seq, previousSeq, state, reason }) => {
      this._counts.resyncs++;
      this._emitSafe('resync', { seq, previousSeq, state, reason });
    });
    sub.on('error', (err) => {
      this._emitError(err);
      // a state past maxStateBytes ends the subscription: the stream stops too
      if (err && err.code === 'HX_STATE_TOO_LARGE' && this._phase === 'running') this.stop();
    });
    this._listenHub('disconnect', (err) => {
      this._counts.disconnects++;
      this._emitSafe('disconnect', err);
    });
    this._listenHub('reconnect', () => {
      this._counts.reconnects++;
      this._emitSafe('reconnect');
    });
    this._listenHub('error', (err) => this._emitError(err));
    try {
      // the hub's own error first: a hub that fails to start stops its
      // subscriptions, and that rejection of sub.ready would hide why
      sub.ready.catch(() => {});
      await this._hub.start();
      await sub.ready;
    } catch (err) {
      const stopped = this._phase === 'stopped';
      await this.stop();
      if (stopped) throw new Error('HxStream: stopped while starting');
      throw err;
    }
    if (this._phase !== 'starting') throw new Error('HxStream: stopped while starting');
    this._phase = 'running';
  }

  /**
   * Stop following: no event is emitted after stop() is called; resolves
   * once the connection is closed and no timer is left (with a shared hub:
   * once this stream's subscription is gone; the hub goes on).
   */
  stop() {
    if (this._stopping) return this._stopping;
    this._phase = 'stopped';
    if (this._sub) this._sub.stop();
    for (const [name, fn] of this._hubListeners) this._hub.removeListener(name, fn);
    this._hubListeners = [];
    this._stopping = this._ownHub ? this._hub.stop() : Promise.resolve();
    return this._stopping;
  }

  /**
   * The current state as a STATE_SNAPSHOT event (metadata.synthetic: true),
   * for a consumer that joins late, e.g. a browser connecting to a gateway.
   */
  snapshotEvent() {
    return syntheticSnapshot(this.stream, this.seq, this.state);
  }

  _listenHub(name, fn) {
    this._hub.on(name, fn);
    this._hubListeners.push([name, fn]);
  }

  /**
   * Hand an event to the 'event' listeners.  A listener that throws or
   * rejects does not break the bookkeeping: its error goes to 'error' (a
   * process warning when nothing listens), and the stream goes on.  A
   * listener that returns a promise holds the next event back until it
   * settles.
   */
  _emitEvent(event, state) {
    if (this._phase === 'stopped') return null;
    return callListeners(this, 'event', [event, state], this._onListenerError);
  }

  _onListenerError = (err) => {
    if (!this._emitError(err)) warnUnheard(err);
  };

  _emitSafe(name, ...args) {
    if (this._phase === 'stopped') return;
    emitSafe(this, name, args, this._onListenerError);
  }

  /**
   * 'error' reports problems the stream recovers from by itself (a lost
   * connection, a failed query); it is emitted only when someone listens,
   * so an application that does not care is not crashed by it.
   */
  _emitError(err) {
    if (this._phase === 'stopped') return false;
    return emitError(this, err);
  }
}

module.exports = { HxStream };
