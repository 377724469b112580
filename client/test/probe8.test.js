'use strict';
// probe8: what the hub does with a caller's read that leaves a transaction
// open on its reader connection, and with a subscription whose `after` is
// beyond the stream's head.  Each test asserts what a user depends on; the
// first three and the `after` ones fail on the code before the fixes.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');
const { HxHub } = require('..');

const DB = 'hx_client_probe8';
let db;

before(async () => {
  db = await h.freshDatabase(DB);
  await h.streamTable(db, 'sessions');
  await db.query('CREATE TABLE things (n int)');
});
after(async () => { await db.end(); });

const pgc = (app) => ({ database: DB, application_name: app });

/** The hub's connections (reader and LISTEN) are idle: no transaction open, no snapshot held. */
async function assertIdle(app, what) {
  const { rows } = await db.query(
    "SELECT state, backend_xmin IS NOT NULL AS xmin FROM pg_stat_activity WHERE application_name = $1 AND backend_type = 'client backend'", [app]);
  assert.equal(rows.length, 2, 'the reader and the LISTEN connection');
  assert.deepEqual(rows, [{ state: 'idle', xmin: false }, { state: 'idle', xmin: false }], what);
}

const count = (hub) => hub.read(async (query) => (await query('SELECT count(*)::int AS n FROM things'))[0].n);

// -------------------------------------------------------------------------
// HxHub.read(fn): a transaction fn leaves open
// -------------------------------------------------------------------------

test('HxHub.read: a fn that returns inside a transaction is refused (HX_READ_OPEN_TRANSACTION), the transaction rolled back; later reads see new commits', async () => {
  const app = 'p8-read-return';
  const hub = new HxHub({ pg: pgc(app), transport: 'listen', pollInterval: 0 });
  let errors = 0;
  hub.on('error', () => { errors++; });
  await hub.start();
  try {
    const before = await count(hub);
    await assert.rejects(hub.read(async (query) => {
      await query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await query('SELECT count(*) FROM things'); // the snapshot is taken here
      await query('INSERT INTO things VALUES (-1)');  // undone: the transaction is rolled back
      return 'done';
    }), (err) => err.code === 'HX_READ_OPEN_TRANSACTION' && /transaction/.test(err.message));
    await assertIdle(app, 'the reader is idle: no transaction, no snapshot held');
    await db.query('INSERT INTO things VALUES (1)');
    assert.equal(await count(hub), before + 1, 'a later read sees the commit (and not the rolled-back insert)');
    // the hub's own reads too: a snapshot read after the commit sees it
    await db.query("INSERT INTO sessions VALUES ('r1', '{\"a\": 1}')");
    const sub = hub.follow({ table: 'sessions', key: 'r1' });
    const first = new Promise((resolve) => sub.once('event', (e) => resolve(e)));
    await sub.ready;
    assert.deepEqual((await first).snapshot, { a: 1 });
    sub.stop();
    assert.equal(hub.stats.disconnects, 0, 'no reconnect');
    assert.equal(errors, 0);
  } finally {
    await hub.stop();
  }
});

test('HxHub.read: a fn that throws inside a transaction (aborted or not) rejects with its own error; the transaction is rolled back, the connection kept', async () => {
  const app = 'p8-read-throw';
  const hub = new HxHub({ pg: pgc(app), transport: 'listen', pollInterval: 0 });
  hub.on('error', () => {});
  await hub.start();
  try {
    // a statement error inside the transaction: it is aborted (25P02 for anything after)
    await assert.rejects(hub.read(async (query) => {
      await query('BEGIN');
      await query('SELECT 1/0');
    }), (err) => err.code === '22012');
    assert.deepEqual(await hub.read((query) => query('SELECT 1 AS one')), [{ one: 1 }], 'the next read runs (not 25P02)');
    // fn's own error, not the server's, with a transaction open
    const mine = new Error('not found');
    await assert.rejects(hub.read(async (query) => {
      await query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await query('SELECT 1');
      throw mine;
    }), (err) => err === mine);
    await assertIdle(app);
    const n = await count(hub);
    await db.query('INSERT INTO things VALUES (2)');
    assert.equal(await count(hub), n + 1, 'a later read sees the commit');
    assert.equal(hub.stats.disconnects, 0, "fn's own error is not a lost connection: no reconnect");
    // a transaction fn opens and ends itself is fn's business
    assert.deepEqual(await hub.read(async (query) => {
      await query('BEGIN');
      const rows = await query('SELECT 2 AS two');
      await query('COMMIT');
      return rows;
    }), [{ two: 2 }]);
  } finally {
    await hub.stop();
  }
});

test('HxHub.read: a query fn starts and does not await, or calls after it settled, cannot leak a transaction', async () => {
  const app = 'p8-read-late';
  const hub = new HxHub({ pg: pgc(app), transport: 'listen', pollInterval: 0 });
  hub.on('error', () => {});
  await hub.start();
  try {
    // BEGIN sent and not awaited: it runs after fn returned
    await assert.rejects(hub.read(async (query) => {
      query('BEGIN ISOLATION LEVEL REPEATABLE READ').catch(() => {});
      query('SELECT 1').catch(() => {});
      return 1;
    }), (err) => err.code === 'HX_READ_OPEN_TRANSACTION');
    await assertIdle(app);
    // a query kept for later: refused once fn has settled
    let keep;
    await hub.read(async (query) => { keep = query; });
    await assert.rejects(keep('BEGIN'), (err) => err.code === 'HX_READ_ENDED');
    const n = await count(hub);
    await db.query('INSERT INTO things VALUES (3)');
    assert.equal(await count(hub), n + 1);
    await assertIdle(app);
  } finally {
    await hub.stop();
  }
});

test('HxHub.read with sharedConnection: a transaction left open costs the connection (a LISTEN sent in it would be undone), and following goes on', async () => {
  const app = 'p8-read-shared';
  const hub = new HxHub({ pg: pgc(app), transport: 'listen', sharedConnection: true, pollInterval: 0, reconnect: { min: 20, max: 200 } });
  hub.on('error', () => {});
  await hub.start();
  try {
    await db.query("INSERT INTO sessions VALUES ('sh1', '{\"n\": 0}')");
    await assert.rejects(hub.read(async (query) => { await query('BEGIN'); }), (err) => err.code === 'HX_READ_OPEN_TRANSACTION');
    const sub = hub.follow({ table: 'sessions', key: 'sh1' });
    const seen = [];
    sub.on('event', (e) => seen.push(e));
    await sub.ready;
    await h.merge(db, 'sessions', 'sh1', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => seen.some((e) => e.type === 'STATE_DELTA'), 'the write, by LISTEN (polling is off)');
    assert.equal(hub.stats.disconnects, 1, 'the shared connection was replaced once');
    sub.stop();
  } finally {
    await hub.stop();
  }
});

// -------------------------------------------------------------------------
// follow() with `after` beyond the stream's head
// -------------------------------------------------------------------------

/** A row of sessions with n events in its stream (its insert, then n - 1 writes). */
async function rowWith(key, n) {
  await db.query('INSERT INTO sessions VALUES ($1, \'{"n": 0}\')', [key]);
  for (let i = 1; i < n; i++) await h.merge(db, 'sessions', key, [{ op: 'increment', path: '/n', by: 1 }]);
  assert.equal(await h.lastSeq(db, `sessions:${key}`), n);
}

function record(sub) {
  const log = { events: [], resyncs: [], errors: [] };
  sub.on('event', (e, state) => log.events.push({ seq: e.metadata.seq, type: e.type, snapshot: e.snapshot, state }));
  sub.on('resync', (r) => log.resyncs.push(r));
  sub.on('error', (err) => log.errors.push(err));
  return log;
}

const quick = { min: 20, max: 200 }; // the grace before a cursor beyond the head is judged: about a second

test('follow({table, key}, {after}) beyond the head: a resync (reason ahead) to the snapshot at the head, then the events after it', async () => {
  await rowWith('a1', 5);
  const hub = new HxHub({ pg: pgc('p8-ahead-table'), transport: 'listen', reconnect: quick });
  hub.on('error', () => {});
  await hub.start();
  try {
    const sub = hub.follow({ table: 'sessions', key: 'a1' }, { after: 1000 });
    const log = record(sub);
    await sub.ready;
    assert.deepEqual(log.resyncs.map((r) => [r.reason, r.previousSeq, r.seq]), [['ahead', 1000, 5]]);
    assert.deepEqual(log.events.map((e) => [e.seq, e.type]), [[5, 'STATE_SNAPSHOT']]);
    assert.deepEqual(log.events[0].snapshot, { n: 4 }, 'the snapshot event carries the state');
    assert.equal(sub.seq, 5);
    await h.merge(db, 'sessions', 'a1', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => log.events.length === 2, 'seq 6');
    assert.deepEqual(log.events.map((e) => e.seq), [5, 6]);
    // with state: true and a base, the base gives way to the snapshot's state
    const based = hub.follow({ table: 'sessions', key: 'a1' }, { after: 99, base: { wrong: true }, state: true });
    const blog = record(based);
    await based.ready;
    assert.deepEqual(blog.resyncs.map((r) => r.reason), ['ahead']);
    assert.deepEqual(based.state, { n: 5 });
  } finally {
    await hub.stop();
  }
});

test('follow({stream}, {after}) beyond the head: the subscription fails with HX_AFTER_BEYOND_HEAD (no snapshot to resync from)', async () => {
  await rowWith('a2', 3);
  const hub = new HxHub({ pg: pgc('p8-ahead-stream'), transport: 'listen', reconnect: quick });
  hub.on('error', () => {});
  await hub.start();
  try {
    const sub = hub.follow({ stream: 'sessions:a2' }, { after: 4 });
    const log = record(sub);
    await assert.rejects(sub.ready, (err) => err.code === 'HX_AFTER_BEYOND_HEAD' && /seq 4/.test(err.message) && /sessions:a2/.test(err.message));
    assert.equal(log.errors.length, 1);
    assert.equal(log.errors[0].code, 'HX_AFTER_BEYOND_HEAD');
    assert.equal(sub.stopped, true);
    // a stream that has no event at all
    const none = hub.follow({ stream: 'sessions:nothing-here' }, { after: 1 });
    await assert.rejects(none.ready, (err) => err.code === 'HX_AFTER_BEYOND_HEAD');
  } finally {
    await hub.stop();
  }
});

test('follow() with after at the head, below it, or 0: no resync, nothing refused', async () => {
  await rowWith('a3', 4);
  const hub = new HxHub({ pg: pgc('p8-ahead-normal'), transport: 'listen', reconnect: quick });
  hub.on('error', () => {});
  await hub.start();
  try {
    const subs = [4, 2, 0].map((a) => hub.follow({ table: 'sessions', key: 'a3' }, { after: a }));
    const logs = subs.map(record);
    const byStream = hub.follow({ stream: 'sessions:a3' }, { after: 4 });
    const slog = record(byStream);
    await Promise.all([...subs, byStream].map((s) => s.ready));
    await h.merge(db, 'sessions', 'a3', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => [...logs, slog].every((l) => l.events.some((e) => e.seq === 5)), 'seq 5 everywhere');
    assert.deepEqual(logs.map((l) => l.events.map((e) => e.seq)), [[5], [3, 4, 5], [1, 2, 3, 4, 5]]);
    assert.deepEqual(slog.events.map((e) => e.seq), [5]);
    assert.deepEqual([...logs, slog].map((l) => l.resyncs.length + l.errors.length), [0, 0, 0, 0]);
  } finally {
    await hub.stop();
  }
});

test('follow() with after ahead of what the reader sees only for a while (a commit not yet visible, a lagging reader): it waits and goes on, no resync', async () => {
  await rowWith('a4', 2);
  // a grace of several seconds, and the two commits the cursor names come within it
  const hub = new HxHub({ pg: pgc('p8-ahead-late'), transport: 'listen', reconnect: { min: 500, max: 5000 } });
  hub.on('error', () => {});
  await hub.start();
  try {
    const sub = hub.follow({ table: 'sessions', key: 'a4' }, { after: 4 });
    const log = record(sub);
    let ready = false;
    sub.ready.then(() => { ready = true; });
    await h.sleep(50);
    assert.equal(ready, false, 'not ready while the log ends below its cursor');
    await h.merge(db, 'sessions', 'a4', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.merge(db, 'sessions', 'a4', [{ op: 'increment', path: '/n', by: 1 }]);
    await sub.ready;
    await h.merge(db, 'sessions', 'a4', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => log.events.length === 1, 'seq 5');
    assert.deepEqual(log.events.map((e) => e.seq), [5]);
    assert.deepEqual(log.resyncs, []);
  } finally {
    await hub.stop();
  }
});

test('abuse: follow()\'s after is a seq (a safe integer >= 0: a number, a bigint or a string of decimal digits), nothing JavaScript would read as another number', () => {
  const { HxShardedHub } = require('..');
  const hub = new HxHub({ pg: pgc('p8-after-types') });
  const sharded = new HxShardedHub({ router: { database: DB } });
  try {
    for (const [v, seq] of [[0, 0], [7, 7], ['7', 7], ['007', 7], [7n, 7], [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER]]) {
      const s = hub.follow({ stream: 'x' }, { after: v });
      assert.equal(s.seq, seq, String(v));
      s.stop();
      const t = sharded.follow({ table: 'sessions', key: 'k' }, { after: v });
      assert.equal(t.seq, seq, String(v));
      t.stop();
    }
    // before: '' and [] were 0 (a replay from the start), true was 1, ' 7 ', '0x10' and '1e3' were 7, 16 and 1000, a Symbol threw from Number()
    for (const v of [-1, 1.5, NaN, Infinity, 2 ** 53, '', ' 7 ', '0x10', '1e3', '-1', '+1', '99999999999999999', true, false, [], [5], {}, -1n, 2n ** 60n, Symbol('s'), () => 1]) {
      assert.throws(() => hub.follow({ stream: 'x' }, { after: v }), (err) => err instanceof TypeError && /options\.after must be a seq/.test(err.message), String(typeof v === 'symbol' ? 'a symbol' : v));
      assert.throws(() => sharded.follow({ table: 'sessions', key: 'k' }, { after: v }), (err) => err instanceof TypeError && /options\.after must be a seq/.test(err.message));
    }
  } finally {
    hub.stop();
    sharded.stop();
  }
});

test('HxHub.read: what fn sets in the session (a statement_timeout, a role, a search_path) is reset after it; the hub\'s reads go on', async () => {
  const app = 'p8-read-set';
  await db.query('DO $$ BEGIN CREATE ROLE p8_nobody; EXCEPTION WHEN duplicate_object THEN NULL; END $$');
  const hub = new HxHub({ pg: pgc(app), transport: 'listen', pollInterval: 0, reconnect: { min: 20, max: 200 } });
  const errors = [];
  hub.on('error', (err) => errors.push(err));
  await hub.start();
  try {
    await hub.read(async (query) => {
      await query("SET statement_timeout = '1ms'");
      await query('SET search_path = pg_catalog');
      await query("SELECT pg_catalog.set_config('lock_timeout', '1ms', false)");
    });
    await hub.read((query) => query('SET ROLE p8_nobody'));
    const [s] = await hub.read((query) => query(`SELECT current_setting('statement_timeout') AS st, current_setting('lock_timeout') AS lt,
                                                         current_user AS who, current_setting('application_name') AS app`));
    assert.deepEqual(s, { st: '0', lt: '0', who: 'postgres', app }, 'the session as it was when the hub connected');
    await db.query("INSERT INTO sessions VALUES ('set1', '{\"k\": 1}')");
    const sub = hub.follow({ table: 'sessions', key: 'set1' });
    await sub.ready; // with statement_timeout = 1ms left on the reader, every snapshot read was cancelled (57014), forever
    assert.deepEqual(errors.map((e) => e.code), []);
    sub.stop();
  } finally {
    await hub.stop();
  }
});

test('abuse: HxHub.read with arguments pg refuses (no text, values not an array), a non-Error thrown, a value that is no promise: each its own, no reconnect', async () => {
  const hub = new HxHub({ pg: pgc('p8-read-args'), transport: 'listen', pollInterval: 0 });
  hub.on('error', () => {});
  await hub.start();
  try {
    await assert.rejects(hub.read((query) => query(null)), /null or undefined query/);
    await assert.rejects(hub.read((query) => query('SELECT $1::int', 'not an array')), /must be an array/);
    await assert.rejects(hub.read(() => Promise.reject('a string')), (err) => err === 'a string');
    await assert.rejects(hub.read(() => { throw new RangeError('sync'); }), RangeError);
    assert.equal(await hub.read(() => 42), 42);
    assert.deepEqual(await hub.read((query) => query({ text: 'SELECT 1 AS x' })), [{ x: 1 }]);
    assert.throws(() => hub.read(null), TypeError);
    assert.equal(hub.stats.disconnects, 0, 'none of them cost the hub its connection');
  } finally {
    await hub.stop();
  }
});
