'use strict';
// Every statement a RunWriter sends, in one place (as sql.js is the hub's).
// Values travel as parameters; the names written into a statement's text
// are the extension's schema and a table's, key column's and state
// column's names as the catalog gives them, each quoted (quoteIdent, or
// regclass's own output), so no key, stream name or event becomes SQL.
const { quoteIdent } = require('./sql');

/** The extension's schema. */
function extensionSchema() {
  return {
    text: `SELECT n.nspname FROM pg_catalog.pg_extension e
             JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'hxstate'`,
    values: [],
  };
}

/**
 * A table's hx_stream trigger: the table's name as regclass prints it
 * (quoted as needed), the trigger's arguments (tgargs, NUL-separated: the
 * state and key columns first), and the table's columns with their types
 * ({name: type}).  One row, or none for a table with no hx_stream trigger
 * (several: the first by name).
 */
function streamedTable(schema, table) {
  return {
    text: `SELECT c.oid::pg_catalog.regclass::text AS rel, t.tgargs,
                  (SELECT pg_catalog.jsonb_object_agg(a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod))
                     FROM pg_catalog.pg_attribute a
                    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns
             FROM pg_catalog.pg_class c
             JOIN pg_catalog.pg_trigger t ON t.tgrelid = c.oid
            WHERE c.oid = pg_catalog.to_regclass($1)
              AND t.tgfoid = '${schema}.hx_stream'::pg_catalog.regproc
            ORDER BY t.tgname LIMIT 1`,
    values: [table],
  };
}

/** hx_stream_emit for many rows, in the order given: (i, seq) per row. */
function emitRows(schema, rows) {
  return {
    text: `SELECT b.i, ${schema}.hx_stream_emit(b.source::pg_catalog.regclass, b.key, b.events) AS seq
             FROM pg_catalog.jsonb_to_recordset($1::jsonb) AS b(i int, source text, key text, events jsonb)`,
    values: [JSON.stringify(rows)],
  };
}

/** hx_stream_send of many log streams' events, each stream's in the order given: (i, seq) per event. */
function sendLogs(schema, logs) {
  return {
    text: `SELECT l.i, ${schema}.hx_stream_send(l.stream, e.value) AS seq
             FROM pg_catalog.jsonb_to_recordset($1::jsonb) AS l(i int, stream text, events jsonb)
                  CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(l.events) AS e(value)`,
    values: [JSON.stringify(logs)],
  };
}

/**
 * The op lists of rows of one table merged into their state (hx_merge), in
 * one statement: t = {rel, state, key, keyType} (streamedTable's).
 */
function mergeStates(schema, t, updates) {
  const state = quoteIdent(t.state);
  return {
    text: `UPDATE ${t.rel} AS r SET ${state} = ${schema}.hx_merge(COALESCE(r.${state}, '{}'::jsonb), u.ops)
             FROM pg_catalog.jsonb_to_recordset($1::jsonb) AS u(key text, ops jsonb)
            WHERE r.${quoteIdent(t.key)} = u.key::${t.keyType}`,
    values: [JSON.stringify(updates)],
  };
}

/** A row's stream name (and last seq). */
function rowStream(schema, table, key) {
  return {
    text: `SELECT s.stream, s.seq FROM ${schema}.hx_stream_snapshot($1::pg_catalog.regclass, $2) AS s`,
    values: [table, key],
  };
}

/** The events of a stream after seq, at most limit, in order (for a commit in doubt). */
function eventsAfter(schema, stream, seq, limit) {
  return {
    text: `SELECT seq, event FROM ${schema}.hx_event WHERE stream = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
    values: [stream, seq, limit],
  };
}

/** The seq of a run's start marker in a stream, if it is there. */
function runStart(schema, stream, marker, runId) {
  return {
    text: `SELECT seq FROM ${schema}.hx_event
            WHERE stream = $1 AND type = 'CUSTOM' AND event->>'name' = $2
              AND event->'value'->>'runId' = $3 AND event->'value'->>'status' = 'started'
            ORDER BY seq DESC LIMIT 1`,
    values: [stream, marker, runId],
  };
}

module.exports = { extensionSchema, streamedTable, emitRows, sendLogs, mergeStates, rowStream, eventsAfter, runStart };
