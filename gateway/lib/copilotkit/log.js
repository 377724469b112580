'use strict';
// What a thread's log says about one of its runs, read with SQL: the
// run's durable events (after its start marker), whether they end with the
// agent's terminal event (RUN_FINISHED, RUN_ERROR) or hxstate's end
// marker, and what is open at the stream's head (runlog.js's openAt).
// And the ids of the messages a thread's earlier runs hold.
const { openAt } = require('hxstate-client');
const { RUN_MARKER } = require('hxstate-client').constructs;
const { decode, WRAPPED } = require('./events');

const PAGE = 1000;

/** The extension's schema, quoted. */
async function extensionSchema(query) {
  const rows = await query(`SELECT n.nspname FROM pg_catalog.pg_extension e
    JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'hxstate'`, []);
  if (rows.length === 0) throw Object.assign(new Error('HxAgentRunner: the database has no hxstate extension'), { code: '42704' });
  return `"${rows[0].nspname.replace(/"/g, '""')}"`;
}

/** The stream's last seq (0: none). */
async function head(query, hx, stream) {
  const rows = await query(`SELECT coalesce(max(seq), 0) AS seq FROM ${hx}.hx_event WHERE stream = $1`, [stream]);
  return Number(rows[0].seq);
}

/**
 * Run runId of stream, as its log holds it: {startSeq (null: nothing of it
 * is durable), events (the agent's, decoded), terminal, ended, head, open}.
 * maxBytes bounds the events read (a run's whole text).
 */
async function runInLog(query, hx, stream, runId, { maxBytes = 64 * 1024 * 1024 } = {}) {
  const start = await query(`SELECT seq FROM ${hx}.hx_event WHERE stream = $1 AND type = 'CUSTOM'
      AND event->>'name' = $2 AND event->'value'->>'runId' = $3 AND event->'value'->>'status' = 'started'
    ORDER BY seq DESC LIMIT 1`, [stream, RUN_MARKER, runId]);
  const last = await head(query, hx, stream);
  if (start.length === 0) return { startSeq: null, events: [], terminal: false, ended: false, head: last, open: null };
  const startSeq = Number(start[0].seq);
  const events = [];
  let terminal = false;
  let ended = false;
  let bytes = 0;
  let after = startSeq;
  for (;;) {
    const rows = await query(`SELECT seq, event FROM ${hx}.hx_event WHERE stream = $1 AND seq > $2 ORDER BY seq LIMIT ${PAGE}`, [stream, after]);
    for (const row of rows) {
      const e = row.event;
      if (e.type === 'CUSTOM' && e.name === RUN_MARKER && e.value) {
        if (e.value.runId !== runId || e.value.status === 'started') {
          // another run began: this one's events end here
          return { startSeq, events, terminal, ended: true, head: last, open: null };
        }
        ended = true;
        continue;
      }
      const d = decode(e);
      if (d === null) continue;
      bytes += JSON.stringify(d).length;
      if (bytes > maxBytes) throw Object.assign(new Error(`HxAgentRunner: run ${runId} holds more than ${maxBytes} bytes of events`), { code: 'HX_COPILOTKIT_TOO_LARGE' });
      events.push(d);
      if (d.type === 'RUN_FINISHED' || d.type === 'RUN_ERROR') terminal = true;
    }
    if (rows.length < PAGE) break;
    after = Number(rows[rows.length - 1].seq);
  }
  const open = ended ? null : (await openAt(query, stream, last, { schema: hx })).state;
  return { startSeq, events, terminal, ended, head: last, open };
}

/** The ids of the messages the thread's log holds before seq (its runs' and their inputs'). */
async function messageIds(query, hx, stream, before) {
  const rows = await query(`SELECT DISTINCT id FROM (
      SELECT event->>'messageId' AS id FROM ${hx}.hx_event
       WHERE stream = $1 AND seq < $2 AND type IN ('TEXT_MESSAGE_START', 'TOOL_CALL_RESULT', 'REASONING_MESSAGE_START')
      UNION ALL
      SELECT m->>'id' FROM ${hx}.hx_event,
             jsonb_array_elements(CASE WHEN jsonb_typeof(event->'value'->'input'->'messages') = 'array'
                                       THEN event->'value'->'input'->'messages' ELSE '[]' END) AS m
       WHERE stream = $1 AND seq < $2 AND type = 'CUSTOM' AND event->>'name' = $3 AND event->'value'->>'type' = 'RUN_STARTED'
    ) s WHERE id IS NOT NULL`, [stream, before, WRAPPED]);
  return new Set(rows.map((r) => r.id));
}

module.exports = { extensionSchema, head, runInLog, messageIds };
