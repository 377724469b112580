'use strict';
// The replication messages the WAL transport reads and writes
// (lib/pgoutput.js), byte by byte: LSNs, XLogData and keepalives, standby
// status updates, and pgoutput's begin, relation, insert and commit.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { parseLsn, formatLsn, parseCopyData, standbyStatus, PgOutputDecoder, PG_EPOCH_MS } = require('../lib/pgoutput');
const { logColumns } = require('../lib/wal');

/** A message built from parts: [type, value] with type one of u8 u16 u32 u64 str bytes. */
function build(parts) {
  const bufs = parts.map(([type, v]) => {
    switch (type) {
      case 'u8': return Buffer.from([v]);
      case 'u16': { const b = Buffer.alloc(2); b.writeInt16BE(v); return b; }
      case 'u32': { const b = Buffer.alloc(4); b.writeUInt32BE(v); return b; }
      case 'u64': { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(v)); return b; }
      case 'str': return Buffer.concat([Buffer.from(v, 'utf8'), Buffer.from([0])]);
      default: return Buffer.from(v);
    }
  });
  return Buffer.concat(bufs);
}

const c = (ch) => ['u8', ch.charCodeAt(0)];

test('LSNs', () => {
  assert.equal(parseLsn('16/B374D848'), 0x16B374D848n);
  assert.equal(formatLsn(0x16B374D848n), '16/B374D848');
  assert.equal(formatLsn(parseLsn('0/0')), '0/0');
  assert.throws(() => parseLsn('nope'), /not an LSN/);
});

test('XLogData and keepalive', () => {
  const w = parseCopyData(build([c('w'), ['u64', 10], ['u64', 20], ['u64', 30], ['bytes', 'xyz']]));
  assert.deepStrictEqual({ ...w, data: w.data.toString() }, { tag: 'w', start: 10n, walEnd: 20n, data: 'xyz' });
  assert.deepStrictEqual(parseCopyData(build([c('k'), ['u64', 99], ['u64', 0], ['u8', 1]])),
    { tag: 'k', walEnd: 99n, replyRequested: true });
  assert.deepStrictEqual(parseCopyData(build([c('k'), ['u64', 99], ['u64', 0], ['u8', 0]])).replyRequested, false);
});

test('standby status update', () => {
  const b = standbyStatus(0x1234n, Number(PG_EPOCH_MS) + 5, true);
  assert.equal(b.length, 34);
  assert.equal(String.fromCharCode(b[0]), 'r');
  for (const at of [1, 9, 17]) assert.equal(b.readBigUInt64BE(at), 0x1234n);
  assert.equal(b.readBigInt64BE(25), 5000n, 'microseconds since 2000-01-01');
  assert.equal(b[33], 1);
});

test('pgoutput: begin, relation, insert (text, NULL, unchanged TOAST), commit', () => {
  const d = new PgOutputDecoder();
  assert.deepStrictEqual(d.decode(build([c('B'), ['u64', 500], ['u64', 1], ['u32', 733]])),
    { tag: 'B', finalLsn: 500n, xid: 733 });
  const rel = d.decode(build([c('R'), ['u32', 16400], ['str', 'public'], ['str', 'hx_event'], ['u8', 100], ['u16', 5],
    ['u8', 1], ['str', 'stream'], ['u32', 25], ['u32', 0xffffffff],
    ['u8', 1], ['str', 'seq'], ['u32', 20], ['u32', 0xffffffff],
    ['u8', 0], ['str', 'type'], ['u32', 25], ['u32', 0xffffffff],
    ['u8', 0], ['str', 'event'], ['u32', 3802], ['u32', 0xffffffff],
    ['u8', 0], ['str', 'created_at'], ['u32', 1184], ['u32', 0xffffffff]]));
  assert.deepStrictEqual(rel.relation, { id: 16400, schema: 'public', name: 'hx_event',
    columns: ['stream', 'seq', 'type', 'event', 'created_at'] });
  assert.deepStrictEqual(logColumns(rel.relation, 'public'), { stream: 0, seq: 1, event: 3 });
  assert.equal(logColumns(rel.relation, 'app'), null, 'another schema\'s hx_event');
  assert.deepStrictEqual(logColumns({ ...rel.relation, name: 'hx_event_3' }, 'public'), { stream: 0, seq: 1, event: 3 });
  assert.equal(logColumns({ ...rel.relation, name: 'sessions' }, 'public'), null);

  const text = (s) => [['u32', Buffer.byteLength(s)], ['bytes', s]];
  const ins = d.decode(build([c('I'), ['u32', 16400], c('N'), ['u16', 5],
    c('t'), ...text('s:ü'), c('t'), ...text('42'), c('n'), c('t'), ...text('{"a": 1}'), c('u')]));
  assert.equal(ins.tag, 'I');
  assert.equal(ins.relation.name, 'hx_event');
  assert.deepStrictEqual(ins.values.map((v) => (v ? v.toString() : v)), ['s:ü', '42', null, '{"a": 1}', undefined]);
  assert.throws(() => d.decode(build([c('I'), ['u32', 1], c('N'), ['u16', 0]])), /unknown relation 1/);

  assert.deepStrictEqual(d.decode(build([c('C'), ['u8', 0], ['u64', 600], ['u64', 700], ['u64', 1]])),
    { tag: 'C', commitLsn: 600n, endLsn: 700n });
  assert.deepStrictEqual(d.decode(build([c('Y'), ['u32', 1]])), { tag: 'Y' });
});
