'use strict';
// AG-UI events as server-sent events, checked before they go out, and
// serialised once for every response that sends them.
//
// An event goes out only if @ag-ui/client would take it: it must parse
// with @ag-ui/core's EventSchemas (what the client's enforceEvents runs on
// every event it receives), and a STATE_DELTA must not have a path that
// fast-json-patch refuses (a member "__proto__", or "prototype" right after
// "constructor": the client would keep its old state).  hxstate sends a
// snapshot instead of such a delta, so a refusal here means something else
// wrote the log; the gateway then sends a fresh snapshot instead (see
// follow.js).
//
// A frame is a Buffer, written to every socket that sends it without a
// copy (see sse.js).  A FrameCache, one per gateway, shares them:
//   - the hub hands every subscription of a stream the same event object,
//     so a logged event's frame is kept in a WeakMap for as long as the
//     event lives;
//   - snapshots are made per subscription, but a stream's snapshot at one
//     seq is one state, so snapshot frames (and MESSAGES_SNAPSHOT frames,
//     and the projections of follow.js) are shared by stream and seq for
//     as long as a response holds one (a WeakRef cache): sixty browsers
//     joining a stream with a 4 MB state cost one 4 MB frame, not sixty.
//     After a failover that lost an event already read (a resync with
//     reason 'diverged'), a seq may hold another state: the stream's shared
//     frames are forgotten.
// What is shared is keyed by what makes it the same: the gateway (each has
// a cache of its own, and one hub, so one database), the stream as the
// database names it (the subscription's, never a name from a URL, nor one
// an event carries: a source and a table can be served at URLs that name
// the same stream, and a logged event can claim any stream), its seq, and
// for what is made of a table's paths, the table.
const { EventSchemas } = require('@ag-ui/core/schemas');

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
 * One SSE message as text: the seq as its id (when given), the event as
 * its data.  Lines end with LF only: @ag-ui/client splits messages on
 * "\n\n".  JSON.stringify never emits a raw newline, so the data is one
 * line.
 */
function sse(event, id) {
  return id === undefined || id === null ? `data: ${JSON.stringify(event)}\n\n` : `id: ${id}\ndata: ${JSON.stringify(event)}\n\n`;
}

/**
 * An event, checked, as a frame entry: {ok: true, frame, seq} (seq: the
 * SSE id, if any) or {ok: false, reason}.
 */
function frameFor(event, id) {
  const reason = refusal(event);
  if (reason) return { ok: false, reason };
  return { ok: true, frame: Buffer.from(sse(event, id)), seq: id === undefined || id === null ? undefined : id };
}

function check(event) {
  return frameFor(event, event.metadata && event.metadata.seq);
}

class FrameCache {
  constructor() {
    this._byEvent = new WeakMap(); // event -> {ok, frame, reason}
    this._shared = new Map();      // "<stream>\0<seq>\0<kind>" -> WeakRef({ok, frame, reason} or another object)
    this._sweep = new FinalizationRegistry((key) => {
      const ref = this._shared.get(key);
      if (ref && ref.deref() === undefined) this._shared.delete(key);
    });
    this._next = new WeakMap();    // delta event -> WeakMap(base projection -> what the delta made of it)
  }

  /**
   * The checked frame of an event of stream (the subscription's stream,
   * as the database names it): {ok: true, frame} or {ok: false, reason},
   * its seq as the SSE id.  Snapshots are shared by stream and seq.
   */
  frameOf(event, stream) {
    let f = this._byEvent.get(event);
    if (f) return f;
    if (event.type === 'STATE_SNAPSHOT' && event.metadata && Number.isSafeInteger(event.metadata.seq)) {
      f = this.shared(stream, event.metadata.seq, 'state', () => check(event));
    } else {
      f = check(event);
    }
    this._byEvent.set(event, f);
    return f;
  }

  /**
   * The value of kind for (stream, seq) (a frame entry, a projection: an
   * object), made by make() unless someone still holds the one made before.
   */
  shared(stream, seq, kind, make) {
    const key = `${stream}\u0000${seq}\u0000${kind}`;
    const ref = this._shared.get(key);
    let f = ref && ref.deref();
    if (!f) {
      f = make();
      this._shared.set(key, new WeakRef(f));
      this._sweep.register(f, key);
    }
    return f;
  }

  /** What a delta event made of base (a projection): make()'s result, made once. */
  next(event, base, make) {
    let m = this._next.get(event);
    if (!m) {
      m = new WeakMap();
      this._next.set(event, m);
    }
    let r = m.get(base);
    if (!r) {
      r = make();
      m.set(base, r);
    }
    return r;
  }

  /**
   * Forget the shared frames of a stream: a follower found that the server
   * it reconnected to lost an event it had read (a failover), so what was
   * made at a seq may not be what that seq now holds.
   */
  forget(stream) {
    const prefix = `${stream}\u0000`;
    for (const key of this._shared.keys()) if (key.startsWith(prefix)) this._shared.delete(key);
  }
}

module.exports = { FrameCache, frameFor, refusal, bannedPath, sse };
