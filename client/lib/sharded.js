'use strict';
// HxShardedHub: follow the sessions of a sharded hxstate (shard/: a router
// with PL/Proxy, N shards each with hxstate) as one hub: one HxHub per
// shard (each with its own transport connection and reader), the route
// of each session read from the router with the router's own function
// (hxshard.routes: a session's pin, else its bucket's shard), and each
// follower handed over to the new shard's hub when its session moves
// (shardsub.js says how that keeps every seq once, in order).
//
//   const hub = new HxShardedHub({ router: { host: 'router', database: 'router' } });
//   await hub.start();
//   const sub = hub.follow({ table: 'sessions', key: 's-42' });
//   sub.on('event', (event, state) => { ... });
//
// It composes HxHub through its public API only (follow, start, stop, its
// events), so it serves wherever a hub does: hxstate-gateway takes it as
// its hub option.
//
// A shard that is down delays only its own sessions: its hub is started
// again after a backoff delay (an HxHub whose first start fails has
// stopped), followers of its sessions wait for it, every other shard's
// followers go on.  Shards added to the router (hxshard.add_shard) are
// followed once the router says so ('*' on hxshard_route, or the next
// poll).
const { EventEmitter } = require('node:events');
const { HxHub } = require('./hub');
const { RouterLink } = require('./router');
const { ShardSubscription } = require('./shardsub');
const { parseConninfo } = require('./conninfo');
const { Backoff } = require('./backoff');
const { emitSafe, emitError, warnUnheard, noop } = require('./emit');

const DEFAULTS = {
  routeInterval: 5000,   // ms between polls of every followed key's route (0: off)
  routeBatch: 1000,      // keys per routes query
  reconnect: { min: 100, max: 5000 },
  hub: {},               // options for each shard's HxHub (pg excepted)
};

/** The session key of a target: {table, key} by its key, {stream} by what follows the first ':'. */
function keyOf(target) {
  if (target.key !== undefined && target.key !== null) return String(target.key);
  const s = String(target.stream);
  const i = s.indexOf(':');
  return i >= 0 ? s.slice(i + 1) : s;
}

class HxShardedHub extends EventEmitter {
  /**
   * @param {object} options
   * @param {object|string|function} options.router the router database's
   *   pg.Client config (or a connection string, or () => config)
   * @param {object|function} [options.shard] each shard's connection:
   *   a config merged over the shard's connection string from the router
   *   (user, password, ssl, ...), or (shard, role, conninfo) => config (or
   *   a promise of one; role as HxHub's pg option gives it: 'reader',
   *   'listen', 'replication'; conninfo the router's string for the
   *   shard), for instance to decode a shard's WAL on its standby, or to
   *   find a shard's primary among several hosts (pg takes one host)
   * @param {object} [options.hub] options for every shard's HxHub
   *   (transport, publication, pollInterval, maxQueue, ...)
   * @param {number} [options.routeInterval=5000] ms between polls of the
   *   routes of every followed session (a notification can be missed
   *   while the router connection is down); 0 turns polling off
   * @param {{min: number, max: number}} [options.reconnect] backoff bounds
   *   for the router connection and for starting a shard's hub again
   */
  constructor(options) {
    super();
    const o = { ...DEFAULTS, ...(options || {}) };
    if (o.router === undefined || o.router === null) throw new TypeError('HxShardedHub: options.router is the router database\'s connection');
    if (o.hub && o.hub.pg !== undefined) throw new TypeError('HxShardedHub: give the shards\' connections as options.shard, not options.hub.pg');
    o.reconnect = { ...DEFAULTS.reconnect, ...(o.reconnect || {}) };
    this._o = o;
    this._phase = 'idle';
    this._starting = null;
    this._stopping = null;
    this._shards = new Map();   // shard -> {shard, conninfo, hub, up, backoff, timer, waiting: Set(sub)}
    this._subs = new Set();
    this._byKey = new Map();    // key -> Set(sub)
    this._routing = new Set();  // keys whose route is to be read
    this._routeTimer = null;
    this._routeQueued = false;  // a read is scheduled
    this._reading = false;      // a read runs (one at a time: a flood of notifications costs one more)
    this._all = false;          // read every followed key's route
    this._router = new RouterLink({
      pg: o.router,
      reconnect: o.reconnect,
      batchSize: o.routeBatch,
      onChange: (key) => this._routeChanged(key),
      onUp: () => this._routeChanged(null),
      onError: (err) => this._error(err),
    });
    this.stats = { shards: 0, subscriptions: 0, moves: 0, routeReads: 0, shardStarts: 0, shardFailures: 0 };
  }

  /** The transport of the shards' hubs ('wal', 'listen', or e.g. 'wal,listen' when they differ; null before). */
  get transport() {
    const kinds = new Set();
    for (const s of this._shards.values()) if (s.hub && s.up && s.hub.transport) kinds.add(s.hub.transport);
    return kinds.size === 0 ? null : [...kinds].sort().join(',');
  }

  /** Are the router and every shard's hub connected? */
  get connected() {
    if (!this._router.connected) return false;
    for (const s of this._shards.values()) if (!(s.hub && s.up && s.hub.connected)) return false;
    return true;
  }

  /** The subscriptions now. */
  get subscriptions() { return [...this._subs]; }

  /** Each shard's hub ({shard, hub, up}), for monitoring. */
  get shards() {
    return [...this._shards.values()].map((s) => ({ shard: s.shard, conninfo: s.conninfo, hub: s.hub, up: s.up }));
  }

  /**
   * Connect to the router, read the shards and start a hub for each;
   * resolves once each has started or failed its first start (a shard
   * that is down is started again in the background, its failure
   * reported as 'error').  Rejects when the router cannot be reached.
   */
  start() {
    if (this._starting) return this._starting;
    if (this._phase === 'stopped') return Promise.reject(new Error('HxShardedHub: stopped'));
    this._phase = 'starting';
    this._starting = (async () => {
      try {
        await this._router.open();
        await this._syncShards(true);
      } catch (err) {
        await this.stop();
        throw err;
      }
      if (this._phase !== 'starting') throw new Error('HxShardedHub: stopped while starting');
      this._phase = 'running';
      this._routeChanged(null);
      this._schedulePoll();
    })();
    return this._starting;
  }

  /** Stop every subscription and every shard's hub; resolves when their connections are closed. */
  stop() {
    if (this._stopping) return this._stopping;
    this._phase = 'stopped';
    clearTimeout(this._routeTimer);
    this._routeTimer = null;
    for (const sub of [...this._subs]) sub.stop();
    const waits = [this._router.stop()];
    for (const s of this._shards.values()) {
      clearTimeout(s.timer);
      s.timer = null;
      if (s.hub) waits.push(s.hub.stop().catch(noop));
    }
    this._stopping = Promise.all(waits).then(noop);
    return this._stopping;
  }

  /**
   * Follow a session's stream: target {table, key} (routed by key) or
   * {stream} (routed by what follows its first ':'), options as
   * HxHub.follow's.  Returns a ShardSubscription.
   */
  follow(target, options) {
    if (this._phase === 'stopped') throw new Error('HxShardedHub: stopped');
    const t = target || {};
    if ((t.table === undefined || t.table === null) && (t.stream === undefined || t.stream === null)) {
      throw new TypeError('HxShardedHub: follow() needs {table, key} or {stream}');
    }
    if (t.table !== undefined && t.table !== null && (t.key === undefined || t.key === null)) {
      throw new TypeError('HxShardedHub: follow({table}) needs a key');
    }
    const key = keyOf(t);
    const sub = new ShardSubscription(this._subHost(), t, options || {}, key);
    this._subs.add(sub);
    let set = this._byKey.get(key);
    if (!set) {
      set = new Set();
      this._byKey.set(key, set);
    }
    set.add(sub);
    this.stats.subscriptions = this._subs.size;
    this._routing.add(key);
    this._queueRoutes();
    return sub;
  }

  /** Stop a subscription (the same as sub.stop()). */
  unfollow(sub) {
    if (sub && this._subs.has(sub)) sub.stop();
  }

  // -- routes ----------------------------------------------------------------

  _routeChanged(key) {
    if (this._phase === 'stopped') return;
    if (key === null) {
      this._all = true;
    } else if (this._byKey.has(key)) {
      this._routing.add(key);
    } else {
      return;
    }
    this._queueRoutes();
  }

  _queueRoutes() {
    if (this._routeQueued || this._reading || this._phase === 'idle' || this._phase === 'stopped') return;
    if (this._phase === 'starting') return; // start() reads them all
    this._routeQueued = true;
    setImmediate(() => {
      this._routeQueued = false;
      this._reading = true;
      this._readRoutes().catch((err) => this._error(err)).finally(() => {
        this._reading = false;
        // what was asked for while it ran
        if (this._all || this._routing.size > 0) this._queueRoutes();
      });
    });
  }

  async _readRoutes() {
    if (this._phase !== 'running') return;
    const all = this._all;
    this._all = false;
    const keys = all ? [...this._byKey.keys()] : [...this._routing];
    this._routing.clear();
    if (all) await this._syncShards(false);
    if (keys.length === 0) return;
    this.stats.routeReads++;
    let routes;
    try {
      routes = await this._router.routes(keys);
    } catch (err) {
      for (const k of keys) this._routing.add(k);
      if (all) this._all = true;
      throw err;
    }
    // a route to a shard not known here: one added since the shards were read
    if (!all && [...routes.values()].some((sh) => sh !== null && !this._shards.has(sh))) await this._syncShards(false);
    for (const key of keys) {
      const set = this._byKey.get(key);
      if (!set) continue;
      const shard = routes.has(key) ? routes.get(key) : null;
      for (const sub of [...set]) this._place(sub, shard);
    }
  }

  /** Put a subscription on its shard's hub, or make it wait for that hub. */
  _place(sub, shard) {
    if (sub.stopped) return;
    if (shard !== null && !this._shards.has(shard)) {
      // a route to a shard the router does not list (the shards were
      // read just before when they changed): wait, and say so; the next
      // poll reads the route and the shards again
      const err = new Error(`hxstate: the router routes ${sub.key} to shard ${shard}, which hxshard.shards() does not list`);
      err.shard = shard;
      this._error(err);
      sub.route(null);
      for (const s of this._shards.values()) s.waiting.delete(sub);
      return;
    }
    for (const s of this._shards.values()) if (s.shard !== shard) s.waiting.delete(sub);
    if (shard === null) {
      sub.route(null);
      return;
    }
    const s = this._shards.get(shard);
    if (!s.up) {
      if (sub.shard !== shard) sub.route(null); // off the old shard; on the new one once it is up
      s.waiting.add(sub);
      return;
    }
    s.waiting.delete(sub);
    if (sub.shard !== null && sub.shard !== shard) this.stats.moves++;
    sub.route(shard);
  }

  _schedulePoll() {
    if (this._phase !== 'running' || !(this._o.routeInterval > 0) || this._routeTimer) return;
    this._routeTimer = setTimeout(() => {
      this._routeTimer = null;
      this._routeChanged(null);
      this._schedulePoll();
    }, this._o.routeInterval);
  }

  // -- the shards' hubs ------------------------------------------------------

  /** Read the shards from the router; start a hub for each new one. */
  async _syncShards(first) {
    const list = await this._router.shards();
    const starts = [];
    for (const { shard, conninfo } of list) {
      if (this._shards.has(shard)) continue;
      const s = { shard, conninfo, hub: null, up: false, backoff: new Backoff(this._o.reconnect, this._o.reconnect.max), timer: null, waiting: new Set() };
      this._shards.set(shard, s);
      starts.push(this._startShard(s));
    }
    this.stats.shards = this._shards.size;
    if (first) await Promise.all(starts);
  }

  /** The config of a connection of shard s for role. */
  async _shardConfig(s, role) {
    const opt = this._o.shard;
    if (typeof opt === 'function') return opt(s.shard, role, s.conninfo);
    return { ...parseConninfo(s.conninfo), ...(opt || {}) };
  }

  async _startShard(s) {
    if (this._phase === 'stopped') return;
    const hub = new HxHub({ ...(this._o.hub || {}), pg: (role) => this._shardConfig(s, role) });
    s.hub = hub;
    hub.on('error', (err) => this._error(err, s.shard));
    hub.on('transport', (t) => this._emitSafe('transport', { shard: s.shard, ...t }));
    hub.on('disconnect', (err, role) => this._emitSafe('disconnect', err, role, s.shard));
    hub.on('reconnect', () => this._emitSafe('reconnect', s.shard));
    this.stats.shardStarts++;
    try {
      await hub.start();
    } catch (err) {
      this.stats.shardFailures++;
      if (s.hub === hub) s.hub = null;
      if (this._phase === 'stopped') return;
      const e = new Error(`hxstate: shard ${s.shard} cannot be followed now (${err.message}): trying again`);
      e.cause = err;
      e.shard = s.shard;
      this._error(e, s.shard);
      s.timer = setTimeout(() => {
        s.timer = null;
        this._startShard(s);
      }, s.backoff.next());
      return;
    }
    if (this._phase === 'stopped') {
      await hub.stop();
      return;
    }
    s.up = true;
    s.backoff.up(Date.now());
    // the sessions that waited for this shard
    const waiting = [...s.waiting];
    s.waiting.clear();
    for (const sub of waiting) this._routing.add(sub.key);
    if (waiting.length > 0) this._queueRoutes();
    this._emitSafe('shard', { shard: s.shard, up: true });
  }

  // -- what a ShardSubscription asks ------------------------------------------

  /** What a ShardSubscription asks of this hub (shardsub.js). */
  _subHost() {
    return {
      follow: (sub, shard, target, options) => this._follow(sub, shard, target, options),
      unfollow: (sub) => this._unfollow(sub),
      failed: (err, sub) => this._failed(err, sub),
      listenerFailed: (err) => this._listenerFailed(err),
    };
  }

  _follow(sub, shard, target, options) {
    return this._shards.get(shard).hub.follow(target, options);
  }

  _unfollow(sub) {
    if (!this._subs.delete(sub)) return;
    this.stats.subscriptions = this._subs.size;
    const set = this._byKey.get(sub.key);
    if (set) {
      set.delete(sub);
      if (set.size === 0) this._byKey.delete(sub.key);
    }
    for (const s of this._shards.values()) s.waiting.delete(sub);
  }

  /**
   * A subscription on a shard failed before it started (no such session
   * there, ...): if the session's route has changed meanwhile, it follows
   * it; if not, it fails.
   */
  _failed(err, sub) {
    const shard = sub.shard;
    this._router.routes([sub.key]).then((routes) => {
      if (sub.stopped) return;
      const now = routes.has(sub.key) ? routes.get(sub.key) : null;
      if (now !== shard && now !== null) {
        this._place(sub, now);
        return;
      }
      sub.fail(err);
    }, (e) => {
      this._error(e);
      sub.fail(err);
    });
  }

  _listenerFailed(err) {
    if (this._phase !== 'stopped' && emitError(this, err)) return;
    warnUnheard(err);
  }

  _emitSafe(name, ...args) {
    if (this._phase === 'stopped') return;
    emitSafe(this, name, args, (err) => this._listenerFailed(err));
  }

  /** 'error' (err, shard): what the hub recovers from by itself; only when listened to. */
  _error(err, shard) {
    if (this._phase === 'stopped') return;
    if (shard !== undefined && err && err.shard === undefined) {
      try { err.shard = shard; } catch (e) { /* a frozen error */ }
    }
    emitError(this, err);
  }
}

module.exports = { HxShardedHub, keyOf };
