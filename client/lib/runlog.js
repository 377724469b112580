'use strict';
// What is open in a stream at a seq, read from the log: the state of
// constructs.js that a reader joining there needs for its prelude.
//
// The log is read backwards from the seq, a page at a time, keeping only
// what can open or close a construct (a run's construct events, and the
// CUSTOM run markers and hx.stream_end): the state events are left in the
// database.  It stops at the first marker it meets (a run that starts or
// ends leaves nothing of an earlier run open), at an hx.stream_end (the
// history of another row of the key), at the stream's first event, or
// after maxEvents events, whichever comes first; then what it read is
// applied forwards.  A construct opened before where it stopped on
// maxEvents is not known: its later events are refused (the reader drops
// them) and its client never sees it open.  Writers that mark their runs
// (writer.js does) are read back to their run's start at most.
//
// The bytes read are bounded too: maxBytes of text held (the state's own
// bound) and pageSize events a statement.

const { applyConstruct, emptyConstructs, RUN_MARKER } = require('./constructs');

const TYPES = [
  'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END',
  'TOOL_CALL_START', 'TOOL_CALL_ARGS', 'TOOL_CALL_END',
  'REASONING_START', 'REASONING_END', 'REASONING_MESSAGE_START', 'REASONING_MESSAGE_CONTENT', 'REASONING_MESSAGE_END',
  'STEP_STARTED', 'STEP_FINISHED', 'CUSTOM',
];

/** The statement that reads a page of the log backwards (schema: the extension's, quoted). */
function pageStatement(schema) {
  return `SELECT seq, event FROM ${schema}.hx_event
           WHERE stream = $1 AND seq <= $2 AND type = ANY ($3::text[])
             AND (type <> 'CUSTOM' OR event->>'name' IN ('${RUN_MARKER}', 'hx.stream_end'))
           ORDER BY seq DESC LIMIT $4`;
}

/**
 * The constructs open in stream right after its event seq:
 * {state, seq, read, complete, refused} (read: events read; complete:
 * false when it stopped on maxEvents; refused: events the state did not
 * take, a writer's mistakes).  query(text, values) runs a statement and
 * resolves to its rows.
 */
async function openAt(query, stream, seq, { schema = 'public', maxEvents = 100000, maxBytes = Infinity, pageSize = 1000 } = {}) {
  const text = pageStatement(schema);
  const found = []; // newest first
  let before = seq;
  let complete = false;
  let read = 0;
  while (before > 0) {
    const limit = Math.min(pageSize, maxEvents - read);
    if (limit <= 0) break;
    const rows = await query(text, [stream, before, TYPES, limit]);
    read += rows.length;
    let stop = false;
    for (const row of rows) {
      const e = row.event;
      found.push(e);
      if (e.type === 'CUSTOM') {
        stop = true; // a marker or an end: nothing before it is open after it
        break;
      }
    }
    if (stop || rows.length < limit) {
      complete = true;
      break;
    }
    before = Number(rows[rows.length - 1].seq) - 1;
  }
  if (before <= 0) complete = true;
  let state = emptyConstructs();
  let refused = 0;
  for (let i = found.length - 1; i >= 0; i--) {
    const r = applyConstruct(state, found[i], { maxBytes });
    if (r.tooLarge) {
      const err = new Error(`the constructs open in ${stream} at seq ${seq} hold more than ${maxBytes} bytes`);
      err.code = 'HX_STATE_TOO_LARGE';
      throw err;
    }
    if (!r.ok) refused++;
    state = r.state;
  }
  return { state, seq, read, complete, refused };
}

module.exports = { openAt, pageStatement, TYPES };
