'use strict';
// The command line: flags first, then the environment, then defaults.
const fs = require('node:fs');
const http = require('node:http');
const { parseArgs } = require('node:util');
const { createGateway } = require('./gateway');
const { mintToken } = require('./token');

const USAGE = `usage:
  hxstate-gateway [serve] [options]      serve the tables' streams over HTTP
  hxstate-gateway token <table>:<key> [--ttl seconds] [--base URL]
                                         print a token for a stream ("<table>:*": every key)

serve options (environment variable in brackets):
  --database-url URL     the database [DATABASE_URL]; without it, libpq's PG* variables
  --tables LIST          tables served, comma-separated [HX_GATEWAY_TABLES] (sessions)
  --host HOST            address to listen on [HX_GATEWAY_HOST] (127.0.0.1)
  --port N               port [PORT] (8080)
  --transport MODE       auto, wal or listen [HX_GATEWAY_TRANSPORT] (auto)
  --secret-file PATH     the token secret, read from a file; else [HX_GATEWAY_SECRET]
  --no-auth              serve every stream to anyone (development only)
  --max-per-client N     open streams per client address (32)
  --max-queue N          events queued per slow client before it skips to a snapshot (64)
  --overflow MODE        snapshot or log: what a client whose queue is full gets (snapshot)
  --heartbeat MS         idle time before a heartbeat comment (15000)
  --max-run SECONDS      longest AG-UI run, 0 for none (0)
  --cors ORIGIN          allow browsers of ORIGIN ("*" for any) to call the gateway
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
  overflow: { type: 'string' },
  heartbeat: { type: 'string' },
  'max-run': { type: 'string' },
  cors: { type: 'string' },
  quiet: { type: 'boolean' },
  ttl: { type: 'string' },
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
    const token = mintToken(secret, stream, { ttl: values.ttl === undefined ? 3600 : int(values.ttl, 'ttl', 1) });
    out.log(token);
    if (values.base) {
      const [table, ...rest] = stream.split(':');
      const key = rest.join(':');
      const base = values.base.replace(/\/+$/, '');
      if (key !== '*') out.log(`${base}/view/${encodeURIComponent(table)}/${encodeURIComponent(key)}?token=${token}`);
    }
    return 0;
  }
  if (command !== 'serve') throw new Error(`unknown command ${command}\n${USAGE}`);
  return serve(values, env, out);
}

async function serve(values, env, out) {
  const tables = (values.tables || env.HX_GATEWAY_TABLES || 'sessions').split(',').map((t) => t.trim()).filter(Boolean);
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
  if (values.overflow !== undefined) options.overflow = values.overflow;
  if (values.heartbeat !== undefined) options.heartbeat = int(values.heartbeat, 'heartbeat', 100);
  if (values['max-run'] !== undefined) options.maxRunMs = int(values['max-run'], 'max-run') * 1000;
  if (values.cors !== undefined) options.cors = values.cors;
  const host = values.host || env.HX_GATEWAY_HOST || '127.0.0.1';
  const port = values.port !== undefined ? int(values.port, 'port') : Number(env.PORT || 8080);

  const gateway = createGateway(options);
  await gateway.ready;
  const server = http.createServer(gateway.handler);
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const addr = server.address();
  const base = `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`;
  out.log(`hxstate-gateway: listening on ${base} (tables: ${tables.join(', ')}; following over ${gateway.hub.transport}` +
    `${values['no-auth'] ? '; NO AUTHORIZATION' : ''})`);
  out.log(`  GET  ${base}/streams/<table>/<key>   POST ${base}/agents/<table>/<key>   GET ${base}/view/<table>/<key>`);
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
  await new Promise((resolve) => server.on('close', resolve));
  await stop();
  return 0;
}

module.exports = { main, USAGE };
