'use strict';
// The Durable Streams endpoint's parts that need no server: offsets, the
// producers' rule, cursors, stream names, SSE data lines, request headers.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { encodeOffset, parseOffset } = require('../lib/durable/offsets');
const { decide, tupleOf } = require('../lib/durable/producer');
const { cursorFor } = require('../lib/durable/cursor');
const { resolveName, writableLog } = require('../lib/durable/names');
const { dataLines } = require('../lib/durable/read');
const { jsonMessages } = require('../lib/durable/messages');
const h = require('../lib/durable/headers');

test('an offset is the seq after which it reads; offsets sort as their seqs do', () => {
  assert.equal(encodeOffset(0), '0000000000000000_0000000000000000');
  assert.equal(encodeOffset(42), '0000000000000000_0000000000000042');
  const seqs = [0, 1, 9, 10, 99, 100, 12345, 2 ** 31, Number.MAX_SAFE_INTEGER];
  for (const s of seqs) assert.deepEqual(parseOffset(encodeOffset(s)), { seq: s });
  const sorted = seqs.map(encodeOffset).sort();
  assert.deepEqual(sorted.map((o) => parseOffset(o).seq), seqs, 'byte order is seq order');
  for (const o of seqs.map(encodeOffset)) assert.doesNotMatch(o, /[,&=?/]/);
  assert.deepEqual(parseOffset('-1'), { start: true });
  assert.deepEqual(parseOffset(null), { start: true });
  assert.deepEqual(parseOffset('now'), { now: true });
  for (const bad of ['', '1', '-2', 'NOW', '0000000000000000_', '0000000000000000_00000000000000001', '0000000000000001_0000000000000001',
    '0000000000000000_9999999999999999', '0000000000000000_000000000000000a', ' 0000000000000000_0000000000000001']) {
    assert.equal(parseOffset(bad), null, bad);
  }
});

test("producers: the protocol's rule for (epoch, seq)", () => {
  assert.deepEqual(decide(null, 0, 0), { status: 'accept' });
  assert.deepEqual(decide(null, 3, 0), { status: 'accept' });
  assert.deepEqual(decide(null, 0, 1), { status: 'gap', expectedSeq: 0, receivedSeq: 1 });
  const s = { epoch: 2, seq: 5 };
  assert.deepEqual(decide(s, 2, 6), { status: 'accept' });
  assert.deepEqual(decide(s, 2, 5), { status: 'duplicate', lastSeq: 5 });
  assert.deepEqual(decide(s, 2, 0), { status: 'duplicate', lastSeq: 5 });
  assert.deepEqual(decide(s, 2, 8), { status: 'gap', expectedSeq: 6, receivedSeq: 8 });
  assert.deepEqual(decide(s, 1, 6), { status: 'stale', currentEpoch: 2 });
  assert.deepEqual(decide(s, 3, 0), { status: 'accept' });
  assert.deepEqual(decide(s, 3, 1), { status: 'badEpochSeq' });
  assert.equal(tupleOf(null), null);
  assert.notEqual(tupleOf({ id: 'a\n1', epoch: 0, seq: 0 }), tupleOf({ id: 'a', epoch: 0, seq: 0 }));
});

test('cursors: the interval now, and past a cursor the client echoes that is not behind', () => {
  const now = Date.UTC(2026, 0, 1);
  const current = Number(cursorFor(null, now));
  assert.equal(current, Math.floor((now - Date.UTC(2024, 9, 9)) / 20000));
  assert.equal(cursorFor(String(current - 5), now), String(current));
  for (let i = 0; i < 50; i++) {
    const next = Number(cursorFor(String(current), now));
    assert.ok(next > current && next <= current + 180, `${next}`);
  }
  assert.equal(cursorFor('9'.repeat(30), now), String(current), 'a cursor that is no number of intervals is ignored');
});

test('names: a log stream, a served table\'s stream, a byte stream, and what is refused', () => {
  const opts = { prefixes: new Map([['sessions', 'sessions'], ['app.runs', 'app.runs'], ['x', 'app']]), bytes: 'ds' };
  assert.deepEqual(resolveName('%40agent%3At-1', opts), { kind: 'log', name: '@agent:t-1', stream: '@agent:t-1', table: '@agent', key: 't-1' });
  assert.deepEqual(resolveName('@solo', opts), { kind: 'log', name: '@solo', stream: '@solo', table: '@solo', key: '' });
  assert.deepEqual(resolveName('sessions:s-42', opts), { kind: 'table', name: 'sessions:s-42', stream: 'sessions:s-42', table: 'sessions', key: 's-42' });
  assert.equal(resolveName('app.runs:r:1', opts).table, 'app.runs', 'the longest prefix');
  assert.equal(resolveName('app.runs:r:1', opts).key, 'r:1');
  assert.deepEqual(resolveName('v1/stream/x', opts), { kind: 'bytes', name: 'v1/stream/x', stream: 'v1/stream/x', table: 'ds', key: 'v1/stream/x' });
  for (const [rest, status] of [['', 404], ['%ZZ', 400], ['a%00b', 400], ['n'.repeat(1025), 400], ['other:k', 404]]) {
    assert.throws(() => resolveName(rest, opts), (err) => err.status === status, rest);
  }
  assert.throws(() => resolveName('v1/x', { ...opts, bytes: null }), (err) => err.status === 404);
  assert.ok(writableLog('@agent:t-1', ['@agent:']));
  assert.ok(!writableLog('@agents:t-1', ['@agent:']));
});

test('SSE data lines: one "data:" line per line, a leading space kept', () => {
  assert.equal(dataLines('[1,2]'), 'data:[1,2]\n\n');
  assert.equal(dataLines('a\nb\r\nc\rd'), 'data:a\ndata:b\ndata:c\ndata:d\n\n');
  assert.equal(dataLines(' x'), 'data:  x\n\n');
  assert.equal(dataLines(''), 'data:\n\n');
});

test('JSON messages: one level of an array flattened, an empty array refused in an append', () => {
  assert.deepEqual(jsonMessages(Buffer.from('{"a": 1}')), ['{"a":1}']);
  assert.deepEqual(jsonMessages(Buffer.from('[[1,2],[3]]')), ['[1,2]', '[3]']);
  assert.deepEqual(jsonMessages(Buffer.from('[]'), { create: true }), []);
  assert.throws(() => jsonMessages(Buffer.from('[]')), (err) => err.status === 400);
  assert.throws(() => jsonMessages(Buffer.from('{"a":')), (err) => err.status === 400);
  assert.throws(() => jsonMessages(Buffer.from([0x22, 0xc3, 0x22])), (err) => err.status === 400, 'not UTF-8');
});

test('headers: strict values, each bad one a 400', () => {
  const req = (headers) => ({ headers });
  assert.deepEqual(h.expiryOf(req({ 'stream-ttl': '3600' })), { ttl: 3600, expiresAt: null, expires: null });
  for (const ttl of ['+3600', '03600', '3600.0', '3.6e3', '-1', '', ' 1', String(h.MAX_TTL + 1)]) {
    assert.throws(() => h.expiryOf(req({ 'stream-ttl': ttl })), (err) => err.status === 400, ttl);
  }
  assert.equal(h.expiryOf(req({ 'stream-expires-at': '2030-01-01T00:00:00.5+02:00' })).expires.toISOString(), '2029-12-31T22:00:00.500Z');
  for (const e of ['2030-01-01', '2030-13-01T00:00:00Z', 'Tue, 01 Jan 2030 00:00:00 GMT', '0000-01-01T00:00:00Z']) {
    assert.throws(() => h.expiryOf(req({ 'stream-expires-at': e })), (err) => err.status === 400, e);
  }
  assert.equal(h.closedOf(req({ 'stream-closed': 'TRUE' })), true);
  for (const v of ['yes', '1', '', 'false']) assert.equal(h.closedOf(req({ 'stream-closed': v })), false);
  assert.deepEqual(h.producerOf(req({ 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': '9007199254740991' })), { id: 'p', epoch: 0, seq: 9007199254740991 });
  assert.equal(h.producerOf(req({})), null);
  for (const bad of [{ 'producer-id': 'p' }, { 'producer-id': '', 'producer-epoch': '0', 'producer-seq': '0' },
    { 'producer-id': 'p', 'producer-epoch': '1e3', 'producer-seq': '0' }, { 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': '9007199254740992' }]) {
    assert.throws(() => h.producerOf(req(bad)), (err) => err.status === 400, JSON.stringify(bad));
  }
  assert.equal(h.isText('text/plain; charset=utf-8'), true);
  assert.equal(h.isText('Application/JSON'), true);
  assert.equal(h.isText('application/octet-stream'), false);
  assert.throws(() => h.contentTypeOf(req({ 'content-type': 'nonsense' })), (err) => err.status === 400);
  assert.throws(() => h.forkOf(req({ 'stream-forked-from': 'http://elsewhere/x' })), (err) => err.status === 400);
  assert.throws(() => h.forkOf(req({ 'stream-fork-offset': '0' })), (err) => err.status === 400);
});

test("a read of hxstate's log that finds nothing below the tail is 410, from -1 too (the log dropped the stream meanwhile)", async () => {
  const { Store } = require('../lib/durable/store');
  const rowsOf = (rows) => ({ query: async () => ({ rows }) });
  const store = (rows) => new Store({ pool: rowsOf(rows), schema: 'hx_durable', hx: 'public', maxStreamBytes: 1, maxProducers: 1 });
  const t = { kind: 'table', name: 'sessions:s-1' };
  await assert.rejects(store([]).read(t, 0, 5, 1000, true), (err) => err.status === 410);
  await assert.rejects(store([]).read(t, 2, 5, 1000, false), (err) => err.status === 410);
  await assert.rejects(store([{ seq: '4', data: '{}' }]).read(t, 2, 5, 1000, false), (err) => err.status === 410);
  assert.deepEqual(await store([{ seq: '4', data: '{}' }]).read(t, 0, 5, 1000, true), [{ seq: 4, data: '{}' }], '-1: from the oldest event held');
  assert.deepEqual(await store([]).read(t, 5, 5, 1000, false), [], 'at the tail: nothing to read');
  const big = [{ seq: '3', data: 'x'.repeat(600) }, { seq: '4', data: 'y'.repeat(600) }];
  assert.deepEqual((await store(big).read(t, 2, 5, 1000, false)).map((m) => m.seq), [3], 'cut to maxBytes of text, the first always');
});

test('database errors: the client\'s are 4xx, a database away is 503 with Retry-After, the rest the server\'s', () => {
  const { httpErrorOf } = require('../lib/durable/store');
  const e = (code) => Object.assign(new Error('x'), { code });
  assert.equal(httpErrorOf(e('22023')).status, 400);
  assert.equal(httpErrorOf(e('42501')).status, 403);
  assert.equal(httpErrorOf(e('54001')).status, 413);
  for (const code of ['08006', '57P01', '53300', 'ECONNREFUSED']) {
    const h = httpErrorOf(e(code));
    assert.equal(h.status, 503, code);
    assert.equal(h.headers['retry-after'], '2');
  }
  assert.equal(httpErrorOf(e('XX000')), null);
  assert.equal(httpErrorOf(new Error('no code')), null);
});
