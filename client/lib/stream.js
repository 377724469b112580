'use strict';
// HxStream: follow one hxstate stream (one row of a table with an hx_stream
// trigger) and hand the application every AG-UI event exactly once, in seq
// order, with the state after it.
//
// The protocol, in the order a connection goes through it:
//
//   1. LISTEN on the stream's channel (hx_stream_channel(stream)) first, so
//      that every transaction committing from now on is announced to us;
//   2. read hx_stream_snapshot(table, key): the state and the seq of the
//      stream's last event, in one snapshot.  state + the events after seq
//      is the current state, and every such event either committed after
//      the LISTEN (we will hear of it) or is in the log (we can read it);
//   3. apply events in seq order: an event with seq <= ours is old news and
//      is ignored, seq == ours + 1 is applied, anything else is a gap that
//      we fill from the log (hx_stream_events after our seq, page by
//      page).  A notification that is a reference ({"ref": true, ...},
//      sent for events of 8000 bytes or more, or always with payload=ref)
//      is filled from the log the same way.  When the log no longer holds
//      our seq + 1 (hx_stream_trim removed it) we resync: read the snapshot
//      again, exactly as in step 2.
//
// The log is also polled every pollInterval ms, which catches events that
// were never notified (payload=none, or the NOTIFY queue above
// hxstate.notify_queue_threshold) and notifications that were lost.  When
// the connection drops we reconnect with exponential backoff, LISTEN again
// and catch up from the log after our seq (resyncing if it was trimmed).
//
// All processing (notifications, log reads, polls, reconnects) runs one
// task at a time on a promise chain, so a notification that arrives while
// the log is being read waits its turn and then finds itself old news.
const { EventEmitter } = require('node:events');
const pg = require('pg');
const { applyEvent, isStreamEnd } = require('./apply');

const SNAPSHOT_SQL = 'SELECT seq, state FROM hx_stream_snapshot($1::regclass, $2)';
const EVENTS_SQL = 'SELECT seq, event FROM hx_stream_events($1, $2, $3)';
const NAME_SQL =
  'SELECT s.stream, hx_stream_channel(s.stream) AS channel FROM hx_stream_snapshot($1::regclass, $2) s';

const noop = () => {};

class HxStream extends EventEmitter {
  /**
   * @param {object} options
   * @param {object|string} [options.pg] pg.Client config, or a connection
   *   string; by default pg's own defaults (PGHOST, PGDATABASE, ...)
   * @param {string} options.table the table with the hx_stream trigger
   *   (regclass syntax: 'sessions', 'app.sessions', '"Mixed"')
   * @param {string} options.key the row's key, as text
   * @param {number} [options.pollInterval=2000] ms between reads of the log;
   *   0 turns polling off (then only notifications bring news)
   * @param {{min: number, max: number}} [options.reconnect] backoff bounds
   *   in ms (default 100 to 5000, doubling, with jitter)
   * @param {number} [options.pageSize=1000] events per log read
   */
  constructor(options) {
    super();
    const o = options || {};
    if (o.table === undefined || o.table === null || o.key === undefined || o.key === null) {
      throw new TypeError('HxStream: options.table and options.key are required');
    }
    this.table = String(o.table);
    this.key = String(o.key);
    this._pgConfig = {
      keepAlive: true, // notice half-open connections (a listener is mostly idle)
      ...(typeof o.pg === 'string' ? { connectionString: o.pg } : o.pg),
    };
    this._pollInterval = o.pollInterval === undefined ? 2000 : Number(o.pollInterval);
    this._backoff = { min: 100, max: 5000, ...(o.reconnect || {}) };
    this._pageSize = o.pageSize === undefined ? 1000 : Math.max(1, Math.floor(o.pageSize));

    this._phase = 'idle';          // idle | starting | running | stopped
    this._stream = null;           // "<table>:<key>", from the server
    this._channel = null;          // hx_stream_channel(stream)
    this._client = null;           // the current connection, if any
    this._connected = false;       // _client is open, listening and caught up
    this._state = null;
    this._seq = 0;
    this._ended = false;
    this._tail = Promise.resolve(); // the task chain
    this._refillQueued = null;     // a catch-up task waiting to run
    this._pollTimer = null;
    this._reconnectTimer = null;
    this._attempt = 0;             // failed reconnects in a row
    this._stopping = null;
    this._closing = new Set();     // connections being closed
    /** Counters, for monitoring and tests. */
    this.stats = {
      notifications: 0, // notifications received on the stream's channel
      references: 0,    // ... of which references to the log
      polls: 0,         // timed reads of the log
      pages: 0,         // log pages read (hx_stream_events calls)
      resyncs: 0,       // snapshot reloads after the start
      disconnects: 0,
      reconnects: 0,
    };
  }

  /** The state after the last event handed out (treat it as read-only). */
  get state() { return this._state; }
  /** The seq of the last event handed out (0: before the first event). */
  get seq() { return this._seq; }
  /** The stream's name ("<table>:<key>"), known once started. */
  get stream() { return this._stream; }
  /** The LISTEN channel, known once started. */
  get channel() { return this._channel; }
  /** Has the stream ended (row deleted, or key changed) with no re-insert since? */
  get ended() { return this._ended; }
  /** Is there a live connection right now (listening and caught up)? */
  get connected() { return this._connected; }

  /**
   * Connect, LISTEN, read the snapshot and hand it out as the first
   * 'event'; resolves once that is done.  Rejects (and cleans up) when the
   * first connection fails; later failures are retried.
   */
  async start() {
    if (this._phase !== 'idle') throw new Error('HxStream: start() may be called once');
    this._phase = 'starting';
    try {
      await this._enqueue(() => this._open(true));
    } catch (err) {
      await this.stop();
      throw err;
    }
    if (this._phase !== 'running') throw new Error('HxStream: stopped while starting');
    this._schedulePoll();
  }

  /**
   * Stop following: no event is emitted after stop() is called; resolves
   * once the connection is closed and no timer is left.
   */
  stop() {
    if (this._stopping) return this._stopping;
    this._phase = 'stopped';
    clearTimeout(this._pollTimer);
    clearTimeout(this._reconnectTimer);
    this._pollTimer = this._reconnectTimer = null;
    const client = this._client;
    this._client = null;
    this._connected = false;
    if (client) this._close(client);
    this._stopping = (async () => {
      await this._tail;
      // dropped connections too: stop() leaves no socket behind
      while (this._closing.size > 0) await Promise.all([...this._closing]);
    })();
    return this._stopping;
  }

  /**
   * The current state as a STATE_SNAPSHOT event (metadata.synthetic: true),
   * for a consumer that joins late, e.g. a browser connecting to a gateway.
   */
  snapshotEvent() {
    return syntheticSnapshot(this._stream, this._seq, this._state);
  }

  // -------------------------------------------------------------------
  // The task chain
  // -------------------------------------------------------------------

  /** Run fn after every task queued before it; the promise is fn's. */
  _enqueue(fn) {
    const run = this._tail.then(() => (this._phase === 'stopped' ? undefined : fn()));
    this._tail = run.then(noop, noop);
    return run;
  }

  /** Queue a catch-up from the log, unless one is already waiting. */
  _requestRefill() {
    if (!this._refillQueued) {
      this._refillQueued = this._enqueue(() => {
        this._refillQueued = null;
        return this._catchUp();
      }).catch((err) => this._failed(err));
    }
    return this._refillQueued;
  }

  // -------------------------------------------------------------------
  // Connections
  // -------------------------------------------------------------------

  /**
   * Open a connection and LISTEN; then read the snapshot (initial) or
   * catch up from the log after our seq (a reconnect).
   */
  async _open(initial) {
    if (this._client) return;
    const client = new pg.Client(this._pgConfig);
    // The listeners stay for the client's lifetime: an 'error' without a
    // listener would crash the process.  _drop ignores clients that are
    // not (or no longer) the current one.
    client.on('error', (err) => this._drop(client, err));
    client.on('end', () => this._drop(client, new Error('hxstate: connection closed')));
    client.on('notification', (msg) => this._onNotification(client, msg));
    try {
      await client.connect();
      if (!this._stream) {
        // The stream's name, as the trigger spells it ("<prefix>:<key>").
        const { rows } = await client.query(NAME_SQL, [this.table, this.key]);
        this._stream = rows[0].stream;
        this._channel = rows[0].channel;
      }
      if (this._phase === 'stopped') throw new Error('HxStream: stopped');
      this._client = client; // from here on, notifications count
      await client.query(`LISTEN ${client.escapeIdentifier(this._channel)}`);
      if (initial) {
        await this._resync(client, true);
        if (this._client === client) this._phase = 'running';
      } else {
        await this._catchUp();
      }
      if (this._client !== client) throw new Error('hxstate: connection lost while opening');
      this._connected = true;
    } catch (err) {
      if (this._client === client) this._client = null;
      this._close(client);
      throw err;
    }
  }

  /** Close a connection; stop() waits for it. */
  _close(client) {
    const closing = client.end().catch(noop);
    this._closing.add(closing);
    closing.then(() => this._closing.delete(closing));
  }

  /** client failed or ended: forget it and reconnect (if it was ours). */
  _drop(client, err) {
    if (client !== this._client) return;
    this._client = null;
    this._connected = false;
    this._close(client);
    if (this._phase !== 'running') return; // start() reports it
    this.stats.disconnects++;
    this._emitSafe('disconnect', err);
    this._emitError(err);
    this._scheduleReconnect();
  }

  /** A task failed (a query error, say): start over on a new connection. */
  _failed(err) {
    if (this._phase !== 'running') return;
    if (this._client) {
      this._drop(this._client, err);
    } else {
      this._emitError(err);
      this._scheduleReconnect();
    }
  }

  _scheduleReconnect() {
    if (this._phase !== 'running' || this._reconnectTimer) return;
    const { min, max } = this._backoff;
    const base = Math.min(max, min * 2 ** Math.min(this._attempt, 30));
    const delay = base / 2 + (Math.random() * base) / 2;
    this._attempt++;
    this._reconnectTimer = setTimeout(() => {
      this._reconnectTimer = null;
      this._enqueue(() => this._open(false)).then(
        () => {
          if (this._phase !== 'running' || !this._connected) return;
          this._attempt = 0;
          this.stats.reconnects++;
          this._emitSafe('reconnect');
        },
        (err) => {
          if (this._phase !== 'running') return;
          this._emitError(err);
          this._scheduleReconnect();
        });
    }, delay);
  }

  _schedulePoll() {
    if (this._phase !== 'running' || !(this._pollInterval > 0)) return;
    this._pollTimer = setTimeout(() => {
      this._pollTimer = null;
      this.stats.polls++;
      this._requestRefill().then(() => this._schedulePoll());
    }, this._pollInterval);
  }

  // -------------------------------------------------------------------
  // Events
  // -------------------------------------------------------------------

  _onNotification(client, msg) {
    if (client !== this._client || this._phase === 'stopped' || msg.channel !== this._channel) return;
    this.stats.notifications++;
    let payload = null;
    try {
      payload = JSON.parse(msg.payload);
    } catch (err) {
      // not ours to interpret: the log has whatever it announced
    }
    if (payload && payload.ref === true) {
      this.stats.references++;
      if (payload.stream !== this._stream) return; // another stream (a hashed channel)
      if (payload.seq <= this._seq) return;        // we have it already
    }
    const meta = payload && payload.metadata;
    if (!payload || payload.ref === true || !meta || typeof meta.seq !== 'number') {
      this._requestRefill();
      return;
    }
    if (meta.stream !== this._stream) return; // another stream (a hashed channel)
    this._enqueue(() => this._deliver(payload)).catch((err) => this._failed(err));
  }

  /** A notified event: apply it if it is next, fill the gap if it is ahead. */
  async _deliver(event) {
    if (this._phase !== 'running' || !this._client) return;
    const seq = event.metadata.seq;
    if (seq <= this._seq) return;
    if (seq === this._seq + 1) {
      await this._applyOrResync(event, seq, this._client);
    } else {
      await this._catchUp();
    }
  }

  /**
   * Read the log after our seq, page by page, and apply it; resync when
   * the log does not continue from our seq (it was trimmed).
   */
  async _catchUp() {
    const client = this._client;
    if (this._phase !== 'running' || !client) return;
    for (;;) {
      const from = this._seq;
      const { rows } = await client.query(EVENTS_SQL, [this._stream, from, this._pageSize]);
      if (client !== this._client) return;
      this.stats.pages++;
      let resync = false;
      for (const row of rows) {
        const seq = Number(row.seq);
        if (seq <= this._seq) continue;
        if (seq !== this._seq + 1) { // the log skips our next event
          resync = true;
          break;
        }
        await this._applyOrResync(row.event, seq, client);
        if (client !== this._client) return;
      }
      if (resync) {
        await this._resync(client, false);
        if (client !== this._client) return;
        continue; // and read what came after the snapshot
      }
      if (rows.length < this._pageSize) return;
    }
  }

  /** Apply the next event; a delta that does not apply means resync. */
  async _applyOrResync(event, seq, client) {
    const before = this._state;
    let after;
    try {
      after = applyEvent(before, event);
    } catch (err) {
      err.message = `hxstate: event ${seq} of ${this._stream} does not apply: ${err.message}`;
      this._emitError(err);
      await this._resync(client, false);
      return;
    }
    const end = isStreamEnd(event);
    this._state = after;
    this._seq = seq;
    if (end) this._ended = true;
    else if (event.type === 'STATE_SNAPSHOT') this._ended = false;
    this._emitSafe('event', event, after);
    if (end) this._emitSafe('end', event, before);
  }

  /**
   * Read the snapshot and start over from it.  The application gets it as
   * an 'event': a STATE_SNAPSHOT marked metadata.synthetic = true, or,
   * when the stream's last event is hx.stream_end, that logged event
   * itself (the row is gone, state is null).  After the start, a 'resync'
   * event comes first.
   */
  async _resync(client, initial) {
    const { rows } = await client.query(SNAPSHOT_SQL, [this.table, this.key]);
    const seq = Number(rows[0].seq);
    const state = rows[0].state === undefined ? null : rows[0].state;
    let last = null;
    if (seq > 0) {
      // the log always keeps a stream's last event (hx_stream_trim)
      const r = await client.query(EVENTS_SQL, [this._stream, seq - 1, 1]);
      if (r.rows.length > 0 && Number(r.rows[0].seq) === seq) last = r.rows[0].event;
    }
    if (client !== this._client) return;
    const previousSeq = this._seq;
    this._state = state;
    this._seq = seq;
    this._ended = isStreamEnd(last);
    if (!initial) {
      this.stats.resyncs++;
      this._emitSafe('resync', { seq, previousSeq, state });
    }
    if (this._ended) {
      this._emitSafe('event', last, state);
      this._emitSafe('end', last, null);
    } else {
      this._emitSafe('event', syntheticSnapshot(this._stream, seq, state), state);
    }
  }

  // -------------------------------------------------------------------
  // Emitting
  // -------------------------------------------------------------------

  /**
   * Emit to the application.  A listener that throws must not break the
   * stream's bookkeeping, so its exception is rethrown on its own tick (as
   * an uncaught exception, the same as a throw in any other callback).
   */
  _emitSafe(name, ...args) {
    if (this._phase === 'stopped') return;
    try {
      this.emit(name, ...args);
    } catch (err) {
      process.nextTick(() => { throw err; });
    }
  }

  /**
   * 'error' reports problems the stream recovers from by itself (a lost
   * connection, a failed query); it is emitted only when someone listens,
   * so an application that does not care is not crashed by it.
   */
  _emitError(err) {
    if (this.listenerCount('error') > 0) this._emitSafe('error', err);
  }
}

function syntheticSnapshot(stream, seq, state) {
  return {
    type: 'STATE_SNAPSHOT',
    snapshot: state,
    timestamp: Date.now(),
    metadata: { stream, seq, synthetic: true },
  };
}

module.exports = { HxStream };
