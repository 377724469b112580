'use strict';
// The parts of a row's state the gateway reads, followed event by event
// without the rest of the state: the conversation (the messages path) and
// the pending interrupts (the interrupt path).
//
// A projection is a small document holding only those members at their
// paths, {messages: [...], __interrupt__: [...]} for the default paths.
// A STATE_SNAPSHOT gives it anew; a STATE_DELTA changes it only through
// its operations that touch a projected path: one at or below the path is
// applied to the projection as it is, and one above it (a replace of the
// root or of a parent) carries the whole new value.  Deltas that touch
// nothing projected (most of them) cost a scan of their paths.  An
// operation that moves or copies a value from outside the projection into
// it cannot be followed: the answer is "unknown", and the caller reads a
// fresh snapshot.  Results never share structure the caller may change:
// a projection is never mutated once made (operations apply to a copy).
//
// A projection is bounded in bytes (maxStateBytes): a delta is applied
// operation by operation, each one's growth known before it is applied
// (what an add or a replace brings into the projection, what a copy
// copies), and one that would take the projection past the bound is not
// applied: the answer is "tooLarge" (follow.js ends the responses that
// follow it).  A log's deltas are the writer's: a dozen 93-byte "copy"
// operations that copy the conversation into itself double it twelve
// times.  Values brought in are copies (JSON text parsed again): an op's
// value is the event's own, shared with every subscriber, and a later
// op of the same delta may change what an earlier one added.
//
// Pure; the gateway keeps one projection per response, and responses of
// one stream at one seq share theirs (see follow.js).
const { applyOperation, getValueByPointer } = require('fast-json-patch');
const { getPointer } = require('./agui');

function tokens(pointer) {
  return pointer === '' ? [] : pointer.slice(1).split('/').map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** How pointer a relates to projected path p: 'inside' (at or below), 'above', or null (apart). */
function relation(a, p) {
  if (a === p || a.startsWith(`${p}/`)) return 'inside';
  if (a === '' || p.startsWith(`${a}/`)) return 'above';
  return null;
}

/** The projection of state onto paths (array of pointers, no null). */
function project(state, paths) {
  const doc = {};
  for (const p of paths) {
    const v = getPointer(state, p);
    if (v !== undefined) setAt(doc, tokens(p), v);
  }
  return doc;
}

/** The size of a projection (or any value): its JSON text's bytes. */
function measure(doc) {
  return Buffer.byteLength(JSON.stringify(doc === undefined ? null : doc));
}

function setAt(doc, toks, value) {
  let o = doc;
  for (let i = 0; i < toks.length - 1; i++) {
    if (o[toks[i]] === null || typeof o[toks[i]] !== 'object') o[toks[i]] = {};
    o = o[toks[i]];
  }
  o[toks[toks.length - 1]] = value;
}

/**
 * At most what a value's member name (or element separator) adds to the
 * JSON text beside the value: its last token, escaped (six bytes a byte at
 * most), quoted, a colon and a comma.
 */
function keyBytes(path) {
  return typeof path === 'string' ? 6 * Buffer.byteLength(path.slice(path.lastIndexOf('/') + 1)) + 4 : 4;
}

/** What a value put at pointer at keeps of the projected paths below it (at is above them). */
function projectBelow(value, at, paths) {
  const out = {};
  for (const p of paths) {
    if (relation(at, p) !== 'above') continue;
    const v = getPointer(value, p.slice(at.length));
    if (v !== undefined) setAt(out, tokens(p.slice(at.length)), v);
  }
  return out;
}

/**
 * The projection after delta (RFC 6902 operations), given the one before,
 * within max bytes: {projection, changed: [paths that changed]},
 * {unknown: true}, or {tooLarge: true, bytes} (bytes: what it would have
 * been at least).
 */
function applyDelta(before, delta, paths, { max = Infinity } = {}) {
  const relevant = [];
  const changed = new Set();
  for (const op of delta) {
    if (op.op === 'test') continue;
    let above = false;
    let touches = false;
    for (const p of paths) {
      const r = relation(op.path, p);
      const rf = typeof op.from === 'string' ? relation(op.from, p) : null;
      if (r) {
        touches = true;
        changed.add(p);
        if (r === 'above') above = true;
        // a value coming from outside the projection cannot be known here
        if ((op.op === 'move' || op.op === 'copy') && (rf === null || r === 'above')) return { unknown: true };
      }
      if (rf && op.op === 'move') {
        touches = true;
        changed.add(p);
      }
    }
    if (touches) relevant.push({ op, above });
  }
  if (relevant.length === 0) return { projection: before, changed: [] };
  // a copy of the projection, ours to change (its text gives its size)
  const text = JSON.stringify(before);
  let doc = JSON.parse(text);
  let bound = Buffer.byteLength(text);
  for (let i = 0; i < relevant.length; i++) {
    let { op } = relevant[i];
    let value;
    if ((op.op === 'add' || op.op === 'replace') && op.value !== undefined) {
      // an op above a path brings only what the projection keeps of its value
      value = relevant[i].above ? projectBelow(op.value, op.path, paths) : op.value;
    } else if (op.op === 'copy') {
      try {
        value = getValueByPointer(doc, op.from);
      } catch (err) {
        value = undefined;
      }
      if (value === undefined) return { unknown: true };
    }
    let grow = 0;
    if (value !== undefined) {
      const t = JSON.stringify(value);
      grow = Buffer.byteLength(t) + keyBytes(op.path);
      if (bound + grow > max) {
        bound = measure(doc);
        if (bound + grow > max) return { tooLarge: true, bytes: bound + grow };
      }
      op = { op: op.op === 'copy' ? 'add' : op.op, path: op.path, value: JSON.parse(t) };
    }
    try {
      // the projection holds every ancestor a relevant op needs (an op above
      // a path replaces the ancestor whole), so the ops apply as they are;
      // one whose parent is missing here is missing in the state too
      doc = applyOperation(doc, op, false, true, true, i).newDocument;
    } catch (err) {
      return { unknown: true };
    }
    bound += grow;
  }
  // keep only the projected members (a move out of a path, an op above one)
  return { projection: project(doc, paths), changed: [...changed] };
}

module.exports = { project, measure, applyDelta, relation };
