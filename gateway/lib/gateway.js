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
// This file is the coordinator: the options, the context object every
// module and request handler is given (context.js: config, hub, caches,
// bounds), starting and closing; and the Durable Streams endpoint
// (durable/), given what it shares of the gateway as named seams.  A request is checked and served by
// router.js; every response for a stream is one Follower (follow.js) on
// the hub, writing to one SseResponse (sse.js: what a client may hold, in
// bytes).
const { HxHub } = require('hxstate-client');
const { MAX_TIMER_MS } = require('./timers');
const { HttpError, ClientSlots, BodyReader } = require('./limits');
const { tokenAuthorizer } = require('./token');
const { Machines, clientFor } = require('./machines');
const { Tables, normaliseTables, streamPrefixes, prefixClash } = require('./config');
const { FrameCache } = require('./frames');
const { Openings } = require('./openings');
const { RunSlots } = require('./runs');
const { loadAssets } = require('./views');
const { createContext } = require('./context');
const { route, authorize } = require('./router');
const { refuse } = require('./respond');
const { DurableEndpoint, durableOptions } = require('./durable');

const DEFAULTS = {
  tables: ['sessions'],
  maxQueue: 256,
  overflow: 'snapshot',
  heartbeat: 15000,
  retry: 2000,
  maxPerClient: 32,
  maxRunMs: 0,
  maxInputDepth: 64,
  maxRuns: 16,
  maxRunsPerToken: 4,
  maxBody: 1024 * 1024,
  maxBodyTotal: 64 * 1024 * 1024,
  bodyTimeout: 10000,
  maxClientBytes: 1024 * 1024,
  maxStateBytes: 16 * 1024 * 1024,
  stallTimeout: 30000,
  phaseInterval: 1000,
  runScan: 10000,
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

/** The options with their defaults, checked; TypeError for a bad one. */
function configOf(options) {
  const o = { ...DEFAULTS, ...(options || {}) };
  if (!['snapshot', 'log'].includes(o.overflow)) throw new TypeError("hxstate-gateway: options.overflow is 'snapshot' or 'log'");
  for (const name of ['maxQueue', 'maxPerClient', 'maxBody', 'maxBodyTotal', 'bodyTimeout', 'maxClientBytes', 'stallTimeout',
    'maxInputDepth', 'maxRuns', 'maxRunsPerToken', 'maxStateBytes', 'runScan', 'heartbeat']) positiveInt(o, name);
  for (const name of ['bodyTimeout', 'stallTimeout', 'heartbeat']) {
    if (o[name] > MAX_TIMER_MS) throw new TypeError(`hxstate-gateway: options.${name} is at most ${MAX_TIMER_MS} ms`);
  }
  if (o.run !== null && typeof o.run !== 'function') throw new TypeError('hxstate-gateway: options.run is a function (input, target, {signal, json})');
  if (o.durable) durableOptions(o.durable); // checked before anything starts
  if (typeof o.authorize !== 'function') {
    if (o.secret !== undefined && o.secret !== null) o.authorize = tokenAuthorizer(o.secret);
    else throw new TypeError('hxstate-gateway: give options.authorize (a function of the request and the stream) or options.secret (signed tokens)');
  }
  return Object.freeze(o);
}

class Gateway {
  constructor(options) {
    // the gateway checks its own signed tokens (no authorize hook given)
    const tokens = !(options && typeof options.authorize === 'function');
    const config = configOf(options);
    const tables = new Tables(normaliseTables(config.tables, { messages: config.messages, interrupt: config.interrupt }));
    const log = config.log || defaultLog;
    this._ownHub = !config.hub;
    const sources = tables.list.filter((t) => t.source);
    const hubOptions = { pg: config.pg, transport: config.transport || 'auto', maxQueue: config.maxQueue, ...(config.hubOptions || {}) };
    if (sources.length > 0) hubOptions.sources = { ...(hubOptions.sources || {}), ...Object.fromEntries(sources.map((t) => [t.name, t.source])) };
    // with a hub of yours, its sources are yours to give (HxHub's sources option)
    const hub = config.hub || new HxHub(hubOptions);
    const started = this._ownHub ? hub.start() : Promise.resolve();
    if (this._ownHub) {
      hub.on('error', (err) => log('warn', `hub: ${err.message}`));
      hub.on('transport', ({ transport, reason }) => {
        const why = reason || (transport === 'wal' ? hub.decoderReason : null);
        log('info', `following over ${transport}${why ? ` (${why})` : ''}`);
      });
    }
    this._closing = null;
    this._ctx = createContext({
      config,
      log,
      hub,
      tables,
      frames: new FrameCache(), // this gateway's own: shared by its responses only
      openings: new Openings({
        read: typeof hub.read === 'function' ? (fn) => hub.read(fn) : null, maxScan: config.runScan, maxBytes: config.maxStateBytes, log,
      }),
      machines: new Machines({
        pg: config.phasePg || config.pg,
        interval: config.phaseInterval,
        onError: (err) => log('warn', `phases: ${err.message}`),
      }),
      assets: loadAssets(),
      slots: new ClientSlots(config.maxPerClient),
      bodies: new BodyReader({ maxBody: config.maxBody, maxBodyTotal: config.maxBodyTotal, bodyMs: config.bodyTimeout }),
      runs: new RunSlots({ perToken: config.maxRunsPerToken, total: config.maxRuns }),
      clientId: config.clientId || defaultClientId,
      closing: () => this._closing !== null,
    });
    const ctx = this._ctx;
    // the Durable Streams endpoint (lib/durable/), with what it shares of the gateway
    this.durable = config.durable ? new DurableEndpoint(config.durable, {
      pg: config.pg, hub, tokens, cors: config.cors, heartbeat: config.heartbeat, stallTimeout: config.stallTimeout, log,
      authorize: (req, target) => authorize(ctx, req, target),
      bodies: ctx.bodies,
      takeSlot: (req) => ctx.slots.take(ctx.clientId(req)),
      prefixes: () => tables.prefixes(),
    }) : null;
    // a gateway that cannot start lets go of what it started
    const parts = [started, this._checkPrefixes()];
    if (this.durable) parts.push(this.durable.ready);
    this.ready = Promise.all(parts).then(() => undefined, async (err) => {
      if (this.durable) await this.durable.close();
      await this._ctx.openings.close();
      if (this._ownHub) await hub.stop().catch(() => {});
      throw err;
    });
    this.ready.catch(() => {});
    const beat = Math.max(50, Math.floor(Math.min(config.heartbeat, config.stallTimeout) / 2));
    this._beat = setInterval(() => {
      const now = Date.now();
      for (const c of this._ctx.responses) c.tick(now);
    }, beat);
    this._beat.unref();
    this.handler = this.handler.bind(this);
  }

  /** Counters, for monitoring and tests. */
  get stats() { return this._ctx.counters.values; }

  /** The tables' configuration, [{name, messages, interrupt, source}]. */
  get tables() { return this._ctx.tables.list; }

  /** The HxHub that follows the streams. */
  get hub() { return this._ctx.hub; }

  /** Open SSE responses now. */
  get clients() { return this._ctx.responses.size; }

  /** The SSE responses open now ({kind, held, maxHeld, res, ...}), for monitoring and tests. */
  get responses() { return [...this._ctx.responses]; }

  /** Bytes of request bodies being read now. */
  get bodyBytes() { return this._ctx.bodies.inFlight; }

  /** Open responses (and POSTs being read) counted for a client (clientId's value). */
  openFor(clientId) { return this._ctx.slots.count(clientId); }

  /**
   * Each table's stream prefix, as the database names its streams
   * (streamPrefixes), for the names the gateway reports; refuse to serve
   * two tables whose streams would be one.
   */
  async _checkPrefixes() {
    const { config, tables } = this._ctx;
    const plain = tables.list.filter((t) => !t.source);
    if (plain.length === 0) return;
    const client = await clientFor(config.phasePg || config.pg);
    await client.connect();
    let prefixes;
    try {
      prefixes = await streamPrefixes(client, plain);
    } finally {
      await client.end().catch(() => {});
    }
    const clash = prefixClash(prefixes);
    if (clash) throw new Error(`hxstate-gateway: ${clash}`);
    tables.learn(prefixes);
  }

  /**
   * The request handler: (req, res) for node:http, (req, res, next) for
   * Connect/Express (a path that is not the gateway's goes to next).
   */
  handler(req, res, next) {
    const ctx = this._ctx;
    route(ctx, req, res, next, this.durable).catch((err) => {
      if (err instanceof HttpError) {
        refuse(ctx, res, err.status, err.message, err.headers, err.code);
        return;
      }
      ctx.log('error', `${req.method} ${req.url}: ${err.stack || err.message}`);
      refuse(ctx, res, 500, 'internal error');
    });
  }

  /**
   * Close: every open response ends (RUN_FINISHED, reason
   * "gateway_closed"), every subscription stops, and the gateway's own
   * hub and connection close.  Browsers reconnect (EventSource) to
   * whatever serves the URL next.
   */
  close() {
    if (this._closing) return this._closing;
    clearInterval(this._beat);
    const ctx = this._ctx;
    this._closing = (async () => {
      for (const c of [...ctx.responses]) c.finish();
      await ctx.machines.close();
      await ctx.openings.close();
      if (this.durable) await this.durable.close();
      await this.ready.catch(() => {});
      if (this._ownHub) await ctx.hub.stop();
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

module.exports = { createGateway, Gateway, DEFAULTS };
