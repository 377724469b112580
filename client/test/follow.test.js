'use strict';
// HxStream follows one row: the snapshot first (a synthetic STATE_SNAPSHOT),
// then every change as the AG-UI event the trigger logged, exactly once and
// in seq order, with the state after it equal to the row's state at that
// seq; the stream's end (DELETE, key change) and a later re-insert.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');

const DB = 'hx_client_follow';

let db;
before(async () => {
  db = await h.freshDatabase(DB);
  await h.streamTable(db, 'sessions', 'payload=auto');
});
after(async () => { await db.end(); });

test('initial snapshot, then every delta in seq order with the right state', async () => {
  await db.query(`INSERT INTO sessions VALUES ('s-1', '{"notes": [], "count": 0}')`);
  await h.merge(db, 'sessions', 's-1', [{ op: 'append', path: '/notes', items: ['a'] }]);
  await h.merge(db, 'sessions', 's-1', [{ op: 'increment', path: '/count', by: 2 }]);
  const startState = await h.rowState(db, 'sessions', 's-1');

  const stream = h.follow(DB, 'sessions', 's-1');
  await stream.start();
  try {
    assert.equal(stream.stream, 'sessions:s-1');
    assert.equal(stream.seq, 3);
    assert.deepStrictEqual(stream.state, startState);
    // the snapshot is handed out as a STATE_SNAPSHOT marked synthetic
    assert.equal(stream.log.events.length, 1);
    const first = stream.log.events[0];
    assert.equal(first.type, 'STATE_SNAPSHOT');
    assert.deepStrictEqual(first.metadata, { stream: 'sessions:s-1', seq: 3, synthetic: true });
    assert.deepStrictEqual(first.snapshot, startState);
    assert.ok(Number.isInteger(first.timestamp));

    // the truth: the row's state after each write, by seq
    const truth = new Map();
    const writes = [
      [{ op: 'append', path: '/notes', items: ['b', { n: 1 }] }],
      [{ op: 'increment', path: '/count', by: 1 }],
      [{ op: 'replace', path: '/title', value: 'x' }],
      [{ op: 'merge', path: '/cfg', value: { a: 1, b: { c: [1, 2] } } }],
      [{ op: 'merge', path: '/cfg', value: { a: null, b: { d: true } } }],
      [{ op: 'replace', path: '/title', value: 'x' }], // no change: no event
      [{ op: 'replace', path: '/title', value: null }],
      [{ op: 'append', path: '/notes', items: ['~/"\\ü'] }, { op: 'increment', path: '/count', by: -3.5 }],
    ];
    for (const w of writes) {
      const state = await h.merge(db, 'sessions', 's-1', w);
      truth.set(await h.lastSeq(db, 'sessions:s-1'), state);
    }
    const last = await h.lastSeq(db, 'sessions:s-1');
    assert.equal(last, 3 + writes.length - 1, 'the no-op write logged no event');
    await h.waitFor(() => stream.seq === last, `seq ${last}`);

    assert.deepStrictEqual(h.seqs(stream), h.range(3, last));
    // every event after the snapshot is the logged event itself
    const logged = (await h.loggedEvents(db, 'sessions:s-1')).filter((r) => r.seq > 3);
    assert.deepStrictEqual(stream.log.events.slice(1), logged.map((r) => r.event));
    for (let i = 1; i < stream.log.events.length; i++) {
      const seq = stream.log.events[i].metadata.seq;
      assert.deepStrictEqual(stream.log.states[i], truth.get(seq), `state at seq ${seq}`);
    }
    assert.deepStrictEqual(stream.state, await h.rowState(db, 'sessions', 's-1'));
    assert.equal(stream.ended, false);
    assert.equal(stream.log.resyncs.length, 0);
    assert.equal(stream.log.errors.length, 0);
    // every event was announced by NOTIFY, and read from the log (a
    // notification is a hint, never content)
    assert.equal(stream.stats.notifications, last - 3);
    assert.ok(stream.stats.pages >= 1);
  } finally {
    await stream.stop();
  }
});

test('states handed out earlier are never changed afterwards', async () => {
  await db.query(`INSERT INTO sessions VALUES ('s-2', '{"list": [1], "o": {"k": 1}}')`);
  const stream = h.follow(DB, 'sessions', 's-2');
  await stream.start();
  try {
    const held = stream.state;
    const copy = structuredClone(held);
    await h.merge(db, 'sessions', 's-2', [{ op: 'append', path: '/list', items: [2] },
      { op: 'merge', path: '/o', value: { k: 2 } }]);
    await h.waitFor(() => stream.seq === 2, 'seq 2');
    assert.deepStrictEqual(held, copy);
    assert.deepStrictEqual(stream.state, { list: [1, 2], o: { k: 2 } });
  } finally {
    await stream.stop();
  }
});

test('a NULL state is null, and deltas from and to it apply', async () => {
  await db.query(`INSERT INTO sessions VALUES ('s-3', NULL)`);
  const stream = h.follow(DB, 'sessions', 's-3');
  await stream.start();
  try {
    assert.equal(stream.seq, 1);
    assert.equal(stream.state, null);
    await db.query(`UPDATE sessions SET state = '{"a": [1]}' WHERE session_id = 's-3'`);
    await db.query(`UPDATE sessions SET state = NULL WHERE session_id = 's-3'`);
    await db.query(`UPDATE sessions SET state = '[1, {"b": 2}]' WHERE session_id = 's-3'`);
    await h.waitFor(() => stream.seq === 4, 'seq 4');
    assert.deepStrictEqual(stream.log.states, [null, { a: [1] }, null, [1, { b: 2 }]]);
    assert.deepStrictEqual(h.seqs(stream), [1, 2, 3, 4]);
  } finally {
    await stream.stop();
  }
});

test('the stream ends on DELETE, and a re-insert of the key starts it again', async () => {
  await db.query(`INSERT INTO sessions VALUES ('s-4', '{"v": 1}')`);
  const stream = h.follow(DB, 'sessions', 's-4');
  await stream.start();
  try {
    await db.query(`DELETE FROM sessions WHERE session_id = 's-4'`);
    await h.waitFor(() => stream.seq === 2, 'the end event');
    assert.equal(stream.ended, true);
    assert.equal(stream.state, null);
    assert.equal(stream.log.ends.length, 1);
    const { event, before: last } = stream.log.ends[0];
    assert.equal(event.type, 'CUSTOM');
    assert.equal(event.name, 'hx.stream_end');
    assert.deepStrictEqual(event.value, { reason: 'deleted' });
    assert.deepStrictEqual(last, { v: 1 }, "'end' gets the state before the end");

    await db.query(`INSERT INTO sessions VALUES ('s-4', '{"v": 2}')`);
    await h.merge(db, 'sessions', 's-4', [{ op: 'increment', path: '/v', by: 1 }]);
    await h.waitFor(() => stream.seq === 4, 'the re-insert and a delta');
    assert.equal(stream.ended, false);
    assert.deepStrictEqual(stream.state, { v: 3 });
    assert.deepStrictEqual(stream.log.events.map((e) => e.type),
      ['STATE_SNAPSHOT', 'CUSTOM', 'STATE_SNAPSHOT', 'STATE_DELTA']);
    assert.deepStrictEqual(h.seqs(stream), [1, 2, 3, 4]);
  } finally {
    await stream.stop();
  }
});

test('a key change ends the stream and names the next one', async () => {
  await db.query(`INSERT INTO sessions VALUES ('s-5', '{"v": 1}')`);
  const stream = h.follow(DB, 'sessions', 's-5');
  const next = h.follow(DB, 'sessions', 's-5b');
  await stream.start();
  await next.start();
  try {
    assert.equal(next.seq, 0);
    assert.equal(next.state, null);
    await db.query(`UPDATE sessions SET session_id = 's-5b', state = '{"v": 2}' WHERE session_id = 's-5'`);
    await h.waitFor(() => stream.ended, 'the end of s-5');
    assert.deepStrictEqual(stream.log.ends[0].event.value, { reason: 'key_changed', next: 'sessions:s-5b' });
    assert.equal(stream.state, null);
    await h.waitFor(() => next.seq === 1, 'the start of s-5b');
    assert.deepStrictEqual(next.state, { v: 2 });
    assert.equal(next.log.events[1].type, 'STATE_SNAPSHOT');
  } finally {
    await stream.stop();
    await next.stop();
  }
});

test('starting on an ended stream hands out its end event', async () => {
  await db.query(`INSERT INTO sessions VALUES ('s-6', '{"v": 1}')`);
  await db.query(`DELETE FROM sessions WHERE session_id = 's-6'`);
  const stream = h.follow(DB, 'sessions', 's-6');
  await stream.start();
  try {
    assert.equal(stream.seq, 2);
    assert.equal(stream.ended, true);
    assert.equal(stream.state, null);
    assert.equal(stream.log.events.length, 1);
    const logged = await h.loggedEvents(db, 'sessions:s-6');
    assert.deepStrictEqual(stream.log.events[0], logged[1].event);
    assert.equal(stream.log.ends.length, 1);

    await db.query(`INSERT INTO sessions VALUES ('s-6', '{"v": 9}')`);
    await h.waitFor(() => stream.seq === 3, 'the re-insert');
    assert.equal(stream.ended, false);
    assert.deepStrictEqual(stream.state, { v: 9 });
  } finally {
    await stream.stop();
  }
});

test('a row that predates the trigger starts at seq 0', async () => {
  await db.query('ALTER TABLE sessions DISABLE TRIGGER hx');
  await db.query(`INSERT INTO sessions VALUES ('s-7', '{"n": 1}')`);
  await db.query('ALTER TABLE sessions ENABLE TRIGGER hx');
  const stream = h.follow(DB, 'sessions', 's-7');
  await stream.start();
  try {
    assert.equal(stream.seq, 0);
    assert.deepStrictEqual(stream.log.events[0].metadata, { stream: 'sessions:s-7', seq: 0, synthetic: true });
    assert.deepStrictEqual(stream.state, { n: 1 });
    await h.merge(db, 'sessions', 's-7', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => stream.seq === 1, 'seq 1');
    assert.deepStrictEqual(stream.state, { n: 2 });
  } finally {
    await stream.stop();
  }
});

test('a stream= prefix and a schema-qualified, quoted table name', async () => {
  await db.query('CREATE SCHEMA app');
  await db.query(`CREATE TABLE app."Agent States" (session_id text PRIMARY KEY, state jsonb)`);
  await h.setTrigger(db, 'app."Agent States"', 'stream=agents');
  const key = `k-${'x'.repeat(80)}`; // long enough for a hashed channel name
  await db.query(`INSERT INTO app."Agent States" VALUES ($1, '{"a": 1}')`, [key]);
  const stream = h.follow(DB, 'app."Agent States"', key, { appName: 'hx-follow-prefix' });
  await stream.start();
  try {
    assert.equal(stream.stream, `agents:${key}`);
    assert.ok(stream.channel.length <= 63, stream.channel);
    await h.merge(db, 'app."Agent States"', key, [{ op: 'increment', path: '/a', by: 1 }]);
    await h.waitFor(() => stream.seq === 2, 'seq 2');
    assert.deepStrictEqual(stream.state, { a: 2 });
    assert.equal(stream.stats.notifications, 1);
  } finally {
    await stream.stop();
  }
});

test('keys that need quoting or hashing get their notifications', async () => {
  // "hx:" + "sessions:" + key: 63 bytes fits an identifier, 64 is hashed;
  // multibyte keys are clipped at a character boundary before the hash; a
  // key whose name escaped as JSON passes NOTIFY's 8,000 bytes (1,400
  // control characters: 8,400) is notified without its name, a wake-up
  const keys = ['K "q" \\ ü', 'k'.repeat(51), 'k'.repeat(52), 'ü'.repeat(40), `${'ü'.repeat(25)}'x'`, '\u0001'.repeat(1400)];
  for (const [i, key] of keys.entries()) {
    await db.query(`INSERT INTO sessions VALUES ($1, '{"n": 0}')`, [key]);
    const stream = h.follow(DB, 'sessions', key, { appName: `hx-follow-keys-${i}` }); // no polling
    await stream.start();
    try {
      assert.equal(stream.stream, `sessions:${key}`);
      assert.ok(Buffer.byteLength(stream.channel) <= 63, stream.channel);
      await db.query(`UPDATE sessions SET state = '{"n": 1}' WHERE session_id = $1`, [key]);
      await h.waitFor(() => stream.seq === 2, `the notification for key ${key}`);
      assert.deepStrictEqual(stream.state, { n: 1 });
      assert.equal(stream.stats.notifications, 1);
    } finally {
      await stream.stop();
    }
  }
});

test('start() fails on a table without a stream trigger, and leaves nothing behind', async () => {
  await db.query('CREATE TABLE plain (session_id text PRIMARY KEY, state jsonb)');
  const stream = h.follow(DB, 'plain', 'p-1', { appName: 'hx-follow-plain' });
  await assert.rejects(stream.start(), /no hx_stream trigger/);
  assert.equal(stream.connected, false);
  await h.waitFor(async () => (await h.backendPids(db, 'hx-follow-plain')).length === 0,
    'the failed connection to close');
});

// Server side: hx_stream_snapshot names the stream "<prefix>:<key as
// given>", while the trigger names it "<prefix>:<key's output text>".  For
// a key type whose text has several spellings (uuid in upper case, integers
// with leading zeros) the snapshot then reports a stream that never gets an
// event, seq 0 beside the current state (which already includes events
// 1..n), and the client follows the wrong channel.
test('a key spelled differently from its type\'s output still names the row\'s stream', async () => {
  await db.query('CREATE TABLE by_uuid (session_id uuid PRIMARY KEY, state jsonb)');
  await h.setTrigger(db, 'by_uuid');
  const key = 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11';
  await db.query(`INSERT INTO by_uuid VALUES ($1, '{"n": 1}')`, [key]);
  const { rows } = await db.query(`SELECT stream, seq FROM hx_stream_snapshot('by_uuid', $1)`, [key]);
  assert.deepStrictEqual(rows[0], { stream: `by_uuid:${key.toLowerCase()}`, seq: '1' });

  const stream = h.follow(DB, 'by_uuid', key, { appName: 'hx-follow-uuid' });
  await stream.start();
  try {
    await db.query(`UPDATE by_uuid SET state = '{"n": 2}'`);
    await h.waitFor(() => stream.seq === 2, 'seq 2');
    assert.deepStrictEqual(stream.state, { n: 2 });
  } finally {
    await stream.stop();
  }
});

test('start() that cannot connect rejects with the server\'s reason', async () => {
  const { HxStream } = require('..');
  const stream = new HxStream({ pg: { database: 'hx_no_such_database' }, table: 'sessions', key: 's-1' });
  await assert.rejects(stream.start(), (err) => {
    assert.equal(err.code, '3D000');
    assert.match(err.message, /database "hx_no_such_database" does not exist/);
    return true;
  });
  assert.equal(stream.connected, false);
});
