'use strict';
// test/shard/moves.js: sessions on PL/Proxy shards under load (called by
// test/shard/run).
//
//   HX_BINDIR=... HX_DIR=... node test/shard/moves.js [--long]
//
// On 127.0.0.1, in HX_DIR: a router and 4 shard servers (shard/router.sql,
// shard/shard.sql); HX_SESSIONS sessions (2,000) created through the
// router; one HxShardedHub following every session (a transport
// connection per shard); 8 writers, each write one call of
// hxshard.merge(key, append a unique item) through the router,
// acknowledged when it returns; meanwhile HX_MOVES live moves (200; 1,000
// with --long) of random sessions to random other shards, one after
// another; then one shard stopped (immediate shutdown) while the writers
// and the followers of the other shards go on, and started again.
//
// The writers and the creates connect as the application's role of
// docs/sharding.md (app), the moves as the mover's (mover), the followers
// as the hub's (hub), with the grants the manual lists and no more
// (test/shard/common.js runs its blocks; test/shard/privileges.js checks
// what app is refused before the load starts).
//
// The checks:
//   - every acknowledged write's item is in its session exactly once, and
//     a write that failed (its shard down) at most once (in doubt: the
//     shard may have committed it before it went);
//   - no writer saw an error other than its shard being down (a move is a
//     pause, never an error);
//   - every follower handed out every seq once, in order (0 gaps, 0
//     duplicates), with no resync, and ends at its session's head with
//     its row's state, on the shard the router routes it to;
//   - every move done, none failed; the shard's copies swept;
//   - while one shard was down, the followers of every other shard went on
//     (their seqs moved), and its own caught up once it was back.
// Figures (printed, never asserted): the writers' pause in each move
// (fenced_at to switched_at, from hxshard.move), writes per second.
const path = require('node:path');
const pg = require('pg');
const { Server, freePorts, makeDir, sleep } = require('./servers');
const { Checks, percentile, setupShard, setupRouter, Recorder, waitFor } = require('./common');
const { checkPrivileges } = require('./privileges');
const { HxShardedHub } = require('../../client');

const long = process.argv.includes('--long');
const BINDIR = process.env.HX_BINDIR;
const DIR = process.env.HX_DIR;
const SHARDS = 4;
const WRITERS = 8;
const SESSIONS = Number(process.env.HX_SESSIONS || 2000);
const MOVES = Number(process.env.HX_MOVES || (long ? 1000 : 200));
const label = process.env.HX_LABEL || 'shard-moves';

async function main() {
  const checks = new Checks(label);
  const ports = await freePorts(SHARDS + 1);
  const servers = [];
  let hub = null;
  const clients = [];
  try {
    makeDir(DIR);
    for (let i = 0; i <= SHARDS; i++) {
      const s = new Server(BINDIR, path.join(DIR, i === SHARDS ? 'router' : `shard${i}`), ports[i], i === SHARDS ? 'router' : `shard${i}`);
      await s.init({ fsync: 'off', max_connections: 300 });
      await s.start();
      servers.push(s);
    }
    const shards = servers.slice(0, SHARDS);
    const routerServer = servers[SHARDS];
    for (const s of shards) await setupShard(s, 'app');
    // the shards' conninfos name no user: PL/Proxy connects as the caller,
    // so that app's and mover's calls run as app and mover on the shards
    await setupRouter(routerServer, 'router', shards.map((s) => s.conninfo('app', null)));
    // the roles of docs/sharding.md: the writers are app, the moves mover,
    // the followers hub
    const connect = async (user = 'app') => {
      const c = new pg.Client(routerServer.config('router', { user }));
      c.on('error', () => {});
      await c.connect();
      clients.push(c);
      return c;
    };
    const app = await connect('app');
    const admin = await connect('mover');
    const keys = [];
    for (let i = 1; i <= SESSIONS; i++) keys.push(`s-${i}`);
    await app.query(`SELECT hxshard.create('s-' || i, 'u', 'prj', '{"items": []}') FROM generate_series(1, $1) i`, [SESSIONS]);
    const where = async (k) => (await admin.query('SELECT hxshard.shard_of($1) AS s', [k])).rows[0].s;
    const spread = (await admin.query('SELECT hxshard.shard_of(k) AS s, count(*)::int AS n FROM unnest($1::text[]) k GROUP BY 1 ORDER BY 1', [keys])).rows;
    console.log(`  ${SESSIONS} sessions over ${SHARDS} shards: ${spread.map((r) => `shard ${r.s}: ${r.n}`).join(', ')}`);

    // the followers
    const home = await where(keys[0]);
    await checkPrivileges(checks, { router: routerServer, shard: shards[home], other: (home + 1) % SHARDS, key: keys[0], keys, shards: SHARDS });

    hub = new HxShardedHub({ router: routerServer.config('router', { user: 'hub' }), shard: { user: 'hub' },
      routeInterval: 2000, reconnect: { min: 50, max: 1000 },
      hub: { transport: 'wal', reconnect: { min: 50, max: 1000 } } });
    hub.on('error', () => {});
    await hub.start();
    const rec = new Recorder();
    const subs = new Map();
    for (const k of keys) {
      const sub = hub.follow({ table: 'sessions', key: k });
      rec.attach(sub);
      subs.set(k, sub);
    }
    await Promise.all([...subs.values()].map((s) => s.ready));
    console.log(`  following ${subs.size} sessions over ${hub.shards.length} shards (${hub.transport})`);

    // the writers
    let stop = false;
    let down = null;                 // the shard that is down
    const acked = new Map();         // key -> [item]
    const doubt = new Map();
    const otherErrors = [];
    let writes = 0;
    let rnd = 12345;
    const random = () => {
      rnd = (rnd * 1103515245 + 12345) % 2147483648;
      return rnd / 2147483648;
    };
    const writer = async (w) => {
      let c = await connect();
      for (let i = 0; !stop; i++) {
        const k = keys[Math.floor(random() * keys.length)];
        const item = `${w}-${i}`;
        try {
          await c.query('SELECT hxshard.merge($1, $2)', [k, JSON.stringify([{ op: 'append', path: '/items', items: [item] }])]);
          if (!acked.has(k)) acked.set(k, []);
          acked.get(k).push(item);
          writes++;
        } catch (err) {
          if (!doubt.has(k)) doubt.set(k, []);
          doubt.get(k).push(item);
          if (down === null) otherErrors.push(`${k}: ${err.code} ${err.message}`);
          // a shard that went down cut the router's connection to it: a new router backend
          await c.end().catch(() => {});
          c = await connect();
          await sleep(5);
        }
      }
    };
    const started = Date.now();
    const writing = Array.from({ length: WRITERS }, (_, w) => writer(w));

    // the moves
    for (let m = 0; m < MOVES; m++) {
      const k = keys[Math.floor(random() * keys.length)];
      const from = await where(k);
      const to = (from + 1 + Math.floor(random() * (SHARDS - 1))) % SHARDS;
      await admin.query('CALL hxshard.move($1, $2)', [k, to]);
    }
    const moveSecs = (Date.now() - started) / 1000;
    console.log(`  ${MOVES} moves under load in ${moveSecs.toFixed(1)} s; ${writes} writes acknowledged (${Math.round(writes / moveSecs)}/s)`);

    // one shard down while the others stream
    down = 1;
    const seqsOf = (list) => list.map((k) => subs.get(k).seq);
    const onDown = [];
    const others = [];
    for (const k of keys) ((await where(k)) === down ? onDown : others).push(k);
    await shards[down].stop('immediate');
    const before = seqsOf(others);
    const downBefore = seqsOf(onDown);
    await sleep(3000);
    const after = seqsOf(others);
    const advanced = after.filter((s, i) => s > before[i]).length;
    checks.ok(advanced > others.length / 10, `with shard ${down} down, the other shards' followers stream (${advanced} of ${others.length} moved on)`);
    checks.ok(seqsOf(onDown).every((s, i) => s === downBefore[i]), `shard ${down}'s followers wait for it (${onDown.length} sessions)`);
    await shards[down].start();
    await sleep(2000);
    down = null;
    stop = true;
    await Promise.all(writing);

    // checks
    const heads = new Map();
    for (let i = 0; i < SHARDS; i++) {
      const db = new pg.Client(shards[i].config('app'));
      await db.connect();
      const { rows } = await db.query(`SELECT s.session_id AS k, s.state, h.seq FROM sessions s
        CROSS JOIN LATERAL hx_stream_snapshot('sessions', s.session_id) h
        WHERE NOT EXISTS (SELECT 1 FROM hxshard.fence f WHERE f.session_id = s.session_id)`);
      for (const r of rows) heads.set(r.k, { shard: i, seq: Number(r.seq), state: r.state });
      await db.end();
    }
    checks.ok(heads.size === SESSIONS, `every session lives on exactly one shard (${heads.size})`);
    let lost = 0;
    let twice = 0;
    let doubtTwice = 0;
    let wrongShard = 0;
    for (const k of keys) {
      const h = heads.get(k);
      if (!h) continue;
      const items = h.state.items;
      const count = new Map();
      for (const it of items) count.set(it, (count.get(it) || 0) + 1);
      for (const it of acked.get(k) || []) {
        const n = count.get(it) || 0;
        if (n === 0) lost++;
        if (n > 1) twice++;
      }
      for (const it of doubt.get(k) || []) if ((count.get(it) || 0) > 1) doubtTwice++;
      if (h.shard !== await where(k)) wrongShard++;
    }
    const ackedTotal = [...acked.values()].reduce((a, l) => a + l.length, 0);
    const doubtTotal = [...doubt.values()].reduce((a, l) => a + l.length, 0);
    checks.ok(lost === 0 && twice === 0, `every acknowledged write present exactly once (${ackedTotal} acknowledged, ${lost} lost, ${twice} twice)`);
    checks.ok(doubtTwice === 0, `writes in doubt (their shard went down) at most once (${doubtTotal} in doubt)`);
    checks.ok(otherErrors.length === 0, 'no writer saw an error but its shard being down', otherErrors.slice(0, 3).join('; '));
    checks.ok(wrongShard === 0, 'each session lives where the router routes it');
    await waitFor(() => keys.every((k) => subs.get(k).seq === heads.get(k).seq), 'every follower at its head', 180000)
      .catch(() => {});
    const behind = keys.filter((k) => subs.get(k).seq !== heads.get(k).seq);
    checks.ok(behind.length === 0, 'every follower at its session\'s head', behind.slice(0, 3).map((k) => `${k}: ${subs.get(k).seq} of ${heads.get(k).seq}`).join(', '));
    const wrong = keys.filter((k) => JSON.stringify(subs.get(k).state) !== JSON.stringify(heads.get(k).state));
    checks.ok(wrong.length === 0, 'every follower\'s state is its row\'s', wrong.slice(0, 3).join(', '));
    checks.ok(rec.gaps === 0 && rec.duplicates === 0, `every seq once, in order, across the moves (${rec.events} events, ${rec.gaps} gaps, ${rec.duplicates} duplicates)`, rec.violations.join('; '));
    checks.ok(Object.keys(rec.resyncs).length === 0, 'no resync', JSON.stringify(rec.resyncs));
    const followedMoves = [...subs.values()].reduce((a, s) => a + s.stats.moves, 0);
    const onShard = keys.filter((k) => subs.get(k).shard !== heads.get(k).shard);
    checks.ok(onShard.length === 0, `every follower follows on its session's shard (${followedMoves} handovers)`);
    const m = (await admin.query(`SELECT state, count(*)::int AS n,
        array_agg(extract(epoch FROM switched_at - fenced_at) * 1000) FILTER (WHERE state = 'done') AS pauses
      FROM hxshard.move GROUP BY state`)).rows;
    const done = m.find((r) => r.state === 'done');
    checks.ok(done && done.n === MOVES && m.length === 1, `${MOVES} moves done, none failed`, JSON.stringify(m.map((r) => [r.state, r.n])));
    if (done) {
      const p = done.pauses.map(Number);
      console.log(`  the writers' pause in a move (fenced to switched): p50 ${percentile(p, 50).toFixed(1)} ms, p99 ${percentile(p, 99).toFixed(1)} ms, max ${Math.max(...p).toFixed(1)} ms`);
    }
    const swept = Number((await admin.query("SELECT hxshard.sweep('0 seconds') AS n")).rows[0].n);
    checks.ok(swept > 0, `the sources' copies swept (${swept})`);
    for (const s of servers) {
      const p = s.problems();
      checks.ok(p.length === 0, `no crash in ${s.name}'s log`, p.slice(0, 3).join('\n'));
    }
  } catch (err) {
    checks.ok(false, 'the run completes', err.stack);
  } finally {
    if (hub) await hub.stop().catch(() => {});
    for (const c of clients) await c.end().catch(() => {});
    for (const s of servers) await s.stop('immediate').catch(() => {});
  }
  return checks.finish();
}

main().then((code) => process.exit(code), (err) => {
  console.error(err);
  process.exit(1);
});
