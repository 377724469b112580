'use strict';
// What the Node tests share (not a test file itself: node --test runs
// test/js/*.test.js and client/test/*.test.js):
//   - databases: each test file works in a database of its own, in the
//     cluster that test/run starts (test/lib/cluster.sh sets PGHOST,
//     PGPORT, PGUSER and PGDATABASE), so files can run in parallel;
//   - waiting: waitFor() with a deadlock guard, never a timing assertion;
//   - streams: tables with an hx_stream trigger, writes, the log, and
//     followers that record what they hand out;
//   - a seeded PRNG, so that a failing run can be replayed, and canonical
//     JSON, so that values compare as JSON whatever their key order.
const { Client } = require('pg');
const { HxStream } = require('../../client');

// How long waitFor() waits for something that must happen before it calls
// the test a failure.  A deadlock guard, not a timing assertion: nothing in
// these tests takes more than a fraction of it.
const PATIENCE_MS = 30000;

// ---------------------------------------------------------------------
// Databases
// ---------------------------------------------------------------------

/** A new, empty database with hxstate; a connection to it. */
async function freshDatabase(name) {
  const admin = new Client({ database: 'postgres' });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const client = await connect(name);
  await client.query('CREATE EXTENSION hxstate');
  return client;
}

async function connect(name, options = {}) {
  const client = new Client({ database: name, ...options });
  await client.connect();
  return client;
}

// ---------------------------------------------------------------------
// Waiting
// ---------------------------------------------------------------------

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

// ---------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------

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
    `UPDATE ${table} SET state = hx_merge(state, $1) WHERE session_id = $2 RETURNING state::jsonb AS state`,
    [JSON.stringify(ops), key]);
  return rows[0].state;
}

async function rowState(db, table, key) {
  const { rows } = await db.query(`SELECT state::jsonb AS state FROM ${table} WHERE session_id = $1`, [key]);
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

// ---------------------------------------------------------------------
// Randomness and comparison
// ---------------------------------------------------------------------

/** A seeded PRNG (mulberry32) with the helpers the generators use. */
function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n) => Math.floor(next() * n),
    pick: (xs) => xs[Math.floor(next() * xs.length)],
    chance: (p) => next() < p,
  };
}

/** JSON with object keys sorted: equal text iff deep-equal JSON values. */
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

module.exports = {
  PATIENCE_MS, freshDatabase, connect, HxStream, sleep, waitFor, streamTable, setTrigger, merge,
  rowState, lastSeq, loggedEvents, follow, seqs, range, killBackends, backendPids, rng, canonical,
};
