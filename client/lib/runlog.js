'use strict';
// What is open in a stream at a seq, read from the log: the state of
// constructs.js that a reader joining there needs for its prelude.
//
// The log is read backwards from the seq, a window of `window` seqs at a
// time, keeping only what can open or close a construct (a run's
// construct events, and the CUSTOM run markers and hx.stream_end): the
// state events stay in the database.  It stops at the first marker it
// meets (a run that starts or ends leaves nothing of an earlier run open),
// at an hx.stream_end (the history of another row of the key), at the
// stream's first event, or after maxScan seqs, whichever comes first; then
// what it read is applied forwards.  A construct opened more than maxScan
// events before the seq is not known: its later events are refused (a
// reader drops them) and a client that joins after maxScan events of it
// never sees it.  Writers that mark their runs (writer.js does) are read
// back to their run's start at most; a stream without runs costs a scan of
// maxScan seqs (the log's index is by stream and seq: each window is one
// index range).
//
// The text held is bounded by maxBytes (the state's own bound).

const { applyConstruct, emptyConstructs, RUN_MARKER } = require('./constructs');

const TYPES = [
  'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END',
  'TOOL_CALL_START', 'TOOL_CALL_ARGS', 'TOOL_CALL_END',
  'REASONING_START', 'REASONING_END', 'REASONING_MESSAGE_START', 'REASONING_MESSAGE_CONTENT', 'REASONING_MESSAGE_END',
  'STEP_STARTED', 'STEP_FINISHED', 'CUSTOM',
];

/** The statement that reads a window of the log (schema: the extension's, quoted). */
function windowStatement(schema) {
  return `SELECT seq, event FROM ${schema}.hx_event
           WHERE stream = $1 AND seq <= $2 AND seq > $3 AND type = ANY ($4::text[])
             AND (type <> 'CUSTOM' OR event->>'name' IN ('${RUN_MARKER}', 'hx.stream_end'))
           ORDER BY seq DESC`;
}

/**
 * The constructs open in stream right after its event seq:
 * {state, seq, scanned, complete, refused} (scanned: seqs looked at;
 * complete: false when it stopped on maxScan; refused: events the state
 * did not take, a writer's mistakes).  query(text, values) runs a
 * statement and resolves to its rows.  accept(event), when given, says
 * whether the reader would take a construct event at all (the gateway's:
 * does it parse as an AG-UI event); one it would not is refused, as a
 * live reader drops it, so that nothing is reopened that its reader
 * could never send.
 */
async function openAt(query, stream, seq, { schema = 'public', maxScan = 10000, maxBytes = Infinity, window = 1000, accept = null } = {}) {
  if (accept !== null && typeof accept !== 'function') throw new TypeError('openAt: options.accept is a function (event) => boolean, or null');
  const text = windowStatement(schema);
  const found = []; // newest first
  let hi = seq;
  let complete = false;
  while (hi > 0 && seq - hi < maxScan) {
    const lo = Math.max(0, hi - window, seq - maxScan);
    const rows = await query(text, [stream, hi, lo, TYPES]);
    let stop = false;
    for (const row of rows) {
      found.push(row.event);
      if (row.event.type === 'CUSTOM') {
        stop = true; // a marker or an end: nothing before it is open after it
        break;
      }
    }
    hi = lo;
    if (stop) break;
  }
  if (hi <= 0 || found.length > 0 && found[found.length - 1].type === 'CUSTOM') complete = true;
  let state = emptyConstructs();
  let refused = 0;
  for (let i = found.length - 1; i >= 0; i--) {
    // an event the reader would not send (accept false) opens and closes nothing
    if (accept !== null && found[i].type !== 'CUSTOM' && !accept(found[i])) {
      refused++;
      continue;
    }
    const r = applyConstruct(state, found[i], { maxBytes });
    if (r.tooLarge) {
      const err = new Error(`the constructs open in ${stream} at seq ${seq} hold more than ${maxBytes} bytes`);
      err.code = 'HX_STATE_TOO_LARGE';
      throw err;
    }
    if (!r.ok) refused++;
    state = r.state;
  }
  return { state, seq, scanned: seq - hi, complete, refused };
}

module.exports = { openAt, windowStatement, TYPES };
