'use strict';
// The live view's phase machine and the phases of the rows it shows.
//
// The machine is read from the database, as the guard reads it: the
// table's hx_phase_guard trigger names the machine and the phase column
// (its arguments, in pg_trigger.tgargs), hx_machine its initial phase and
// hx_transition its edges.  A machine is cached for cacheMs (machines are
// data and may change).
//
// Phases are polled, not streamed: hx_stream streams the state column
// only, and a phase can change in an UPDATE that leaves the state equal
// (no event).  Every interval ms, one statement per table reads the phase
// of every row a view shows, and each watcher hears of a change.  The
// polls run on one connection of their own, opened when the first view
// opens and closed when the gateway closes.
const pg = require('pg');
const { triggerArgs } = require('./config');
const { quoteIdent } = require('./ident');

class Machines {
  constructor({ pg: config, interval = 1000, cacheMs = 10000, onError = () => {} }) {
    this._config = config;
    this._interval = interval;
    this._cacheMs = cacheMs;
    this._onError = onError;
    this._client = null;
    this._connecting = null;
    this._tables = new Map();   // table -> {at, promise}
    this._watch = new Map();    // table -> Map(key -> {phase, exists, fns: Set})
    this._timer = null;
    this._polling = false;
    this._closed = false;
  }

  async _conn() {
    if (this._closed) throw new Error('hxstate-gateway: closed');
    if (this._client) return this._client;
    if (!this._connecting) {
      this._connecting = (async () => {
        const client = await clientFor(this._config);
        client.on('error', () => { if (this._client === client) this._client = null; });
        client.on('end', () => { if (this._client === client) this._client = null; });
        await client.connect();
        if (this._closed) {
          await client.end().catch(() => {});
          throw new Error('hxstate-gateway: closed');
        }
        this._client = client;
        return client;
      })().finally(() => { this._connecting = null; });
    }
    return this._connecting;
  }

  async _query(text, values) {
    const c = await this._conn();
    return c.query(text, values);
  }

  /**
   * The table's machine: {machine, column, initial, transitions: [{from,
   * event, to}]}, or {machine: null} when no hx_phase_guard guards it.
   * Also the key column and its type, for the phase reads.
   */
  machine(table) {
    const hit = this._tables.get(table);
    if (hit && Date.now() - hit.at < this._cacheMs) return hit.promise;
    const promise = this._readMachine(table);
    this._tables.set(table, { at: Date.now(), promise });
    promise.catch(() => this._tables.delete(table));
    return promise;
  }

  async _readMachine(table) {
    const { rows: [ext] } = await this._query(
      `SELECT n.nspname FROM pg_catalog.pg_extension e
         JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'hxstate'`);
    if (!ext) throw new Error('hxstate-gateway: the hxstate extension is not installed');
    const schema = quoteIdent(ext.nspname);
    const { rows: trig } = await this._query(
      `SELECT $1::regclass::text AS rel, p.proname, t.tgargs
         FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
        WHERE t.tgrelid = $1::regclass AND p.proname IN ('hx_phase_guard', 'hx_stream') AND t.tgenabled <> 'D'
        ORDER BY t.tgname`, [table]);
    const stream = trig.find((r) => r.proname === 'hx_stream');
    const guard = trig.find((r) => r.proname === 'hx_phase_guard');
    const out = { machine: null, column: null, initial: null, transitions: [] };
    if (!guard || !stream) return out;
    const [machine, column = 'phase'] = triggerArgs(guard.tgargs);
    const keyColumn = triggerArgs(stream.tgargs)[1];
    const { rows: [m] } = await this._query(`SELECT initial_phase FROM ${schema}.hx_machine WHERE machine = $1`, [machine]);
    const { rows: edges } = await this._query(
      `SELECT from_phase, event, to_phase FROM ${schema}.hx_transition WHERE machine = $1 ORDER BY from_phase, event`, [machine]);
    const { rows: [kt] } = await this._query(
      `SELECT format_type(a.atttypid, a.atttypmod) AS type FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = $1::regclass AND a.attname = $2`, [table, keyColumn]);
    out.machine = machine;
    out.column = column;
    out.initial = m ? m.initial_phase : null;
    out.transitions = edges.map((e) => ({ from: e.from_phase, event: e.event, to: e.to_phase }));
    // for the phase reads, not for the view
    Object.defineProperty(out, 'read', {
      enumerable: false,
      value: `SELECT k.key, t.${quoteIdent(column)}::text AS phase
                FROM unnest($1::text[]) k(key) JOIN ${trig[0].rel} t ON t.${quoteIdent(keyColumn)} = k.key::${kt.type}`,
    });
    return out;
  }

  /**
   * Call fn({phase, exists}) with the row's phase now and at every change;
   * returns the function that stops watching.
   */
  watch(table, key, fn) {
    let keys = this._watch.get(table);
    if (!keys) {
      keys = new Map();
      this._watch.set(table, keys);
    }
    let w = keys.get(key);
    if (!w) {
      w = { phase: undefined, exists: undefined, fns: new Set() };
      keys.set(key, w);
    }
    w.fns.add(fn);
    if (w.phase !== undefined) fn({ phase: w.phase, exists: w.exists });
    this._schedule(0);
    return () => {
      w.fns.delete(fn);
      if (w.fns.size === 0 && keys.get(key) === w) keys.delete(key);
      if (keys.size === 0 && this._watch.get(table) === keys) this._watch.delete(table);
    };
  }

  _schedule(ms) {
    if (this._closed || this._polling) return;
    if (this._timer && ms > 0) return;
    clearTimeout(this._timer);
    this._timer = setTimeout(() => {
      this._timer = null;
      this._poll().finally(() => {
        this._polling = false;
        if (this._watch.size > 0) this._schedule(this._interval);
      });
    }, ms);
    this._timer.unref();
  }

  async _poll() {
    this._polling = true;
    for (const [table, keys] of [...this._watch]) {
      if (this._closed) return;
      try {
        const m = await this.machine(table);
        if (!m.read) continue;
        const list = [...keys.keys()];
        const found = new Map();
        try {
          const { rows } = await this._query(m.read, [list]);
          for (const r of rows) found.set(r.key, r.phase);
        } catch (err) {
          // a key its type rejects fails the statement: read them one by one
          if (!(err.code && err.code.startsWith('22'))) throw err;
          for (const k of list) {
            const { rows } = await this._query(m.read, [[k]]).catch(() => ({ rows: [] }));
            for (const r of rows) found.set(r.key, r.phase);
          }
        }
        for (const [k, w] of keys) {
          const exists = found.has(k);
          const phase = exists ? found.get(k) : null;
          if (phase === w.phase && exists === w.exists) continue;
          w.phase = phase;
          w.exists = exists;
          for (const fn of [...w.fns]) fn({ phase, exists });
        }
      } catch (err) {
        this._onError(err);
      }
    }
  }

  async close() {
    this._closed = true;
    clearTimeout(this._timer);
    this._watch.clear();
    const connecting = this._connecting;
    if (connecting) await connecting.catch(() => {});
    const c = this._client;
    this._client = null;
    if (c) await c.end().catch(() => {});
  }
}

/** A pg.Client for config (an object, a connection string, or a function (role) => either). */
async function clientFor(config) {
  let c = typeof config === 'function' ? await config('reader') : config;
  if (typeof c === 'string') c = { connectionString: c };
  return new pg.Client({ fallback_application_name: 'hxstate-gateway', ...(c || {}) });
}

module.exports = { Machines, clientFor };
