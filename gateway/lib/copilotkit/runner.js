'use strict';
// HxAgentRunner: CopilotKit's AgentRunner (run, connect, isRunning, stop),
// its threads kept in hxstate.
//
// Each thread is a log stream, STREAM_PREFIX + threadId.  run() runs the
// agent and writes every event it emits into the stream as it goes (a
// RunWriter: tokens share commits; events.js says how each is kept),
// between the run's markers; the Observable it returns gives the events
// as connect() will replay them.  connect() replays the stream from its
// first event and follows the run under way (RunFollower on an HxHub),
// ending with it.  Which thread has a run, and whose, is in the threads
// table (threads.js); a process's runs are alive while its owner
// connection holds its lock (owner.js), so isRunning and stop hold across
// processes.
//
// A run whose process died (its lock freed): run() with the same runId
// resumes it.  The run is driven again from its input, and the events its
// agent emits are checked against those the log holds (they must be equal,
// one for one: the agent is replayed from its durable point); those are
// not written again, the rest are.  An agent that emits other events than
// the log holds fails the run (RUN_ERROR code HX_COPILOTKIT_DIVERGED): a
// run is never written twice.  A run whose agent's terminal event is in
// the log is finished: run() gives its events and ends.  run() with
// another runId on a thread whose run's process died closes that run first
// (what it left open, and RUN_ERROR code HX_COPILOTKIT_ABANDONED), then
// runs.
const crypto = require('node:crypto');
const { isDeepStrictEqual } = require('node:util');
const pg = require('pg');
const { HxHub, RunWriter, RunFollower } = require('hxstate-client');
const { closers, RUN_MARKER } = require('hxstate-client').constructs;
const { encode, decode, jsonbOrder, joins, PrefixMatch, jsonText, CopilotKitInputError } = require('./events');
const { statements, STREAM_PREFIX, STOP_CHANNEL } = require('./threads');
const { Owner } = require('./owner');
const { MAX_TIMER_MS } = require('../timers');
const { extensionSchema, head, runInLog, messageIds } = require('./log');

function rxjs() {
  try {
    return require('rxjs');
  } catch (err) {
    throw Object.assign(new Error('HxAgentRunner needs rxjs (a dependency of @copilotkit/runtime): npm install rxjs'), { code: 'MODULE_NOT_FOUND', cause: err });
  }
}

const DEFAULTS = {
  schema: 'public',
  maxThreadIdBytes: 256,
  maxInputBytes: 4 * 1024 * 1024,
  maxEventBytes: 4 * 1024 * 1024,
  stopTimeoutMs: 10000,
  checkIntervalMs: 1000,
  writer: {},
};

const TERMINAL = new Set(['RUN_FINISHED', 'RUN_ERROR']);
// the events that name their run's thread (AG-UI: RUN_STARTED's threadId, repeated by RUN_FINISHED)
const THREADED = new Set(['RUN_STARTED', 'RUN_FINISHED']);

/** A replayed event of thread threadId: one that names another thread (a log written before the runner checked) names its own. */
function ofThread(e, threadId) {
  return THREADED.has(e.type) && e.threadId !== undefined && e.threadId !== threadId ? { ...e, threadId } : e;
}

function pgConfig(c) {
  if (typeof c === 'string') return { connectionString: c };
  if (c && typeof c === 'object') return { ...c };
  throw new TypeError('HxAgentRunner: options.pg is a pg config object or a connection string');
}

class HxAgentRunner {
  /**
   * options {pg, schema, writer (RunWriter options), hub (an HxHub of
   * yours, started), maxThreadIdBytes, maxInputBytes, maxEventBytes,
   * stopTimeoutMs, checkIntervalMs}
   */
  constructor(options = {}) {
    const o = { ...DEFAULTS, ...options };
    this._config = pgConfig(o.pg);
    for (const n of ['maxThreadIdBytes', 'maxInputBytes', 'maxEventBytes', 'stopTimeoutMs', 'checkIntervalMs']) {
      if (!Number.isSafeInteger(o[n]) || o[n] < 1) throw new TypeError(`HxAgentRunner: options.${n} is an integer >= 1`);
    }
    for (const n of ['stopTimeoutMs', 'checkIntervalMs']) {
      if (o[n] > MAX_TIMER_MS) throw new TypeError(`HxAgentRunner: options.${n} is at most ${MAX_TIMER_MS}`);
    }
    if (typeof o.schema !== 'string' || o.schema === '') throw new TypeError('HxAgentRunner: options.schema is a schema name');
    this.options = Object.freeze(o);
    this._sql = statements(o.schema);
    this._pool = new pg.Pool({ max: 4, application_name: 'hxstate-copilotkit', ...this._config });
    this._pool.on('error', () => {});
    this._writer = new RunWriter({ maxPendingBytes: Math.max(4 * o.maxEventBytes, 4 * 1024 * 1024), ...o.writer, pg: this._config });
    this._writer.on('error', () => {}); // each run's failure is its own promise's
    this._owner = this._newOwner();
    this._hub = o.hub || null;
    this._ownHub = null;
    this._local = new Map(); // threadId -> {runId, agent, stop, done}
    this._claiming = new Map(); // threadId -> the claim run() is making
    this._ready = null;
    this._hx = null;
    this._closed = false;
    // runs: started here; resumed: runs of a dead process driven again
    // here (replayed: the events of theirs the log held already);
    // abandoned: dead runs closed here; diverged: resumed runs that failed
    this.stats = { runs: 0, resumed: 0, replayed: 0, abandoned: 0, diverged: 0, stopped: 0 };
  }

  /** The statement that creates the runner's table in schema (what the first use runs, for a role that may). */
  static setupSql({ schema = DEFAULTS.schema } = {}) {
    return `${statements(schema).setup};\n`;
  }

  /** The id of this runner instance (the owner of its runs). */
  get id() { return this._owner.id; }

  // -- AgentRunner -------------------------------------------------------------

  /** Runs request.agent on request.input; an Observable of its events, as they are logged. */
  run(request) {
    const { ReplaySubject } = rxjs();
    const subject = new ReplaySubject(Infinity);
    this._run(request || {}, subject).then(() => subject.complete(), (err) => subject.error(err));
    return subject.asObservable();
  }

  /** The thread's events from its log, and the run under way's as it goes; ends with that run (or at once). */
  connect(request) {
    const { Observable } = rxjs();
    return new Observable((subscriber) => {
      let stop = null;
      let unsubscribed = false;
      // an unsubscribe before the follower exists stops it as soon as it does
      this._connect(request || {}, subscriber, (fn) => { if (unsubscribed) fn(); else stop = fn; }).then(
        () => { subscriber.complete(); },
        (err) => { subscriber.error(err); },
      );
      return () => {
        unsubscribed = true;
        if (stop) stop();
        stop = null;
      };
    });
  }

  /** Is a run of the thread under way, in any process? */
  async isRunning(request) {
    const threadId = this._threadId(request);
    const claiming = this._claiming.get(threadId);
    if (claiming) await claiming.catch(() => {});
    await this._start();
    const rows = (await this._pool.query(this._sql.status, [threadId])).rows;
    return rows.length > 0 && rows[0].run_id !== null && rows[0].alive;
  }

  /**
   * Stops the thread's run (request.runId: that run only), in whichever
   * process runs it; true once stopped, false when there was none.
   */
  async stop(request) {
    const threadId = this._threadId(request);
    const runId = request.runId === undefined ? null : this._id(request.runId, 'runId');
    await this._start();
    const rows = (await this._pool.query(this._sql.requestStop, [threadId, runId])).rows;
    if (rows.length === 0) return false;
    const { run_id: stopped, owner } = rows[0];
    if (owner === this.id) return this._stopLocal(threadId, stopped);
    await this._pool.query('SELECT pg_catalog.pg_notify($1, \'\')', [STOP_CHANNEL]);
    const until = Date.now() + this.options.stopTimeoutMs;
    for (;;) {
      const s = (await this._pool.query(this._sql.status, [threadId])).rows[0];
      if (!s || s.run_id !== stopped) return true;
      if (!s.alive) {
        // its process died: the run is closed here, as stopped
        await this._takeOver(threadId, { stopped: true });
        return true;
      }
      if (Date.now() > until) {
        throw Object.assign(new Error(`HxAgentRunner: the run ${stopped} of thread ${threadId} did not stop within ${this.options.stopTimeoutMs} ms`), { code: 'HX_COPILOTKIT_STOP_TIMEOUT' });
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** The threads, newest first: [{threadId, agentId, runId (null: none under way), createdAt, updatedAt}]. */
  async listThreads({ limit = 100 } = {}) {
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 10000) throw new CopilotKitInputError('limit is an integer from 1 to 10000');
    await this._start();
    return (await this._pool.query(this._sql.list, [limit])).rows.map((r) => ({
      threadId: r.thread_id, agentId: r.agent_id, runId: r.run_id, createdAt: r.created_at, updatedAt: r.updated_at,
    }));
  }

  /** Stops this instance's runs, then closes its connections. */
  async close() {
    if (this._closed) return;
    this._closed = true;
    for (const [threadId, l] of this._local) await this._stopLocal(threadId, l.runId).catch(() => {});
    await Promise.allSettled([...this._local.values()].map((l) => l.done));
    await this._writer.close().catch(() => {});
    if (this._ownHub) await this._ownHub.stop().catch(() => {});
    await this._owner.close();
    await this._pool.end().catch(() => {});
  }

  // -- checks ------------------------------------------------------------------

  _id(s, what, max = 1024) {
    if (typeof s !== 'string' || s === '') throw new CopilotKitInputError(`${what} is a non-empty string`);
    if (Buffer.byteLength(s) > max) throw new CopilotKitInputError(`${what} is longer than ${max} bytes`, 'HX_COPILOTKIT_TOO_LARGE');
    jsonText(s, what, Infinity);
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(s)) throw new CopilotKitInputError(`${what} holds a control character`);
    return s;
  }

  _threadId(request) {
    if (!request || typeof request !== 'object') throw new CopilotKitInputError('the request is an object {threadId}');
    return this._id(request.threadId, 'threadId', this.options.maxThreadIdBytes);
  }

  // -- start -----------------------------------------------------------------------

  _start() {
    if (this._closed) return Promise.reject(new Error('HxAgentRunner: closed'));
    if (!this._ready) {
      this._ready = (async () => {
        await this._owner.ready;
        if (!this._owner.alive) throw Object.assign(new Error('HxAgentRunner: the owner connection is lost'), { code: 'HX_COPILOTKIT_OWNER_LOST' });
        this._hx = await extensionSchema((t, v) => this._rows(t, v));
        const exists = (await this._pool.query('SELECT pg_catalog.to_regclass($1) IS NOT NULL AS ok', [this._sql.table])).rows[0].ok;
        if (!exists) {
          try {
            await this._pool.query(this._sql.setup);
          } catch (err) {
            // two processes creating it at once: one of them wins
            if (err.code !== '23505' && err.code !== '42P07') {
              err.message = `HxAgentRunner: cannot create ${this._sql.table} (${err.message}); create it beforehand with HxAgentRunner.setupSql()`;
              throw err;
            }
          }
        }
      })();
      this._ready.catch(() => { this._ready = null; });
    }
    return this._ready;
  }

  async _rows(text, values) {
    return (await this._pool.query(text, values)).rows;
  }

  async _hubOf() {
    if (this._hub) return this._hub;
    if (!this._ownHub) {
      this._ownHub = new HxHub({ pg: this._config, transport: 'listen', pollInterval: 1000, applicationName: 'hxstate-copilotkit-hub' });
      this._ownHub.on('error', () => {});
      this._hubStart = this._ownHub.start();
    }
    await this._hubStart;
    return this._ownHub;
  }

  // -- run -----------------------------------------------------------------------

  async _run({ threadId: tid, agent, input }, subject) {
    const threadId = this._threadId({ threadId: tid });
    if (!agent || typeof agent.runAgent !== 'function') throw new CopilotKitInputError('agent is an AG-UI agent (runAgent)');
    if (!input || typeof input !== 'object' || Array.isArray(input)) throw new CopilotKitInputError('input is a RunAgentInput object');
    const runId = this._id(input.runId, 'input.runId');
    if (input.threadId !== undefined && input.threadId !== threadId) throw new CopilotKitInputError('input.threadId is not the request\'s threadId');
    // an AG-UI agent's events carry its threadId (CopilotKit's runtime sets it to the request's)
    if (agent.threadId !== undefined && agent.threadId !== threadId) throw new CopilotKitInputError('agent.threadId is not the request\'s threadId');
    jsonText(input, 'input', this.options.maxInputBytes);
    const agentId = typeof agent.agentId === 'string' ? agent.agentId.slice(0, 1024) : null;
    const stream = STREAM_PREFIX + threadId;
    const local = { runId, agent, owner: null, stop: false, done: null, stopped: null, stopNow: null };
    let resolveDone;
    local.done = new Promise((r) => { resolveDone = r; });
    local.stopped = new Promise((r) => { local.stopNow = r; });
    // isRunning() in this process waits for the claim that run() began
    const claiming = (async () => {
      await this._start();
      return this._claim(threadId, runId, agentId, local);
    })();
    this._claiming.set(threadId, claiming);
    let claim;
    try {
      claim = await claiming;
    } finally {
      if (this._claiming.get(threadId) === claiming) this._claiming.delete(threadId);
    }
    try {
      await this._drive(threadId, stream, runId, agent, input, claim, local, subject);
    } finally {
      this._local.delete(threadId);
      await this._pool.query(this._sql.release, [threadId, runId, local.owner]).catch(() => {});
      resolveDone();
    }
  }

  /**
   * The thread, claimed for run runId (its row locked while it is
   * decided).  A live run refuses it; another run whose process died is
   * closed first.
   */
  async _claim(threadId, runId, agentId, local) {
    await this._owner.ready.catch(() => {});
    if (!this._owner.alive) throw Object.assign(new Error('HxAgentRunner: the owner connection is lost'), { code: 'HX_COPILOTKIT_OWNER_LOST' });
    if (this._local.has(threadId)) throw Object.assign(new Error('Thread already running'), { code: 'HX_COPILOTKIT_RUNNING' });
    const client = await this._pool.connect();
    let dead = null;
    try {
      await client.query('BEGIN');
      await client.query(this._sql.insert, [threadId, agentId]);
      const row = (await client.query(this._sql.lock, [threadId])).rows[0];
      if (row.run_id !== null && row.alive) {
        throw Object.assign(new Error('Thread already running'), { code: 'HX_COPILOTKIT_RUNNING' });
      }
      if (row.run_id !== null) dead = row.run_id;
      local.owner = this.id;
      await client.query(this._sql.take, [threadId, runId, local.owner, agentId]);
      await client.query('COMMIT');
      this._local.set(threadId, local);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
    this.stats.runs++;
    return { dead };
  }

  /** Close the dead run runId of the thread (claimed by this instance): what it left open, and its end. */
  async _closeDead(threadId, runId, { stopped }) {
    const stream = STREAM_PREFIX + threadId;
    const q = (t, v) => this._rows(t, v);
    const r = await runInLog(q, this._hx, stream, runId);
    if (r.startSeq === null || r.ended) return;
    const run = this._writer.open({ stream }, { runId, messages: null, resumeAt: { seq: r.head, open: r.open } });
    if (!r.terminal) {
      for (const e of closers(r.open)) run.push(e);
      run.push(encode(stopped
        ? { type: 'RUN_FINISHED', threadId, runId }
        : { type: 'RUN_ERROR', message: 'the run\'s process died', code: 'HX_COPILOTKIT_ABANDONED' }, Infinity));
    }
    await run.close({ status: stopped ? 'stopped' : 'failed', ...(stopped ? {} : { error: 'the run\'s process died' }) });
  }

  /** Claim the thread whose run's process died, and close that run (stop() of a dead run). */
  async _takeOver(threadId, { stopped }) {
    const me = this.id;
    const client = await this._pool.connect();
    let dead = null;
    try {
      await client.query('BEGIN');
      const row = (await client.query(this._sql.lock, [threadId])).rows[0];
      if (row && row.run_id !== null && !row.alive) {
        dead = row.run_id;
        await client.query(this._sql.take, [threadId, dead, me, null]);
      }
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
    if (dead === null) return;
    try {
      await this._closeDead(threadId, dead, { stopped });
    } finally {
      await this._pool.query(this._sql.release, [threadId, dead, me]).catch(() => {});
    }
  }

  async _drive(threadId, stream, runId, agent, input, claim, local, subject) {
    const q = (t, v) => this._rows(t, v);
    if (claim.dead !== null && claim.dead !== runId) {
      // another run, whose process died: closed first
      this.stats.abandoned++;
      await this._closeDead(threadId, claim.dead, { stopped: false });
    }
    let prefix = [];
    let options = { runId, messages: null };
    let before = await head(q, this._hx, stream) + 1;
    // the log may hold the run already: its process died under it (resumed
    // here), or after it ended but before its caller heard (given again)
    const r = await runInLog(q, this._hx, stream, runId);
    if (r.startSeq !== null) {
      before = r.startSeq;
      if (r.terminal || r.ended) {
        // finished, all but perhaps its end marker: its events, and its end
        for (const e of r.events) subject.next(ofThread(e, threadId));
        if (!r.ended) await this._writer.open({ stream }, { runId, messages: null, resumeAt: { seq: r.head, open: r.open } }).close();
        return;
      }
      prefix = r.events;
      this.stats.resumed++;
      this.stats.replayed += r.events.length;
      options = { ...options, resumeAt: { seq: r.head, open: r.open } };
    }
    const seen = await messageIds(q, this._hx, stream, before);
    const fence = async (client) => {
      const { rowCount } = await client.query(this._sql.fence, [threadId, runId, local.owner]);
      if (rowCount === 0) {
        throw Object.assign(new Error(`HxAgentRunner: run ${runId} of thread ${threadId} is no longer this process's`), { code: 'HX_COPILOTKIT_FENCED' });
      }
    };
    const run = this._writer.open({ stream }, { ...options, inTransaction: fence });
    run.on('error', () => {});
    const match = new PrefixMatch(prefix);
    let failed = null;
    let terminal = false;
    const take = (e) => {
      if (TERMINAL.has(e.type)) terminal = true;
    };
    const onEvent = ({ event }) => {
      if (failed || terminal || local.stop) return;
      try {
        let e = event;
        if (e && e.type === 'RUN_STARTED' && e.input === undefined) {
          // the input, without the messages earlier runs hold (so that a
          // replay of the thread shows each message once)
          const messages = Array.isArray(input.messages) ? input.messages.filter((m) => !(m && seen.has(m.id))) : undefined;
          e = { ...e, input: { ...input, ...(messages !== undefined ? { messages } : {}) } };
        }
        if (THREADED.has(e.type) && e.threadId !== undefined && e.threadId !== threadId) {
          // a run's events carry its thread: one of another is not this thread's to log
          throw Object.assign(new Error(`HxAgentRunner: the agent emitted ${e.type} of thread ${JSON.stringify(String(e.threadId).slice(0, 256))} in a run of thread ${JSON.stringify(threadId)}`),
            { code: 'HX_COPILOTKIT_THREAD' });
        }
        const logged = encode(e, this.options.maxEventBytes);
        const out = decode(jsonbOrder(logged));
        const rest = match.take(out);
        if (rest !== null) run.push(rest === out ? logged : encode(rest, Infinity));
        take(out);
        subject.next(out);
      } catch (err) {
        failed = err;
        try { agent.abortRun(); } catch { /* the agent cannot abort: its events are ignored from here */ }
      }
    };
    let agentError = null;
    try {
      // a stop ends the run here, whether the agent stops or not
      const running = Promise.resolve().then(() => agent.runAgent(input, { onEvent }));
      running.catch(() => {});
      await Promise.race([running, local.stopped]);
    } catch (err) {
      agentError = err;
    }
    if (failed === null && match.pending) {
      try { match.done(); } catch (err) { failed = err; }
    }
    if (run.error) {
      // the log refused the run (its database, a fence): nothing more is written
      const e = { type: 'RUN_ERROR', message: run.error.message, code: String(run.error.code || 'HX_COPILOTKIT_LOG') };
      if (!terminal) subject.next(e);
      return;
    }
    let status = 'finished';
    if (failed && failed.code === 'HX_COPILOTKIT_DIVERGED') this.stats.diverged++;
    if (local.stop) this.stats.stopped++;
    if (failed) status = 'failed';
    else if (local.stop) status = 'stopped';
    else if (agentError || !terminal) status = 'failed';
    if (!terminal) {
      const end = [...closers(run.open)]; // what the log has open (a resumed run's included)
      if (status === 'stopped') end.push({ type: 'RUN_FINISHED', threadId, runId });
      else {
        const err = failed || agentError;
        end.push({
          type: 'RUN_ERROR',
          message: err ? String(err.message || err) : 'the run ended without RUN_FINISHED or RUN_ERROR',
          code: err && typeof err.code === 'string' ? err.code : 'INCOMPLETE_STREAM',
        });
      }
      for (const e of end) {
        const logged = encode(e, Infinity);
        run.push(logged);
        subject.next(decode(jsonbOrder(logged)));
      }
    }
    try {
      await run.close({ status, ...(status === 'failed' ? { error: String((failed || agentError || {}).message || 'incomplete') } : {}) });
    } catch (err) {
      // the events went out; the log did not take the end: say so
      subject.next({ type: 'RUN_ERROR', message: err.message, code: String(err.code || 'HX_COPILOTKIT_LOG') });
    }
  }

  // -- stop ----------------------------------------------------------------------

  _stopLocal(threadId, runId) {
    const l = this._local.get(threadId);
    if (!l || l.runId !== runId) return Promise.resolve(false);
    l.stop = true;
    l.stopNow();
    try {
      if (typeof l.agent.abortRun === 'function') l.agent.abortRun();
      // @ag-ui/client's agents end their run's pipeline on a detach
      if (typeof l.agent.detachActiveRun === 'function') l.agent.detachActiveRun().catch(() => {});
    } catch {
      // the agent goes on by itself: its events are not taken any more
    }
    return l.done.then(() => true);
  }

  async _stopsAsked() {
    try {
      const rows = (await this._pool.query(this._sql.stopAsked, [this.id])).rows;
      for (const r of rows) this._stopLocal(r.thread_id, r.run_id).catch(() => {});
    } catch {
      // the next notification, or the fence, ends it
    }
  }

  _newOwner() {
    return new Owner(this._config, { asked: () => this._stopsAsked(), lost: (err) => this._ownerLost(err) });
  }

  _ownerLost() {
    // the lock is gone: another process may take the runs over; they stop
    // here.  A new owner (a new id) is made a second later, and again
    // while the database cannot be reached
    for (const [threadId, l] of this._local) this._stopLocal(threadId, l.runId).catch(() => {});
    if (this._closed) return;
    const timer = setTimeout(() => { if (!this._closed) this._owner = this._newOwner(); }, 1000);
    timer.unref();
  }

  // -- connect -------------------------------------------------------------------

  async _connect(request, subscriber, onStop) {
    const threadId = this._threadId(request);
    await this._start();
    const stream = STREAM_PREFIX + threadId;
    const status = (await this._pool.query(this._sql.status, [threadId])).rows[0];
    if (!status) return; // a thread with no run: nothing to replay
    const hub = await this._hubOf();
    // the history (up to the head now) goes out compacted (events.js), the
    // run under way's events as they are logged
    const history = await head((t, v) => this._rows(t, v), this._hx, stream);
    let held = null; // the history's last event, which the next may join
    const hold = (e) => {
      if (held !== null && joins(held, e)) held = { ...held, delta: held.delta + e.delta };
      else {
        if (held !== null) subscriber.next(held);
        held = e;
      }
    };
    const flush = () => {
      if (held !== null) subscriber.next(held);
      held = null;
    };
    let target = null;           // the seq it ends at, once known
    let seq = 0;
    let finish;
    let fail;
    const ended = new Promise((resolve, reject) => { finish = resolve; fail = reject; });
    const f = new RunFollower(hub, { stream }, { after: 0, maxScan: 100000 });
    let timer = null;
    let stopped = false;
    // stopped (an unsubscribe, or the end): the follower and the checks end, and so does the connect
    const stop = () => {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      f.stop().catch(() => {});
      finish();
    };
    onStop(stop);
    const check = async () => {
      if (target !== null || stopped) return;
      const s = (await this._pool.query(this._sql.status, [threadId])).rows[0];
      if (!s || s.run_id === null || !s.alive) {
        target = await head((t, v) => this._rows(t, v), this._hx, stream);
        if (seq >= target) finish();
      }
    };
    f.on('error', (err) => { if (err && err.code === 'HX_STATE_TOO_LARGE') fail(err); });
    // an event the follower dropped (it opens or continues nothing open: a
    // writer's slip, another role's) is a seq passed all the same: the
    // connect that waits for the head must not wait for it forever
    f.on('dropped', ({ seq: at }) => {
      if (stopped) return;
      seq = at;
      if (seq >= history) flush();
      if (target !== null && seq >= target) finish();
    });
    f.on('event', (event) => {
      if (stopped) return;
      if (!event.metadata || event.metadata.synthetic) return;
      seq = event.metadata.seq;
      if (event.type === 'CUSTOM' && event.name === RUN_MARKER && event.value && status.run_id !== null
        && event.value.runId === status.run_id && event.value.status !== 'started') {
        target = seq; // the run under way when it connected has ended
      }
      const d0 = decode(event);
      const d = d0 === null ? null : ofThread(d0, threadId);
      if (d !== null) {
        if (seq <= history) hold(d);
        else {
          flush();
          subscriber.next(d);
        }
      }
      if (seq >= history) flush();
      if (target !== null && seq >= target) finish();
    });
    try {
      await f.ready;
      if (stopped) return;
      if (status.run_id === null || !status.alive) {
        target = await head((t, v) => this._rows(t, v), this._hx, stream);
        if (seq >= target) finish();
      } else {
        timer = setInterval(() => { check().catch(() => {}); }, this.options.checkIntervalMs);
        timer.unref();
      }
      await ended;
      flush();
    } finally {
      stop();
    }
  }
}

module.exports = { HxAgentRunner, DEFAULTS };
