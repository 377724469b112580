'use strict';
// The hub's link to the server: the reader connection and the transport,
// opened, chosen, watched and reopened.
//
//   - the reader runs every query (reader.js); each time it connects, the
//     extension's version and schema are checked again (a reconnect may
//     reach another server: a failover);
//   - the transport: the WAL (wal.js) when transport is 'wal', or 'auto'
//     and the server, the role and the publication allow it; LISTEN
//     (listen.js) otherwise, saying why.  With sharedConnection (LISTEN
//     only) the reader's connection is the transport's too;
//   - a connection that fails or ends is closed and forgotten, and what is
//     missing is opened again after a backoff delay (backoff.js), one
//     attempt at a time, so no connection is ever opened twice and a
//     replaced one is closed before its successor opens: never more than
//     three connections (two in steady state).  The delay starts over only
//     once the connections have stayed up for reconnect.max ms: a server
//     that accepts a connection and drops it at once (or a connection
//     whose statements all fail) is not retried at the shortest delay
//     forever.  A statement that fails on a working connection does not
//     drop it (reader.js).
//
// Its host (the hub) hears of it all through the callbacks it gives: the
// reader's connection (reader), the transport up or down (up, down), both
// ready (ready), a connection lost (lost), back again (back), the
// transport chosen (transport), a failed reconnect (error), and the
// transport's news (wants, walInsert, hint, listening, unlistened).
const sql = require('./sql');
const { Backoff } = require('./backoff');
const { Connections } = require('./connections');
const { ListenTransport } = require('./listen');
const { WalStream, WalTransport } = require('./wal');
const { chooseDecoder, publicationBlocker, pluginRefused } = require('./decoder');
const { isConnectionError } = require('./errors');
const { settle } = require('./emit');

// What the hub needs from the database: the batched functions of 0.5.0.
const MIN_VERSION = [0, 5, 0];

function versionAtLeast(text, min) {
  const v = String(text).split('.').map((x) => parseInt(x, 10) || 0);
  for (let i = 0; i < min.length; i++) {
    if ((v[i] || 0) !== min[i]) return (v[i] || 0) > min[i];
  }
  return true;
}

class Link {
  /**
   * @param {object} o the hub's options: pg, applicationName, transport,
   *   decoder, publication, sharedConnection, batchSize, statusInterval,
   *   slotTimeout, reconnect
   * @param {{reader(conn, schema), up(tx), ready(), down(), lost(err, role), back(),
   *   transport(kind, reason), error(err), wants(stream), walInsert(stream, seq, event, bytes), hint(channel, hint),
   *   listening(channels), unlistened(channels)}} host what the hub hears
   */
  constructor(o, host) {
    this._o = o;
    this._host = host;
    this.connections = new Connections({
      pg: o.pg,
      applicationName: o.applicationName,
      onLost: (conn, err) => this._lost(conn, err),
    });
    this._backoff = new Backoff(o.reconnect, o.reconnect.max); // healthy: up for the longest delay
    this._state = 'idle';         // idle | starting | running | stopped
    this.reader = null;           // {role, client, alive}
    this.tx = null;               // a ListenTransport or a WalTransport
    /** 'wal' | 'listen' once chosen, and why 'auto' chose LISTEN. */
    this.transport = null;
    this.transportReason = null;
    /** The output plugin decoding the WAL ('hxstate' | 'pgoutput'; null over LISTEN), and why not hxstate's. */
    this.decoder = null;
    this.decoderReason = null;
    this._decoder = 'pgoutput';   // what the next WAL connection asks for (_walBlocker chooses)
    this._decoderReason = null;
    this._prerequisites = null;
    this.schema = null;           // the extension's schema, quoted
    this.schemaName = null;
    this._reconnectTimer = null;
    this._establishing = null;    // the reconnect attempt running
    this._down = false;           // lost a connection, not yet back
  }

  /** Are the reader and the transport connected now? */
  get connected() {
    return !!(this.reader && this.reader.alive && this.tx && this.tx.conn.alive);
  }

  /** The first connections; rejects if they cannot be made (the hub then stops). */
  open() {
    this._state = 'starting';
    return this._establish();
  }

  /** Started: from now on what is lost is reconnected. */
  run() {
    this._state = 'running';
    this._backoff.up(Date.now());
    if (!this.connected) { // lost while starting
      this._down = true;
      this._scheduleReconnect();
    }
  }

  /**
   * Close everything once reading (the statement in flight) has ended:
   * each connection then closes with a Terminate, not by dropping its
   * socket, so the server ends the backend before it closes the socket,
   * and the promise resolves with the backends gone.  Connections being
   * opened are closed as soon as they are open, and dropped ones too: no
   * socket is left behind.
   */
  stop(reading) {
    this._state = 'stopped';
    clearTimeout(this._reconnectTimer);
    this._reconnectTimer = null;
    const tx = this.tx;
    const reader = this.reader;
    this.tx = null;
    this.reader = null;
    if (tx) tx.close();
    return (async () => {
      await settle(Promise.all([reading, this._establishing]), 2000);
      if (tx) await tx.finish(2000);
      if (tx && tx.conn !== reader) this.connections.close(tx.conn);
      if (reader) this.connections.close(reader);
      await this.connections.closed();
    })();
  }

  /** conn failed (a statement said the connection is gone): close it, and reconnect. */
  lose(conn, err) {
    this.connections.lose(conn, err);
  }

  _stillWanted = () => this._state !== 'stopped';

  _closeTx() {
    const tx = this.tx;
    this.tx = null;
    if (!tx) return;
    tx.close();
    if (tx.conn !== this.reader) this.connections.close(tx.conn);
    this._host.down();
  }

  /** A connection failed or ended (it is closed): forget it, and reconnect what is missing. */
  _lost(conn, err) {
    if (this._state === 'stopped') return;
    if (this.tx && this.tx.conn === conn) this._closeTx();
    if (this.reader === conn) this.reader = null;
    if (this._state !== 'running') return; // the hub's start() reports it
    this._backoff.lost(Date.now());
    this._down = true;
    this._host.lost(err, conn.role);
    this._scheduleReconnect();
  }

  /** Reconnect what is missing, after a backoff delay; one attempt at a time. */
  _scheduleReconnect() {
    if (this._state !== 'running' || this._reconnectTimer || this._establishing) return;
    this._reconnectTimer = setTimeout(() => {
      this._reconnectTimer = null;
      this._establishing = this._establish().then(() => {
        if (this._state !== 'running' || !this.connected) return;
        this._backoff.up(Date.now());
        if (this._down) {
          this._down = false;
          this._host.back();
        }
      }, (err) => {
        if (this._state === 'running') this._host.error(err);
      }).then(() => {
        this._establishing = null;
        if (this._state === 'running' && !this.connected) this._scheduleReconnect();
      });
    }, this._backoff.next());
  }

  /** Open whatever is missing: the reader, then the transport. */
  async _establish() {
    if (!this.reader || !this.reader.alive) {
      const conn = await this.connections.connect(this._o.sharedConnection ? 'listen' : 'reader', this._stillWanted);
      try {
        // every time: a reconnect may reach another server (a failover)
        await this._checkExtension(conn);
      } catch (err) {
        this.connections.close(conn);
        throw err;
      }
      if (this._state === 'stopped') {
        this.connections.close(conn);
        throw new Error('HxHub: stopped');
      }
      this.reader = conn;
      this._host.reader(conn, this.schema);
    }
    if (!this.tx) await this._openTransport();
    this._host.ready();
  }

  async _checkExtension(conn) {
    const { rows } = await conn.client.query(sql.extension());
    if (rows.length === 0) throw new Error('HxHub: the hxstate extension is not installed in this database');
    if (!versionAtLeast(rows[0].extversion, MIN_VERSION)) {
      throw new Error(`HxHub: hxstate ${rows[0].extversion} is too old: 0.5.0 or later is needed ` +
        '(ALTER EXTENSION hxstate UPDATE)');
    }
    this.schemaName = rows[0].nspname;
    this.schema = sql.quoteIdent(rows[0].nspname);
  }

  /**
   * Why the WAL transport cannot be used here (null: it can): wal_level,
   * max_wal_senders, the role's REPLICATION attribute, and what the
   * decoder needs (decoder.js: hxstate's plugin named in
   * output_plugin_libraries, or pgoutput's publication).  Chooses the
   * decoder (this._decoder) as it goes.
   */
  async _walBlocker(conn) {
    const { rows } = await conn.client.query(sql.walPrerequisites(this._o.publication, this.schemaName));
    const r = rows[0];
    if (r.wal_level !== 'logical') return `wal_level is ${r.wal_level}, not logical`;
    if (!(r.senders > 0)) return 'max_wal_senders is 0';
    if (!r.replication) return `role "${r.role}" has no REPLICATION attribute`;
    this._prerequisites = r;
    const choice = chooseDecoder(this._o.decoder, r.plugins);
    this._decoder = choice.decoder;
    this._decoderReason = choice.reason;
    if (choice.blocker) return choice.blocker;
    return this._decoder === 'pgoutput' ? publicationBlocker(r, this._o.publication) : null;
  }

  async _openTransport() {
    let kind = this._o.transport;
    let reason = null;
    if (kind !== 'listen') {
      const blocker = await this._walBlocker(this.reader);
      if (blocker) {
        if (kind === 'wal') throw new Error(`HxHub: cannot follow over the WAL: ${blocker}`);
        kind = 'listen';
        reason = `${blocker}: following over LISTEN`;
      }
    }
    if (kind !== 'listen') {
      try {
        await this._openWal();
        this._chose('wal', null);
        return;
      } catch (err) {
        const refused = err.code === 'HX_SLOT_TIMEOUT' || !isConnectionError(err);
        if (this._o.transport === 'wal' || !refused || this._state === 'stopped') throw err;
        // the server refused the replication connection or the slot
        // (pg_hba.conf, max_replication_slots, ...), or the slot took too
        // long: LISTEN instead, until the next reconnect tries again
        kind = 'listen';
        reason = `the WAL transport failed (${err.message}): following over LISTEN`;
      }
    }
    await this._openListen();
    this._chose('listen', reason);
  }

  _chose(kind, reason) {
    if (kind === 'listen') this.decoder = this.decoderReason = null;
    const changed = this.transport !== kind || this.transportReason !== reason;
    this.transport = kind;
    this.transportReason = reason;
    if (changed) this._host.transport(kind, reason);
  }

  async _openWal() {
    const conn = await this.connections.connect('replication', this._stillWanted);
    let tx = null;
    try {
      let wal = this._walStream(conn);
      try {
        await wal.createSlot(this._o.slotTimeout);
      } catch (err) {
        // 'auto': a library without the plugin (older than 0.7.0), or a
        // server that refuses it: pgoutput, if its publication is there
        if (this._o.decoder !== 'auto' || this._decoder !== 'hxstate' || !pluginRefused(err) || !conn.alive) throw err;
        this._decoder = 'pgoutput';
        this._decoderReason = `hxstate's output plugin was refused (${err.message}): decoding with pgoutput`;
        const blocker = publicationBlocker(this._prerequisites, this._o.publication);
        if (blocker) throw new Error(`HxHub: cannot follow over the WAL: ${this._decoderReason}, and ${blocker}`);
        wal = this._walStream(conn);
        await wal.createSlot(this._o.slotTimeout);
      }
      if (this._state === 'stopped' || !conn.alive) throw new Error('HxHub: stopped');
      tx = new WalTransport(conn, wal);
      this.tx = tx;
      this.decoder = this._decoder;
      this.decoderReason = this._decoderReason;
      wal.start();
    } catch (err) {
      if (!tx) this.connections.close(conn);
      throw err;
    }
    this._host.up(tx);
  }

  _walStream(conn) {
    return new WalStream(conn.client, {
        publication: this._o.publication,
        schema: this.schemaName,
        statusInterval: this._o.statusInterval,
        slotName: this._o.slotName,
        failover: this._o.failoverSlot,
        wants: (stream) => this._host.wants(stream),
        onInsert: (stream, seq, event, bytes) => this._host.walInsert(stream, seq, event, bytes),
        onError: (err) => this.connections.lose(conn, err),
        // a slot on a standby waits for the primary's next running-transactions record
        nudge: () => {
          const r = this.reader;
          if (r && r.alive) r.client.query(sql.logStandbySnapshot()).catch(() => {});
        },
        decoder: this._decoder,
        coalesceMs: this._o.coalesceMs,
      });
  }

  async _openListen() {
    const conn = this._o.sharedConnection ? this.reader : await this.connections.connect('listen', this._stillWanted);
    const host = this._host;
    const tx = new ListenTransport(conn, {
      batchSize: this._o.batchSize,
      onHint: (channel, hint) => host.hint(channel, hint),
      onListening: (channels) => host.listening(channels),
      onUnlistened: (channels) => host.unlistened(channels),
      onFailed: (err) => { if (this.tx === tx) this.connections.lose(conn, err); },
    });
    this.tx = tx;
    host.up(tx);
  }
}

module.exports = { Link };
