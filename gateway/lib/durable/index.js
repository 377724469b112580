'use strict';
// The Durable Streams endpoint of hxstate-gateway: hxstate's streams (and,
// when enabled, byte streams of its own tables) over the Durable Streams
// HTTP protocol, for @durable-streams/client and any client of the
// protocol.  See the gateway's README, "Durable Streams".
//
//   PUT    /<route>/<name>   create (a byte stream; a log stream under a log prefix)
//   POST   /<route>/<name>   append, close; idempotent producers
//   GET    /<route>/<name>   read: catch-up, ?live=long-poll, ?live=sse
//   HEAD   /<route>/<name>   metadata
//   DELETE /<route>/<name>   delete (byte streams)
//
// The gateway mounts it (gateway.js hands it the requests under its
// route) and gives it, as named seams, what it shares: the hub, the
// authorize hook, the body reader, the per-client slots.
const pg = require('pg');
const { HttpError } = require('../limits');
const { Store } = require('./store');
const { quoteIdent } = require('../ident');
const { Waiter } = require('./waiter');
const { resolveName, writableLog } = require('./names');
const { authorizeDurable } = require('./auth');
const { serveRead } = require('./read');
const { encodeOffset } = require('./offsets');
const h = require('./headers');
const { baseHeaders, preflight, refuse } = require('./respond');

const DEFAULTS = {
  route: 'ds',
  schema: 'hx_durable',
  bytes: 'ds',
  logPrefixes: [],
  maxStreamBytes: 64 * 1024 * 1024,
  maxReadBytes: 1024 * 1024,
  maxProducers: 1000,
  longPollMs: 20000,
  sseMs: 60000,
  pollMs: 1000,
  poolSize: 4,
};

function positiveInt(o, name) {
  if (!Number.isSafeInteger(o[name]) || o[name] < 1) throw new TypeError(`hxstate-gateway: options.durable.${name} is an integer >= 1`);
}

/** The options of the durable option (true for the defaults), checked. */
function durableOptions(given) {
  const o = { ...DEFAULTS, ...(given === true ? {} : given) };
  if (typeof o.route !== 'string' || !/^[A-Za-z0-9_.~-]+$/.test(o.route)) throw new TypeError('hxstate-gateway: options.durable.route is one URL path segment');
  if (typeof o.schema !== 'string' || o.schema === '') throw new TypeError('hxstate-gateway: options.durable.schema is a schema name');
  if (o.bytes !== false && o.bytes !== null && (typeof o.bytes !== 'string' || o.bytes === '')) {
    throw new TypeError('hxstate-gateway: options.durable.bytes is the table name tokens give byte streams, or false');
  }
  if (!Array.isArray(o.logPrefixes) || o.logPrefixes.some((p) => typeof p !== 'string' || !p.startsWith('@') || p.length < 2)) {
    throw new TypeError('hxstate-gateway: options.durable.logPrefixes lists prefixes of log streams, each "@..."');
  }
  for (const n of ['maxStreamBytes', 'maxReadBytes', 'maxProducers', 'longPollMs', 'sseMs', 'pollMs', 'poolSize']) positiveInt(o, n);
  return o;
}

/** The absolute URL of a created stream, for Location (relative when the Host header is not a plain host[:port]). */
function locationOf(req, url) {
  const host = req.headers.host;
  if (typeof host !== 'string' || !/^[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$/.test(host)) return url.pathname;
  const proto = req.socket && req.socket.encrypted ? 'https' : 'http';
  return `${proto}://${host}${url.pathname}`;
}

class DurableEndpoint {
  /**
   * options: the durable option; seams: {pg, hub, authorize(req, target)
   * (rejects with an HttpError 401/403), tokens (the gateway checks signed
   * tokens), bodies (a BodyReader), takeSlot(req) (a per-client slot: its
   * release function, or HttpError 429), prefixes() (Map table -> stream
   * prefix), cors, heartbeat, stallTimeout, log}.
   */
  constructor(options, seams) {
    this.o = durableOptions(options);
    this.route = this.o.route;
    this._seams = seams;
    this._closing = false;
    this._closers = new Set();
    this._open = new Set();
    this.stats = { requests: 0, appends: 0, stalled: 0, status: {} };
    this._pool = null;
    this._store = null;
    this._waiter = null;
    this.ready = this._start();
    this.ready.catch(() => {});
  }

  async _start() {
    let c = this._seams.pg;
    if (typeof c === 'function') c = await c('durable');
    if (typeof c === 'string') c = { connectionString: c };
    this._pool = new pg.Pool({ fallback_application_name: 'hxstate-gateway', ...(c || {}), max: this.o.poolSize });
    this._pool.on('error', (err) => this._seams.log('warn', `durable pool: ${err.message}`));
    const { rows: [ext] } = await this._pool.query(
      "SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'hxstate'");
    if (!ext) throw new Error('hxstate-gateway: the durable endpoint needs hxstate in the database');
    const { rows: [tbl] } = await this._pool.query('SELECT pg_catalog.to_regclass($1) AS t', [`${quoteIdent(this.o.schema)}.stream`]);
    if (!tbl.t) {
      throw new Error(`hxstate-gateway: the durable endpoint's tables are not in schema ${this.o.schema}: ` +
        'run gateway/sql/durable.sql (or setupDurable()) first');
    }
    this._store = new Store({
      pool: this._pool, schema: this.o.schema, hx: quoteIdent(ext.nspname),
      maxStreamBytes: this.o.maxStreamBytes, maxProducers: this.o.maxProducers,
    });
    this._waiter = new Waiter({
      hub: this._seams.hub, store: this._store, pollMs: this.o.pollMs,
      onError: (err) => this._seams.log('warn', `durable poll: ${err.message}`),
    });
  }

  /** Readers waiting now for more (long-poll and SSE). */
  get waiting() {
    return this._waiter ? this._waiter.waiting : 0;
  }

  /** Handle a request under /<route>/. */
  handle(req, res, url) {
    this.stats.requests++;
    this._serve(req, res, url).catch((err) => {
      const status = err instanceof HttpError ? err.status : 500;
      if (status === 500) this._seams.log('error', `${req.method} ${req.url}: ${err.stack || err.message}`);
      this._count(status);
      refuse(req, res, this._seams.cors, status, status === 500 ? 'internal error' : err.message, err.headers);
    });
  }

  _count(status) {
    this.stats.status[status] = (this.stats.status[status] || 0) + 1;
  }

  async _serve(req, res, url) {
    if (this._closing) throw new HttpError(503, 'the gateway is closing', { 'retry-after': '1' });
    await this.ready;
    if (req.method === 'OPTIONS') {
      preflight(res, this._seams.cors);
      return;
    }
    const rest = url.pathname.slice(this.route.length + 2);
    const t = resolveName(rest, { prefixes: this._seams.prefixes(), bytes: this.o.bytes || null });
    const method = req.method;
    if (!['GET', 'HEAD', 'PUT', 'POST', 'DELETE'].includes(method)) {
      throw new HttpError(405, `${method} is not a method of Durable Streams`, { allow: 'GET, HEAD, PUT, POST, DELETE, OPTIONS' });
    }
    const write = method !== 'GET' && method !== 'HEAD';
    if (write && t.kind === 'table') {
      throw new HttpError(405, "a table's stream is written by its row's trigger only: read it", { allow: 'GET, HEAD, OPTIONS' });
    }
    if (write && t.kind === 'log') {
      if (!writableLog(t.name, this.o.logPrefixes)) {
        throw new HttpError(403, 'this log stream is not under a prefix the gateway writes (options.durable.logPrefixes)');
      }
      if (method === 'DELETE') throw new HttpError(405, "a log stream is hxstate's log: it is not deleted", { allow: 'GET, HEAD, PUT, POST, OPTIONS' });
    }
    await authorizeDurable(this._seams, req, { table: t.table, key: t.key, stream: t.stream, kind: 'durable', access: write ? 'write' : 'read', url });
    const ctx = this._ctx();
    if (method === 'GET') return serveRead(ctx, req, res, t, url);
    if (method === 'HEAD') return this._head(req, res, t);
    if (method === 'DELETE') {
      await this._store.remove(t);
      this._waiter.notify(t.name);
      res.writeHead(204, baseHeaders(this._seams.cors));
      res.end();
      return undefined;
    }
    if (method === 'PUT') return this._create(req, res, t, url);
    return this._append(req, res, t);
  }

  _ctx() {
    return {
      store: this._store,
      waiter: this._waiter,
      cors: this._seams.cors,
      maxReadBytes: this.o.maxReadBytes,
      longPollMs: this.o.longPollMs,
      sseMs: this.o.sseMs,
      heartbeat: this._seams.heartbeat,
      stallTimeout: this._seams.stallTimeout,
      stats: this.stats,
      log: this._seams.log,
      closing: () => this._closing,
      onClosing: (fn) => {
        this._closers.add(fn);
        return () => this._closers.delete(fn);
      },
      takeSlot: (req) => this._seams.takeSlot(req),
    };
  }

  async _head(req, res, t) {
    const meta = await this._store.meta(t, { touch: false });
    const headers = {
      ...baseHeaders(this._seams.cors), 'content-type': meta.contentType, 'stream-next-offset': encodeOffset(meta.tail),
      'cache-control': 'no-store',
      etag: `"${Buffer.from(t.name).toString('base64url')}:-1:${encodeOffset(meta.tail)}${meta.closed ? ':c' : ''}"`,
    };
    if (meta.closed) headers['stream-closed'] = 'true';
    if (meta.ttl !== null) headers['stream-ttl'] = String(meta.ttl);
    if (meta.expiresAt !== null) headers['stream-expires-at'] = meta.expiresAt;
    res.writeHead(200, headers);
    res.end();
  }

  /**
   * The stream a Stream-Forked-From path names: its URL's path on this
   * gateway, /<route>/<name>, or the path below the endpoint's URL,
   * /<name> (as a client given the endpoint's URL as its base names it).
   */
  _forkSource(path) {
    const prefix = `/${this.route}/`;
    let p;
    try {
      p = new URL(path, 'http://gateway.invalid').pathname;
    } catch (err) {
      throw new HttpError(400, 'Stream-Forked-From is not a URL path');
    }
    const rest = p.startsWith(prefix) ? p.slice(prefix.length) : p.slice(1);
    const src = resolveName(rest, { prefixes: new Map(), bytes: this.o.bytes || null });
    if (src.kind !== 'bytes') throw new HttpError(400, 'only byte streams are forked');
    return src;
  }

  async _create(req, res, t, url) {
    const contentType = h.contentTypeOf(req);
    const expiry = h.expiryOf(req);
    const closed = h.closedOf(req);
    const fork = h.forkOf(req);
    let source = null;
    if (fork) {
      source = this._forkSource(fork.from);
      // the source is read: the token must grant reading it too
      await authorizeDurable(this._seams, req, { table: source.table, key: source.key, stream: source.stream, kind: 'durable', access: 'read', url });
    }
    if (t.kind === 'log') {
      if (contentType !== undefined && !h.isJson(contentType)) throw new HttpError(409, 'a log stream is application/json');
      if (expiry.ttl !== null || expiry.expiresAt !== null) throw new HttpError(400, "a log stream is kept as hxstate's log keeps it: no Stream-TTL or Stream-Expires-At");
      if (closed) throw new HttpError(400, 'a log stream is not closed: end it with an hx.stream_end event');
      if (fork) throw new HttpError(400, 'a log stream is not forked');
    }
    const body = await this._seams.bodies.read(req);
    const r = t.kind === 'log'
      ? await this._store.createLog(t, { body })
      : await this._store.create(t, { contentType, ...expiry, closed, body, fork: fork ? { ...fork, from: source.name } : null });
    if (r.tail > 0) this._waiter.notify(t.name);
    const headers = { ...baseHeaders(this._seams.cors), 'content-type': r.contentType, 'stream-next-offset': encodeOffset(r.tail) };
    if (r.status === 201) headers.location = locationOf(req, url);
    if (r.closed) headers['stream-closed'] = 'true';
    res.writeHead(r.status, headers);
    res.end();
  }

  async _append(req, res, t) {
    const close = h.closedOf(req);
    const producer = h.producerOf(req);
    const streamSeq = h.streamSeqOf(req);
    const contentType = h.contentTypeOf(req);
    if (close && t.kind === 'log') throw new HttpError(405, 'a log stream is not closed: end it with an hx.stream_end event', { allow: 'GET, HEAD, PUT, POST, OPTIONS' });
    const body = await this._seams.bodies.read(req);
    if (body.length === 0 && !close) throw new HttpError(400, 'an append needs a body (or Stream-Closed: true, to close)');
    if (body.length > 0 && contentType === undefined) throw new HttpError(400, 'an append with a body needs its Content-Type');
    const r = await this._store.append(t, { contentType, body, close, producer, streamSeq });
    this.stats.appends++;
    if (r.appended || r.closed) this._waiter.notify(t.name);
    const headers = { ...baseHeaders(this._seams.cors), 'stream-next-offset': encodeOffset(r.tail) };
    if (r.closed) headers['stream-closed'] = 'true';
    if (r.producer) {
      headers['producer-epoch'] = String(r.producer.epoch);
      headers['producer-seq'] = String(r.lastSeq);
    }
    res.writeHead(r.status, headers);
    res.end();
  }

  /** Stop: open readers end (they resume elsewhere by offset), the pool closes. */
  async close() {
    if (this._closing) return;
    this._closing = true;
    for (const fn of [...this._closers]) fn();
    if (this._waiter) this._waiter.close();
    await this.ready.catch(() => {});
    if (this._pool) await this._pool.end().catch(() => {});
  }
}

module.exports = { DurableEndpoint, durableOptions, DEFAULTS };
