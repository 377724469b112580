'use strict';
// ShardSubscription: one follower of one session's stream on a sharded
// hxstate, made by HxShardedHub.follow().  It follows through a
// subscription of the hub of the shard that holds the session (an
// HxSubscription) and, when the session moves to another shard, goes on
// through a subscription of that shard's hub that starts after the last
// seq it handed out, with the state after it: the new shard's log is the
// old one's copy (shard/router.sql's move), so the events after that seq
// come once each, in order, and the consumer sees no gap, no duplicate
// and no resync across the move.
//
// It hands events out one at a time as an HxSubscription does: a listener
// may return a promise, and the next event (from either shard) waits for
// it.  Its fields are its own; the sharded hub tells it where the session
// lives (route) and it asks the hub for a subscription there (follow).
//
// Emits what an HxSubscription emits: 'event' (event, state), 'end'
// (event, lastState), 'resync' ({seq, previousSeq, state, reason}),
// 'error' (err; only when listened to), and 'moved' ({from, to, seq})
// after it switched shards.
const { EventEmitter } = require('node:events');
const { callListeners, noop } = require('./emit');
const { parseSeq } = require('./cursor');

class ShardSubscription extends EventEmitter {
  /**
   * @param {{follow(sub, shard, target, options), unfollow(sub), failed(err, sub), listenerFailed(err)}} owner
   *   what the HxShardedHub gives it: callbacks, its seam
   * @param {{table?: string, key?: string, stream?: string}} target
   * @param {object} options follow()'s options
   * @param {string} key the session's key (the router's routing key)
   */
  constructor(owner, target, options, key) {
    super();
    this._owner = owner;
    this._target = { ...target };
    this._options = { ...options };
    this.key = key;
    this.table = target.table === undefined || target.table === null ? null : String(target.table);
    /** The stream's name, known once the first subscription resolved it. */
    this.stream = target.stream === undefined || target.stream === null ? null : String(target.stream);
    const after = options.after === undefined || options.after === null ? null : parseSeq(options.after);
    if (after === null && options.after !== undefined && options.after !== null) {
      throw new TypeError('HxShardedHub: options.after must be a seq: an integer >= 0 (a number, a bigint, or a string of decimal digits)');
    }
    this._keepState = options.state === undefined
      ? (after === null || after === 0
        || Object.prototype.hasOwnProperty.call(options, 'base'))
      : !!options.state;
    /** The seq of the last event handed out (0: none yet). */
    this.seq = after === null ? 0 : after;
    /** The state after it (state: true). */
    this.state = this._keepState ? (Object.prototype.hasOwnProperty.call(options, 'base') ? options.base : null) : undefined;
    /** Has the stream ended (hx.stream_end)? */
    this.ended = false;
    /** The shard it follows on now (null: not routed yet). */
    this.shard = null;
    this._lastShard = null;       // the shard it last followed on
    this._inner = null;           // the HxSubscription on this.shard
    this._positioned = after !== null;
    this._pending = null;         // the delivery in the consumer's hands
    this._stopped = false;
    this.stats = { events: 0, moves: 0, resyncs: 0 };
    this.ready = new Promise((resolve, reject) => {
      this._resolveReady = resolve;
      this._rejectReady = reject;
    });
    this.ready.catch(noop);
    this._readyDone = false;
  }

  get stopped() { return this._stopped; }
  /** 'routing' until its shard is known, then its subscription's phase. */
  get phase() {
    if (this._stopped) return 'stopped';
    return this._inner ? this._inner.phase : 'routing';
  }
  get queued() { return this._inner ? this._inner.queued : 0; }
  get queuedBytes() { return this._inner ? this._inner.queuedBytes : 0; }
  get behind() { return this._inner ? this._inner.behind : false; }

  /** Stop following; no event is handed out after this. */
  stop() {
    if (this._stopped) return;
    this._stopped = true;
    this._drop();
    this._owner.unfollow(this);
    const err = new Error('hxstate: subscription stopped');
    if (!this._readyDone) this._rejectReady(err);
  }

  // -- what the sharded hub tells it ----------------------------------------

  /**
   * The session lives on shard (null: the router does not know the key).
   * On its first route it starts there; on a new one it goes on there
   * after the last seq it handed out.
   */
  route(shard) {
    if (this._stopped || shard === this.shard) return;
    const from = this._lastShard;
    this._drop();
    this.shard = shard;
    if (shard === null) return; // waits for a route
    this._lastShard = shard;
    const options = { ...this._options };
    if (this._positioned) {
      // the move: from the last seq handed out, with the state after it
      options.after = this.seq;
      if (this._keepState) {
        options.base = this.state;
        options.state = true;
      } else {
        delete options.base;
        options.state = false;
      }
    }
    if (from !== null && from !== shard) this.stats.moves++;
    const inner = this._owner.follow(this, shard, this._target, options);
    this._inner = inner;
    inner.on('event', (event, state) => this._forward(inner, event, state));
    inner.on('end', (event, last) => { if (this._inner === inner) this._emitSafe('end', event, last); });
    inner.on('resync', (r) => {
      if (this._inner !== inner) return;
      this.stats.resyncs++;
      this._emitSafe('resync', r);
    });
    inner.on('error', (err) => { if (this._inner === inner) this._emitError(err); });
    inner.ready.then(() => {
      if (this._inner !== inner) return;
      if (inner.stream !== null) this.stream = inner.stream;
      if (!this._readyDone) {
        this._readyDone = true;
        this._resolveReady();
      }
    }, (err) => {
      if (this._inner !== inner || this._stopped) return;
      // the session may have moved while this shard was asked: the hub
      // checks its route before giving up
      this._owner.failed(err, this);
    });
    if (from !== null && from !== shard) this._emitSafe('moved', { from, to: shard, seq: this.seq });
  }

  /** The subscription cannot go on (no such session anywhere, no privilege): 'error', then stopped. */
  fail(err) {
    if (this._stopped) return;
    this._emitError(err);
    this._stopped = true;
    this._drop();
    this._owner.unfollow(this);
    if (!this._readyDone) this._rejectReady(err);
  }

  _drop() {
    const inner = this._inner;
    this._inner = null;
    if (inner) inner.stop();
  }

  /**
   * An event of the subscription on its shard: handed out once the one
   * before it (maybe from the shard it left) is done with.
   */
  _forward(inner, event, state) {
    if (this._inner !== inner || this._stopped) return null;
    const deliver = () => {
      if (this._inner !== inner || this._stopped) return null;
      this.seq = event.metadata && Number.isSafeInteger(event.metadata.seq) ? event.metadata.seq : this.seq;
      if (this._keepState) this.state = state;
      this.ended = event.type === 'CUSTOM' && event.name === 'hx.stream_end';
      this._positioned = true;
      this.stats.events++;
      return callListeners(this, 'event', [event, state], this._onListenerError);
    };
    const before = this._pending;
    const p = before ? before.then(deliver) : deliver();
    if (!p) return null;
    const done = p.then(noop, noop);
    this._pending = done;
    done.then(() => { if (this._pending === done) this._pending = null; });
    return done;
  }

  _onListenerError = (err) => {
    if (!this._emitError(err)) this._owner.listenerFailed(err);
  };

  _emitSafe(name, ...args) {
    if (this._stopped) return;
    callListeners(this, name, args, this._onListenerError);
  }

  _emitError(err) {
    if (this._stopped || this.listenerCount('error') === 0) return false;
    callListeners(this, 'error', [err], (e) => process.nextTick(() => { throw e; }));
    return true;
  }
}

module.exports = { ShardSubscription };
