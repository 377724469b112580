'use strict';
// Applying one AG-UI state event to a state, without touching the input.
//
// This is the only place the client changes state, and it is pure: it
// returns the next state and never mutates the one it was given, so a state
// the application holds on to (from an earlier 'event') stays as it was.
const { applyPatch, applyOperation, getValueByPointer } = require('fast-json-patch');

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
 * A state would pass its bound in bytes (maxStateBytes): the error that
 * ends the subscription that keeps it (code HX_STATE_TOO_LARGE).
 */
function stateTooLarge(bytes, max) {
  const err = new Error(`the state would be ${bytes} bytes or more, past maxStateBytes (${max})`);
  err.code = 'HX_STATE_TOO_LARGE';
  err.bytes = bytes;
  err.maxStateBytes = max;
  return err;
}

const textBytes = (text) => Buffer.byteLength(text);

/**
 * At most what a value's member name (or element separator) adds to the
 * JSON text beside the value: its last token, escaped (six bytes a byte at
 * most), quoted, a colon and a comma.
 */
function keyBytes(path) {
  return typeof path === 'string' ? 6 * textBytes(path.slice(path.lastIndexOf('/') + 1)) + 4 : 4;
}

/**
 * Apply RFC 6902 ops to doc, a copy of the caller's own (changed in
 * place), without its JSON text ever passing max bytes: size is doc's size
 * (exact, or more).  Each op's growth is known before it is applied: add
 * and replace bring their value, copy a copy of its from (measured in
 * doc), remove, move and test bring nothing; when the bound would pass
 * max, doc is measured exactly, and if it still would, stateTooLarge is
 * thrown (doc half changed: the caller drops it).  The values put into
 * doc are copies, never the event's own (a later op of the delta could
 * change them).  Returns {doc, bytes}, bytes an upper bound of the
 * result's size.  A "copy" that doubles a state twelve times is refused
 * at its bound, not once it has taken the process's memory.
 */
function applyBounded(doc, ops, size, max, validate = true) {
  let bound = size;
  for (let i = 0; i < ops.length; i++) {
    let op = ops[i];
    let text = null;
    if ((op.op === 'add' || op.op === 'replace') && op.value !== undefined) {
      text = JSON.stringify(op.value);
    } else if (op.op === 'copy' && typeof op.from === 'string') {
      let v;
      try {
        v = getValueByPointer(doc, op.from);
      } catch (err) {
        v = undefined; // applyOperation says why
      }
      if (v !== undefined) text = JSON.stringify(v);
    }
    const grow = text === null ? 0 : textBytes(text) + keyBytes(op.path);
    if (bound + grow > max) {
      bound = textBytes(JSON.stringify(doc === undefined ? null : doc));
      if (bound + grow > max) throw stateTooLarge(bound + grow, max);
    }
    if (text !== null) op = op.op === 'copy' ? { op: 'add', path: op.path, value: JSON.parse(text) } : { ...op, value: JSON.parse(text) };
    doc = applyOperation(doc, op, validate, true, true, i).newDocument;
    bound += grow;
  }
  return { doc, bytes: bound };
}

/**
 * applyEvent, and the size of the state after it, for the bounds in bytes
 * of a subscription's queue and of its state: stateBytes is the size of
 * state (the length of its JSON text in UTF-8, as known), eventBytes the
 * event's.  A delta is applied to a copy made through JSON text (as
 * fast-json-patch copies), so the size of the state before it is measured
 * exactly on the way; the state after it counts as that plus the delta's
 * size (deltas rarely shrink a state by much, and the next delta measures
 * again).  A state larger than maxBytes (a snapshot, or what a delta's
 * operations would make: applyBounded) throws stateTooLarge.
 * @returns {{state: any, bytes: number}}
 */
function applySized(state, stateBytes, event, eventBytes, maxBytes = Infinity) {
  switch (event.type) {
    case 'STATE_SNAPSHOT':
      if (eventBytes > maxBytes) throw stateTooLarge(eventBytes, maxBytes);
      return { state: event.snapshot === undefined ? null : event.snapshot, bytes: eventBytes };
    case 'STATE_DELTA': {
      const text = JSON.stringify(state === undefined ? null : state);
      if (!Array.isArray(event.delta)) return { state: applyPatch(JSON.parse(text), event.delta, true, true).newDocument, bytes: stateBytes };
      // validate = true, on the copy; the size counted for the queue is the
      // state before and the delta, as documented (the bound is checked on
      // what the operations add, in applyBounded)
      const before = textBytes(text);
      const { doc } = applyBounded(JSON.parse(text), event.delta, before, maxBytes);
      return { state: doc, bytes: before + eventBytes };
    }
    default:
      return isStreamEnd(event) ? { state: null, bytes: 0 } : { state, bytes: stateBytes };
  }
}

module.exports = { applyEvent, applySized, applyBounded, stateTooLarge, isStreamEnd, STREAM_END };
