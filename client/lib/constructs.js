'use strict';
// A run's open constructs: what a stream's run events have opened and not
// yet closed, at a seq, and what a client that joins there needs to go on.
// Pure: no I/O, no timers; tested without a server (test/constructs.test.js).
//
// A run writes its events to a stream as it makes them (hx_stream_emit for
// a row, hx_stream_send for a log stream; writer.js batches them):
//
//   TEXT_MESSAGE_START .. CONTENT* .. END          a text message
//   TOOL_CALL_START .. ARGS* .. END                a tool call
//   REASONING_START .. END                         a reasoning span
//   REASONING_MESSAGE_START .. CONTENT* .. END     a reasoning message
//   STEP_STARTED .. STEP_FINISHED                  a step
//
// and standalone events (TOOL_CALL_RESULT, REASONING_ENCRYPTED_VALUE,
// CUSTOM, the state's).  AG-UI's verifier (@ag-ui/client's verifyEvents)
// refuses a continuation (CONTENT, ARGS, END) of a construct its run did
// not open, an opener of one already open, and a RUN_FINISHED while any is
// open.  A client that joins a stream in the middle of a message (a page
// reload, a reconnect: a new AG-UI run) therefore needs a prelude that
// reopens what is open at its seq, with what it has so far:
//
//   STEP_STARTED                                 for each open step
//   TEXT_MESSAGE_START, TEXT_MESSAGE_CONTENT     the text so far, as one CONTENT
//   TOOL_CALL_START, TOOL_CALL_ARGS              the arguments so far
//   REASONING_START, REASONING_MESSAGE_START, REASONING_MESSAGE_CONTENT
//
// (in the order they were opened), after which the next chunk continues
// them; and a response that ends while some are open closes them first
// (closers(): the END events, newest first), so that its RUN_FINISHED is
// one the verifier takes.
//
// What a state holds is bounded in bytes (maxBytes): its openers' JSON text
// and the text so far, what a prelude resends; and in constructs, at most
// MAX_OPEN open at once.
//
// A state is immutable: apply() returns a new one (or the same, for an
// event that changes nothing), so a state can be shared by every reader of
// a stream at one seq.  An event the state does not take (a CONTENT of a
// message that is not open, a second START of an open one) is refused with
// its reason, and the state stays as it was: a reader drops it rather than
// send its client what the verifier would refuse.
//
// Run markers: a writer marks where a run starts and ends with CUSTOM
// events named RUN_MARKER ({runId, status: 'started' | 'finished' |
// 'failed'}).  Whatever is still open when a run starts belongs to a run
// that died (its process was killed): it is abandoned, and apply() says
// so (abandoned: the constructs' closers, to send before the marker).  A
// reader of the log that looks for what is open at a seq reads back only
// to the last marker (runlog.js).

const RUN_MARKER = 'hxstate.run';
// At most this many constructs open at once: each event is checked against
// what is open (a scan) and an opener copies the list, so a writer that
// opened thousands would make every event cost thousands; a run has a few.
const MAX_OPEN = 4096;
const STREAM_END = 'hx.stream_end';

// construct kinds: the event that opens one, its continuation, its end, the
// member that names it
const KINDS = {
  text: { start: 'TEXT_MESSAGE_START', more: 'TEXT_MESSAGE_CONTENT', end: 'TEXT_MESSAGE_END', id: 'messageId' },
  tool: { start: 'TOOL_CALL_START', more: 'TOOL_CALL_ARGS', end: 'TOOL_CALL_END', id: 'toolCallId' },
  reasoning: { start: 'REASONING_START', more: null, end: 'REASONING_END', id: 'messageId' },
  thought: { start: 'REASONING_MESSAGE_START', more: 'REASONING_MESSAGE_CONTENT', end: 'REASONING_MESSAGE_END', id: 'messageId' },
  step: { start: 'STEP_STARTED', more: null, end: 'STEP_FINISHED', id: 'stepName' },
};
const BY_TYPE = new Map();
for (const [kind, k] of Object.entries(KINDS)) {
  BY_TYPE.set(k.start, { kind, role: 'start' });
  if (k.more) BY_TYPE.set(k.more, { kind, role: 'more' });
  BY_TYPE.set(k.end, { kind, role: 'end' });
}
// the events of a run that are not constructs: they open and close nothing
const STANDALONE = new Set(['TOOL_CALL_RESULT', 'REASONING_ENCRYPTED_VALUE']);
// what a construct's prelude and closers may carry over from its opener
const KEPT = ['role', 'name', 'toolCallName', 'parentMessageId', 'subagentRunId'];

/** Is type one of a run's construct events (an opener, a continuation or an end)? */
function isConstructEvent(type) {
  return BY_TYPE.has(type);
}

/** Is type one of a run's events (a construct's, or a standalone one)? */
function isRunEvent(type) {
  return BY_TYPE.has(type) || STANDALONE.has(type);
}

/** Is event a run marker (CUSTOM hxstate.run)? */
function isRunMarker(event) {
  return event.type === 'CUSTOM' && event.name === RUN_MARKER;
}

const EMPTY = Object.freeze({ open: Object.freeze([]), bytes: 0, run: null });

/** The state with nothing open. */
function emptyConstructs() {
  return EMPTY;
}

/** The key of a construct: its kind and id, and for a step its owner (AG-UI keys steps by owner and name). */
function keyOf(kind, event) {
  const id = event[KINDS[kind].id];
  return kind === 'step' && typeof event.subagentRunId === 'string' ? `${kind}\u0000${event.subagentRunId}\u0000${id}` : `${kind}\u0000${id}`;
}

function openerOf(event) {
  const o = { type: event.type };
  for (const k of Object.keys(event)) {
    if (k === 'type' || k === 'metadata' || k === 'timestamp' || k === 'rawEvent') continue;
    o[k] = event[k];
  }
  return Object.freeze(o);
}

/** What a construct holds: its opener's JSON text and its text so far, bytes (what a prelude resends of it). */
function constructBytes(c) {
  return (c.size || 0) + Buffer.byteLength(c.text);
}

function refuse(state, reason) {
  return { state, ok: false, reason, abandoned: null };
}

/**
 * The state after event: {state, ok, reason, abandoned}.  ok false (and the
 * state as it was) for an event the state does not take; abandoned, for a
 * run marker that starts a run while some constructs are open, the closers
 * of those (they belong to a run that died), null otherwise.  maxBytes
 * bounds what is held, the openers' JSON text and the text so far (what
 * the prelude would resend): past it, ok is false and tooLarge true; and
 * so past maxOpen (MAX_OPEN, 4096) constructs open at once.
 */
function applyConstruct(state, event, { maxBytes = Infinity, maxOpen = MAX_OPEN } = {}) {
  const type = event && event.type;
  const what = BY_TYPE.get(type);
  if (!what) {
    if (type === 'CUSTOM' && (event.name === RUN_MARKER || event.name === STREAM_END)) {
      const value = event.value && typeof event.value === 'object' ? event.value : {};
      const run = event.name === RUN_MARKER && typeof value.runId === 'string'
        ? Object.freeze({ runId: value.runId, status: String(value.status) }) : null;
      // a run that starts (or a stream that ends) leaves nothing of an earlier run open
      const abandoned = state.open.length > 0 && (event.name === STREAM_END || value.status === 'started') ? closers(state) : null;
      const open = abandoned ? EMPTY.open : state.open;
      return { state: Object.freeze({ open, bytes: abandoned ? 0 : state.bytes, run }), ok: true, reason: null, abandoned };
    }
    return { state, ok: true, reason: null, abandoned: null };
  }
  const { kind, role } = what;
  const idMember = KINDS[kind].id;
  if (typeof event[idMember] !== 'string') return refuse(state, `${type} has no ${idMember}`);
  const key = keyOf(kind, event);
  const at = state.open.findIndex((c) => c.key === key);
  if (role === 'start') {
    if (at >= 0) return refuse(state, `${type}: ${event[idMember]} is already open`);
    if (state.open.length >= maxOpen) return { state, ok: false, reason: `more than ${maxOpen} constructs would be open`, abandoned: null, tooLarge: true };
    const opener = openerOf(event);
    // the opener is resent by every prelude that reopens it: it counts as its text does
    const size = Buffer.byteLength(JSON.stringify(opener));
    if (state.bytes + size > maxBytes) return { state, ok: false, reason: `the open constructs would hold more than ${maxBytes} bytes`, abandoned: null, tooLarge: true };
    const c = Object.freeze({ key, kind, id: event[idMember], opener, text: '', size });
    return { state: Object.freeze({ open: Object.freeze([...state.open, c]), bytes: state.bytes + size, run: state.run }), ok: true, reason: null, abandoned: null };
  }
  if (at < 0) return refuse(state, `${type}: ${event[idMember]} is not open`);
  if (role === 'more') {
    const delta = event.delta;
    if (typeof delta !== 'string') return refuse(state, `${type} has no delta`);
    if (delta === '') return { state, ok: true, reason: null, abandoned: null };
    const grow = Buffer.byteLength(delta);
    if (state.bytes + grow > maxBytes) return { state, ok: false, reason: `the open constructs would hold more than ${maxBytes} bytes`, abandoned: null, tooLarge: true };
    const c = state.open[at];
    const open = state.open.slice();
    open[at] = Object.freeze({ ...c, text: c.text + delta });
    return { state: Object.freeze({ open: Object.freeze(open), bytes: state.bytes + grow, run: state.run }), ok: true, reason: null, abandoned: null };
  }
  // an end
  const c = state.open[at];
  const open = state.open.slice();
  open.splice(at, 1);
  return {
    state: Object.freeze({ open: Object.freeze(open), bytes: state.bytes - constructBytes(c), run: state.run }),
    ok: true, reason: null, abandoned: null,
  };
}

function kept(c) {
  const o = {};
  for (const k of KEPT) if (c.opener[k] !== undefined) o[k] = c.opener[k];
  return o;
}

/**
 * The prelude that reopens what is open, in the order it was opened: each
 * construct's opener as it was logged (without its metadata and timestamp),
 * then, for a message, a tool call or a reasoning message with something so
 * far, one continuation that carries all of it.  present(construct) true
 * (a message the conversation a client was just sent holds already) gives
 * the opener alone: its text is there.  extra is merged into each event
 * (metadata, timestamp).
 */
function reopen(state, { present = () => false, extra = {} } = {}) {
  const out = [];
  for (const c of state.open) {
    out.push({ ...c.opener, ...extra });
    const more = KINDS[c.kind].more;
    if (more && c.text !== '' && !present(c)) {
      out.push({ type: more, [KINDS[c.kind].id]: c.id, delta: c.text, ...(c.opener.subagentRunId !== undefined ? { subagentRunId: c.opener.subagentRunId } : {}), ...extra });
    }
  }
  return out;
}

/**
 * The events that close what is open, newest first (a tool call before the
 * message it belongs to, a reasoning message before its span, steps last
 * as they were opened first).  which(construct) false leaves one open.
 */
function closers(state, { which = () => true, extra = {} } = {}) {
  const out = [];
  for (let i = state.open.length - 1; i >= 0; i--) {
    const c = state.open[i];
    if (!which(c)) continue;
    const k = KINDS[c.kind];
    const e = { type: k.end, [k.id]: c.id };
    if (c.opener.subagentRunId !== undefined) e.subagentRunId = c.opener.subagentRunId;
    out.push({ ...e, ...extra });
  }
  return out;
}

/** The state without the constructs which(c) is true of (closed by the caller). */
function without(state, which) {
  const open = state.open.filter((c) => !which(c));
  if (open.length === state.open.length) return state;
  const bytes = open.reduce((n, c) => n + constructBytes(c), 0);
  return Object.freeze({ open: Object.freeze(open), bytes, run: state.run });
}

/** Constructs that a conversation shows: messages, tool calls and reasoning messages (not steps, not spans). */
function isMessageLike(c) {
  return c.kind === 'text' || c.kind === 'tool' || c.kind === 'thought';
}

/** Keep only what is needed, for the kept part of a construct (its opener's kept members). */
function describe(c) {
  return { kind: c.kind, id: c.id, text: c.text, ...kept(c) };
}

module.exports = {
  RUN_MARKER, MAX_OPEN, KINDS, isConstructEvent, isRunEvent, isRunMarker, emptyConstructs, applyConstruct, reopen, closers, without,
  isMessageLike, describe,
};
