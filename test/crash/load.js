'use strict';
// test/crash/load.js: the load and the checker of the crash run.  It is
// started by test/crash/run, which owns the cluster and kills it, and talks
// to it one line at a time (commands on stdin, replies on stdout; what it
// has to say to people goes to stderr):
//
//   (start)        fork the writers, start the followers,
//                  wait for every writer's first write      -> "ready"
//   check <label>  pause the writers, check everything      -> "checked <passed> <failed>"
//   resume         let the writers go on                    -> "resumed"
//   final          pause, check everything with the logs
//                  replayed from seq 1, stop, print figures -> "final <passed> <failed>"
//
// Environment: PGHOST etc. (the cluster), HX_CRASH_WRITERS (8),
// HX_CRASH_SESSIONS (40), HX_SEED (the writers' choices; printed),
// HX_CRASH_LAYOUT (hxdoc: the state column as docs/sessions.sql has it;
// jsonb: test/crash/run made it a jsonb column without hx_store).
//
// Writers: HX_CRASH_WRITERS processes (writer.js), each sending hx_merge
// UPDATEs to random sessions, most in autocommit, some two in a transaction
// (one of them perhaps rolled back to a savepoint), now and then deleting
// and inserting a churn session, and reporting each write's outcome (ack,
// doubt, aborted, failed) here; ops.js says what a write does.
//
// Followers: one HxStream (client/) for each of s-01 and s-02 (the hot
// sessions) and x-01 (a churn session, whose stream ends and starts again),
// polling the log every 250 ms.  Each hands out every event exactly once,
// in seq order: after its first, synthetic, snapshot each event's seq must
// be the previous one + 1; a synthetic snapshot after a resync may repeat
// the seq it had, but not skip or go back.  The digest of its state at
// each seq is kept and compared with the replay's.
//
// A check, with the writers paused (no write in flight; every in-doubt write
// settled, since the server has run crash recovery since its connection
// died) and in one REPEATABLE READ snapshot, counts these, each passed or
// failed:
//   writes    every acknowledged write is in its session exactly once; an
//             in-doubt write is there at most once, and stays as the first
//             check after its doubt found it (there, or not); a failed or
//             aborted write is not there; the writes of one transaction
//             are all there or none; nothing else is (every item is a
//             write a writer reported)
//   errors    no statement was rejected with an ERROR since the last check
//   rows      each row's state is what its items imply (ops.js): the
//             counter equals the number of items, the union, upsert,
//             merge, replace, add and delete results agree
//   churn     the churn sessions' logs: seq 1 is the inserted {}; then
//             hx.stream_end ("deleted") and STATE_SNAPSHOT alternate, and
//             nothing else; each snapshot is the state of one insert that
//             a writer reported as acknowledged and inserting, or in
//             doubt, each at most once, and every acknowledged insert has
//             its snapshot; the row is there, with the last snapshot's
//             state, exactly when the log does not end with hx.stream_end
//   seq       per stream, seq is exactly 1..n (count, min, max, distinct),
//             each event's metadata names its own stream and seq, no
//             other stream exists, hx_stream_snapshot() gives seq n and
//             the row's state (NULL for a deleted row); for the merged
//             sessions seq 1 is the only STATE_SNAPSHOT and every other
//             event is a STATE_DELTA, one per item
//   replay-sql   each stream's log replayed with hx_patch (crash_replay in
//             setup.sql) equals its row's state (NULL for a deleted row)
//   replay-node  the same with fast-json-patch
//   follower  each follower caught up to its stream's last seq, with the
//             row's state, having seen each seq once, and its state at
//             every seq equals the replay's state at that seq
//   layout    the state is stored as HX_CRASH_LAYOUT says (checkLayout;
//             test/crash/run says what it checks)
// Between checks the replays go on from the seq and state the last check
// verified; the final check replays every log from seq 1, and adds:
//   state-at  hx_stream_state_at(stream, last seq) equals the row's state
//             (JSON null for a deleted row)
//   pieces    with hxdoc: the hot sessions are in pieces, in more than one
//             segment; every churn row there is in pieces; documents were
//             deleted during the run (hx_doc_seq is past the documents
//             left)
// and, once it has committed, with the writers stopped:
//   gc        hx_store_gc('sessions') leaves exactly one document per row
//             in pieces, none dropped, and every row's state as the final
//             check verified it
const path = require('node:path');
const readline = require('node:readline');
const { fork } = require('node:child_process');
const pg = require('pg');
const { applyPatch } = require('fast-json-patch');
const { HxStream } = require('../../client');
const { parseItem, expectedState, canonical, digest, sessionKey, CHURN_KEYS, isChurn } = require('./ops');

const WRITERS = Number(process.env.HX_CRASH_WRITERS || 8);
const SESSIONS = Number(process.env.HX_CRASH_SESSIONS || 40);
const SEED = Number(process.env.HX_SEED || Math.floor(Math.random() * 2 ** 31));
const FOLLOWED = [sessionKey(1), sessionKey(2), CHURN_KEYS[0]];
// How long a pause or a follower's catch-up may take before the run calls
// it stuck: deadlock guards, not timing assertions.
const PATIENCE_MS = 180000;
const PAGE = 2000;
const LAYOUT = process.env.HX_CRASH_LAYOUT || 'hxdoc';
// hx_store's threshold as docs/sessions.sql attaches it (the default, 2
// kB): a state whose jsonb is larger is stored in pieces; one of at most
// half of it is in line (a larger one stays as it was stored)
const THRESHOLD = 2048;

const say = (...args) => console.error(...args);
/** The first line of an error's message, at most 200 characters. */
const brief = (err) => String(err && err.message).split('\n')[0].slice(0, 200);
const streamOf = (key) => `sessions:${key}`;
const KEYS = Array.from({ length: SESSIONS }, (_, i) => sessionKey(i + 1));
const ALL_KEYS = KEYS.concat(CHURN_KEYS);
const STREAM_END = 'hx.stream_end';
const isEnd = (event) => !!event && event.type === 'CUSTOM' && event.name === STREAM_END;
/** A JSON value for messages, cut short. */
const show = (v) => {
  const s = canonical(v);
  if (s === undefined) return 'absent';
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
};

// ---------------------------------------------------------------------
// What the writers reported
// ---------------------------------------------------------------------

const journal = new Map(); // id -> { session, outcome, group, churn, inserted, landed }
const groups = new Map();  // group -> ids of the writes one transaction made
const figures = {
  acked: 0, doubt: 0, landed: 0, absent: 0, aborted: 0, failed: 0, inserts: 0,
  checks: 0, passed: 0, failedChecks: 0,
  // the layout as the checks found it: rows in pieces (most at a check),
  // segments of the largest, dropped documents seen, documents numbered
  chunkedRows: 0, maxSegments: 0, droppedSeen: new Set(), docsNumbered: 0, collected: 0, leftByConflicts: 0,
};
let rejections = []; // statements rejected with an ERROR since the last check
let started = 0;     // writers that have reported a write

function record(msg) {
  const rec = {
    session: msg.session, outcome: msg.outcome, group: msg.group,
    churn: !!msg.churn, inserted: !!msg.inserted, landed: undefined, step: !!msg.step,
  };
  journal.set(msg.id, rec);
  if (msg.group) {
    if (!groups.has(msg.group)) groups.set(msg.group, []);
    groups.get(msg.group).push(msg.id);
  }
  if (msg.outcome === 'ack') {
    figures.acked++;
    if (rec.churn && rec.inserted) figures.inserts++;
  } else if (msg.outcome === 'doubt') {
    figures.doubt++;
  } else if (msg.outcome === 'aborted') {
    figures.aborted++;
  } else {
    figures.failed++;
    rejections.push(`${msg.id} on ${msg.session}: ${msg.detail}`);
  }
}

// ---------------------------------------------------------------------
// Writers
// ---------------------------------------------------------------------

const writers = [];
let onStarted = null;

function startWriters() {
  for (let w = 1; w <= WRITERS; w++) {
    const child = fork(path.join(__dirname, 'writer.js'), [String(w), String(SESSIONS), String(SEED)], {
      stdio: ['ignore', 2, 2, 'ipc'], // stdout is the protocol's: writers print to stderr
    });
    const writer = { w, child, waiting: null, stats: null, exited: false, wrote: false };
    child.on('message', (msg) => {
      if (msg.type === 'write' || msg.type === 'rejected') {
        if (msg.type === 'write') record(msg);
        else rejections.push(`writer ${w}: ${msg.detail}`);
        if (!writer.wrote) {
          writer.wrote = true;
          if (++started === WRITERS && onStarted) onStarted();
        }
      } else if (msg.type === 'paused' || msg.type === 'stopped') {
        writer.stats = msg.stats;
        if (writer.waiting) writer.waiting();
      }
    });
    child.on('exit', (code) => {
      writer.exited = true;
      if (!stopping) abort(`writer ${w} exited (${code})`);
    });
    writers.push(writer);
  }
}

/** Send cmd to every writer; resolve when each has answered. */
function tellWriters(cmd) {
  return Promise.all(writers.map((writer) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`writer ${writer.w} did not answer ${cmd}`)), PATIENCE_MS);
    writer.waiting = () => { clearTimeout(timer); writer.waiting = null; resolve(); };
    writer.child.send({ cmd });
  })));
}

function resumeWriters() {
  for (const writer of writers) writer.child.send({ cmd: 'resume' });
}

// ---------------------------------------------------------------------
// Followers
// ---------------------------------------------------------------------

const followers = [];

async function startFollowers() {
  for (const key of FOLLOWED) {
    const f = {
      key,
      stream: new HxStream({
        pg: { application_name: `hx-crash-follower-${key}` },
        table: 'sessions',
        key,
        pollInterval: 250,
        reconnect: { min: 50, max: 500 },
      }),
      last: null,          // seq of the last event handed out
      digests: new Map(),  // seq -> digest of the state after it (not yet compared)
      events: 0, synthetic: 0, ends: 0, resyncs: 0, errors: 0,
      violations: [],
    };
    f.stream.on('event', (event, state) => {
      const meta = event.metadata || {};
      const seq = meta.seq;
      if (meta.stream !== streamOf(key)) f.violations.push(`event of stream ${meta.stream}`);
      if (meta.synthetic) {
        f.synthetic++;
        if (f.last !== null && seq < f.last) f.violations.push(`synthetic snapshot went back from ${f.last} to ${seq}`);
        if (f.last !== null && seq > f.last) f.violations.push(`resync skipped seq ${f.last + 1} to ${seq}`);
      } else {
        if (seq !== f.last + 1) {
          f.violations.push(seq <= f.last ? `seq ${seq} seen again after ${f.last}` : `seq ${f.last + 1} to ${seq - 1} never seen`);
        }
        f.events++;
        if (isEnd(event)) f.ends++;
      }
      f.last = seq;
      f.digests.set(seq, digest(state));
    });
    f.stream.on('resync', () => { f.resyncs++; });
    f.stream.on('error', () => { f.errors++; });
    await f.stream.start();
    followers.push(f);
  }
}

// ---------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------

// per stream, the seq and state the last check verified
const bases = new Map(ALL_KEYS.map((k) => [streamOf(k), { seq: 0, state: null }]));

async function connect() {
  const deadline = Date.now() + PATIENCE_MS;
  for (;;) {
    const db = new pg.Client({ application_name: 'hx-crash-checker' });
    db.on('error', () => {});
    try {
      await db.connect();
      return db;
    } catch (err) {
      db.end().catch(() => {});
      if (Date.now() > deadline) throw err;
      await sleep(200);
    }
  }
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Settle an in-doubt write at the first check after its doubt. */
function settle(rec, present, id, bad) {
  if (rec.landed === undefined) {
    rec.landed = present;
    if (present) figures.landed++;
    else figures.absent++;
  } else if (rec.landed && !present) {
    bad.push(`${id} (in doubt) on ${rec.session}, present at an earlier check, lost`);
  }
}

/** The merged sessions: every item once, where its writer put it, and nothing else. */
function checkWrites(rows) {
  const bad = [];
  const seen = new Set();
  for (const key of KEYS) {
    const state = rows.get(key);
    if (state === undefined) {
      bad.push(`session ${key} is gone`);
      continue;
    }
    const items = Array.isArray(state.items) ? state.items : [];
    for (const id of items) {
      const rec = journal.get(id);
      if (seen.has(id)) bad.push(`${id} twice (again in ${key})`);
      seen.add(id);
      if (!rec || rec.churn) bad.push(`${JSON.stringify(id)} in ${key}: no writer reported it`);
      else if (rec.session !== key) bad.push(`${id} in ${key}, written to ${rec.session}`);
      else if (rec.outcome === 'failed') bad.push(`${id} in ${key}, but its UPDATE failed`);
      else if (rec.outcome === 'aborted') bad.push(`${id} in ${key}, but it was rolled back`);
      else if (rec.outcome === 'doubt' && rec.landed === false) bad.push(`${id} in ${key}, absent at an earlier check`);
    }
  }
  for (const [id, rec] of journal) {
    if (rec.churn) continue;
    if (rec.outcome === 'ack' && !seen.has(id)) bad.push(`${id} acknowledged on ${rec.session}, lost`);
    if (rec.outcome === 'doubt') settle(rec, seen.has(id), id, bad);
  }
  // the writes of one transaction land together or not at all
  for (const [group, ids] of groups) {
    const landed = ids.filter((id) => journal.get(id).outcome !== 'aborted').map((id) => seen.has(id));
    if (landed.some((x) => x !== landed[0])) {
      bad.push(`transaction ${group}: ${ids.filter((id) => seen.has(id)).join(', ') || 'none'} landed, of ${ids.join(', ')}`);
    }
  }
  return bad;
}

function checkRows(rows) {
  const bad = [];
  for (const key of KEYS) {
    const state = rows.get(key);
    if (state === undefined) continue; // the writes check says so
    const items = Array.isArray(state.items) ? state.items : [];
    const parsed = items.map(parseItem);
    if (parsed.some((p) => p === null)) {
      bad.push(`${key}: items that no writer writes`);
      continue;
    }
    const want = expectedState(parsed);
    for (const field of new Set([...Object.keys(want), ...Object.keys(state || {})])) {
      const got = state ? state[field] : undefined;
      if (canonical(got) !== canonical(want[field])) bad.push(`${key} /${field}: ${show(got)}, expected ${show(want[field])}`);
    }
  }
  return bad;
}

/** The churn sessions' logs against the inserts the writers reported. */
async function checkChurn(db, rows) {
  const bad = [];
  const seen = new Set();
  const { rows: events } = await db.query(
    'SELECT stream, seq::int AS seq, event FROM hx_event WHERE stream = ANY($1) ORDER BY stream, seq',
    [CHURN_KEYS.map(streamOf)]);
  for (const key of CHURN_KEYS) {
    const stream = streamOf(key);
    let ended = null;  // null before seq 1, then whether the stream has ended
    let state = null;
    for (const { seq, event } of events.filter((e) => e.stream === stream)) {
      if (event.type === 'STATE_SNAPSHOT') {
        if (ended === false) bad.push(`${stream} seq ${seq}: a snapshot while the row is there`);
        ended = false;
        state = event.snapshot;
        if (seq === 1) {
          if (canonical(state) !== '{}') bad.push(`${stream} seq 1: ${show(state)}, not the inserted {}`);
          continue;
        }
        const id = state && state.gen;
        const rec = journal.get(id);
        if (seen.has(id)) bad.push(`${stream} seq ${seq}: the insert ${show(id)} again`);
        seen.add(id);
        if (!rec || !rec.churn) bad.push(`${stream} seq ${seq}: ${show(state)}, an insert no writer reported`);
        else if (rec.session !== key) bad.push(`${stream} seq ${seq}: ${id}, inserted into ${rec.session}`);
        else if (rec.outcome === 'failed' || rec.outcome === 'aborted') bad.push(`${stream} seq ${seq}: ${id}, which did not commit`);
        else if (rec.outcome === 'ack' && !rec.inserted) bad.push(`${stream} seq ${seq}: ${id}, whose INSERT inserted nothing`);
        else if (rec.outcome === 'doubt' && rec.landed === false) bad.push(`${stream} seq ${seq}: ${id}, absent at an earlier check`);
      } else if (isEnd(event)) {
        if (ended !== false) bad.push(`${stream} seq ${seq}: hx.stream_end of no row`);
        if (!event.value || event.value.reason !== 'deleted') bad.push(`${stream} seq ${seq}: ends for ${show(event.value)}`);
        ended = true;
        state = null;
      } else {
        bad.push(`${stream} seq ${seq}: a ${event.type} event (churn rows are only deleted and inserted)`);
      }
    }
    const row = rows.get(key);
    if (ended === true && row !== undefined) bad.push(`${stream} has ended, but the row is there: ${show(row)}`);
    if (ended === false && row === undefined) bad.push(`${stream} has not ended, but the row is gone`);
    if (ended === false && row !== undefined && canonical(row) !== canonical(state)) {
      bad.push(`${key}: ${show(row)}, the last snapshot ${show(state)}`);
    }
  }
  for (const [id, rec] of journal) {
    if (!rec.churn) continue;
    if (rec.outcome === 'ack' && rec.inserted && !seen.has(id)) bad.push(`${id} inserted into ${rec.session}, acknowledged, no snapshot`);
    if (rec.outcome === 'doubt') settle(rec, seen.has(id), id, bad);
  }
  return bad;
}

async function checkSeq(db, rows) {
  const bad = [];
  const { rows: stats } = await db.query(`
    SELECT stream, count(*)::int AS n, min(seq)::int AS lo, max(seq)::int AS hi,
           count(DISTINCT seq)::int AS nd,
           count(*) FILTER (WHERE type = 'STATE_SNAPSHOT')::int AS snapshots,
           count(*) FILTER (WHERE type = 'STATE_DELTA')::int AS deltas,
           count(*) FILTER (WHERE seq = 1 AND type = 'STATE_SNAPSHOT')::int AS first,
           count(*) FILTER (WHERE (event->'metadata'->>'seq')::bigint IS DISTINCT FROM seq
                               OR event->'metadata'->>'stream' IS DISTINCT FROM stream
                               OR event->>'type' IS DISTINCT FROM type)::int AS inconsistent
      FROM hx_event GROUP BY stream`);
  const byStream = new Map(stats.map((r) => [r.stream, r]));
  const known = new Set(ALL_KEYS.map(streamOf));
  for (const s of byStream.keys()) if (!known.has(s)) bad.push(`unknown stream ${s}`);
  const snaps = new Map((await db.query(`
    SELECT k AS key, h.seq::int AS seq,
           h.state IS NOT DISTINCT FROM (SELECT s.state FROM sessions s WHERE s.session_id = k) AS same
      FROM unnest($1::text[]) AS k, hx_stream_snapshot('sessions', k) AS h`, [ALL_KEYS])).rows
    .map((r) => [r.key, r]));
  const last = new Map();
  for (const key of ALL_KEYS) {
    const r = byStream.get(streamOf(key));
    if (!r) {
      bad.push(`${streamOf(key)}: no events`);
      continue;
    }
    if (r.lo !== 1 || r.hi !== r.n || r.nd !== r.n) bad.push(`${r.stream}: ${r.n} events, seq ${r.lo}..${r.hi}, ${r.nd} distinct`);
    if (r.first !== 1) bad.push(`${r.stream}: seq 1 is not a STATE_SNAPSHOT`);
    if (r.inconsistent !== 0) bad.push(`${r.stream}: ${r.inconsistent} events whose metadata or type disagree with their row`);
    if (!isChurn(key)) {
      const state = rows.get(key);
      const items = state && Array.isArray(state.items) ? state.items.length : 0;
      if (r.snapshots !== 1) bad.push(`${r.stream}: ${r.snapshots} snapshots`);
      if (r.deltas !== r.n - 1) bad.push(`${r.stream}: ${r.n - r.deltas - r.snapshots} events neither snapshot nor delta`);
      // one delta per write, but one for all the writes of a promoted step
      const stepsIn = new Map();
      let deltas = 0;
      for (const id of (state && Array.isArray(state.items) ? state.items : [])) {
        const rec = journal.get(id);
        if (rec && rec.step) stepsIn.set(rec.group, (stepsIn.get(rec.group) || 0) + 1);
        else deltas++;
      }
      deltas += stepsIn.size;
      if (r.deltas !== deltas) {
        bad.push(`${r.stream}: ${r.deltas} deltas for ${items} items (${stepsIn.size} of them steps): ${deltas} expected`);
      }
    }
    const snap = snaps.get(key);
    if (!snap || snap.seq !== r.hi || snap.same !== true) {
      bad.push(`${r.stream}: hx_stream_snapshot gives seq ${snap && snap.seq} (log ${r.hi}), state ${snap && snap.same ? 'equal' : 'not equal'}`);
    }
    last.set(key, r.hi);
  }
  return { bad, last };
}

async function replaySql(db, from) {
  const param = JSON.stringify([...from].map(([stream, b]) => ({ stream, seq: b.seq, state: b.state })));
  // an error (a delta that does not apply) must not end the check's snapshot
  await db.query('SAVEPOINT replay');
  try {
    const { rows } = await db.query(`
      WITH base AS (
        SELECT * FROM jsonb_to_recordset($1::jsonb) AS b(stream text, seq bigint, state jsonb)
      ), ev AS (
        SELECT b.stream, b.seq, jsonb_build_object('type', 'STATE_SNAPSHOT', 'snapshot', b.state) AS event
          FROM base b WHERE b.seq > 0
        UNION ALL
        SELECT e.stream, e.seq, e.event FROM hx_event e JOIN base b USING (stream) WHERE e.seq > b.seq
      ), replayed AS (
        SELECT stream, crash_replay(event ORDER BY seq) AS state FROM ev GROUP BY stream
      )
      SELECT b.stream FROM base b
        LEFT JOIN replayed r USING (stream)
        LEFT JOIN sessions s ON 'sessions:' || s.session_id = b.stream
       WHERE r.state IS DISTINCT FROM s.state ORDER BY 1`, [param]);
    await db.query('RELEASE SAVEPOINT replay');
    return rows.map((r) => `${r.stream}: the replay with hx_patch differs from the row`);
  } catch (err) {
    await db.query('ROLLBACK TO SAVEPOINT replay');
    return [`the replay with hx_patch failed: ${brief(err)}`];
  }
}

/** The state after event, as a client applies it (our copy: mutated). */
function applyTo(state, event) {
  if (event.type === 'STATE_SNAPSHOT') return event.snapshot === undefined ? null : event.snapshot;
  if (event.type === 'STATE_DELTA') return applyPatch(state, event.delta, true, true).newDocument;
  return isEnd(event) ? null : state;
}

async function replayNode(db, rows, from) {
  const bad = [];
  const compared = new Map(); // follower key -> seqs compared
  for (const key of ALL_KEYS) {
    const stream = streamOf(key);
    const rowState = rows.has(key) ? rows.get(key) : null;
    const base = from.get(stream);
    let state = base.state;
    let seq = base.seq;
    const f = followers.find((x) => x.key === key);
    let failed = null;
    for (;;) {
      const { rows: page } = await db.query(
        'SELECT seq::int AS seq, event FROM hx_event WHERE stream = $1 AND seq > $2 ORDER BY seq LIMIT $3',
        [stream, seq, PAGE]);
      for (const { seq: s, event } of page) {
        if (s !== seq + 1) {
          failed = `${stream}: the log goes from seq ${seq} to ${s}`;
          break;
        }
        try {
          state = applyTo(state, event);
        } catch (err) {
          failed = `${stream}: seq ${s} does not apply: ${brief(err)}`;
          break;
        }
        seq = s;
        if (f && f.digests.has(s)) {
          if (f.digests.get(s) !== digest(state)) bad.push(`follower of ${key}: its state at seq ${s} differs from the replay's`);
          f.digests.delete(s);
          compared.set(key, (compared.get(key) || 0) + 1);
        }
      }
      if (failed || page.length < PAGE) break;
    }
    if (failed) bad.push(failed);
    else if (canonical(state) !== canonical(rowState)) bad.push(`${stream}: the replay with fast-json-patch differs from the row`);
  }
  return { bad, compared };
}

/**
 * How the states are stored (run in the check's snapshot, as a superuser:
 * hx_doc and hx_chunk grant nothing to anyone else).
 */
async function checkLayout(db) {
  const bad = [];
  await db.query('SAVEPOINT layout');
  try {
    const { rows: [col] } = await db.query(`
      SELECT format_type(atttypid, atttypmod) AS type, attnum FROM pg_attribute
       WHERE attrelid = 'sessions'::regclass AND attname = 'state'`);
    if (LAYOUT === 'jsonb') {
      if (col.type !== 'jsonb') bad.push(`the state column is ${col.type}, not jsonb`);
      const { rows: [d] } = await db.query('SELECT count(*)::int AS n FROM hx_doc');
      if (d.n !== 0) bad.push(`hx_doc holds ${d.n} documents, with no hxdoc column`);
      await db.query('RELEASE SAVEPOINT layout');
      return bad;
    }
    if (col.type !== 'hxdoc') bad.push(`the state column is ${col.type}, not hxdoc`);
    // each row's value as stored (reading it whole: a segment missing is an error)
    const { rows } = await db.query(`
      SELECT s.session_id AS key, i.format, i.doc::text AS doc, i.gen::text AS gen,
             i.segments, i.json_bytes::int AS bytes
        FROM sessions s, hx_doc_info(s.state) i ORDER BY s.session_id`);
    const { rows: docs } = await db.query(`
      SELECT doc::text AS doc, dropped, rel = 'sessions'::regclass AS ours, att FROM hx_doc`);
    const byDoc = new Map(docs.map((d) => [d.doc, d]));
    const held = new Map();
    let chunked = 0;
    for (const r of rows) {
      if (r.format === 'chunked') {
        chunked++;
        figures.maxSegments = Math.max(figures.maxSegments, r.segments);
        const d = byDoc.get(r.doc);
        if (!d) bad.push(`${r.key}: document ${r.doc} has no row in hx_doc`);
        else if (!d.ours || d.att !== col.attnum) bad.push(`${r.key}: document ${r.doc} belongs to another column`);
        else if (d.dropped) bad.push(`${r.key}: its document ${r.doc} is marked dropped`);
        if (held.has(r.doc)) bad.push(`${r.key} and ${held.get(r.doc)} hold one document, ${r.doc}`);
        held.set(r.doc, r.key);
        if (r.bytes <= THRESHOLD / 2) bad.push(`${r.key}: ${r.bytes} bytes, in pieces`);
      } else if (r.bytes > THRESHOLD) {
        bad.push(`${r.key}: ${r.bytes} bytes, in line`);
      }
    }
    figures.chunkedRows = Math.max(figures.chunkedRows, chunked);
    // A document held by no row and not dropped is one an INSERT ... ON
    // CONFLICT DO NOTHING of a churn row left behind: hx_store stored its
    // state before the conflict was found, and nothing deletes it but
    // hx_store_gc.  Exactly one per committed insert that inserted nothing
    // (and at most one per insert in doubt); any other is a leak.
    let unheld = 0;
    for (const d of docs) {
      if (d.dropped) figures.droppedSeen.add(d.doc);
      else if (d.ours && !held.has(d.doc)) unheld++;
    }
    let conflicted = 0;
    let doubtful = 0;
    for (const rec of journal.values()) {
      if (!rec.churn) continue;
      if (rec.outcome === 'ack' && !rec.inserted) conflicted++;
      if (rec.outcome === 'doubt') doubtful++;
    }
    figures.leftByConflicts = unheld;
    if (unheld < conflicted || unheld > conflicted + doubtful) {
      bad.push(`${unheld} documents held by no row and not dropped; ${conflicted} churn inserts (and ${doubtful} in doubt) inserted nothing`);
    }
    // nothing of a write that did not commit is seen: no segment without
    // its document, none of a row's document newer than the row's value
    const { rows: [seg] } = await db.query(`
      SELECT (SELECT count(*)::int FROM hx_chunk c WHERE NOT EXISTS (SELECT FROM hx_doc d WHERE d.doc = c.doc)) AS orphans,
             (SELECT count(*)::int FROM sessions s, hx_doc_info(s.state) i, hx_chunk c
               WHERE i.format = 'chunked' AND c.doc = i.doc AND c.gen > i.gen) AS newer,
             (SELECT last_value::int FROM hx_doc_seq) AS numbered`);
    if (seg.orphans) bad.push(`${seg.orphans} segments without their document`);
    if (seg.newer) bad.push(`${seg.newer} segments newer than the value of the row that holds their document`);
    figures.docsNumbered = seg.numbered;
    await db.query('RELEASE SAVEPOINT layout');
  } catch (err) {
    await db.query('ROLLBACK TO SAVEPOINT layout');
    bad.push(`reading the stored states failed: ${brief(err)}`);
  }
  return bad;
}

/** Final: each stream's state rebuilt by hx_stream_state_at at its last seq is its row's. */
async function checkStateAt(db) {
  await db.query('SAVEPOINT state_at');
  try {
    const { rows } = await db.query(`
      SELECT h.stream FROM (SELECT stream, max(seq) AS seq FROM hx_event GROUP BY stream) h
        LEFT JOIN sessions s ON 'sessions:' || s.session_id = h.stream
       WHERE hx_stream_state_at(h.stream, h.seq) IS DISTINCT FROM coalesce(s.state::jsonb, 'null')
       ORDER BY 1`);
    await db.query('RELEASE SAVEPOINT state_at');
    return rows.map((r) => `${r.stream}: hx_stream_state_at at its last seq differs from the row`);
  } catch (err) {
    await db.query('ROLLBACK TO SAVEPOINT state_at');
    return [`hx_stream_state_at failed: ${brief(err)}`];
  }
}

/** Final, with hxdoc: the run stored states in pieces, and deleted documents. */
async function checkPieces(db) {
  if (LAYOUT !== 'hxdoc') return [];
  const bad = [];
  const { rows } = await db.query(`
    SELECT s.session_id AS key, i.format, i.segments FROM sessions s, hx_doc_info(s.state) i`);
  const info = new Map(rows.map((r) => [r.key, r]));
  for (const key of FOLLOWED.slice(0, 2)) {
    const r = info.get(key);
    if (!r || r.format !== 'chunked' || r.segments < 2) bad.push(`${key}: ${r ? `${r.format}, ${r.segments} segments` : 'gone'}, not in pieces`);
  }
  for (const key of CHURN_KEYS) {
    const r = info.get(key);
    if (r && r.format !== 'chunked') bad.push(`${key}: its state of 40 notes is ${r.format}`);
  }
  const { rows: [d] } = await db.query('SELECT count(*)::int AS n, (SELECT last_value::int FROM hx_doc_seq) AS numbered FROM hx_doc');
  if (!(d.numbered > d.n)) bad.push(`${d.numbered} documents numbered, ${d.n} left: none was deleted`);
  return bad;
}

/**
 * After the final check, with the writers stopped: hx_store_gc, then one
 * document per row in pieces, and every state as the final check read it.
 */
async function checkGc(rowsBefore) {
  const db = await connect();
  const bad = [];
  try {
    const { rows: [g] } = await db.query("SELECT hx_store_gc('sessions')::int AS n");
    figures.collected = g.n;
    const rows = new Map((await db.query('SELECT session_id, state::jsonb AS state FROM sessions')).rows
      .map((r) => [r.session_id, r.state]));
    for (const [key, state] of rowsBefore) {
      if (canonical(rows.get(key)) !== canonical(state)) bad.push(`${key}: its state changed across hx_store_gc`);
    }
    if (rows.size !== rowsBefore.size) bad.push(`${rowsBefore.size} rows before hx_store_gc, ${rows.size} after`);
    if (LAYOUT === 'hxdoc') {
      const { rows: [c] } = await db.query(`
        SELECT (SELECT count(*)::int FROM sessions s, hx_doc_info(s.state) i WHERE i.format = 'chunked') AS chunked,
               (SELECT count(*)::int FROM hx_doc) AS docs,
               (SELECT count(*)::int FROM hx_doc WHERE dropped) AS dropped`);
      if (c.docs !== c.chunked || c.dropped !== 0) {
        bad.push(`after hx_store_gc: ${c.docs} documents (${c.dropped} dropped) for ${c.chunked} rows in pieces`);
      }
    }
  } catch (err) {
    bad.push(`hx_store_gc or what followed failed: ${brief(err)}`);
  } finally {
    await db.end().catch(() => {});
  }
  return bad;
}

async function checkFollowers(rows, last) {
  const bad = [];
  for (const f of followers) {
    const target = last.get(f.key);
    const deadline = Date.now() + PATIENCE_MS;
    while (f.stream.seq < target && Date.now() < deadline) await sleep(20);
    if (f.stream.seq !== target) {
      bad.push(`follower of ${f.key}: at seq ${f.stream.seq}, the log at ${target}`);
      continue;
    }
    const row = rows.has(f.key) ? rows.get(f.key) : null;
    if (canonical(f.stream.state) !== canonical(row)) bad.push(`follower of ${f.key}: its state differs from the row`);
    bad.push(...f.violations.map((v) => `follower of ${f.key}: ${v}`));
    f.violations = [];
  }
  return bad;
}

let lastRows = null; // the rows the last check verified

/** One check of everything; from seq 1 when full.  Returns [passed, failed]. */
async function check(label, full) {
  await tellWriters('pause');
  const results = [];
  const add = (name, bad) => results.push({ name, bad });
  const db = await connect();
  try {
    // the followers catch up first (outside the snapshot: they need the
    // log as it is now, and nothing writes while the writers are paused)
    const { rows: tops } = await db.query(
      'SELECT stream, max(seq)::int AS seq FROM hx_event WHERE stream = ANY($1) GROUP BY stream',
      [followers.map((f) => streamOf(f.key))]);
    const deadline = Date.now() + PATIENCE_MS;
    for (const t of tops) {
      const f = followers.find((x) => streamOf(x.key) === t.stream);
      while (f.stream.seq < t.seq && Date.now() < deadline) await sleep(20);
    }
    await db.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const rows = new Map((await db.query('SELECT session_id, state::jsonb AS state FROM sessions ORDER BY session_id')).rows
      .map((r) => [r.session_id, r.state]));
    add('writes', checkWrites(rows));
    add('errors', rejections.map((r) => `rejected: ${r}`));
    rejections = [];
    add('rows', checkRows(rows));
    add('churn', await checkChurn(db, rows));
    const { bad: seqBad, last } = await checkSeq(db, rows);
    add('seq', seqBad);
    const from = full ? new Map(ALL_KEYS.map((k) => [streamOf(k), { seq: 0, state: null }])) : bases;
    add('replay-sql', await replaySql(db, from));
    const { bad: nodeBad, compared } = await replayNode(db, rows, from);
    add('replay-node', nodeBad);
    add('follower', await checkFollowers(rows, last));
    add('layout', await checkLayout(db));
    if (full) {
      add('state-at', await checkStateAt(db));
      add('pieces', await checkPieces(db));
    }
    await db.query('COMMIT');
    lastRows = rows;
    for (const key of ALL_KEYS) {
      bases.set(streamOf(key), { seq: last.get(key) || 0, state: rows.has(key) ? rows.get(key) : null });
    }
    const passed = results.filter((r) => r.bad.length === 0).length;
    const failed = results.length - passed;
    figures.checks += results.length;
    figures.passed += passed;
    figures.failedChecks += failed;
    const seen = followers.map((f) => `${f.key}@${f.stream.seq}${compared.has(f.key) ? ` (${compared.get(f.key)} states compared)` : ''}`).join(', ');
    say(`-- ${label}: ${figures.acked} acknowledged, ${figures.doubt} in doubt (${figures.landed} landed, ${figures.absent} not), ` +
      `${figures.failed} rejected, ${figures.aborted} aborted; followers ${seen}; checks ${passed}/${results.length} passed`);
    for (const r of results) {
      for (const line of r.bad.slice(0, 20)) say(`   FAIL ${r.name}: ${line}`);
      if (r.bad.length > 20) say(`   FAIL ${r.name}: ... and ${r.bad.length - 20} more`);
    }
    return [passed, failed];
  } finally {
    await db.end().catch(() => {});
  }
}

// ---------------------------------------------------------------------
// The protocol
// ---------------------------------------------------------------------

let stopping = false;

function reply(line) {
  process.stdout.write(`${line}\n`);
}

function abort(why) {
  say(`crash load: ${why}`);
  reply(`abort ${String(why).split('\n')[0]}`);
  for (const writer of writers) if (!writer.exited) writer.child.kill('SIGKILL');
  process.exit(1);
}

async function finish() {
  let [passed, failed] = await check('final check (every log replayed from seq 1)', true);
  stopping = true;
  await tellWriters('stop');
  for (const f of followers) await f.stream.stop();
  const gcBad = await checkGc(lastRows);
  figures.checks++;
  if (gcBad.length === 0) {
    passed++;
    figures.passed++;
  } else {
    failed++;
    figures.failedChecks++;
    for (const line of gcBad.slice(0, 20)) say(`   FAIL gc: ${line}`);
  }
  const w = writers.map((x) => x.stats || {});
  const sum = (k) => w.reduce((a, s) => a + (s[k] || 0), 0);
  say('');
  say(`writes: ${figures.acked} acknowledged commits, ${figures.doubt} in doubt ` +
    `(${figures.landed} landed, ${figures.absent} did not), ${figures.failed} rejected with an ERROR, ` +
    `${figures.aborted} certainly not committed (rolled back to a savepoint, or the connection died before COMMIT)`);
  say(`writers: ${WRITERS}, ${sum('transactions')} two-write transactions (${sum('rollbacks')} with a rollback to a savepoint), ` +
    `${sum('churns')} deletes or inserts of churn sessions (${figures.inserts} acknowledged inserts), ` +
    `${sum('connects')} connections, ${sum('connectFailures')} failed connection attempts; HX_SEED=${SEED}`);
  say(`steps: ${sum('steps')} promoted (${sum('stepCalls')} staged calls); ${sum('stepsAcrossLoss')} lost their connection ` +
    `with calls staged and acknowledged, and promoted them after the restart without staging them again; ` +
    `${sum('stagesRetried')} stages and ${sum('promotesRetried')} promotes in doubt run again`);
  for (const f of followers) {
    const s = f.stream.stats;
    say(`follower ${f.key}: ${f.events} events (${f.ends} stream ends) and ${f.synthetic} synthetic snapshots to seq ${f.stream.seq}, ` +
      `${s.notifications} notifications (${s.references} references), ${s.disconnects} disconnects, ` +
      `${s.reconnects} reconnects, ${f.resyncs} resyncs`);
  }
  if (LAYOUT === 'hxdoc') {
    say(`layout: the state as hxdoc; up to ${figures.chunkedRows} of ${ALL_KEYS.length} rows in pieces at a check ` +
      `(the largest in ${figures.maxSegments} segments), ${figures.droppedSeen.size} dropped documents seen at checks, ` +
      `${figures.docsNumbered} documents numbered, ${figures.leftByConflicts} left by INSERT ... ON CONFLICT at the last check, ` +
      `${figures.collected} collected by hx_store_gc at the end`);
  } else {
    say(`layout: the state as jsonb; hx_store_gc collected ${figures.collected}`);
  }
  say(`checker: ${figures.passed} of ${figures.checks} checks passed`);
  return [passed, failed];
}

async function main() {
  say(`crash load: ${WRITERS} writers on ${SESSIONS} sessions and ${CHURN_KEYS.length} churn sessions, ` +
    `followers on ${FOLLOWED.join(', ')}; HX_SEED=${SEED}`);
  await startFollowers();
  const going = new Promise((resolve) => { onStarted = resolve; });
  startWriters();
  await going; // under load from the first kill on
  reply('ready');
  const rl = readline.createInterface({ input: process.stdin });
  let queue = Promise.resolve();
  rl.on('line', (line) => {
    queue = queue.then(async () => {
      const [cmd, ...rest] = line.trim().split(/\s+/);
      if (cmd === 'check') {
        const [p, f] = await check(rest.join(' '), false);
        reply(`checked ${p} ${f}`);
      } else if (cmd === 'resume') {
        resumeWriters();
        reply('resumed');
      } else if (cmd === 'final') {
        const [p, f] = await finish();
        reply(`final ${p} ${f}`);
        process.exit(0);
      } else {
        reply(`unknown ${cmd}`);
      }
    }).catch((err) => abort(err.stack || String(err)));
  });
  rl.on('close', () => {
    if (!stopping) abort('stdin closed');
  });
}

main().catch((err) => abort(err.stack || String(err)));
