'use strict';
// hxstate-gateway: hxstate streams as server-sent events, for browsers
// (EventSource) and for @ag-ui/client (HttpAgent), on one HxHub.
//
//   GET  /streams/<table>/<key>   the stream: a STATE_SNAPSHOT, then every event; SSE id = seq
//   POST /agents/<table>/<key>    the same stream as an AG-UI run (RUN_STARTED ... RUN_FINISHED)
//   GET  /view/<table>/<key>      the live view (HTML), and /phases/<table>/<key> (its phases, SSE)
//   GET  /assets/view.js|view.css the live view's script and style
//   GET  /healthz                 {"ok": true, "transport": ...}; nothing of any state
//
// Every browser request is one subscription of the hub (hub.follow), so
// each has its own position (Last-Event-ID resumes from the log), its own
// queue (a slow browser holds back only itself) and its own state of
// play; the hub shares the work of subscriptions of one stream.  The
// gateway asks for no states (state: false): it forwards events, and a
// snapshot event carries its state.
//
// The rules it relies on, from the hub's contract (client/README.md):
//   - a subscription hands out a snapshot (or, with after, the events
//     after that seq) and then every seq once, in order; after 'resync' a
//     fresh snapshot, whose seq is the id the browser resumes from;
//   - an 'event' listener that returns a promise holds the next event back,
//     and a subscription never queues more than maxQueue events
//     (overflow 'snapshot': the queue is dropped and a fresh snapshot
//     follows; 'log': the events are read from the log later);
//   - ready rejects when the subscription cannot start (a key its type
//     rejects: SQLSTATE class 22).
const fs = require('node:fs');
const path = require('node:path');
const { HxHub } = require('hxstate-client');
const { RunAgentInputSchema } = require('@ag-ui/core/schemas');
const { frameOf, refusal, sse } = require('./frames');
const { tokenAuthorizer } = require('./token');
const { Machines } = require('./machines');

const VIEW_DIR = path.join(__dirname, '..', 'view');
const KEY_MAX_BYTES = 1024;
const ENDED_MAX = 10000;

const DEFAULTS = {
  tables: ['sessions'],
  maxQueue: 64,
  overflow: 'snapshot',
  heartbeat: 15000,
  retry: 2000,
  maxPerClient: 32,
  maxRunMs: 0,
  maxBody: 16 * 1024 * 1024,
  phaseInterval: 1000,
  cors: null,
};

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** The status a subscription's failure to start means for the request. */
function statusOf(err) {
  const code = err && err.code;
  if (typeof code === 'string') {
    if (code.startsWith('22')) return 400;           // the key's type rejects it
    if (code === '42P01' || code === '42704') return 404; // no such table, or no stream trigger
  }
  if (err && /no stream for key/.test(err.message)) return 404;
  return 503;
}

function defaultClientId(req) {
  return req.socket.remoteAddress || 'unknown';
}

function defaultLog(level, message) {
  if (level === 'error' || level === 'warn') console.error(`hxstate-gateway: ${message}`);
}

// ---------------------------------------------------------------------
// One SSE response
// ---------------------------------------------------------------------

/**
 * A text/event-stream response.  Headers go out with the first write (so
 * that a request refused late, e.g. a key its type rejects, still gets a
 * status); writes report backpressure as a promise that settles once the
 * socket has drained (or closed).
 */
class SseResponse {
  constructor(gw, req, res, kind, clientId) {
    this.gw = gw;
    this.req = req;
    this.res = res;
    this.kind = kind;
    this.clientId = clientId;
    this.opened = false;
    this.closed = false;
    this.lastWrite = Date.now();
    this.onClose = null;     // set by the owner: the client went away or we ended
    this.finish = null;      // set by the owner: what to send when the gateway closes
    res.on('close', () => this._closed());
  }

  open() {
    if (this.opened || this.closed) return;
    this.opened = true;
    const headers = {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      'x-accel-buffering': 'no', // proxies that buffer (nginx) pass it through
      connection: 'keep-alive',
      ...this.gw._corsHeaders(),
    };
    this.res.writeHead(200, headers);
    if (this.res.socket) {
      this.res.socket.setNoDelay(true);
      this.res.socket.setKeepAlive(true, 30000);
    }
    // the EventSource reconnection delay
    this.res.write(`retry: ${this.gw._o.retry}\n\n`);
  }

  /** Write text; a promise when the socket's buffer is full (settles on drain or close). */
  write(text) {
    if (this.closed) return null;
    this.open();
    this.lastWrite = Date.now();
    this.gw.stats.frames++;
    if (this.res.write(text)) return null;
    return new Promise((resolve) => {
      const done = () => {
        this.res.removeListener('drain', done);
        this.res.removeListener('close', done);
        resolve();
      };
      this.res.on('drain', done);
      this.res.on('close', done);
    });
  }

  heartbeat(now) {
    if (!this.opened || this.closed || this.res.writableNeedDrain) return;
    if (now - this.lastWrite < this.gw._o.heartbeat) return;
    this.lastWrite = now;
    this.gw.stats.heartbeats++;
    this.res.write(':\n\n'); // an SSE comment: ignored by EventSource and @ag-ui/client
  }

  /** End the response cleanly (or with status, if nothing was sent yet). */
  end(status, message) {
    if (this.closed) return;
    if (!this.opened && status) {
      this.gw._refuse(this.res, status, message);
    } else {
      this.open();
      this.res.end();
    }
    this._closed();
  }

  _closed() {
    if (this.closed) return;
    this.closed = true;
    this.gw._forget(this);
    if (this.onClose) this.onClose();
  }
}

// ---------------------------------------------------------------------
// Following a stream for one response
// ---------------------------------------------------------------------

/**
 * One subscription for one response, with the gateway's rule for events
 * @ag-ui/client would refuse: the event is not sent, and the
 * subscription starts again from a fresh snapshot (whose seq is past the
 * refused event's, so the browser's state is exact again).
 */
class Follower {
  constructor(gw, target, { after, onEvent, onEnd, onReady, onFail }) {
    this.gw = gw;
    this.target = target;
    this.onEvent = onEvent;
    this.onEnd = onEnd;
    this.onReady = onReady;
    this.onFail = onFail;
    this.sub = null;
    this.sent = after === null ? null : after; // the seq of the last event sent
    this.stopped = false;
    this._follow(after);
  }

  _follow(after) {
    const { table, key } = this.target;
    const options = { state: false, maxQueue: this.gw._o.maxQueue, overflow: this.gw._o.overflow };
    if (after !== null) options.after = after;
    const sub = this.gw.hub.follow({ table, key }, options);
    this.sub = sub;
    sub.on('event', (event) => (this.sub === sub ? this._event(event) : null));
    sub.on('end', (event) => { if (this.sub === sub && !this.stopped) this.onEnd(event); });
    sub.on('error', (err) => this.gw._log('warn', `${table}:${key}: ${err.message}`));
    sub.ready.then(() => {
      if (this.sub === sub && !this.stopped && this.onReady) this.onReady();
    }, (err) => {
      if (this.sub === sub && !this.stopped) this.onFail(err);
    });
  }

  _event(event) {
    if (this.stopped) return null;
    const f = frameOf(event);
    if (!f.ok) {
      this.gw.stats.refused_events++;
      this.gw._log('warn', `${this.target.stream}: not sent, a fresh snapshot instead: ${f.reason}`);
      const old = this.sub;
      this.sub = null;
      old.stop();
      this._follow(null);
      return null;
    }
    this.sent = event.metadata.seq;
    return this.onEvent(event, f.frame);
  }

  stop() {
    if (this.stopped) return;
    this.stopped = true;
    if (this.sub) this.sub.stop();
  }
}

// ---------------------------------------------------------------------
// The gateway
// ---------------------------------------------------------------------

class Gateway {
  constructor(options) {
    const o = { ...DEFAULTS, ...(options || {}) };
    if (!Array.isArray(o.tables) || o.tables.length === 0) throw new TypeError('hxstate-gateway: options.tables lists the tables served');
    if (!['snapshot', 'log'].includes(o.overflow)) throw new TypeError("hxstate-gateway: options.overflow is 'snapshot' or 'log'");
    if (typeof o.authorize !== 'function') {
      if (o.secret !== undefined && o.secret !== null) o.authorize = tokenAuthorizer(o.secret);
      else throw new TypeError('hxstate-gateway: give options.authorize (a function of the request and the stream) or options.secret (signed tokens)');
    }
    this._o = o;
    this._tables = new Set(o.tables.map(String));
    this._log = o.log || defaultLog;
    this._clientId = o.clientId || defaultClientId;
    this._ownHub = !o.hub;
    this.hub = o.hub || new HxHub({ pg: o.pg, transport: o.transport || 'auto', maxQueue: o.maxQueue, ...(o.hubOptions || {}) });
    if (this._ownHub) {
      this.hub.on('error', (err) => this._log('warn', `hub: ${err.message}`));
      this.hub.on('transport', ({ transport, reason }) => this._log('info', `following over ${transport}${reason ? ` (${reason})` : ''}`));
      this.ready = this.hub.start();
    } else {
      this.ready = Promise.resolve();
    }
    this.ready.catch(() => {});
    this._machines = new Machines({
      pg: o.phasePg || o.pg,
      interval: o.phaseInterval,
      onError: (err) => this._log('warn', `phases: ${err.message}`),
    });
    this._conns = new Set();
    this._perClient = new Map();
    this._ended = new Map();       // stream -> seq of the hx.stream_end this gateway sent last
    this._closing = null;
    this._assets = new Map();
    for (const [file, type] of [['view.js', 'text/javascript'], ['view.css', 'text/css'], ['view.html', 'text/html']]) {
      this._assets.set(file, { type: `${type}; charset=utf-8`, body: fs.readFileSync(path.join(VIEW_DIR, file)) });
    }
    const beat = Math.max(50, Math.floor(o.heartbeat / 2));
    this._beat = setInterval(() => {
      const now = Date.now();
      for (const c of this._conns) c.heartbeat(now);
    }, beat);
    this._beat.unref();
    /** Counters, for monitoring and tests. */
    this.stats = {
      streams: 0, runs: 0, views: 0, // open now
      frames: 0, heartbeats: 0, refused_events: 0,
      status: { 204: 0, 400: 0, 401: 0, 403: 0, 404: 0, 405: 0, 413: 0, 429: 0, 500: 0, 503: 0 },
    };
    this.handler = this.handler.bind(this);
  }

  /** Open SSE responses now. */
  get clients() { return this._conns.size; }

  // -- requests ------------------------------------------------------------

  /**
   * The request handler: (req, res) for node:http, (req, res, next) for
   * Connect/Express (a path that is not the gateway's goes to next).
   */
  handler(req, res, next) {
    this._route(req, res, next).catch((err) => {
      if (err instanceof HttpError) {
        this._refuse(res, err.status, err.message);
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
    const routes = ['streams', 'agents', 'view', 'phases', 'assets', 'healthz'];
    if (!routes.includes(route)) {
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
    if (route === 'assets' && parts.length === 3 && ['view.js', 'view.css'].includes(parts[2])) {
      if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'GET only');
      const a = this._assets.get(parts[2]);
      res.writeHead(200, { 'content-type': a.type, 'cache-control': 'no-cache', 'content-length': a.body.length });
      res.end(req.method === 'HEAD' ? undefined : a.body);
      return undefined;
    }
    const target = this._target(route, parts, url);
    const method = route === 'agents' ? 'POST' : 'GET';
    if (req.method !== method) {
      res.setHeader('allow', method);
      throw new HttpError(405, `${method} only`);
    }
    const after = route === 'streams' ? this._lastEventId(req, url) : null;
    await this._authorize(req, target);
    if (route === 'view') return this._serveView(req, res, target);
    const clientId = this._clientId(req);
    const n = this._perClient.get(clientId) || 0;
    if (n >= this._o.maxPerClient) {
      res.setHeader('retry-after', '10');
      throw new HttpError(429, `too many open streams from this client (${this._o.maxPerClient})`);
    }
    if (route === 'agents') {
      const input = await this._runInput(req);
      return this._serveRun(req, res, target, clientId, input);
    }
    if (route === 'phases') return this._servePhases(req, res, target, clientId);
    return this._serveStream(req, res, target, clientId, after);
  }

  /** {table, key, stream, url} of /<route>/<table>/<key>; 404 or 400 if not one. */
  _target(route, parts, url) {
    if (parts.length !== 4 || parts[2] === '' || route === 'assets' || route === 'healthz') throw new HttpError(404, 'not found');
    let table;
    let key;
    try {
      table = decodeURIComponent(parts[2]);
      key = decodeURIComponent(parts[3]);
    } catch (err) {
      throw new HttpError(400, 'malformed key: not a percent-encoded UTF-8 string');
    }
    if (!this._tables.has(table)) throw new HttpError(404, `no such table: ${table}`);
    if (key === '') throw new HttpError(400, 'malformed key: empty');
    if (key.includes('\u0000')) throw new HttpError(400, 'malformed key: it contains a NUL character');
    if (Buffer.byteLength(key) > KEY_MAX_BYTES) throw new HttpError(400, `malformed key: longer than ${KEY_MAX_BYTES} bytes`);
    return { table, key, stream: `${table}:${key}`, kind: route === 'agents' ? 'run' : route === 'streams' ? 'stream' : 'view', url };
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

  /** The RunAgentInput of a POST; 400 if it is not one, 413 if too large. */
  async _runInput(req) {
    const chunks = [];
    let size = 0;
    for await (const chunk of req) {
      size += chunk.length;
      if (size > this._o.maxBody) throw new HttpError(413, `the request body is larger than ${this._o.maxBody} bytes`);
      chunks.push(chunk);
    }
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch (err) {
      throw new HttpError(400, 'the body is not JSON');
    }
    const r = RunAgentInputSchema.safeParse(body);
    if (!r.success) throw new HttpError(400, `the body is not a RunAgentInput: ${r.error.issues[0].path.join('.')}: ${r.error.issues[0].message}`);
    const props = body.forwardedProps && body.forwardedProps.hxstate;
    const maxMs = props && Number.isFinite(props.maxDurationMs) && props.maxDurationMs > 0 ? props.maxDurationMs : 0;
    return { threadId: body.threadId, runId: body.runId, maxDurationMs: maxMs };
  }

  // -- responses -------------------------------------------------------------

  _corsHeaders() {
    return this._o.cors ? { 'access-control-allow-origin': this._o.cors, vary: 'origin' } : {};
  }

  _refuse(res, status, message) {
    if (this.stats.status[status] !== undefined) this.stats.status[status]++;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const headers = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...this._corsHeaders() };
    if (status === 401) headers['www-authenticate'] = 'Bearer realm="hxstate"';
    res.writeHead(status, headers);
    res.end(status === 204 ? undefined : JSON.stringify({ error: message || String(status) }));
  }

  _json(res, status, value) {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...this._corsHeaders() });
    res.end(JSON.stringify(value));
  }

  _track(conn) {
    this._conns.add(conn);
    this._perClient.set(conn.clientId, (this._perClient.get(conn.clientId) || 0) + 1);
    this.stats[conn.kind === 'run' ? 'runs' : conn.kind === 'stream' ? 'streams' : 'views']++;
  }

  _forget(conn) {
    if (!this._conns.delete(conn)) return;
    const n = (this._perClient.get(conn.clientId) || 1) - 1;
    if (n > 0) this._perClient.set(conn.clientId, n);
    else this._perClient.delete(conn.clientId);
    this.stats[conn.kind === 'run' ? 'runs' : conn.kind === 'stream' ? 'streams' : 'views']--;
  }

  _rememberEnd(stream, seq) {
    this._ended.delete(stream);
    this._ended.set(stream, seq);
    if (this._ended.size > ENDED_MAX) this._ended.delete(this._ended.keys().next().value);
  }

  /** GET /streams/<table>/<key>: the stream as SSE, resumable by Last-Event-ID. */
  _serveStream(req, res, target, clientId, after) {
    const conn = new SseResponse(this, req, res, 'stream', clientId);
    this._track(conn);
    // a reconnect right after the hx.stream_end this gateway sent: if
    // nothing follows it, 204 tells the EventSource to stop reconnecting
    const endedAt = after !== null && this._ended.get(target.stream) === after;
    let got = false;
    const f = new Follower(this, target, {
      after,
      onEvent: (event, frame) => {
        got = true;
        return conn.write(frame);
      },
      onEnd: (event) => {
        this._rememberEnd(target.stream, event.metadata.seq);
        f.stop();
        conn.end(); // after the hx.stream_end frame: 'end' follows the event's write
      },
      onReady: () => {
        if (endedAt && !got) {
          f.stop();
          conn.end(204);
          return;
        }
        conn.open();
      },
      onFail: (err) => {
        f.stop();
        conn.end(statusOf(err), statusOf(err) === 400 ? `malformed key: ${err.message}` : err.message);
      },
    });
    conn.onClose = () => f.stop();
    conn.finish = () => conn.end();
  }

  /**
   * POST /agents/<table>/<key>: the stream as one AG-UI run.  RUN_STARTED
   * (the input's threadId and runId), then the stream's events, then
   * RUN_FINISHED when the stream ends (after its hx.stream_end), when the
   * run's maximum duration is reached or when the gateway closes, with
   * result {stream, seq, reason}.  A client that disconnects ends the run
   * with nothing more sent.
   */
  _serveRun(req, res, target, clientId, input) {
    const conn = new SseResponse(this, req, res, 'run', clientId);
    this._track(conn);
    const { threadId, runId } = input;
    let started = false;
    let finished = false;
    let timer = null;
    const start = () => {
      if (started) return;
      started = true;
      conn.write(sse({ type: 'RUN_STARTED', threadId, runId, timestamp: Date.now() }));
    };
    const finish = (reason, extra) => {
      if (finished || conn.closed) return;
      finished = true;
      clearTimeout(timer);
      f.stop();
      start();
      const event = {
        type: 'RUN_FINISHED', threadId, runId, timestamp: Date.now(),
        result: { stream: target.stream, seq: f.sent === null ? 0 : f.sent, reason, ...(extra || {}) },
      };
      const why = refusal(event);
      conn.write(why ? sse({ type: 'RUN_ERROR', message: why, code: 'hxstate_gateway', timestamp: Date.now() }) : sse(event));
      conn.end();
    };
    const f = new Follower(this, target, {
      after: null,
      onEvent: (event, frame) => {
        start();
        return conn.write(frame);
      },
      onEnd: (event) => finish('stream_end', { end: event.value === undefined ? null : event.value }),
      onReady: start,
      onFail: (err) => {
        if (!started) {
          f.stop();
          conn.end(statusOf(err), err.message);
          return;
        }
        finished = true;
        clearTimeout(timer);
        f.stop();
        conn.write(sse({ type: 'RUN_ERROR', message: err.message, code: 'hxstate_failed', timestamp: Date.now() }));
        conn.end();
      },
    });
    const limits = [this._o.maxRunMs, input.maxDurationMs].filter((ms) => ms > 0);
    if (limits.length > 0) timer = setTimeout(() => finish('max_duration'), Math.min(...limits));
    conn.onClose = () => {
      clearTimeout(timer);
      f.stop();
    };
    conn.finish = () => finish('gateway_closed');
  }

  /** GET /view/<table>/<key>: the live view's page. */
  _serveView(req, res, target) {
    const page = this._assets.get('view.html').body.toString('utf8')
      .replace(/\{\{title\}\}/g, escapeHtml(target.stream));
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'x-frame-options': 'DENY' });
    res.end(page);
  }

  /**
   * GET /phases/<table>/<key>: the table's machine (event "machine"), then
   * the row's phase now and at each change (event "phase"), polled.
   */
  _servePhases(req, res, target, clientId) {
    const conn = new SseResponse(this, req, res, 'view', clientId);
    this._track(conn);
    let unwatch = null;
    conn.onClose = () => { if (unwatch) unwatch(); };
    conn.finish = () => conn.end();
    this._machines.machine(target.table).then((m) => {
      if (conn.closed) return;
      conn.write(`event: machine\ndata: ${JSON.stringify(m)}\n\n`);
      if (!m.machine) return;
      unwatch = this._machines.watch(target.table, target.key, (p) => {
        conn.write(`event: phase\ndata: ${JSON.stringify(p)}\n\n`);
      });
      if (conn.closed) unwatch();
    }, (err) => {
      this._log('warn', `phases of ${target.table}: ${err.message}`);
      conn.end(503, 'the machine could not be read');
    });
  }

  // -- closing ---------------------------------------------------------------

  /**
   * Close: every open response ends (a run with RUN_FINISHED, reason
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
      if (this._ownHub) await this.hub.stop();
    })();
    return this._closing;
  }
}

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * createGateway(options): a Gateway; mount gateway.handler in a
 * node:http server (or Connect/Express), await gateway.ready before
 * listening if it has a hub of its own, and await gateway.close() to stop.
 */
function createGateway(options) {
  return new Gateway(options);
}

module.exports = { createGateway, Gateway };
