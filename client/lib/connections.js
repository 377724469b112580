'use strict';
// The hub's connections: each a pg.Client opened with the config that the
// hub's pg option gives for its role ('reader', 'listen' or
// 'replication'), counted while open, and waited for on close.  A
// connection is {role, client, alive}; once it fails or ends it is dead
// (alive: false) and onLost hears of it, once.
const pg = require('pg');
const { noop } = require('./emit');

class Connections {
  /**
   * @param {object} o
   * @param {object|string|function} o.pg a pg.Client config, a connection
   *   string, or (role) => config (or a promise of one)
   * @param {string} o.applicationName the fallback application_name
   * @param {(conn: object, err: Error) => void} o.onLost a live connection failed or ended
   */
  constructor(o) {
    this._o = o;
    this._opening = new Set();   // connections being opened
    this._closing = new Set();   // client.end() promises
    /** Open now, and the most at once. */
    this.open = 0;
    this.maxOpen = 0;
  }

  async config(role) {
    const option = this._o.pg;
    let c = typeof option === 'function' ? await option(role) : option;
    if (typeof c === 'string') c = { connectionString: c };
    c = {
      keepAlive: true, // notice half-open connections (a transport is mostly idle)
      fallback_application_name: this._o.applicationName,
      ...(c || {}),
    };
    if (role === 'replication') c.replication = 'database';
    return c;
  }

  /**
   * Open a connection for role; rejects if it fails, or if stillWanted()
   * says no once it is open (then it is closed again).  close() waits for
   * opens in flight.
   */
  connect(role, stillWanted) {
    const opening = this._connect(role, stillWanted);
    const settled = opening.then(noop, noop);
    this._opening.add(settled);
    settled.then(() => this._opening.delete(settled));
    return opening;
  }

  async _connect(role, stillWanted) {
    const client = new pg.Client(await this.config(role));
    const conn = { role, client, alive: false };
    // The listeners stay for the client's lifetime: an 'error' without a
    // listener would crash the process.  Dead connections are ignored.
    client.on('error', (err) => this._lost(conn, err));
    client.on('end', () => this._lost(conn, new Error('hxstate: connection closed')));
    try {
      await client.connect();
    } catch (err) {
      this.close(conn);
      throw err;
    }
    if (!stillWanted()) {
      this.close(conn);
      throw new Error('HxHub: stopped');
    }
    conn.alive = true;
    this.open++;
    if (this.open > this.maxOpen) this.maxOpen = this.open;
    return conn;
  }

  /** conn failed (a socket error, or a statement that says the connection is gone): close it, tell onLost. */
  lose(conn, err) {
    this._lost(conn, err);
  }

  _lost(conn, err) {
    if (!conn.alive) return;
    this.close(conn);
    this._o.onLost(conn, err);
  }

  /** Close a connection (it is dead from now on); closed() waits for it. */
  close(conn) {
    if (conn.alive) {
      conn.alive = false;
      this.open--;
    }
    const closing = conn.client.end().catch(noop);
    this._closing.add(closing);
    closing.then(() => this._closing.delete(closing));
  }

  /** Resolves once no connection is being opened or closed: none is left behind. */
  async closed() {
    while (this._opening.size > 0 || this._closing.size > 0) {
      await Promise.all([...this._opening, ...this._closing]);
    }
  }
}

module.exports = { Connections };
