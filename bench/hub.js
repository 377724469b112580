'use strict';
// bench/hub.js: how an HxHub follows many streams.  For 1,000 and 10,000
// followed streams, over the WAL and over LISTEN, it measures
//   - commit-to-delivery latency at a steady write rate (default 2,000
//     events/s from 8 writer connections, each an autocommitted hx_merge on
//     a random followed row): from the writer's COMMIT being acknowledged
//     to the hub handing the event out ("ack"), and from the write being
//     sent ("send"); the commit happens between the two, so they bound the
//     commit-to-delivery time from below and from above;
//   - the hub's heap per followed stream (heap used after following,
//     less before, over the streams; small states, one subscription each).
// The writers run in a worker thread (their own event loop); both sides
// read the same monotonic clock (process.hrtime).
//
// Needs a running server with hxstate 0.5.0 and wal_level = logical, found
// through the PG* variables; works in a database of its own (HX_BENCH_DB,
// default hx_bench_hub, recreated).  HX_BENCH_SECONDS (default 10) and
// HX_BENCH_RATE (default 2000) set the run; HX_BENCH_STREAMS (default
// "1000,10000") and HX_BENCH_TRANSPORTS (default "wal,listen") the cases;
// HX_BENCH_POLL the hub's pollInterval (default: the hub's, 0: no polling).
//
//   node bench/hub.js
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');
const { Client } = require('pg');

const WRITERS = 8;

if (!isMainThread) {
  writer().catch((err) => {
    parentPort.postMessage({ error: err.stack });
  });
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}

// ---------------------------------------------------------------------
// The writers (a worker thread)
// ---------------------------------------------------------------------

/** WRITERS connections, each writing at rate / WRITERS a second for the run. */
async function writer() {
  const { database, keys, rate, seconds, seed, tag } = workerData;
  const perWriter = rate / WRITERS;
  const interval = 1000 / perWriter;
  const clients = await Promise.all(Array.from({ length: WRITERS }, async () => {
    const c = new Client({ database });
    await c.connect();
    return c;
  }));
  const ids = [];
  const sent = [];
  const acked = [];
  const start = Date.now();
  await Promise.all(clients.map(async (c, w) => {
    let r = (seed * 7919 + w) >>> 0;
    const rand = () => {
      r = (Math.imul(r, 1664525) + 1013904223) >>> 0;
      return r / 4294967296;
    };
    for (let i = 0; ; i++) {
      // paced: write i is due at start + i * interval (behind: at once)
      const due = start + i * interval;
      if (due > start + seconds * 1000) break;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const id = `${tag}:${w}:${i}`; // unique in the run: every write changes /w
      const key = keys[Math.floor(rand() * keys.length)];
      const ops = JSON.stringify([{ op: 'replace', path: '/w', value: id }, { op: 'increment', path: '/n', by: 1 }]);
      const t0 = process.hrtime.bigint();
      await c.query('UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2', [ops, key]);
      const t1 = process.hrtime.bigint();
      ids.push(id);
      sent.push(t0);
      acked.push(t1);
    }
  }));
  const elapsed = (Date.now() - start) / 1000;
  await Promise.all(clients.map((c) => c.end()));
  parentPort.postMessage({ ids, sent, acked, elapsed });
}

// ---------------------------------------------------------------------
// The hub (the main thread)
// ---------------------------------------------------------------------

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

function gcNow() {
  // --expose-gc at run time, so that the script runs as plain `node bench/hub.js`
  require('v8').setFlagsFromString('--expose-gc');
  const gc = require('vm').runInNewContext('gc');
  gc();
  gc();
}

async function setup(database, streams) {
  const admin = new Client({ database: 'postgres' });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${database}`);
  await admin.end();
  const db = new Client({ database });
  await db.connect();
  await db.query('CREATE EXTENSION hxstate');
  await db.query('CREATE TABLE sessions (session_id text PRIMARY KEY, state jsonb)');
  await db.query(`CREATE TRIGGER hx AFTER INSERT OR UPDATE OR DELETE ON sessions
                  FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id')`);
  await db.query(`INSERT INTO sessions SELECT 's-' || g, '{"n": 0}' FROM generate_series(1, ${streams}) g`);
  await db.query('SELECT hx_stream_publication()');
  await db.query('VACUUM ANALYZE sessions');
  return db;
}

async function runCase(database, db, transport, streams, rate, seconds) {
  const { HxHub } = require('../client');
  const keys = Array.from({ length: streams }, (_, k) => `s-${k + 1}`);
  gcNow();
  const heap0 = process.memoryUsage().heapUsed;
  const pollInterval = process.env.HX_BENCH_POLL === undefined ? undefined : Number(process.env.HX_BENCH_POLL);
  const hub = new HxHub({ pg: { database, application_name: 'hx-bench-hub' }, transport, pollInterval });
  await hub.start();
  const delivered = new Map(); // write id -> hrtime
  // one listener for every subscription: it costs the streams nothing each
  const onEvent = (event) => {
    if (event.type !== 'STATE_DELTA') return;
    for (const op of event.delta) {
      if (op.path === '/w') delivered.set(op.value, process.hrtime.bigint());
    }
  };
  const started = Date.now();
  const subs = keys.map((key) => {
    const sub = hub.follow({ table: 'sessions', key });
    sub.on('event', onEvent);
    return sub;
  });
  await Promise.all(subs.map((s) => s.ready));
  const followSeconds = (Date.now() - started) / 1000;
  gcNow();
  const heap1 = process.memoryUsage().heapUsed;

  const result = await new Promise((resolve, reject) => {
    const w = new Worker(__filename, { workerData: { database, keys, rate, seconds, seed: streams, tag: `${transport}-${streams}` } });
    w.once('message', (m) => (m.error ? reject(new Error(m.error)) : resolve(m)));
    w.once('error', reject);
  });
  // every write handed out (or a deadlock guard of 60 s)
  const deadline = Date.now() + 60000;
  while (result.ids.some((id) => !delivered.has(id)) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const ack = [];
  const send = [];
  let missing = 0;
  result.ids.forEach((id, i) => {
    const t = delivered.get(id);
    if (t === undefined) {
      missing++;
      return;
    }
    ack.push(Number(t - result.acked[i]) / 1e6);
    send.push(Number(t - result.sent[i]) / 1e6);
  });
  ack.sort((a, b) => a - b);
  send.sort((a, b) => a - b);
  const stats = { ...hub.stats };
  await hub.stop();
  return {
    transport: hub.transport || transport,
    streams,
    rate: result.ids.length / result.elapsed,
    events: result.ids.length,
    missing,
    ackP50: percentile(ack, 50),
    ackP99: percentile(ack, 99),
    sendP50: percentile(send, 50),
    sendP99: percentile(send, 99),
    heapPerStream: (heap1 - heap0) / streams,
    followSeconds,
    queries: stats.queries,
    stats,
  };
}

function pad(s, n) {
  s = String(s);
  return s.length >= n ? s : ' '.repeat(n - s.length) + s;
}

async function main() {
  const database = process.env.HX_BENCH_DB || 'hx_bench_hub';
  const seconds = Number(process.env.HX_BENCH_SECONDS || 10);
  const rate = Number(process.env.HX_BENCH_RATE || 2000);
  const counts = (process.env.HX_BENCH_STREAMS || '1000,10000').split(',').map(Number);
  const transports = (process.env.HX_BENCH_TRANSPORTS || 'wal,listen').split(',');
  const db = await setup(database, Math.max(...counts));
  const rows = [];
  try {
    for (const streams of counts) {
      for (const transport of transports) {
        process.stderr.write(`-- ${transport}, ${streams} streams, ${rate} events/s for ${seconds} s\n`);
        rows.push(await runCase(database, db, transport, streams, rate, seconds));
      }
    }
  } finally {
    await db.end();
  }
  const f = (x) => (Number.isFinite(x) ? x.toFixed(1) : '-');
  const header = ['transport', 'streams', 'events/s', 'ack->out p50', 'p99', 'send->out p50', 'p99',
    'heap/stream', 'follow', 'statements'];
  const widths = [9, 7, 9, 12, 6, 13, 6, 11, 6, 10];
  console.log(header.map((x, i) => pad(x, widths[i])).join('  '));
  for (const r of rows) {
    console.log([
      r.transport, r.streams, r.rate.toFixed(0), `${f(r.ackP50)} ms`, f(r.ackP99), `${f(r.sendP50)} ms`, f(r.sendP99),
      `${(r.heapPerStream / 1024).toFixed(2)} KB`, `${r.followSeconds.toFixed(1)} s`, r.queries,
    ].map((x, i) => pad(x, widths[i])).join('  ') + (r.missing ? `  (${r.missing} not delivered!)` : ''));
  }
  console.log(`\nack->out: from the writer's COMMIT acknowledged to the hub handing the event out (negative: ` +
    'handed out first);\nsend->out: from the write sent; follow: time to follow every stream (names, ' +
    'LISTEN, snapshots); statements: the hub\'s queries in all.');
}
