'use strict';
// Sessions on PL/Proxy shards (shard/): the router's functions route by a
// session's key, the guards hold on every shard, a session moves between
// shards while it is written and followed, and HxShardedHub follows every
// shard as one hub: every seq once, in order, across moves, with a shard
// that is down delaying only its own sessions.
const test = require('node:test');
const assert = require('node:assert');
const { Client } = require('pg');
const h = require('../../test/js/helpers');
const { Recorder } = require('./hub-helpers');
const { makeCluster, shardOf, sqlstateOf, conninfoOf } = require('./shard-helpers');
const { HxShardedHub } = require('..');
const { parseConninfo } = require('../lib/conninfo');

const append = (items) => JSON.stringify([{ op: 'append', path: '/items', items }]);

test('conninfo: libpq keyword/value strings into pg configs', () => {
  assert.deepStrictEqual(parseConninfo("host=/tmp/x port=5433 dbname=app user='a b' password='it''s'".replace("''", "\\'")),
    { host: '/tmp/x', port: 5433, database: 'app', user: 'a b', password: "it's" });
  assert.deepStrictEqual(parseConninfo('postgres://u@h/db'), { connectionString: 'postgres://u@h/db' });
  assert.deepStrictEqual(parseConninfo('  host = h   dbname=d sslmode=disable '), { host: 'h', database: 'd', ssl: false });
  assert.throws(() => parseConninfo('host'), /missing "="/);
  assert.throws(() => parseConninfo("host='h"), /unterminated/);
  assert.throws(() => parseConninfo('service=x'), /not supported/);
  assert.throws(() => parseConninfo('port=x'), /not a number/);
  assert.throws(() => parseConninfo('target_session_attrs=read-write'), /not supported/);
});

test('the router routes every call by the session key; the guards hold on every shard', async () => {
  const c = await makeCluster('hxsh_route', 3);
  try {
    const keys = h.range(1, 30).map((i) => `r-${i}`);
    for (const k of keys) await c.router.query("SELECT hxshard.create($1, 'u', 'prj')", [k]);
    const onShard = new Map();
    for (let i = 0; i < 3; i++) {
      const s = await c.connectShard(i);
      const { rows } = await s.query('SELECT session_id FROM sessions');
      for (const r of rows) onShard.set(r.session_id, i);
      await s.end();
    }
    const used = new Set();
    for (const k of keys) {
      const s = await shardOf(c.router, k);
      used.add(s);
      assert.strictEqual(onShard.get(k), s, `${k} lives where hxshard.shard_of says`);
    }
    assert.strictEqual(used.size, 3, 'the sessions spread over the three shards');

    await c.router.query('SELECT hxshard.merge($1, $2)', ['r-1', append([1])]);
    await c.router.query('SELECT hxshard.merge($1, $2)', ['r-1', append([2])]);
    const { rows: [g] } = await c.router.query('SELECT hxshard.get($1) AS g', ['r-1']);
    assert.deepStrictEqual(g.g.state, { items: [1, 2] });
    const { rows: [snap] } = await c.router.query('SELECT * FROM hxshard.snapshot($1)', ['r-1']);
    assert.deepStrictEqual([snap.stream, Number(snap.seq), snap.state], ['sessions:r-1', 3, { items: [1, 2] }]);
    const { rows: [at] } = await c.router.query('SELECT hxshard.state_at($1, 2) AS s', ['r-1']);
    assert.deepStrictEqual(at.s, { items: [1] });
    assert.strictEqual((await c.router.query("SELECT hxshard.stage('r-1', 'st', 'c1', $1, 1) AS x", [append([3])])).rows[0].x, true);
    assert.strictEqual((await c.router.query("SELECT hxshard.stage('r-1', 'st', 'c1', $1, 1) AS x", [append([3])])).rows[0].x, false, 'a retried stage applies nothing twice');
    await c.router.query("SELECT hxshard.promote('r-1', 'st')");
    assert.deepStrictEqual((await c.router.query("SELECT hxshard.promote('r-1', 'st') AS w")).rows[0].w, [], 'promoted once');
    assert.strictEqual((await c.router.query("SELECT hxshard.advance('r-1', 'start_build') AS p")).rows[0].p, 'building');

    // the guards, on each shard, through the router
    for (const k of keys.slice(0, 6)) {
      assert.strictEqual(await sqlstateOf(c.router, `SELECT hxshard.set($1, '{"project_id": "other"}')`, [k]), 'XH101', `${k}: project locked`);
      assert.strictEqual(await sqlstateOf(c.router, "SELECT hxshard.advance($1, 'publish')", [k]), 'XH103', `${k}: no such edge`);
    }
    await c.router.query(`SELECT hxshard.set('r-2', '{"pending_tool": {"id": "t1"}}')`);
    assert.strictEqual(await sqlstateOf(c.router, `SELECT hxshard.set('r-2', '{"pending_tool": {"id": "t2"}}')`), 'XH102');
    assert.strictEqual(await sqlstateOf(c.router, "SELECT hxshard.merge('nope', '[]')"), 'P0002');
    assert.strictEqual(await sqlstateOf(c.router, "SELECT hxshard.set('r-2', '[]')"), '22023');
    assert.strictEqual(await sqlstateOf(c.router, `SELECT hxshard.set('r-2', '{"session_id": "x"}')`), '22023');
    assert.strictEqual(await sqlstateOf(c.router, "SELECT hxshard.create('r-3', 'u')"), '23505', 'a key exists once');
    assert.strictEqual(await sqlstateOf(c.router, "SELECT hxshard.merge('r-3', '[{\"op\": \"bogus\"}]')"), '22023');
  } finally {
    await c.router.end();
  }
});

test('a move copies state, log, steps and seq, and fences the source; the errors of a bad move', async () => {
  const c = await makeCluster('hxsh_move', 2);
  try {
    await c.router.query("SELECT hxshard.create('m-1', 'u', 'prj')");
    for (let i = 0; i < 5; i++) await c.router.query('SELECT hxshard.merge($1, $2)', ['m-1', append([i])]);
    await c.router.query("SELECT hxshard.stage('m-1', 'done-step', 'c1', $1, 1)", [append(['a'])]);
    await c.router.query("SELECT hxshard.promote('m-1', 'done-step')");
    await c.router.query("SELECT hxshard.stage('m-1', 'open-step', 'c2', $1, 2)", [append(['b'])]);
    const src = await shardOf(c.router, 'm-1');
    const dst = 1 - src;
    const before = (await c.router.query("SELECT * FROM hxshard.snapshot('m-1')")).rows[0];

    assert.strictEqual(await sqlstateOf(c.router, 'CALL hxshard.move($1, $2)', ['m-1', src]), '22023', 'to where it is');
    assert.strictEqual(await sqlstateOf(c.router, 'CALL hxshard.move($1, 7)', ['m-1']), '22023', 'no such shard');
    assert.strictEqual(await sqlstateOf(c.router, 'CALL hxshard.move($1, $2)', ['nope', dst]), 'P0002', 'no such session');
    assert.strictEqual((await c.router.query("SELECT count(*)::int AS n FROM hxshard.move WHERE state = 'failed'")).rows[0].n, 1);

    await c.router.query('CALL hxshard.move($1, $2)', ['m-1', dst]);
    assert.strictEqual(await shardOf(c.router, 'm-1'), dst);
    const after = (await c.router.query("SELECT * FROM hxshard.snapshot('m-1')")).rows[0];
    assert.deepStrictEqual(after, before, 'the same stream, seq and state on the new shard');
    // the staged call moved: promoting it there applies it once
    assert.deepStrictEqual((await c.router.query("SELECT hxshard.promote('m-1', 'open-step') AS w")).rows[0].w,
      JSON.parse(append(['b'])));
    assert.deepStrictEqual((await c.router.query("SELECT hxshard.promote('m-1', 'done-step') AS w")).rows[0].w, [], 'a promoted step stays promoted');
    await c.router.query('SELECT hxshard.merge($1, $2)', ['m-1', append(['z'])]);
    const end = (await c.router.query("SELECT * FROM hxshard.snapshot('m-1')")).rows[0];
    assert.strictEqual(Number(end.seq), Number(before.seq) + 2, 'seq goes on from the copied log');
    assert.deepStrictEqual(end.state.items, [0, 1, 2, 3, 4, 'a', 'b', 'z']);
    assert.deepStrictEqual((await c.router.query("SELECT hxshard.state_at('m-1', 3) AS s")).rows[0].s, { items: [0, 1] },
      'history rebuilt from the copied log');

    // the source: every write refused (XH502), whatever SQL; reads too
    const s = await c.connectShard(src);
    assert.strictEqual(await sqlstateOf(s, "UPDATE sessions SET state = '{}' WHERE session_id = 'm-1'"), 'XH502');
    assert.strictEqual(await sqlstateOf(s, "DELETE FROM sessions WHERE session_id = 'm-1'"), 'XH502');
    assert.strictEqual(await sqlstateOf(s, "INSERT INTO sessions (session_id, user_id) VALUES ('m-1', 'x')"), 'XH502');
    assert.strictEqual(await sqlstateOf(s, "SELECT hxshard.stage('m-1', 's', 'c', '[]')"), 'XH502');
    assert.strictEqual(await sqlstateOf(s, "SELECT hxshard.get('m-1')"), 'XH502');
    // the copy is kept until swept
    assert.strictEqual((await s.query("SELECT count(*)::int AS n FROM hx_event WHERE stream = 'sessions:m-1'")).rows[0].n, Number(before.seq));
    assert.strictEqual((await c.router.query("SELECT hxshard.sweep('0 seconds') AS n")).rows[0].n, '1');
    assert.strictEqual((await s.query("SELECT count(*)::int AS n FROM hx_event WHERE stream = 'sessions:m-1'")).rows[0].n, 0);
    // and the session moves back (over the swept source)
    await c.router.query('CALL hxshard.move($1, $2)', ['m-1', src]);
    assert.deepStrictEqual((await c.router.query("SELECT * FROM hxshard.snapshot('m-1')")).rows[0].state.items, [0, 1, 2, 3, 4, 'a', 'b', 'z']);
    // a copy into a shard where the session lives is refused
    const d = await c.connectShard(dst);
    await s.query("SELECT hxshard.create('live', 'u')");
    assert.strictEqual(await sqlstateOf(s, "SELECT hxshard.prepare_import('live', 1)"), 'XH504');
    assert.strictEqual(await sqlstateOf(s, "SELECT hxshard.import_events('live', 1, '{1}', '{x}', ARRAY['{}'::jsonb], ARRAY[now()])"), '55000',
      'a copy without prepare_import');
    // a copy being made here is fenced: a write with a stale route is told to retry
    await d.query("SELECT hxshard.prepare_import('inc', 0)");
    assert.strictEqual(await sqlstateOf(d, "SELECT hxshard.merge('inc', '[]')"), 'XH501');
    assert.strictEqual(await sqlstateOf(d, "INSERT INTO sessions (session_id, user_id) VALUES ('inc', 'x')"), 'XH501');
    assert.strictEqual(await sqlstateOf(d, "SELECT hxshard.import_events('x', 1, '{1,2}', '{x}', ARRAY['{}'::jsonb], ARRAY[now()])"), '2202E');
    assert.strictEqual(await sqlstateOf(d, "SELECT hxshard.import_row('x', 1, '{\"session_id\": \"y\"}', '{}', 0)"), '22023');
    assert.strictEqual(await sqlstateOf(d, "SELECT hxshard.import_row('x', 1, '{\"session_id\": \"x\"}', '{}', 5)"), '55000', 'a copy that is not whole');
    assert.strictEqual(await sqlstateOf(s, "SELECT hxshard.export_row('live')"), '55000', 'not fenced');
    // a fence toward one shard, then another move: XH503
    assert.strictEqual((await s.query("SELECT hxshard.fence('live', 1) AS h")).rows[0].h, '1');
    assert.strictEqual((await s.query("SELECT hxshard.fence('live', 1) AS h")).rows[0].h, '1', 'fencing again toward the same shard: the same head');
    assert.strictEqual(await sqlstateOf(s, "SELECT hxshard.fence('live', 2)"), 'XH503');
    assert.strictEqual(await sqlstateOf(s, "SELECT hxshard.merge('live', '[]')"), 'XH501', 'moving: retry');
    assert.strictEqual((await s.query("SELECT hxshard.unfence('live') AS u")).rows[0].u, true);
    await s.query("SELECT hxshard.merge('live', '[]')");
    // the mover's functions are not PUBLIC's
    await s.query('DROP ROLE IF EXISTS hxsh_nobody');
    await s.query('CREATE ROLE hxsh_nobody');
    await s.query('GRANT SELECT, UPDATE ON sessions TO hxsh_nobody');
    await s.query('SET ROLE hxsh_nobody');
    for (const fn of ["hxshard.fence('live', 1)", "hxshard.prepare_import('live', 1)", "hxshard.sweep('0 s')", "hxshard.export_row('live')"]) {
      assert.strictEqual(await sqlstateOf(s, `SELECT ${fn}`), '42501', fn);
    }
    await s.query('RESET ROLE');
    await s.end();
    await d.end();
  } finally {
    await c.router.end();
  }
});

test('writers through the router see a pause, never an error, across live moves; nothing acknowledged is lost', async () => {
  const c = await makeCluster('hxsh_live', 2);
  const key = 'w-1';
  try {
    await c.router.query("SELECT hxshard.create($1, 'u', 'prj')", [key]);
    let stop = false;
    const acked = [];
    const errors = [];
    const writers = h.range(1, 4).map(async (w) => {
      const db = new Client({ database: c.routerDb });
      await db.connect();
      for (let i = 0; !stop; i++) {
        const id = `${w}-${i}`;
        try {
          await db.query('SELECT hxshard.merge($1, $2)', [key, append([id])]);
          acked.push(id);
        } catch (err) {
          errors.push(`${err.code} ${err.message}`);
        }
      }
      await db.end();
    });
    for (let m = 0; m < 6; m++) {
      await h.waitFor(() => acked.length >= (m + 1) * 20, 'writes between moves');
      const to = 1 - await shardOf(c.router, key);
      await c.router.query('CALL hxshard.move($1, $2)', [key, to]);
    }
    stop = true;
    await Promise.all(writers);
    assert.deepStrictEqual(errors, [], 'no writer saw an error');
    const { rows: [g] } = await c.router.query('SELECT hxshard.get($1) AS g', [key]);
    const items = g.g.state.items;
    assert.strictEqual(items.length, acked.length, 'one item per acknowledged write');
    assert.deepStrictEqual([...items].sort(), [...acked].sort());
    const moves = (await c.router.query("SELECT count(*)::int AS n FROM hxshard.move WHERE state = 'done'")).rows[0].n;
    assert.strictEqual(moves, 6);
  } finally {
    await c.router.end();
  }
});

test('HxShardedHub follows every shard as one hub: every seq once, in order, across moves', async () => {
  const c = await makeCluster('hxsh_hub', 3);
  const keys = h.range(1, 24).map((i) => `f-${i}`);
  for (const k of keys) await c.router.query("SELECT hxshard.create($1, 'u', 'prj')", [k]);
  const hub = new HxShardedHub({ router: { database: c.routerDb }, hub: { transport: 'wal' }, routeInterval: 500 });
  const errors = [];
  hub.on('error', (err) => errors.push(err.message));
  try {
    await hub.start();
    assert.strictEqual(hub.shards.length, 3);
    assert.strictEqual(hub.transport, 'wal');
    const rec = new Recorder();
    const subs = keys.map((k) => {
      const sub = hub.follow({ table: 'sessions', key: k });
      rec.attach(sub, k);
      return sub;
    });
    await Promise.all(subs.map((s) => s.ready));
    let stop = false;
    const writer = (async () => {
      for (let i = 0; !stop; i++) {
        await c.router.query('SELECT hxshard.merge($1, $2)', [keys[i % keys.length], append([i])]);
      }
    })();
    const moved = [];
    for (let m = 0; m < 12; m++) {
      const k = keys[(m * 5) % keys.length];
      const from = await shardOf(c.router, k);
      const to = (from + 1 + (m % 2)) % 3;
      await c.router.query('CALL hxshard.move($1, $2)', [k, to]);
      moved.push(k);
      await h.sleep(20);
    }
    stop = true;
    await writer;
    // every subscription reaches its session's head on its shard, with its state
    for (const sub of subs) {
      await h.waitFor(async () => {
        const { rows: [s] } = await c.router.query('SELECT * FROM hxshard.snapshot($1)', [sub.key]);
        return sub.seq === Number(s.seq);
      }, `${sub.key} at its head`);
      const { rows: [s] } = await c.router.query('SELECT * FROM hxshard.snapshot($1)', [sub.key]);
      assert.deepStrictEqual(h.canonical(sub.state), h.canonical(s.state), `${sub.key}: state`);
      assert.strictEqual(sub.shard, await shardOf(c.router, sub.key), `${sub.key} follows on its shard`);
    }
    assert.deepStrictEqual(rec.violations, [], 'every seq once, in order');
    assert.strictEqual(rec.resyncs, 0, 'no resync across the moves');
    const movedSubs = subs.filter((s) => s.stats.moves > 0);
    assert.ok(movedSubs.length >= 5, `followers moved with their sessions (${movedSubs.length})`);
    assert.strictEqual(hub.stats.subscriptions, keys.length);
  } finally {
    await hub.stop();
    await c.router.end();
  }
});

test('HxShardedHub: a shard that is down delays only its own sessions', async () => {
  const c = await makeCluster('hxsh_down', 3);
  const keys = h.range(1, 30).map((i) => `d-${i}`);
  for (const k of keys) await c.router.query("SELECT hxshard.create($1, 'u', 'prj')", [k]);
  const down = 1;
  const admin = new Client({ database: 'postgres' });
  await admin.connect();
  const setDown = async (yes) => {
    await admin.query(`ALTER DATABASE ${c.shards[down]} ALLOW_CONNECTIONS ${yes ? 'false' : 'true'}`);
    if (yes) await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [c.shards[down]]);
  };
  // the shard is down before the hub starts
  await setDown(true);
  const hub = new HxShardedHub({ router: { database: c.routerDb }, reconnect: { min: 50, max: 300 }, hub: { reconnect: { min: 50, max: 300 } } });
  const shardErrors = new Set();
  hub.on('error', (err) => { if (err.shard !== undefined) shardErrors.add(err.shard); });
  try {
    await hub.start();
    const rec = new Recorder();
    const subs = keys.map((k) => {
      const sub = hub.follow({ table: 'sessions', key: k });
      rec.attach(sub, k);
      return sub;
    });
    const where = new Map();
    for (const k of keys) where.set(k, await shardOf(c.router, k));
    const up = subs.filter((s) => where.get(s.key) !== down);
    const waiting = subs.filter((s) => where.get(s.key) === down);
    assert.ok(up.length > 0 && waiting.length > 0);
    await Promise.all(up.map((s) => s.ready));
    for (const k of keys) if (where.get(k) !== down) await c.router.query('SELECT hxshard.merge($1, $2)', [k, append([1])]);
    for (const s of up) await h.waitFor(() => s.seq === 2, `${s.key} streams while shard ${down} is down`);
    for (const s of waiting) assert.strictEqual(s.seq, 0, `${s.key} waits for its shard`);
    assert.ok(shardErrors.has(down), 'the hub says the shard is down');
    await setDown(false);
    await Promise.all(waiting.map((s) => s.ready));
    // the router's PL/Proxy connection to the shard was cut with it: a new
    // router backend connects afresh (the old one's next call there fails
    // once, with 57P01)
    const router2 = new Client({ database: c.routerDb });
    await router2.connect();
    for (const s of waiting) await router2.query('SELECT hxshard.merge($1, $2)', [s.key, append([2])]);
    await router2.end();
    for (const s of waiting) await h.waitFor(() => s.seq === 2, `${s.key} streams once its shard is back`);
    assert.deepStrictEqual(rec.violations, []);
  } finally {
    await hub.stop();
    await setDown(false).catch(() => {});
    await admin.end();
    await c.router.end();
  }
});

test('adding a shard and rebalancing: buckets move with their sessions, followers follow', async () => {
  const c = await makeCluster('hxsh_add', 2);
  const keys = h.range(1, 40).map((i) => `b-${i}`);
  for (const k of keys) await c.router.query("SELECT hxshard.create($1, 'u', 'prj')", [k]);
  const hub = new HxShardedHub({ router: { database: c.routerDb }, routeInterval: 500 });
  try {
    await hub.start();
    const rec = new Recorder();
    const subs = keys.map((k) => {
      const sub = hub.follow({ table: 'sessions', key: k });
      rec.attach(sub, k);
      return sub;
    });
    await Promise.all(subs.map((s) => s.ready));
    const { makeShard } = require('./shard-helpers');
    await makeShard('hxsh_add_s2');
    await c.router.query('SELECT hxshard.add_shard($1)', [conninfoOf('hxsh_add_s2')]);
    const { rows: [r] } = await c.router.query('CALL hxshard.rebalance(0, 40)');
    assert.strictEqual(r.buckets, 40, 'forty buckets moved');
    const counts = (await c.router.query('SELECT shard, count(*)::int AS n FROM hxshard.bucket GROUP BY shard ORDER BY shard')).rows;
    assert.deepStrictEqual(counts.map((x) => x.shard), [0, 1, 2]);
    assert.strictEqual(counts[2].n, 40);
    // every session is where the router says, and is written there
    for (const k of keys) await c.router.query('SELECT hxshard.merge($1, $2)', [k, append([k])]);
    const onNew = [];
    for (const k of keys) if (await shardOf(c.router, k) === 2) onNew.push(k);
    // new sessions of a moved bucket are created on its new shard
    const moved = (await c.router.query('SELECT bucket FROM hxshard.bucket WHERE shard = 2 LIMIT 1')).rows[0].bucket;
    let fresh = null;
    for (let i = 0; fresh === null; i++) {
      const k = `new-${i}`;
      const { rows: [b] } = await c.router.query('SELECT hxshard.bucket_of($1) AS b', [k]);
      if (b.b === moved) fresh = k;
    }
    await c.router.query("SELECT hxshard.create($1, 'u')", [fresh]);
    const s2 = await c.connectShard(2).catch(() => null);
    if (s2) await s2.end();
    const { Client: C } = require('pg');
    const db2 = new C({ database: 'hxsh_add_s2' });
    await db2.connect();
    assert.strictEqual((await db2.query('SELECT count(*)::int AS n FROM sessions WHERE session_id = $1', [fresh])).rows[0].n, 1);
    await db2.end();
    for (const sub of subs) {
      await h.waitFor(async () => {
        const { rows: [s] } = await c.router.query('SELECT * FROM hxshard.snapshot($1)', [sub.key]);
        return sub.seq === Number(s.seq);
      }, `${sub.key} at its head`);
    }
    assert.deepStrictEqual(rec.violations, []);
    assert.strictEqual(rec.resyncs, 0);
    for (const k of onNew) assert.strictEqual(subs[keys.indexOf(k)].shard, 2);
  } finally {
    await hub.stop();
    await c.router.end();
  }
});
