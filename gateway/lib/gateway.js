'use strict';
// hxstate-gateway: hxstate streams as server-sent events, for browsers
// (EventSource) and for @ag-ui/client (HttpAgent), on one HxHub.
//
//   GET  /streams/<table>/<key>          the stream as an AG-UI run: RUN_STARTED, the
//                                        prelude, every event; SSE id = seq (stream.js)
//   POST /agents/<table>/<key>           the same, for HttpAgent, with the application's
//                                        run hook and outcomes (run.js)
//   GET  /agents/<table>/<key>/capabilities, /capabilities/<table>
//                                        the table's AG-UI capabilities (agui.js)
//   GET  /view/<table>/<key>             the live view (HTML), /phases/<table>/<key>
//   GET  /assets/view.js|view.css        its script and style (views.js)
//   GET  /healthz                        {"ok": true, "transport": ...}; nothing of any state
//
// This file is the coordinator: options, the order in which a request is
// checked (limits.js: what a client may spend), and closing.  Every
// response for a stream is one Follower (follow.js) on the hub, writing to
// one SseResponse (sse.js: what a client may hold, in bytes).
const { HxHub } = require('hxstate-client');
const { HttpError, ClientSlots, BodyReader } = require('./limits');
const { tokenAuthorizer } = require('./token');
const { Machines, clientFor } = require('./machines');
const { normaliseTables, streamPrefixes, prefixClash } = require('./config');
const { capabilitiesOf } = require('./agui');
const { serveStream } = require('./stream');
const { serveRun, parseInput } = require('./run');
const { loadAssets, serveAsset, serveView, servePhases } = require('./views');
const { DurableEndpoint, durableOptions } = require('./durable');
const { version } = require('../package.json');

const KEY_MAX_BYTES = 1024;
const ROUTES = ['streams', 'agents', 'view', 'phases', 'assets', 'healthz', 'capabilities'];

const DEFAULTS = {
  tables: ['sessions'],
  maxQueue: 256,
  overflow: 'snapshot',
  heartbeat: 15000,
  retry: 2000,
  maxPerClient: 32,
  maxRunMs: 0,
  maxBody: 1024 * 1024,
  maxBodyTotal: 64 * 1024 * 1024,
  bodyTimeout: 10000,
  maxClientBytes: 1024 * 1024,
  stallTimeout: 30000,
  phaseInterval: 1000,
  cors: null,
  run: null,
};

function positiveInt(o, name, min = 1) {
  if (!Number.isSafeInteger(o[name]) || o[name] < min) throw new TypeError(`hxstate-gateway: options.${name} is an integer >= ${min}`);
}

function defaultClientId(req) {
  return req.socket.remoteAddress || 'unknown';
}

function defaultLog(level, message) {
  if (level === 'error' || level === 'warn') console.error(`hxstate-gateway: ${message}`);
}

// How long a refused request's connection goes on being read (and what
// arrives dropped) after its response, before the gateway closes it.
const LINGER_MS = 5000;

/**
 * A lingering close for a connection whose request body the gateway
 * refused (413, 408, 503 with Connection: close).  node:http closes such a
 * socket as soon as the response is written; a client still sending its
 * body then gets a reset, and most clients (Node's among them) report the
 * reset and drop the response they have not read yet, so they never see
 * the status or its Retry-After.  Instead our side half-closes after the
 * response, goes on reading and dropping what the client sends, and
 * destroys the socket when the client closes or after LINGER_MS.
 */
function lingeringClose(socket) {
  socket.destroySoon = function destroySoon() { // what node:http calls once the response is written
    this.end();
    this.resume();
    const timer = setTimeout(() => this.destroy(), LINGER_MS);
    timer.unref();
    this.once('close', () => clearTimeout(timer));
  };
}

class Gateway {
  constructor(options) {
    const o = { ...DEFAULTS, ...(options || {}) };
    const tokens = typeof o.authorize !== 'function';
    if (!['snapshot', 'log'].includes(o.overflow)) throw new TypeError("hxstate-gateway: options.overflow is 'snapshot' or 'log'");
    for (const name of ['maxQueue', 'maxPerClient', 'maxBody', 'maxBodyTotal', 'bodyTimeout', 'maxClientBytes', 'stallTimeout']) positiveInt(o, name);
    if (o.run !== null && typeof o.run !== 'function') throw new TypeError('hxstate-gateway: options.run is a function (input, target, {signal})');
    if (o.durable) durableOptions(o.durable); // checked before anything starts
    if (typeof o.authorize !== 'function') {
      if (o.secret !== undefined && o.secret !== null) o.authorize = tokenAuthorizer(o.secret);
      else throw new TypeError('hxstate-gateway: give options.authorize (a function of the request and the stream) or options.secret (signed tokens)');
    }
    this._o = o;
    this.tables = normaliseTables(o.tables, { messages: o.messages, interrupt: o.interrupt });
    this._tables = new Map(this.tables.map((t) => [t.name, t]));
    this._log = o.log || defaultLog;
    this._clientId = o.clientId || defaultClientId;
    this._ownHub = !o.hub;
    const sources = this.tables.filter((t) => t.source);
    const hubOptions = { pg: o.pg, transport: o.transport || 'auto', maxQueue: o.maxQueue, ...(o.hubOptions || {}) };
    if (sources.length > 0) hubOptions.sources = { ...(hubOptions.sources || {}), ...Object.fromEntries(sources.map((t) => [t.name, t.source])) };
    // with a hub of yours, its sources are yours to give (HxHub's sources option)
    this.hub = o.hub || new HxHub(hubOptions);
    const started = this._ownHub ? this.hub.start() : Promise.resolve();
    if (this._ownHub) {
      this.hub.on('error', (err) => this._log('warn', `hub: ${err.message}`));
      this.hub.on('transport', ({ transport, reason }) => this._log('info', `following over ${transport}${reason ? ` (${reason})` : ''}`));
    }
    // a gateway that cannot start lets go of what it started
    this.ready = Promise.all([started, this._checkPrefixes()]).then(() => undefined, async (err) => {
      if (this._ownHub) await this.hub.stop().catch(() => {});
      throw err;
    });
    this.ready.catch(() => {});
    this._machines = new Machines({
      pg: o.phasePg || o.pg,
      interval: o.phaseInterval,
      onError: (err) => this._log('warn', `phases: ${err.message}`),
    });
    this._conns = new Set();
    this._slots = new ClientSlots(o.maxPerClient);
    this._bodies = new BodyReader({ maxBody: o.maxBody, maxBodyTotal: o.maxBodyTotal, bodyMs: o.bodyTimeout });
    this._closing = null;
    // the Durable Streams endpoint (lib/durable/), with what it shares of the gateway
    this.durable = o.durable ? new DurableEndpoint(o.durable, {
      pg: o.pg, hub: this.hub, tokens, cors: o.cors, heartbeat: o.heartbeat, stallTimeout: o.stallTimeout, log: this._log,
      authorize: (req, target) => this._authorize(req, target),
      bodies: this._bodies,
      takeSlot: (req) => this._slots.take(this._clientId(req)),
      prefixes: () => this.prefixes || new Map(),
    }) : null;
    if (this.durable) {
      this.ready = Promise.all([this.ready, this.durable.ready]).then(() => undefined, async (err) => {
        await this.durable.close();
        if (this._ownHub) await this.hub.stop().catch(() => {});
        throw err;
      });
      this.ready.catch(() => {});
    }
    this._assets = loadAssets();
    const beat = Math.max(50, Math.floor(Math.min(o.heartbeat, o.stallTimeout) / 2));
    this._beat = setInterval(() => {
      const now = Date.now();
      for (const c of this._conns) c.tick(now);
    }, beat);
    this._beat.unref();
    /** Counters, for monitoring and tests. */
    this.stats = {
      streams: 0, runs: 0, views: 0, // open now
      frames: 0, heartbeats: 0, refused_events: 0,
      overflows: 0, stalled: 0, crossed_ends: 0, dropped_messages: 0,
      status: { 204: 0, 400: 0, 401: 0, 403: 0, 404: 0, 405: 0, 408: 0, 413: 0, 429: 0, 500: 0, 503: 0 },
    };
    this.handler = this.handler.bind(this);
  }

  /** Open SSE responses now. */
  get clients() { return this._conns.size; }

  /** Bytes of request bodies being read now. */
  get bodyBytes() { return this._bodies.inFlight; }

  /**
   * Each table's stream prefix, as the database names its streams (see
   * config.js), for the names the gateway reports; refuse to serve two
   * tables whose streams would be one.
   */
  async _checkPrefixes() {
    const plain = this.tables.filter((t) => !t.source);
    if (plain.length === 0) return;
    const client = await clientFor(this._o.phasePg || this._o.pg);
    await client.connect();
    let prefixes;
    try {
      prefixes = await streamPrefixes(client, plain);
    } finally {
      await client.end().catch(() => {});
    }
    const clash = prefixClash(prefixes);
    if (clash) throw new Error(`hxstate-gateway: ${clash}`);
    this.prefixes = prefixes;
  }

  // -- requests ------------------------------------------------------------

  /**
   * The request handler: (req, res) for node:http, (req, res, next) for
   * Connect/Express (a path that is not the gateway's goes to next).
   */
  handler(req, res, next) {
    this._route(req, res, next).catch((err) => {
      if (err instanceof HttpError) {
        this._refuse(res, err.status, err.message, err.headers);
        return;
      }
      this._log('error', `${req.method} ${req.url}: ${err.stack || err.message}`);
      this._refuse(res, 500, 'internal error');
    });
  }

  async _route(req, res, next) {
    let url;
    try {
      url = new URL(req.url, 'http://gateway.invalid');
    } catch (err) {
      throw new HttpError(400, 'malformed URL');
    }
    const parts = url.pathname.split('/');
    const route = parts[1];
    if (this.durable && route === this.durable.route && parts.length > 2) return this.durable.handle(req, res, url);
    if (!ROUTES.includes(route)) {
      if (typeof next === 'function') return next();
      throw new HttpError(404, 'not found');
    }
    if (this._closing) throw new HttpError(503, 'the gateway is closing');
    if (req.method === 'OPTIONS' && this._o.cors) {
      res.writeHead(204, {
        ...this._corsHeaders(),
        'access-control-allow-methods': 'GET, POST, OPTIONS',
        'access-control-allow-headers': 'authorization, content-type, accept, last-event-id',
        'access-control-max-age': '600',
      });
      res.end();
      return undefined;
    }
    if (route === 'healthz' && parts.length === 2) {
      return this._json(res, 200, { ok: true, transport: this.hub.transport, clients: this.clients });
    }
    if (route === 'assets' && parts.length === 3) {
      if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'GET only', { allow: 'GET, HEAD' });
      if (serveAsset(this._assets, req, res, parts[2])) return undefined;
      throw new HttpError(404, 'not found');
    }
    const capabilities = (route === 'capabilities' && parts.length === 3) || (route === 'agents' && parts.length === 5 && parts[4] === 'capabilities');
    if (capabilities) {
      if (req.method !== 'GET') throw new HttpError(405, 'GET only', { allow: 'GET' });
      const table = this._table(parts[2]);
      return this._json(res, 200, capabilitiesOf(table, { hook: !!this._o.run, maxRunMs: this._o.maxRunMs, version }));
    }
    const target = this._target(route, parts, url);
    const method = route === 'agents' ? 'POST' : 'GET';
    if (req.method !== method) throw new HttpError(405, `${method} only`, { allow: method });
    const after = route === 'streams' || route === 'agents' ? this._lastEventId(req, url) : null;
    await this._authorize(req, target);
    if (route === 'view') return serveView(this._assets, req, res, target);
    // counted from here, before any body: a POST holds its place as it arrives
    const clientId = this._clientId(req);
    const release = this._slots.take(clientId);
    const table = this._tables.get(target.table);
    try {
      if (route === 'agents') {
        const body = await this._bodies.read(req);
        if (this._closing) throw new HttpError(503, 'the gateway is closing');
        const { input, maxDurationMs } = parseInput(body, { hook: this._o.run });
        return serveRun(this, req, res, { target, table, clientId, release, after, input, maxDurationMs });
      }
      if (route === 'phases') return servePhases(this, req, res, { target, clientId, release });
      return serveStream(this, req, res, { target, table, clientId, release, after });
    } catch (err) {
      release();
      throw err;
    }
  }

  /** The configuration of the URL's table (percent-encoded); 404 if it is not served. */
  _table(segment) {
    let name;
    try {
      name = decodeURIComponent(segment);
    } catch (err) {
      throw new HttpError(400, 'malformed URL');
    }
    const table = this._tables.get(name);
    if (!table) throw new HttpError(404, `no such table: ${name}`);
    return table;
  }

  /** {table, key, stream, kind, url} of /<route>/<table>/<key>; 404 or 400 if not one. */
  _target(route, parts, url) {
    if (parts.length !== 4 || parts[2] === '' || route === 'assets' || route === 'healthz' || route === 'capabilities') {
      throw new HttpError(404, 'not found');
    }
    let key;
    try {
      key = decodeURIComponent(parts[3]);
    } catch (err) {
      throw new HttpError(400, 'malformed key: not a percent-encoded UTF-8 string');
    }
    const table = this._table(parts[2]).name;
    if (key === '') throw new HttpError(400, 'malformed key: empty');
    if (key.includes('\u0000')) throw new HttpError(400, 'malformed key: it contains a NUL character');
    if (Buffer.byteLength(key) > KEY_MAX_BYTES) throw new HttpError(400, `malformed key: longer than ${KEY_MAX_BYTES} bytes`);
    // a table's streams are <prefix>:<key> as the database names them; a
    // source's name is its function's, known once the stream is followed
    const prefix = this.prefixes && this.prefixes.get(table);
    return { table, key, stream: `${prefix || table}:${key}`, kind: route === 'agents' ? 'run' : route === 'streams' ? 'stream' : 'view', url };
  }

  /** The seq to resume after: Last-Event-ID (or ?lastEventId=), a seq; null for none. */
  _lastEventId(req, url) {
    let v = req.headers['last-event-id'];
    if (v === undefined) v = url.searchParams.get('lastEventId');
    if (v === undefined || v === null) return null;
    v = String(v).trim();
    if (!/^(0|[1-9][0-9]{0,15})$/.test(v) || !Number.isSafeInteger(Number(v))) {
      throw new HttpError(400, 'malformed Last-Event-ID: not a seq');
    }
    return Number(v);
  }

  async _authorize(req, target) {
    let r;
    try {
      r = await this._o.authorize(req, target);
    } catch (err) {
      if (err && (err.status === 401 || err.status === 403)) throw new HttpError(err.status, err.message);
      throw err;
    }
    if (r === true) return;
    if (r && (r.status === 401 || r.status === 403)) throw new HttpError(r.status, r.message || (r.status === 401 ? 'unauthorized' : 'forbidden'));
    throw new HttpError(403, 'forbidden');
  }

  // -- responses -------------------------------------------------------------

  _corsHeaders() {
    return this._o.cors ? { 'access-control-allow-origin': this._o.cors, vary: 'origin' } : {};
  }

  _refuse(res, status, message, extra) {
    if (this.stats.status[status] !== undefined) this.stats.status[status]++;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const headers = {
      'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff',
      ...this._corsHeaders(), ...(extra || {}),
    };
    if (status === 401) headers['www-authenticate'] = 'Bearer realm="hxstate"';
    res.writeHead(status, headers);
    res.end(status === 204 ? undefined : JSON.stringify({ error: message || String(status) }));
    if (headers.connection === 'close' && res.socket) lingeringClose(res.socket);
  }

  _json(res, status, value) {
    res.writeHead(status, {
      'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff',
      ...this._corsHeaders(),
    });
    res.end(JSON.stringify(value));
  }

  _track(conn, release) {
    this._conns.add(conn);
    conn.releaseSlot = release;
    this.stats[conn.kind === 'run' ? 'runs' : conn.kind === 'stream' ? 'streams' : 'views']++;
  }

  _forget(conn) {
    if (!this._conns.delete(conn)) return;
    if (conn.releaseSlot) conn.releaseSlot();
    this.stats[conn.kind === 'run' ? 'runs' : conn.kind === 'stream' ? 'streams' : 'views']--;
  }

  // -- closing ---------------------------------------------------------------

  /**
   * Close: every open response ends (RUN_FINISHED, reason
   * "gateway_closed"), every subscription stops, and the gateway's own
   * hub and connection close.  Browsers reconnect (EventSource) to
   * whatever serves the URL next.
   */
  close() {
    if (this._closing) return this._closing;
    clearInterval(this._beat);
    this._closing = (async () => {
      for (const c of [...this._conns]) {
        if (c.finish) c.finish();
        else c.end();
      }
      await this._machines.close();
      if (this.durable) await this.durable.close();
      await this.ready.catch(() => {});
      if (this._ownHub) await this.hub.stop();
    })();
    return this._closing;
  }
}

/**
 * createGateway(options): a Gateway; mount gateway.handler in a
 * node:http server (or Connect/Express), await gateway.ready before
 * listening, and await gateway.close() to stop.
 */
function createGateway(options) {
  return new Gateway(options);
}

module.exports = { createGateway, Gateway };
