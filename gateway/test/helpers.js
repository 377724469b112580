'use strict';
// What the gateway tests share (not a test file: node --test runs
// gateway/test/*.test.js): a gateway in this process on a free port, an
// SSE client that records every message (and can stop reading, as a slow
// browser does), and the databases and waits of test/js/helpers.js.
const http = require('node:http');
const h = require('../../test/js/helpers');
const { createGateway, createServer } = require('..');

const SECRET = 'a test secret that is at least 32 bytes long';

/** A gateway on database db, served by a node:http server on a free port. */
async function startGateway(db, options = {}, port = 0) {
  const gw = createGateway({
    pg: { database: db, application_name: options.appName || 'hx-gateway-test' },
    tables: ['sessions'],
    secret: SECRET,
    log: () => {},
    ...options,
  });
  await gw.ready;
  const server = createServer(gw);
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  const g = {
    gw,
    server,
    port: server.address().port,
    get base() { return `http://127.0.0.1:${this.port}`; },
    async close() {
      await gw.close();
      await new Promise((resolve) => {
        server.close(resolve);
        server.closeAllConnections();
      });
    },
  };
  return g;
}

/**
 * A gateway in a child process (child.js) on database db: {base, pid,
 * stats() (its counters, memory and what each client holds), rss() (its
 * resident memory, bytes, from /proc), close()}.
 */
async function childGateway(db, options = {}) {
  const { fork } = require('node:child_process');
  const all = {
    pg: { database: db, application_name: options.appName || 'hx-gateway-child' },
    tables: ['sessions'],
    secret: SECRET,
    ...options,
  };
  delete all.appName;
  const proc = fork(require('node:path').join(__dirname, 'child.js'), [JSON.stringify(all)], {
    execArgv: ['--expose-gc'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const { port } = await new Promise((resolve, reject) => {
    proc.once('message', resolve);
    proc.once('exit', (code) => reject(new Error(`the gateway's process exited with status ${code}`)));
  });
  const ask = (m) => new Promise((resolve) => {
    proc.once('message', resolve);
    proc.send(m);
  });
  return {
    proc,
    pid: proc.pid,
    base: `http://127.0.0.1:${port}`,
    stats: () => ask('stats'),
    rss: () => Number(/VmRSS:\s+(\d+) kB/.exec(require('node:fs').readFileSync(`/proc/${proc.pid}/status`, 'utf8'))[1]) * 1024,
    async close() {
      if (proc.exitCode !== null) return;
      await new Promise((resolve) => {
        proc.once('exit', resolve);
        proc.send('stop');
      });
    },
  };
}

/** Parse SSE text blocks into messages {id, event, data, comment}; returns the rest. */
function parseBlocks(buf, out) {
  let i;
  while ((i = buf.indexOf('\n\n')) >= 0) {
    const block = buf.slice(0, i);
    buf = buf.slice(i + 2);
    const msg = {};
    for (const line of block.split('\n')) {
      const c = line.indexOf(':');
      const field = c < 0 ? line : line.slice(0, c);
      const value = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
      if (field === '') msg.comment = value;
      else msg[field] = msg[field] === undefined ? value : `${msg[field]}\n${value}`;
    }
    if (msg.data !== undefined) msg.data = JSON.parse(msg.data);
    out.push(msg);
  }
  return buf;
}

/**
 * GET (or POST) url and record the response: status, headers, raw text,
 * and the SSE messages (data parsed).  events() are the messages with data.
 */
function sse(url, { headers = {}, method = 'GET', body, agent } = {}) {
  const c = { status: null, headers: null, text: '', messages: [], done: false, error: null };
  let buf = '';
  c.req = http.request(url, { method, headers, agent: agent || false }, (res) => {
    c.res = res;
    c.status = res.statusCode;
    c.headers = res.headers;
    res.setEncoding('utf8');
    res.on('data', (chunk) => {
      c.text += chunk;
      buf = parseBlocks(buf + chunk, c.messages);
    });
    res.on('end', () => { c.done = true; });
    res.on('close', () => { c.done = true; });
  });
  c.req.on('error', (err) => {
    c.error = err;
    c.done = true;
  });
  c.req.end(body);
  c.events = () => c.messages.filter((m) => m.data !== undefined).map((m) => m.data);
  // the stream's own events (those with a seq as their SSE id), without the run and the conversation
  c.seqEvents = () => c.messages.filter((m) => m.data !== undefined && m.id !== undefined).map((m) => m.data);
  c.types = () => c.events().map((e) => e.type);
  c.close = () => c.req.destroy();
  c.lastId = () => {
    const withId = c.messages.filter((m) => m.id !== undefined);
    return withId.length ? withId[withId.length - 1].id : null;
  };
  return c;
}

/** Wait until the client's response ended. */
function ended(c, what) {
  return h.waitFor(() => c.done, what || 'the response to end');
}

/** The state after the events handed out (applyEvent of hxstate-client). */
function stateOf(events, from = null) {
  const { applyEvent } = require('hxstate-client');
  let state = from;
  for (const e of events) state = applyEvent(state, e);
  return state;
}

/** A fresh database db with hxstate, docs/sessions.sql's table and the log's publication; a connection to it. */
async function gatewayDatabase(name) {
  const db = await h.freshDatabase(name);
  await sessionsTable(db);
  await db.query('SELECT hx_stream_publication()');
  return db;
}

async function sessionsTable(db) {
  await db.query(require('node:fs').readFileSync(require('node:path').join(__dirname, '..', '..', 'docs', 'sessions.sql'), 'utf8'));
}

/**
 * The connection URL of database db in the cluster the PG* variables name,
 * for programs that read DATABASE_URL as the README's examples do.
 */
function databaseUrl(db) {
  const { PGHOST, PGPORT, PGUSER } = process.env;
  return `postgresql://${PGUSER || 'postgres'}@/${db}?host=${PGHOST || '/var/run/postgresql'}&port=${PGPORT || 5432}`;
}

// The browser tests' Chromium (Debian's; test/provision --ci installs it):
// its path, why a test skips without it, and a headless one with a profile
// of its own (dir), as playwright-core launches it
const CHROMIUM = process.env.HX_CHROMIUM || '/usr/bin/chromium';
const noChromium = () => (require('node:fs').existsSync(CHROMIUM) ? false
  : `no browser at ${CHROMIUM} (apt-get install chromium; test/provision --ci installs it)`);
function launchChromium(dir, viewport) {
  const { chromium } = require('playwright-core');
  return chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
}

module.exports = { ...h, h, SECRET, startGateway, childGateway, sse, ended, stateOf, parseBlocks, sessionsTable, gatewayDatabase, databaseUrl,
  CHROMIUM, noChromium, launchChromium };
