'use strict';
// RunFollower: a stream's events, its runs' included, for a follower that
// may join or come back in the middle of a message, on an HxHub.
//
//   const f = new RunFollower(hub, { table: 'sessions', key: 's-42' }, { pg, after: savedSeq });
//   f.on('event', (event) => render(event));   // every event, each once, in order
//   await f.ready;
//
// A subscription of the hub hands out every event after where it starts,
// exactly once, in order.  A follower that starts from a snapshot (no
// `after`), or is resynced to one (the log was trimmed, a consumer too
// slow, a failover), lands in the middle of whatever the stream's runs
// have open; one that starts after a seq it saved (`after`) had, or not,
// what was open then.  Either way it gets, right after the snapshot (or
// first, with `after`), a prelude that reopens what is open there
// (constructs.js: each open step, message, tool call, reasoning, with
// what it holds so far as one CONTENT or ARGS), read back from the log
// (runlog.js, on the hub's reader or a connection of its own); then the
// next events.  Before a
// resync's snapshot it closes what it had reopened or passed on (the
// END events), so that its events always make a sequence AG-UI's verifier
// takes, run after run.  The prelude's and closers' events carry
// metadata {stream, seq, synthetic: true}; a run event that opens,
// continues or closes nothing open (a writer's mistake, or one of a
// construct begun before the log was read back) is dropped and counted
// (stats.dropped, and 'dropped' {seq, event, reason}: a consumer that
// waits for a seq learns it has passed); one that would hold more than maxBytes (or open more
// than constructs.MAX_OPEN) is dropped too, and 'error' says so (code
// HX_STATE_TOO_LARGE), as it does for a prelude past it.
const { EventEmitter } = require('node:events');
const pg = require('pg');
const { applyConstruct, closers, emptyConstructs, isConstructEvent, isRunMarker, reopen } = require('./constructs');
const { openAt } = require('./runlog');
const { STREAM_END } = require('./apply');
const { emitError, callListeners } = require('./emit');
const { quoteIdent } = require('./sql');

class RunFollower extends EventEmitter {
  /**
   * hub: an HxHub (started or not); target: hub.follow's; options: {pg
   * (the reads of the log: a config, connection string or function, for
   * a pool of one connection of its own; not given: the hub's reader, by
   * HxHub.read), after, maxScan, maxBytes, and the subscription's
   * maxQueue, maxQueueBytes, overflow}.
   */
  constructor(hub, target, options = {}) {
    super();
    if (!options.pg && typeof hub.read !== 'function') throw new TypeError('RunFollower: options.pg is required with a hub that has no read()');
    this._hubRead = options.pg ? null : (fn) => hub.read(fn);
    this._o = { maxScan: 10000, maxBytes: 16 * 1024 * 1024, ...options };
    this._pool = null;
    this._schema = null;
    this.open = emptyConstructs();   // what the stream has open after the last event handed out
    this.seq = null;
    this.stats = { events: 0, preludes: 0, dropped: 0, closers: 0 };
    const follow = { state: false };
    for (const k of ['maxQueue', 'maxQueueBytes', 'overflow']) if (options[k] !== undefined) follow[k] = options[k];
    if (options.after !== undefined) follow.after = options.after;
    this._sub = hub.follow(target, follow);
    this._first = options.after === undefined ? null : options.after;
    this._chain = Promise.resolve(); // what it hands out, one thing after another
    this._sub.on('event', (event) => this._serial(() => this._event(event)));
    this._sub.on('error', (err) => emitError(this, err));
    // resuming after a seq with nothing after it: the prelude all the same
    this.ready = this._sub.ready.then(() => this._serial(() => this._resumed()));
    this.ready.catch(() => {});
  }

  _serial(fn) {
    const p = this._chain.then(fn);
    this._chain = p.catch(() => {});
    return p;
  }

  async _resumed() {
    if (this._first === null) return;
    const at = this._first;
    this._first = null;
    this.seq = at;
    await this._prelude(at);
  }

  get stream() { return this._sub.stream; }

  /** Stop following (and close the pool of the log's reads). */
  async stop() {
    this._sub.stop();
    const pool = this._pool;
    this._pool = null;
    if (pool) await pool.end().catch(() => {});
  }

  async _event(event) {
    const seq = event.metadata.seq;
    if (event.type === 'STATE_SNAPSHOT' && event.metadata.synthetic) {
      // a snapshot: what it had open is closed, then the snapshot, then what is open there
      await this._hand(this._closers(seq));
      await this._hand([event]);
      this.seq = seq;
      await this._prelude(seq);
      return;
    }
    await this._resumed(); // resuming after a seq: what was open there first
    if (isConstructEvent(event.type) || isRunMarker(event) || (event.type === 'CUSTOM' && event.name === STREAM_END)) {
      const r = applyConstruct(this.open, event, { maxBytes: this._o.maxBytes });
      if (!r.ok) {
        this.stats.dropped++;
        this.seq = seq;
        // a consumer that waits for a seq learns that it has passed it
        callListeners(this, 'dropped', [{ seq, event, reason: r.reason }], (err) => emitError(this, err));
        // past maxBytes (or constructs.MAX_OPEN) is not a writer's slip: what
        // the consumer shows is cut short, and it is told so, as a prelude
        // past it tells it (openAt's HX_STATE_TOO_LARGE)
        if (r.tooLarge) {
          emitError(this, Object.assign(new Error(`RunFollower: ${this.stream} at seq ${seq}: ${r.reason}; the event is dropped`),
            { code: 'HX_STATE_TOO_LARGE', seq }));
        }
        return;
      }
      if (r.abandoned) await this._hand(this._closers(seq));
      this.open = r.state;
    }
    this.seq = seq;
    await this._hand([event]);
  }

  _closers(seq) {
    const events = closers(this.open, { extra: { metadata: { stream: this.stream, seq, synthetic: true } } });
    this.stats.closers += events.length;
    this.open = emptyConstructs();
    return events;
  }

  async _prelude(seq) {
    let state;
    try {
      state = (await openAt((text, values) => this._query(text, values), this.stream, seq,
        { schema: await this._schemaOf(), maxScan: this._o.maxScan, maxBytes: this._o.maxBytes })).state;
    } catch (err) {
      emitError(this, err);
      state = emptyConstructs();
    }
    this.open = state;
    const events = reopen(state, { extra: { metadata: { stream: this.stream, seq, synthetic: true } } });
    if (events.length > 0) this.stats.preludes++;
    await this._hand(events);
  }

  async _hand(events) {
    for (const e of events) {
      this.stats.events++;
      const wait = callListeners(this, 'event', [e], (err) => emitError(this, err));
      if (wait) await wait;
    }
  }

  async _query(text, values) {
    if (this._hubRead) return this._hubRead((query) => query(text, values));
    if (!this._pool) {
      let c = typeof this._o.pg === 'function' ? await this._o.pg('reader') : this._o.pg;
      if (typeof c === 'string') c = { connectionString: c };
      this._pool = new pg.Pool({ max: 1, idleTimeoutMillis: 10000, fallback_application_name: 'hxstate-run-follower', ...(c || {}) });
      this._pool.on('error', () => {});
    }
    return (await this._pool.query(text, values)).rows;
  }

  async _schemaOf() {
    if (this._schema === null) {
      const rows = await this._query(`SELECT n.nspname FROM pg_catalog.pg_extension e
        JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'hxstate'`, []);
      if (rows.length === 0) throw new Error('RunFollower: the database has no hxstate extension');
      this._schema = quoteIdent(rows[0].nspname);
    }
    return this._schema;
  }
}

module.exports = { RunFollower };
