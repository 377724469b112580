'use strict';
// A statement that fails on a working connection, again and again, costs
// no reconnect: the hub keeps its connections, tells the subscriptions the
// statement was for (an 'error' each, with the SQLSTATE), tries the
// statement again after a growing backoff, and goes on once it succeeds.
//   - 42501: the reader loses SELECT on hx_event while it follows; the
//     reads of the log fail until it is granted again;
//   - 57014: a source function's statement is cancelled (as by a
//     statement_timeout) while a subscription starts: it waits, and starts
//     once the statement succeeds.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');
const { HxHub } = require('..');

const DB = 'hx_client_stmt_errors';
const READER = 'hx_client_stmt_reader';

let db;
before(async () => {
  db = await h.freshDatabase(DB);
  await db.query(`DROP ROLE IF EXISTS ${READER}`);
  await db.query(`CREATE ROLE ${READER} LOGIN`);
});
after(async () => {
  await db.query(`DROP OWNED BY ${READER}`);
  await db.query(`DROP ROLE ${READER}`);
  await db.end();
});

function errorsOf(emitter) {
  const errors = [];
  emitter.on('error', (err) => errors.push(err));
  return errors;
}

for (const transport of ['listen', 'shared']) {
  test(`42501 on the log's reads: no reconnect, an error per subscription, then on (${transport})`, async () => {
    const table = `priv_${transport}`;
    await h.streamTable(db, table);
    await db.query(`INSERT INTO ${table} VALUES ('a', '{"n": 0}'), ('b', '{"n": 0}')`);
    await db.query(`GRANT SELECT ON ${table}, hx_event TO ${READER}`);
    const hub = new HxHub({
      pg: { database: DB, user: READER },
      transport: 'listen',
      sharedConnection: transport === 'shared',
      pollInterval: 0,
      reconnect: { min: 20, max: 400 },
    });
    const hubErrors = errorsOf(hub);
    await hub.start();
    try {
      const subs = ['a', 'b'].map((key) => hub.follow({ table, key }));
      const errors = subs.map(errorsOf);
      await Promise.all(subs.map((s) => s.ready));

      await db.query(`REVOKE SELECT ON hx_event FROM ${READER}`);
      for (const key of ['a', 'b']) await h.merge(db, table, key, [{ op: 'increment', path: '/n', by: 1 }]);
      // the read of the log fails, and is tried again: still no reconnect
      await h.waitFor(() => errors.every((e) => e.length >= 3), 'three failed reads told to each subscription');
      assert.equal(hub.stats.disconnects, 0, 'the connection stays');
      assert.equal(hub.connected, true);
      for (const e of errors) {
        assert.ok(e.every((err) => err.code === '42501'), e.map((err) => err.code).join());
      }
      assert.ok(hubErrors.length >= 3 && hubErrors.every((err) => err.code === '42501'));
      assert.deepStrictEqual(subs.map((s) => s.seq), [1, 1]);

      await db.query(`GRANT SELECT ON hx_event TO ${READER}`);
      await h.waitFor(() => subs.every((s) => s.seq === 2), 'both at seq 2 once the privilege is back');
      for (const [i, key] of ['a', 'b'].entries()) {
        assert.deepStrictEqual(subs[i].state, await h.rowState(db, table, key));
      }
      assert.equal(hub.stats.disconnects, 0);
    } finally {
      await hub.stop();
    }
  });
}

test('57014 on a source function: the subscription waits and starts, with no reconnect', async () => {
  await db.query(`CREATE TABLE flaky (k text PRIMARY KEY, state jsonb, seq bigint NOT NULL DEFAULT 1);
    CREATE TABLE flaky_switch (cancel boolean NOT NULL);
    INSERT INTO flaky_switch VALUES (true);
    INSERT INTO flaky VALUES ('x', '{"v": 1}', 1);
    CREATE FUNCTION public.flaky_snapshots(keys text[])
    RETURNS TABLE (key text, stream text, seq bigint, state jsonb)
    LANGUAGE plpgsql STABLE AS $$
    BEGIN
        IF (SELECT cancel FROM flaky_switch) THEN
            RAISE EXCEPTION 'canceling statement due to statement timeout' USING ERRCODE = 'query_canceled';
        END IF;
        RETURN QUERY SELECT f.k, 'flaky:' || f.k, f.seq, f.state FROM flaky f WHERE f.k = ANY (keys);
    END $$;`);
  await db.query(`INSERT INTO hx_event (stream, seq, type, event) VALUES ('flaky:x', 1, 'STATE_SNAPSHOT',
    '{"type": "STATE_SNAPSHOT", "snapshot": {"v": 1}, "metadata": {"stream": "flaky:x", "seq": 1}}')`);
  const hub = new HxHub({
    pg: { database: DB }, transport: 'listen', pollInterval: 0, reconnect: { min: 20, max: 400 },
    sources: { flaky: 'public.flaky_snapshots' },
  });
  await hub.start();
  try {
    const sub = hub.follow({ table: 'flaky', key: 'x' });
    const errors = errorsOf(sub);
    await h.waitFor(() => errors.length >= 3, 'three cancelled statements told to the subscription');
    assert.ok(errors.every((err) => err.code === '57014'), errors.map((err) => err.code).join());
    assert.equal(sub.stopped, false, 'a cancelled statement does not fail it');
    assert.equal(hub.stats.disconnects, 0);
    await db.query('UPDATE flaky_switch SET cancel = false');
    await sub.ready;
    assert.equal(sub.stream, 'flaky:x');
    assert.deepStrictEqual(sub.state, { v: 1 });
    assert.equal(hub.stats.disconnects, 0);
  } finally {
    await hub.stop();
  }
});
