'use strict';
// AG-UI events as server-sent events, checked before they go out.
//
// An event goes out only if @ag-ui/client would take it: it must parse
// with @ag-ui/core's EventSchemas (what the client's enforceEvents runs on
// every event it receives), and a STATE_DELTA must not have a path that
// fast-json-patch refuses (a member "__proto__", or "prototype" right after
// "constructor": the client would keep its old state).  hxstate sends a
// snapshot instead of such a delta, so a refusal here means something else
// wrote the log; the gateway then sends a fresh snapshot instead (see
// gateway.js).
//
// The hub hands every subscription of a stream the same event object, so
// an event's check and its serialised frame are computed once and kept in
// a WeakMap for as long as the event lives.
const { EventSchemas } = require('@ag-ui/core/schemas');

const frames = new WeakMap(); // event -> {ok, frame, reason}

/** Does fast-json-patch refuse this pointer (applyOperation's banPrototypeModifications)? */
function bannedPath(path) {
  if (typeof path !== 'string') return false;
  const keys = path.split('/');
  for (let t = 1; t < keys.length; t++) {
    const key = keys[t].includes('~') ? keys[t].replace(/~1/g, '/').replace(/~0/g, '~') : keys[t];
    // fast-json-patch compares the previous key as written (escaped)
    if (key === '__proto__' || (key === 'prototype' && t > 1 && keys[t - 1] === 'constructor')) return true;
  }
  return false;
}

/** Why @ag-ui/client would refuse event, or null. */
function refusal(event) {
  const r = EventSchemas.safeParse(event);
  if (!r.success) {
    const issue = r.error.issues[0];
    return `not an AG-UI event: ${issue ? `${issue.path.join('.') || '(event)'}: ${issue.message}` : 'invalid'}`;
  }
  if (event.type === 'STATE_DELTA') {
    for (const op of event.delta) {
      if (bannedPath(op.path) || bannedPath(op.from)) return `a delta path fast-json-patch refuses (${op.path})`;
    }
  }
  return null;
}

/**
 * One SSE message: the event's seq as its id (when it has one), the event
 * as its data.  Lines end with LF only: @ag-ui/client splits messages on
 * "\n\n".  JSON.stringify never emits a raw newline, so the data is one
 * line.
 */
function sse(event, id) {
  return id === undefined || id === null ? `data: ${JSON.stringify(event)}\n\n` : `id: ${id}\ndata: ${JSON.stringify(event)}\n\n`;
}

/** The checked frame of a stream's event: {ok: true, frame} or {ok: false, reason}. */
function frameOf(event) {
  let f = frames.get(event);
  if (!f) {
    const reason = refusal(event);
    f = reason ? { ok: false, reason } : { ok: true, frame: sse(event, event.metadata && event.metadata.seq) };
    frames.set(event, f);
  }
  return f;
}

module.exports = { frameOf, refusal, bannedPath, sse };
