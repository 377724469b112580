'use strict';
// bench/shard.js: sessions past one node, measured (bench/shard.sh runs it;
// docs/sharding.md is the manual, bench/README.md the figures).
//
//   HX_PG_CONFIG=... HX_PG18_BINDIR=... HX_DIR=... node bench/shard.js [part ...]
//
// Parts (default all), each on loopback servers of its own, fsync on:
//   route     one client, hxshard.merge through the router against the
//             same UPDATE ... hx_merge on the shard directly, alternating
//             in rounds: p50 of each and the ratio (target <= 1.3)
//   scale     8 writers through the router, 2,000 sessions dealt over 1, 2
//             and 4 shards (three clusters at once, the rounds rotating
//             between them): writes a second (on 2 cores the shards, the
//             router and the writers share the cores)
//   moves     200 live moves under 8 writers; a probe writer writes the
//             session being moved while it moves: the longest of its
//             writes that overlap a move is that move's pause for
//             writers; p50 and p99 over the moves (target p99 <= 500 ms),
//             and the fence-to-switch window the router records
//   failover  shard 0 a pg_auto_failover formation, shards 1 and 2 plain;
//             writes at a fixed rate to every shard, one HxShardedHub
//             following every session: commit-to-client latency (the
//             writer's acknowledgement to the follower's event, one
//             process, one clock) of shards 1 and 2, p50 and p99, before
//             and during the kill -9 of shard 0's primary and its
//             promotion (target: during/before p99 <= 1.5)
//   standby   PostgreSQL 18 (HX_PG18_BINDIR, the release build), a primary
//             and a hot standby; pgbench's update.sql at 32 clients; an
//             HxHub following every session decoding on the primary, then
//             on the standby, alternating: the CPU (user + system, from
//             /proc) of the primary's walsenders per transaction, the
//             logical one (the hub's) and the physical one (the standby's,
//             there either way) (target: on the primary <= 2 us)
// Prints a line per measurement and, last, the table of bench/README.md.
const fs = require('node:fs');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const pg = require('pg');
const { Server, freePorts, makeDir, sleep } = require('../test/shard/servers');
const { Formation } = require('../test/shard/formation');
const { setupShard, setupRouter, percentile, SQL } = require('../test/shard/common');
const { connectPrimary } = require('../test/failover/primary');
const { HxHub, HxShardedHub } = require('../client');
const { parseConninfo } = require('../client/lib/conninfo');

const PG_CONFIG = process.env.HX_PG_CONFIG;
const BINDIR = spawnSync(PG_CONFIG, ['--bindir']).stdout.toString().trim();
const BINDIR18 = process.env.HX_PG18_BINDIR || '';
const DIR = process.env.HX_DIR;
const ROUNDS = Number(process.env.HX_BENCH_ROUNDS || 5);
const parts = process.argv.slice(2).length ? process.argv.slice(2) : ['route', 'scale', 'moves', 'failover', 'standby'];
const table = [];
const row = (what, value, target) => {
  table.push([what, value, target || '']);
  console.log(`  ${what}: ${value}${target ? ` (target ${target})` : ''}`);
};
const ms = (v) => `${v.toFixed(2)} ms`;
const append = (item) => JSON.stringify([{ op: 'append', path: '/items', items: [item] }]);
const median = (xs) => percentile(xs, 50);

/** A router and n shards on fresh servers, sessions created; {servers, router, shards, connect, stop}. */
async function cluster(name, n, sessions, settings = {}) {
  const ports = await freePorts(n + 1);
  const servers = [];
  for (let i = 0; i <= n; i++) {
    const s = new Server(BINDIR, path.join(DIR, name, i === n ? 'router' : `shard${i}`), ports[i], i === n ? 'router' : `shard${i}`);
    await s.init({ fsync: 'on', max_connections: 300, ...settings });
    await s.start();
    servers.push(s);
  }
  const shards = servers.slice(0, n);
  const router = servers[n];
  for (const s of shards) await setupShard(s, 'app');
  await setupRouter(router, 'router', shards.map((s) => s.conninfo('app')));
  const clients = [];
  const connect = async (server = router, db = 'router') => {
    const c = new pg.Client(server.config(db));
    c.on('error', () => {});
    await c.connect();
    clients.push(c);
    return c;
  };
  const admin = await connect();
  const keys = Array.from({ length: sessions }, (_, i) => `s-${i + 1}`);
  await admin.query(`SELECT hxshard.create(k, 'u', 'prj', '{"items": []}') FROM unnest($1::text[]) k`, [keys]);
  return {
    servers, shards, router, admin, keys, connect,
    async stop() {
      for (const c of clients) await c.end().catch(() => {});
      for (const s of servers) await s.stop('immediate').catch(() => {});
    },
  };
}

async function partRoute() {
  console.log('== route: a routed hxshard.merge against the same hx_merge on the shard');
  const c = await cluster('route', 1, 100);
  try {
    const routed = await c.connect();
    const direct = await c.connect(c.shards[0], 'app');
    const N = 2000;
    const lat = { routed: [], direct: [] };
    for (let r = 0; r < ROUNDS; r++) {
      for (const who of r % 2 ? ['direct', 'routed'] : ['routed', 'direct']) {
        for (let i = 0; i < N; i++) {
          const k = c.keys[i % c.keys.length];
          const t0 = process.hrtime.bigint();
          if (who === 'routed') await routed.query('SELECT hxshard.merge($1, $2)', [k, append(i)]);
          else await direct.query('UPDATE sessions SET state = hx_merge(state, $2), updated_at = now() WHERE session_id = $1', [k, append(i)]);
          lat[who].push(Number(process.hrtime.bigint() - t0) / 1e6);
        }
      }
    }
    const pr = median(lat.routed);
    const pd = median(lat.direct);
    row('routed hx_merge p50 / direct p50', `${ms(pr)} / ${ms(pd)} = ${(pr / pd).toFixed(2)}x`, '<= 1.3x');
    row('routed hx_merge p99 / direct p99', `${ms(percentile(lat.routed, 99))} / ${ms(percentile(lat.direct, 99))}`);
  } finally {
    await c.stop();
  }
}

/** w writers through the router for secs seconds: writes a second. */
async function drive(c, w, secs, pick) {
  let stop = false;
  let n = 0;
  const errors = [];
  const one = async () => {
    const db = await c.connect();
    for (let i = 0; !stop; i++) {
      try {
        await db.query('SELECT hxshard.merge($1, $2)', [pick(i), append(i)]);
        n++;
      } catch (err) {
        errors.push(err.message);
      }
    }
  };
  const all = Array.from({ length: w }, one);
  await sleep(secs * 1000);
  stop = true;
  await Promise.all(all);
  if (errors.length) throw new Error(`writers failed: ${errors[0]}`);
  return n / secs;
}

async function partScale() {
  console.log('== scale: 8 writers through the router at 1, 2 and 4 shards, the three alternating');
  const sizes = [1, 2, 4];
  const clusters = {};
  const rates = { 1: [], 2: [], 4: [] };
  try {
    for (const n of sizes) clusters[n] = await cluster(`scale${n}`, n, 2000);
    for (let round = 0; round < ROUNDS; round++) {
      const line = [];
      for (let i = 0; i < sizes.length; i++) {
        const n = sizes[(i + round) % sizes.length];
        const c = clusters[n];
        const r = await drive(c, 8, 8, () => c.keys[Math.floor(Math.random() * c.keys.length)]);
        rates[n].push(r);
        line.push(`${n} shard(s) ${Math.round(r)}`);
      }
      console.log(`  round ${round + 1}: ${line.join(', ')} writes/s`);
    }
  } finally {
    for (const n of sizes) if (clusters[n]) await clusters[n].stop();
  }
  const m = Object.fromEntries(sizes.map((n) => [n, median(rates[n])]));
  row('writes/s through the router at 1, 2, 4 shards (medians)', `${Math.round(m[1])}, ${Math.round(m[2])}, ${Math.round(m[4])} (${(m[2] / m[1]).toFixed(2)}x, ${(m[4] / m[1]).toFixed(2)}x)`);
}

async function partMoves() {
  console.log('== moves: 200 live moves under 8 writers');
  const c = await cluster('moves', 4, 2000);
  try {
    let stop = false;
    const writers = Array.from({ length: 8 }, async () => {
      const db = await c.connect();
      for (let i = 0; !stop; i++) await db.query('SELECT hxshard.merge($1, $2)', [c.keys[Math.floor(Math.random() * c.keys.length)], append(i)]);
    });
    const probe = await c.connect();
    const pauses = [];
    for (let m = 0; m < 200; m++) {
      const k = c.keys[(m * 37) % c.keys.length];
      const from = (await c.admin.query('SELECT hxshard.shard_of($1) AS s', [k])).rows[0].s;
      let moving = true;
      let longest = 0;
      const probing = (async () => {
        for (let i = 0; moving; i++) {
          const t0 = process.hrtime.bigint();
          await probe.query('SELECT hxshard.merge($1, $2)', [k, append(`p${i}`)]);
          longest = Math.max(longest, Number(process.hrtime.bigint() - t0) / 1e6);
        }
      })();
      await sleep(5);
      await c.admin.query('CALL hxshard.move($1, $2)', [k, (from + 1 + (m % 3)) % 4]);
      moving = false;
      await probing;
      pauses.push(longest);
    }
    stop = true;
    await Promise.all(writers);
    const windows = (await c.admin.query(`SELECT extract(epoch FROM switched_at - fenced_at) * 1000 AS w
      FROM hxshard.move WHERE state = 'done'`)).rows.map((r) => Number(r.w));
    row('a move\'s pause for its writers p50 / p99', `${ms(percentile(pauses, 50))} / ${ms(percentile(pauses, 99))}`, 'p99 <= 500 ms');
    row('a move\'s fence-to-switch window p50 / p99', `${ms(percentile(windows, 50))} / ${ms(percentile(windows, 99))}`);
  } finally {
    await c.stop();
  }
}

async function partFailover() {
  console.log('== failover: commit-to-client of the other shards while shard 0 fails over');
  makeDir(path.join(DIR, 'failover'));
  const ports = await freePorts(6);
  const formation = new Formation(PG_CONFIG, path.join(DIR, 'failover', 'ha'), ports.slice(0, 3), 'app');
  const plain = [1, 2].map((i) => new Server(BINDIR, path.join(DIR, 'failover', `shard${i}`), ports[2 + i], `shard${i}`));
  const routerServer = new Server(BINDIR, path.join(DIR, 'failover', 'router'), ports[5], 'router');
  let hub = null;
  const clients = [];
  try {
    await formation.start();
    for (const s of [...plain, routerServer]) {
      await s.init({ fsync: 'on', max_connections: 300 });
      await s.start();
    }
    const { client: p0 } = await connectPrimary(formation.conninfo(), { timeoutMs: 30000 });
    for (const q of ['CREATE EXTENSION hxstate', SQL.sessions, SQL.shard, 'SELECT hx_stream_publication()']) await p0.query(q);
    await p0.end();
    for (const s of plain) await setupShard(s, 'app');
    await setupRouter(routerServer, 'router', [formation.conninfo(), ...plain.map((s) => s.conninfo('app'))]);
    const connect = async () => {
      const c = new pg.Client(routerServer.config('router'));
      c.on('error', () => {});
      await c.connect();
      clients.push(c);
      return c;
    };
    const admin = await connect();
    const keys = Array.from({ length: 300 }, (_, i) => `k-${i + 1}`);
    await admin.query(`SELECT hxshard.create(k, 'u', 'prj', '{"items": []}') FROM unnest($1::text[]) k`, [keys]);
    const where = new Map((await admin.query('SELECT k, hxshard.shard_of(k) AS s FROM unnest($1::text[]) k', [keys])).rows.map((r) => [r.k, r.s]));
    const primaryOf = async () => {
      const { client, host, port } = await connectPrimary(formation.conninfo(), { timeoutMs: 5000 });
      client.end().catch(() => {});
      return { host, port, user: 'postgres', database: 'app' };
    };
    hub = new HxShardedHub({
      router: routerServer.config('router'),
      shard: (shard, role, conninfo) => (shard === 0 ? primaryOf() : parseConninfo(conninfo)),
      reconnect: { min: 50, max: 1000 },
      hub: { transport: 'wal', reconnect: { min: 100, max: 1000 } },
    });
    hub.on('error', () => {});
    await hub.start();
    const acks = new Map(); // item -> ack time (ms)
    const lat = [];         // [received at, latency, shard]
    for (const k of keys) {
      hub.follow({ table: 'sessions', key: k }, { state: false }).on('event', (e) => {
        if (e.type !== 'STATE_DELTA') return;
        const now = performance.now();
        for (const op of e.delta) {
          const item = op.value;
          if (typeof item === 'string' && acks.has(item)) lat.push([now, now - acks.get(item), where.get(k)]);
        }
      });
    }
    await sleep(2000);
    let stop = false;
    const rate = 200; // writes a second per writer, 4 writers
    const writers = Array.from({ length: 4 }, async (_, w) => {
      let db = await connect();
      for (let i = 0; !stop; i++) {
        const t0 = performance.now();
        const item = `${w}-${i}`;
        try {
          await db.query('SELECT hxshard.merge($1, $2)', [keys[(w * 7919 + i * 13) % keys.length], append(item)]);
          acks.set(item, performance.now());
        } catch (err) {
          // its shard has no primary: a new router connection after a while, as a client would
          await db.end().catch(() => {});
          await sleep(100);
          db = await connect();
        }
        const wait = 1000 / rate - (performance.now() - t0);
        if (wait > 0) await sleep(wait);
      }
    });
    await sleep(10000);
    const tKill = performance.now();
    formation.kill('node1');
    await formation.waitStates(/node2=(wait_primary|primary)\/(wait_primary|primary)/, 120000);
    const tUp = performance.now();
    await sleep(5000);
    const tEnd = performance.now();
    stop = true;
    await Promise.all(writers);
    const pick = (a, b) => lat.filter(([t, , s]) => s !== 0 && t >= a && t < b).map(([, l]) => l);
    const before = pick(tKill - 10000, tKill);
    const during = pick(tKill, tEnd);
    row('commit-to-client of the other shards, before the failover p50 / p99', `${ms(percentile(before, 50))} / ${ms(percentile(before, 99))} (${before.length} events)`);
    row('... during shard 0\'s failover p50 / p99', `${ms(percentile(during, 50))} / ${ms(percentile(during, 99))} (${during.length} events; ${((tUp - tKill) / 1000).toFixed(1)} s without a primary)`);
    row('... p99 during / before', `${(percentile(during, 99) / percentile(before, 99)).toFixed(2)}x`, '<= 1.5x');
  } finally {
    if (hub) await hub.stop().catch(() => {});
    for (const c of clients) await c.end().catch(() => {});
    for (const s of [...plain, routerServer]) await s.stop('immediate').catch(() => {});
    await formation.stop().catch(() => {});
  }
}

const ticksOf = (pid) => {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(f[11]) + Number(f[12]); // utime + stime (fields 14 and 15)
};

async function partStandby() {
  if (!BINDIR18) {
    console.log('== standby: skipped (no HX_PG18_BINDIR)');
    return;
  }
  console.log('== standby: the primary\'s CPU per transaction for streaming, decoding on the primary and on a standby');
  makeDir(path.join(DIR, 'standby'));
  const ports = await freePorts(2);
  const primary = new Server(BINDIR18, path.join(DIR, 'standby', 'primary'), ports[0], 'primary');
  const standby = new Server(BINDIR18, path.join(DIR, 'standby', 'standby'), ports[1], 'standby');
  const hz = Number(spawnSync('getconf', ['CLK_TCK']).stdout.toString().trim());
  try {
    await primary.init({ fsync: 'on', max_connections: 200 });
    await primary.start();
    await primary.sql("SELECT pg_create_physical_replication_slot('standby', true)");
    await standby.initStandby(primary, 'standby');
    await standby.start();
    await primary.sql('CREATE DATABASE app');
    const c = new pg.Client(primary.config('app'));
    await c.connect();
    await c.query(fs.readFileSync(path.join(__dirname, 'pgbench', 'setup.sql'), 'utf8'));
    await c.query(SQL.sessions);
    await c.query('SELECT bench_pg_keep_triggers()');
    await c.query('SELECT hx_stream_publication()');
    await c.query("SELECT bench_pg_reset('log', 1000)");
    await c.end();
    for (;;) {
      const r = await standby.sql("SELECT count(*)::int AS n FROM pg_database WHERE datname = 'app'").catch(() => [{ n: 0 }]);
      if (r[0].n === 1) break;
      await sleep(200);
    }
    await sleep(2000);
    const res = { primary: { logical: [], physical: [] }, standby: { logical: [], physical: [] } };
    for (let r = 0; r < ROUNDS; r++) {
      for (const where of r % 2 ? ['standby', 'primary'] : ['primary', 'standby']) {
        const hub = new HxHub({
          pg: (role) => (role === 'replication' && where === 'standby' ? standby.config('app') : primary.config('app')),
          transport: 'wal', applicationName: 'hx_bench_hub',
        });
        hub.on('error', () => {});
        await hub.start();
        const subs = [];
        for (let i = 1; i <= 1000; i++) subs.push(hub.follow({ table: 'sessions', key: `s-${String(i).padStart(4, '0')}` }, { state: false }));
        await Promise.all(subs.map((s) => s.ready));
        const senders = await primary.sql(`SELECT pid, application_name FROM pg_stat_replication`);
        const logical = senders.filter((s) => s.application_name === 'hx_bench_hub').map((s) => s.pid);
        const physical = senders.filter((s) => s.application_name === 'standby').map((s) => s.pid);
        const t0 = [...logical, ...physical].map(ticksOf);
        const out = spawnSync(path.join(BINDIR18, 'pgbench'), ['-n', '-M', 'prepared', '-c', '32', '-j', '2', '-T', '8',
          '-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-D', 'rows=1000',
          '-f', path.join(__dirname, 'pgbench', 'update.sql'), 'app']).stdout.toString();
        const n = Number(/number of transactions actually processed: (\d+)/.exec(out)[1]);
        // the walsenders have sent everything once the hub has it all
        await new Promise((resolve) => {
          const t = setInterval(() => { if (subs.every((s) => s.seq > 0) && hub.stats.walEvents >= n) { clearInterval(t); resolve(); } }, 50);
          setTimeout(() => { clearInterval(t); resolve(); }, 30000);
        });
        const t1 = [...logical, ...physical].map(ticksOf);
        const us = (i) => ((t1[i] - t0[i]) / hz) * 1e6 / n;
        const lg = logical.reduce((a, _, i) => a + us(i), 0);
        const ph = physical.reduce((a, _, i) => a + us(logical.length + i), 0);
        res[where].logical.push(lg);
        res[where].physical.push(ph);
        console.log(`  round ${r + 1}, decoding on the ${where}: ${n} transactions; the primary's logical walsenders ${lg.toFixed(2)} us, physical ${ph.toFixed(2)} us per transaction`);
        await hub.stop();
      }
    }
    row('the primary\'s CPU per transaction for streaming, decoding on the primary (logical walsender)', `${median(res.primary.logical).toFixed(2)} us`);
    row('... decoding on a standby (the primary\'s logical walsenders)', `${median(res.standby.logical).toFixed(2)} us`, '<= 2 us');
    row('... the physical walsender to the standby, there either way', `${median(res.primary.physical).toFixed(2)} us / ${median(res.standby.physical).toFixed(2)} us`);
  } finally {
    await standby.stop('immediate').catch(() => {});
    await primary.stop('immediate').catch(() => {});
  }
}

async function main() {
  makeDir(DIR);
  const runs = { route: partRoute, scale: partScale, moves: partMoves, failover: partFailover, standby: partStandby };
  for (const p of parts) {
    if (!runs[p]) throw new Error(`no part ${p}`);
    await runs[p]();
  }
  console.log('\n| measurement | figure | target |\n|---|---|---|');
  for (const [what, value, target] of table) console.log(`| ${what} | ${value} | ${target} |`);
}

main().then(() => process.exit(0), (err) => {
  console.error(err);
  process.exit(1);
});
