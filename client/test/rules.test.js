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

test('the queue has room below maxQueue, and is low at half of it', () => {
  assert.equal(cursor.hasRoom(0, 1), true);
  assert.equal(cursor.hasRoom(9, 10), true);
  assert.equal(cursor.hasRoom(10, 10), false);
  assert.equal(cursor.isLow(5, 10), true);
  assert.equal(cursor.isLow(6, 10), false);
  assert.equal(cursor.isLow(0, 1), true);
  assert.equal(cursor.isLow(1, 1), false);
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
  b.reset();
  assert.equal(b.next(() => 0), 50);
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

test('one delta is applied once for the subscriptions at the same state', () => {
  const e = new StreamEntry('t:k', 'hx:t:k', 't', 'k');
  const before = { n: 1 };
  const delta = { type: 'STATE_DELTA', delta: [{ op: 'replace', path: '/n', value: 2 }] };
  const a = e.apply(before, delta);
  const b = e.apply(before, delta);
  assert.deepStrictEqual(a, { n: 2 });
  assert.strictEqual(a, b);
  assert.deepStrictEqual(before, { n: 1 }, 'the state before is not changed');
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
