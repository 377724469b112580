'use strict';
// bench/durable.js: the gateway's Durable Streams endpoint against writing
// and reading hxstate's log directly, in the same run.
//
//   node bench/durable.js [--events 2000] [--rounds 5] [--writers 8]
//
// Assumes a running cluster reachable with the PG* variables (fsync on, as
// bench/run starts it), where it creates (and drops first) the database
// hx_bench_durable.  The gateway runs in a child process of its own (this
// file, with --child); the clients run here.  Each figure is the median
// over rounds, the two contenders alternating within a round:
//
//   append      one AG-UI event per request to a log stream, one writer:
//               POST with producer headers (the append and the producer's
//               state in one transaction) against SELECT hx_stream_send()
//               in a transaction of its own over a pg connection: the
//               time per append, and the ratio (target <= 3: the HTTP
//               request, the producer's row and its lock cost at most twice
//               the log's own write)
//   append x W  the same with W writers at once, each on its stream: appends
//               per second, and the ratio of the times
//   catch-up    reading a stream of --events events from its start: GET
//               following Stream-Next-Offset (1 MiB a response) against
//               hx_stream_events() pages of 1,000 over pg: the time per
//               event, and the ratio (target <= 2)
const http = require('node:http');
const path = require('node:path');
const { fork } = require('node:child_process');
const { parseArgs } = require('node:util');
const pg = require('pg');

const DB = 'hx_bench_durable';

async function child() {
  const { createGateway } = require('hxstate-gateway');
  const gateway = createGateway({
    pg: { database: DB, application_name: 'hx-bench-durable' },
    tables: ['sessions'],
    authorize: () => true,
    maxPerClient: 100000,
    durable: { logPrefixes: ['@bench:'], poolSize: 8 },
    log: () => {},
  });
  await gateway.ready;
  const server = http.createServer(gateway.handler);
  server.keepAliveTimeout = 60000;
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
  process.on('message', async (m) => {
    if (m === 'stop') {
      server.close();
      await gateway.close();
      server.closeAllConnections();
      process.exit(0);
    }
  });
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function request(url, { method = 'GET', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const r = http.request(url, { method, headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    r.on('error', reject);
    r.end(body);
  });
}

function event(i) {
  return JSON.stringify({ type: 'STATE_DELTA', delta: [{ op: 'replace', path: '/step', value: i }, { op: 'add', path: '/log/-', value: `tool call ${i} done` }] });
}

async function main() {
  const { values } = parseArgs({ options: { events: { type: 'string' }, rounds: { type: 'string' }, writers: { type: 'string' } } });
  const EVENTS = Number(values.events || 2000);
  const ROUNDS = Number(values.rounds || 5);
  const WRITERS = Number(values.writers || 8);
  const admin = new pg.Client({ database: 'postgres' });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${DB}`);
  await admin.query(`CREATE DATABASE ${DB}`);
  await admin.end();
  const db = new pg.Client({ database: DB });
  await db.connect();
  await db.query('CREATE EXTENSION hxstate');
  await db.query(require('node:fs').readFileSync(path.join(__dirname, '..', 'docs', 'sessions.sql'), 'utf8'));
  const { setupDurable } = require('hxstate-gateway');
  await setupDurable(db);
  const { rows: [fsync] } = await db.query('SHOW fsync');

  const proc = fork(__filename, ['--child'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const { port } = await new Promise((resolve) => proc.once('message', resolve));
  const base = `http://127.0.0.1:${port}/ds`;
  const direct = [];
  for (let i = 0; i < WRITERS; i++) {
    const c = new pg.Client({ database: DB });
    await c.connect();
    direct.push(c);
  }

  const per = Math.max(1, Math.floor(EVENTS / ROUNDS));
  let round = 0;
  const viaHttp = async (stream, n, producer) => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) {
      const r = await request(`${base}/${stream}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'producer-id': 'w', 'producer-epoch': '0', 'producer-seq': String(producer.seq++) },
        body: event(i),
      });
      if (r.status !== 200) throw new Error(`append: ${r.status} ${r.body}`);
    }
    return Number(process.hrtime.bigint() - t0) / 1e6;
  };
  const viaSql = async (c, stream, n) => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await c.query('SELECT hx_stream_send($1, $2::jsonb)', [stream, event(i)]);
    return Number(process.hrtime.bigint() - t0) / 1e6;
  };

  // 1. one writer
  for (const s of ['@bench:one-http', '@bench:many-http-0']) await request(`${base}/${s}`, { method: 'PUT', headers: { 'content-type': 'application/json' } });
  const one = { http: [], sql: [] };
  const p1 = { seq: 0 };
  for (round = 0; round < ROUNDS; round++) {
    one.http.push((await viaHttp('@bench:one-http', per, p1)) / per);
    one.sql.push((await viaSql(direct[0], '@bench:one-sql', per)) / per);
  }
  // 2. W writers at once
  const many = { http: [], sql: [] };
  const producers = Array.from({ length: WRITERS }, () => ({ seq: 0 }));
  for (let w = 0; w < WRITERS; w++) await request(`${base}/@bench:many-http-${w}`, { method: 'PUT', headers: { 'content-type': 'application/json' } });
  for (round = 0; round < ROUNDS; round++) {
    let t0 = process.hrtime.bigint();
    await Promise.all(producers.map((p, w) => viaHttp(`@bench:many-http-${w}`, per, p)));
    many.http.push((per * WRITERS) / (Number(process.hrtime.bigint() - t0) / 1e9));
    t0 = process.hrtime.bigint();
    await Promise.all(direct.map((c, w) => viaSql(c, `@bench:many-sql-${w}`, per)));
    many.sql.push((per * WRITERS) / (Number(process.hrtime.bigint() - t0) / 1e9));
  }
  // 3. catch-up of a stream of EVENTS events (the one writer's)
  const { rows: [n] } = await db.query("SELECT count(*)::int AS n FROM hx_event WHERE stream = '@bench:one-http'");
  const catchup = { http: [], sql: [] };
  for (round = 0; round < ROUNDS; round++) {
    let t0 = process.hrtime.bigint();
    let offset = '-1';
    let got = 0;
    for (;;) {
      const r = await request(`${base}/@bench:one-http?offset=${offset}`);
      got += JSON.parse(r.body).length;
      offset = r.headers['stream-next-offset'];
      if (r.headers['stream-up-to-date'] === 'true') break;
    }
    if (got !== n.n) throw new Error(`catch-up read ${got} of ${n.n}`);
    catchup.http.push(Number(process.hrtime.bigint() - t0) / 1e3 / got);
    t0 = process.hrtime.bigint();
    let after = 0;
    got = 0;
    for (;;) {
      const { rows } = await direct[0].query('SELECT seq, event FROM hx_stream_events($1, $2, 1000)', ['@bench:one-http', after]);
      if (rows.length === 0) break;
      got += rows.length;
      after = Number(rows[rows.length - 1].seq);
    }
    catchup.sql.push(Number(process.hrtime.bigint() - t0) / 1e3 / got);
  }

  const line = (what, a, b, unit, lower) => {
    const ra = median(a);
    const rb = median(b);
    const ratio = lower ? ra / rb : rb / ra; // the endpoint's time over the direct one's
    console.log(`${what.padEnd(34)} ${ra.toFixed(3).padStart(10)} ${rb.toFixed(3).padStart(10)} ${unit.padEnd(10)} ${ratio.toFixed(2).padStart(6)}`);
    return ratio;
  };
  console.log(`bench/durable.js: PostgreSQL ${(await db.query('SHOW server_version')).rows[0].server_version}, fsync ${fsync.fsync}, ${EVENTS} events in ${ROUNDS} rounds (medians)`);
  console.log(`${'what'.padEnd(34)} ${'endpoint'.padStart(10)} ${'direct'.padStart(10)} ${'unit'.padEnd(10)} ${'ratio'.padStart(6)}`);
  const r1 = line('append, 1 writer', one.http, one.sql, 'ms/append', true);
  line(`append, ${WRITERS} writers`, many.http, many.sql, 'appends/s', false);
  const r3 = line(`catch-up of ${n.n} events`, catchup.http, catchup.sql, 'µs/event', true);
  const met = (r1 <= 3 ? 1 : 0) + (r3 <= 2 ? 1 : 0);
  console.log(`Targets met: ${met} of 2 (append ratio <= 3, catch-up ratio <= 2)`);
  for (const c of direct) await c.end();
  await db.end();
  proc.send('stop');
  await new Promise((resolve) => proc.once('exit', resolve));
  agent.destroy();
}

if (process.argv.includes('--child')) {
  child().catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
