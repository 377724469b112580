'use strict';
// A runner instance's life, as the database sees it: one connection that
// holds the advisory lock (LOCK_CLASS, hashtext(id)) for as long as the
// instance lives (threads.js: a run's owner is alive while it is held),
// and LISTENs on STOP_CHANNEL, where stop() on any process tells the
// owners to look at their threads' stop_requested.  A notification's
// payload is not trusted: it only says "look" (asked()).
//
// lost(err) is called once, when the connection cannot be made, fails or
// ends: the lock is gone, and another process may take the instance's runs
// over (their next batches are fenced off, threads.js).  An Owner is not
// reopened: the runner makes a new one (a new id).
const crypto = require('node:crypto');
const pg = require('pg');
const { LOCK_CLASS, STOP_CHANNEL } = require('./threads');

class Owner {
  /** config: a pg.Client config; host: {asked(), lost(err)}. */
  constructor(config, host) {
    this.id = crypto.randomUUID();
    this._config = config;
    this._host = host;
    this._client = null;
    this._lost = false;
    this.ready = this._start();
    this.ready.catch((err) => this._gone(err));
  }

  async _start() {
    const client = new pg.Client({ application_name: 'hxstate-copilotkit-owner', ...this._config });
    this._client = client;
    client.on('error', (err) => this._gone(err));
    client.on('end', () => this._gone(new Error('HxAgentRunner: the owner connection ended')));
    client.on('notification', (m) => { if (m.channel === STOP_CHANNEL) this._host.asked(); });
    await client.connect();
    await client.query('SELECT pg_catalog.pg_advisory_lock($1, pg_catalog.hashtext($2))', [LOCK_CLASS, this.id]);
    await client.query(`LISTEN ${STOP_CHANNEL}`);
  }

  _gone(err) {
    if (this._lost) return;
    this._lost = true;
    this._host.lost(err);
  }

  get alive() { return !this._lost; }

  async close() {
    this._lost = true;
    const c = this._client;
    this._client = null;
    if (c) await c.end().catch(() => {});
  }
}

module.exports = { Owner };
