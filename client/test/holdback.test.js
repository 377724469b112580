'use strict';
// What keeps a follower from showing a commit that a failover loses, and
// what tells of a misconfigured holdback:
//   - the WAL transport hands a transaction's inserts on at its commit
//     message, not as they arrive (pg_failover_slots holds a message back
//     only until the standbys have its own position), copied out of the
//     socket's buffer; only followed streams' inserts are kept, and past
//     maxTxBytes only their seqs (read from the log);
//   - holdback.js's rules over what the server has: no setting, a named
//     slot missing, not physical, not streaming, the hub's slot not a
//     failover slot.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { WalStream } = require('../lib/wal');
const { holdbackProblem, slotNames } = require('../lib/holdback');

function build(parts) {
  return Buffer.concat(parts.map(([type, v]) => {
    switch (type) {
      case 'u8': return Buffer.from([v]);
      case 'u16': { const b = Buffer.alloc(2); b.writeInt16BE(v); return b; }
      case 'u32': { const b = Buffer.alloc(4); b.writeUInt32BE(v); return b; }
      case 'u64': { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(v)); return b; }
      case 'str': return Buffer.concat([Buffer.from(v, 'utf8'), Buffer.from([0])]);
      default: return Buffer.from(v);
    }
  }));
}
const c = (ch) => ['u8', ch.charCodeAt(0)];
const text = (s) => [['u32', Buffer.byteLength(s)], ['bytes', s]];
/** XLogData around a pgoutput message. */
const xlog = (msg) => Buffer.concat([build([c('w'), ['u64', 1], ['u64', 1], ['u64', 0]]), msg]);
const begin = () => xlog(build([c('B'), ['u64', 500], ['u64', 1], ['u32', 7]]));
const commit = (end) => xlog(build([c('C'), ['u8', 0], ['u64', end - 1], ['u64', end], ['u64', 1]]));
const relation = () => xlog(build([c('R'), ['u32', 1], ['str', 'public'], ['str', 'hx_event'], ['u8', 100], ['u16', 3],
  ['u8', 1], ['str', 'stream'], ['u32', 25], ['u32', 0xffffffff],
  ['u8', 1], ['str', 'seq'], ['u32', 20], ['u32', 0xffffffff],
  ['u8', 0], ['str', 'event'], ['u32', 3802], ['u32', 0xffffffff]]));
const insert = (stream, seq, event) => xlog(build([c('I'), ['u32', 1], c('N'), ['u16', 3],
  c('t'), ...text(stream), c('t'), ...text(String(seq)), c('t'), ...text(event)]));

function stream(o = {}) {
  const got = [];
  const wal = new WalStream({}, {
    publication: 'p', schema: 'public', statusInterval: 1000,
    onInsert: (s, q, e, bytes) => got.push([s, String(q), e, bytes]),
    onError: (err) => { throw err; },
    ...o,
  });
  return { wal, got };
}

test('a transaction\'s inserts are handed on at its commit, copied out of the message', () => {
  const { wal, got } = stream();
  wal._receive(begin());
  wal._receive(relation());
  const m1 = insert('sessions:a', 1, '{"type":"STATE_SNAPSHOT"}');
  wal._receive(m1);
  wal._receive(insert('sessions:b', 4, '{"type":"STATE_DELTA"}'));
  assert.deepEqual(got, [], 'nothing before the commit message');
  m1.fill(0); // the socket's buffer is reused for what comes next
  wal._receive(commit(900));
  assert.deepEqual(got, [['sessions:a', '1', '{"type":"STATE_SNAPSHOT"}', 25], ['sessions:b', '4', '{"type":"STATE_DELTA"}', 22]]);
  assert.equal(wal.lsn, 900n, 'the commit confirmed');
  // a transaction whose commit never comes (the connection dropped) hands on nothing
  wal._receive(begin());
  wal._receive(insert('sessions:a', 2, '{}'));
  assert.equal(got.length, 2);
  wal._receive(begin());
  wal._receive(commit(950));
  assert.equal(got.length, 2, 'a new transaction drops what an unfinished one held');
});

test('only followed streams are kept; past maxTxBytes a transaction\'s events are seqs to read from the log', () => {
  const { wal, got } = stream({ wants: (s) => s !== 'sessions:x', maxTxBytes: 10 });
  wal._receive(begin());
  wal._receive(relation());
  wal._receive(insert('sessions:x', 1, '{}'));
  wal._receive(insert('sessions:a', 1, '{"a":1}'));
  wal._receive(insert('sessions:a', 2, '{"a":12345}'));
  wal._receive(commit(100));
  assert.deepEqual(got, [['sessions:a', '1', '{"a":1}', 7], ['sessions:a', '2', null, 11]]);
});

test('slot names as PostgreSQL lists them', () => {
  assert.deepEqual(slotNames(''), []);
  assert.deepEqual(slotNames(null), []);
  assert.deepEqual(slotNames('a'), ['a']);
  assert.deepEqual(slotNames('a, B ,"C d","e""f"'), ['a', 'b', 'C d', 'e"f']);
});

test('the holdback rules', () => {
  const slots = [
    { slot_name: 'standby_1', slot_type: 'physical', active: true },
    { slot_name: 'standby_2', slot_type: 'physical', active: false },
    { slot_name: 'hub', slot_type: 'logical', active: true, failover: true },
    { slot_name: 'tmp', slot_type: 'logical', active: true, failover: false },
  ];
  const v18 = (synchronized) => ({ version: 180006, standby: false, synchronized, failover_slots: null, sync_names: '*', slots });
  assert.equal(holdbackProblem(v18('standby_1'), 'hub'), null);
  assert.match(holdbackProblem(v18(''), 'hub'), /synchronized_standby_slots is empty/);
  assert.match(holdbackProblem(v18('gone'), 'hub'), /"gone", which does not exist/);
  assert.match(holdbackProblem(v18('standby_1,standby_2'), 'hub'), /"standby_2", which no standby streams from/);
  assert.match(holdbackProblem(v18('hub'), 'hub'), /"hub", which is not a physical slot/);
  assert.match(holdbackProblem(v18('standby_1'), 'tmp'), /not a failover slot/);
  assert.match(holdbackProblem(v18('standby_1'), 'nope'), /"nope" does not exist/);
  assert.equal(holdbackProblem({ ...v18(''), standby: true }, 'hub'), null, 'decoding on a standby: nothing to hold back');
  const v15 = (failoverSlots) => ({ version: 150020, standby: false, synchronized: null, failover_slots: failoverSlots, sync_names: 'FIRST 1 (s1)', slots });
  assert.match(holdbackProblem(v15(null), null), /pg_failover_slots/);
  assert.equal(holdbackProblem(v15('standby_1'), null), null, 'pg_failover_slots holds every walsender back');
  assert.match(holdbackProblem(v15(''), null), /standby_slot_names is empty/);
});
