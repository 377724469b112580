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

module.exports = { applyEvent, isStreamEnd, STREAM_END };
