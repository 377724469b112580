'use strict';
// One follower of one stream, made by hub.follow(), in two parts:
//
//   SubscriptionCore  its cursor (the seq of the last event it accepted,
//                     and the state after it) and its queue (what it
//                     accepted and has not handed out yet), which it hands
//                     to its listeners one event at a time.  Its public
//                     methods are the hub's named interface to it: the hub
//                     tells it what came in (an event, a page of the log, a
//                     snapshot, a head) and asks it what it needs next (the
//                     rules are cursor.js's); it tells the hub what it did
//                     through the host callbacks it was given (unfollow,
//                     delivered, listenerFailed, schedule: drain() me).
//   HxSubscription    what the application gets: an EventEmitter with the
//                     subscription's events, its ready promise, its
//                     position and counters (read from its core), stop().
//
// Each changes no one's fields but its own.
const { EventEmitter } = require('node:events');
const { parseSeq, classify, planPage, moreAfterPage, wantsRead, hasRoom, isLow } = require('./cursor');
const { callListeners, callEach, noop } = require('./emit');
const { isStreamEnd, stateTooLarge } = require('./apply');
const { EventQueue } = require('./queue');

// bytes counted for an event whose size the client was not told (a
// synthetic snapshot's envelope, an end event read with a snapshot)
const ENVELOPE_BYTES = 128;

function syntheticSnapshot(stream, seq, state) {
  return {
    type: 'STATE_SNAPSHOT',
    snapshot: state,
    timestamp: Date.now(),
    metadata: { stream, seq, synthetic: true },
  };
}

/**
 * What identifies the event at a seq, to tell whether a server still has
 * the one we accepted there: its type, its timestamp (ms) and the bytes of
 * its JSON text.  Two different commits at one seq (one that a failover
 * lost, and the new primary's) alike in all three would need the same
 * millisecond and the same size.
 */
function eventMark(event, bytes) {
  return markOf(event && event.type, event && event.timestamp, bytes);
}

function markOf(type, timestamp, bytes) {
  // a member the event does not have is null, as the server's mark of a
  // snapshot's position gives it (markOfRow)
  return `${type === undefined ? null : type}|${timestamp === undefined ? null : timestamp}|${bytes}`;
}

/**
 * The parts of the mark of the event at a snapshot's seq, as the snapshot
 * read gives them (sql.snapshots: [type, timestamp, the bytes of its JSON
 * text]), or null: the log does not hold that event (none yet, or trimmed).
 */
function markOfRow(mark) {
  if (!Array.isArray(mark) || mark.length !== 3 || !Number.isSafeInteger(mark[2])) return null;
  return { type: markPart(mark[0]), timestamp: markPart(mark[1]), bytes: mark[2] };
}

/**
 * A part of an event's mark as it is now: a primitive as it is (the mark's
 * text is made only when a reconnect verifies, from the parts kept when the
 * event was accepted), an object as its text now (a listener may change the
 * object after).
 */
function markPart(v) {
  return typeof v === 'object' && v !== null ? String(v) : v;
}

function optional(v) {
  return v === undefined || v === null ? null : String(v);
}

/**
 * The subscription's cursor and queue; the hub's interface to it is its
 * public methods and getters.
 */
class SubscriptionCore {
  /**
   * @param {{unfollow: (core) => void, delivered: (core) => void, listenerFailed: (err, core) => void, schedule: (core) => void}} host
   *   the hub's callbacks: stop it (stop()), it handed something out (it may
   *   want more), a listener failed, call its drain() in a microtask
   * @param {{table?: string, key?: string, stream?: string}} target
   * @param {object} o follow()'s options
   * @param {{maxQueue: number, maxQueueBytes: number, maxStateBytes: number, tick: number}} d the hub's defaults, and the tick it joins at
   */
  constructor(host, target, o, d) {
    this._host = host;
    this._table = optional(target.table);
    this._key = optional(target.key);
    this._stream = optional(target.stream);
    this._channel = null;
    const after = o.after === undefined || o.after === null ? null : parseSeq(o.after);
    if (after === null && o.after !== undefined && o.after !== null) {
      throw new TypeError('HxHub: options.after must be a seq: an integer >= 0 (a number, a bigint, or a string of decimal digits)');
    }
    const hasBase = Object.prototype.hasOwnProperty.call(o, 'base');
    if (o.state === true && after !== null && after > 0 && !hasBase) {
      throw new TypeError('HxHub: state: true with after needs base, the state at that seq');
    }
    if (this._table === null && this._stream === null) {
      throw new TypeError('HxHub: follow() needs {table, key} or {stream}');
    }
    if (this._table !== null && this._key === null) throw new TypeError('HxHub: follow({table}) needs a key');
    this._after = after;
    // Keep states unless told not to; resuming from a seq without the
    // state at it cannot compute states (deltas need a base).
    this._keepState = o.state === undefined ? (after === null || after === 0 || hasBase) : !!o.state;
    this._maxQueue = Math.max(1, Math.floor(o.maxQueue === undefined ? d.maxQueue : o.maxQueue));
    this._maxBytes = Math.max(1, Math.floor(o.maxQueueBytes === undefined ? d.maxQueueBytes : o.maxQueueBytes));
    this._maxStateBytes = o.maxStateBytes === undefined ? d.maxStateBytes : o.maxStateBytes;
    if (!(Number.isSafeInteger(this._maxStateBytes) && this._maxStateBytes > 0)) {
      throw new TypeError('HxHub: options.maxStateBytes must be a positive integer (bytes)');
    }
    this._overflow = o.overflow === undefined ? 'log' : o.overflow;
    if (this._overflow !== 'log' && this._overflow !== 'snapshot') {
      throw new TypeError("HxHub: options.overflow is 'log' or 'snapshot'");
    }

    // handed out (delivered to the listeners)
    this._outSeq = after === null ? 0 : after;
    this._outState = this._keepState ? (hasBase ? o.base : null) : undefined;
    this._outEnded = false;

    // accepted (the cursor)
    this._seq = this._outSeq;
    this._state = this._outState;
    this._stateBytes = this._keepState && hasBase ? Buffer.byteLength(JSON.stringify(o.base === undefined ? null : o.base)) : 0;
    this._ended = false;

    this._entry = null;
    this._target = null;       // the hub's record of {table, key}, when followed that way
    this._phase = 'resolving'; // resolving | snapshot | live | paused | stopped
    this._started = after !== null; // has a position (a snapshot or a resume point)
    this._queue = new EventQueue();
    this._inflight = false;    // a listener's promise is pending
    this._drainQueued = false;
    this._held = false;        // an event was refused for want of room
    this._more = false;        // the last log read stopped before the log's end
    this._force = false;       // read the log whatever the heads say
    this._synced = false;      // a read that started after it joined has come back
    this._joinTick = d.tick;
    this._snapTick = -1;       // the snapshot request it waits for (0: requested, not sent)
    this._resyncReason = null;
    this._marked = false;      // it accepted the event at its cursor, whose eventMark is made of:
    this._markType = undefined;  //   its type,
    this._markTime = undefined;  //   its timestamp,
    this._markBytes = 0;         //   its size
    this._verify = false;      // a new reader connection: is that event still there, unchanged?
    // a resume point (after > 0) not yet found in the log: the number of
    // reads that found the log ending below it (-1: found, or none to find),
    // and whether it waits before the next (the hub's grace, then a resync)
    this._ahead = after !== null && after > 0 ? 0 : -1;
    this._aheadWait = false;
    this._exact = false;       // its state comes from a snapshot the hub read (not from a base, nor
                               // from a log that starts at seq 1 of a row that may predate its trigger)
    this._readyQueued = false;
    this._readyDone = false;
    this._failure = null;

    /** Counters, for monitoring and tests. */
    this.stats = {
      events: 0,        // events handed out
      notifications: 0, // hints (events and references) that came by NOTIFY
      references: 0,    // ... of which references
      walEvents: 0,     // events decoded from the WAL
      pages: 0,         // log reads that included this stream
      resyncs: 0,
      overflows: 0,     // times its queue was full when an event came
      maxQueued: 0,     // the most events it ever had queued
      maxQueuedBytes: 0, // the most bytes it ever had queued
    };
    /** Resolves once the subscription has its position: the snapshot handed
     * out, or (with after) the log read up to the stream's head. */
    this.ready = new Promise((resolve, reject) => {
      this._resolveReady = resolve;
      this._rejectReady = reject;
    });
    this.ready.catch(noop); // rejections are for whoever awaits it
    /** What the application gets. */
    this.subscription = new HxSubscription(this);
  }

  get table() { return this._table; }
  get key() { return this._key; }
  /** The stream's name, known once resolved ("<table>:<key>"). */
  get stream() { return this._stream; }
  /** The stream's LISTEN channel, known once resolved. */
  get channel() { return this._channel; }
  /** The seq of the last event handed out (0: none yet). */
  get seq() { return this._outSeq; }
  /** The state after the last event handed out (with state: true). */
  get state() { return this._outState; }
  /** Has the stream ended (hx.stream_end) with no re-insert since? */
  get ended() { return this._outEnded; }
  /** The seq of the last event accepted (its cursor). */
  get cursor() { return this._seq; }
  /** The stream it follows (an entry.js StreamEntry), once resolved. */
  get entry() { return this._entry; }
  /** The hub's record of its {table, key}, when followed that way. */
  get target() { return this._target; }

  /** Events accepted and not yet handed out. */
  get queued() { return this._queue.events; }
  /** Their bytes (the size of their JSON text, and of the states kept with them). */
  get queuedBytes() { return this._queue.bytes; }
  /** Not keeping up: the queue was full and events wait in the log (or for a snapshot). */
  get behind() { return this._held || this._phase === 'paused'; }
  /** 'resolving' | 'snapshot' | 'live' | 'paused' | 'stopped' */
  get phase() { return this._phase; }
  get stopped() { return this._phase === 'stopped'; }

  /** Stop following (the hub stops it): no event is handed out after this. */
  stop() { this._host.unfollow(this); }

  // -- what the hub tells it ------------------------------------------------

  /** It was followed as {table, key}: the hub's record of that target. */
  bindTarget(target) {
    this._target = target;
  }

  /** Has it a position (a snapshot, or a resume point)? */
  hasPosition() {
    return this._started;
  }

  /** It follows entry now (its stream resolved). */
  attach(entry) {
    this._entry = entry;
    this._stream = entry.stream;
    this._channel = entry.channel;
    if (this._after !== null) {
      this._phase = 'live';
      this._force = true; // it does not know the head: read the log after its seq
    } else if (entry.source !== null) {
      this._phase = 'snapshot';
    } else {
      // {stream} alone: no snapshot; the state builds up from the log's
      // first event (an insert's STATE_SNAPSHOT)
      this._phase = 'live';
      this._started = true;
      this._force = true;
    }
  }

  /** A hint or an event reached it: 'notify', 'ref' or 'wal'. */
  noticed(via) {
    if (via === 'wal') {
      this.stats.walEvents++;
      return;
    }
    this.stats.notifications++;
    if (via === 'ref') this.stats.references++;
  }

  /**
   * An event from the log's own content (the WAL), at seq.  Returns what
   * became of it: 'old', 'ahead' (a gap: the log has more), 'accepted',
   * 'overflow' (no room), or an Error (the delta does not apply).
   */
  offer(seq, event, bytes) {
    if (this._phase !== 'live' || this._verify) return 'old'; // verifying: the log read brings it
    const kind = classify(this._seq, seq);
    if (kind !== 'next') return kind;
    if (!hasRoom(this._queue.events, this._queue.bytes, this._cost(event, bytes), this._maxQueue, this._maxBytes)) {
      this._overflowed();
      return 'overflow';
    }
    return this._accept(seq, event, bytes) || 'accepted';
  }

  /** Its queue was full when an event came. */
  _overflowed() {
    this.stats.overflows++;
    if (this._overflow === 'log') {
      this._held = true;
      return;
    }
    // 'snapshot': drop what waits, go back to what was handed out, and
    // read a fresh snapshot once the consumer is done with its event
    this._queue.drop('event');
    if (!this._readyDone) {
      this._readyQueued = false;
      this._queue.drop('ready');
    }
    this._seq = this._outSeq;
    this._state = this._outState;
    this._stateBytes = 0;
    this._ended = this._outEnded;
    this._marked = false; // the cursor went back to an event whose mark it did not keep
    this._more = this._force = false;
    this._phase = 'paused';
    this._resyncReason = 'overflow';
  }

  /** Accept the next event: the state after it, queued for the consumer.  An Error if it does not apply. */
  _accept(seq, event, bytes) {
    const before = this._state;
    let after;
    let stateBytes = 0;
    if (this._keepState) {
      try {
        ({ state: after, bytes: stateBytes } = this._entry.apply(before, this._stateBytes, event, bytes, this._maxStateBytes));
      } catch (err) {
        err.message = err.code === 'HX_STATE_TOO_LARGE'
          ? `hxstate: the state of ${this.stream} after event ${seq}: ${err.message}`
          : `hxstate: event ${seq} of ${this.stream} does not apply: ${err.message}`;
        return err;
      }
    }
    const end = isStreamEnd(event);
    this._seq = seq;
    this._marked = true;
    this._markType = markPart(event.type);
    this._markTime = markPart(event.timestamp);
    this._markBytes = bytes;
    this._state = after;
    this._stateBytes = stateBytes;
    if (end) this._ended = true;
    else if (event.type === 'STATE_SNAPSHOT') this._ended = false;
    // a snapshot's state is the event's own: count it once
    const held = event.type === 'STATE_SNAPSHOT' ? bytes : bytes + stateBytes;
    this._push({ kind: 'event', seq, event, state: after, ended: this._ended, end, before: end ? before : undefined, bytes: held });
    return null;
  }

  /**
   * What accepting an event of `bytes` bytes would add to the queue: the
   * event, and with state: true the state after it (estimated as
   * applySized will count it: the state now and the delta).
   */
  _cost(event, bytes) {
    if (!this._keepState || event.type === 'STATE_SNAPSHOT') return bytes;
    return bytes + this._stateBytes + bytes;
  }

  /** Read a fresh snapshot (the log no longer continues its cursor, a delta did not apply, it diverged, or its resume point is beyond the log). */
  beginResync(reason) {
    this._phase = 'snapshot';
    this._resyncReason = reason;
    this._verify = false;
    this._ahead = -1;
    this._aheadWait = false;
    this._more = this._force = false;
  }

  /**
   * The hub's reader connection is new, and may be to another server (a
   * failover).  PostgreSQL can show a commit that a failover then loses:
   * one made visible on the old primary (its wait for the standby cut short
   * by a shutdown) and never replicated.  A subscription that accepted
   * such an event must not go on from it, nor skip the new primary's own
   * event at that seq as old news.  So, before it takes anything more, it
   * reads the log from its cursor's seq and checks that the event there is
   * the one it accepted (eventMark); if not, or if the log now ends below
   * its cursor, it resyncs (reason 'diverged').
   */
  reverify() {
    if (this._phase !== 'live' || !this._marked || this._seq < 1) return;
    this._verify = true;
    this._force = true;
  }

  /**
   * What it needs next, given its stream: 'snapshot', 'read' (the log
   * after its cursor), 'ready' (its position is reached: queue the ready
   * marker), 'seed' (a snapshot, which a sibling may give), or null.
   */
  need(entry) {
    if (this._phase === 'paused') {
      if (this._queue.length > 0 || this._inflight) return null;
      this._phase = 'snapshot';
    }
    if (this._phase === 'snapshot') {
      if (!entry.armed || this._snapTick >= 0) return null;
      if (this._queue.events >= this._maxQueue || this._queue.bytes >= this._maxBytes) return null;
      return this._started ? 'snapshot' : 'seed';
    }
    if (this._phase !== 'live') return null;
    if (!isLow(this._queue.events, this._queue.bytes, this._maxQueue, this._maxBytes)) return null; // its consumer first
    this._held = false;
    if (this._ahead >= 0) return this._aheadWait ? null : 'read'; // its resume point first
    if (wantsRead(this._seq, entry.seen, this._force, this._more)) return 'read';
    if (!this._readyQueued && this._synced) {
      this._readyQueued = true;
      this._push({ kind: 'ready' });
    }
    return null;
  }

  /** Its position, for a sibling that joins the stream: exact, live, with its state. */
  seed() {
    if (this._phase !== 'live' || !this._exact || this._ended || !this._keepState) return null;
    const mark = this._marked ? { type: this._markType, timestamp: this._markTime, bytes: this._markBytes } : null;
    return { seq: this._seq, state: this._state, bytes: this._stateBytes, mark };
  }

  /** The cursor a read of the log would start after, or null: it does not want one now. */
  readFrom(entry) {
    if (this._phase !== 'live') return null;
    if (!isLow(this._queue.events, this._queue.bytes, this._maxQueue, this._maxBytes)) return null;
    if (this._aheadWait) return null;
    if (this._verify || this._ahead >= 0) return this._seq - 1; // the event at its cursor too
    return wantsRead(this._seq, entry.seen, this._force, this._more) ? this._seq : null;
  }

  /** A snapshot is wanted (0) or was not sent after all (-1), or its read went out at tick. */
  snapshotRequested() { this._snapTick = 0; }
  snapshotUnsent() {
    if (this._phase === 'snapshot' && this._snapTick === 0) this._snapTick = -1;
  }
  snapshotSent(tick) {
    if (this._phase === 'snapshot') this._snapTick = tick;
  }
  waitsFor(tick) { return this._phase === 'snapshot' && this._snapTick === tick; }
  snapshotRetry() { this._snapTick = -1; }

  /** How many reads found the log ending below its resume point (see page()). */
  get aheadChecks() { return this._ahead; }
  /** The hub's wait after such a read is over: read again. */
  aheadRetry() { this._aheadWait = false; }

  /**
   * Start (again) from a snapshot: seq, state (bytes: its size), the last
   * event when the state is NULL, and the mark of the event at seq
   * ({type, timestamp, bytes}, markOfRow) or null.  The mark is what a
   * reconnect verifies: a snapshot read on a primary that a failover then
   * loses commits from may show one of them, and the follower positioned
   * there must notice as one that accepted it as an event does.  Returns
   * 'stale' (older than its cursor: it needs another), 'initial' or
   * 'resync'; or an Error (HX_STATE_TOO_LARGE) for a state larger than
   * its maxStateBytes.
   */
  takeSnapshot(seq, state, last, bytes, mark = null) {
    this._snapTick = -1;
    if (this._keepState && state !== null && bytes > this._maxStateBytes) {
      const err = stateTooLarge(bytes, this._maxStateBytes);
      err.message = `hxstate: the state of ${this.stream} at seq ${seq}: ${err.message}`;
      return err;
    }
    // an older snapshot than its cursor: one read before its events were
    // (read another), unless its cursor is on a commit the server lost
    if (this._started && seq < this._seq && this._resyncReason !== 'diverged' && this._resyncReason !== 'ahead') return 'stale';
    const initial = !this._started;
    const previousSeq = this._seq;
    const ended = isStreamEnd(last);
    this._started = true;
    this._seq = seq;
    this._state = this._keepState ? (ended ? null : state) : undefined;
    this._stateBytes = this._keepState && !ended ? bytes : 0;
    this._ended = ended;
    this._phase = 'live';
    this._synced = true;
    this._marked = mark !== null && seq > 0;
    this._markType = this._marked ? mark.type : undefined;
    this._markTime = this._marked ? mark.timestamp : undefined;
    this._markBytes = this._marked ? mark.bytes : 0;
    this._verify = false;
    this._ahead = -1;
    this._aheadWait = false;
    this._exact = this._keepState;
    this._more = this._force = false;
    let resync;
    if (!initial) {
      this.stats.resyncs++;
      resync = { seq, previousSeq, state: ended ? null : state, reason: this._resyncReason || 'trimmed' };
    }
    this._resyncReason = null;
    const event = ended ? last : syntheticSnapshot(this.stream, seq, state);
    this._push({ kind: 'event', seq, event, state: this._state, ended, end: ended, before: null, resync, bytes: ENVELOPE_BYTES + bytes });
    if (!this._readyQueued) {
      this._readyQueued = true;
      this._push({ kind: 'ready' });
    }
    return initial ? 'initial' : 'resync';
  }

  /**
   * A page of the log read after seq `after` at tick, limit rows a stream:
   * rows [{seq, event, bytes}].  Returns null, 'reread' (its cursor went
   * back below the read), 'trimmed' (the log skips a seq after its cursor:
   * resync), 'diverged' (see _reverify: resync), 'ahead' (its resume
   * point is beyond the log's end: the hub waits and reads again, then
   * resyncs), or an Error (a delta did not apply: resync).
   *
   * A resume point (after > 0) is checked as a reconnect checks a cursor:
   * the first read starts at the event at it, and a log that ends below
   * it holds no event the subscription can continue from.  That may be
   * for a while only (a commit announced an instant before it is visible,
   * a reader that lags the server the seq came from), so the hub reads
   * again a few times, after a growing wait, before it resyncs.
   */
  page(after, rows, limit, tick) {
    if (this._phase !== 'live') return null;
    if (this._ahead >= 0) {
      const top = rows.length > 0 ? rows[rows.length - 1].seq : after;
      if (after >= this._seq) return null; // a read that did not start at its resume point: read again
      if (top < this._seq) {
        if (rows.length >= limit) return null; // a page that does not reach it: read on
        this._ahead++;
        this._aheadWait = true;
        return 'ahead';
      }
      this._ahead = -1; // the log holds it (or was trimmed past it and goes on): on as usual
    }
    if (this._verify) {
      const top = rows.length > 0 ? rows[rows.length - 1].seq : after;
      if (after >= this._seq || (rows.length >= limit && top < this._seq)) {
        this._force = true; // a page that does not reach its cursor's seq: read again
        return null;
      }
      this._verify = false;
      const at = rows.find((r) => r.seq === this._seq);
      if (at) {
        if (eventMark(at.event, at.bytes) !== markOf(this._markType, this._markTime, this._markBytes)) return 'diverged';
      } else if (top < this._seq) {
        return 'diverged'; // the log ends below its cursor
      }
      // else the log was trimmed past its cursor and goes on: nothing to compare
    }
    const plan = planPage(this._seq, after, rows.map((r) => r.seq));
    if (plan.reread) {
      this._force = true;
      return 'reread';
    }
    this.stats.pages++;
    let full = false;
    let taken = 0;
    for (; taken < plan.run; taken++) {
      const row = rows[plan.start + taken];
      if (!hasRoom(this._queue.events, this._queue.bytes, this._cost(row.event, row.bytes), this._maxQueue, this._maxBytes)) {
        full = true;
        break;
      }
      const failed = this._accept(row.seq, row.event, row.bytes);
      if (failed) return failed;
    }
    if (this._joinTick < tick) this._synced = true;
    this._force = false;
    if (!full && plan.hole) return 'trimmed';
    const top = rows.length > 0 ? rows[rows.length - 1].seq : after;
    this._more = moreAfterPage(full, rows.length, limit, this._seq, top);
    return null;
  }

  /** The heads were read at tick. */
  headRead(tick) {
    if (this._joinTick < tick) this._synced = true;
  }

  /** It cannot go on: err is what 'error' and ready's rejection say. */
  failed(err) {
    this._failure = err;
    this.error(err);
  }

  /** Stopped: nothing is handed out any more; ready rejects if it had not resolved. */
  halt(why) {
    if (this._phase === 'stopped') return false;
    this._phase = 'stopped';
    this._queue.drop();
    if (!this._readyDone) this._rejectReady(this._failure || why);
    return true;
  }

  // -- the queue ---------------------------------------------------------

  _push(item) {
    this._queue.push(item);
    this.stats.maxQueued = this._queue.maxEvents;
    this.stats.maxQueuedBytes = this._queue.maxBytes;
    if (!this._drainQueued && !this._inflight) {
      this._drainQueued = true;
      this._host.schedule(this);
    }
  }

  /**
   * Hand queued items to the listeners, one at a time (the hub calls it in
   * a microtask after it asked, through host.schedule).
   */
  drain() {
    this._drainQueued = false;
    this._drain();
  }

  _drain() {
    let handed = false; // an event handed out (the hub is told once, after)
    while (!this._inflight && this._queue.length > 0 && this._phase !== 'stopped') {
      const item = this._queue.shift();
      if (item.kind === 'ready') {
        this._readyDone = true;
        this._resolveReady();
        continue;
      }
      this._outSeq = item.seq;
      this._outState = item.state;
      this._outEnded = item.ended;
      this.stats.events++;
      if (item.resync) this._emitSafe('resync', item.resync);
      const pending = this._phase === 'stopped' ? null
        : callEach(this.subscription.eventListeners(), this.subscription, item.event, item.state, this._onListenerError);
      if (pending) {
        this._inflight = true;
        pending.then(() => this._settled(item));
        if (handed) this._host.delivered(this);
        return;
      }
      if (item.end) this._emitSafe('end', item.event, item.before);
      handed = true;
    }
    if (handed || this._queue.length === 0) this._host.delivered(this);
  }

  _settled(item) {
    this._inflight = false;
    if (this._phase === 'stopped') return;
    if (item.end) this._emitSafe('end', item.event, item.before);
    this._host.delivered(this);
    this._drain();
  }

  /**
   * A listener that throws or rejects does not disturb the bookkeeping:
   * its error goes to 'error' (this subscription's if someone listens
   * there, else the hub's, else a process warning), and the subscription
   * goes on with the next event.
   */
  _onListenerError = (err) => {
    this._host.listenerFailed(err, this);
  };

  _emitSafe(name, ...args) {
    if (this._phase === 'stopped') return;
    callListeners(this.subscription, name, args, this._onListenerError);
  }

  /** 'error' only when someone listens: an unheard 'error' would crash the process. */
  error(err) {
    if (this._phase === 'stopped' || this.subscription.listenerCount('error') === 0) return false;
    callListeners(this.subscription, 'error', [err], (e) => process.nextTick(() => { throw e; }));
    return true;
  }
}

/**
 * What hub.follow() returns.  Emits 'event' (event, state), 'end' (event,
 * lastState), 'resync' ({seq, previousSeq, state, reason}) and 'error'
 * (err; only when listened to).  Its position and counters are its
 * core's.
 */
class HxSubscription extends EventEmitter {
  #core;
  #eventListeners = null; // rawListeners('event'), until the listeners change

  /** Made by its core (hub.follow()), not by applications. */
  constructor(core) {
    super();
    this.#core = core;
  }

  // Every way to add or remove a listener goes through these (once() and
  // prependOnceListener() add through on() and prependListener(), a once
  // listener removes itself through removeListener()), so the 'event'
  // listeners are copied once for all the events until they change, not
  // once an event.
  on(name, fn) { this.#eventListeners = null; return super.on(name, fn); }
  addListener(name, fn) { this.#eventListeners = null; return super.addListener(name, fn); }
  prependListener(name, fn) { this.#eventListeners = null; return super.prependListener(name, fn); }
  removeListener(name, fn) { this.#eventListeners = null; return super.removeListener(name, fn); }
  off(name, fn) { this.#eventListeners = null; return super.off(name, fn); }
  removeAllListeners(...args) { this.#eventListeners = null; return super.removeAllListeners(...args); }

  /**
   * The listeners of 'event' (with once wrappers), as rawListeners gives
   * them: a list of its own, which neither the caller nor a change of the
   * listeners alters (a change makes a new one).
   */
  eventListeners() {
    if (this.#eventListeners === null) this.#eventListeners = Object.freeze(this.rawListeners('event'));
    return this.#eventListeners;
  }

  get table() { return this.#core.table; }
  get key() { return this.#core.key; }
  /** The stream's name, known once resolved ("<table>:<key>"). */
  get stream() { return this.#core.stream; }
  /** The stream's LISTEN channel, known once resolved. */
  get channel() { return this.#core.channel; }
  /** The seq of the last event handed out (0: none yet). */
  get seq() { return this.#core.seq; }
  /** The state after the last event handed out (with state: true). */
  get state() { return this.#core.state; }
  /** Has the stream ended (hx.stream_end) with no re-insert since? */
  get ended() { return this.#core.ended; }
  /** Resolves once it has its position: the snapshot handed out, or (with after) the log read up to the stream's head. */
  get ready() { return this.#core.ready; }
  /** Events accepted and not yet handed out. */
  get queued() { return this.#core.queued; }
  /** Their bytes (the size of their JSON text, and of the states kept with them). */
  get queuedBytes() { return this.#core.queuedBytes; }
  /** Not keeping up: the queue was full and events wait in the log (or for a snapshot). */
  get behind() { return this.#core.behind; }
  /** 'resolving' | 'snapshot' | 'live' | 'paused' | 'stopped' */
  get phase() { return this.#core.phase; }
  get stopped() { return this.#core.stopped; }
  /** Counters, for monitoring and tests. */
  get stats() { return this.#core.stats; }

  /** Stop following; no event is handed out after this. */
  stop() { this.#core.stop(); }

  /** The state now as a synthetic STATE_SNAPSHOT (state: true only). */
  snapshotEvent() {
    return syntheticSnapshot(this.stream, this.seq, this.state === undefined ? null : this.state);
  }
}

module.exports = { SubscriptionCore, HxSubscription, syntheticSnapshot, markOfRow };
