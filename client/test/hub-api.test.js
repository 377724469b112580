'use strict';
// The hub's API: following and unfollowing at run time (UNLISTEN when the
// last subscription of a channel goes), several subscriptions of one
// stream sharing its work, following by stream name, resuming after a seq
// (with and without the state at it), a subscription that cannot start
// failing alone, HxStream on a shared hub, and stop() leaving nothing.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');
const { HxHub, HxStream } = require('..');

const DB = 'hx_hub_api';

let db;
before(async () => {
  db = await h.freshDatabase(DB);
  await db.query('SELECT hx_stream_publication()');
});
after(async () => { await db.end(); });

/** A subscription's events, as [seq, type] pairs, and its last state. */
function record(sub) {
  const log = { events: [], states: [], resyncs: [], ends: [], errors: [] };
  sub.on('event', (event, state) => {
    log.events.push(event);
    log.states.push(state);
  });
  sub.on('resync', (info) => log.resyncs.push(info));
  sub.on('end', (event, before) => log.ends.push({ event, before }));
  sub.on('error', (err) => log.errors.push(err));
  sub.log = log;
  return sub;
}

const seqs = (sub) => sub.log.events.map((e) => e.metadata.seq);

test('follow and unfollow at run time; subscriptions of one stream share it', async () => {
  await h.streamTable(db, 'rt');
  await db.query(`INSERT INTO rt VALUES ('a', '{"n": 0}'), ('b', '{"n": 0}')`);
  const hub = new HxHub({ pg: { database: DB }, transport: 'listen', pollInterval: 0 });
  await hub.start();
  try {
    const a = record(hub.follow({ table: 'rt', key: 'a' }));
    const b1 = record(hub.follow({ table: 'rt', key: 'b' }));
    const b2 = record(hub.follow({ table: 'rt', key: 'b' }));
    await Promise.all([a.ready, b1.ready, b2.ready]);
    assert.equal(hub.stats.streams, 2);
    assert.equal(hub.stats.subscriptions, 3);
    assert.equal(hub.stats.listening, 2);
    assert.equal(hub.stats.snapshots, 2, 'one snapshot row per stream');
    assert.equal(b1.stream, 'rt:b');

    await h.merge(db, 'rt', 'b', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => b1.seq === 2 && b2.seq === 2, 'seq 2 on both');
    assert.strictEqual(b1.state, b2.state, 'the delta was applied once for both');
    assert.deepStrictEqual(b1.state, { n: 1 });

    b1.stop();
    assert.equal(b1.stopped, true);
    await h.merge(db, 'rt', 'b', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => b2.seq === 3, 'seq 3');
    assert.deepStrictEqual(seqs(b1), [1, 2], 'nothing after stop()');
    assert.equal(hub.stats.streams, 2);

    hub.unfollow(b2);
    assert.equal(hub.stats.streams, 1);
    await h.waitFor(() => hub.stats.listening === 1, 'the UNLISTEN of rt:b');

    // follow it again: a new snapshot
    const b3 = record(hub.follow({ table: 'rt', key: 'b' }));
    await b3.ready;
    assert.deepStrictEqual(seqs(b3), [3]);
    assert.equal(b3.log.events[0].metadata.synthetic, true);
    assert.deepStrictEqual(b3.state, { n: 2 });
    assert.equal(hub.stats.listening, 2);
    await h.merge(db, 'rt', 'a', [{ op: 'increment', path: '/n', by: 5 }]);
    await h.waitFor(() => a.seq === 2, 'a at seq 2');
    assert.deepStrictEqual(a.state, { n: 5 });

    // joining a stream that is followed live: its position and state, no read
    const reads = hub.stats.snapshotReads;
    const a2 = record(hub.follow({ table: 'rt', key: 'a' }));
    await a2.ready;
    assert.equal(hub.stats.snapshotReads, reads);
    assert.deepStrictEqual(a2.log.events.map((e) => [e.type, e.metadata.seq, e.metadata.synthetic]),
      [['STATE_SNAPSHOT', 2, true]]);
    assert.strictEqual(a2.state, a.state);
    await h.merge(db, 'rt', 'a', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => a.seq === 3 && a2.seq === 3, 'both at seq 3');
    assert.strictEqual(a2.state, a.state);
  } finally {
    await hub.stop();
  }
});

test('following by stream name, and resuming after a seq', async () => {
  await h.streamTable(db, 'rs', 'stream=agents');
  await db.query(`INSERT INTO rs VALUES ('x', '{"l": []}')`);
  for (let i = 1; i <= 5; i++) await h.merge(db, 'rs', 'x', [{ op: 'append', path: '/l', items: [i] }]);
  const hub = new HxHub({ pg: { database: DB }, pollInterval: 0 });
  await hub.start();
  try {
    // by name: the log from its first event, the state built from it
    const byName = record(hub.follow({ stream: 'agents:x' }));
    await byName.ready;
    assert.deepStrictEqual(seqs(byName), [1, 2, 3, 4, 5, 6]);
    assert.deepStrictEqual(byName.state, { l: [1, 2, 3, 4, 5] });
    assert.equal(byName.log.events[0].metadata.synthetic, undefined, 'the logged events themselves');

    // after a seq, without the state at it: events only
    const events = record(hub.follow({ table: 'rs', key: 'x' }, { after: 4 }));
    await events.ready;
    assert.deepStrictEqual(seqs(events), [5, 6]);
    assert.equal(events.state, undefined);
    assert.equal(events.stream, 'agents:x');

    // after a seq, with the state at it
    const at4 = (await db.query(`SELECT event FROM hx_event WHERE stream = 'agents:x' AND seq <= 4 ORDER BY seq`)).rows
      .reduce((s, r) => require('..').applyEvent(s, r.event), null);
    const based = record(hub.follow({ table: 'rs', key: 'x' }, { after: 4, base: at4 }));
    await based.ready;
    assert.deepStrictEqual(based.state, { l: [1, 2, 3, 4, 5] });
    assert.throws(() => hub.follow({ table: 'rs', key: 'x' }, { after: 4, state: true }), /needs base/);

    await h.merge(db, 'rs', 'x', [{ op: 'append', path: '/l', items: [6] }]);
    await h.waitFor(() => [byName, events, based].every((s) => s.seq === 7), 'seq 7 everywhere');
    assert.deepStrictEqual(byName.state, { l: [1, 2, 3, 4, 5, 6] });
    assert.deepStrictEqual(based.state, byName.state);
    assert.equal(hub.stats.streams, 1);

    // the log trimmed past a resume point: a {table, key} subscription resyncs ...
    await db.query(`SELECT hx_stream_trim('0 seconds', 'agents:x')`);
    const resumed = record(hub.follow({ table: 'rs', key: 'x' }, { after: 2 }));
    await resumed.ready;
    assert.deepStrictEqual(resumed.log.resyncs, [{ seq: 7, previousSeq: 2, state: { l: [1, 2, 3, 4, 5, 6] }, reason: 'trimmed' }]);
    assert.deepStrictEqual(seqs(resumed), [7]);
    // ... and so does one by name, as the hub knows the stream's table;
    // one by name alone cannot read a snapshot, and fails
    const named = record(hub.follow({ stream: 'agents:x' }, { after: 2 }));
    await named.ready;
    assert.deepStrictEqual(seqs(named), [7]);
    await db.query(`INSERT INTO rs VALUES ('y', '{"l": []}')`);
    for (let i = 1; i <= 3; i++) await h.merge(db, 'rs', 'y', [{ op: 'append', path: '/l', items: [i] }]);
    await db.query(`SELECT hx_stream_trim('0 seconds', 'agents:y')`);
    const lost = record(hub.follow({ stream: 'agents:y' }, { after: 2 }));
    await assert.rejects(lost.ready, (err) => err.code === 'HX_TRIMMED' && /cannot read a snapshot/.test(err.message));
    assert.equal(lost.stopped, true);
    assert.equal(lost.log.errors.length, 1);
  } finally {
    await hub.stop();
  }
});

test('a subscription that cannot start fails alone', async () => {
  await db.query('CREATE TABLE ru (session_id uuid PRIMARY KEY, state jsonb)');
  await h.setTrigger(db, 'ru');
  await db.query('CREATE TABLE plain (session_id text PRIMARY KEY, state jsonb)');
  const good = Array.from({ length: 6 }, (_, i) => `00000000-0000-0000-0000-00000000000${i}`);
  for (const k of good) await db.query(`INSERT INTO ru VALUES ($1, '{"ok": true}')`, [k]);
  const hub = new HxHub({ pg: { database: DB }, pollInterval: 0 });
  await hub.start();
  try {
    // one batch: a key its type rejects, amid good ones
    const subs = good.map((key) => hub.follow({ table: 'ru', key }));
    const bad = hub.follow({ table: 'ru', key: 'not-a-uuid' });
    subs.splice(3, 0, hub.follow({ table: 'plain', key: 'p' }));
    const results = await Promise.allSettled([...subs.map((s) => s.ready), bad.ready]);
    assert.match(results[3].reason.message, /no hx_stream trigger/);
    assert.match(results[results.length - 1].reason.message, /invalid input syntax for type uuid/);
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, good.length);
    assert.equal(hub.stats.streams, good.length);
    assert.equal(hub.stats.subscriptions, good.length);
    assert.equal(hub.connected, true, 'the hub goes on');
  } finally {
    await hub.stop();
  }
});

test('HxStream on a shared hub', async () => {
  await h.streamTable(db, 'rh');
  await db.query(`INSERT INTO rh VALUES ('1', '{"n": 0}'), ('2', '{"n": 0}')`);
  const app = 'hx-hub-shared';
  const hub = new HxHub({ pg: { database: DB, application_name: app }, pollInterval: 0 });
  await hub.start();
  try {
    const one = new HxStream({ hub, table: 'rh', key: '1' });
    const two = new HxStream({ hub, table: 'rh', key: '2' });
    const seen = [];
    one.on('event', (e) => seen.push(`1:${e.metadata.seq}`));
    two.on('event', (e) => seen.push(`2:${e.metadata.seq}`));
    await Promise.all([one.start(), two.start()]);
    assert.equal((await h.backendPids(db, app)).length, 2, 'the hub\'s two connections, for both');
    await h.merge(db, 'rh', '2', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.merge(db, 'rh', '1', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => one.seq === 2 && two.seq === 2, 'seq 2 on both');
    await one.stop();
    assert.equal(hub.stats.streams, 1);
    await h.merge(db, 'rh', '2', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => two.seq === 3, 'seq 3');
    assert.deepStrictEqual(two.state, { n: 2 });
    assert.deepStrictEqual(seen.sort(), ['1:1', '1:2', '2:1', '2:2', '2:3']);
    await two.stop();
    assert.equal(hub.connected, true, 'the shared hub is its owner\'s to stop');
  } finally {
    await hub.stop();
  }
});

function resources() {
  const counts = {};
  for (const r of process.getActiveResourcesInfo()) counts[r] = (counts[r] || 0) + 1;
  return counts;
}

test('stop() leaves no timer and no connection', async () => {
  await h.streamTable(db, 'rz');
  await db.query(`INSERT INTO rz VALUES ('z', '{"n": 0}')`);
  await new Promise((resolve) => setImmediate(resolve));
  const before = resources();
  for (const transport of ['wal', 'listen']) {
    const app = `hx-hub-stop-${transport}`;
    const hub = new HxHub({ pg: { database: DB, application_name: app }, transport, pollInterval: 10, statusInterval: 10 });
    await hub.start();
    const sub = hub.follow({ table: 'rz', key: 'z' });
    await sub.ready;
    await h.merge(db, 'rz', 'z', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => sub.seq >= 2 && hub.stats.polls > 2, 'an event and some polls');
    await hub.stop();
    assert.equal(sub.stopped, true);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepStrictEqual(resources(), before, transport);
    await h.waitFor(async () => (await h.backendPids(db, app)).length === 0, 'the connections to close');
  }
  // stopped while starting
  const hub = new HxHub({ pg: { database: DB } });
  const sub = hub.follow({ table: 'rz', key: 'z' });
  const started = hub.start();
  await hub.stop();
  await assert.rejects(started, /stopped/);
  await assert.rejects(sub.ready, /stopped/);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepStrictEqual(resources(), before, 'stopped while starting');
  assert.throws(() => hub.follow({ table: 'rz', key: 'z' }), /stopped/);
});

test('the listeners of \'event\' that each event finds: on, once, off, removeAllListeners between events', async () => {
  await h.streamTable(db, 'ls');
  await db.query(`INSERT INTO ls VALUES ('a', '{"n": 0}')`);
  const hub = new HxHub({ pg: { database: DB }, transport: 'wal', pollInterval: 0 });
  await hub.start();
  try {
    const sub = hub.follow({ table: 'ls', key: 'a' });
    const heard = [];
    const first = (e) => heard.push(['first', e.metadata.seq]);
    sub.on('event', first);
    await sub.ready;
    const write = async (seq) => {
      await h.merge(db, 'ls', 'a', [{ op: 'increment', path: '/n', by: 1 }]);
      await h.waitFor(() => sub.seq === seq, `seq ${seq}`);
    };
    sub.once('event', (e) => heard.push(['once', e.metadata.seq]));
    await write(2); // first, once
    await write(3); // first (once is gone)
    const second = (e) => heard.push(['second', e.metadata.seq]);
    sub.prependListener('event', second);
    await write(4); // second, first
    sub.removeListener('event', first);
    await write(5); // second
    sub.removeAllListeners('event');
    await write(6); // nobody
    sub.addListener('event', first);
    sub.prependOnceListener('event', (e) => heard.push(['prepended once', e.metadata.seq]));
    await write(7); // prepended once, first
    await write(8); // first
    // a listener that adds another: the new one hears the next event, not this one
    sub.removeListener('event', first);
    sub.on('event', function adder(e) {
      heard.push(['adder', e.metadata.seq]);
      this.off('event', adder);
      this.on('event', second);
    });
    await write(9); // adder
    await write(10); // second
    sub.off('event', second);
    await write(11); // nobody
    assert.deepStrictEqual(heard, [
      ['first', 1], ['first', 2], ['once', 2], ['first', 3], ['second', 4], ['first', 4], ['second', 5],
      ['prepended once', 7], ['first', 7], ['first', 8], ['adder', 9], ['second', 10],
    ]);
  } finally {
    await hub.stop();
  }
});
