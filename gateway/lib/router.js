'use strict';
// A request, checked in this order, the first failure its answer (see
// README.md, Authorisation):
//
//   the gateway closing (503), the path, the table and the key (404, 400),
//   the method (405), the Last-Event-ID (400), the token or the authorize
//   hook (401, 403) and its scopes, the client's open responses (429), the
//   body (413, 408, 503, 400; 409 for a threadId that names another thread
//   than the URL), the runs of the run hook (409, 429, 503),
//   then the subscription's start (stream.js, run.js: 400, 404, 503).
//
// route(ctx, req, res, next) serves it with the module of its route;
// everything it needs is in ctx (context.js).
const { HttpError } = require('./limits');
const { SCOPES } = require('./token');
const { capabilitiesOf } = require('./agui');
const { serveStream } = require('./stream');
const { serveRun } = require('./run');
const { parseInput } = require('./input');
const { serveAsset, serveView, servePhases } = require('./views');
const { json, corsHeaders } = require('./respond');
const { version } = require('../package.json');

const KEY_MAX_BYTES = 1024;
const ROUTES = ['streams', 'agents', 'view', 'phases', 'assets', 'healthz', 'capabilities'];

/** The configuration of the URL's table (percent-encoded); 404 if it is not served. */
function tableOf(ctx, segment) {
  let name;
  try {
    name = decodeURIComponent(segment);
  } catch (err) {
    throw new HttpError(400, 'malformed URL');
  }
  const table = ctx.tables.get(name);
  if (!table) throw new HttpError(404, `no such table: ${name}`);
  return table;
}

/** {table, key, stream, kind, url} of /<route>/<table>/<key>; 404 or 400 if not one. */
function targetOf(ctx, route, parts, url) {
  if (parts.length !== 4 || parts[2] === '' || route === 'assets' || route === 'healthz' || route === 'capabilities') {
    throw new HttpError(404, 'not found');
  }
  let key;
  try {
    key = decodeURIComponent(parts[3]);
  } catch (err) {
    throw new HttpError(400, 'malformed key: not a percent-encoded UTF-8 string');
  }
  const table = tableOf(ctx, parts[2]).name;
  if (key === '') throw new HttpError(400, 'malformed key: empty');
  if (key.includes('\u0000')) throw new HttpError(400, 'malformed key: it contains a NUL character');
  if (Buffer.byteLength(key) > KEY_MAX_BYTES) throw new HttpError(400, `malformed key: longer than ${KEY_MAX_BYTES} bytes`);
  // a table's streams are <prefix>:<key> as the database names them; a
  // source's name is its function's, known once the stream is followed
  return { table, key, stream: `${ctx.tables.prefixOf(table)}:${key}`, kind: route === 'agents' ? 'run' : route === 'streams' ? 'stream' : 'view', url };
}

/**
 * 409 when a POST /agents body's threadId names another thread of this
 * gateway than its URL.  The gateway's threads are its streams, named
 * <prefix>:<key> as the database names them (GET /streams' RUN_STARTED
 * carries that name); the URL says which one a request follows, and its
 * token or the authorize hook allowed that one.  A threadId that is the
 * name of another (a table the gateway serves, another key) would have
 * the response's RUN_STARTED and RUN_FINISHED say that thread while they
 * carry the URL's, and a run hook that goes by input.threadId act on a
 * thread the request was not allowed.  Any other threadId is the client's
 * own name for the URL's thread (HttpAgent makes up a random one when it
 * is given none), and the response's events carry it as asked.
 */
function checkThread(ctx, target, threadId) {
  if (threadId === target.stream) return;
  for (const t of ctx.tables.list) {
    if (!threadId.startsWith(`${ctx.tables.prefixOf(t.name)}:`)) continue;
    const named = threadId.length > 256 ? `${threadId.slice(0, 256)}...` : threadId; // the message stays short
    throw new HttpError(409, `the body's threadId ${JSON.stringify(named)} names another thread than the URL's ` +
      `${JSON.stringify(target.stream)}: post it to that thread's URL, or name this one (or none of the gateway's)`, null, 'hxstate_thread_mismatch');
  }
}

/** The seq to resume after: Last-Event-ID (or ?lastEventId=), a seq; null for none. */
function lastEventId(req, url) {
  let v = req.headers['last-event-id'];
  if (v === undefined) v = url.searchParams.get('lastEventId');
  if (v === undefined || v === null) return null;
  v = String(v).trim();
  if (!/^(0|[1-9][0-9]{0,15})$/.test(v) || !Number.isSafeInteger(Number(v))) {
    throw new HttpError(400, 'malformed Last-Event-ID: not a seq');
  }
  return Number(v);
}

/**
 * What the authorize hook grants the request: {principal, scopes,
 * limited} (principal: whom its runs count against, a token, or null for
 * the client's address; scopes: what it may do, every scope when the hook
 * said true; limited: why scopes were cut, if they were); HttpError 401
 * or 403 when it refuses.
 */
async function authorize(ctx, req, target) {
  let r;
  try {
    r = await ctx.config.authorize(req, target);
  } catch (err) {
    if (err && (err.status === 401 || err.status === 403)) throw new HttpError(err.status, err.message);
    throw err;
  }
  if (r === true) return { principal: null, scopes: SCOPES, limited: null };
  if (r && typeof r === 'object' && r.ok === true) {
    // a grant the gateway cannot read is the hook's bug: 500, logged, never every scope
    if (r.scopes !== undefined && !Array.isArray(r.scopes)) throw new Error(`the authorize hook granted scopes that are not an array: ${JSON.stringify(r.scopes)}`);
    return {
      principal: typeof r.principal === 'string' ? r.principal : null,
      scopes: Array.isArray(r.scopes) ? r.scopes.filter((x) => SCOPES.includes(x)) : SCOPES,
      limited: typeof r.limited === 'string' ? r.limited : null,
    };
  }
  if (r && (r.status === 401 || r.status === 403)) throw new HttpError(r.status, r.message || (r.status === 401 ? 'unauthorized' : 'forbidden'));
  throw new HttpError(403, 'forbidden');
}

/** 403 unless the grant has scope. */
function need(grant, scope) {
  if (grant.scopes.includes(scope)) return;
  throw new HttpError(403, `the token does not grant ${scope}${grant.limited ? `: ${grant.limited}` : ''}`);
}

function closing(ctx) {
  if (ctx.closing()) throw new HttpError(503, 'the gateway is closing');
}

/**
 * Serve a request (see above); HttpError for a refusal.  durable: the
 * Durable Streams endpoint, which serves the paths under its route, or
 * null.
 */
async function route(ctx, req, res, next, durable = null) {
  let url;
  try {
    url = new URL(req.url, 'http://gateway.invalid');
  } catch (err) {
    throw new HttpError(400, 'malformed URL');
  }
  const parts = url.pathname.split('/');
  const name = parts[1];
  if (durable && name === durable.route && parts.length > 2) return durable.handle(req, res, url);
  if (!ROUTES.includes(name)) {
    if (typeof next === 'function') return next();
    throw new HttpError(404, 'not found');
  }
  closing(ctx);
  if (req.method === 'OPTIONS' && ctx.config.cors) {
    res.writeHead(204, {
      ...corsHeaders(ctx.config),
      'access-control-allow-methods': 'GET, POST, OPTIONS',
      'access-control-allow-headers': 'authorization, content-type, accept, last-event-id',
      'access-control-max-age': '600',
    });
    res.end();
    return undefined;
  }
  if (name === 'healthz' && parts.length === 2) {
    return json(ctx, res, 200, { ok: true, transport: ctx.hub.transport, clients: ctx.responses.size });
  }
  if (name === 'assets' && parts.length === 3) {
    if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'GET only', { allow: 'GET, HEAD' });
    if (serveAsset(ctx.assets, req, res, parts[2])) return undefined;
    throw new HttpError(404, 'not found');
  }
  if ((name === 'capabilities' && parts.length === 3) || (name === 'agents' && parts.length === 5 && parts[4] === 'capabilities')) {
    // what a table's agent offers names its paths and its source
    // function: for whoever may read the table (a key's token, or the
    // table's), not for anyone
    const table = tableOf(ctx, parts[2]);
    const target = name === 'agents'
      ? { ...targetOf(ctx, name, parts.slice(0, 4), url), kind: 'capabilities' }
      : { table: table.name, key: null, stream: null, kind: 'capabilities', url };
    if (req.method !== 'GET') throw new HttpError(405, 'GET only', { allow: 'GET' });
    need(await authorize(ctx, req, target), 'read');
    return json(ctx, res, 200, capabilitiesOf(table, { hook: !!ctx.config.run, maxRunMs: ctx.config.maxRunMs, version }));
  }
  // POST /agents/<table>/<key>/connect: a thread joined (AG-UI's connect)
  const connect = name === 'agents' && parts.length === 5 && parts[4] === 'connect';
  const target = connect ? { ...targetOf(ctx, name, parts.slice(0, 4), url), kind: 'connect' } : targetOf(ctx, name, parts, url);
  const method = name === 'agents' ? 'POST' : 'GET';
  if (req.method !== method) throw new HttpError(405, `${method} only`, { allow: method });
  const after = name === 'streams' || name === 'agents' ? lastEventId(req, url) : null;
  const grant = await authorize(ctx, req, target);
  // a POST /agents needs read, run or resume as its body says (below)
  if (name !== 'agents') need(grant, 'read');
  if (name === 'view') return serveView(ctx.assets, req, res, target);
  // counted from here, before any body: a POST holds its place as it arrives
  const clientId = ctx.clientId(req);
  const release = ctx.slots.take(clientId);
  const table = ctx.tables.get(target.table);
  let slot = null;
  try {
    if (name === 'agents') {
      const body = await ctx.bodies.read(req);
      closing(ctx);
      const { input, json: text, maxDurationMs } = parseInput(body, { hook: ctx.config.run, maxDepth: ctx.config.maxInputDepth, connect });
      checkThread(ctx, target, input.threadId);
      const calls = ctx.config.run && after === null && !connect; // does this run call the run hook?
      need(grant, !calls ? 'read' : input.resume && input.resume.length > 0 ? 'resume' : 'run');
      // a run that calls the hook holds a place of its thread, its token and all runs
      if (calls) {
        slot = await ctx.runs.take(`${target.table}\u0000${target.key}`, grant.principal || `client:${clientId}`, target.stream);
        closing(ctx);
      }
      return serveRun(ctx, req, res, { target, table, clientId, release, after, input, json: text, maxDurationMs, slot, scopes: grant.scopes, connect });
    }
    if (name === 'phases') return servePhases(ctx, req, res, { target, clientId, release });
    return serveStream(ctx, req, res, { target, table, clientId, release, after });
  } catch (err) {
    release();
    if (slot) slot.ended();
    throw err;
  }
}

module.exports = { route, authorize, ROUTES, KEY_MAX_BYTES };
