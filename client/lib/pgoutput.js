'use strict';
// The parts of PostgreSQL's streaming replication protocol, and of the
// pgoutput logical decoding plugin's messages (protocol version 1), that a
// follower of hx_event's inserts needs.  Pure functions over Buffers; the
// connection handling is in wal.js.
//
// On a replication connection in CopyBoth mode (after START_REPLICATION)
// every CopyData payload from the server is one of
//   'w' XLogData:  Int64 start LSN, Int64 end of WAL, Int64 send time,
//                  then one pgoutput message;
//   'k' keepalive: Int64 end of WAL, Int64 send time, Byte1 reply requested
// and the client sends
//   'r' standby status update: Int64 written, Int64 flushed, Int64 applied
//                  LSNs, Int64 client time, Byte1 reply requested.
// Times count microseconds since 2000-01-01 00:00 UTC.  All integers are
// big-endian.
//
// pgoutput version 1 sends, for each committed transaction that changed a
// published table, 'B' (begin), then for each change a 'R' (relation: the
// table's name and columns, before the first change of that table in the
// session and again after its definition changes) and an 'I' / 'U' / 'D'
// / 'T', then 'C' (commit).  With the "text" format (no binary option)
// each column of a tuple is 'n' (NULL), 'u' (an unchanged TOASTed value,
// only in updates) or 't' followed by Int32 length and the value's text
// output.

// 2000-01-01 00:00:00 UTC in Unix milliseconds: the replication protocol's epoch
const PG_EPOCH_MS = 946684800000n;

/** "16/B374D848" -> BigInt */
function parseLsn(text) {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(String(text));
  if (!m) throw new TypeError(`hxstate: not an LSN: ${text}`);
  return (BigInt(`0x${m[1]}`) << 32n) | BigInt(`0x${m[2]}`);
}

/** BigInt -> "16/B374D848" */
function formatLsn(lsn) {
  const hi = (lsn >> 32n).toString(16).toUpperCase();
  const lo = (lsn & 0xffffffffn).toString(16).toUpperCase();
  return `${hi}/${lo}`;
}

/**
 * One CopyData payload from the walsender: {tag: 'w', start, walEnd, data}
 * (data: the plugin's message), {tag: 'k', walEnd, replyRequested}, or
 * {tag} for anything else.
 */
function parseCopyData(buf) {
  switch (buf[0]) {
    case 0x77: // 'w'
      return { tag: 'w', start: buf.readBigUInt64BE(1), walEnd: buf.readBigUInt64BE(9), data: buf.subarray(25) };
    case 0x6b: // 'k'
      return { tag: 'k', walEnd: buf.readBigUInt64BE(1), replyRequested: buf[17] === 1 };
    default:
      return { tag: String.fromCharCode(buf[0]) };
  }
}

/**
 * A standby status update reporting lsn as written, flushed and applied:
 * the server may then recycle the WAL before it (the slot's
 * confirmed_flush_lsn advances).
 */
function standbyStatus(lsn, now = Date.now(), replyRequested = false) {
  const b = Buffer.alloc(34);
  b[0] = 0x72; // 'r'
  b.writeBigUInt64BE(lsn, 1);
  b.writeBigUInt64BE(lsn, 9);
  b.writeBigUInt64BE(lsn, 17);
  b.writeBigInt64BE((BigInt(now) - PG_EPOCH_MS) * 1000n, 25);
  b[33] = replyRequested ? 1 : 0;
  return b;
}

/**
 * The frontend messages of CopyBoth mode, framed: CopyData ('d', Int32
 * length, the payload) and CopyDone ('c', Int32 4).
 */
function copyDataMessage(payload) {
  const b = Buffer.alloc(5 + payload.length);
  b[0] = 0x64; // 'd'
  b.writeInt32BE(4 + payload.length, 1);
  payload.copy(b, 5);
  return b;
}

function copyDoneMessage() {
  const b = Buffer.alloc(5);
  b[0] = 0x63; // 'c'
  b.writeInt32BE(4, 1);
  return b;
}

/** A cursor over one message. */
class Reader {
  constructor(buf) {
    this.buf = buf;
    this.pos = 0;
  }

  byte() { return this.buf[this.pos++]; }

  int16() {
    const v = this.buf.readInt16BE(this.pos);
    this.pos += 2;
    return v;
  }

  int32() {
    const v = this.buf.readInt32BE(this.pos);
    this.pos += 4;
    return v;
  }

  uint32() {
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }

  int64() {
    const v = this.buf.readBigUInt64BE(this.pos);
    this.pos += 8;
    return v;
  }

  /** A NUL-terminated string. */
  cstring() {
    const end = this.buf.indexOf(0, this.pos);
    if (end < 0) throw new Error('hxstate: pgoutput: unterminated string');
    const s = this.buf.toString('utf8', this.pos, end);
    this.pos = end + 1;
    return s;
  }

  /** TupleData: an array of Buffers (a column's text), null (NULL) or undefined (unchanged TOAST). */
  tuple() {
    const n = this.int16();
    const values = new Array(n);
    for (let i = 0; i < n; i++) {
      const kind = this.byte();
      if (kind === 0x6e) { // 'n'
        values[i] = null;
      } else if (kind === 0x75) { // 'u'
        values[i] = undefined;
      } else if (kind === 0x74 || kind === 0x62) { // 't', 'b'
        const len = this.int32();
        values[i] = this.buf.subarray(this.pos, this.pos + len);
        this.pos += len;
      } else {
        throw new Error(`hxstate: pgoutput: unknown tuple column kind ${kind}`);
      }
    }
    return values;
  }
}

/**
 * Decodes pgoutput messages, keeping the relations it was told about.
 * decode() returns
 *   {tag: 'B', finalLsn, xid}          begin
 *   {tag: 'C', commitLsn, endLsn}      commit
 *   {tag: 'R', relation}               relation {id, schema, name, columns: [name]}
 *   {tag: 'I', relation, values}       insert: values[i] is column i's text (a Buffer) or null
 *   {tag}                              anything else (not needed here)
 */
class PgOutputDecoder {
  constructor() {
    this.relations = new Map(); // relation oid -> relation
  }

  decode(data) {
    const r = new Reader(data);
    const tag = String.fromCharCode(r.byte());
    switch (tag) {
      case 'B': {
        const finalLsn = r.int64();
        r.int64(); // commit time
        return { tag, finalLsn, xid: r.uint32() };
      }
      case 'C': {
        r.byte(); // flags
        const commitLsn = r.int64();
        return { tag, commitLsn, endLsn: r.int64() };
      }
      case 'R': {
        const id = r.uint32();
        const schema = r.cstring();
        const name = r.cstring();
        r.byte(); // replica identity
        const n = r.int16();
        const columns = [];
        for (let i = 0; i < n; i++) {
          r.byte(); // flags (part of the key)
          columns.push(r.cstring());
          r.uint32(); // type oid
          r.int32(); // type modifier
        }
        const relation = { id, schema, name, columns };
        this.relations.set(id, relation);
        return { tag, relation };
      }
      case 'I': {
        const id = r.uint32();
        const relation = this.relations.get(id);
        if (!relation) throw new Error(`hxstate: pgoutput: insert into unknown relation ${id}`);
        const kind = r.byte(); // 'N': a new tuple follows
        if (kind !== 0x4e) throw new Error(`hxstate: pgoutput: unexpected insert tuple kind ${kind}`);
        return { tag, relation, values: r.tuple() };
      }
      default:
        return { tag };
    }
  }
}

/**
 * The follower's fast path over an insert ('I' at data[at]): the three
 * columns it reads, found without allocating (no cursor object, no array
 * of columns, no Buffer per column), into out: stream and event as
 * [start, end) offsets of their text, seq as a number read from its
 * digits.  cols: {stream, seq, event}, the columns' positions.  Returns
 * false when a column is NULL or an unchanged TOAST value (the log's
 * columns are NOT NULL: an insert has neither) or seq is not a safe
 * integer.  Throws, as decode() does, on a message it cannot read.
 */
function scanInsert(data, at, cols, out) {
  if (data[at + 5] !== 0x4e) throw new Error(`hxstate: pgoutput: unexpected insert tuple kind ${data[at + 5]}`);
  const n = data.readInt16BE(at + 6);
  let pos = at + 8;
  let found = 0;
  for (let i = 0; i < n; i++) {
    const kind = data[pos++];
    if (kind === 0x74 || kind === 0x62) { // 't', 'b'
      const len = data.readInt32BE(pos);
      pos += 4;
      if (pos + len > data.length) throw new Error('hxstate: pgoutput: a column runs past its message');
      if (i === cols.stream) {
        out.streamStart = pos;
        out.streamEnd = pos + len;
        found++;
      } else if (i === cols.event) {
        out.eventStart = pos;
        out.eventEnd = pos + len;
        found++;
      } else if (i === cols.seq) {
        let v = 0;
        for (let j = pos; j < pos + len; j++) {
          const d = data[j] - 0x30;
          if (d < 0 || d > 9) return false;
          v = v * 10 + d;
        }
        if (len === 0 || !Number.isSafeInteger(v)) return false;
        out.seq = v;
        found++;
      }
      pos += len;
    } else if (kind === 0x6e || kind === 0x75) { // 'n', 'u'
      if (i === cols.stream || i === cols.seq || i === cols.event) return false;
    } else {
      throw new Error(`hxstate: pgoutput: unknown tuple column kind ${kind}`);
    }
  }
  return found === 3;
}

module.exports = {
  PG_EPOCH_MS, parseLsn, formatLsn, parseCopyData, standbyStatus, copyDataMessage, copyDoneMessage, PgOutputDecoder,
  scanInsert,
};
