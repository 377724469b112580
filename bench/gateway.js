'use strict';
// bench/gateway.js: hxstate-gateway under many SSE clients.
//
//   node bench/gateway.js [--clients 10000] [--streams 10000] [--rate 2000] [--seconds 20] [--workers 1]
//
// --workers N runs the command's --workers mode (N processes on one port,
// each with its own hub) instead of one gateway process; the figures are
// then the sums over the workers (memory, CPU) and the connections each
// holds.  The bench raises its own soft limit of open files (each client is
// a socket here and one in the gateway) with prlimit when the hard limit
// allows.
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
// Targets: p99 within 100 ms, memory per client within 64 kB.
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
    maxPerClient: 1000000,
    heartbeat: 60000,
    log: () => {},
  });
  await gateway.ready;
  const server = http.createServer(gateway.handler);
  server.keepAliveTimeout = 0;
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
  const c = { key, events: 0, snapshot: false, lastSeq: 0, errors: 0, resyncs: 0 };
  c.req = http.get(`${base}/streams/sessions/${key}`, { agent: false, headers: { authorization: `Bearer ${token}` } }, (res) => {
    c.status = res.statusCode;
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
        if (!e.metadata || block.indexOf('id: ') !== 0) continue; // RUN_STARTED, MESSAGES_SNAPSHOT
        c.lastSeq = e.metadata.seq;
        if (e.type === 'STATE_SNAPSHOT') {
          if (c.snapshot) c.resyncs++;
          c.snapshot = true;
          continue;
        }
        c.events++;
        // two writes of one stream in one millisecond leave /t as it was: counted, with no latency
        const op = e.delta.find((d) => d.path === '/t');
        if (op) latencies.push(now - op.value);
      }
    });
  });
  c.req.on('error', () => { c.errors++; });
  return c;
}

/** Raise this process's soft limit of open files to its hard limit (prlimit on the running process). */
function raiseFileLimit(want) {
  const { execFileSync } = require('node:child_process');
  try {
    const hard = Number(execFileSync('sh', ['-c', 'ulimit -Hn']).toString().trim()) || want;
    const soft = Number(execFileSync('sh', ['-c', 'ulimit -Sn']).toString().trim()) || 0;
    const next = Math.max(soft, Math.min(want, hard));
    execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${next}:${hard}`]);
    return next;
  } catch (err) {
    return null;
  }
}

/** The gateway processes' pids: the child, or its workers (children of the command). */
function pidsOf(proc) {
  const fs = require('node:fs');
  const kids = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === proc.pid) kids.push(Number(d));
    } catch (err) { /* gone */ }
  }
  return kids.length ? kids : [proc.pid];
}

/** RSS (bytes) and CPU (user + system seconds) of pids, from /proc. */
function usage(pids) {
  const fs = require('node:fs');
  const tick = 100; // USER_HZ
  let rss = 0;
  let cpu = 0;
  for (const pid of pids) {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    rss += Number(/VmRSS:\s+(\d+)/.exec(status)[1]) * 1024;
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    cpu += (Number(f[11]) + Number(f[12])) / tick;
  }
  return { rss, cpu };
}

async function main() {
  const { values } = parseArgs({
    options: {
      clients: { type: 'string', default: '10000' },
      streams: { type: 'string', default: '10000' },
      rate: { type: 'string', default: '2000' },
      seconds: { type: 'string', default: '20' },
      workers: { type: 'string', default: '1' },
    },
  });
  const clients = Number(values.clients);
  const streams = Number(values.streams);
  const rate = Number(values.rate);
  const seconds = Number(values.seconds);
  const workers = Number(values.workers);
  const files = raiseFileLimit(clients + 1024);

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
  // a state of about 1 kB per session, with a conversation (LangChain messages)
  await db.query(`INSERT INTO sessions (session_id, user_id, state)
                  SELECT 'b-' || g, 'u', jsonb_build_object('messages', jsonb_build_array(jsonb_build_object('type', 'human',
                         'id', 'm-' || g, 'content', repeat('x', 900))), 'n', 0, 't', 0)
                    FROM generate_series(0, ${streams - 1}) g`);
  const { rows: [size] } = await db.query('SELECT avg(length(state::text))::int AS bytes FROM sessions');

  // the gateway: this file as a child (one process), or the command with --workers
  let gw;
  let base;
  let transport;
  if (workers > 1) {
    const { spawn } = require('node:child_process');
    gw = spawn(process.execPath, [path.join(__dirname, '..', 'gateway', 'bin', 'hxstate-gateway.js'), '--port', '0', '--workers', String(workers),
      '--max-per-client', '1000000', '--heartbeat', '60000', '--quiet'], {
      env: { ...process.env, PGDATABASE: DB, PGAPPNAME: 'hx-bench-gateway', HX_GATEWAY_SECRET: SECRET }, stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    gw.stdout.on('data', (d) => { out += d; });
    await waitFor(() => /listening on (http:\S+)/.test(out), 'the workers to listen');
    base = /listening on (http:\S+)/.exec(out)[1];
    transport = /following over (\w+)/.exec(out)[1];
  } else {
    gw = fork(__filename, ['--child'], { execArgv: ['--expose-gc'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const m = await new Promise((resolve) => gw.once('message', resolve));
    base = `http://127.0.0.1:${m.port}`;
    transport = m.transport;
  }
  const pids = pidsOf(gw);
  const { mintToken } = require('hxstate-gateway');
  const token = mintToken(SECRET, { table: 'sessions', all: true }, { ttl: 3600 });

  // warm up: one client, one snapshot, so that what is loaded once is loaded
  const w = client(base, 'b-0', token, []);
  await waitFor(() => w.snapshot, 'the warm-up snapshot');
  w.req.destroy();
  await sleep(500);
  const before = workers > 1 ? null : await ask(gw, 'measure');
  const u0 = usage(pids);

  const latencies = [];
  const cs = [];
  const t0 = Date.now();
  for (let i = 0; i < clients; i++) {
    cs.push(client(base, `b-${i % streams}`, token, latencies));
    if (i % 500 === 499) await waitFor(() => cs.every((c) => c.snapshot || c.errors), 'the snapshots');
  }
  await waitFor(() => cs.every((c) => c.snapshot || c.errors), 'every snapshot');
  const joinSeconds = (Date.now() - t0) / 1000;
  const failed = cs.filter((c) => !c.snapshot).length;
  await sleep(1000);
  const connected = workers > 1 ? null : await ask(gw, 'measure');
  const u1 = usage(pids);

  // the writes: `rate` a second over random streams, from 8 connections
  // eight writer connections; the pool queues what waits for one
  const writers = new pg.Pool({ database: DB, max: 8 });
  await Promise.all(Array.from({ length: 8 }, () => writers.query('SELECT 1')));
  const total = rate * seconds;
  const perStream = new Map();
  let sent = 0;
  let done = 0;
  const start = Date.now();
  await new Promise((resolve) => {
    const tick = setInterval(() => {
      const due = Math.min(total, Math.floor(((Date.now() - start) / 1000) * rate));
      while (sent < due) {
        const key = `b-${Math.floor(Math.random() * streams)}`;
        perStream.set(key, (perStream.get(key) || 0) + 1);
        const ops = JSON.stringify([{ op: 'increment', path: '/n', by: 1 }, { op: 'replace', path: '/t', value: Date.now() }]);
        writers.query('UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2', [ops, key])
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
  const u2 = usage(pids);
  let expected = 0;
  for (const c of cs) if (c.snapshot) expected += perStream.get(c.key) || 0;
  const heads = new Map((await db.query('SELECT stream, seq::int FROM hx_stream_heads($1)', [[...perStream.keys()].map((k) => `sessions:${k}`)]))
    .rows.map((r) => [r.stream.slice('sessions:'.length), r.seq]));
  const behind = () => cs.filter((c) => c.snapshot && heads.has(c.key) && c.lastSeq !== heads.get(c.key)).length;
  await waitFor(() => behind() === 0, 'every client at its stream\'s head', 60000).catch((err) => console.error(`${err.message}: ${behind()} behind`));
  const resyncs = cs.reduce((n, c) => n + c.resyncs, 0);
  const delivered = cs.reduce((n, c) => n + c.events, 0);
  const { rows: [conns] } = await db.query(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'hx-bench-gateway'");

  latencies.sort((a, b) => a - b);
  const p50 = percentile(latencies, 50);
  const p99 = percentile(latencies, 99);
  const joined = clients - failed;
  const heapPer = connected ? ((connected.mem.heapUsed + connected.mem.external) - (before.mem.heapUsed + before.mem.external)) / joined : null;
  const rssPer = (u1.rss - u0.rss) / joined;
  const cpu = (u2.cpu - u1.cpu) / wall;
  const kb = (b) => `${(b / 1024).toFixed(1)} kB`;
  const rows = [
    ['clients connected', `${joined} of ${clients} in ${joinSeconds.toFixed(1)} s`, 'all', failed === 0 ? 'yes' : 'NO'],
    ['commit-to-browser latency p50', `${p50} ms`, '', ''],
    ['commit-to-browser latency p99', `${p99} ms`, '<= 100 ms', p99 <= 100 ? 'yes' : 'NO'],
    ['events delivered (all clients)', `${delivered} of ${expected}${resyncs ? ` (+ ${resyncs} snapshots instead)` : ''}`, 'all',
      delivered + resyncs >= expected ? 'yes' : 'NO'],
    ['clients at their stream\'s head', `${joined - behind()} of ${joined}`, 'all', behind() === 0 ? 'yes' : 'NO'],
    ['writes a second, achieved', `${(total / wall).toFixed(0)}`, `${rate}`, total / wall >= rate * 0.95 ? 'yes' : 'NO'],
    ['gateway RSS per client', kb(rssPer), '<= 64 kB', rssPer <= 65536 ? 'yes' : 'NO'],
    ['gateway heap+external per client', heapPer === null ? '(workers: see RSS)' : kb(heapPer), '', ''],
    ['gateway CPU during the writes', `${(cpu * 100).toFixed(1)}% of a core${workers > 1 ? ` (${workers} processes)` : ''}`, '(none)', '-'],
    ['connections to the database', `${conns.n} (${workers} process${workers > 1 ? 'es' : ''})`, `<= ${3 * workers}`, conns.n <= 3 * workers ? 'yes' : 'NO'],
    ['a session\'s state (JSON)', `${size.bytes} B`, '', ''],
    ['open files allowed to the bench', files === null ? '(unchanged)' : String(files), '', ''],
  ];
  console.log(`hxstate-gateway: ${clients} SSE clients over ${streams} streams, ${rate} writes/s for ${seconds} s ` +
    `(${total} writes, transport ${transport}, ${workers} gateway process${workers > 1 ? 'es' : ''}); Node ${process.version}`);
  const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i].length), ['metric', 'value', 'target', 'met?'][i].length));
  const line = (r) => r.map((x, i) => (i === 1 ? x.padStart(widths[i]) : x.padEnd(widths[i]))).join(' | ');
  console.log(line(['metric', 'value', 'target', 'met?']));
  console.log(widths.map((n) => '-'.repeat(n)).join('-+-'));
  for (const r of rows) console.log(line(r));

  for (const c of cs) c.req.destroy();
  await writers.end();
  await new Promise((resolve) => {
    gw.once('exit', resolve);
    if (workers > 1) gw.kill('SIGTERM');
    else gw.send('stop');
  });
  await db.end();
  if (p99 > 100 || rssPer > 65536 || behind() > 0 || failed > 0 || conns.n > 3 * workers) process.exitCode = 1;
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
