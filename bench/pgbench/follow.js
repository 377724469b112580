'use strict';
// bench/pgbench/follow.js: the follower of bench/pgbench.sh's "wal" and
// "listen" runs: one HxHub (client/) following every session's stream, as
// a gateway would, over the transport given.  It is started after the
// table is made anew and before pgbench, and stopped after the run.
//
//   node bench/pgbench/follow.js NROWS TRANSPORT EXPECT_FILE
//
// TRANSPORT is "wal" (the logical replication transport: the writers take
// no NOTIFY lock) or "listen".  Subscriptions keep no state (state: false):
// the hub decodes, orders and hands out every event, and the benchmark
// measures what following costs the writers, not JSON Patch in Node.
// Prints "ready <transport> <connections>" once every subscription has its
// snapshot; on SIGHUP reads from EXPECT_FILE how many STATE_DELTA events
// the run committed, waits until it has handed them all out (at most 20 s),
// prints {received, drain_ms, cpu_us, transport, connections, resyncs,
// queries, polls, pages} as JSON (cpu_us: its CPU time from "ready" on;
// queries: statements on the reader connection),
// stops the hub and exits.  With NROWS 0 it follows nothing: the hub
// decodes every insert of the log and drops it (bench/hubcpu.sh's "idle"
// contender, what the replication connection costs before delivery), and
// "received" counts the inserts decoded.  HX_BENCH_DECODER: the hub's
// decoder option (auto, hxstate or pgoutput; default auto), and
// HX_BENCH_COALESCE_MS its coalesceMs (default the hub's); the ready line
// ends with the decoder in use.
const fs = require('node:fs');
const path = require('node:path');
const { HxHub } = require(path.join(__dirname, '..', '..', 'client'));

const NROWS = Number(process.argv[2] || 1000);
const TRANSPORT = process.argv[3] || 'wal';
const EXPECT_FILE = process.argv[4];
const DATABASE = process.env.HX_BENCH_PG_DB || 'hxstate_pgbench';

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

async function main() {
  const hub = new HxHub({
    pg: { database: DATABASE },
    transport: TRANSPORT,
    decoder: process.env.HX_BENCH_DECODER || 'auto',
    ...(process.env.HX_BENCH_COALESCE_MS ? { coalesceMs: Number(process.env.HX_BENCH_COALESCE_MS) } : {}),
    applicationName: 'hx_bench_follower',
  });
  let received = 0;
  hub.on('error', (err) => console.error('follow.js:', err.message));
  await hub.start();

  const subs = [];
  for (let i = 1; i <= NROWS; i++) {
    const sub = hub.follow({ table: 'sessions', key: `s-${String(i).padStart(4, '0')}` }, { state: false });
    sub.on('event', (event) => {
      if (event.type === 'STATE_DELTA') received++;
    });
    subs.push(sub);
  }
  await Promise.all(subs.map((s) => s.ready));
  const counted = () => (NROWS > 0 ? received : hub.stats.walInserts);
  const cpu0 = process.cpuUsage();
  process.stdout.write(`ready ${hub.transport} ${hub.stats.connections} ${hub.decoder || 'pgoutput'}\n`);

  process.on('SIGHUP', async () => {
    const expect = Number(fs.readFileSync(EXPECT_FILE, 'utf8').trim());
    const t0 = Date.now();
    while (counted() < expect && Date.now() - t0 < 20000) await sleep(10);
    const drainMs = Date.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    process.stdout.write(`${JSON.stringify({
      received: counted(),
      drain_ms: drainMs,
      cpu_us: cpu.user + cpu.system, // from ready to here: the load and the drain

      transport: hub.transport,
      decoder: hub.decoder || 'pgoutput',
      connections: hub.stats.maxConnections,
      resyncs: hub.stats.resyncs,
      queries: hub.stats.queries, polls: hub.stats.polls, pages: hub.stats.pages,
    })}\n`);
    await hub.stop();
    process.exit(0);
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
