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
//     less before, over the streams; small states, one subscription each);
//   - what each delivered event costs: the hub's CPU (the busy time of its
//     event loop, the main thread: the writers have their own), the
//     server's CPU for the hub (its backends' and walsender's user + system
//     time, from /proc), and the hub's statements.
// The writers run in a worker thread (their own event loop); both sides
// read the same monotonic clock (process.hrtime).
//
// Over LISTEN a notification is a hint: the hub reads every event from the
// log.  HX_BENCH_NOTIFY="hint,content" runs each LISTEN case also with the
// path the hub took before 0.6.0, kept here only, for the comparison: an
// event in a notification's payload handed out as it came (content).  The
// two alternate within the run (HX_BENCH_REPS rounds, default 1).
//
// Needs a running server with hxstate 0.5.0 and wal_level = logical, found
// through the PG* variables; works in a database of its own (HX_BENCH_DB,
// default hx_bench_hub, recreated).  HX_BENCH_SECONDS (default 10) and
// HX_BENCH_RATE (default 2000) set the run; HX_BENCH_STREAMS (default
// "1000,10000") and HX_BENCH_TRANSPORTS (default "wal,listen") the cases;
// HX_BENCH_POLL the hub's pollInterval (default: the hub's, 0: no polling),
// HX_BENCH_BATCH_DELAY its batchDelay (default: the hub's, 0).
// The server must run on this machine (its CPU is read from /proc).
//
//   node bench/hub.js
const fs = require('node:fs');
const { performance } = require('node:perf_hooks');
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

/**
 * The hub as it was before notifications became hints, for comparison
 * only (a forged payload would be handed out as the stream's event): an
 * event in a notification's payload is taken as the event itself, and
 * anything else (a reference, a payload it cannot read) as a hint.
 */
function contentHub() {
  const { HxHub } = require('../client');
  const { parseHint } = require('../client/lib/cursor');
  return class ContentHub extends HxHub {
    _linkUp(tx) {
      super._linkUp(tx);
      if (tx.kind !== 'listen') return;
      tx.conn.client.removeListener('notification', tx._onNotification);
      tx.conn.client.on('notification', (msg) => { if (tx.up) this._onContent(msg.channel, msg.payload); });
    }

    _onContent(channel, payload) {
      let p = null;
      try {
        p = JSON.parse(payload);
      } catch (err) {
        // a hint, below
      }
      const meta = p && p.ref === undefined ? p.metadata : null;
      const entry = meta && typeof meta.stream === 'string' && Number.isSafeInteger(meta.seq)
        ? this._entries.get(meta.stream) : undefined;
      if (!entry) {
        this._onHint(channel, parseHint(payload));
        return;
      }
      this.stats.notifications++;
      this._onLogEvent(entry, meta.seq, p, Buffer.byteLength(payload), 'notify');
    }
  };
}

const CLK_TCK = 100; // Linux's USER_HZ: /proc/<pid>/stat counts CPU time in 1/100 s

/** User + system CPU seconds of the server processes serving application appName. */
async function serverCpu(db, appName) {
  const { rows } = await db.query('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [appName]);
  let ticks = 0;
  for (const { pid } of rows) {
    try {
      const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      ticks += Number(f[11]) + Number(f[12]); // utime, stime (fields 14 and 15)
    } catch (err) {
      // gone
    }
  }
  return ticks / CLK_TCK;
}

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

async function runCase(database, db, transport, notify, streams, rate, seconds) {
  const Hub = notify === 'content' ? contentHub() : require('../client').HxHub;
  const keys = Array.from({ length: streams }, (_, k) => `s-${k + 1}`);
  gcNow();
  const heap0 = process.memoryUsage().heapUsed;
  const pollInterval = process.env.HX_BENCH_POLL === undefined ? undefined : Number(process.env.HX_BENCH_POLL);
  const app = 'hx-bench-hub';
  const batchDelay = process.env.HX_BENCH_BATCH_DELAY === undefined ? undefined : Number(process.env.HX_BENCH_BATCH_DELAY);
  const hub = new Hub({ pg: { database, application_name: app }, transport, pollInterval, batchDelay });
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

  const queries0 = hub.stats.queries;
  const cpu0 = await serverCpu(db, app);
  const elu0 = performance.eventLoopUtilization();
  const tag = `${transport}-${notify}-${streams}-${Date.now()}`;
  const result = await new Promise((resolve, reject) => {
    const w = new Worker(__filename, { workerData: { database, keys, rate, seconds, seed: streams, tag } });
    w.once('message', (m) => (m.error ? reject(new Error(m.error)) : resolve(m)));
    w.once('error', reject);
  });
  // every write handed out (or a deadlock guard of 60 s)
  const deadline = Date.now() + 60000;
  while (result.ids.some((id) => !delivered.has(id)) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const elu = performance.eventLoopUtilization(elu0);
  const cpu = await serverCpu(db, app) - cpu0;
  const queries = hub.stats.queries - queries0;
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
  const events = result.ids.length - missing;
  return {
    transport: hub.transport || transport,
    notify: (hub.transport || transport) === 'listen' ? notify : '-',
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
    hubUsPerEvent: (elu.active * 1000) / events,
    serverUsPerEvent: (cpu * 1e6) / events,
    statementsPerKEvent: (queries * 1000) / events,
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
  const notifies = (process.env.HX_BENCH_NOTIFY || 'hint').split(',');
  const reps = Number(process.env.HX_BENCH_REPS || 1);
  const db = await setup(database, Math.max(...counts));
  const rows = [];
  try {
    for (let rep = 0; rep < reps; rep++) {
      for (const streams of counts) {
        for (const transport of transports) {
          // over LISTEN, each way of reading a notification, in turn (the
          // first one alternates from round to round)
          const modes = transport === 'wal' ? ['hint'] : rep % 2 ? [...notifies].reverse() : notifies;
          for (const notify of modes) {
            process.stderr.write(`-- ${transport}${transport === 'wal' ? '' : ` (${notify})`}, ${streams} streams, ` +
              `${rate} events/s for ${seconds} s\n`);
            rows.push(await runCase(database, db, transport, notify, streams, rate, seconds));
          }
        }
      }
    }
  } finally {
    await db.end();
  }
  const f = (x) => (Number.isFinite(x) ? x.toFixed(1) : '-');
  const header = ['transport', 'notify', 'streams', 'events/s', 'ack->out p50', 'p99', 'send->out p50', 'p99',
    'heap/stream', 'follow', 'statements', 'hub CPU/event', 'server CPU/event', 'stmts/1k events'];
  const widths = [9, 7, 7, 9, 12, 6, 13, 6, 11, 6, 10, 13, 16, 15];
  console.log(header.map((x, i) => pad(x, widths[i])).join('  '));
  for (const r of rows) {
    console.log([
      r.transport, r.notify, r.streams, r.rate.toFixed(0), `${f(r.ackP50)} ms`, f(r.ackP99), `${f(r.sendP50)} ms`,
      f(r.sendP99), `${(r.heapPerStream / 1024).toFixed(2)} KB`, `${r.followSeconds.toFixed(1)} s`, r.queries,
      `${f(r.hubUsPerEvent)} us`, `${f(r.serverUsPerEvent)} us`, f(r.statementsPerKEvent),
    ].map((x, i) => pad(x, widths[i])).join('  ') + (r.missing ? `  (${r.missing} not delivered!)` : ''));
  }
  console.log(`\nack->out: from the writer's COMMIT acknowledged to the hub handing the event out (negative: ` +
    'handed out first);\nsend->out: from the write sent; follow: time to follow every stream (names, ' +
    'LISTEN, snapshots); statements: the hub\'s queries in all;\nnotify: over LISTEN, hint (the payload ' +
    'wakes the hub, the event is read from the log) or content (the payload handed out, before 0.6.0);\n' +
    'hub CPU/event: the busy time of the hub\'s event loop, server CPU/event: its backends\' and walsender\'s ' +
    'CPU, over the events of the run; stmts/1k events: the hub\'s statements during the writes.');
}
