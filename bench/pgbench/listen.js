'use strict';
// bench/pgbench/listen.js: the listener that bench/pgbench.sh keeps open
// for the whole of its runs, as an application server streaming sessions
// to its clients would: one long-lived connection LISTENing on the stream
// channel of every session (hx_stream_channel('sessions:<key>'), the
// channels that hx_stream and the bare pg_notify runs notify), taking each
// notification as it arrives and discarding it (counting it and its
// bytes).  A second connection samples pg_notification_queue_usage() every
// 100 ms, to show that the listener keeps up and the NOTIFY queue stays
// empty.
//
//   node bench/pgbench/listen.js NROWS EXPECT_FILE
//
// Prints "ready" once it listens on every channel, then one line per
// signal:
//   SIGUSR2  waits until no notification has come for 200 ms (at most 5 s),
//            zeroes its counters and prints "reset" (before a run);
//   SIGHUP   reads from EXPECT_FILE how many notifications the run sent,
//            waits until it has them all (at most 10 s) and then until none
//            has come for 200 ms, and prints the run's counts as JSON
//            {received, bytes, drain_ms, max_queue_usage} (after a run);
//   SIGTERM  exits.
const fs = require('node:fs');
const { Client } = require('pg');

const NROWS = Number(process.argv[2] || 1000);
const EXPECT_FILE = process.argv[3];
const DATABASE = process.env.HX_BENCH_PG_DB || 'hxstate_pgbench';

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

async function main() {
  const listener = new Client({ database: DATABASE, application_name: 'hx_bench_listener' });
  const sampler = new Client({ database: DATABASE, application_name: 'hx_bench_queue_sampler' });
  await listener.connect();
  await sampler.connect();

  let received = 0;
  let bytes = 0;
  let last = Date.now();
  let maxUsage = 0;
  listener.on('notification', (msg) => {
    received++;
    bytes += Buffer.byteLength(msg.payload || '');
    last = Date.now();
  });

  const { rows } = await listener.query(
    `SELECT hx_stream_channel('sessions:s-' || lpad(i::text, 4, '0')) AS ch
       FROM generate_series(1, $1::int) i`, [NROWS]);
  await listener.query(rows.map((r) => `LISTEN "${r.ch.replace(/"/g, '""')}";`).join('\n'));

  let sampling = true;
  const sampled = (async () => {
    while (sampling) {
      const r = await sampler.query('SELECT pg_notification_queue_usage() AS u');
      const u = Number(r.rows[0].u);
      if (u > maxUsage) maxUsage = u;
      await sleep(100);
    }
  })();

  // one signal at a time, in order
  let chain = Promise.resolve();
  const on = (sig, fn) => process.on(sig, () => { chain = chain.then(fn); });

  const quiet = async (limitMs) => {
    const t0 = Date.now();
    while (Date.now() - last < 200 && Date.now() - t0 < limitMs) await sleep(20);
  };

  on('SIGUSR2', async () => {
    await quiet(5000);
    received = 0;
    bytes = 0;
    maxUsage = 0;
    process.stdout.write('reset\n');
  });

  on('SIGHUP', async () => {
    const expect = Number(fs.readFileSync(EXPECT_FILE, 'utf8').trim());
    const t0 = Date.now();
    while (received < expect && Date.now() - t0 < 10000) await sleep(10);
    const drainMs = Date.now() - t0;
    await quiet(2000);
    process.stdout.write(`${JSON.stringify({
      received, bytes, drain_ms: drainMs, max_queue_usage: maxUsage,
    })}\n`);
  });

  on('SIGTERM', async () => {
    sampling = false;
    await sampled;
    await listener.end();
    await sampler.end();
    process.exit(0);
  });

  process.stdout.write('ready\n');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
