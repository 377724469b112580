'use strict';
// When the log no longer holds the events a client needs (hx_stream_trim,
// or an administrator's DELETE), the client resyncs from the snapshot
// instead of skipping them; and hx_stream_trim itself must leave each
// stream's log a contiguous run of seqs ending at the last one.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');

const DB = 'hx_client_trim';

let db;
let admin; // connected to database postgres: ALTER DATABASE cannot lock out its own connection's database
before(async () => {
  db = await h.freshDatabase(DB);
  admin = await h.connect('postgres');
});
after(async () => {
  await admin.query(`ALTER DATABASE ${DB} ALLOW_CONNECTIONS true`);
  await admin.end();
  await db.end();
});

test('resync when hx_stream_trim removed the events after the client\'s seq', async () => {
  await h.streamTable(db, 'a', 'payload=none');
  await db.query(`INSERT INTO a VALUES ('a-1', '{"n": 0}')`);
  const stream = h.follow(DB, 'a', 'a-1'); // no polling: nothing arrives until we say so
  await stream.start();
  try {
    for (let i = 0; i < 6; i++) await h.merge(db, 'a', 'a-1', [{ op: 'increment', path: '/n', by: 1 }]);
    const trimmed = await db.query(`SELECT hx_stream_trim('0 seconds', 'a:a-1') AS n`);
    assert.equal(Number(trimmed.rows[0].n), 6, 'all but the last event trimmed');
    // one notified write: seq 8 is ahead, the log starts at 7, not at 2
    await h.setTrigger(db, 'a', 'payload=auto');
    await h.merge(db, 'a', 'a-1', [{ op: 'increment', path: '/n', by: 10 }]);
    await h.waitFor(() => stream.seq === 8, 'seq 8');

    assert.equal(stream.log.resyncs.length, 1);
    assert.equal(stream.log.resyncs[0].previousSeq, 1);
    assert.deepStrictEqual(stream.state, { n: 16 });
    assert.deepStrictEqual(stream.state, await h.rowState(db, 'a', 'a-1'));
    // the app saw: snapshot at 1, a resync snapshot, then what followed it
    const [first, resync, ...rest] = stream.log.events;
    assert.equal(first.metadata.seq, 1);
    assert.equal(resync.type, 'STATE_SNAPSHOT');
    assert.equal(resync.metadata.synthetic, true);
    assert.ok(resync.metadata.seq >= 7, `resynced at ${resync.metadata.seq}`);
    assert.deepStrictEqual(rest.map((e) => e.metadata.seq), h.range(resync.metadata.seq + 1, 8));
  } finally {
    await stream.stop();
  }
});

test('a reconnect that finds the log trimmed resyncs', async () => {
  await h.streamTable(db, 'b');
  await db.query(`INSERT INTO b VALUES ('b-1', '{"l": []}')`);
  const stream = h.follow(DB, 'b', 'b-1');
  await stream.start();
  try {
    await h.merge(db, 'b', 'b-1', [{ op: 'append', path: '/l', items: [1] }]);
    await h.waitFor(() => stream.seq === 2, 'seq 2');
    // keep the client out while the log is written and trimmed
    await admin.query(`ALTER DATABASE ${DB} ALLOW_CONNECTIONS false`);
    assert.equal(await h.killBackends(db, stream.appName), 1);
    await h.waitFor(() => stream.log.disconnects === 1, 'the disconnect');
    for (let i = 2; i <= 6; i++) await h.merge(db, 'b', 'b-1', [{ op: 'append', path: '/l', items: [i] }]);
    await db.query(`SELECT hx_stream_trim('0 seconds')`);
    await admin.query(`ALTER DATABASE ${DB} ALLOW_CONNECTIONS true`);
    await h.waitFor(() => stream.log.reconnects === 1 && stream.seq === 7, 'the reconnect');

    assert.equal(stream.log.resyncs.length, 1);
    assert.deepStrictEqual(stream.log.resyncs[0], { seq: 7, previousSeq: 2, state: { l: [1, 2, 3, 4, 5, 6] }, reason: 'trimmed' });
    assert.deepStrictEqual(h.seqs(stream), [1, 2, 7]);
    assert.equal(stream.log.events[2].metadata.synthetic, true);
    assert.deepStrictEqual(stream.state, { l: [1, 2, 3, 4, 5, 6] });
    // it keeps following
    await h.merge(db, 'b', 'b-1', [{ op: 'append', path: '/l', items: [7] }]);
    await h.waitFor(() => stream.seq === 8, 'seq 8');
    assert.deepStrictEqual(stream.state, { l: [1, 2, 3, 4, 5, 6, 7] });
  } finally {
    await admin.query(`ALTER DATABASE ${DB} ALLOW_CONNECTIONS true`);
    await stream.stop();
  }
});

test('a hole in the middle of the log is never skipped', async () => {
  await h.streamTable(db, 'c', 'payload=none');
  await db.query(`INSERT INTO c VALUES ('c-1', '{"l": []}')`);
  const stream = h.follow(DB, 'c', 'c-1', { pollInterval: 20 });
  await stream.start();
  try {
    // write 2..6 in one transaction, so that the client reads them together
    await db.query('BEGIN');
    for (let i = 2; i <= 6; i++) await h.merge(db, 'c', 'c-1', [{ op: 'append', path: '/l', items: [i] }]);
    await db.query(`DELETE FROM hx_event WHERE stream = 'c:c-1' AND seq = 4`);
    await db.query('COMMIT');
    await h.waitFor(() => stream.seq === 6, 'seq 6');
    assert.equal(stream.log.resyncs.length, 1, 'the hole at seq 4 made the client resync');
    assert.deepStrictEqual(h.seqs(stream), [1, 2, 3, 6]);
    assert.deepStrictEqual(stream.state, { l: [2, 3, 4, 5, 6] });
    // every state it handed out is a state the row had
    assert.deepStrictEqual(stream.log.states, [{ l: [] }, { l: [2] }, { l: [2, 3] }, { l: [2, 3, 4, 5, 6] }]);
  } finally {
    await stream.stop();
  }
});

// Server side: hx_event.created_at is now(), the time the writing
// transaction STARTED, while seq follows commit order (the row lock).  A
// transaction that starts first but commits second gets the higher seq and
// the older created_at, so trimming by created_at can remove seq n + 1 and
// keep seq n: a hole, where the protocol promises that the log "starts
// after" a trimmed client's seq.  (The client above resyncs on holes.)
test('hx_stream_trim leaves each stream a contiguous log', async () => {
  await h.streamTable(db, 'd');
  await db.query(`INSERT INTO d VALUES ('d-1', '{"n": 0}')`); // seq 1
  const early = await h.connect(DB);
  try {
    await early.query('BEGIN');
    await early.query('SELECT 1');        // its now() is fixed here
    await h.sleep(5);                     // so the next now() differs
    await h.merge(db, 'd', 'd-1', [{ op: 'increment', path: '/n', by: 1 }]);    // seq 2
    await h.merge(early, 'd', 'd-1', [{ op: 'increment', path: '/n', by: 1 }]); // seq 3, older created_at
    await early.query('COMMIT');
    await h.merge(db, 'd', 'd-1', [{ op: 'increment', path: '/n', by: 1 }]);    // seq 4
    // trim what is older than seq 2's created_at
    await db.query(`SELECT hx_stream_trim(now() - (SELECT created_at FROM hx_event
                                                   WHERE stream = 'd:d-1' AND seq = 2), 'd:d-1')`);
    const left = (await h.loggedEvents(db, 'd:d-1')).map((r) => r.seq);
    assert.equal(left[left.length - 1], 4, 'the last event is kept');
    assert.deepStrictEqual(left, h.range(left[0], 4), `the log after the trim: seqs ${left.join(', ')}`);
  } finally {
    await early.end();
  }
});
