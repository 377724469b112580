'use strict';
// The WAL transport: hx_event's inserts, decoded from the write-ahead log
// by pgoutput over a replication connection (a pg.Client with
// replication: 'database').
//
//   CREATE_REPLICATION_SLOT <name> TEMPORARY LOGICAL pgoutput NOEXPORT_SNAPSHOT
//   START_REPLICATION SLOT <name> LOGICAL 0/0 (proto_version '1', publication_names '"<pub>"')
//
// A temporary slot belongs to its connection: the server drops it when the
// walsender exits (the connection closes, the process dies, or an
// administrator terminates it), so a follower that is gone retains no WAL.
// The price is that a slot cannot be resumed: after any reconnect the hub
// makes a new slot and catches every stream up from the log by seq.
//
// Every transaction that commits after the slot's consistent point (the
// moment CREATE_REPLICATION_SLOT returns) is streamed, in commit order,
// once it has committed; so a snapshot read after that moment plus the
// streamed events misses nothing, which is the same guarantee LISTEN gives
// a client that LISTENs before it reads.  What the WAL carries is the log
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
const { parseCopyData, standbyStatus, copyDataMessage, copyDoneMessage, PgOutputDecoder } = require('./pgoutput');

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
  constructor(text, onCopyData) {
    this.text = text;
    this._onCopyData = onCopyData;
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

  handleCopyData(msg) { this._onCopyData(msg.chunk); }
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
    return this._write(copyDoneMessage());
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
   * @param {(stream: Buffer, seq: Buffer, event: Buffer) => void} o.onInsert
   *   one insert into the log, columns as text
   * @param {(err: Error) => void} o.onError the stream failed or ended
   */
  constructor(client, o) {
    this.client = client;
    this.publication = o.publication;
    this.schema = o.schema;
    this.statusInterval = o.statusInterval;
    this.onInsert = o.onInsert;
    this.onError = o.onError;
    this.slot = null;
    this.consistentPoint = null;
    this.decoder = new PgOutputDecoder();
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
    this.slot = `hx_${process.pid}_${crypto.randomBytes(6).toString('hex')}`;
    const creating = this.client.query(sql.createSlot(this.slot));
    creating.catch(() => {}); // after a timeout, its failure is the closed connection's
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
    }
    return this.slot;
  }

  /** Start streaming; failures and the end of the stream go to onError. */
  start() {
    this.streaming = new StreamingQuery(sql.startReplication(this.slot, this.publication), (chunk) => this._receive(chunk));
    this.client.query(this.streaming);
    this.streaming.done.then(() => this._fail(new Error('hxstate: the replication stream ended')),
      (err) => this._fail(err));
    this.timer = setInterval(() => this._status(false), this.statusInterval);
  }

  close() {
    this.closed = true;
    clearInterval(this.timer);
    this.timer = null;
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
    try {
      await Promise.race([streaming.done.then(() => {}, () => {}),
        new Promise((resolve) => { timer = setTimeout(resolve, ms); })]);
    } finally {
      clearTimeout(timer);
    }
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

  _receive(chunk) {
    if (this.closed) return;
    try {
      const msg = parseCopyData(chunk);
      if (msg.tag === 'w') {
        this.stats.messages++;
        this._message(this.decoder.decode(msg.data));
      } else if (msg.tag === 'k') {
        this.stats.keepalives++;
        // between transactions, everything up to walEnd has been sent to us
        if (!this.inTransaction && msg.walEnd > this.lsn) this.lsn = msg.walEnd;
        // the server closes a connection that does not answer this within wal_sender_timeout
        if (msg.replyRequested) this._status(false);
      }
    } catch (err) {
      this._fail(err);
    }
  }

  _message(m) {
    switch (m.tag) {
      case 'B':
        this.inTransaction = true;
        break;
      case 'C':
        this.inTransaction = false;
        if (m.endLsn > this.lsn) this.lsn = m.endLsn;
        break;
      case 'R':
        m.relation.log = logColumns(m.relation, this.schema);
        break;
      case 'I': {
        const cols = m.relation.log;
        if (!cols) break;
        this.stats.inserts++;
        const v = m.values;
        // the log's columns are NOT NULL
        if (v[cols.stream] && v[cols.seq] && v[cols.event]) this.onInsert(v[cols.stream], v[cols.seq], v[cols.event]);
        break;
      }
      default:
        break;
    }
  }
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
