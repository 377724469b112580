'use strict';
// What runs of the run hook may hold at once.  A run that calls the hook
// (a POST /agents with no Last-Event-ID, on a gateway with a run hook)
// starts the application's work: a process, a connection to the database,
// model calls.  So, besides the responses per client (limits.js):
//
//   - one run at a time per thread (a table's key): two runs of one
//     thread would interleave their writes, and an agent runtime keeps
//     one thread's state (a LangGraph checkpointer refuses, or loses, the
//     second writer).  The second gets 409, code hxstate_thread_busy;
//   - maxRunsPerToken runs at a time per token (with an authorize hook, per
//     what it returned as the principal, else per clientId): 429;
//   - maxRuns runs at a time in all: 503 with Retry-After.
//
// A run holds its place until it has ended and its hook's promise has
// settled: a hook whose process is still winding down (its signal aborted
// when the run ended) still holds a process.  A run that finds its thread
// held by a run that has ended, and whose hook is settling, waits for it
// for at most SETTLE_MS (a client that answers an interrupt at once must
// not get 409 because the previous run's process has not quite exited).
const { HttpError } = require('./limits');

const SETTLE_MS = 5000;

class RunSlots {
  /** perToken, total: the bounds (maxRunsPerToken, maxRuns). */
  constructor({ perToken, total }) {
    this.perToken = perToken;
    this.total = total;
    this.running = 0;
    this._threads = new Map();  // thread -> {live, settled: Promise}
    this._principals = new Map(); // principal -> runs
  }

  /**
   * A place for a run of thread by principal; resolves with the slot
   * ({ended(), hook(promise)}) or rejects with an HttpError (409, 429,
   * 503).  what names the thread in messages.
   */
  async take(thread, principal, what) {
    const held = this._threads.get(thread);
    if (held && !held.live) {
      let timer;
      await Promise.race([held.settled, new Promise((resolve) => { timer = setTimeout(resolve, SETTLE_MS); })]);
      clearTimeout(timer);
    }
    if (this._threads.has(thread)) {
      throw new HttpError(409, `a run of ${what} is in progress: one run at a time per thread`, null, 'hxstate_thread_busy');
    }
    const mine = this._principals.get(principal) || 0;
    if (mine >= this.perToken) {
      throw new HttpError(429, `too many runs of this token in progress (${this.perToken})`, { 'retry-after': '10' }, 'hxstate_token_runs');
    }
    if (this.running >= this.total) {
      throw new HttpError(503, `too many runs in progress (${this.total}): try again later`, { 'retry-after': '5' }, 'hxstate_runs_full');
    }
    this.running++;
    this._principals.set(principal, mine + 1);
    let settle;
    const entry = { live: true, settled: new Promise((resolve) => { settle = resolve; }) };
    this._threads.set(thread, entry);
    let ended = false;
    let pending = 0;
    let released = false;
    const release = () => {
      if (released || !ended || pending > 0) return;
      released = true;
      this.running--;
      const left = (this._principals.get(principal) || 1) - 1;
      if (left > 0) this._principals.set(principal, left);
      else this._principals.delete(principal);
      if (this._threads.get(thread) === entry) this._threads.delete(thread);
      settle();
    };
    return {
      /** The run has ended (its response is done). */
      ended() {
        ended = true;
        entry.live = false;
        release();
      },
      /** The hook's promise: the place is held until it settles. */
      hook(promise) {
        pending++;
        const done = () => {
          pending--;
          release();
        };
        promise.then(done, done);
      },
    };
  }
}

module.exports = { RunSlots, SETTLE_MS };
