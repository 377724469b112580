'use strict';
// One agent run of a RunWriter (writer.js): what the run makes (text
// messages, tool calls, tool results, reasoning, steps, CUSTOM events), as
// AG-UI events checked against what it has open (constructs.js), kept in a
// batch (batch.js) until the writer commits it.  The run changes only its
// own fields; it tells the writer through the host callbacks it was given
// (changed: it has something new, ended, failed).
//
// What a run writes into its row's state (option messages, '/messages' by
// default, for a row's stream): each message as AG-UI's shape, upserted by
// id in the transaction of the event that finishes it:
//
//   TEXT_MESSAGE_END        {id, role, content: <its text>, name?, toolCalls?}
//   TOOL_CALL_END           the assistant message it belongs to, with
//                           toolCalls [{id, type: 'function', function: {name, arguments}}]
//                           (its parent, once that has ended; or {id: toolCallId,
//                           role: 'assistant', toolCalls} for one without a parent)
//   TOOL_CALL_RESULT        {id: messageId, role: 'tool', toolCallId, content}
//   REASONING_MESSAGE_END   {id, role: 'reasoning', content}
//
// so that at each END the finished message is what the next
// MESSAGES_SNAPSHOT shows (the state's messages are the source of truth),
// and a reader that joins after it finds it there.
const { EventEmitter } = require('node:events');
const crypto = require('node:crypto');
const { Batch, eventBytes } = require('./batch');
const { applyConstruct, closers, emptyConstructs, RUN_MARKER, KINDS } = require('./constructs');
const { emitError } = require('./emit');

const MAX_ID_BYTES = 1024;
const TEXT_ROLES = new Set(['assistant', 'developer', 'system', 'user']);

function typeError(message) {
  return new TypeError(`RunWriter: ${message}`);
}

/** A string a jsonb can hold: no NUL, no lone surrogate. */
function checkText(s, what) {
  if (typeof s !== 'string') throw typeError(`${what} is a string`);
  if (s.includes('\u0000')) throw typeError(`${what} holds a NUL character, which jsonb cannot store`);
  if (/(?:[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff])/.test(s)) {
    throw typeError(`${what} holds a lone surrogate, which jsonb cannot store`);
  }
  return s;
}

function checkId(s, what) {
  checkText(s, what);
  if (s === '' || Buffer.byteLength(s) > MAX_ID_BYTES) throw typeError(`${what} is a non-empty string of at most ${MAX_ID_BYTES} bytes`);
  return s;
}

/** A JSON value's text, or a TypeError (a cycle, a BigInt, a NUL or lone surrogate in a string). */
function jsonOf(value, what) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw typeError(`${what} is not JSON: ${err.message}`);
  }
  if (text === undefined) throw typeError(`${what} is not JSON`);
  if (text.includes('\\u0000')) throw typeError(`${what} holds a NUL character, which jsonb cannot store`);
  if (/\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f][0-9a-f]{2}/i.test(text)) {
    throw typeError(`${what} holds a lone surrogate, which jsonb cannot store`);
  }
  return text;
}

/**
 * A streamed fragment: a string whose last character may be the first
 * half of a surrogate pair, held back (carry) until the next fragment
 * brings the second half (a token boundary can fall between them).
 */
function splitCarry(carry, delta, what) {
  if (typeof delta !== 'string') throw typeError(`${what} is a string`);
  let s = carry + delta;
  let rest = '';
  const last = s.charCodeAt(s.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) {
    rest = s.slice(-1);
    s = s.slice(0, -1);
  }
  checkText(s, what);
  return { text: s, carry: rest };
}

class Handle {
  constructor(run, kind, id) {
    this._run = run;
    this.kind = kind;
    this.id = id;
    this.ended = false;
    this._carry = '';
  }

  _more(type, idMember, delta) {
    if (this.ended) throw typeError(`${this.kind} ${this.id} has ended`);
    const { text, carry } = splitCarry(this._carry, delta, 'a fragment');
    this._carry = carry;
    if (text === '') return this._run.belowHighWater();
    return this._run.push({ type, [idMember]: this.id, delta: text });
  }

  _finish(events) {
    if (this.ended) throw typeError(`${this.kind} ${this.id} has ended`);
    if (this._carry !== '') throw typeError(`${this.kind} ${this.id} ends with half a surrogate pair`);
    this.ended = true;
    for (const e of events) this._run.push(e);
    return this._run.flush();
  }
}

/** A text message: append(text) (false: the run holds much, await run.drain()), end(). */
class TextMessage extends Handle {
  append(delta) { return this._more('TEXT_MESSAGE_CONTENT', 'messageId', delta); }

  end() { return this._finish([{ type: 'TEXT_MESSAGE_END', messageId: this.id }]); }
}

/** A tool call: append(argumentsText), end(). */
class ToolCall extends Handle {
  append(delta) { return this._more('TOOL_CALL_ARGS', 'toolCallId', delta); }

  end() { return this._finish([{ type: 'TOOL_CALL_END', toolCallId: this.id }]); }
}

/** Reasoning: a span with one reasoning message; append(text), end(). */
class Reasoning extends Handle {
  append(delta) { return this._more('REASONING_MESSAGE_CONTENT', 'messageId', delta); }

  end() {
    return this._finish([{ type: 'REASONING_MESSAGE_END', messageId: this.id }, { type: 'REASONING_END', messageId: this.id }]);
  }
}

class Run extends EventEmitter {
  /**
   * target {table, key} or {stream: '@name'}; options {runId, messages,
   * inTransaction, marker, resumeAt: {seq, open}}; limits: the writer's options; host: {changed(),
   * ended(run), failed(run, err)}.
   */
  constructor(target, options, limits, host) {
    super();
    this.target = checkTarget(target);
    this.id = options.runId === undefined ? `run-${crypto.randomUUID()}` : checkId(options.runId, 'options.runId');
    const messages = options.messages === undefined ? (this.target.table !== undefined ? '/messages' : null) : options.messages;
    if (messages !== null && (typeof messages !== 'string' || !/^(\/([^/~]|~[01])*)+$/.test(messages))) {
      throw typeError('options.messages is a JSON pointer ("/messages") or null');
    }
    if (messages !== null && this.target.table === undefined) throw typeError('options.messages is for a row\'s stream: a log stream\'s state is its owner\'s');
    if (options.inTransaction !== undefined && typeof options.inTransaction !== 'function') throw typeError('options.inTransaction is a function (client, info)');
    this.messagesPath = messages;
    this._inTransaction = options.inTransaction || null;
    this._limits = limits;
    this._host = host;
    this._batch = new Batch();
    this._ops = [];                 // state ops of the batch's events
    this._inflight = null;
    this._retryAt = 0;
    this._open = emptyConstructs(); // what this run has open (what it pushed)
    this._messages = new Map();     // id -> the message as written to the state (this run's)
    this._pushed = 0;               // pushes so far (a fragment is one)
    this._committedPushes = 0;
    this._waiters = [];             // {at, resolve, reject}
    this._drains = [];
    this._note = undefined;
    this._stream = null;
    this.lastSeq = null;            // the seq of the run's last committed event
    this.error = null;
    this.closed = false;
    this._ended = false;
    this.lockKey = this.target.table !== undefined ? `r\u0000${this.target.table}\u0000${this.target.key}` : `l\u0000${this.target.stream}`;
    if (options.resumeAt !== undefined) {
      // a run that goes on from what its stream holds (its process died):
      // no start marker (one is in the log), what the log has open is open
      const { seq, open } = options.resumeAt || {};
      if (!Number.isSafeInteger(seq) || seq < 0) throw typeError('options.resumeAt.seq is the seq of the stream\'s last event (an integer >= 0)');
      if (!isConstructsState(open)) throw typeError('options.resumeAt.open is a constructs state (openAt(...).state)');
      if (options.runId === undefined) throw typeError('options.resumeAt goes with the runId of the run it resumes');
      this._open = open;
      this.lastSeq = seq;
    } else if (options.marker !== false) {
      this.push({ type: 'CUSTOM', name: RUN_MARKER, value: { runId: this.id, status: 'started' } });
    }
  }

  // -- what a run makes --------------------------------------------------------

  /** A text message: TEXT_MESSAGE_START now; the handle's append() and end() go on. */
  text({ messageId, role = 'assistant', name } = {}) {
    checkId(messageId, 'messageId');
    if (!TEXT_ROLES.has(role)) throw typeError(`role is one of ${[...TEXT_ROLES].join(', ')}`);
    const e = { type: 'TEXT_MESSAGE_START', messageId, role };
    if (name !== undefined) e.name = checkText(name, 'name');
    this.push(e);
    return new TextMessage(this, 'text message', messageId);
  }

  /** A tool call: TOOL_CALL_START now; append() its arguments' text, end(). */
  toolCall({ toolCallId, toolCallName, parentMessageId } = {}) {
    checkId(toolCallId, 'toolCallId');
    checkId(toolCallName, 'toolCallName');
    const e = { type: 'TOOL_CALL_START', toolCallId, toolCallName };
    if (parentMessageId !== undefined) {
      e.parentMessageId = checkId(parentMessageId, 'parentMessageId');
      if (this.messagesPath !== null && !this._messages.has(parentMessageId) && !this._isOpen('text', parentMessageId)) {
        throw typeError(`parentMessageId ${parentMessageId} is no message of this run (the writer writes the tool call into its parent in the state)`);
      }
    }
    this.push(e);
    return new ToolCall(this, 'tool call', toolCallId);
  }

  /** A tool's result: TOOL_CALL_RESULT (and the tool message in the state); resolves once committed. */
  toolResult({ messageId, toolCallId, content, role = 'tool' } = {}) {
    checkId(messageId, 'messageId');
    checkId(toolCallId, 'toolCallId');
    if (role !== 'tool') throw typeError("role is 'tool'");
    if (typeof content !== 'string' && !Array.isArray(content)) throw typeError('content is a string or an array of content parts');
    jsonOf(content, 'content');
    this.push({ type: 'TOOL_CALL_RESULT', messageId, toolCallId, content, role });
    return this.flush();
  }

  /** Reasoning: REASONING_START and REASONING_MESSAGE_START now; append() its text, end(). */
  reasoning({ messageId } = {}) {
    checkId(messageId, 'messageId');
    this.push({ type: 'REASONING_START', messageId });
    this.push({ type: 'REASONING_MESSAGE_START', messageId, role: 'reasoning' });
    return new Reasoning(this, 'reasoning', messageId);
  }

  /** STEP_STARTED. */
  startStep(stepName) {
    this.push({ type: 'STEP_STARTED', stepName: checkId(stepName, 'stepName') });
  }

  /** STEP_FINISHED; resolves once committed. */
  finishStep(stepName) {
    this.push({ type: 'STEP_FINISHED', stepName: checkId(stepName, 'stepName') });
    return this.flush();
  }

  /** A CUSTOM event (not one of hxstate's: hx.*, hxstate.*); resolves once committed. */
  custom(name, value) {
    checkId(name, 'name');
    if (name.startsWith('hx.') || name.startsWith('hxstate.')) throw typeError(`CUSTOM names beginning with hx. or hxstate. are hxstate's own (${name})`);
    const e = { type: 'CUSTOM', name };
    if (value !== undefined) {
      jsonOf(value, 'value');
      e.value = value;
    }
    this.push(e);
    return this.flush();
  }

  /** An opaque value given to inTransaction (info.note) with the batch that holds what was pushed up to now. */
  note(value) {
    this._note = value;
  }

  /** Resolves once everything pushed so far is committed (rejects if the run fails). */
  flush() {
    if (this.error) return Promise.reject(this.error);
    const at = this._pushed;
    if (this._committedPushes >= at) return Promise.resolve();
    this._batch.hurry();
    const p = new Promise((resolve, reject) => this._waiters.push({ at, resolve, reject }));
    this._host.changed();
    return p;
  }

  /** Resolves once the run holds less than maxBatchBytes waiting. */
  drain() {
    if (this.error) return Promise.reject(this.error);
    if (this.belowHighWater()) return Promise.resolve();
    return new Promise((resolve, reject) => this._drains.push({ resolve, reject }));
  }

  /**
   * The run is over: whatever it left open is closed (their END events),
   * and its end marker written; resolves once committed.  status
   * 'finished', or 'failed' with error (what the marker says).
   */
  close({ status = 'finished', error } = {}) {
    if (this.error) return Promise.reject(this.error);
    if (this.closed) return this.flush();
    if (status !== 'finished' && status !== 'failed' && status !== 'stopped') throw typeError("status is 'finished', 'failed' or 'stopped'");
    for (const e of closers(this._open)) this.push(e);
    const value = { runId: this.id, status };
    if (error !== undefined) value.error = checkText(String(error), 'error');
    this.push({ type: 'CUSTOM', name: RUN_MARKER, value });
    this.closed = true;
    const p = this.flush();
    p.then(() => this._end(), () => {});
    return p;
  }

  /** Bytes waiting for a commit (the batch and the batch in flight). */
  get pendingBytes() {
    return this._batch.bytes + (this._inflight ? this._inflight.bytes : 0);
  }

  belowHighWater() {
    return this.pendingBytes < this._limits.maxBatchBytes;
  }

  /** The run's constructs open now (constructs.js's state). */
  get open() { return this._open; }

  // -- the writer's side ---------------------------------------------------------

  /** Queue an event (checked against what is open); false when the run holds more than maxBatchBytes. */
  push(event) {
    if (this.error) throw this.error;
    if (this.closed) throw typeError(`run ${this.id} is closed`);
    if (!event || typeof event !== 'object' || Array.isArray(event) || typeof event.type !== 'string') {
      throw typeError('an event is an object with a type (an AG-UI event)');
    }
    // the members the writer writes into the state, as text() and the rest check them
    if (event.type === 'TEXT_MESSAGE_START' && event.role !== undefined && !TEXT_ROLES.has(event.role)) {
      throw typeError(`role is one of ${[...TEXT_ROLES].join(', ')}`);
    }
    if (event.type === 'REASONING_MESSAGE_START' && event.role !== 'reasoning') throw typeError("a REASONING_MESSAGE_START's role is 'reasoning'");
    if (event.type === 'TOOL_CALL_START' && event.parentMessageId !== undefined) checkId(event.parentMessageId, 'parentMessageId');
    if (event.type === 'TOOL_CALL_START' && event.parentMessageId !== undefined && this.messagesPath !== null
      && !this._messages.has(event.parentMessageId) && !this._isOpen('text', event.parentMessageId)) {
      // its END writes the tool call into its parent in the state: a parent the run never had cannot take it
      throw typeError(`parentMessageId ${event.parentMessageId} is no message of this run (the writer writes the tool call into its parent in the state)`);
    }
    const r = applyConstruct(this._open, event, { maxBytes: this._limits.maxMessageBytes });
    if (!r.ok) {
      if (r.tooLarge) {
        const bound = /bytes$/.test(r.reason) ? 'maxMessageBytes' : 'constructs.MAX_OPEN';
        throw Object.assign(typeError(`run ${this.id}: ${r.reason} (${bound})`), { code: 'HX_STATE_TOO_LARGE' });
      }
      throw typeError(r.reason);
    }
    const bytes = eventBytes(event);
    if (this.pendingBytes + bytes > this._limits.maxPendingBytes) {
      const err = Object.assign(new Error(`run ${this.id} holds more than ${this._limits.maxPendingBytes} bytes waiting for the database (maxPendingBytes)`),
        { code: 'HX_RUN_BACKLOG' });
      this.fail(err);
      throw err;
    }
    this._record(this._open, event);
    this._open = r.state;
    this._batch.push(event, Date.now());
    this._pushed++;
    this._host.changed();
    return this.belowHighWater();
  }

  /** The messages that event finishes, into the state ops of the batch (with the state before it). */
  _record(before, event) {
    if (this.messagesPath === null) return;
    const find = (kind, id) => before.open.find((c) => c.kind === kind && c.id === id);
    const upsert = (msg) => this._ops.push({ op: 'upsert', path: this.messagesPath, items: [msg] });
    switch (event.type) {
      case 'TEXT_MESSAGE_END': {
        const c = find('text', event.messageId);
        const msg = { id: c.id, role: c.opener.role || 'assistant', content: c.text };
        if (c.opener.name !== undefined) msg.name = c.opener.name;
        const pending = this._messages.get(c.id); // tool calls that ended before it
        if (pending && pending.toolCalls) msg.toolCalls = pending.toolCalls;
        this._messages.set(c.id, msg);
        upsert(msg);
        break;
      }
      case 'TOOL_CALL_END': {
        const c = find('tool', event.toolCallId);
        const call = { id: c.id, type: 'function', function: { name: c.opener.toolCallName, arguments: c.text } };
        const parent = c.opener.parentMessageId;
        if (parent === undefined) {
          const msg = { id: c.id, role: 'assistant', toolCalls: [call] };
          this._messages.set(c.id, msg);
          upsert(msg);
        } else if (this._isOpenIn(before, 'text', parent)) {
          // written with its parent, when that ends
          const pending = this._messages.get(parent) || { toolCalls: [] };
          this._messages.set(parent, { ...pending, toolCalls: [...(pending.toolCalls || []), call] });
        } else {
          const msg = this._messages.get(parent);
          const next = { ...msg, toolCalls: [...(msg.toolCalls || []), call] };
          this._messages.set(parent, next);
          upsert(next);
        }
        break;
      }
      case 'TOOL_CALL_RESULT':
        upsert({ id: event.messageId, role: 'tool', toolCallId: event.toolCallId, content: event.content });
        break;
      case 'REASONING_MESSAGE_END': {
        const c = find('thought', event.messageId);
        upsert({ id: c.id, role: 'reasoning', content: c.text });
        break;
      }
      default:
    }
  }

  _isOpen(kind, id) {
    return this._isOpenIn(this._open, kind, id);
  }

  _isOpenIn(state, kind, id) {
    return state.open.some((c) => c.kind === kind && c.id === id);
  }

  /** When the batch is due (ms), null when nothing is (empty, in flight, failed). */
  dueAt() {
    if (this.error || this._inflight || this._batch.empty) return null;
    const at = this._batch.dueAt(this._limits);
    return Math.max(at, this._retryAt);
  }

  /** The batch, now in flight: {run, target, events, bytes, stateOps, ...}; null when there is none. */
  takeBatch() {
    if (this.error || this._inflight || this._batch.empty) return null;
    const pushes = this._batch.pushes;
    const bytes = this._batch.bytes;
    const item = {
      run: this,
      target: this.target,
      lockKey: this.lockKey,
      events: this._batch.take(),
      bytes,
      pushes,
      stateOps: this._ops,
      inTransaction: this._inTransaction,
      note: this._note,
      upTo: this._pushed,
      table: null,
      seq: null,
    };
    this._ops = [];
    this._inflight = item;
    return item;
  }

  /** A batch that did not commit goes again, before what came since (after delay ms). */
  putBack(item, delay = 0) {
    if (this._inflight !== item) return;
    this._inflight = null;
    const laterPushes = this._batch.pushes;
    const later = this._batch.take();
    const laterOps = this._ops;
    this._ops = [...item.stateOps, ...laterOps];
    const now = Date.now();
    for (const e of [...item.events, ...later]) this._batch.push(e, now);
    this._batch.pushes = item.pushes + laterPushes; // what they were
    this._batch.hurry();
    this._retryAt = now + delay;
    this._host.changed();
  }

  /** The batch in flight committed. */
  committed(item) {
    if (this._inflight !== item) return;
    this._inflight = null;
    this._retryAt = 0;
    if (item.seq !== null) this.lastSeq = item.seq;
    this._committedPushes = item.upTo;
    const done = this._waiters.filter((w) => w.at <= this._committedPushes);
    this._waiters = this._waiters.filter((w) => w.at > this._committedPushes);
    for (const w of done) w.resolve();
    if (this.belowHighWater()) for (const d of this._drains.splice(0)) d.resolve();
    this._host.changed();
  }

  /** The run cannot go on: nothing more of it is written. */
  fail(err) {
    if (this.error) return;
    this.error = err;
    this._inflight = null;
    this._batch.take();
    for (const w of this._waiters.splice(0)) w.reject(err);
    for (const d of this._drains.splice(0)) d.reject(err);
    this._host.failed(this, err);
    emitError(this, err);
    this._end();
  }

  _end() {
    if (this._ended) return;
    this._ended = true;
    this._host.ended(this);
  }

  /** The name of the run's stream (a row's: asked of the database once). */
  async streamName(client, schema) {
    if (this.target.stream !== undefined) return this.target.stream;
    if (this._stream === null) {
      const { rows } = await client.query(require('./writersql').rowStream(schema, this.target.table, this.target.key));
      this._stream = rows.length ? rows[0].stream : null;
    }
    return this._stream;
  }
}

/** Is state what constructs.js makes (openAt(...).state): each open construct of a known kind, with its opener and text? */
function isConstructsState(state) {
  if (!state || typeof state !== 'object' || !Array.isArray(state.open) || !Number.isFinite(state.bytes)) return false;
  return state.open.every((c) => c && typeof c === 'object' && Object.prototype.hasOwnProperty.call(KINDS, c.kind)
    && typeof c.key === 'string' && typeof c.id === 'string' && typeof c.text === 'string'
    && c.opener && typeof c.opener === 'object' && c.opener.type === KINDS[c.kind].start);
}

function checkTarget(target) {
  if (!target || typeof target !== 'object') throw typeError('the target is {table, key} or {stream}');
  if (target.stream !== undefined) {
    checkId(target.stream, 'target.stream');
    if (!target.stream.startsWith('@')) throw typeError("a log stream's name begins with @");
    return Object.freeze({ stream: target.stream });
  }
  checkId(target.table, 'target.table');
  checkId(target.key, 'target.key');
  return Object.freeze({ table: target.table, key: target.key });
}

module.exports = { Run, TextMessage, ToolCall, Reasoning, checkText, checkId, splitCarry };
