'use strict';
// Shared by the client's tests (not a test file itself: node --test runs
// client/test/*.test.js).  The databases come from test/js/db.js: each test
// file works in a database of its own, in the cluster that test/run starts.
const { freshDatabase, connect } = require('../../test/js/db');
const { HxStream } = require('..');

// How long waitFor() waits for something that must happen before it calls
// the test a failure.  A deadlock guard, not a timing assertion: nothing in
// these tests takes more than a fraction of it.
const PATIENCE_MS = 30000;

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolve once check() is true; reject with what we waited for if never. */
async function waitFor(check, what, patience = PATIENCE_MS) {
  const deadline = Date.now() + patience;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await sleep(10);
  }
}

/** A table with an hx_stream trigger (options appended to the trigger's). */
async function streamTable(db, table, ...options) {
  await db.query(`CREATE TABLE ${table} (session_id text PRIMARY KEY, state jsonb)`);
  await setTrigger(db, table, ...options);
}

/** (Re)create the table's hx_stream trigger with these options. */
async function setTrigger(db, table, ...options) {
  const args = ['state', 'session_id', ...options].map((a) => `'${a}'`).join(', ');
  await db.query(`DROP TRIGGER IF EXISTS hx ON ${table}`);
  await db.query(`CREATE TRIGGER hx AFTER INSERT OR UPDATE OR DELETE ON ${table}
                  FOR EACH ROW EXECUTE FUNCTION hx_stream(${args})`);
}

/** hx_merge the ops into a row; the row's state after it. */
async function merge(db, table, key, ops) {
  const { rows } = await db.query(
    `UPDATE ${table} SET state = hx_merge(state, $1) WHERE session_id = $2 RETURNING state`,
    [JSON.stringify(ops), key]);
  return rows[0].state;
}

async function rowState(db, table, key) {
  const { rows } = await db.query(`SELECT state FROM ${table} WHERE session_id = $1`, [key]);
  return rows.length ? rows[0].state : undefined;
}

async function lastSeq(db, stream) {
  const { rows } = await db.query('SELECT coalesce(max(seq), 0)::int AS seq FROM hx_event WHERE stream = $1', [stream]);
  return rows[0].seq;
}

async function loggedEvents(db, stream) {
  const { rows } = await db.query('SELECT seq::int, event FROM hx_event WHERE stream = $1 ORDER BY seq', [stream]);
  return rows;
}

/**
 * An HxStream on database name, recording everything it emits.  Its
 * connections carry application_name, so a test can find (and kill) them.
 */
function follow(name, table, key, options = {}) {
  const appName = options.appName || `hx-follow-${table}-${key}`;
  const stream = new HxStream({
    pg: { database: name, application_name: appName },
    table,
    key,
    pollInterval: 0,
    reconnect: { min: 20, max: 200 },
    ...options,
  });
  const log = { events: [], states: [], resyncs: [], ends: [], errors: [], disconnects: 0, reconnects: 0 };
  stream.on('event', (event, state) => { log.events.push(event); log.states.push(state); });
  stream.on('resync', (info) => log.resyncs.push(info));
  stream.on('end', (event, before) => log.ends.push({ event, before }));
  stream.on('error', (err) => log.errors.push(err));
  stream.on('disconnect', () => { log.disconnects++; });
  stream.on('reconnect', () => { log.reconnects++; });
  stream.appName = appName;
  stream.log = log;
  return stream;
}

/** The seqs of the events a stream handed out, in order. */
function seqs(stream) {
  return stream.log.events.map((e) => e.metadata.seq);
}

function range(from, to) {
  return Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);
}

/** Terminate the backends of application appName; how many there were. */
async function killBackends(db, appName) {
  const { rows } = await db.query(
    `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
      WHERE application_name = $1 AND pid <> pg_backend_pid()`, [appName]);
  return rows.filter((r) => r.ok).length;
}

async function backendPids(db, appName) {
  const { rows } = await db.query(
    'SELECT pid FROM pg_stat_activity WHERE application_name = $1 ORDER BY pid', [appName]);
  return rows.map((r) => r.pid);
}

module.exports = {
  freshDatabase, connect, HxStream, PATIENCE_MS, sleep, waitFor, streamTable, setTrigger, merge,
  rowState, lastSeq, loggedEvents, follow, seqs, range, killBackends, backendPids,
};
