'use strict';
// The sharding layer under hostile input, as every role: the router's and
// the shards' functions with NULLs, empty, huge and odd keys, values of
// the wrong JSON type, bad seqs, shards and page sizes; what an
// application role may and may not do on the router and on a shard (the
// move's functions, the routing tables, the fence, the replica role);
// forged notifications on the router's channel, which a hub takes as a
// hint only (one read of the routes at a time, whatever their number).
// Every refusal is a documented SQLSTATE; nothing is half applied.
const test = require('node:test');
const assert = require('node:assert');
const { Client } = require('pg');
const h = require('../../test/js/helpers');
const { makeCluster, sqlstateOf } = require('./shard-helpers');
const { HxShardedHub } = require('..');

const APP = 'hxsh_abuse_app';

test('hostile input to every function of the router and the shards: documented SQLSTATEs, nothing half applied', async () => {
  const c = await makeCluster('hxsh_abuse', 2);
  try {
    const r = c.router;
    await r.query("SELECT hxshard.create('ok', 'u', 'prj')");
    const huge = 'k'.repeat(2000); // the longest a primary key's index takes is about 2,700 bytes
    assert.strictEqual(await sqlstateOf(r, "SELECT hxshard.create($1, 'u')", ['k'.repeat(1 << 20)]), '54000',
      'a key too long for the primary key: core\'s 54000, through the router');
    // keys: NULL, empty, huge, quotes, backslashes, unicode, what looks like SQL
    for (const fn of ["create(NULL, 'u')", "merge(NULL, '[]')", "set(NULL, '{}')", "advance(NULL, 'x')",
      "stage(NULL, 's', 'c', '[]')", "promote(NULL, 's')", 'remove(NULL)', 'get(NULL)', 'snapshot(NULL)', 'state_at(NULL, 1)']) {
      assert.strictEqual(await sqlstateOf(r, `SELECT hxshard.${fn}`), '22004', `${fn}: a NULL key`);
    }
    for (const k of ['', "o'; DROP TABLE sessions; --", 'a\\b', 'ü€𝄞', '%', `x${'"'.repeat(100)}`, huge]) {
      assert.strictEqual(await sqlstateOf(r, "SELECT hxshard.create($1, 'u')", [k]), null, `create ${k.slice(0, 20)}`);
      assert.strictEqual(await sqlstateOf(r, 'SELECT hxshard.merge($1, $2)', [k, '[{"op": "increment", "path": "/n", "by": 1}]']), null);
      const { rows: [g] } = await r.query('SELECT hxshard.get($1) AS g', [k]);
      assert.deepStrictEqual(g.g.state, { n: 1 }, `${k.slice(0, 20)}: its state`);
    }
    assert.strictEqual((await r.query("SELECT hxshard.get('nope') AS g")).rows[0].g, null);
    // writes of every JSON type and shape: through the router, what hx_merge says on one server
    const ok = (await r.query("SELECT hxshard.shard_of('ok') AS s")).rows[0].s;
    const direct = await c.connectShard(ok);
    await direct.query("INSERT INTO sessions (session_id, user_id) VALUES ('direct', 'u')");
    for (const w of ['{}', '"x"', '1', 'null', '[]', '[1]', '[{"op": "nope"}]', '[{"op": "increment", "path": "/n", "by": "x"}]',
      '[{"op": "append", "path": "/n", "items": [1]}]', '[{"op": "replace", "path": "", "value": 1}]',
      '[{"op": "add", "path": "/a~2", "value": 1}]', `[{"op": "replace", "path": "/d", "value": ${'['.repeat(5000)}${']'.repeat(5000)}}]`]) {
      const want = await sqlstateOf(direct, "UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = 'direct'", [w]);
      const got = await sqlstateOf(r, "SELECT hxshard.merge('ok', $1)", [w]);
      assert.strictEqual(got, want, `writes ${w.slice(0, 40)}: the router's SQLSTATE is the server's`);
    }
    await direct.end();
    for (const [sql, code] of [
      ["SELECT hxshard.merge('ok', NULL)", '22004'],
      ["SELECT hxshard.merge('nope', '[]')", 'P0002'],
      ["SELECT hxshard.set('ok', NULL)", '22023'],
      ["SELECT hxshard.set('ok', '42')", '22023'],
      ["SELECT hxshard.set('ok', '{\"phase\": 7}')", 'XH103'],
      ["SELECT hxshard.set('ok', '{\"user_id\": null}')", '23502'],
      ["SELECT hxshard.set('ok', '{\"pending_tool\": \"x\", \"session_id\": \"y\"}')", '22023'],
      ["SELECT hxshard.set('ok', '{\"updated_at\": \"x\"}')", '22007'],
      ["SELECT hxshard.set('ok', '{\"state\": [1, \"x\"]}')", null],
      ["SELECT hxshard.advance('ok', NULL)", '22004'],
      ["SELECT hxshard.advance('ok', 'no such event')", 'XH103'],
      ["SELECT hxshard.stage('ok', NULL, 'c', '[]')", '22004'],
      ["SELECT hxshard.stage('ok', 's', 'c', '[{\"op\": \"nope\"}]')", '22023'],
      ["SELECT hxshard.promote('ok', NULL)", '22004'],
      ["SELECT hxshard.state_at('ok', -1)", '22023'],
      ["SELECT hxshard.state_at('ok', 999999)", '22023'],
      ["SELECT hxshard.remove('nope')", 'P0002'],
    ]) {
      assert.strictEqual(await sqlstateOf(r, sql), code, sql);
    }
    // the failed statements changed nothing: its log is 1..n, its state the last good one's
    const s = (await r.query("SELECT * FROM hxshard.snapshot('ok')")).rows[0];
    assert.deepStrictEqual(s.state, [1, 'x']);
    // the mover's procedures, with bad arguments
    for (const [sql, code] of [
      ['CALL hxshard.move(NULL, 1)', '22023'],
      ["CALL hxshard.move('ok', NULL)", '22023'],
      ["CALL hxshard.move('ok', -1)", '22023'],
      ["CALL hxshard.move('ok', 2147483647)", '22023'],
      ["CALL hxshard.move('ok', 1 - hxshard.shard_of('ok'), 0)", '22023'],
      ["CALL hxshard.move('ok', 1 - hxshard.shard_of('ok'), 10, -5)", '22023'],
      ['CALL hxshard.move_bucket(1024, 0)', '22023'],
      ['CALL hxshard.move_bucket(NULL, 0)', '22023'],
      ['CALL hxshard.move_bucket(0, 9)', '22023'],
      ["SELECT hxshard.add_shard('')", '22023'],
      ['SELECT hxshard.add_shard(NULL)', '22023'],
    ]) {
      assert.strictEqual(await sqlstateOf(r, sql), code, sql);
    }
    assert.strictEqual((await r.query("SELECT count(*)::int AS n FROM hxshard.move WHERE state IN ('copying', 'fenced', 'switched')")).rows[0].n, 0,
      'no move left half done');
    // a move with one-event pages copies the whole log all the same
    const before = (await r.query("SELECT * FROM hxshard.snapshot('ok')")).rows[0];
    await r.query("CALL hxshard.move('ok', 1 - hxshard.shard_of('ok'), 1, 1)");
    assert.deepStrictEqual((await r.query("SELECT * FROM hxshard.snapshot('ok')")).rows[0], before);
    assert.strictEqual((await r.query("SELECT hxshard.abort_move('ok') AS a")).rows[0].a, 'none');
    // the huge key moves too
    const hugeBefore = (await r.query('SELECT * FROM hxshard.snapshot($1)', [huge])).rows[0];
    await r.query('CALL hxshard.move($1, 1 - hxshard.shard_of($1))', [huge]);
    assert.deepStrictEqual((await r.query('SELECT * FROM hxshard.snapshot($1)', [huge])).rows[0], hugeBefore);
  } finally {
    await c.router.end();
  }
});

test('an application role: the session functions, not the mover\'s, the routing tables read-only, the fence untouchable', async () => {
  const c = await makeCluster('hxsh_roles', 2);
  const admin = new Client({ database: 'postgres' });
  await admin.connect();
  try {
    await admin.query(`DROP ROLE IF EXISTS ${APP}`).catch(() => {});
    await admin.query(`CREATE ROLE ${APP} LOGIN`);
    await c.router.query(`GRANT USAGE ON FOREIGN SERVER hxshard TO ${APP}`);
    for (const db of c.shards) {
      const s = new Client({ database: db });
      await s.connect();
      await s.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON sessions TO ${APP}`);
      await s.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON hx_step, hx_step_call TO ${APP}`);
      await s.query(`GRANT SELECT ON hx_event TO ${APP}`);
      await s.end();
    }
    await c.router.query("SELECT hxshard.create('r-1', 'u', 'prj')");
    const app = new Client({ database: c.routerDb, user: APP });
    await app.connect();
    try {
      assert.strictEqual(await sqlstateOf(app, "SELECT hxshard.merge('r-1', '[{\"op\": \"increment\", \"path\": \"/n\", \"by\": 1}]')"), null, 'the application writes through the router');
      assert.strictEqual(await sqlstateOf(app, "SELECT hxshard.create('r-2', 'u')"), null);
      assert.strictEqual(await sqlstateOf(app, "SELECT hxshard.stage('r-1', 's', 'c', '[]')"), null);
      for (const sql of ["CALL hxshard.move('r-1', 1)", "CALL hxshard.move_bucket(0, 1)", 'CALL hxshard.rebalance()',
        "SELECT hxshard.add_shard('host=evil')", "SELECT hxshard.sweep('0 s')", "SELECT hxshard.abort_move('r-1')",
        "SELECT hxshard_proxy.fence(0, 'r-1', 1)", "SELECT hxshard_proxy.unfence(0, 'r-1')",
        "SELECT * FROM hxshard_proxy.export_events(0, 'r-1', 0, 10, 10)", "SELECT hxshard_proxy.prepare_import(0, 'r-1', 1)",
        "INSERT INTO hxshard.pin VALUES ('r-1', 1)", "UPDATE hxshard.bucket SET shard = 1", 'DELETE FROM hxshard.pin',
        'SELECT * FROM hxshard.move', "ALTER SERVER hxshard OPTIONS (SET p0 'host=evil')"]) {
        const code = await sqlstateOf(app, sql);
        assert.ok(code === '42501' || code === '42000', `${sql}: ${code}`);
      }
      assert.strictEqual(await sqlstateOf(app, 'SELECT count(*) FROM hxshard.bucket'), null, 'the routing tables are readable');
    } finally {
      await app.end();
    }
    // on a shard, as the application role
    const where = (await c.router.query("SELECT hxshard.shard_of('r-1') AS s")).rows[0].s;
    await c.router.query('CALL hxshard.move($1, $2)', ['r-1', 1 - where]);
    const s = new Client({ database: c.shards[where], user: APP });
    await s.connect();
    try {
      for (const [sql, code] of [
        ["UPDATE sessions SET state = '{}' WHERE session_id = 'r-1'", 'XH502'],
        ["DELETE FROM sessions WHERE session_id = 'r-1'", 'XH502'],
        ["DELETE FROM hxshard.fence WHERE session_id = 'r-1'", '42501'],
        ["SET session_replication_role = replica", '42501'],
        ["SELECT hxshard.fence('r-2', 1)", '42501'],
        ["SELECT hxshard.import_row('x', 1, '{}', '{}', 0)", '42501'],
        ["SELECT hxshard.sweep('0 s')", '42501'],
        ['SELECT hxshard.session_count()', '42501'],
        ["ALTER TABLE sessions DISABLE TRIGGER hxshard_fence", '42501'],
      ]) {
        assert.strictEqual(await sqlstateOf(s, sql), code, sql);
      }
    } finally {
      await s.end();
    }
  } finally {
    await admin.query(`DROP OWNED BY ${APP}`).catch(() => {});
    for (const db of c.shards) {
      const s = new Client({ database: db });
      await s.connect();
      await s.query(`DROP OWNED BY ${APP}`).catch(() => {});
      await s.end();
    }
    await c.router.query(`DROP OWNED BY ${APP}`).catch(() => {});
    await admin.query(`DROP ROLE IF EXISTS ${APP}`).catch(() => {});
    await admin.end();
    await c.router.end();
  }
});

test('forged notifications on the router\'s channel are hints: one read of the routes at a time, routes from the tables', async () => {
  const c = await makeCluster('hxsh_forge', 2);
  const keys = h.range(1, 20).map((i) => `n-${i}`);
  for (const k of keys) await c.router.query("SELECT hxshard.create($1, 'u')", [k]);
  const hub = new HxShardedHub({ router: { database: c.routerDb }, routeInterval: 0 });
  try {
    await hub.start();
    const subs = keys.map((k) => hub.follow({ table: 'sessions', key: k }));
    await Promise.all(subs.map((s) => s.ready));
    const reads = hub.stats.routeReads;
    const place = subs.map((s) => s.shard);
    // 2,000 forged notifications: every key, '*', keys not followed, a huge payload
    const forger = new Client({ database: c.routerDb });
    await forger.connect();
    await forger.query(`SELECT pg_notify('hxshard_route', x) FROM unnest($1::text[]) x`,
      [[...Array(500).fill('*'), ...keys, ...h.range(1, 1000).map((i) => `ghost-${i}`), 'z'.repeat(7000)]]);
    await forger.end();
    await h.waitFor(() => hub.stats.routeReads > reads, 'a read of the routes');
    await h.sleep(300);
    const more = hub.stats.routeReads - reads;
    assert.ok(more <= 4, `the notifications cost a few reads of the routes, not one each (${more})`);
    assert.deepStrictEqual(subs.map((s) => s.shard), place, 'no route changed: none did in the tables');
    // a route the router cannot serve (a pin to a shard it does not list) is reported, and the follower waits
    const errors = [];
    hub.on('error', (err) => errors.push(err.message));
    await c.router.query("INSERT INTO hxshard.pin VALUES ('n-1', 9)");
    await c.router.query("NOTIFY hxshard_route, 'n-1'");
    await h.waitFor(() => errors.some((m) => /shard 9, which hxshard.shards\(\) does not list/.test(m)), 'the bad route reported');
    assert.strictEqual(subs[0].shard, null, 'its follower waits for a route it can follow');
    await c.router.query("DELETE FROM hxshard.pin WHERE session_id = 'n-1'");
    await c.router.query("NOTIFY hxshard_route, 'n-1'");
    await h.waitFor(() => subs[0].shard === place[0], 'back on its shard');
  } finally {
    await hub.stop();
    await c.router.end();
  }
});
