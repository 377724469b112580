'use strict';
// The WAL transport: hx_event's inserts, decoded from the write-ahead log
// over a replication connection (a pg.Client with replication:
// 'database'), by hxstate's own output plugin or by pgoutput.
//
//   CREATE_REPLICATION_SLOT <name> TEMPORARY LOGICAL hxstate NOEXPORT_SNAPSHOT
//   START_REPLICATION SLOT <name> LOGICAL 0/0 (proto_version '1', max_tx_bytes '<n>')
//
// or, with pgoutput,
//
//   CREATE_REPLICATION_SLOT <name> TEMPORARY LOGICAL pgoutput NOEXPORT_SNAPSHOT
//   START_REPLICATION SLOT <name> LOGICAL 0/0 (proto_version '1', publication_names '"<pub>"')
//
// hxstate's plugin (the library's src/decode.c) sends one message per
// transaction that inserted events (its stream, seq and JSON text each)
// and nothing for the others, where pgoutput sends BEGIN, one INSERT per
// event and COMMIT, and a RELATION message per table: a third of the
// messages for the receiver to wake up for, frame and parse.  The server
// uses it only where output_plugin_libraries names it (link.js decides).
//
// A temporary slot belongs to its connection: the server drops it when the
// walsender exits (the connection closes, the process dies, or an
// administrator terminates it), so a follower that is gone retains no WAL.
// The price is that a slot cannot be resumed: after any reconnect the hub
// makes a new slot and catches every stream up from the log by seq.
//
// With failoverSlot (PostgreSQL 17 and later) the slot is a persistent
// failover slot instead, named by the hub's slotName: the one kind that
// synchronized_standby_slots holds back until the standbys have the WAL
// (holdback.js).  The hub drops it when it stops, and drops an idle one of
// its name before it makes its own (a hub that died left it).
//
// Every transaction that commits after the slot's consistent point (the
// moment CREATE_REPLICATION_SLOT returns) is streamed, in commit order,
// once it has committed; so a snapshot read after that moment plus the
// streamed events misses nothing, which is the same guarantee LISTEN gives
// a client that LISTENs before it reads.  A transaction's inserts are
// handed on at its commit message, not as they arrive: pg_failover_slots
// holds each message back only until the standbys have its own position,
// so only the commit message says that they have the whole transaction.
//
// The slot may be on a hot standby (PostgreSQL 16 and later): the
// replication connection then goes to the standby, which decodes the WAL
// it has replayed, and the primary does none of that work.  Making a slot
// there waits for the primary's next running-transactions record, which
// the hub asks for (pg_log_standby_snapshot on its reader, the primary)
// while it waits.  What the WAL carries is the log
// itself (the rows inserted into hx_event, decoded by the server for a
// role that may replicate), so its events are content, not hints.
//
// CopyBoth on pg's public API.  node-postgres (8.23) has no method for
// CopyBoth, and the client's `connection` property is internal.  It does
// have a documented extension point for queries that are more than a
// statement and its rows: client.query(submittable), with an object that
// has submit(connection) (the Submittable interface that pg-cursor and
// pg-query-stream are built on).  pg calls submit() with the connection
// (an instance of pg.Connection, a class pg exports), and then hands the
// object every protocol message of its query (handleCopyData for each
// CopyData, handleError, handleReadyForQuery, ...) while it is the active
// query.  StreamingQuery below is such an object: it sends
// START_REPLICATION with connection.query(text), receives the server's
// CopyData through handleCopyData, and writes its own messages (standby
// status updates, CopyDone, framed by pgoutput.js) to connection.stream,
// the connection's socket (TLS included); those two members are the ones
// pg's type declarations publish for a Connection.  The alternative, a
// replication client of our own on a net.Socket with pg-protocol (public
// too), would have to redo what pg does for every other connection of the
// hub (connection strings, TLS, SCRAM and the other authentication
// methods, keepalives, the connection hook), for the one connection that
// needs it least; so the hub keeps pg for all three.
const crypto = require('node:crypto');
const sql = require('./sql');
const { standbyStatus, copyDataMessage, copyDoneMessage, PgOutputDecoder, scanInsert } = require('./pgoutput');

/** A relation that is the event log (or one of its partitions, when the
 * publication does not publish via the root): the positions of the columns
 * the follower reads. */
function logColumns(relation, schema) {
  if (relation.schema !== schema) return null;
  if (relation.name !== 'hx_event' && !/^hx_event_\d+$/.test(relation.name)) return null;
  const stream = relation.columns.indexOf('stream');
  const seq = relation.columns.indexOf('seq');
  const event = relation.columns.indexOf('event');
  if (stream < 0 || seq < 0 || event < 0) return null;
  return { stream, seq, event };
}

/**
 * A statement that switches the connection to CopyBoth (START_REPLICATION),
 * as a pg Submittable: client.query(it) sends it, and pg hands it the
 * messages of its query.  done settles when the command ends: resolves
 * after its CommandComplete and ReadyForQuery, rejects with its error (or
 * the connection's).
 */
class StreamingQuery {
  /**
   * @param {string} text START_REPLICATION ...
   * @param {(chunk: Buffer) => void} onCopyData each CopyData's payload
   * @param {number} [coalesceMs=0] after the socket gave data, leave it
   *   unread this long (see WalStream's coalesceMs)
   */
  constructor(text, onCopyData, coalesceMs = 0) {
    this.text = text;
    this._onCopyData = onCopyData;
    this._coalesceMs = coalesceMs;
    this._paused = null;       // the timer that resumes reading
    this._stream = null;
    this.done = new Promise((resolve, reject) => {
      this._resolve = resolve;
      this._reject = reject;
    });
  }

  // -- the Submittable interface: pg calls these ------------------------------

  submit(connection) {
    this._stream = connection.stream;
    connection.query(this.text);
  }

  handleCopyData(msg) {
    // the socket's chunk is parsed to its end whatever this does; reading
    // stops after it, so that what comes meanwhile is read in one go
    if (this._coalesceMs > 0 && this._paused === null && this._stream) {
      const stream = this._stream;
      stream.pause();
      this._paused = setTimeout(() => {
        this._paused = null;
        stream.resume();
      }, this._coalesceMs);
    }
    this._onCopyData(msg.chunk);
  }
  handleReadyForQuery() { this._resolve(); }
  handleError(err) { this._reject(err); }
  handleCommandComplete() {}
  handleRowDescription() {}
  handleDataRow() {}
  handleEmptyQuery() {}
  handlePortalSuspended() {}
  handleCopyInResponse() {}

  // -- ours ---------------------------------------------------------------------

  /** Send a CopyData message; false when the socket is gone. */
  send(payload) {
    return this._write(copyDataMessage(payload));
  }

  /** End the copy (the server answers CopyDone and ends the command). */
  end() {
    this.unpause();
    return this._write(copyDoneMessage());
  }

  /** Read again now (the stream ends, or the connection closes). */
  unpause() {
    if (this._paused === null) return;
    clearTimeout(this._paused);
    this._paused = null;
    if (this._stream) this._stream.resume();
  }

  _write(buf) {
    const s = this._stream;
    if (!s || !s.writable) return false;
    s.write(buf);
    return true;
  }
}

class WalStream {
  /**
   * @param {import('pg').Client} client a connected replication connection
   * @param {object} o
   * @param {string} o.publication the publication of hx_event's inserts
   * @param {string} o.schema the extension's schema (where hx_event is)
   * @param {number} o.statusInterval ms between standby status updates
   * @param {(stream: string, seq: number, event: string|null, bytes: number) => void} o.onInsert
   *   one insert into the log at its transaction's commit: the stream,
   *   the seq, the event's JSON text and its length in bytes; the text
   *   null when the transaction held more than maxTxBytes of events (the
   *   log has it: read it there)
   * @param {(err: Error) => void} o.onError the stream failed or ended
   * @param {string|null} [o.slotName] the slot's name (a persistent
   *   failover slot's); null: a temporary slot of a name made up here
   * @param {boolean} [o.failover] make a failover slot (17 and later)
   * @param {() => void} [o.nudge] called every second while a slot on a
   *   standby waits for the primary's running-transactions record
   * @param {number} [o.maxTxBytes] bytes of events held per transaction
   * @param {(stream: string) => boolean} [o.wants] is an insert of this
   *   stream wanted (followed)?  Those that are not are dropped as they
   *   are decoded, their events never read.
   * @param {'hxstate'|'pgoutput'} [o.decoder='pgoutput'] the output plugin
   * @param {number} [o.coalesceMs=0] after the socket gave messages, leave
   *   it unread this long, so that those that come meanwhile are read (and
   *   handed on) in one go: under load a wake-up, a read and a parser pass
   *   serve many transactions, not one, for at most this much more
   *   latency; a stream that is quiet longer than that gets no delay
   */
  constructor(client, o) {
    this.client = client;
    this.publication = o.publication;
    this.schema = o.schema;
    this.statusInterval = o.statusInterval;
    this.onInsert = o.onInsert;
    this.onError = o.onError;
    this.slotName = o.slotName || null;
    this.failover = !!o.failover;
    this.nudge = o.nudge || null;
    this.maxTxBytes = o.maxTxBytes || 16 * 1024 * 1024;
    this.wants = o.wants || null;
    this.coalesceMs = o.coalesceMs || 0;
    this.plugin = o.decoder || 'pgoutput'; // the output plugin
    if (this.plugin !== 'hxstate' && this.plugin !== 'pgoutput') throw new TypeError(`not an output plugin of the hub: ${this.plugin}`);
    this.pending = [];       // the inserts of the transaction being received: stream, seq, text, bytes, ...
    this.pendingBytes = 0;
    this._scan = { streamStart: 0, streamEnd: 0, eventStart: 0, eventEnd: 0, seq: 0 }; // scanInsert's, reused
    this.standby = false;    // the slot is on a standby
    this.slot = null;
    this.consistentPoint = null;
    this.decoder = new PgOutputDecoder(); // pgoutput's relations
    this.lsn = 0n;           // what we confirm: the end of the last commit we processed
    this.inTransaction = false;
    this.closed = false;
    this.streaming = null;   // the START_REPLICATION query, active while streaming
    this.timer = null;
    this.stats = { messages: 0, inserts: 0, keepalives: 0, statusUpdates: 0 };
  }

  /**
   * Create the temporary slot; from its consistent point on, every commit
   * will be streamed.  Creating a logical slot waits until every
   * transaction that holds a transaction id when it starts has ended, so a
   * long transaction can hold it back indefinitely: after timeoutMs it
   * rejects with code HX_SLOT_TIMEOUT (closing the connection then ends
   * the attempt, and the slot with it).
   */
  async createSlot(timeoutMs) {
    // slot names: lower case letters, digits and underscores, 63 at most
    this.slot = this.slotName || `hx_${process.pid}_${crypto.randomBytes(6).toString('hex')}`;
    const { rows: [r] } = await this.client.query(sql.inRecovery());
    this.standby = !!r.standby;
    if (this.failover) await this.client.query(sql.dropIdleSlot(this.slot));
    const creating = this.client.query(sql.createSlot(this.slot, this.failover, this.plugin));
    creating.catch(() => {}); // after a timeout, its failure is the closed connection's
    let nudging = null;
    if (this.standby && this.nudge) {
      this.nudge();
      nudging = setInterval(this.nudge, 1000);
    }
    let timer;
    const timeout = new Promise((resolve, reject) => {
      timer = setTimeout(() => {
        const err = new Error(`the replication slot was not ready within ${timeoutMs} ms ` +
          '(a long transaction holds it back)');
        err.code = 'HX_SLOT_TIMEOUT';
        reject(err);
      }, timeoutMs);
    });
    try {
      const { rows } = await Promise.race([creating, timeout]);
      this.consistentPoint = rows[0] && rows[0].consistent_point;
    } finally {
      clearTimeout(timer);
      clearInterval(nudging);
    }
    return this.slot;
  }

  /** Start streaming; failures and the end of the stream go to onError. */
  start() {
    const text = sql.startReplication(this.slot, this.publication, this.plugin, Math.min(this.maxTxBytes, MAX_TX_BYTES));
    this.streaming = new StreamingQuery(text, (chunk) => this._receive(chunk), this.coalesceMs);
    this.client.query(this.streaming);
    this.streaming.done.then(() => this._fail(new Error('hxstate: the replication stream ended')),
      (err) => this._fail(err));
    this.timer = setInterval(() => this._status(false), this.statusInterval);
  }

  close() {
    this.closed = true;
    clearInterval(this.timer);
    this.timer = null;
    if (this.streaming) this.streaming.unpause();
  }

  /**
   * End the stream the polite way: CopyDone, to which the server answers
   * CopyDone and ends the command, so that the connection can then close
   * with a Terminate (the backend leaves pg_stat_activity before its
   * socket closes).  Resolves when the server has answered, or after ms.
   */
  async finish(ms) {
    const streaming = this.streaming;
    this.close();
    if (!streaming || !streaming.end()) return;
    let timer;
    const within = (p) => Promise.race([p.then(() => {}, () => {}),
      new Promise((resolve) => { timer = setTimeout(resolve, ms); })]).finally(() => clearTimeout(timer));
    await within(streaming.done);
    // a persistent slot would keep the WAL for a hub that is gone
    if (this.failover && this.slot) await within(this.client.query(sql.dropSlot(this.slot)));
  }

  _fail(err) {
    if (this.closed) return;
    this.close();
    this.onError(err);
  }

  _status(replyRequested) {
    if (this.closed) return;
    this.stats.statusUpdates++;
    this.streaming.send(standbyStatus(this.lsn, Date.now(), replyRequested));
  }

  /**
   * One CopyData payload.  The common messages (XLogData of begin, insert
   * and commit, and keepalives) are read in place, allocating nothing but
   * the strings the hub needs; relations through the decoder.
   */
  _receive(chunk) {
    if (this.closed) return;
    try {
      const tag = chunk[0];
      if (tag === 0x77) { // 'w': XLogData, its plugin's message at 25
        this.stats.messages++;
        if (this.plugin === 'hxstate') this._transaction(chunk, 25);
        else this._message(chunk, 25);
      } else if (tag === 0x6b) { // 'k': keepalive
        this.stats.keepalives++;
        // between transactions, everything up to walEnd has been sent to us
        const walEnd = chunk.readBigUInt64BE(1);
        if (!this.inTransaction && walEnd > this.lsn) this.lsn = walEnd;
        // the server closes a connection that does not answer this within wal_sender_timeout
        if (chunk[17] === 1) this._status(false);
      }
    } catch (err) {
      this._fail(err);
    }
  }

  /**
   * A message of hxstate's plugin: 'P' (a part of a transaction's events)
   * or 'C' (the rest, and the commit: its end LSN and time), then the
   * number of events, and for each its stream (length, UTF-8), seq
   * (int64), the length of its JSON text and a byte that says whether the
   * text follows (not past max_tx_bytes).  Integers big-endian.
   */
  _transaction(data, at) {
    const kind = data[at];
    let o = at + 1;
    let endLsn = 0n;
    if (kind === 0x43) { // 'C'
      endLsn = data.readBigUInt64BE(o);
      o += 16;
    } else if (kind !== 0x50) { // 'P'
      throw new Error(`hxstate: the decoder sent a message of unknown kind ${kind}`);
    }
    if (!this.inTransaction) {
      this.inTransaction = true;
      this.pending.length = 0; // one array, reused transaction after transaction
      this.pendingBytes = 0;
    }
    const n = data.readUInt32BE(o);
    o += 4;
    const end = data.length;
    for (let i = 0; i < n; i++) {
      if (o + 4 > end) throw truncated();
      const streamStart = o + 4;
      const streamEnd = streamStart + data.readUInt32BE(o);
      if (streamEnd + 13 > end) throw truncated();
      const high = data.readInt32BE(streamEnd);
      if (high < 0 || high >= 0x200000) throw new Error(`hxstate: the decoder sent seq ${data.readBigInt64BE(streamEnd)}, not a safe integer`);
      const seq = high * 4294967296 + data.readUInt32BE(streamEnd + 4);
      const bytes = data.readUInt32BE(streamEnd + 8);
      const withText = data[streamEnd + 12] === 1;
      const textStart = streamEnd + 13;
      o = withText ? textStart + bytes : textStart;
      if (o > end) throw truncated();
      this.stats.inserts++;
      const stream = data.toString('utf8', streamStart, streamEnd);
      if (this.wants !== null && !this.wants(stream)) continue;
      let text = null;
      if (withText) {
        text = data.toString('utf8', textStart, o);
        this.pendingBytes += bytes;
      }
      this.pending.push(stream, seq, text, bytes);
    }
    if (o !== end) throw new Error('hxstate: the decoder sent a message longer than its events');
    if (kind !== 0x43) return;
    this.inTransaction = false;
    // the transaction's inserts, now that its commit has come
    const list = this.pending;
    for (let i = 0; i < list.length; i += 4) this.onInsert(list[i], list[i + 1], list[i + 2], list[i + 3]);
    list.length = 0;
    this.pendingBytes = 0;
    if (endLsn > this.lsn) this.lsn = endLsn;
  }

  _message(data, at) {
    switch (data[at]) {
      case 0x42: // 'B'
        this.inTransaction = true;
        this.pending.length = 0; // one array, reused transaction after transaction
        this.pendingBytes = 0;
        break;
      case 0x43: { // 'C': flags, commit LSN, end LSN, time
        this.inTransaction = false;
        // the transaction's inserts, now that its commit has come
        const list = this.pending;
        for (let i = 0; i < list.length; i += 4) this.onInsert(list[i], list[i + 1], list[i + 2], list[i + 3]);
        list.length = 0;
        this.pendingBytes = 0;
        const endLsn = data.readBigUInt64BE(at + 10);
        if (endLsn > this.lsn) this.lsn = endLsn;
        break;
      }
      case 0x52: { // 'R'
        const m = this.decoder.decode(data.subarray(at));
        m.relation.log = logColumns(m.relation, this.schema);
        break;
      }
      case 0x49: { // 'I'
        const relation = this.decoder.relations.get(data.readUInt32BE(at + 1));
        if (!relation) throw new Error(`hxstate: pgoutput: insert into unknown relation ${data.readUInt32BE(at + 1)}`);
        const cols = relation.log;
        if (!cols) break;
        this.stats.inserts++;
        const out = this._scan;
        if (!scanInsert(data, at, cols, out)) break;
        const stream = data.toString('utf8', out.streamStart, out.streamEnd);
        if (this.wants !== null && !this.wants(stream)) break;
        // held until the commit (as text: the message's buffer is the
        // socket's, reused after this message); past maxTxBytes only its
        // stream and seq (the log has the event)
        const bytes = out.eventEnd - out.eventStart;
        let text = null;
        if (this.pendingBytes + bytes <= this.maxTxBytes) {
          this.pendingBytes += bytes;
          text = data.toString('utf8', out.eventStart, out.eventEnd);
        }
        this.pending.push(stream, out.seq, text, bytes);
        break;
      }
      default:
        break;
    }
  }
}

/** The most max_tx_bytes hxstate's plugin takes (half of PostgreSQL's largest allocation). */
const MAX_TX_BYTES = 536870911;

function truncated() {
  return new Error('hxstate: the decoder sent a message shorter than its events');
}

/** The WAL as the hub's transport: every stream is armed as soon as the slot exists. */
class WalTransport {
  constructor(conn, wal) {
    this.kind = 'wal';
    this.conn = conn;
    this.wal = wal;
    this.up = true;
    this.listening = null;
  }

  armed() { return true; }
  listen() {}
  unlisten() {}

  close() {
    this.up = false;
    this.wal.close();
  }

  /** End the replication command politely (see WalStream.finish). */
  finish(ms) {
    return this.wal.finish(ms);
  }
}

module.exports = { WalStream, WalTransport, StreamingQuery, logColumns };
