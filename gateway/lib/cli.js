'use strict';
// The command line: flags first, then the environment, then defaults.
const fs = require('node:fs');
const cluster = require('node:cluster');
const { parseArgs } = require('node:util');
const { createGateway } = require('./gateway');
const { createServer } = require('./server');
const { mintToken, MAX_TTL, SCOPES } = require('./token');
const { parseTablesFlag } = require('./config');

const USAGE = `usage:
  hxstate-gateway [serve] [options]      serve the tables' streams over HTTP
  hxstate-gateway token <table>:<key> [--ttl seconds] [--scopes LIST] [--base URL]
                                         print a token for one key of a table
  hxstate-gateway token <table> --all [--ttl seconds] [--scopes LIST]
                                         print a token for every key of a table
  (--scopes: what the token lets its holder do, comma-separated: read (the
  default), run and resume (the run hook), append (the Durable Streams
  endpoint); the live view's URL that --base prints carries a read-only token)

serve options (environment variable in brackets):
  --database-url URL     the database [DATABASE_URL]; without it, libpq's PG* variables
  --tables LIST          tables served, comma-separated; name=schema.function for a
                         stream source [HX_GATEWAY_TABLES] (sessions)
  --host HOST            address to listen on [HX_GATEWAY_HOST] (127.0.0.1)
  --port N               port [PORT] (8080)
  --transport MODE       auto, wal or listen [HX_GATEWAY_TRANSPORT] (auto)
  --secret-file PATH     the token secret, read from a file; else [HX_GATEWAY_SECRET]
  --no-auth              serve every stream to anyone (development only)
  --messages PATH        the conversation's JSON pointer in a state, or none (/messages)
  --interrupt PATH       the pending interrupts' JSON pointer, or none (/__interrupt__)
  --max-per-client N     open streams per client address (32)
  --max-client-bytes N   bytes a slow client may hold before it skips ahead (1048576)
  --max-state-bytes N    bytes of a stream's conversation and interrupts followed (16777216)
  --max-queue N          events of one stream a response takes in one burst (256)
  --overflow MODE        snapshot or log: what a client that holds too much gets (snapshot)
  --max-body N           the largest POST body, in bytes (1048576)
  --heartbeat MS         idle time before a heartbeat comment (15000)
  --max-run SECONDS      longest AG-UI run, 0 for none (0)
  --cors ORIGIN          allow browsers of ORIGIN ("*" for any) to call the gateway
  --max-connections N    connections open at once; more are closed unanswered (10000)
  --headers-timeout MS   a request's headers must arrive within it, else 408 (10000)
  --request-timeout MS   a whole request (headers and body) within it, else 408 (30000)
  --durable              serve the streams over Durable Streams under /ds/ (run gateway/sql/durable.sql first)
  --durable-log-prefixes LIST
                         log streams the Durable Streams endpoint may write, comma-separated
                         (@agent:); implies --durable
  --workers N            serve from N processes on one port (1)
  --quiet                log errors only`;

const OPTIONS = {
  'database-url': { type: 'string' },
  tables: { type: 'string' },
  host: { type: 'string' },
  port: { type: 'string' },
  transport: { type: 'string' },
  'secret-file': { type: 'string' },
  'no-auth': { type: 'boolean' },
  'max-per-client': { type: 'string' },
  'max-queue': { type: 'string' },
  'max-client-bytes': { type: 'string' },
  'max-state-bytes': { type: 'string' },
  'max-body': { type: 'string' },
  messages: { type: 'string' },
  interrupt: { type: 'string' },
  workers: { type: 'string' },
  all: { type: 'boolean' },
  overflow: { type: 'string' },
  heartbeat: { type: 'string' },
  'max-run': { type: 'string' },
  cors: { type: 'string' },
  'max-connections': { type: 'string' },
  'headers-timeout': { type: 'string' },
  'request-timeout': { type: 'string' },
  durable: { type: 'boolean' },
  'durable-log-prefixes': { type: 'string' },
  quiet: { type: 'boolean' },
  ttl: { type: 'string' },
  scopes: { type: 'string' },
  base: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};

function int(value, name, min = 0) {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}`);
  return n;
}

function secretOf(values, env) {
  if (values['secret-file']) return fs.readFileSync(values['secret-file'], 'utf8').trim();
  return env.HX_GATEWAY_SECRET || null;
}

async function main(argv, env = process.env, out = console) {
  const { values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  if (values.help) {
    out.log(USAGE);
    return 0;
  }
  const command = positionals[0] || 'serve';
  if (command === 'token') {
    const stream = positionals[1];
    const secret = secretOf(values, env);
    if (!stream) throw new Error(`token needs a stream\n${USAGE}`);
    if (!secret) throw new Error('no secret: set HX_GATEWAY_SECRET (or --secret-file)');
    const ttl = values.ttl === undefined ? 3600 : int(values.ttl, 'ttl', 1);
    if (ttl > MAX_TTL) throw new Error(`--ttl must be at most ${MAX_TTL} seconds (30 days)`);
    if (values.all && stream.includes(':')) throw new Error('token <table> --all names a table, with no key');
    if (!values.all && !stream.includes(':')) throw new Error(`token needs <table>:<key>, or <table> --all\n${USAGE}`);
    const scopes = values.scopes === undefined ? ['read'] : values.scopes.split(',').map((x) => x.trim()).filter(Boolean);
    if (scopes.length === 0 || !scopes.every((x) => SCOPES.includes(x))) {
      throw new Error(`--scopes is a list of ${SCOPES.join(', ')}`);
    }
    const what = values.all ? { table: stream, all: true } : stream;
    const token = mintToken(secret, what, { ttl, scopes });
    out.log(token);
    if (values.base && !values.all) {
      const colon = stream.indexOf(':');
      const base = values.base.replace(/\/+$/, '');
      // a URL ends up in logs and browser history: its token is read-only
      const view = scopes.join() === 'read' ? token : mintToken(secret, what, { ttl });
      out.log(`${base}/view/${encodeURIComponent(stream.slice(0, colon))}/${encodeURIComponent(stream.slice(colon + 1))}?token=${view}`);
    }
    return 0;
  }
  if (command !== 'serve') throw new Error(`unknown command ${command}\n${USAGE}`);
  return serve(values, env, out);
}

async function serve(values, env, out) {
  const workers = values.workers === undefined ? 1 : int(values.workers, 'workers', 1);
  if (workers > 1 && cluster.isPrimary) return primary(workers, values, env, out);
  const tables = parseTablesFlag(values.tables || env.HX_GATEWAY_TABLES || 'sessions');
  const url = values['database-url'] || env.DATABASE_URL;
  const secret = secretOf(values, env);
  if (!secret && !values['no-auth']) {
    throw new Error('no secret: set HX_GATEWAY_SECRET (at least 32 bytes; see `hxstate-gateway token`), or --no-auth for development');
  }
  const quiet = !!values.quiet;
  const options = {
    pg: url ? { connectionString: url } : {},
    tables,
    transport: values.transport || env.HX_GATEWAY_TRANSPORT || 'auto',
    log: (level, message) => {
      if (level === 'error' || (!quiet && level !== 'debug')) out.error(`hxstate-gateway: ${message}`);
    },
  };
  if (values['no-auth']) options.authorize = () => true;
  else options.secret = secret;
  if (values['max-per-client'] !== undefined) options.maxPerClient = int(values['max-per-client'], 'max-per-client', 1);
  if (values['max-queue'] !== undefined) options.maxQueue = int(values['max-queue'], 'max-queue', 1);
  if (values['max-client-bytes'] !== undefined) options.maxClientBytes = int(values['max-client-bytes'], 'max-client-bytes', 1024);
  if (values['max-state-bytes'] !== undefined) options.maxStateBytes = int(values['max-state-bytes'], 'max-state-bytes', 1024);
  if (values['max-body'] !== undefined) options.maxBody = int(values['max-body'], 'max-body', 1);
  if (values.messages !== undefined) options.messages = values.messages;
  if (values.interrupt !== undefined) options.interrupt = values.interrupt;
  if (values.overflow !== undefined) options.overflow = values.overflow;
  if (values.heartbeat !== undefined) options.heartbeat = int(values.heartbeat, 'heartbeat', 100);
  if (values['max-run'] !== undefined) options.maxRunMs = int(values['max-run'], 'max-run') * 1000;
  if (values.cors !== undefined) options.cors = values.cors;
  const serverOptions = {};
  if (values['max-connections'] !== undefined) serverOptions.maxConnections = int(values['max-connections'], 'max-connections', 1);
  if (values['headers-timeout'] !== undefined) serverOptions.headersTimeout = int(values['headers-timeout'], 'headers-timeout', 1);
  if (values['request-timeout'] !== undefined) serverOptions.requestTimeout = int(values['request-timeout'], 'request-timeout', 1);
  if (values.durable || values['durable-log-prefixes'] !== undefined) {
    options.durable = { logPrefixes: (values['durable-log-prefixes'] || '').split(',').map((x) => x.trim()).filter(Boolean) };
  }
  const host = values.host || env.HX_GATEWAY_HOST || '127.0.0.1';
  const port = values.port !== undefined ? int(values.port, 'port') : Number(env.PORT || 8080);

  const gateway = createGateway(options);
  await gateway.ready;
  const server = createServer(gateway, serverOptions);
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const addr = server.address();
  const base = `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`;
  if (cluster.isWorker) process.send({ hxListening: base, transport: gateway.hub.transport });
  else out.log(`hxstate-gateway: listening on ${base} (tables: ${tables.map((t) => (typeof t === 'string' ? t : t.name)).join(', ')}; following over ${gateway.hub.transport}` +
    `${values['no-auth'] ? '; NO AUTHORIZATION' : ''})`);
  if (!cluster.isWorker) out.log(`  GET  ${base}/streams/<table>/<key>   POST ${base}/agents/<table>/<key>   GET ${base}/view/<table>/<key>`);
  if (!cluster.isWorker && options.durable) out.log(`  Durable Streams: ${base}/ds/<stream>`);
  let stopping = null;
  const stop = () => {
    if (!stopping) {
      stopping = (async () => {
        server.close();
        await gateway.close();
        if (server.closeAllConnections) server.closeAllConnections();
      })();
    }
    return stopping;
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  if (cluster.isWorker) process.once('disconnect', stop); // the primary went away
  await new Promise((resolve) => server.on('close', resolve));
  await stop();
  if (cluster.isWorker) process.exit(0); // its IPC channel would keep it alive
  return 0;
}

/**
 * --workers N: N processes, each a gateway with its own hub (at most three
 * connections to the database each), sharing one port through Node's
 * cluster module (the primary accepts connections and hands them round
 * robin to the workers).  The primary prints the listening line once every
 * worker listens, passes SIGINT and SIGTERM on, and exits once they all
 * have (status 1 if one failed).
 */
async function primary(workers, values, env, out) {
  const procs = [];
  let failed = false;
  const listening = [];
  await new Promise((resolve, reject) => {
    cluster.on('message', (w, m) => {
      if (!m || !m.hxListening) return;
      listening.push(m);
      if (listening.length === workers) resolve();
    });
    for (let i = 0; i < workers; i++) {
      const w = cluster.fork();
      procs.push(w);
      w.on('exit', (code) => {
        if (code !== 0) failed = true;
        if (listening.length < workers) reject(new Error(`a worker exited with status ${code} before listening`));
      });
    }
  }).catch((err) => {
    for (const w of procs) w.kill('SIGTERM');
    throw err;
  });
  const tables = parseTablesFlag(values.tables || env.HX_GATEWAY_TABLES || 'sessions').map((t) => (typeof t === 'string' ? t : t.name));
  const base = listening[0].hxListening;
  out.log(`hxstate-gateway: listening on ${base} (tables: ${tables.join(', ')}; ${workers} workers; following over ` +
    `${listening[0].transport}${values['no-auth'] ? '; NO AUTHORIZATION' : ''})`);
  out.log(`  GET  ${base}/streams/<table>/<key>   POST ${base}/agents/<table>/<key>   GET ${base}/view/<table>/<key>`);
  const stop = () => { for (const w of procs) if (!w.isDead()) w.process.kill('SIGTERM'); };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await Promise.all(procs.map((w) => (w.isDead() ? null : new Promise((resolve) => w.once('exit', resolve)))));
  return failed ? 1 : 0;
}

module.exports = { main, USAGE };
