'use strict';
// A reconnect that reaches a server which lost an event the follower had
// already read.  PostgreSQL can show a commit that a failover then loses:
// on the old primary a commit whose wait for the standby is cut short (a
// shutdown) becomes visible without having been replicated, and the new
// primary never had it.  test/failover/run meets this by chance; here it
// is made on one server: while the follower is locked out, its last event
// is deleted from the log and the row put back as it was before that event
// (with session_replication_role = replica, so that hx_stream's trigger
// does not log the change), as the new primary would have them; then that
// "new primary" writes an event of its own at the same seq, or nothing.
//
// The follower must notice as it reconnects, and resync (reason
// 'diverged') to the row: never go on from the lost event, never take the
// new primary's event at that seq for old news.  An HxStream (LISTEN, one
// connection) and an HxHub over the WAL, and a stream followed by name,
// which has no snapshot to resync from and fails; the plain reconnect of
// reconnect.test.js resyncs nothing, which shows that the check costs no
// resync when nothing was lost.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');
const { HxHub } = require('..');

const DB = 'hx_client_diverged';

let db;
let admin;
before(async () => {
  db = await h.freshDatabase(DB);
  admin = await h.connect('postgres');
  await h.streamTable(db, 'sessions');
  await db.query('SELECT hx_stream_publication()');
});
after(async () => {
  await admin.query(`ALTER DATABASE ${DB} ALLOW_CONNECTIONS true`);
  await admin.end();
  await db.end();
});

const lockOut = (on) => admin.query(`ALTER DATABASE ${DB} ALLOW_CONNECTIONS ${on ? 'false' : 'true'}`);

/** The "failover": the log loses the event at seq, and the row is as it was before it. */
async function loseEvent(stream, seq, key, stateBefore) {
  await db.query('BEGIN');
  try {
    await db.query('SET LOCAL session_replication_role = replica');
    const del = await db.query('DELETE FROM hx_event WHERE stream = $1 AND seq = $2', [stream, seq]);
    assert.equal(del.rowCount, 1);
    await db.query('UPDATE sessions SET state = $1 WHERE session_id = $2', [JSON.stringify(stateBefore), key]);
    await db.query('COMMIT');
  } catch (err) {
    await db.query('ROLLBACK');
    throw err;
  }
}

/** Follow key; write three deltas (seq 2..4); return the states by seq. */
async function writeThree(key, isAt) {
  const states = await writeThreeUnfollowed(key);
  await h.waitFor(() => isAt(4), 'seq 4');
  return states;
}

/**
 * The "failover", while the follower is locked out: its connections
 * (application_name appName) are killed, and once disconnected() holds,
 * the log loses seq 4 of key's stream and the row is put back to
 * states.get(3); with newEvent, the "new primary" then writes its own
 * seq 4.  Returns how many connections were killed.
 */
async function failover({ key, appName, states, disconnected, newEvent }) {
  await lockOut(true);
  try {
    const killed = await h.killBackends(db, appName);
    await h.waitFor(disconnected, 'the disconnect');
    await loseEvent(`sessions:${key}`, 4, key, states.get(3));
    if (newEvent) await h.merge(db, 'sessions', key, [{ op: 'replace', path: '/other', value: 'the new primary' }]);
    return killed;
  } finally {
    await lockOut(false);
  }
}

/**
 * A reconnect that loses nothing (the follower at seq 4): its connections
 * killed while it is locked out, then its check (the log read from seq 4,
 * the event there compared) finds the event it has, and it goes on to seq
 * 5 with no resync.
 */
async function reconnectLosingNothing({ hub, sub, key, appName, resyncs, latest }) {
  await lockOut(true);
  try {
    assert.ok(await h.killBackends(db, appName) >= 1);
    await h.waitFor(() => hub.stats.disconnects >= 1, 'the disconnect');
  } finally {
    await lockOut(false);
  }
  await h.waitFor(() => hub.stats.reconnects >= 1 && sub.stats.pages >= 1, 'the reconnect\'s check');
  const next = await h.merge(db, 'sessions', key, [{ op: 'increment', path: '/n', by: 10 }]);
  await h.waitFor(() => latest().seq === 5, 'seq 5');
  assert.deepStrictEqual(resyncs, []);
  assert.equal(hub.stats.divergences, 0);
  assert.deepStrictEqual(latest().state, next);
}

for (const replaced of [true, false]) {
  const what = replaced ? 'the new primary has another event at its seq' : 'the new primary\'s log ends below its seq';
  test(`HxStream: ${what}: a resync (diverged) to the row`, async () => {
    const key = replaced ? 'd-1' : 'd-2';
    await db.query('INSERT INTO sessions VALUES ($1, \'{"l": [], "n": 0}\')', [key]);
    const stream = h.follow(DB, 'sessions', key);
    await stream.start();
    try {
      const states = await writeThree(key, (s) => stream.seq === s);
      const killed = await failover({
        key, appName: stream.appName, states, disconnected: () => stream.log.disconnects === 1, newEvent: replaced,
      });
      assert.equal(killed, 1);
      const want = replaced ? 4 : 3;
      await h.waitFor(() => stream.log.resyncs.length === 1, 'the resync');
      assert.deepEqual(stream.log.resyncs.map((r) => [r.reason, r.previousSeq, r.seq]), [['diverged', 4, want]]);
      assert.equal(stream.seq, want);
      assert.deepStrictEqual(stream.state, await h.rowState(db, 'sessions', key));
      const resynced = stream.log.events[stream.log.events.length - 1];
      assert.equal(resynced.type, 'STATE_SNAPSHOT');
      assert.equal(resynced.metadata.seq, want);

      // and it goes on from there
      const next = await h.merge(db, 'sessions', key, [{ op: 'increment', path: '/n', by: 10 }]);
      await h.waitFor(() => stream.seq === want + 1, `seq ${want + 1}`);
      assert.deepStrictEqual(stream.state, next);
      assert.equal(stream.log.resyncs.length, 1);
    } finally {
      await stream.stop();
    }
  });
}

test('HxHub over the WAL: the new primary has another event at its seq: a resync (diverged) to the row', async () => {
  const key = 'd-3';
  await db.query('INSERT INTO sessions VALUES ($1, \'{"l": [], "n": 0}\')', [key]);
  const appName = 'hx-diverged-hub';
  const hub = new HxHub({ pg: { database: DB, application_name: appName }, transport: 'wal', pollInterval: 0, reconnect: { min: 20, max: 200 } });
  hub.on('error', () => {});
  const resyncs = [];
  let last = null;
  const sub = hub.follow({ table: 'sessions', key });
  sub.on('event', (event, state) => { last = { seq: event.metadata.seq, state }; });
  sub.on('resync', (r) => resyncs.push(r));
  sub.on('error', () => {});
  await hub.start();
  try {
    await sub.ready;
    const states = await writeThree(key, (s) => last && last.seq === s);
    const killed = await failover({ key, appName, states, disconnected: () => hub.stats.disconnects >= 1, newEvent: true });
    assert.ok(killed >= 1);
    await h.waitFor(() => resyncs.length === 1, 'the resync');
    assert.deepEqual(resyncs.map((r) => [r.reason, r.previousSeq, r.seq]), [['diverged', 4, 4]]);
    assert.equal(hub.stats.divergences, 1);
    await h.waitFor(() => last.seq === 4 && resyncs.length === 1, 'seq 4');
    assert.deepStrictEqual(last.state, await h.rowState(db, 'sessions', key));
    const next = await h.merge(db, 'sessions', key, [{ op: 'increment', path: '/n', by: 10 }]);
    await h.waitFor(() => last.seq === 5, 'seq 5');
    assert.deepStrictEqual(last.state, next);
  } finally {
    await hub.stop();
  }
});

test('HxHub over the WAL: a listener that changes the events it is given; a reconnect finds the last one unchanged: no resync', async () => {
  // the mark a reconnect compares is the event's as it was accepted, not
  // the listener's object as it left it
  const key = 'd-5';
  await db.query('INSERT INTO sessions VALUES ($1, \'{"l": [], "n": 0}\')', [key]);
  const appName = 'hx-diverged-mutating';
  const hub = new HxHub({ pg: { database: DB, application_name: appName }, transport: 'wal', pollInterval: 0, reconnect: { min: 20, max: 200 } });
  hub.on('error', () => {});
  const resyncs = [];
  let last = null;
  const sub = hub.follow({ table: 'sessions', key });
  sub.on('event', (event, state) => {
    last = { seq: event.metadata.seq, state };
    event.type = 'CHANGED';
    event.timestamp = 0;
  });
  sub.on('resync', (r) => resyncs.push(r));
  sub.on('error', () => {});
  await hub.start();
  try {
    await sub.ready;
    await writeThree(key, (s) => last && last.seq === s);
    await reconnectLosingNothing({ hub, sub, key, appName, resyncs, latest: () => last });
  } finally {
    await hub.stop();
  }
});

test('HxHub, a stream followed by name (no snapshot to resync from): it fails with HX_DIVERGED', async () => {
  const key = 'd-4';
  await db.query('INSERT INTO sessions VALUES ($1, \'{"l": [], "n": 0}\')', [key]);
  const appName = 'hx-diverged-by-name';
  const hub = new HxHub({ pg: { database: DB, application_name: appName }, transport: 'listen', pollInterval: 0, reconnect: { min: 20, max: 200 } });
  hub.on('error', () => {});
  const errors = [];
  let last = null;
  const sub = hub.follow({ stream: `sessions:${key}` });
  sub.on('event', (event) => { last = event.metadata.seq; });
  sub.on('error', (err) => errors.push(err));
  await hub.start();
  try {
    await sub.ready;
    const states = await writeThree(key, (s) => last === s);
    const killed = await failover({ key, appName, states, disconnected: () => hub.stats.disconnects >= 1, newEvent: false });
    assert.ok(killed >= 1);
    await h.waitFor(() => sub.stopped, 'the subscription to fail');
    const failed = errors.find((e) => e.code === 'HX_DIVERGED');
    assert.ok(failed, `an HX_DIVERGED error (${errors.map((e) => e.code)})`);
    assert.match(failed.message, /no longer has event 4 of sessions:d-4/);
    assert.equal(last, 4);
  } finally {
    await hub.stop();
  }
});

/** Write three deltas of key (seq 2..4); return the states by seq. */
async function writeThreeUnfollowed(key) {
  const states = new Map();
  for (let i = 1; i <= 3; i++) {
    const state = await h.merge(db, 'sessions', key, [{ op: 'append', path: '/l', items: [`${key}-${i}`] }, { op: 'increment', path: '/n', by: 1 }]);
    states.set(await h.lastSeq(db, `sessions:${key}`), state);
  }
  assert.deepEqual([...states.keys()], [2, 3, 4]);
  return states;
}

// A follower whose position comes from a snapshot (it has taken no event
// since) has no event of its own to compare after a failover: the snapshot
// read gives it the mark of the event at its seq, so that a snapshot that
// showed a commit the failover lost is caught as an event would be.
for (const [transport, replaced, key] of [['wal', true, 'd-6'], ['listen', true, 'd-7'], ['wal', false, 'd-8']]) {
  const what = replaced ? 'another event at its seq' : 'a log that ends below its seq';
  test(`HxHub over ${transport}, positioned by a snapshot: the new primary has ${what}: a resync (diverged) to the row`, async () => {
    await db.query('INSERT INTO sessions VALUES ($1, \'{"l": [], "n": 0}\')', [key]);
    const states = await writeThreeUnfollowed(key);
    const appName = `hx-diverged-snap-${key}`;
    const hub = new HxHub({ pg: { database: DB, application_name: appName }, transport, pollInterval: 0, reconnect: { min: 20, max: 200 } });
    hub.on('error', () => {});
    const resyncs = [];
    const events = [];
    let last = null;
    const sub = hub.follow({ table: 'sessions', key });
    sub.on('event', (event, state) => {
      events.push(event);
      last = { seq: event.metadata.seq, state };
    });
    sub.on('resync', (r) => resyncs.push(r));
    sub.on('error', () => {});
    await hub.start();
    try {
      await sub.ready;
      assert.deepEqual(events.map((e) => [e.type, e.metadata.seq, e.metadata.synthetic]), [['STATE_SNAPSHOT', 4, true]]);
      assert.deepStrictEqual(last.state, states.get(4));
      const killed = await failover({ key, appName, states, disconnected: () => hub.stats.disconnects >= 1, newEvent: replaced });
      assert.ok(killed >= 1);
      const want = replaced ? 4 : 3;
      await h.waitFor(() => resyncs.length === 1, 'the resync');
      assert.deepEqual(resyncs.map((r) => [r.reason, r.previousSeq, r.seq]), [['diverged', 4, want]]);
      assert.equal(hub.stats.divergences, 1);
      await h.waitFor(() => last.seq === want && events.length === 2, `the resync's snapshot at seq ${want}`);
      assert.deepStrictEqual(last.state, await h.rowState(db, 'sessions', key));
      const next = await h.merge(db, 'sessions', key, [{ op: 'increment', path: '/n', by: 10 }]);
      await h.waitFor(() => last.seq === want + 1, `seq ${want + 1}`);
      assert.deepStrictEqual(last.state, next);
      assert.equal(resyncs.length, 1);
    } finally {
      await hub.stop();
    }
  });
}

test('HxHub, positioned by a snapshot, a reconnect that lost nothing: no resync', async () => {
  const key = 'd-9';
  await db.query('INSERT INTO sessions VALUES ($1, \'{"l": [], "n": 0}\')', [key]);
  await writeThreeUnfollowed(key);
  const appName = 'hx-diverged-snap-same';
  const hub = new HxHub({ pg: { database: DB, application_name: appName }, transport: 'wal', pollInterval: 0, reconnect: { min: 20, max: 200 } });
  hub.on('error', () => {});
  const resyncs = [];
  let last = null;
  const sub = hub.follow({ table: 'sessions', key });
  sub.on('event', (event, state) => { last = { seq: event.metadata.seq, state }; });
  sub.on('resync', (r) => resyncs.push(r));
  sub.on('error', () => {});
  await hub.start();
  try {
    await sub.ready;
    assert.equal(last.seq, 4);
    await reconnectLosingNothing({ hub, sub, key, appName, resyncs, latest: () => last });
  } finally {
    await hub.stop();
  }
});
