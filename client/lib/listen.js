'use strict';
// The LISTEN transport: one connection LISTENs on the channel of every
// followed stream (in batches of statements) and UNLISTENs a channel when
// its last stream goes.
//
// A notification is a hint, never content.  NOTIFY needs no privilege: any
// role that can connect can send any payload on any channel, so a payload
// that looks like an event may be forged.  Whatever it says, the
// transport passes on only the channel it came on and, when the payload
// parses as an event or a reference, the {stream, seq} it names; the hub
// then reads the events from the log, under the reader's own privileges
// (cursor.js's parseHint; the hub's _onHint).
const sql = require('./sql');
const { parseHint } = require('./cursor');
const { settle } = require('./emit');

class ListenTransport {
  /**
   * @param {object} conn {client, alive}: the connection to LISTEN on
   * @param {object} o
   * @param {number} o.batchSize channels per statement
   * @param {(channel: string, hint: object|null) => void} o.onHint a notification came: its hint
   * @param {(channels: string[]) => void} o.onListening these channels are LISTENed now
   * @param {(channels: string[]) => void} o.onUnlistened these channels are not LISTENed any more
   * @param {(err: Error) => void} o.onFailed a LISTEN or UNLISTEN failed (the connection is not trusted any more)
   */
  constructor(conn, o) {
    this.kind = 'listen';
    this.conn = conn;
    this.up = true;
    this._o = o;
    this.listening = new Set();
    this._listenQ = new Set();
    this._unlistenQ = new Set();
    this._pumping = false;
    this.done = Promise.resolve();
    this._onNotification = (msg) => {
      if (this.up) this._o.onHint(msg.channel, parseHint(msg.payload));
    };
    conn.client.on('notification', this._onNotification);
  }

  /** Is channel LISTENed now (what commits from now on is announced on it)? */
  armed(channel) {
    return this.listening.has(channel);
  }

  /** LISTEN on channel (an UNLISTEN not sent yet is cancelled). */
  listen(channel) {
    this._unlistenQ.delete(channel);
    if (this.listening.has(channel)) return;
    this._listenQ.add(channel);
    this._kick();
  }

  /** Its last stream went: UNLISTEN (or do not LISTEN after all). */
  unlisten(channel) {
    this._listenQ.delete(channel);
    if (!this.listening.has(channel)) return;
    this._unlistenQ.add(channel);
    this._kick();
  }

  close() {
    this.up = false;
    this.conn.client.removeListener('notification', this._onNotification);
  }

  /** The LISTEN or UNLISTEN in flight has ended (or ms have passed). */
  finish(ms) {
    return settle(this.done, ms);
  }

  _kick() {
    if (this._pumping || !this.up) return;
    this.done = this._pump();
  }

  /** LISTEN and UNLISTEN in batches: one simple-protocol query of many statements each. */
  async _pump() {
    this._pumping = true;
    try {
      while (this.up && this.conn.alive) {
        const q = this._unlistenQ.size > 0 ? this._unlistenQ : this._listenQ;
        if (q.size === 0) return;
        const verb = q === this._unlistenQ ? 'UNLISTEN' : 'LISTEN';
        const batch = [];
        for (const c of q) {
          q.delete(c);
          batch.push(c);
          if (batch.length >= this._o.batchSize) break;
        }
        try {
          await this.conn.client.query(sql.listen(verb, batch));
        } catch (err) {
          for (const c of batch) q.add(c);
          if (this.up) this._o.onFailed(err);
          return;
        }
        if (!this.up) return;
        if (verb === 'UNLISTEN') {
          for (const c of batch) this.listening.delete(c);
          this._o.onUnlistened(batch);
          continue;
        }
        for (const c of batch) this.listening.add(c);
        this._o.onListening(batch);
      }
    } finally {
      this._pumping = false;
    }
  }
}

module.exports = { ListenTransport };
