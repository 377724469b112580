'use strict';
// The rules without I/O, tested without a server: the cursor's (what an
// event at seq n, a page of the log, a notification's hint mean given the
// cursor; when the queue has room), the backoff's, the one stream's
// bookkeeping that several subscriptions share, and how a configured
// function name is read and quoted.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const cursor = require('../lib/cursor');
const { backoffDelay, Backoff } = require('../lib/backoff');
const { StreamEntry } = require('../lib/entry');
const sql = require('../lib/sql');

test('an event at seq n, given the cursor: old news, the next one, or a gap', () => {
  assert.equal(cursor.classify(5, 3), 'old');
  assert.equal(cursor.classify(5, 5), 'old');
  assert.equal(cursor.classify(5, 6), 'next');
  assert.equal(cursor.classify(5, 7), 'ahead');
  assert.equal(cursor.classify(0, 1), 'next');
  assert.equal(cursor.classify(0, Number.MAX_SAFE_INTEGER), 'ahead');
});

test('a page of the log: the run that continues the cursor, and a hole after it', () => {
  // read after 4, cursor still 4: seqs 5..7 continue it
  assert.deepStrictEqual(cursor.planPage(4, 4, [5, 6, 7]), { reread: false, start: 0, run: 3, hole: false });
  // the cursor moved on to 6 (the transport brought 5 and 6) while the read ran
  assert.deepStrictEqual(cursor.planPage(6, 4, [5, 6, 7, 8]), { reread: false, start: 2, run: 2, hole: false });
  // the log skips seq 5 (trimmed): a hole right away
  assert.deepStrictEqual(cursor.planPage(4, 4, [6, 7]), { reread: false, start: 0, run: 0, hole: true });
  // a hole after a run: seq 7 deleted
  assert.deepStrictEqual(cursor.planPage(4, 4, [5, 6, 8]), { reread: false, start: 0, run: 2, hole: true });
  // nothing after the cursor
  assert.deepStrictEqual(cursor.planPage(4, 4, []), { reread: false, start: 0, run: 0, hole: false });
  assert.deepStrictEqual(cursor.planPage(9, 4, [5, 6]), { reread: false, start: 2, run: 0, hole: false });
  // the cursor went back below the read (a resync older than the read): read again
  assert.equal(cursor.planPage(3, 4, [5, 6]).reread, true);
});

test('after a page: more to read when the queue stopped it, or a full page reached its end', () => {
  assert.equal(cursor.moreAfterPage(true, 2, 10, 6, 7), true);
  assert.equal(cursor.moreAfterPage(false, 10, 10, 14, 14), true);
  assert.equal(cursor.moreAfterPage(false, 10, 10, 12, 14), false); // it stopped short of the top (a hole, a resync)
  assert.equal(cursor.moreAfterPage(false, 3, 10, 7, 7), false);
});

test('a live subscription reads the log when told to, when a page stopped short, or when a seq above it is known', () => {
  assert.equal(cursor.wantsRead(5, 5, false, false), false);
  assert.equal(cursor.wantsRead(5, 4, false, false), false);
  assert.equal(cursor.wantsRead(5, 6, false, false), true);
  assert.equal(cursor.wantsRead(5, 5, true, false), true);
  assert.equal(cursor.wantsRead(5, 5, false, true), true);
});

test('the queue has room below maxQueue events and maxQueueBytes bytes, and is low at half of both', () => {
  // hasRoom(events, bytes, size of the next, maxEvents, maxBytes)
  assert.equal(cursor.hasRoom(0, 0, 10, 1, 100), true);
  assert.equal(cursor.hasRoom(9, 50, 10, 10, 100), true);
  assert.equal(cursor.hasRoom(10, 50, 10, 10, 100), false, 'full in events');
  assert.equal(cursor.hasRoom(3, 90, 10, 10, 100), true, 'exactly at the byte bound');
  assert.equal(cursor.hasRoom(3, 91, 10, 10, 100), false, 'full in bytes');
  assert.equal(cursor.hasRoom(0, 0, 5000, 10, 100), true, 'an empty queue takes any one event, however big');
  assert.equal(cursor.hasRoom(1, 5000, 1, 10, 100), false);
  assert.equal(cursor.isLow(5, 50, 10, 100), true);
  assert.equal(cursor.isLow(6, 0, 10, 100), false);
  assert.equal(cursor.isLow(0, 51, 10, 100), false);
  assert.equal(cursor.isLow(0, 0, 1, 100), true);
  assert.equal(cursor.isLow(1, 0, 1, 100), false);
});

test('what an error means: the connection gone, a value its type rejects, or a statement worth retrying', () => {
  const { isConnectionError, isDataError, isTransient } = require('../lib/errors');
  const e = (code) => Object.assign(new Error(code || 'socket'), code ? { code } : {});
  for (const c of [undefined, 'ECONNRESET', '08006', '08P01', '57P01', '57P02', '57P03', '57P04', '57P05', '53300']) {
    assert.equal(isConnectionError(e(c)), true, c);
  }
  for (const c of ['42501', '57014', '22P02', '40001', '42883', '55P03']) assert.equal(isConnectionError(e(c)), false, c);
  assert.equal(isDataError(e('22P02')), true);
  assert.equal(isDataError(e('42501')), false);
  for (const c of ['57014', '40001', '40P01', '53200', '55P03']) assert.equal(isTransient(e(c)), true, c);
  for (const c of ['42501', '42883', '22P02', '42P01', undefined]) assert.equal(isTransient(e(c)), false, c);
});

test("a notification's payload is a hint: the {stream, seq} an event or a reference names, or nothing", () => {
  const event = { type: 'STATE_DELTA', delta: [], metadata: { stream: 't:k', seq: 4 } };
  assert.deepStrictEqual(cursor.parseHint(JSON.stringify(event)), { stream: 't:k', seq: 4, ref: false });
  assert.deepStrictEqual(cursor.parseHint('{"ref": true, "seq": 8, "type": "STATE_DELTA", "stream": "t:k"}'),
    { stream: 't:k', seq: 8, ref: true });
  // the hint never carries the content, whatever the payload says
  const forged = '{"type":"STATE_SNAPSHOT","snapshot":{"owner":"mallory"},"metadata":{"stream":"f:a","seq":2}}';
  assert.deepStrictEqual(cursor.parseHint(forged), { stream: 'f:a', seq: 2, ref: false });
  assert.deepStrictEqual(cursor.parseHint(JSON.stringify({ ref: true, seq: Number.MAX_SAFE_INTEGER, stream: 'x' })),
    { stream: 'x', seq: Number.MAX_SAFE_INTEGER, ref: true });
  for (const junk of ['', 'not json', 'null', '7', '"s"', '[]', '{}', '{"ref": true}',
    '{"ref": true, "seq": "8", "stream": "t:k"}', '{"ref": true, "seq": 0, "stream": "t:k"}',
    '{"ref": true, "seq": -3, "stream": "t:k"}', '{"metadata": {"stream": "t:k", "seq": 1.5}}',
    '{"metadata": {"stream": "t:k", "seq": 1e300}}', '{"metadata": {"stream": 7, "seq": 1}}',
    '{"metadata": null}', `{"metadata": {"stream": "t:k", "seq": ${2 ** 53}}}`]) {
    assert.equal(cursor.parseHint(junk), null, junk);
  }
});

test('backoff: doubling from min to max, jittered over the upper half', () => {
  const bounds = { min: 100, max: 5000 };
  assert.equal(backoffDelay(0, bounds, () => 0), 50);
  assert.equal(backoffDelay(0, bounds, () => 0.999999), 99.99995);
  assert.equal(backoffDelay(1, bounds, () => 0), 100);
  assert.equal(backoffDelay(3, bounds, () => 0.5), 600);
  assert.equal(backoffDelay(6, bounds, () => 0), 2500); // 6400 capped at 5000
  assert.equal(backoffDelay(1000, bounds, () => 0), 2500);
  assert.equal(backoffDelay(-1, bounds, () => 0), 50);
  const b = new Backoff(bounds);
  const delays = Array.from({ length: 8 }, () => b.next(() => 0));
  assert.deepStrictEqual(delays, [50, 100, 200, 400, 800, 1600, 2500, 2500]);
  b.healthy();
  assert.equal(b.next(() => 0), 50);
});

test('backoff starts over only once what was retried proved healthy', () => {
  const b = new Backoff({ min: 100, max: 5000 }, 5000);
  const zero = () => 0;
  // a server that accepts the connection and drops it at once: the
  // reconnect succeeds every time, and yet the delay keeps growing
  const delays = [];
  let now = 0;
  for (let i = 0; i < 6; i++) {
    delays.push(b.next(zero));
    now += 1000;
    b.up(now);       // connected
    now += 10;
    b.lost(now);     // and dropped 10 ms later
  }
  assert.deepStrictEqual(delays, [50, 100, 200, 400, 800, 1600]);
  // up for healthyAfter ms, then lost: it was healthy
  b.next(zero);
  b.up(now);
  now += 5000;
  b.lost(now);
  assert.equal(b.next(zero), 50);
  // lost while never up (a failed attempt): it goes on growing
  b.lost(now);
  assert.equal(b.next(zero), 100);
  // a statement succeeded: healthy
  b.healthy();
  assert.equal(b.next(zero), 50);
});

test('a stream known to have a seq: the log has the last word when nothing was seen since the read', () => {
  const e = new StreamEntry('t:k', 'hx:t:k', 't', 'k');
  e.saw(7);
  e.saw(3);
  assert.equal(e.seen, 7);
  // a read that found the log ending at 5, while 7 was seen before it and since: settled at 5
  assert.equal(e.settle(5, 7), true);
  assert.equal(e.seen, 5);
  // something seen during the read: keep it
  e.saw(9);
  assert.equal(e.settle(5, 7), false);
  assert.equal(e.seen, 9);
  // the log reached it: nothing to settle
  assert.equal(e.settle(9, 9), false);
});

test('one delta is applied once for the subscriptions at the same state, and sized', () => {
  const e = new StreamEntry('t:k', 'hx:t:k', 't', 'k');
  const before = { n: 1, s: 'ü' };
  const delta = { type: 'STATE_DELTA', delta: [{ op: 'replace', path: '/n', value: 2 }] };
  const a = e.apply(before, 0, delta, 40);
  const b = e.apply(before, 0, delta, 40);
  assert.deepStrictEqual(a.state, { n: 2, s: 'ü' });
  assert.strictEqual(a.state, b.state);
  // the state before measured exactly on the way (its JSON text in UTF-8), plus the delta's size
  assert.equal(a.bytes, Buffer.byteLength('{"n":1,"s":"ü"}') + 40);
  assert.deepStrictEqual(before, { n: 1, s: 'ü' }, 'the state before is not changed');
});

test('applySized: a snapshot is its own size, an end frees the state, other events keep it', () => {
  const { applySized } = require('../lib/apply');
  const snap = { type: 'STATE_SNAPSHOT', snapshot: { a: 1 } };
  assert.deepStrictEqual(applySized(null, 0, snap, 77), { state: { a: 1 }, bytes: 77 });
  assert.deepStrictEqual(applySized({ a: 1 }, 9, { type: 'CUSTOM', name: 'hx.stream_end', value: {} }, 60), { state: null, bytes: 0 });
  const s = { a: 1 };
  const r = applySized(s, 9, { type: 'CUSTOM', name: 'other' }, 60);
  assert.strictEqual(r.state, s);
  assert.equal(r.bytes, 9);
  assert.throws(() => applySized({ a: 1 }, 9, { type: 'STATE_DELTA', delta: [{ op: 'remove', path: '/b' }] }, 30));
});

test("a source function's name: schema-qualified, read as PostgreSQL reads it, quoted exactly", () => {
  assert.deepStrictEqual(sql.parseQualifiedName('app.snapshots'), { schema: 'app', name: 'snapshots' });
  assert.deepStrictEqual(sql.parseQualifiedName('App.Thread_Snapshots$1'), { schema: 'app', name: 'thread_snapshots$1' });
  assert.deepStrictEqual(sql.parseQualifiedName('"My App"."Fn ""x"""'), { schema: 'My App', name: 'Fn "x"' });
  assert.deepStrictEqual(sql.parseQualifiedName('"a.b".c'), { schema: 'a.b', name: 'c' });
  assert.deepStrictEqual(sql.parseQualifiedName('ü.Ä'), { schema: 'ü', name: 'Ä' }); // only ASCII letters fold
  assert.equal(sql.functionName('App."Fn ""x"""'), '"app"."Fn ""x"""');
  for (const bad of ['fn', 'a.b.c', 'a.', '.b', 'a. b', 'a .b', '"a.b', 'a.""', '1a.b', 'a.b()', 'a.b;', 'a.b--', '', 'a.b ']) {
    assert.throws(() => sql.parseQualifiedName(bad), TypeError, bad);
  }
});

test('applySized within maxStateBytes: a copy that would pass the bound throws HX_STATE_TOO_LARGE; the event is never changed', () => {
  const { applySized } = require('../lib/apply');
  let state = { a: ['x'.repeat(1000)] };
  let bytes = JSON.stringify(state).length;
  const double = { type: 'STATE_DELTA', delta: [{ op: 'copy', from: '/a', path: '/a/-' }] };
  let n = 0;
  for (;;) {
    let r;
    try {
      r = applySized(state, bytes, double, 60, 64 * 1024);
    } catch (err) {
      assert.equal(err.code, 'HX_STATE_TOO_LARGE');
      assert.ok(err.bytes > 64 * 1024 && err.maxStateBytes === 64 * 1024);
      break;
    }
    state = r.state;
    bytes = JSON.stringify(state).length;
    assert.ok(bytes <= 64 * 1024);
    n++;
  }
  assert.equal(n, 6, 'six doublings of 1 kB fit in 64 kB, not a seventh');
  // a later op of a delta that changes what an earlier one added: the event's value stays as logged
  const delta = { type: 'STATE_DELTA', delta: [{ op: 'add', path: '/o', value: { x: 1 } }, { op: 'add', path: '/o/y', value: 2 }] };
  const r = applySized({}, 2, delta, 80);
  assert.deepStrictEqual(r.state, { o: { x: 1, y: 2 } });
  assert.deepStrictEqual(delta.delta[0].value, { x: 1 }, 'the event is not changed');
  // a snapshot larger than the bound
  assert.throws(() => applySized(null, 0, { type: 'STATE_SNAPSHOT', snapshot: {} }, 100, 99), (e) => e.code === 'HX_STATE_TOO_LARGE');
});
