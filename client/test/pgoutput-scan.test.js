'use strict';
// scanInsert (lib/pgoutput.js), the WAL transport's fast path over an
// insert, reads what PgOutputDecoder.decode reads: over random tuples
// (columns in any order and number, text and binary kinds, NULLs,
// multi-byte text, long values, the seq's digits), the stream and event
// text and the seq agree with the full decoder's; an insert with one of
// the three NULL (or unchanged) or a seq that is no integer is declined;
// a message it cannot read throws as decode() does.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { PgOutputDecoder, scanInsert } = require('../lib/pgoutput');
const { rng } = require('../../test/js/helpers');

function u16(v) { const b = Buffer.alloc(2); b.writeInt16BE(v); return b; }
function u32(v) { const b = Buffer.alloc(4); b.writeUInt32BE(v); return b; }
function i32(v) { const b = Buffer.alloc(4); b.writeInt32BE(v); return b; }

/** An 'I' message for relation 7, after `pad` bytes (its offset in a CopyData payload). */
function insertMessage(columns, pad = 0) {
  const parts = [Buffer.alloc(pad, 0x55), Buffer.from('I'), u32(7), Buffer.from('N'), u16(columns.length)];
  for (const c of columns) {
    if (c === null) parts.push(Buffer.from('n'));
    else if (c === undefined) parts.push(Buffer.from('u'));
    else {
      const v = Buffer.from(c.text, 'utf8');
      parts.push(Buffer.from(c.binary ? 'b' : 't'), i32(v.length), v);
    }
  }
  return Buffer.concat(parts);
}

function decoder(n) {
  const d = new PgOutputDecoder();
  d.relations.set(7, { id: 7, schema: 'public', name: 'hx_event', columns: Array.from({ length: n }, (_, i) => `c${i}`) });
  return d;
}

test('scanInsert agrees with the full decoder over random tuples', () => {
  const r = rng(20261127);
  const words = ['sessions:s-1', 'a', 'ü€𝄞', '', '{"type":"STATE_DELTA","delta":[]}', 'x'.repeat(70000)];
  for (let iter = 0; iter < 2000; iter++) {
    const n = 3 + r.int(5);
    const order = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = r.int(i + 1);
      [order[i], order[j]] = [order[j], order[i]];
    }
    const cols = { stream: order[0], seq: order[1], event: order[2] };
    const values = Array.from({ length: n }, () => {
      const roll = r.int(10);
      if (roll === 0) return null;
      return { text: words[r.int(words.length)], binary: roll === 1 };
    });
    const seq = r.int(3) === 0 ? String(Number.MAX_SAFE_INTEGER - r.int(1000)) : String(1 + r.int(100000));
    values[cols.stream] = { text: `sessions:${'k'.repeat(r.int(40))}-${iter}` };
    values[cols.seq] = { text: seq };
    values[cols.event] = { text: `{"n": ${iter}, "s": "${words[r.int(3)]}"}` };
    const pad = r.int(30);
    const msg = insertMessage(values, pad);
    const full = decoder(n).decode(msg.subarray(pad));
    const out = {};
    assert.equal(scanInsert(msg, pad, cols, out), true);
    assert.equal(msg.toString('utf8', out.streamStart, out.streamEnd), full.values[cols.stream].toString('utf8'));
    assert.equal(msg.toString('utf8', out.eventStart, out.eventEnd), full.values[cols.event].toString('utf8'));
    assert.equal(out.seq, Number(full.values[cols.seq].toString('latin1')));
  }
});

test('scanInsert declines NULL, unchanged or non-integer columns, and throws on what it cannot read', () => {
  const cols = { stream: 0, seq: 1, event: 2 };
  const ok = [{ text: 's' }, { text: '12' }, { text: '{}' }];
  const out = {};
  assert.equal(scanInsert(insertMessage(ok), 0, cols, out), true);
  assert.equal(out.seq, 12);
  for (const bad of [[null, ok[1], ok[2]], [ok[0], undefined, ok[2]], [ok[0], ok[1], null],
    [ok[0], { text: '1x' }, ok[2]], [ok[0], { text: '' }, ok[2]], [ok[0], { text: '-1' }, ok[2]],
    [ok[0], { text: '99999999999999999999' }, ok[2]], [ok[0], ok[1]]]) {
    assert.equal(scanInsert(insertMessage(bad), 0, cols, {}), false, JSON.stringify(bad));
  }
  const wrongKind = insertMessage(ok);
  wrongKind[5] = 0x4b; // 'K' instead of 'N'
  assert.throws(() => scanInsert(wrongKind, 0, cols, {}), /unexpected insert tuple kind/);
  const unknown = insertMessage(ok);
  unknown[8] = 0x7a; // a column kind 'z'
  assert.throws(() => scanInsert(unknown, 0, cols, {}), /unknown tuple column kind/);
  const short = insertMessage(ok).subarray(0, 14);
  assert.throws(() => scanInsert(short, 0, cols, {}));
  const long = insertMessage(ok);
  long.writeInt32BE(1000, 9); // the first column claims more bytes than the message has
  assert.throws(() => scanInsert(long, 0, cols, {}), /runs past its message/);
});
