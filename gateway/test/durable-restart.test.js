'use strict';
// @durable-streams/client, unchanged, follows a session's stream through a
// restart of the gateway while a writer writes: it reads, the gateway is
// stopped and started again (a new Gateway, hub and pool, on the same
// port), the client resumes from its offset, and what it got is every
// event of the session once, in seq order, with no gap: the log is the
// source of truth, and an offset is a seq.  Over long-poll and over SSE.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const t = require('./helpers');
const { mintToken, setupDurable } = require('..');
const { stream } = require('@durable-streams/client');
const { applyEvent } = require('hxstate-client');

const DB = 'hx_gateway_durable_restart';
let db;

before(async () => {
  db = await t.gatewayDatabase(DB);
  await setupDurable(db);
});
after(async () => { await db.end(); });

const OPTIONS = { durable: { longPollMs: 2000, sseMs: 60000 } };

for (const live of ['long-poll', 'sse']) {
  test(`the client follows a session through a gateway restart (${live}), with no gap and no duplicate`, { timeout: 120000 }, async () => {
    const key = `restart-${live}`;
    await db.query('INSERT INTO sessions (session_id, user_id, state) VALUES ($1, $2, $3)', [key, 'u', { n: 0 }]);
    let g = await t.startGateway(DB, OPTIONS);
    const port = g.port;
    const got = [];
    const res = await stream({
      url: `${g.base}/ds/sessions:${key}`,
      offset: '-1',
      live,
      headers: { authorization: `Bearer ${mintToken(t.SECRET, `sessions:${key}`)}` },
      onError: () => ({}), // go on, with the same parameters (from the last offset)
    });
    const unsubscribe = res.subscribeJson(async (batch) => { got.push(...batch.items); });

    // the writer: one change at a time, all through the restart
    const WRITES = 60;
    let written = 0;
    let writing = true;
    const writer = (async () => {
      while (writing && written < WRITES) {
        await db.query("UPDATE sessions SET state = hx_merge(state, '[{\"op\": \"increment\", \"path\": \"/n\", \"by\": 1}]') WHERE session_id = $1", [key]);
        written++;
        await t.sleep(15);
      }
    })();
    try {
      await t.waitFor(() => got.length >= 10, 'the client to read ten events');
      await g.close();
      const readBefore = got.length;
      await t.waitFor(() => written >= readBefore + 10, 'the writer to write ten more while the gateway is down');
      g = await t.startGateway(DB, OPTIONS, port);
      await writer;
      await t.waitFor(() => got.length >= WRITES + 1, `the client to read every event (${got.length} of ${WRITES + 1})`);
      await t.sleep(200);
      assert.deepEqual(got.map((e) => e.metadata.seq), t.range(1, WRITES + 1), 'every event once, in seq order');
      let state = null;
      for (const e of got) state = applyEvent(state, e);
      assert.deepEqual(state, await t.rowState(db, 'sessions', key), "the events rebuild the row's state");
      assert.ok(readBefore < WRITES + 1, 'the gateway stopped before the client had read everything');
      assert.ok(g.gw.durable.stats.requests >= 1, 'the client resumed on the gateway started again');
    } finally {
      writing = false;
      await writer;
      unsubscribe();
      res.cancel();
      await g.close();
    }
  });
}

test('an append whose gateway is killed before it commits is not kept; its retry, on a new gateway, lands once', { timeout: 120000 }, async () => {
  const { durableToken } = require('..');
  const options = { durable: { logPrefixes: ['@agent:'] } };
  const auth = { authorization: `Bearer ${durableToken(t.SECRET, '@agent:crash', { scopes: ['read', 'append'] })}`, 'content-type': 'application/json' };
  const first = await t.childGateway(DB, options);
  let second = null;
  const locker = await t.connect(DB);
  try {
    assert.equal((await fetch(`${first.base}/ds/@agent:crash`, { method: 'PUT', headers: auth })).status, 201);
    const headers = { ...auth, 'producer-id': 'w', 'producer-epoch': '0', 'producer-seq': '0' };
    const body = JSON.stringify({ type: 'CUSTOM', name: 'once', value: 1 });
    // the stream's row locked: the gateway's append waits in its transaction
    await locker.query('BEGIN');
    await locker.query("SELECT 1 FROM hx_durable.stream WHERE name = '@agent:crash' FOR UPDATE");
    const lost = fetch(`${first.base}/ds/@agent:crash`, { method: 'POST', headers, body }).then((r) => r.status, () => 'no answer');
    await t.waitFor(async () => (await db.query(
      "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%hx_durable%stream%FOR UPDATE%'")).rows.length === 1,
    "the gateway's append to wait for the lock");
    first.proc.kill('SIGKILL');
    assert.equal(await lost, 'no answer');
    await locker.query('COMMIT');
    // its transaction never commits: the backend finds its client gone
    await t.waitFor(async () => (await db.query(
      "SELECT 1 FROM pg_stat_activity WHERE query LIKE '%hx_durable%stream%FOR UPDATE%' AND pid <> pg_backend_pid() AND state <> 'idle'")).rows.length === 0,
    "the killed gateway's transaction to end");
    assert.equal((await db.query("SELECT count(*)::int AS n FROM hx_event WHERE stream = '@agent:crash'")).rows[0].n, 0, 'nothing was kept');
    second = await t.childGateway(DB, options);
    const retry = await fetch(`${second.base}/ds/@agent:crash`, { method: 'POST', headers, body });
    assert.equal(retry.status, 200, 'the retry is the first append that lands');
    const again = await fetch(`${second.base}/ds/@agent:crash`, { method: 'POST', headers, body });
    assert.equal(again.status, 204, 'and the one after it a duplicate');
    const { rows } = await db.query("SELECT seq, event->>'name' AS name FROM hx_event WHERE stream = '@agent:crash'");
    assert.deepEqual(rows.map((r) => [Number(r.seq), r.name]), [[1, 'once']]);
  } finally {
    await locker.end();
    if (first.proc.exitCode === null && first.proc.signalCode === null) await first.close();
    if (second) await second.close();
  }
});
