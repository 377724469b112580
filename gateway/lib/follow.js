'use strict';
// Following one stream for one response: the prelude, resuming by seq,
// the conversation, and a slow client.
//
// What a response gets, for GET /streams and POST /agents alike (the
// owner, stream.js or run.js, sends RUN_STARTED just before the first of
// these and RUN_FINISHED at the end):
//
//   a first join:   STATE_SNAPSHOT (id: its seq m), MESSAGES_SNAPSHOT,
//                   then every event after m as it commits
//   a reconnect     up to date (its Last-Event-ID n = m): MESSAGES_SNAPSHOT,
//   with n:         then every event after m
//                   behind (n < m): the events n+1 .. m from the log, then
//                   MESSAGES_SNAPSHOT, then every event after m
//                   ahead (n > m, a Last-Event-ID from elsewhere): as a first join
//
// with two exceptions that give a fresh STATE_SNAPSHOT instead of the
// events after n: the log no longer holds n + 1 (trimmed), and the events
// after n cross an hx.stream_end that is not the stream's last event (the
// row was deleted and its key inserted again: the client's seq belongs to
// the previous row, whose history is never replayed to a reader of the
// current one).  A reconnect from the hx.stream_end a stream ended with,
// with nothing after it, gets nothing: the owner answers 204.
//
// MESSAGES_SNAPSHOT (tables with a messages path) carries the conversation
// after the event before it, and follows every event that changes the
// conversation.  It has no SSE id: a reconnect resumes after the state
// event before it, and always gets the conversation again.  Only a state
// with a conversation (an array at the path) gets one, and a snapshot
// only when its conversation is not the one last queued; a conversation
// this response sent that is gone gets one empty MESSAGES_SNAPSHOT.  It
// goes with its state event whatever the client holds (sse.js), and
// before the owner hears of the interrupts of the same event (which may
// end the run: AG-UI wants the state and the messages before the
// RUN_FINISHED that carries an interrupt).
//
// A run's messages, tool calls and reasoning as it makes them: the
// stream's run events (TEXT_MESSAGE_*, TOOL_CALL_*, REASONING_*, STEP_*,
// written by a RunWriter or any writer of hx_stream_emit and
// hx_stream_send) go out as they come, each checked against what the
// stream has open (hxstate-client's constructs): one that opens, continues
// or closes nothing open is dropped (AG-UI's verifier would refuse the
// response).  A response that joins in the middle of a message (a first
// join, a reconnect, a client that fell behind) gets, after the
// conversation in its prelude, a prelude of what is open at the seq it
// joins at (openings.js): each open step, message, tool call and
// reasoning reopened, with what it holds so far as one CONTENT (or ARGS),
// then the next fragment.  A reconnect that is behind gets the state
// events after its seq but not the run events (they are in that prelude,
// or in the conversation once ended: the state's messages are the truth,
// tool results included).  The prelude's conversation goes
// out even for a state without one (as an empty MESSAGES_SNAPSHOT) when
// something is reopened: it drops the partial copies a client kept from
// before.  A MESSAGES_SNAPSHOT sent while the client has messages open
// comes between their closing and their reopening (a snapshot replaces
// the client's messages: one open would lose what it held), and a
// response that ends (RUN_FINISHED) closes whatever its client has open.
//
// What is followed of a stream is bounded, maxStateBytes: a projection
// past it (or the text its open constructs hold) ends the response with
// RUN_ERROR hxstate_state_too_large.
//
// The snapshot (m and the state at m) is read first, with a subscription
// of its own; a reconnect that is behind then reads n+1 .. m with a second
// one, whose events are held (not written) until m, so that nothing of a
// previous row goes out.  Subscriptions keep no state (state: false): the
// gateway forwards events, and follows only the parts of the state it
// reads (the conversation and the interrupts: projection.js), shared by
// every response of a stream at one seq.
//
// A client that holds too many bytes (sse.js) has its queue dropped, and
// once it has taken what was being written it starts again: from a fresh
// snapshot (overflow 'snapshot', what a UI wants), or from the log after
// the last seq it got (overflow 'log': every seq, later).
const crypto = require('node:crypto');
const { isDeepStrictEqual } = require('node:util');
const { frameFor } = require('./frames');
const { project, measure, applyDelta } = require('./projection');
const { messagesOf, interruptsOf, getPointer } = require('./agui');
const { constructs: C } = require('hxstate-client');

const STREAM_END = 'hx.stream_end';
const UNKNOWN = Symbol('unknown'); // what the client has of the conversation is not known
const NONE = Symbol('none');       // it has none from this response (or was told it is gone)
const isEnd = (e) => e.type === 'CUSTOM' && e.name === STREAM_END;
const EMPTY = C.emptyConstructs();
// events that open or close constructs: a run's, its markers, a stream's end
const opensOrCloses = (e) => C.isConstructEvent(e.type) || C.isRunMarker(e) || isEnd(e);

class Follower {
  /**
   * ctx: the gateway's context (context.js); target: {table, key,
   * stream}; table: its configuration; conn: the SseResponse; on:
   * {preface() (the entry to
   * send before the first frame), prelude() (the prelude is queued: the
   * client's state and conversation are the stream's), event(event)
   * (after each event queued), end(event), gone() (a reconnect from the
   * end: nothing to send), fail(err), interrupts(list, seq)}.
   */
  constructor(ctx, target, table, conn, on) {
    this.ctx = ctx;
    this.target = target;
    this.table = table;
    this.conn = conn;
    this.on = on;
    this.paths = [table.messages, table.interrupt].filter((p) => p !== null);
    this.sub = null;
    this.stream = null; // the followed stream's name, once known
    this.sent = null;          // the seq of the last event queued
    this.proj = null;          // the projection after it (null: not known yet)
    this.interrupts = [];      // the pending interrupts after it
    this.stopped = false;
    this.started = false;      // the preface went out
    this.catching = false;     // reading n+1 .. m of a reconnect, held
    this.preluded = false;     // the prelude is queued
    this.sentMessages = UNKNOWN; // the conversation last queued (NONE: none, or an empty one for one gone)
    this.hadConversation = false; // a conversation was queued (one gone then gets an empty one)
    this.open = EMPTY;         // what the stream has open after the last event queued
    this.clientOpen = EMPTY;   // what the client has open once what was queued is written
    this.reopenShared = null;  // the reopening frames last queued (shared with the stream's other responses)
  }

  /** Start: a first join (after null) or a reconnect after seq after. */
  start(after) {
    this._begin(after);
  }

  stop() {
    if (this.stopped) return;
    this.stopped = true;
    this._unfollow();
  }

  // -- subscriptions -------------------------------------------------------

  _unfollow() {
    if (this.sub) {
      const s = this.sub;
      this.sub = null;
      s.stop();
    }
  }

  _follow(after, onEvent) {
    this._unfollow();
    const { table, key } = this.target;
    // the listener never holds an event back: the hub's queue holds only a burst, bounded in bytes too
    const options = { state: false, maxQueue: this.ctx.config.maxQueue, maxQueueBytes: this.ctx.config.maxClientBytes, overflow: 'log' };
    if (after !== null) options.after = after;
    const sub = this.ctx.hub.follow({ table, key }, options);
    this.sub = sub;
    sub.on('event', (event) => {
      if (this.sub !== sub || this.stopped) return;
      this.stream = sub.stream; // the stream as the database names it (known before its first event)
      return onEvent(event); // a promise holds the subscription's next event
    });
    sub.on('error', (err) => this.ctx.log('warn', `${this.target.stream}: ${err.message}`));
    sub.on('resync', (r) => {
      if (r.reason !== 'diverged') return;
      this.ctx.frames.forget(sub.stream); // before the snapshot that follows is framed
      this.ctx.log('warn', `${this.target.stream}: the database lost event ${r.previousSeq} after it was sent (a failover): a snapshot at seq ${r.seq}`);
    });
    sub.ready.then(() => {
      if (this.sub === sub) this.stream = sub.stream; // the stream's name as the database gives it
      if (this.sub === sub && !this.stopped && this.on.ready) this.on.ready();
    }, (err) => {
      if (this.sub === sub && !this.stopped) this.on.fail(err);
    });
    return sub;
  }

  // -- the prelude -----------------------------------------------------------

  /** Read the snapshot (m, state at m), then go on as after and m say. */
  _begin(after) {
    let first = true;
    this._follow(null, (event) => {
      if (!first) return this._live(event);
      first = false;
      const m = event.metadata.seq;
      const ended = isEnd(event);
      const state = ended ? null : event.snapshot;
      if (after === null || after > m) return this._snapshot(event);
      if (after === m) {
        if (ended) {
          this.stop();
          this.on.gone();
          return undefined;
        }
        if (!this._setState(m, state)) return undefined;
        return this._prelude(m);
      }
      this._catchUp(after, m, state, ended);
      return undefined;
    });
  }

  /**
   * Start again within the response (a client that overflowed, an event
   * refused, a projection that cannot be followed): first close what the
   * client has open (clientOpen: what it has), then as _begin.
   */
  _restart(after, clientOpen) {
    this.clientOpen = clientOpen;
    this._closeClient(() => true);
    this._begin(after);
  }

  /**
   * The prelude's end at seq (the state sent): the conversation, what the
   * stream has open there reopened, the interrupts; then the prelude is
   * done.  What is open is read first (openings.js): a promise, which
   * holds the subscription's next event.
   */
  _prelude(seq) {
    const sub = this.sub;
    return this.ctx.openings.at(this.stream, seq).then((state) => {
      if (this.stopped || this.sub !== sub) return;
      this.open = state;
      this._pushMessages(seq, false, true);
      this._reopen(seq, () => true, 'all');
      this._interrupts(seq);
      this._preludeDone();
    }, (err) => {
      if (this.stopped || this.sub !== sub) return;
      if (err.code === 'HX_STATE_TOO_LARGE') {
        this._tooLarge(seq, this.ctx.config.maxStateBytes);
        return;
      }
      this._unfollow();
      this.on.fail(err);
      this.stop();
    });
  }

  /** Send a snapshot (or the end of an ended stream) and follow from it. */
  _snapshot(event) {
    const m = event.metadata.seq;
    if (isEnd(event)) {
      if (!this._push(event, this._frameOf(event))) return undefined;
      if (!this._setState(m, null)) return undefined;
      this.open = EMPTY;
      this._interrupts(m);
      this._preludeDone();
      this.on.end(event);
      return undefined;
    }
    if (!this._push(event, this._frameOf(event))) return undefined;
    if (!this._setState(m, event.snapshot)) return undefined;
    return this._prelude(m);
  }

  /**
   * The events after n up to m, from the log, held until m: then written,
   * with the conversation at m.  A trimmed log gives a snapshot (written);
   * an hx.stream_end before m drops what was held and gives the snapshot
   * at m instead.
   */
  _catchUp(n, m, stateAtM, endedAtM) {
    const mark = this.conn.mark();
    this.conn.hold();
    this.catching = true;
    let pivoted = false;
    this._follow(n, (event) => {
      if (pivoted) return this._live(event);
      const seq = event.metadata.seq;
      if (event.type === 'STATE_SNAPSHOT' && event.metadata.synthetic) {
        // the log no longer holds n + 1: this fresh snapshot instead
        pivoted = true;
        this.catching = false;
        this.conn.clear(mark);
        this.conn.release();
        return this._snapshot(event);
      }
      if (isEnd(event) && seq < m) {
        // the row ended and its key came back: never the previous row's history
        pivoted = true;
        this.catching = false;
        this.conn.clear(mark);
        this.conn.release();
        this.ctx.counters.add('crossed_ends');
        this._unfollow();
        this._begin(null);
        return undefined;
      }
      // a run's events are not replayed: the conversation at m holds what
      // ended, the prelude at m reopens what is open then
      if (C.isRunEvent(event.type)) {
        this.sent = seq;
      } else if (!this._push(event, this._frameOf(event))) {
        return undefined;
      }
      if (seq >= m) {
        pivoted = true;
        this.catching = false;
        this.conn.release();
        if (!this._setState(seq, endedAtM ? null : stateAtM)) return undefined;
        if (isEnd(event)) {
          this.open = EMPTY;
          this._interrupts(seq);
          this._preludeDone();
          this.on.end(event);
          return undefined;
        }
        return this._prelude(seq);
      }
      return undefined;
    });
  }

  // -- live ------------------------------------------------------------------

  _live(event) {
    const f = this._frameOf(event);
    if (!f.ok) {
      // an event @ag-ui/client would refuse: a fresh snapshot instead
      this.ctx.counters.add('refused_events');
      this.ctx.log('warn', `${this.target.stream}: not sent, a fresh snapshot instead: ${f.reason}`);
      this._unfollow();
      this._restart(null, this.clientOpen);
      return;
    }
    const seq = event.metadata.seq;
    if (opensOrCloses(event)) {
      if (!this._construct(event, seq)) return;
    } else if (this.stream !== null) {
      // what is open is unchanged: a response that joins at seq needs no read of the log
      this.ctx.openings.note(this.stream, seq, this.open);
    }
    if (!this._push(event, f)) return;
    if (event.type === 'STATE_SNAPSHOT') {
      if (!this._setState(seq, event.snapshot)) return;
      this._afterState(seq);
    } else if (event.type === 'STATE_DELTA') {
      this._delta(event, seq);
    } else if (isEnd(event)) {
      if (!this._setState(seq, null)) return;
      this._interrupts(seq);
      if (this.stopped) return;
      this.on.end(event);
      return;
    }
    if (this.on.event && !this.stopped) this.on.event(event);
  }

  /**
   * A live event that opens or closes constructs, against what the stream
   * has open: true to send it (what a run that starts abandoned closed
   * first); false when it is dropped (it opens, continues or closes
   * nothing open: the verifier would refuse it) or the response failed.
   */
  _construct(event, seq) {
    const base = this.open;
    const r = this.ctx.frames.next(event, base, () => C.applyConstruct(base, event, { maxBytes: this.ctx.config.maxStateBytes }));
    if (r.tooLarge) {
      this._tooLarge(seq, this.ctx.config.maxStateBytes);
      return false;
    }
    if (!r.ok) {
      this.ctx.counters.add('dropped_run_events');
      this.sent = seq;
      if (this.on.event && !this.stopped) this.on.event(event);
      return false;
    }
    if (r.abandoned) this._closeClient(() => true); // a run that died left them open
    this.open = r.state;
    this.clientOpen = r.state;
    if (this.stream !== null) this.ctx.openings.note(this.stream, seq, r.state);
    return true;
  }

  /** The events (frames) that close what the client has open and which(c) picks; it then has them closed. */
  _closeClient(which) {
    const events = C.closers(this.clientOpen, { which, extra: { timestamp: Date.now() } });
    if (events.length === 0) return;
    this.clientOpen = C.without(this.clientOpen, which);
    for (const e of events) {
      const entry = frameFor(e);
      if (entry.ok) this._emit(entry, true);
    }
  }

  /**
   * Reopen for the client what the stream has open (this.open) and which(c)
   * picks, as of seq: each opener, then what it holds so far (but for what
   * the conversation just sent holds already).
   */
  _reopen(seq, which, kind) {
    const state = C.without(this.open, (c) => !which(c));
    if (state.open.length === 0) return;
    // the frames are shared by the stream's responses that reopen the same
    // constructs at seq with the same conversation (what is open at a seq is
    // one state; the conversation, the table's projection at seq): thirty
    // responses that join a 12 MB tool call hold one 12 MB frame, not thirty
    const held = this._held();
    const present = (c) => held.has(`${c.kind}\u0000${c.id}`);
    const what = crypto.createHash('sha1')
      .update(state.open.map((c) => `${c.key}\u0001${c.text.length}\u0001${present(c) ? 1 : 0}`).join('\u0002')).digest('base64');
    const shared = this.ctx.frames.shared(this.stream, seq, `reopen\u0000${this.table.name}\u0000${kind}\u0000${what}`, () => {
      const extra = { timestamp: Date.now(), metadata: { stream: this.stream, seq, synthetic: true } };
      return { state, entries: C.reopen(state, { present, extra }).map((e) => frameFor(e, seq)) };
    });
    this.reopenShared = shared; // held while the response holds its frames
    const had = this.clientOpen;
    // the client has them open once the first of these frames is written: it
    // is all or nothing for a verifier that checks the run as a whole, and
    // what a client holds is bounded by the frames' bytes anyway
    this.clientOpen = Object.freeze({ open: Object.freeze([...had.open, ...shared.state.open]), bytes: had.bytes + shared.state.bytes, run: shared.state.run });
    for (const entry of shared.entries) {
      if (entry.ok) this._emit(entry, true);
    }
  }

  /** What the conversation last queued holds: its messages' ids, and their tool calls' ids ("<kind>\0<id>"). */
  _held() {
    const out = new Set();
    if (this.table.messages === null) return out;
    const value = getPointer(this.proj || {}, this.table.messages);
    if (!Array.isArray(value)) return out;
    for (const m of messagesOf(value).messages) {
      out.add(`${m.role === 'reasoning' ? 'thought' : 'text'}\u0000${m.id}`);
      for (const c of m.toolCalls || []) out.add(`tool\u0000${c.id}`);
    }
    return out;
  }

  /** Close what the client has open (before the RUN_FINISHED a verifier checks). */
  closeAll() {
    this._closeClient(() => true);
  }

  _preludeDone() {
    if (this.preluded || this.stopped) return;
    this.preluded = true;
    // a prelude may queue nothing (a reconnect that is up to date, of a
    // state with no conversation): the owner's preface goes out anyway,
    // and with it the response's status
    this.preface();
    if (this.on.prelude) this.on.prelude();
  }

  _delta(event, seq) {
    if (this.paths.length === 0) return;
    const base = this.proj || {};
    const max = this.ctx.config.maxStateBytes;
    const r = this.ctx.frames.next(event, base, () => applyDelta(base, event.delta, this.paths, { max }));
    if (r.tooLarge) {
      this._tooLarge(seq, r.bytes);
      return;
    }
    if (r.unknown) {
      // a value moved into the conversation from elsewhere: read it afresh
      this._unfollow();
      this._restart(null, this.clientOpen);
      return;
    }
    this.proj = r.projection;
    // the conversation first: AG-UI wants the state and the messages before
    // the RUN_FINISHED that an interrupt may end the run with
    if (r.changed.includes(this.table.messages)) this._pushMessages(seq, true);
    if (r.changed.includes(this.table.interrupt)) this._interrupts(seq);
  }

  // -- what it sends ---------------------------------------------------------

  /** Queue an owner's event (after the preface, if it is the first), with the state event before it. */
  send(entry) {
    if (!this.stopped) this._emit(entry, true);
  }

  /** The checked frame of an event of the followed stream (shared with the stream's other readers). */
  _frameOf(event) {
    return this.ctx.frames.frameOf(event, this.stream);
  }

  /** Queue a stream event's frame; false (and the overflow handled) when the client holds too much. */
  _push(event, f) {
    if (!f.ok) {
      this._live(event); // refused: handled there
      return false;
    }
    if (!this._emit(f)) return false;
    this.sent = event.metadata.seq;
    return true;
  }

  /** The owner's preface (RUN_STARTED), queued unless it went out already. */
  preface() {
    if (this.started) return;
    this.started = true;
    const entry = this.on.preface();
    if (entry) this.conn.push(entry);
  }

  /** Queue a frame entry, after the owner's preface if it is the first; false on overflow (handled). */
  _emit(entry, must = false) {
    this.preface();
    if (this.conn.push(entry, must, this.clientOpen)) return true;
    this._overflow();
    return false;
  }

  /** The projection of the state at seq; false (and the follower failed) when it is larger than maxStateBytes. */
  _setState(seq, state) {
    if (this.paths.length === 0) return true;
    const shared = this.ctx.frames.shared(this.stream, seq, `projection\u0000${this.table.name}`, () => {
      const doc = project(state, this.paths);
      return { doc, bytes: measure(doc) };
    });
    if (shared.bytes > this.ctx.config.maxStateBytes) {
      this._tooLarge(seq, shared.bytes);
      return false;
    }
    this.projShared = shared; // holds it for the stream's other readers at this seq
    this.proj = shared.doc;
    return true;
  }

  /**
   * After a state (a snapshot, a prelude): its conversation if it is not
   * the one the client has, then its interrupts (whose owner may end the
   * run: after the conversation, as AG-UI wants it).
   */
  _afterState(seq) {
    this._pushMessages(seq, false);
    this._interrupts(seq);
  }

  /**
   * What the gateway follows of the stream (its conversation and
   * interrupts) would pass maxStateBytes at seq: the response fails
   * (RUN_ERROR hxstate_state_too_large); nothing else is touched.
   */
  _tooLarge(seq, bytes) {
    const err = new Error(`the conversation and interrupts of ${this.stream} would be ${bytes} bytes or more at seq ${seq}, ` +
      `past the gateway's maxStateBytes (${this.ctx.config.maxStateBytes})`);
    err.agui = 'hxstate_state_too_large';
    this.ctx.log('warn', err.message);
    this._unfollow();
    this.on.fail(err);
    this.stop();
  }

  _interrupts(seq) {
    if (this.table.interrupt === null || this.stopped) return;
    const value = this.proj ? getPointer(this.proj, this.table.interrupt) : undefined;
    this.interrupts = interruptsOf(value);
    if (this.on.interrupts) this.on.interrupts(this.interrupts, seq);
  }

  /**
   * Queue the conversation at seq, when it is one the client has not got:
   * changed says the event before it changed it (a delta through the
   * messages path); else (a snapshot) it is compared with the one last
   * queued.  A state with no conversation (nothing, or not an array, at
   * the path) gets none: a client may keep its conversation elsewhere,
   * and an empty MESSAGES_SNAPSHOT would wipe it; but a conversation this
   * response sent that is gone gets one empty MESSAGES_SNAPSHOT.
   */
  _pushMessages(seq, changed, prelude = false) {
    if (this.table.messages === null || this.stopped) return;
    const { stream } = this;
    const value = getPointer(this.proj || {}, this.table.messages);
    // a prelude that reopens messages sends the conversation whatever it is:
    // it drops the partial copies the client may hold from before
    const reopens = prelude && this.open.open.some(C.isMessageLike);
    if (!Array.isArray(value)) {
      if (!reopens && (!this.hadConversation || this.sentMessages === NONE)) return;
      this._aroundMessages(() => {
        this.sentMessages = NONE;
        const empty = frameFor({ type: 'MESSAGES_SNAPSHOT', messages: this._placeholders([]), timestamp: Date.now(), metadata: { stream, seq } });
        if (empty.ok) this._emit(empty, true);
      }, seq);
      return;
    }
    if (!changed && !reopens && this.sentMessages !== UNKNOWN && this.sentMessages !== NONE
      && (this.sentMessages === value || isDeepStrictEqual(this.sentMessages, value))) return;
    const thoughts = this.open.open.some((c) => c.kind === 'thought');
    const entry = thoughts ? frameFor({ type: 'MESSAGES_SNAPSHOT', messages: this._placeholders(this._messagesOf(value, seq)),
      timestamp: Date.now(), metadata: { stream, seq } }) : this.ctx.frames.shared(stream, seq, `messages\u0000${this.table.name}`, () => {
      const { messages, dropped } = messagesOf(value);
      if (dropped > 0) {
        this.ctx.counters.add('dropped_messages', dropped);
        this.ctx.log('warn', `${stream}: ${dropped} message(s) at seq ${seq} are not AG-UI messages, left out of MESSAGES_SNAPSHOT`);
      }
      return frameFor({ type: 'MESSAGES_SNAPSHOT', messages, timestamp: Date.now(), metadata: { stream, seq } });
    });
    if (!entry.ok) return;
    this._aroundMessages(() => {
      this.sentMessages = value;
      this.hadConversation = true;
      // it goes with the state event before it, whatever the client holds
      this._emit(entry, true);
    }, seq);
  }

  /**
   * send() a MESSAGES_SNAPSHOT between the closing and the reopening of
   * the messages the client has open (a snapshot replaces the client's
   * messages: one open would lose what it holds).
   */
  _aroundMessages(send, seq) {
    const reopen = this.clientOpen.open.some(C.isMessageLike);
    if (reopen) this._closeClient(C.isMessageLike);
    send();
    if (reopen) this._reopen(seq, C.isMessageLike, 'messages');
  }

  _messagesOf(value, seq) {
    const { messages, dropped } = messagesOf(value);
    if (dropped > 0) this.ctx.counters.add('dropped_messages', dropped);
    void seq;
    return messages;
  }

  /**
   * A conversation with the reasoning messages that are open and not in it
   * as empty ones: a snapshot that holds reasoning replaces the client's
   * reasoning messages (one without any keeps them, partial copies too),
   * and the reopening fills them.
   */
  _placeholders(messages) {
    const ids = new Set(messages.map((m) => m.id));
    const extra = this.open.open.filter((c) => c.kind === 'thought' && !ids.has(c.id))
      .map((c) => ({ id: c.id, role: 'reasoning', content: '' }));
    return extra.length === 0 ? messages : [...messages, ...extra];
  }

  /** The client holds too much: drop its queue, and start again once it has taken what was being written. */
  _overflow() {
    this.ctx.counters.add('overflows');
    this._unfollow();
    this.conn.clear(0);
    this.conn.release();
    this.sentMessages = UNKNOWN; // the conversation queued last may have been dropped
    // a catch-up that does not fit gets a snapshot (the log would not fit either)
    const log = this.ctx.config.overflow === 'log' && !this.catching && this.conn.seq !== null;
    this.catching = false;
    this.conn.whenIdle(() => {
      if (this.stopped) return;
      this.proj = null;
      // what the client has open is what the last frame it got left open
      this._restart(log ? this.conn.seq : null, this.conn.constructs || EMPTY);
    });
  }
}

module.exports = { Follower, isEnd };
