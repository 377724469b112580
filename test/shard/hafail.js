'use strict';
// test/shard/hafail.js: one shard's primary killed under load (called by
// test/shard/run; PostgreSQL 15 with pg_auto_failover).
//
//   HX_PG_CONFIG=... HX_DIR=... node test/shard/hafail.js
//
// On 127.0.0.1: shard 0 is a pg_auto_failover formation (a monitor, a
// primary and a synchronous secondary: formation.js), shards 1 and 2 and
// the router are plain servers.  The router reaches shard 0 by libpq's
// multi-host connection string with target_session_attrs=read-write,
// which PL/Proxy hands to libpq: its calls go to whichever node is the
// primary.  HX_SESSIONS sessions (300) over the three shards, 8 writers
// through the router (hxshard.merge appending a unique item: acknowledged
// when the call returns; a call that failed is in doubt), one
// HxShardedHub following every session (its shard option finds shard 0's
// primary; the writers connect as app, the followers as hub, the roles
// of docs/sharding.md).  Under load: kill -9 of the primary's whole pg_autoctl
// service (keeper, postgres, backends); the monitor promotes the
// secondary; the writers go on; the killed node's service is started
// again and rejoins as the secondary.
//
// The checks: every acknowledged write present exactly once, on every
// shard (shard 0's synchronous replication keeps what was acknowledged);
// a write in doubt at most once; while shard 0 had no primary, the
// followers of shards 1 and 2 went on; every follower ends at its row,
// every seq once in order; a 'diverged' resync (PostgreSQL 15 has no
// holdback: a follower may have shown a commit that the failover lost,
// test/shard/standby.js shows the holdback of 17+) only on shard 0.
const path = require('node:path');
const pg = require('pg');
const { Server, freePorts, makeDir, sleep } = require('./servers');
const { Formation } = require('./formation');
const { Checks, prepareShard, setupShard, setupRouter, Recorder, waitFor } = require('./common');
const { connectPrimary } = require('../failover/primary');
const { HxShardedHub } = require('../../client');
const { parseConninfo } = require('../../client/lib/conninfo');

const PG_CONFIG = process.env.HX_PG_CONFIG;
const DIR = process.env.HX_DIR;
const SESSIONS = Number(process.env.HX_SESSIONS || 300);
const WRITERS = 8;
const label = process.env.HX_LABEL || 'shard-hafail';

async function main() {
  const checks = new Checks(label);
  makeDir(DIR);
  const ports = await freePorts(6);
  const formation = new Formation(PG_CONFIG, path.join(DIR, 'ha'), ports.slice(0, 3), 'app');
  const bindir = formation.bindir;
  const plain = [1, 2].map((i) => new Server(bindir, path.join(DIR, `shard${i}`), ports[2 + i], `shard${i}`));
  const routerServer = new Server(bindir, path.join(DIR, 'router'), ports[5], 'router');
  let hub = null;
  const clients = [];
  try {
    console.log(`  formation: ${await formation.start()}`);
    for (const s of [...plain, routerServer]) {
      await s.init({ fsync: 'on', max_connections: 300 });
      await s.start();
    }
    // shard 0 through the formation's primary
    const { client: p0 } = await connectPrimary(formation.conninfo(), { timeoutMs: 30000 });
    await prepareShard(p0);
    await p0.end();
    for (const s of plain) await setupShard(s, 'app');
    // the shards' conninfos name no user: the writers' calls run as app on
    // the shards (docs/sharding.md, "Roles and privileges")
    await setupRouter(routerServer, 'router', [formation.conninfo(null), ...plain.map((s) => s.conninfo('app', null))]);
    const connect = async () => {
      const c = new pg.Client(routerServer.config('router', { user: 'app' }));
      c.on('error', () => {});
      await c.connect();
      clients.push(c);
      return c;
    };
    const admin = await connect();
    const keys = Array.from({ length: SESSIONS }, (_, i) => `k-${i + 1}`);
    await admin.query(`SELECT hxshard.create(k, 'u', 'prj', '{"items": []}') FROM unnest($1::text[]) k`, [keys]);
    const where = new Map((await admin.query('SELECT k, hxshard.shard_of(k) AS s FROM unnest($1::text[]) k', [keys])).rows.map((r) => [r.k, r.s]));

    // shard 0's primary, for the hub's connections (pg takes one host)
    const primaryOf = async () => {
      const { client, host, port } = await connectPrimary(formation.conninfo(), { timeoutMs: 5000 });
      client.end().catch(() => {});
      return { host, port, user: 'hub', database: 'app' };
    };
    hub = new HxShardedHub({
      router: routerServer.config('router', { user: 'hub' }),
      shard: async (shard, role, conninfo) => (shard === 0 ? primaryOf() : { ...parseConninfo(conninfo), user: 'hub' }),
      reconnect: { min: 50, max: 1000 },
      hub: { transport: 'wal', reconnect: { min: 100, max: 1000 } },
    });
    hub.on('error', () => {});
    await hub.start();
    const rec = new Recorder();
    const subs = new Map();
    const resyncs = [];
    for (const k of keys) {
      const sub = hub.follow({ table: 'sessions', key: k });
      rec.attach(sub);
      sub.on('resync', (r) => resyncs.push({ key: k, reason: r.reason }));
      subs.set(k, sub);
    }
    await Promise.all([...subs.values()].map((s) => s.ready));

    let stop = false;
    const acked = new Map();
    const doubt = new Map();
    let ackedCount = 0;
    const writer = async (w) => {
      let c = await connect();
      for (let i = 0; !stop; i++) {
        const k = keys[(w * 7919 + i * 31) % keys.length];
        const item = `${w}-${i}`;
        try {
          await c.query('SELECT hxshard.merge($1, $2)', [k, JSON.stringify([{ op: 'append', path: '/items', items: [item] }])]);
          if (!acked.has(k)) acked.set(k, []);
          acked.get(k).push(item);
          ackedCount++;
        } catch (err) {
          if (!doubt.has(k)) doubt.set(k, []);
          doubt.get(k).push(item);
          await c.end().catch(() => {});
          c = await connect();
          await sleep(20);
        }
      }
    };
    const writing = Array.from({ length: WRITERS }, (_, w) => writer(w));
    const waitAcks = (n) => { const want = ackedCount + n; return waitFor(() => ackedCount >= want, `${n} more writes`); };
    await waitAcks(400);

    // kill -9 of shard 0's primary service, under load
    const seqs = (list) => list.map((k) => subs.get(k).seq);
    const others = keys.filter((k) => where.get(k) !== 0);
    const before = seqs(others);
    const t0 = Date.now();
    console.log(`  kill -9 of node1's pg_autoctl, postgres and backends (${ackedCount} writes acknowledged)`);
    formation.kill('node1');
    const promoted = await formation.waitStates(/node2=(wait_primary|primary)\/(wait_primary|primary)/, 120000);
    const failoverMs = Date.now() - t0;
    console.log(`  node2 promoted in ${(failoverMs / 1000).toFixed(1)} s: ${promoted}`);
    const during = seqs(others);
    checks.ok(during.filter((s, i) => s > before[i]).length > others.length / 4,
      `while shard 0 had no primary, shards 1 and 2 streamed (${during.filter((s, i) => s > before[i]).length} of ${others.length} followers moved on)`);
    await waitAcks(400);
    formation.service('node1', ['run', '--pgdata', path.join(formation.dir, 'node1')]);
    await formation.waitStates(/node1=secondary\/secondary node2=primary\/primary/, 120000)
      .then(() => checks.ok(true, 'the killed node rejoins as the secondary'),
        (err) => checks.ok(false, 'the killed node rejoins as the secondary', err.message));
    await waitAcks(200);
    stop = true;
    await Promise.all(writing);

    // checks
    const rows = new Map();
    const shardClients = [await primaryOf(), ...plain.map((s) => s.config('app'))];
    for (const [i, cfg] of shardClients.entries()) {
      const db = new pg.Client(cfg);
      await db.connect();
      const r = await db.query(`SELECT s.session_id AS k, s.state, h.seq FROM sessions s
        CROSS JOIN LATERAL hx_stream_snapshot('sessions', s.session_id) h`);
      for (const x of r.rows) rows.set(x.k, { shard: i, seq: Number(x.seq), state: x.state });
      await db.end();
    }
    let lost = 0;
    let twice = 0;
    let doubtTwice = 0;
    for (const k of keys) {
      const count = new Map();
      for (const it of rows.get(k).state.items) count.set(it, (count.get(it) || 0) + 1);
      for (const it of acked.get(k) || []) {
        if (!count.get(it)) lost++;
        if (count.get(it) > 1) twice++;
      }
      for (const it of doubt.get(k) || []) if (count.get(it) > 1) doubtTwice++;
    }
    const doubtTotal = [...doubt.values()].reduce((a, l) => a + l.length, 0);
    checks.ok(lost === 0 && twice === 0, `every acknowledged write present exactly once (${ackedCount} acknowledged, ${lost} lost)`);
    checks.ok(doubtTwice === 0, `writes in doubt at most once (${doubtTotal} in doubt)`);
    await waitFor(() => keys.every((k) => subs.get(k).seq === rows.get(k).seq), 'every follower at its head', 120000).catch(() => {});
    const behind = keys.filter((k) => subs.get(k).seq !== rows.get(k).seq);
    checks.ok(behind.length === 0, 'every follower at its row\'s seq', behind.slice(0, 3).map((k) => `${k}: ${subs.get(k).seq} of ${rows.get(k).seq}`).join(', '));
    const wrong = keys.filter((k) => JSON.stringify(subs.get(k).state) !== JSON.stringify(rows.get(k).state));
    checks.ok(wrong.length === 0, 'every follower\'s state is its row\'s', wrong.slice(0, 3).join(', '));
    checks.ok(rec.gaps === 0 && rec.duplicates === 0, `every seq once, in order (${rec.events} events)`, rec.violations.join('; '));
    const stray = resyncs.filter((r) => r.reason !== 'diverged' || where.get(r.key) !== 0);
    const diverged = resyncs.length - stray.length;
    checks.ok(stray.length === 0, `no resync but 'diverged' on shard 0 (${diverged}: commits PostgreSQL 15 showed before the standby had them)`, JSON.stringify(stray.slice(0, 3)));
    for (const s of [...plain, routerServer]) {
      const p = s.problems();
      checks.ok(p.length === 0, `no crash in ${s.name}'s log`, p.slice(0, 3).join('\n'));
    }
  } catch (err) {
    checks.ok(false, 'the run completes', err.stack);
  } finally {
    if (hub) await hub.stop().catch(() => {});
    for (const c of clients) await c.end().catch(() => {});
    for (const s of [...plain, routerServer]) await s.stop('immediate').catch(() => {});
    await formation.stop().catch(() => {});
  }
  return checks.finish();
}

main().then((code) => process.exit(code), (err) => {
  console.error(err);
  process.exit(1);
});
