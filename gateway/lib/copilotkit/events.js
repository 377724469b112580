'use strict';
// An agent's AG-UI events as a thread's log keeps them, and back.  Pure.
//
// The log (hx_stream_send) takes a run's construct events (TEXT_MESSAGE_*,
// TOOL_CALL_*, REASONING_*, STEP_*), CUSTOM and the state's events
// (STATE_SNAPSHOT, STATE_DELTA, MESSAGES_SNAPSHOT) as they are: a follower
// of the stream (RunFollower, the gateway's browsers) reads them as any
// run's.  It stamps each with metadata {stream, seq} and its own
// timestamp.  Every other event (RUN_STARTED, RUN_FINISHED, RUN_ERROR,
// ACTIVITY_*, RAW, ...) is kept whole inside a CUSTOM event named
// WRAPPED, whose value is the event.  An agent's own timestamp and
// metadata are kept in the members AGENT_TS and AGENT_META (the log's
// would replace them); an event that has those members is refused.
//
// decode() gives back the event as the agent emitted it: the log's
// metadata and timestamp removed, a wrapped event unwrapped.  The run
// markers (CUSTOM hxstate.run) and stream ends are hxstate's, not the
// agent's: decode() gives null for them.
const { isDeepStrictEqual } = require('node:util');
const { RUN_MARKER } = require('hxstate-client').constructs;

const WRAPPED = 'hxstate.copilotkit';
const AGENT_TS = 'hxAgentTimestamp';
const AGENT_META = 'hxAgentMetadata';
const STREAM_END = 'hx.stream_end';

// the types the log takes as they are (src/send.c's rules)
const NATIVE = new Set([
  'STATE_SNAPSHOT', 'STATE_DELTA', 'MESSAGES_SNAPSHOT',
  'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END',
  'TOOL_CALL_START', 'TOOL_CALL_ARGS', 'TOOL_CALL_END', 'TOOL_CALL_RESULT',
  'REASONING_START', 'REASONING_MESSAGE_START', 'REASONING_MESSAGE_CONTENT', 'REASONING_MESSAGE_END', 'REASONING_END',
  'STEP_STARTED', 'STEP_FINISHED',
]);

class CopilotKitInputError extends TypeError {
  constructor(message, code = 'HX_COPILOTKIT_INPUT') {
    super(`HxAgentRunner: ${message}`);
    this.code = code;
  }
}

const LONE_SURROGATE = /\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f][0-9a-f]{2}/i;

/**
 * The JSON text of value, checked for what jsonb cannot store (a NUL, a
 * lone surrogate) and bounded by maxBytes; a CopilotKitInputError otherwise.
 */
function jsonText(value, what, maxBytes) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new CopilotKitInputError(`${what} is not JSON: ${err.message}`);
  }
  if (text === undefined) throw new CopilotKitInputError(`${what} is not JSON`);
  if (Buffer.byteLength(text) > maxBytes) throw new CopilotKitInputError(`${what} is larger than ${maxBytes} bytes`, 'HX_COPILOTKIT_TOO_LARGE');
  if (text.includes('\\u0000')) throw new CopilotKitInputError(`${what} holds a NUL character, which jsonb cannot store`);
  if (LONE_SURROGATE.test(text)) throw new CopilotKitInputError(`${what} holds a lone surrogate, which jsonb cannot store`);
  return text;
}

/** The event as the log keeps it (a plain JSON copy; the agent's object is not changed). */
function encode(event, maxBytes) {
  if (!event || typeof event !== 'object' || Array.isArray(event) || typeof event.type !== 'string') {
    throw new CopilotKitInputError('an event is an object with a string type');
  }
  const copy = JSON.parse(jsonText(event, `event ${String(event.type).slice(0, 64)}`, maxBytes));
  if (AGENT_TS in copy || AGENT_META in copy) throw new CopilotKitInputError(`the members ${AGENT_TS} and ${AGENT_META} of an event are the runner's`);
  if (!NATIVE.has(copy.type)) return { type: 'CUSTOM', name: WRAPPED, value: copy };
  if ('timestamp' in copy) {
    copy[AGENT_TS] = copy.timestamp;
    delete copy.timestamp;
  }
  if ('metadata' in copy) {
    copy[AGENT_META] = copy.metadata;
    delete copy.metadata;
  }
  return copy;
}

/**
 * value with its objects' keys in jsonb's order (shorter keys first, then
 * by their bytes), as the log gives them back: so that a run's events and
 * their replay are the same JSON text.
 */
function jsonbOrder(value) {
  if (Array.isArray(value)) return value.map(jsonbOrder);
  if (value === null || typeof value !== 'object') return value;
  const keys = Object.keys(value).map((k) => [k, Buffer.from(k)]);
  keys.sort((a, b) => (a[1].length - b[1].length) || Buffer.compare(a[1], b[1]));
  const out = {};
  for (const [k] of keys) out[k] = jsonbOrder(value[k]);
  return out;
}

function isEvent(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && typeof value.type === 'string';
}

/** The agent's event of a logged one; null for hxstate's own (run markers, stream ends) and for a wrapped value that is no event. */
function decode(logged) {
  if (logged.type === 'CUSTOM') {
    // what another role wrote as a wrapped event may be anything: only an event goes out
    if (logged.name === WRAPPED) return isEvent(logged.value) ? logged.value : null;
    if (logged.name === RUN_MARKER || logged.name === STREAM_END) return null;
  }
  const e = { ...logged };
  delete e.metadata;
  delete e.timestamp;
  if (AGENT_TS in e) {
    e.timestamp = e[AGENT_TS];
    delete e[AGENT_TS];
  }
  if (AGENT_META in e) {
    e.metadata = e[AGENT_META];
    delete e[AGENT_META];
  }
  return e;
}

// Fragments: a run's text comes in fragments, and the log joins the
// consecutive fragments of one construct that one batch holds (the
// RunWriter's rule), so how a run's text is cut depends on when its
// batches committed.  A thread's transcript is therefore compacted: each
// run of consecutive fragments of one construct is one event (with the
// members of its first).  That is what connect() replays of the history,
// whatever the batches were.
const FRAGMENTS = { TEXT_MESSAGE_CONTENT: 'messageId', TOOL_CALL_ARGS: 'toolCallId', REASONING_MESSAGE_CONTENT: 'messageId' };

function joins(last, e) {
  const id = FRAGMENTS[e.type];
  return id !== undefined && last !== undefined && last.type === e.type && last[id] === e[id]
    && typeof last.delta === 'string' && typeof e.delta === 'string';
}

/** events with each run of consecutive fragments of one construct joined (a new array; the events are not changed). */
function compact(events) {
  const out = [];
  for (const e of events) {
    const last = out[out.length - 1];
    if (joins(last, e)) out[out.length - 1] = { ...last, delta: last.delta + e.delta };
    else out.push(e);
  }
  return out;
}

/**
 * A resumed run's events against those its log holds (prefix, compacted):
 * take(event) says what of event is new (null: the log holds it already;
 * the event, or for a fragment that goes past the log's end the rest of
 * it), or throws HX_COPILOTKIT_DIVERGED when event is not what the log
 * holds there.  done() throws when the log holds more than was taken.
 */
class PrefixMatch {
  constructor(prefix) {
    this._p = compact(prefix);
    this._k = 0;      // the log's event to match next
    this._off = 0;    // how much of its delta is matched (a fragment)
  }

  _diverged(e, why) {
    const err = new Error(`HxAgentRunner: the resumed run emitted ${e.type} where its log holds ${why}`);
    err.code = 'HX_COPILOTKIT_DIVERGED';
    return err;
  }

  take(e) {
    const p = this._p;
    if (this._k >= p.length) return e;
    const want = p[this._k];
    if (FRAGMENTS[e.type] !== undefined && typeof e.delta === 'string') {
      const id = FRAGMENTS[e.type];
      const same = want.type === e.type && want[id] === e[id]; // (a joined fragment keeps its first's other members)
      if (!same) throw this._diverged(e, want.type);
      const rest = want.delta.slice(this._off);
      if (rest.startsWith(e.delta)) {
        this._off += e.delta.length;
        if (this._off === want.delta.length) { this._k++; this._off = 0; }
        return null;
      }
      if (e.delta.startsWith(rest) && this._k === p.length - 1) {
        this._k++;
        this._off = 0;
        return { ...e, delta: e.delta.slice(rest.length) };
      }
      throw this._diverged(e, `other text of ${want.type}`);
    }
    if (this._off !== 0 || !isDeepStrictEqual(want, e)) throw this._diverged(e, want.type);
    this._k++;
    return null;
  }

  /** Throws when the log holds events the run did not emit again. */
  done() {
    if (this._k < this._p.length) {
      const err = new Error(`HxAgentRunner: the resumed run ended where its log holds more (${this._p[this._k].type})`);
      err.code = 'HX_COPILOTKIT_DIVERGED';
      throw err;
    }
  }

  get pending() { return this._k < this._p.length; }
}

module.exports = { encode, decode, jsonbOrder, joins, compact, PrefixMatch, jsonText, CopilotKitInputError, WRAPPED, NATIVE, FRAGMENTS };
