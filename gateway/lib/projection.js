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
// Pure; the gateway keeps one projection per response, and responses of
// one stream at one seq share theirs (see follow.js).
const { applyPatch } = require('fast-json-patch');
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

function setAt(doc, toks, value) {
  let o = doc;
  for (let i = 0; i < toks.length - 1; i++) {
    if (o[toks[i]] === null || typeof o[toks[i]] !== 'object') o[toks[i]] = {};
    o = o[toks[i]];
  }
  o[toks[toks.length - 1]] = value;
}

/**
 * The projection after delta (RFC 6902 operations), given the one before:
 * {projection, changed: [paths that changed]}, or {unknown: true}.
 */
function applyDelta(before, delta, paths) {
  const relevant = [];
  const changed = new Set();
  for (const op of delta) {
    let touches = false;
    for (const p of paths) {
      const r = relation(op.path, p);
      const rf = typeof op.from === 'string' ? relation(op.from, p) : null;
      if (op.op === 'test') continue;
      if (r) {
        touches = true;
        changed.add(p);
        // a value coming from outside the projection cannot be known here
        if ((op.op === 'move' || op.op === 'copy') && rf === null) return { unknown: true };
      }
      if (rf && op.op === 'move') {
        touches = true;
        changed.add(p);
      }
    }
    if (touches) relevant.push(op);
  }
  if (relevant.length === 0) return { projection: before, changed: [] };
  let doc;
  try {
    // the projection holds every ancestor a relevant op needs (an op above
    // a path replaces the ancestor whole), so the ops apply as they are;
    // one whose parent is missing here is missing in the state too
    doc = applyPatch(before, relevant, false, false).newDocument;
  } catch (err) {
    return { unknown: true };
  }
  // keep only the projected members (an op above a path brought siblings)
  return { projection: project(doc, paths), changed: [...changed] };
}

module.exports = { project, applyDelta, relation };
