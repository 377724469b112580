'use strict';
// One text/event-stream response, and what a client may hold of the
// gateway's memory: a bound in bytes.
//
// Frames (see frames.js) wait in the response's queue, and are handed to
// the socket a slice of at most SLICE bytes at a time, the next one once
// the socket has taken the last (write() returned true, or 'drain').  So
// the socket's own buffer holds at most about one slice, and what a client
// holds is
//
//   held = the bytes of its queued frames not yet handed to the socket
//        + the bytes its socket has not yet flushed to the kernel
//
// push() refuses a frame that would take held past maxClientBytes, unless the
// queue is empty (a frame larger than maxClientBytes goes out alone), or
// the frame is one that must go: the run's own (RUN_STARTED, RUN_FINISHED,
// RUN_ERROR: every run ends with one of them, whatever the client holds)
// and the MESSAGES_SNAPSHOT that belongs to the state event just queued
// (a client with one and not the other would have a state and a stale
// conversation).  So a client holds at most maxClientBytes, or one event
// larger than it, plus its conversation and the run's own small frames.
// On a refusal the owner drops the queue and starts again once the client
// has caught up (see follow.js: a fresh snapshot, or the log).  A client that holds more
// than maxClientBytes (one large frame) and takes nothing for stallTimeout is cut off
// (an EventSource reconnects, and resumes by Last-Event-ID).  Frames are
// Buffers shared with every other response that sends them: slicing one
// copies nothing.
//
// Headers go out with the first write, so that a request refused late (a
// key its type rejects) still gets its status.
const { corsHeaders, refuse } = require('./respond');
const SLICE = 64 * 1024;
const ENTRY_BYTES = 64; // what a queued frame costs beside its bytes (counted as held)

class SseResponse {
  /**
   * ctx: the gateway's context (its config, counters, responses); kind:
   * 'stream', 'run' or 'view'; clientId: whose per-client count it is in
   * (release gives its place back when the response ends); seq: the seq
   * the client has (its Last-Event-ID), or null.  It counts itself among
   * ctx.responses until it ends.
   */
  constructor(ctx, req, res, { kind, clientId, release, seq = null }) {
    this.ctx = ctx;
    this.req = req;
    this.res = res;
    this.kind = kind;
    this.clientId = clientId;
    this.opened = false;
    this.closed = false;
    this.lastWrite = Date.now();
    this._onClosed = null;   // the owner's: the client went away or we ended
    this._onFinish = null;   // the owner's: what to send when the gateway closes
    this._queue = [];        // frame entries ({frame: Buffer, seq, keep}) not yet wholly handed to the socket
    this._offset = 0;        // bytes of _queue[0] handed already
    this._queued = 0;        // bytes of _queue not yet handed
    this._held = false;      // frames wait, unwritten, until release()
    this._waiting = false;   // waiting for 'drain'
    this._stalledAt = 0;     // when it began waiting for 'drain'
    this._idle = [];         // callbacks for when everything is written
    this._ending = false;
    this._pushed = 0;        // frames pushed so far (mark() and clear())
    this.maxHeld = 0;        // the most bytes it ever held, for tests and stats
    /** The seq of the last frame begun (handed to the socket, at least in part): where the client is. */
    this.seq = seq;
    /** What the client has open of its run's constructs once the last frame begun is written (its owner's value, given with push). */
    this.constructs = null;
    this._drain = () => {
      this._waiting = false;
      this._stalledAt = 0;
      this._pump();
    };
    res.on('drain', this._drain);
    res.on('close', () => this._closed());
    ctx.responses.add(this, release);
    // a client that went away while its request was checked (an
    // authorize hook that took its time): its response is over already,
    // and no 'close' will come (once its owner has set its handlers)
    if (res.destroyed) queueMicrotask(() => this._closed());
  }

  /** fn() once the response is over: the client went away, or it ended. */
  onClosed(fn) { this._onClosed = fn; }

  /** fn() instead of end() when the gateway closes (RUN_FINISHED, reason gateway_closed). */
  onFinish(fn) { this._onFinish = fn; }

  /** The gateway closes: the owner's finish, or the end. */
  finish() {
    if (this._onFinish) this._onFinish();
    else this.end();
  }

  open() {
    if (this.opened || this.closed) return;
    this.opened = true;
    const headers = {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      'x-accel-buffering': 'no', // proxies that buffer (nginx) pass it through
      'x-content-type-options': 'nosniff',
      connection: 'keep-alive',
      ...corsHeaders(this.ctx.config),
    };
    this.res.writeHead(200, headers);
    if (this.res.socket) {
      this.res.socket.setNoDelay(true);
      this.res.socket.setKeepAlive(true, 30000);
    }
    // the EventSource reconnection delay
    this.res.write(`retry: ${this.ctx.config.retry}\n\n`);
  }

  /** Bytes this client holds: queued and not handed to the socket, plus the socket's unflushed bytes. */
  get held() {
    return this._queued + (this.res.writableLength || 0);
  }

  /**
   * Queue a frame entry ({frame: Buffer, seq, keep}); false if it would
   * take the client past maxBytes (the frame is not queued).  A frame
   * always goes when nothing is queued, and so does one with keep (run
   * lifecycle events, which clear() leaves too), or pushed with must (the
   * conversation that goes with the state event queued before it).
   * constructs: what the client has open once this frame is written
   * (this.constructs, once it is begun).
   */
  push(entry, must = false, constructs = undefined) {
    if (this.closed) return true;
    const n = entry.frame.length + ENTRY_BYTES;
    const held = this.held;
    if (!entry.keep && !must && (this._queue.length > 0 || held > 0) && held + n > this.ctx.config.maxClientBytes) return false;
    this._pushed++;
    this._queue.push({ frame: entry.frame, seq: entry.seq, keep: !!entry.keep, n: this._pushed, constructs });
    this._queued += n;
    if (this._queued > this.maxHeld) this.maxHeld = this._queued;
    this._pump();
    return true;
  }


  /** Keep queued frames unwritten until release(). */
  hold() { this._held = true; }

  release() {
    this._held = false;
    this._pump();
  }

  /** A mark: clear(mark) drops what was pushed after it. */
  mark() { return this._pushed; }

  /**
   * Drop the frames pushed after mark (0: all of them) and not yet begun,
   * but those to keep (the one being written, if any, goes on).
   */
  clear(mark = 0) {
    this._queue = this._queue.filter((e, i) => (i === 0 && this._offset > 0) || e.keep || e.n <= mark);
    this._queued = this._queue.reduce((n, e) => n + e.frame.length + ENTRY_BYTES, 0) - this._offset;
  }

  /** Call fn once everything queued has been handed to the socket and flushed (now, if it has). */
  whenIdle(fn) {
    if (this.closed) return;
    if (this._queue.length === 0 && !this._waiting) fn();
    else this._idle.push(fn);
  }

  _pump() {
    if (this.closed || this._held) return;
    this.open();
    while (!this._waiting && this._queue.length > 0) {
      const head = this._queue[0];
      const end = Math.min(head.frame.length, this._offset + SLICE);
      const slice = this._offset === 0 && end === head.frame.length ? head.frame : head.frame.subarray(this._offset, end);
      if (this._offset === 0 && head.seq !== undefined) this.seq = head.seq;
      if (this._offset === 0 && head.constructs !== undefined) this.constructs = head.constructs;
      this._queued -= end - this._offset + (end === head.frame.length ? ENTRY_BYTES : 0);
      this._offset = end;
      if (end === head.frame.length) {
        this._queue.shift();
        this._offset = 0;
        this.ctx.counters.add('frames');
      }
      this.lastWrite = Date.now();
      if (!this.res.write(slice)) {
        this._waiting = true;
        this._stalledAt = Date.now();
      }
    }
    const held = this.held;
    if (held > this.maxHeld) this.maxHeld = held;
    if (!this._waiting && this._queue.length === 0 && this._idle.length > 0) {
      const fns = this._idle;
      this._idle = [];
      for (const fn of fns) fn();
    }
  }

  /** Every heartbeat tick: a comment on an idle response; cut off a client stalled over its bound. */
  tick(now) {
    if (!this.opened || this.closed) return;
    if (this._waiting) {
      if (now - this._stalledAt > this.ctx.config.stallTimeout && this.held > this.ctx.config.maxClientBytes) {
        this.ctx.counters.add('stalled');
        this.res.destroy();
      }
      return;
    }
    if (this._queue.length > 0 || now - this.lastWrite < this.ctx.config.heartbeat) return;
    this.lastWrite = now;
    this.ctx.counters.add('heartbeats');
    this.res.write(':\n\n'); // an SSE comment: ignored by EventSource and @ag-ui/client
  }

  /** End the response once what is queued has gone (or with status, if nothing was sent yet). */
  end(status, message) {
    if (this.closed || this._ending) return;
    if (!this.opened && status) {
      refuse(this.ctx, this.res, status, message);
      this._closed();
      return;
    }
    this._ending = true;
    this.release();
    this.whenIdle(() => {
      this.open();
      this.res.end();
      this._closed();
    });
  }

  _closed() {
    if (this.closed) return;
    this.closed = true;
    this._queue = [];
    this._queued = 0;
    this._idle = [];
    this.res.removeListener('drain', this._drain);
    this.ctx.responses.remove(this);
    if (this._onClosed) this._onClosed();
  }
}

module.exports = { SseResponse, SLICE };
