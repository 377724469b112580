'use strict';
// The sharded hub's connection to the router database (shard/router.sql):
// where each session lives (hxshard.routes, the router's own routing
// function), which shards there are (hxshard.shards), and word of a route
// that changed (LISTEN hxshard_route: a session's key after its move, '*'
// after a change of buckets or shards).  A notification is only a hint:
// routes are always read from the router's tables, and read again for
// every followed key after a reconnect and every pollInterval ms.
//
// One connection, reopened after a backoff delay when it fails; lookups
// asked for while it is down wait for it.
const pg = require('pg');
const { Backoff } = require('./backoff');
const { noop } = require('./emit');
const { isConnectionError } = require('./errors');

const CHANNEL = 'hxshard_route';

class RouterLink {
  /**
   * @param {object} o
   * @param {object|string|function} o.pg the router's pg.Client config (or () => config)
   * @param {{min: number, max: number}} o.reconnect backoff bounds (ms)
   * @param {number} o.batchSize keys per routes query
   * @param {(key: string|null) => void} o.onChange a route may have changed (null: any)
   * @param {() => void} o.onUp (re)connected: read every route again
   * @param {(err: Error) => void} o.onError
   */
  constructor(o) {
    this._o = o;
    this._client = null;
    this._backoff = new Backoff(o.reconnect, o.reconnect.max);
    this._timer = null;
    this._stopped = false;
    this._ready = null;            // resolves when connected
    this._resolveReady = null;
    this._queue = Promise.resolve(); // one statement at a time
    this.connected = false;
    this.stats = { connects: 0, disconnects: 0, queries: 0, notifications: 0 };
    this._newReady();
  }

  _newReady() {
    this._ready = new Promise((resolve) => { this._resolveReady = resolve; });
  }

  /** Connect; rejects if this first attempt fails (the caller stops). */
  async open() {
    await this._connect();
  }

  async _connect() {
    const option = this._o.pg;
    let c = typeof option === 'function' ? await option('router') : option;
    if (typeof c === 'string') c = { connectionString: c };
    const client = new pg.Client({ keepAlive: true, fallback_application_name: 'hxstate-hub-router', ...(c || {}) });
    client.on('error', (err) => this._lost(client, err));
    client.on('end', () => this._lost(client, new Error('hxstate: the router connection closed')));
    client.on('notification', (msg) => {
      if (msg.channel !== CHANNEL) return;
      this.stats.notifications++;
      const key = msg.payload && msg.payload !== '*' ? msg.payload : null;
      this._o.onChange(key);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (err) {
      client.end().catch(noop);
      throw err;
    }
    if (this._stopped) {
      client.end().catch(noop);
      throw new Error('HxShardedHub: stopped');
    }
    this._client = client;
    this.connected = true;
    this.stats.connects++;
    this._backoff.up(Date.now());
    this._resolveReady();
  }

  _lost(client, err) {
    if (this._client !== client) return;
    this._client = null;
    this.connected = false;
    client.end().catch(noop);
    if (this._stopped) return;
    this.stats.disconnects++;
    this._newReady();
    this._backoff.lost(Date.now());
    this._o.onError(err);
    this._schedule();
  }

  _schedule() {
    if (this._stopped || this._timer) return;
    this._timer = setTimeout(() => {
      this._timer = null;
      this._connect().then(() => this._o.onUp(), (err) => {
        this._o.onError(err);
        this._schedule();
      });
    }, this._backoff.next());
  }

  /** Run a statement once connected (one at a time); a connection lost on the way retries it. */
  query(text, values) {
    const run = async () => {
      for (;;) {
        if (this._stopped) throw new Error('HxShardedHub: stopped');
        await this._ready;
        const client = this._client;
        if (!client) continue;
        try {
          this.stats.queries++;
          return await client.query(text, values);
        } catch (err) {
          if (!isConnectionError(err)) throw err;
          // the connection went: wait for the next one
          this._lost(client, err);
        }
      }
    };
    const p = this._queue.then(run);
    this._queue = p.then(noop, noop);
    return p;
  }

  /** [{shard, conninfo}] */
  async shards() {
    const { rows } = await this.query('SELECT shard, conninfo FROM hxshard.shards() ORDER BY shard');
    return rows.map((r) => ({ shard: Number(r.shard), conninfo: r.conninfo }));
  }

  /** Map(key -> shard|null) for keys, batchSize keys a statement. */
  async routes(keys) {
    const out = new Map();
    for (let i = 0; i < keys.length; i += this._o.batchSize) {
      const part = keys.slice(i, i + this._o.batchSize);
      const { rows } = await this.query('SELECT session_id, shard FROM hxshard.routes($1::text[])', [part]);
      for (const r of rows) out.set(r.session_id, r.shard === null ? null : Number(r.shard));
    }
    return out;
  }

  async stop() {
    this._stopped = true;
    clearTimeout(this._timer);
    this._timer = null;
    this._resolveReady();
    const client = this._client;
    this._client = null;
    this.connected = false;
    if (client) await client.end().catch(noop);
  }
}

module.exports = { RouterLink, CHANNEL };
