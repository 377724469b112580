'use strict';
// bench/gateway.js: hxstate-gateway under 1,000 SSE clients.
//
//   node bench/gateway.js [--clients 1000] [--streams 1000] [--rate 200] [--seconds 20]
//
// Assumes a running cluster reachable with the PG* variables (e.g.
// test/lib/cluster.sh's hx_cluster_start), where it creates (and drops
// first) the database hx_bench_gateway.  The gateway runs in a child
// process of its own (this file, with --child), so that its memory and CPU
// are its own; the clients, plain HTTP SSE readers as a browser's
// EventSource, and the writers run here.
//
// Figures:
//   - commit-to-browser latency: each write stores Date.now() in the
//     state just before its UPDATE is sent; a client that receives the
//     event subtracts it from the time it parsed it.  So it includes the
//     UPDATE, its commit, logical decoding (or NOTIFY), the gateway and
//     the client's parsing: p50 and p99 over every event of every client,
//     at a steady write rate over random streams;
//   - the gateway's memory per connected client: its heap and external
//     memory after a full garbage collection, with every client connected
//     and idle, less the same before any client, divided by the clients
//     (and RSS the same way).  The gateway keeps no state per client (its
//     subscriptions forward events, state: false), so there is no state
//     to subtract; the state size is printed for reference;
//   - the gateway's CPU: its user + system time during the writes, over
//     the wall time, as a share of one core.
// Targets: p99 within 150 ms, memory per client within 64 kB plus its state.
const http = require('node:http');
const path = require('node:path');
const { fork } = require('node:child_process');
const { parseArgs } = require('node:util');
const pg = require('pg');

const DB = 'hx_bench_gateway';
const SECRET = 'the benchmark secret, at least 32 bytes long';

// ---------------------------------------------------------------------
// The gateway's process
// ---------------------------------------------------------------------

async function child() {
  const { createGateway } = require('hxstate-gateway');
  const gateway = createGateway({
    pg: { database: DB, application_name: 'hx-bench-gateway' },
    tables: ['sessions'],
    secret: SECRET,
    maxPerClient: 100000,
    log: () => {},
  });
  await gateway.ready;
  const server = http.createServer(gateway.handler);
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port, transport: gateway.hub.transport }));
  process.on('message', async (m) => {
    if (m === 'measure') {
      global.gc();
      global.gc();
      const mem = process.memoryUsage();
      process.send({ mem, cpu: process.cpuUsage(), clients: gateway.clients });
    } else if (m === 'stop') {
      server.close();
      await gateway.close();
      server.closeAllConnections();
      process.exit(0);
    }
  });
}

// ---------------------------------------------------------------------
// The benchmark
// ---------------------------------------------------------------------

function ask(proc, message) {
  return new Promise((resolve) => {
    proc.once('message', resolve);
    proc.send(message);
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(check, what, ms = 120000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await sleep(20);
  }
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** A client: GET the stream, count events, record each event's latency. */
function client(base, key, token, latencies) {
  const c = { key, events: 0, snapshot: false, lastSeq: 0 };
  c.req = http.get(`${base}/streams/sessions/${key}`, { agent: false, headers: { authorization: `Bearer ${token}` } }, (res) => {
    let buf = '';
    res.setEncoding('utf8');
    res.on('data', (chunk) => {
      buf += chunk;
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const at = block.indexOf('data: ');
        if (at < 0) continue;
        const now = Date.now();
        const e = JSON.parse(block.slice(at + 6));
        c.lastSeq = e.metadata.seq;
        if (e.type === 'STATE_SNAPSHOT') {
          c.snapshot = true;
          continue;
        }
        c.events++;
        const op = e.delta.find((d) => d.path === '/t');
        if (op) latencies.push(now - op.value);
      }
    });
  });
  c.req.on('error', () => {});
  return c;
}

async function main() {
  const { values } = parseArgs({
    options: {
      clients: { type: 'string', default: '1000' },
      streams: { type: 'string', default: '1000' },
      rate: { type: 'string', default: '200' },
      seconds: { type: 'string', default: '20' },
    },
  });
  const clients = Number(values.clients);
  const streams = Number(values.streams);
  const rate = Number(values.rate);
  const seconds = Number(values.seconds);

  const admin = new pg.Client({ database: 'postgres' });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${DB}`);
  await admin.end();
  const db = new pg.Client({ database: DB });
  await db.connect();
  await db.query('CREATE EXTENSION hxstate');
  await db.query(require('node:fs').readFileSync(path.join(__dirname, '..', 'docs', 'sessions.sql'), 'utf8'));
  await db.query('SELECT hx_stream_publication()');
  // a state of about 1 kB per session
  await db.query(`INSERT INTO sessions (session_id, user_id, state)
                  SELECT 'b-' || g, 'u', jsonb_build_object('messages', jsonb_build_array(jsonb_build_object('role', 'user',
                         'text', repeat('x', 900))), 'n', 0, 't', 0)
                    FROM generate_series(0, ${streams - 1}) g`);
  const { rows: [size] } = await db.query("SELECT avg(length(state::text))::int AS bytes FROM sessions");

  const gw = fork(__filename, ['--child'], { execArgv: ['--expose-gc'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const { port, transport } = await new Promise((resolve) => gw.once('message', resolve));
  const base = `http://127.0.0.1:${port}`;
  const { mintToken } = require('hxstate-gateway');
  const token = mintToken(SECRET, 'sessions:*', { ttl: 3600 });

  // warm up: one client, one event, so that what is loaded once is loaded
  const warm = [];
  const w = client(base, 'b-0', token, warm);
  await waitFor(() => w.snapshot, 'the warm-up snapshot');
  w.req.destroy();
  await sleep(500);
  const before = await ask(gw, 'measure');

  const latencies = [];
  const cs = [];
  for (let i = 0; i < clients; i++) {
    cs.push(client(base, `b-${i % streams}`, token, latencies));
    if (i % 200 === 199) await waitFor(() => cs.every((c) => c.snapshot), 'the snapshots');
  }
  await waitFor(() => cs.every((c) => c.snapshot), 'every snapshot');
  await sleep(1000);
  const connected = await ask(gw, 'measure');

  // the writes: `rate` a second over random streams, from 4 connections
  const writers = await Promise.all(Array.from({ length: 4 }, async () => {
    const c = new pg.Client({ database: DB });
    await c.connect();
    return c;
  }));
  const total = rate * seconds;
  const perStream = new Map();
  let sent = 0;
  let done = 0;
  let next = 0;
  const start = Date.now();
  const cpu0 = connected.cpu;
  await new Promise((resolve) => {
    const tick = setInterval(() => {
      const due = Math.min(total, Math.floor(((Date.now() - start) / 1000) * rate));
      while (sent < due) {
        const key = `b-${Math.floor(Math.random() * streams)}`;
        perStream.set(key, (perStream.get(key) || 0) + 1);
        const ops = JSON.stringify([{ op: 'increment', path: '/n', by: 1 }, { op: 'replace', path: '/t', value: Date.now() }]);
        writers[next++ % writers.length].query('UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2', [ops, key])
          .then(() => { done++; });
        sent++;
      }
      if (sent >= total) {
        clearInterval(tick);
        resolve();
      }
    }, 5);
  });
  await waitFor(() => done === total, 'the writes');
  const wall = (Date.now() - start) / 1000;
  const during = await ask(gw, 'measure');
  let expected = 0;
  for (const c of cs) expected += perStream.get(c.key) || 0;
  await waitFor(() => latencies.length >= expected, `every event to arrive (${latencies.length} of ${expected})`, 60000);

  latencies.sort((a, b) => a - b);
  const p50 = percentile(latencies, 50);
  const p99 = percentile(latencies, 99);
  const heapPer = ((connected.mem.heapUsed + connected.mem.external) - (before.mem.heapUsed + before.mem.external)) / clients;
  const rssPer = (connected.mem.rss - before.mem.rss) / clients;
  const cpu = ((during.cpu.user - cpu0.user) + (during.cpu.system - cpu0.system)) / 1e6 / wall;
  const kb = (b) => `${(b / 1024).toFixed(1)} kB`;
  const rows = [
    ['commit-to-browser latency p50', `${p50} ms`, '', ''],
    ['commit-to-browser latency p99', `${p99} ms`, '<= 150 ms', p99 <= 150 ? 'yes' : 'NO'],
    ['events delivered (all clients)', `${latencies.length} of ${expected}`, 'all', latencies.length === expected ? 'yes' : 'NO'],
    ['gateway heap+external per client', kb(heapPer), '<= 64 kB + state', heapPer <= 65536 ? 'yes' : 'NO'],
    ['gateway RSS per client', kb(rssPer), '(none)', '-'],
    ['state per client held by the gateway', '0 B (it forwards events)', '', ''],
    ['a session\'s state (JSON)', `${size.bytes} B`, '', ''],
    ['gateway CPU during the writes', `${(cpu * 100).toFixed(1)}% of a core`, '(none)', '-'],
  ];
  console.log(`hxstate-gateway: ${clients} SSE clients over ${streams} streams, ${rate} writes/s for ${seconds} s ` +
    `(${total} writes, transport ${transport}); Node ${process.version}`);
  const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i].length), ['metric', 'value', 'target', 'met?'][i].length));
  const line = (r) => r.map((x, i) => (i === 1 ? x.padStart(widths[i]) : x.padEnd(widths[i]))).join(' | ');
  console.log(line(['metric', 'value', 'target', 'met?']));
  console.log(widths.map((n) => '-'.repeat(n)).join('-+-'));
  for (const r of rows) console.log(line(r));

  for (const c of cs) c.req.destroy();
  await Promise.all(writers.map((c) => c.end()));
  await new Promise((resolve) => {
    gw.once('exit', resolve);
    gw.send('stop');
  });
  await db.end();
  if (p99 > 150 || heapPer > 65536 || latencies.length !== expected) process.exitCode = 1;
}

if (process.argv.includes('--child')) {
  child().catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else {
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
