'use strict';
// Applying one AG-UI state event to a state, without touching the input.
//
// This is the only place the client changes state, and it is pure: it
// returns the next state and never mutates the one it was given, so a state
// the application holds on to (from an earlier 'event') stays as it was.
const { applyPatch } = require('fast-json-patch');

const STREAM_END = 'hx.stream_end';

/** Is event the CUSTOM hx.stream_end event that closes a stream? */
function isStreamEnd(event) {
  return !!event && event.type === 'CUSTOM' && event.name === STREAM_END;
}

/**
 * The state after event, given the state before it.
 *
 * STATE_SNAPSHOT replaces the state; STATE_DELTA applies its RFC 6902 ops
 * with fast-json-patch, validating every op, on a deep copy (so a delta
 * that does not apply throws a JsonPatchError and leaves state untouched);
 * hx.stream_end leaves no state (null: the row is gone, as
 * hx_stream_snapshot() reports it); any other event changes nothing.
 */
function applyEvent(state, event) {
  switch (event.type) {
    case 'STATE_SNAPSHOT':
      return event.snapshot === undefined ? null : event.snapshot;
    case 'STATE_DELTA':
      // validate = true, mutateDocument = false (applyPatch deep-copies)
      return applyPatch(state, event.delta, true, false).newDocument;
    default:
      return isStreamEnd(event) ? null : state;
  }
}

/**
 * applyEvent, and the size of the state after it, for the bounds in bytes
 * of a subscription's queue: stateBytes is the size of state (the length
 * of its JSON text in UTF-8, as known), eventBytes the event's.  A delta is
 * applied to a copy made through JSON text (as fast-json-patch copies), so
 * the size of the state before it is measured exactly on the way; the
 * state after it counts as that plus the delta's size (deltas rarely
 * shrink a state by much, and the next delta measures again).
 * @returns {{state: any, bytes: number}}
 */
function applySized(state, stateBytes, event, eventBytes) {
  switch (event.type) {
    case 'STATE_SNAPSHOT':
      return { state: event.snapshot === undefined ? null : event.snapshot, bytes: eventBytes };
    case 'STATE_DELTA': {
      const text = JSON.stringify(state === undefined ? null : state);
      // validate = true, mutateDocument = true: on the copy
      const next = applyPatch(JSON.parse(text), event.delta, true, true).newDocument;
      return { state: next, bytes: Buffer.byteLength(text) + eventBytes };
    }
    default:
      return isStreamEnd(event) ? { state: null, bytes: 0 } : { state, bytes: stateBytes };
  }
}

module.exports = { applyEvent, applySized, isStreamEnd, STREAM_END };
