'use strict';
// Waiting readers (long-poll and SSE): who is woken when a stream grows.
//
// hxstate's streams (log and table) are followed on the gateway's hub:
// a reader waiting after seq n follows the stream from n, and the first
// event the hub hands out wakes it; the reader then reads the log itself.
// Byte streams are woken by the appends of this process at once, and by
// those of every other process through a poll of the waited streams'
// tails (one statement for all of them, every pollMs).  A wake only says
// "read again": what is read comes from the database.
class Waiter {
  constructor({ hub, store, pollMs, onError }) {
    this.hub = hub;
    this.store = store;
    this.pollMs = pollMs;
    this.onError = onError || (() => {});
    this._bytes = new Map(); // name -> Set of {after, wake}
    this._timer = null;
    this._polling = false;
    this.waiting = 0;
  }

  /**
   * Wait until the stream t may have more than seq `after` (or was closed
   * or deleted), ms pass, or signal aborts: resolves 'wake', 'timeout' or
   * 'abort'.
   */
  wait(t, after, ms, signal) {
    return new Promise((resolve) => {
      if (signal && signal.aborted) {
        resolve('abort');
        return;
      }
      let done = false;
      let cleanup = () => {};
      const finish = (why) => {
        if (done) return;
        done = true;
        this.waiting--;
        clearTimeout(timer);
        if (signal) signal.removeEventListener('abort', onAbort);
        cleanup();
        resolve(why);
      };
      const onAbort = () => finish('abort');
      const timer = setTimeout(() => finish('timeout'), ms);
      this.waiting++;
      if (signal) signal.addEventListener('abort', onAbort);
      if (t.kind === 'bytes') {
        const w = { after, wake: () => finish('wake') };
        let set = this._bytes.get(t.name);
        if (!set) this._bytes.set(t.name, (set = new Set()));
        set.add(w);
        cleanup = () => {
          set.delete(w);
          if (set.size === 0 && this._bytes.get(t.name) === set) this._bytes.delete(t.name);
        };
        this._schedule();
      } else {
        const sub = this.hub.follow({ stream: t.name }, { after, state: false, maxQueue: 1 });
        sub.on('event', () => finish('wake'));
        sub.on('error', () => {});
        sub.ready.catch(() => finish('wake')); // trimmed, diverged, stopped: the read says what
        cleanup = () => sub.stop();
      }
    });
  }

  /** An append, close or delete of a byte stream in this process: wake its readers now. */
  notify(name) {
    const set = this._bytes.get(name);
    if (set) for (const w of [...set]) w.wake();
  }

  _schedule() {
    if (this._timer || this._bytes.size === 0) return;
    this._timer = setTimeout(() => {
      this._timer = null;
      this._poll().finally(() => this._schedule());
    }, this.pollMs);
    this._timer.unref();
  }

  async _poll() {
    if (this._polling || this._bytes.size === 0) return;
    this._polling = true;
    try {
      const names = [...this._bytes.keys()];
      const tails = await this.store.tails(names);
      for (const name of names) {
        const now = tails.get(name);
        const set = this._bytes.get(name);
        if (!set) continue;
        for (const w of [...set]) if (!now || now.closed || now.tail > w.after) w.wake();
      }
    } catch (err) {
      this.onError(err);
    } finally {
      this._polling = false;
    }
  }

  close() {
    clearTimeout(this._timer);
    this._timer = null;
    for (const set of this._bytes.values()) for (const w of [...set]) w.wake();
  }
}

module.exports = { Waiter };
