'use strict';
// GET /streams/<table>/<key>: a row's stream for a browser's EventSource,
// as one AG-UI run that lasts as long as the response:
//
//   RUN_STARTED {threadId: <the stream>, runId: <one per response>}
//   the prelude and the events (follow.js), each event's seq as its id
//   RUN_FINISHED {outcome: success, result: {stream, seq, reason}}
//                when the stream ends (after hx.stream_end) or the gateway closes
//
// A reconnect (Last-Event-ID) starts a new run of the same thread.  A
// reconnect from the hx.stream_end the stream ended with, with nothing
// after it, gets 204: an EventSource stops reconnecting.
const crypto = require('node:crypto');
const { SseResponse } = require('./sse');
const { Follower } = require('./follow');
const { PROTOCOL_VERSION } = require('@ag-ui/core');
const { frameFor } = require('./frames');

/** The status a subscription's failure to start means for the request. */
function statusOf(err) {
  const code = err && err.code;
  if (typeof code === 'string') {
    if (code.startsWith('22')) return 400;           // the key's type rejects it
    if (code === '42P01' || code === '42704') return 404; // no such table, or no stream trigger
  }
  if (err && /no stream for key/.test(err.message)) return 404;
  return 503;
}

function runId() {
  return `hx-${crypto.randomBytes(9).toString('base64url')}`;
}

/** A RUN_FINISHED (or RUN_ERROR, should it not be an AG-UI event) frame entry, kept through clear(). */
function finishedEntry(threadId, id, outcome, result) {
  const f = frameFor({ type: 'RUN_FINISHED', threadId, runId: id, timestamp: Date.now(), outcome, result });
  if (f.ok) return { ...f, keep: true };
  return { ...frameFor({ type: 'RUN_ERROR', message: f.reason, code: 'hxstate_gateway', timestamp: Date.now() }), keep: true };
}

function serveStream(ctx, req, res, { target, table, clientId, release, after }) {
  const conn = new SseResponse(ctx, req, res, { kind: 'stream', clientId, release, seq: after });
  const threadId = target.stream;
  const id = runId();
  let finished = false;
  const finish = (reason, extra) => {
    if (finished || conn.closed) return;
    finished = true;
    f.stop();
    f.preface();
    f.closeAll(); // AG-UI: a run finishes with nothing open
    conn.push(finishedEntry(threadId, id, { type: 'success' },
      { stream: f.stream || target.stream, seq: f.sent === null ? (after || 0) : f.sent, reason, ...(extra || {}) }));
    conn.end();
  };
  const started = () => ({ ...frameFor({ type: 'RUN_STARTED', threadId, runId: id, protocolVersion: PROTOCOL_VERSION, timestamp: Date.now() }), keep: true });
  const f = new Follower(ctx, target, table, conn, {
    preface: started,
    end: (event) => finish('stream_end', { end: event.value === undefined ? null : event.value }),
    gone: () => {
      finished = true;
      conn.end(204);
    },
    fail: (err) => {
      f.stop();
      // a subscription that could not start: a status; anything later (or
      // a state past maxStateBytes, err.agui) ends the run with RUN_ERROR
      if (!f.started && !err.agui) {
        const status = statusOf(err);
        conn.end(status, status === 400 ? `malformed key: ${err.message}` : err.message);
        return;
      }
      finished = true;
      f.preface();
      conn.push({ ...frameFor({ type: 'RUN_ERROR', message: err.message, code: err.agui || 'hxstate_failed', timestamp: Date.now() }), keep: true });
      conn.end();
    },
  });
  conn.onClosed(() => f.stop());
  conn.onFinish(() => finish('gateway_closed'));
  f.start(after);
}

module.exports = { serveStream, statusOf, runId, finishedEntry, PROTOCOL_VERSION };
