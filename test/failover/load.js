'use strict';
// test/failover/load.js: the client side of test/failover/run.  It writes
// to the sessions table through a multi-host connection string while the
// servers fail over, follows every session's stream, and at the end checks
// what survived on the new primary.
//
//   HX_CONNINFO='host=127.0.0.1,127.0.0.1 port=5501,5502 dbname=hxfail user=postgres target_session_attrs=read-write' \
//   HX_DIR=/tmp/dir HX_SESSIONS=f-1,f-2 HX_STANDBY=127.0.0.1:5502 node test/failover/load.js
//
// test/failover/run starts it and talks to it by signals: SIGUSR1 says "a
// failover has completed" (the epoch goes up by one), SIGUSR2 says "stop
// writing, then check".  It reports in $HX_DIR/progress.json (rewritten a
// few times a second) and, at the end, "<passed> <failed>" in
// $HX_DIR/load-result; its output is the figures and one line per check.
//
// The rules it checks:
//   - Writers (HX_WRITERS, 8): each write is one transaction, BEGIN; one
//     UPDATE ... hx_merge that appends a unique item to a random session's
//     /items and increments /count and /by_writer/w<k>; COMMIT.  A write
//     is acknowledged only when COMMIT has returned.  A write whose BEGIN or
//     UPDATE failed never reached COMMIT and cannot have committed
//     ("failed"); one whose COMMIT got an error or a dead connection is in
//     doubt.  After any error the writer drops its connection and
//     reconnects to whichever node is then the primary (./primary.js).
//   - On the new primary, every acknowledged item is present exactly once,
//     in the session it was written to; an in-doubt item at most once; a
//     failed or never-sent item not at all.  /count equals the number of
//     items, each /by_writer/w<k> the number of that writer's items, and
//     each session's log has exactly one STATE_DELTA per item (one event
//     per committed write, none for a rolled-back one).
//   - The follower (one connection, to whichever node is the primary)
//     reads hx_stream_snapshot for each session, then hx_stream_events by
//     seq, applying deltas with fast-json-patch; LISTEN only wakes it.
//     After each reconnect it first checks that the event it applied last
//     is still in the log, unchanged, at its seq.  PostgreSQL can show a
//     commit that a failover then loses: on the old primary, a commit
//     whose wait for the standby is cut short (the switchover's shutdown)
//     becomes visible, and the new primary never got it; its writer saw
//     COMMIT fail, so it is in doubt.  So an event the new primary lacks
//     must be such a write's, in doubt and absent from the new primary,
//     and the follower resyncs to the new primary's snapshot.  At the end
//     its state equals each row, its seq the log's last seq, and it applied
//     every seq after its snapshot exactly once (those of lost events
//     again, from the new primary).
//   - The repository's client, HxStream, follows each session too.  It
//     takes one fixed pg config; pg's "stream" option (a socket factory)
//     is the one way to point its reconnects at the current primary
//     without changing it: PrimarySocket below ignores the host and port
//     it is given and connects to whichever node is the primary.  At the
//     end each HxStream's state equals its row, and it handed out the
//     snapshot's seq and then every later seq exactly once; its only
//     resyncs are for events the new primary lacks (reason 'diverged',
//     checked as the follower's are).
//   - A backend opened on the standby before the first failover caches the
//     state machines (hx_next_phase), sees an edge the primary adds once
//     it is replayed, and after its node is promoted enforces the machine
//     on writes through the same backend.
//   - After the checks, a new write on the new primary is logged with the
//     next seq and reaches the follower and HxStream.
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { isDeepStrictEqual } = require('node:util');
const pg = require('pg');
const jsonpatch = require('fast-json-patch');
const { connectPrimary, parseConninfo } = require('./primary');
const { HxStream } = require('../../client');

const conninfo = parseConninfo(process.env.HX_CONNINFO || '');
const dir = process.env.HX_DIR;
const WRITERS = Number(process.env.HX_WRITERS || 8);
const SESSIONS = (process.env.HX_SESSIONS || 'f-1,f-2,f-3,f-4').split(',');
const STANDBY = process.env.HX_STANDBY || '';
if (!dir || !conninfo.host) {
  console.error('load.js: HX_DIR and HX_CONNINFO are required');
  process.exit(2);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const log = (...args) => console.log('load:', ...args);

// ---------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------

const results = { passed: 0, failed: 0 };
function check(ok, name, detail) {
  if (ok) {
    results.passed++;
    console.log(`  ok   ${name}`);
  } else {
    results.failed++;
    console.log(`  FAIL ${name}${detail ? `: ${detail}` : ''}`);
  }
  return ok;
}
const sample = (list, n = 5) => list.slice(0, n).join(', ') + (list.length > n ? `, ... (${list.length})` : '');

// ---------------------------------------------------------------------
// Writers
// ---------------------------------------------------------------------

const UPDATE_SQL = 'UPDATE sessions SET state = hx_merge(state, $1::jsonb) WHERE session_id = $2';

const items = new Map();                // item id -> {session, writer, status, warned}
const acksByEpoch = [0];
const errorCodes = new Map();           // "<step>:<code or message>" -> count
const stats = { sent: 0, acked: 0, indoubt: 0, failed: 0, ackedWithWarning: 0, reconnects: 0, noRow: 0 };
let epoch = 0;
let stopping = false;
const open = new Set();                 // writer connections, to cut at the end

function opsFor(w, id) {
  return JSON.stringify([
    { op: 'append', path: '/items', items: [id] },
    { op: 'increment', path: '/count', by: 1 },
    { op: 'increment', path: `/by_writer/w${w}`, by: 1 },
  ]);
}

async function openWriter(w) {
  const conn = { client: null, warning: null };
  const { client } = await connectPrimary(conninfo, {
    timeoutMs: 5000,
    config: { application_name: `hx-writer-${w}` },
    client: (c) => c.on('notice', (msg) => { conn.warning = msg.message; }),
  });
  conn.client = client;
  open.add(client);
  return conn;
}

async function runWriter(w) {
  let conn = null;
  let n = 0;
  while (!stopping) {
    if (!conn) {
      try {
        conn = await openWriter(w);
      } catch (err) {
        await sleep(100);
        continue;
      }
    }
    const id = `w${w}-${n++}`;
    const item = { session: SESSIONS[Math.floor(Math.random() * SESSIONS.length)], writer: w, status: 'sent' };
    items.set(id, item);
    stats.sent++;
    let step = 'begin';
    conn.warning = null;
    try {
      await conn.client.query('BEGIN');
      step = 'update';
      const r = await conn.client.query(UPDATE_SQL, [opsFor(w, id), item.session]);
      if (r.rowCount !== 1) {
        stats.noRow++;
        throw new Error(`UPDATE matched ${r.rowCount} rows`);
      }
      step = 'commit';
      await conn.client.query('COMMIT');
      item.status = 'acked';
      stats.acked++;
      acksByEpoch[epoch]++;
      if (conn.warning) {
        // e.g. a cancelled wait for synchronous replication: the client
        // was told "committed" all the same, so it counts as acknowledged
        item.warned = conn.warning;
        stats.ackedWithWarning++;
      }
    } catch (err) {
      item.status = step === 'commit' ? 'indoubt' : 'failed';
      stats[item.status]++;
      const key = `${step}:${err.code || err.message}`;
      errorCodes.set(key, (errorCodes.get(key) || 0) + 1);
      open.delete(conn.client);
      conn.client.end().catch(() => {});
      conn = null;
      stats.reconnects++;
    }
  }
  if (conn) {
    open.delete(conn.client);
    await conn.client.end().catch(() => {});
  }
}

// ---------------------------------------------------------------------
// The follower
// ---------------------------------------------------------------------

/** The items a STATE_DELTA appended (the writers' ids). */
function itemsOf(event) {
  const out = [];
  if (!event || event.type !== 'STATE_DELTA' || !Array.isArray(event.delta)) return out;
  for (const op of event.delta) {
    if (op.op !== 'add' || typeof op.path !== 'string' || !op.path.startsWith('/items')) continue;
    for (const v of Array.isArray(op.value) ? op.value : [op.value]) if (typeof v === 'string') out.push(v);
  }
  return out;
}

/**
 * The seqs applied, after a resync to a snapshot at seq: those above it
 * are dropped (the new primary's events come again), those up to it that
 * were never applied are counted as the snapshot's.
 */
function rebase(delivered, startSeq, seq) {
  const kept = delivered.filter((q) => q <= seq);
  for (let q = (kept.length ? kept[kept.length - 1] : startSeq) + 1; q <= seq; q++) kept.push(q);
  return kept;
}

const EVENTS_SQL = `
SELECT s.stream, e.seq, e.event
  FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS s(stream, after_seq, i)
 CROSS JOIN LATERAL hx_stream_events(s.stream, s.after_seq, $3) e
 ORDER BY s.i, e.seq`;
const PAGE = 1000;

class Follower {
  constructor(keys) {
    this.streams = new Map(keys.map((key) => [key, {
      key, stream: null, channel: null, seq: 0, state: null, last: null,
      startSeq: null, delivered: [], anomalies: [],
      shown: new Set(), // the items of the events it applied
    }]));
    this.client = null;
    this.done = false;
    this.wake = null;
    this.lastError = null;
    this.stats = { events: 0, notifications: 0, polls: 0, connects: 0, resyncs: 0, divergences: 0 };
    this.ports = [];
  }

  wakeUp() {
    if (this.wake) {
      const w = this.wake;
      this.wake = null;
      w();
    }
  }

  waitWake(ms) {
    return new Promise((resolve) => {
      const t = setTimeout(() => { this.wake = null; resolve(); }, ms);
      this.wake = () => { clearTimeout(t); resolve(); };
    });
  }

  drop() {
    const c = this.client;
    this.client = null;
    if (c) c.end().catch(() => {});
  }

  async connect() {
    const { client, port } = await connectPrimary(conninfo, {
      timeoutMs: 5000,
      config: { application_name: 'hx-follower' },
      client: (c) => {
        c.on('notification', () => { this.stats.notifications++; this.wakeUp(); });
        c.on('error', () => { if (this.client === c) this.drop(); this.wakeUp(); });
        c.on('end', () => { if (this.client === c) this.client = null; this.wakeUp(); });
      },
    });
    try {
      for (const st of this.streams.values()) {
        if (!st.stream) {
          const { rows } = await client.query(
            'SELECT stream, hx_stream_channel(stream) AS channel FROM hx_stream_snapshot($1::regclass, $2)',
            ['sessions', st.key]);
          st.stream = rows[0].stream;
          st.channel = rows[0].channel;
        }
        // LISTEN before reading, so that nothing committed after the read
        // goes unannounced (the poll would catch it anyway)
        await client.query(`LISTEN ${client.escapeIdentifier(st.channel)}`);
      }
      for (const st of this.streams.values()) {
        if (st.startSeq === null) {
          await this.resync(client, st, 'start');
        } else if (st.seq > 0) {
          // is what we applied last still there, unchanged, at its seq?
          const { rows } = await client.query(
            'SELECT seq, event FROM hx_stream_events($1, $2, 1)', [st.stream, st.seq - 1]);
          if (rows.length !== 1 || Number(rows[0].seq) !== st.seq || !isDeepStrictEqual(rows[0].event, st.last)) {
            // a commit it had shown is lost: resync, and remember what was lost
            this.stats.divergences++;
            await this.resync(client, st, 'diverged');
            st.delivered = rebase(st.delivered, st.startSeq, st.seq);
          }
        }
      }
    } catch (err) {
      client.end().catch(() => {});
      throw err;
    }
    this.client = client;
    this.stats.connects++;
    this.ports.push(port);
  }

  async resync(client, st, why) {
    const { rows } = await client.query(
      'SELECT seq, state FROM hx_stream_snapshot($1::regclass, $2)', ['sessions', st.key]);
    st.seq = Number(rows[0].seq);
    st.state = rows[0].state;
    const r = await client.query('SELECT seq, event FROM hx_stream_events($1, $2, 1)', [st.stream, st.seq - 1]);
    st.last = r.rows.length === 1 ? r.rows[0].event : null;
    if (why === 'start') {
      st.startSeq = st.seq;
    } else {
      this.stats.resyncs++;
      if (why !== 'diverged') st.anomalies.push(`resync at seq ${st.seq}`);
    }
  }

  apply(st, seq, event) {
    if (seq !== st.seq + 1) {
      st.anomalies.push(`log skipped from ${st.seq} to ${seq}`);
      return false;
    }
    if (event.type === 'STATE_SNAPSHOT') {
      st.state = event.snapshot;
    } else if (event.type === 'STATE_DELTA') {
      st.state = jsonpatch.applyPatch(st.state, event.delta, true, false).newDocument;
    } else if (event.type === 'CUSTOM' && event.name === 'hx.stream_end') {
      st.state = null;
    }
    if (!event.metadata || event.metadata.seq !== seq || event.metadata.stream !== st.stream) {
      st.anomalies.push(`event ${seq} carries metadata ${JSON.stringify(event.metadata)}`);
    }
    st.seq = seq;
    st.last = event;
    st.delivered.push(seq);
    for (const id of itemsOf(event)) st.shown.add(id);
    this.stats.events++;
    return true;
  }

  async catchUp() {
    const client = this.client;
    for (;;) {
      const list = [...this.streams.values()];
      const { rows } = await client.query(EVENTS_SQL, [list.map((s) => s.stream), list.map((s) => s.seq), PAGE]);
      this.stats.polls++;
      const perStream = new Map();
      for (const row of rows) {
        const st = list.find((s) => s.stream === row.stream);
        perStream.set(st, (perStream.get(st) || 0) + 1);
        if (Number(row.seq) <= st.seq) continue;
        let ok;
        try {
          ok = this.apply(st, Number(row.seq), row.event);
        } catch (err) {
          st.anomalies.push(`event ${row.seq} does not apply: ${err.message}`);
          ok = false;
        }
        if (!ok) {
          await this.resync(client, st, 'again');
          perStream.set(st, PAGE); // read again after the snapshot
        }
      }
      if (![...perStream.values()].some((n) => n >= PAGE)) return;
    }
  }

  async run() {
    while (!this.done) {
      try {
        if (!this.client) await this.connect();
        await this.catchUp();
      } catch (err) {
        this.lastError = err.message;
        this.drop();
      }
      if (this.done) break;
      await this.waitWake(this.client ? 250 : 100);
    }
    this.drop();
  }

  /** Resolves once every stream has reached its target seq, or the deadline passed. */
  async reach(targets, ms) {
    const deadline = Date.now() + ms;
    for (;;) {
      if ([...this.streams.values()].every((st) => st.seq >= (targets.get(st.key) || 0))) return true;
      if (Date.now() > deadline) return false;
      this.wakeUp();
      await sleep(50);
    }
  }
}

// ---------------------------------------------------------------------
// HxStream, pointed at the primary by its socket
// ---------------------------------------------------------------------

class PrimarySocket extends net.Socket {
  connect(port, host) {
    connectPrimary(conninfo, { timeoutMs: 5000 }).then(({ client, host: h, port: p }) => {
      client.end().catch(() => {});
      super.connect(p, h);
    }, (err) => this.destroy(err));
    return this;
  }
}

const hx = new Map();                   // key -> {stream, events, reasons, errors}

async function startHxStreams() {
  for (const key of SESSIONS) {
    const stream = new HxStream({
      pg: { user: conninfo.user, database: conninfo.dbname, stream: () => new PrimarySocket() },
      table: 'sessions',
      key,
      pollInterval: 500,
      reconnect: { min: 100, max: 1000 },
    });
    const rec = { stream, events: [], reasons: [], errors: 0 };
    stream.on('event', (event) => {
      rec.events.push({ seq: event.metadata.seq, synthetic: !!event.metadata.synthetic, items: itemsOf(event) });
    });
    stream.on('resync', (r) => { rec.reasons.push(r.reason); });
    stream.on('error', () => { rec.errors++; });
    hx.set(key, rec);
    await stream.start();
  }
}

async function hxReach(targets, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    if ([...hx].every(([key, rec]) => rec.stream.seq >= (targets.get(key) || 0))) return true;
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
}

// ---------------------------------------------------------------------
// A backend on the standby, across the promotion
// ---------------------------------------------------------------------

const standby = { client: null, before: null, lost: null, done: false };

async function standbyBefore(primary) {
  const [host, port] = STANDBY.split(':');
  const c = new pg.Client({
    host, port: Number(port), user: conninfo.user, database: conninfo.dbname, application_name: 'hx-standby-backend',
  });
  c.on('error', (err) => { standby.lost = err.message; });
  c.on('end', () => { standby.lost = standby.lost || 'connection ended'; });
  await c.connect();
  standby.client = c;
  const r0 = await c.query('SELECT pg_is_in_recovery() AS r, hx_next_phase($1, $2, $3) AS p', ['ticket', 'open', 'assign']);
  // the machines are cached in this backend now; the primary adds an edge
  await primary.query("INSERT INTO hx_transition VALUES ('ticket', 'assigned', 'escalate', 'escalated')");
  const deadline = Date.now() + 60000;
  for (;;) {
    const { rows } = await c.query(
      "SELECT count(*)::int AS n FROM hx_transition WHERE machine = 'ticket' AND event = 'escalate'");
    if (rows[0].n === 1) break;
    if (Date.now() > deadline) throw new Error('the new edge was not replayed on the standby');
    await sleep(50);
  }
  let p1;
  try {
    p1 = (await c.query('SELECT hx_next_phase($1, $2, $3) AS p', ['ticket', 'assigned', 'escalate'])).rows[0].p;
  } catch (err) {
    p1 = `${err.code}: ${err.message}`;
  }
  standby.before = { inRecovery: r0.rows[0].r, p0: r0.rows[0].p, p1 };
}

async function standbyAfter() {
  const c = standby.client;
  const out = {};
  try {
    out.inRecovery = (await c.query('SELECT pg_is_in_recovery() AS r')).rows[0].r;
    out.assign = (await c.query(
      "UPDATE tickets SET status = hx_next_phase('ticket', status, 'assign') WHERE id = 1 RETURNING status")).rows[0].status;
    out.escalate = (await c.query(
      "UPDATE tickets SET status = hx_next_phase('ticket', status, 'escalate') WHERE id = 1 RETURNING status")).rows[0].status;
    try {
      await c.query("UPDATE tickets SET status = 'open' WHERE id = 1");
      out.invalid = 'accepted';
    } catch (err) {
      out.invalid = err.code;
    }
  } catch (err) {
    out.error = `${err.code || ''} ${err.message}`.trim();
  }
  await c.end().catch(() => {});
  standby.done = true;
  return out;
}

// ---------------------------------------------------------------------
// Progress, signals
// ---------------------------------------------------------------------

const follower = new Follower(SESSIONS);
let ready = false;

function writeProgress() {
  const p = { ready, standbyDone: standby.done, epoch, ...stats, acksByEpoch, follower: follower.stats };
  const tmp = path.join(dir, 'progress.json.tmp');
  fs.writeFileSync(tmp, JSON.stringify(p));
  fs.renameSync(tmp, path.join(dir, 'progress.json'));
}

let afterPromise = null;
let stopResolve;
const stopped = new Promise((resolve) => { stopResolve = resolve; });
process.on('SIGUSR1', () => {
  epoch++;
  acksByEpoch[epoch] = 0;
  log(`failover ${epoch} reported; ${stats.acked} writes acknowledged so far`);
  if (epoch === 1 && standby.client) afterPromise = standbyAfter();
});
process.on('SIGUSR2', () => stopResolve());
process.on('SIGTERM', () => process.exit(1));

// ---------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------

async function main() {
  const progressTimer = setInterval(writeProgress, 200);

  // the follower first, so that its snapshot precedes every write
  const followerDone = follower.run();
  while (![...follower.streams.values()].every((st) => st.startSeq !== null)) {
    await sleep(50);
  }
  await startHxStreams();
  const setup = await connectPrimary(conninfo, { timeoutMs: 30000 });
  if (STANDBY) await standbyBefore(setup.client);
  await setup.client.end();

  const writers = [];
  for (let w = 1; w <= WRITERS; w++) writers.push(runWriter(w));
  ready = true;
  log(`${WRITERS} writers on ${SESSIONS.length} sessions; the follower on port ${follower.ports.join(',')}, ${hx.size} HxStreams`);

  await stopped;
  stopping = true;
  // a write still waiting after this long (a COMMIT that hangs) is cut
  // off, and so counted in doubt
  const cut = setTimeout(() => { for (const c of open) c.end().catch(() => {}); }, 30000);
  await Promise.all(writers);
  clearTimeout(cut);
  const after = afterPromise ? await afterPromise : null;
  log(`writers stopped: ${stats.sent} sent, ${stats.acked} acknowledged, ${stats.indoubt} in doubt, ` +
    `${stats.failed} failed before COMMIT, ${stats.ackedWithWarning} acknowledged with a warning`);
  log(`acknowledged per epoch (before failover 1, after 1, after 2): ${acksByEpoch.join(', ')}`);
  log(`writer errors: ${[...errorCodes].map(([k, n]) => `${k} x${n}`).join('; ') || 'none'}`);

  const { client: db, port } = await connectPrimary(conninfo, { timeoutMs: 30000 });
  log(`checking on the primary at port ${port}`);
  const rows = new Map((await db.query(
    'SELECT session_id, state::jsonb AS state FROM sessions WHERE session_id = ANY($1)', [SESSIONS])).rows.map((r) => [r.session_id, r.state]));
  const logs = new Map((await db.query(`
    SELECT stream, count(*)::int AS n, min(seq)::int AS lo, max(seq)::int AS hi,
           count(DISTINCT seq)::int AS distinct_seqs,
           count(*) FILTER (WHERE type = 'STATE_DELTA')::int AS deltas,
           count(*) FILTER (WHERE type = 'STATE_SNAPSHOT')::int AS snapshots
      FROM hx_event WHERE stream = ANY($1) GROUP BY stream`, [SESSIONS.map((k) => `sessions:${k}`)])).rows
    .map((r) => [r.stream, r]));

  console.log('checks (client side):');
  check(stats.noRow === 0, 'every UPDATE matched its session row', `${stats.noRow} did not`);
  check(acksByEpoch.length === 3 && acksByEpoch.every((n) => n > 0),
    'writes acknowledged before, between and after the two failovers', `per epoch: ${acksByEpoch.join(', ')}`);

  // items on the new primary
  const seen = new Map();               // id -> [sessions it appears in, with repeats]
  const wrongType = [];
  for (const key of SESSIONS) {
    const st = rows.get(key) || {};
    for (const id of Array.isArray(st.items) ? st.items : []) {
      if (typeof id !== 'string') { wrongType.push(JSON.stringify(id)); continue; }
      if (!seen.has(id)) seen.set(id, []);
      seen.get(id).push(key);
    }
  }
  const lost = [];
  const twice = [];
  const misplaced = [];
  const ghosts = [];
  let indoubtLanded = 0;
  for (const [id, item] of items) {
    const where = seen.get(id) || [];
    if (where.length > 1) twice.push(id);
    if (where.length > 0 && where[0] !== item.session) misplaced.push(id);
    if (item.status === 'acked' && where.length === 0) lost.push(id);
    if ((item.status === 'failed' || item.status === 'sent') && where.length > 0) ghosts.push(`${id} (${item.status})`);
    if (item.status === 'indoubt' && where.length === 1) indoubtLanded++;
  }
  const unknown = [...seen.keys()].filter((id) => !items.has(id));
  log(`${stats.acked} acknowledged, ${indoubtLanded} of ${stats.indoubt} in-doubt writes landed`);
  check(lost.length === 0, `0 acknowledged writes lost (of ${stats.acked})`, `lost: ${sample(lost)}`);
  check(twice.length === 0, 'no item present twice (acknowledged or in doubt)', sample(twice));
  check(ghosts.length === 0, 'no write that failed before COMMIT is present', sample(ghosts));
  check(unknown.length === 0 && wrongType.length === 0, 'no item that was never written', sample([...unknown, ...wrongType]));
  check(misplaced.length === 0, 'every item is in the session it was written to', sample(misplaced));

  // counters
  const badCounters = [];
  const badEvents = [];
  for (const key of SESSIONS) {
    const st = rows.get(key) || {};
    const list = Array.isArray(st.items) ? st.items : [];
    if (Number(st.count || 0) !== list.length) badCounters.push(`${key}: count ${st.count}, ${list.length} items`);
    const perWriter = new Map();
    for (const id of list) {
      const w = String(id).split('-')[0];
      perWriter.set(w, (perWriter.get(w) || 0) + 1);
    }
    const byWriter = st.by_writer || {};
    for (const w of new Set([...perWriter.keys(), ...Object.keys(byWriter)])) {
      if (Number(byWriter[w] || 0) !== (perWriter.get(w) || 0)) {
        badCounters.push(`${key}/${w}: counter ${byWriter[w]}, ${perWriter.get(w) || 0} items`);
      }
    }
    const l = logs.get(`sessions:${key}`);
    if (!l || l.deltas !== list.length || l.snapshots !== 1) {
      badEvents.push(`${key}: ${l ? `${l.deltas} deltas, ${l.snapshots} snapshots` : 'no log'}, ${list.length} items`);
    }
  }
  check(badCounters.length === 0, 'counters equal item counts (/count and every /by_writer/w<k>)', sample(badCounters));
  check(badEvents.length === 0, 'one STATE_DELTA per committed write, one STATE_SNAPSHOT per session', sample(badEvents));

  // the log
  const gaps = [];
  for (const key of SESSIONS) {
    const l = logs.get(`sessions:${key}`);
    if (!l || l.lo !== 1 || l.hi !== l.n || l.distinct_seqs !== l.n) {
      gaps.push(`${key}: ${l ? `${l.n} events, seq ${l.lo}..${l.hi}` : 'none'}`);
    }
  }
  check(gaps.length === 0, 'the log\'s seq of every stream is 1..n with no gap', sample(gaps));

  // the follower
  const targets = new Map(SESSIONS.map((k) => [k, (logs.get(`sessions:${k}`) || { hi: 0 }).hi]));
  const caught = await follower.reach(targets, 60000);
  const fbad = [];
  const fseq = [];
  for (const st of follower.streams.values()) {
    const want = targets.get(st.key);
    const expected = [];
    for (let s = st.startSeq + 1; s <= want; s++) expected.push(s);
    if (st.anomalies.length > 0 || !isDeepStrictEqual(st.delivered, expected)) {
      fseq.push(`${st.key}: from ${st.startSeq}, ${st.delivered.length} applied, ` +
        `${expected.length} expected${st.anomalies.length ? `; ${st.anomalies.join('; ')}` : ''}`);
    }
    if (st.seq !== want || !isDeepStrictEqual(st.state, rows.get(st.key))) {
      fbad.push(`${st.key}: follower at seq ${st.seq}, log at ${want}`);
    }
  }
  // an item shown and now absent was a write in doubt: a commit the old primary showed and lost
  const wrongLoss = (shown) => [...shown].filter((id) => (seen.get(id) || []).length === 0 &&
    !(items.has(id) && items.get(id).status === 'indoubt'));
  const lostShown = (shown) => [...shown].filter((id) => (seen.get(id) || []).length === 0).length;
  const fwrong = [];
  let flost = 0;
  for (const st of follower.streams.values()) {
    fwrong.push(...wrongLoss(st.shown));
    flost += lostShown(st.shown);
  }
  log(`follower: ${follower.stats.events} events applied, ${follower.stats.connects} connections ` +
    `(ports ${follower.ports.join(' -> ')}), ${follower.stats.notifications} notifications, ` +
    `${follower.stats.resyncs} resyncs, ${follower.stats.divergences} divergences (${flost} items shown and lost, each in doubt)` +
    `${follower.lastError ? `; last error: ${follower.lastError}` : ''}`);
  check(caught && fbad.length === 0, 'the follower\'s state equals each row on the new primary, at the log\'s last seq', sample(fbad));
  check(fseq.length === 0, 'the follower applied every seq exactly once (again after a divergence)', sample(fseq));
  check(fwrong.length === 0 && (flost === 0) === (follower.stats.divergences === 0),
    'the follower showed no write the new primary lacks but in-doubt ones, and resynced after each', sample(fwrong));

  // HxStream
  const hxReached = await hxReach(targets, 60000);
  const hbad = [];
  let hxErrors = 0;
  const hwrong = [];
  let hlost = 0;
  for (const [key, rec] of hx) {
    hxErrors += rec.errors;
    const want = targets.get(key);
    const start = rec.events.length > 0 && rec.events[0].synthetic ? rec.events[0].seq : -1;
    let handed = [];
    const snapshots = [];
    const shown = new Set();
    for (const e of rec.events) {
      for (const id of e.items) shown.add(id);
      if (!e.synthetic) handed.push(e.seq);
      else if (snapshots.push(e.seq) > 1) handed = rebase(handed, start, e.seq);
    }
    hwrong.push(...wrongLoss(shown));
    hlost += lostShown(shown);
    const expected = [];
    for (let q = start + 1; q <= want; q++) expected.push(q);
    if (start < 0 || rec.reasons.some((r) => r !== 'diverged') || snapshots.length !== 1 + rec.reasons.length ||
      !isDeepStrictEqual(handed, expected) || rec.stream.seq !== want || !isDeepStrictEqual(rec.stream.state, rows.get(key))) {
      hbad.push(`${key}: snapshots at ${snapshots.join('/')}, ${handed.length} events, ` +
        `${expected.length} expected, resyncs [${rec.reasons.join(', ')}], at seq ${rec.stream.seq} of ${want}`);
    }
  }
  const hs = [...hx.values()].map((r) => r.stream.stats);
  const sum = (f) => hs.reduce((a, st) => a + st[f], 0);
  log(`HxStream x${hx.size}: ${sum('disconnects')} disconnects, ${sum('reconnects')} reconnects, ` +
    `${sum('notifications')} notifications, ${sum('pages')} log pages, ${hxErrors} errors reported (recovered), ` +
    `${sum('resyncs')} resyncs (${hlost} items shown and lost, each in doubt)`);
  check(hxReached && hbad.length === 0,
    'HxStream (reconnecting to the primary by its socket): every seq once, resyncs only for lost commits, state equals the row', sample(hbad));
  check(hwrong.length === 0, 'HxStream showed no write the new primary lacks but in-doubt ones', sample(hwrong));

  // the backend that was on the standby
  if (STANDBY) {
    const b = standby.before || {};
    check(b.inRecovery === true && b.p0 === 'assigned' && b.p1 === 'escalated',
      'a standby backend with cached machines sees an edge added on the primary', JSON.stringify(b));
    check(after && !after.error && after.inRecovery === false && after.assign === 'assigned' &&
      after.escalate === 'escalated' && after.invalid === 'XH103',
    'the same backend, its node promoted, enforces the machine on writes (XH103 for a non-edge)',
    JSON.stringify(after || { lost: standby.lost }));
  }

  // streaming goes on with the next seq
  const key = SESSIONS[0];
  const before = targets.get(key);
  const notifiedBefore = follower.stats.notifications;
  await db.query(UPDATE_SQL, [JSON.stringify([
    { op: 'append', path: '/items', items: ['post-failover'] },
    { op: 'increment', path: '/count', by: 1 }]), key]);
  const { rows: post } = await db.query(
    'SELECT seq, type, event FROM hx_event WHERE stream = $1 AND seq > $2 ORDER BY seq', [`sessions:${key}`, before]);
  const row = (await db.query('SELECT state::jsonb AS state FROM sessions WHERE session_id = $1', [key])).rows[0].state;
  const reached = await follower.reach(new Map([[key, before + 1]]), 30000);
  const fst = follower.streams.get(key);
  check(post.length === 1 && Number(post[0].seq) === before + 1 && post[0].type === 'STATE_DELTA',
    `a new write on the new primary is logged with the next seq (${before + 1})`,
    JSON.stringify(post.map((r) => [r.seq, r.type])));
  check(reached && fst.seq === before + 1 && isDeepStrictEqual(fst.state, row),
    'the follower receives it and its state equals the row again', `follower at ${fst.seq}`);
  const hxNext = await hxReach(new Map([[key, before + 1]]), 30000);
  check(hxNext && isDeepStrictEqual(hx.get(key).stream.state, row), 'HxStream receives it too',
    `HxStream at ${hx.get(key).stream.seq}`);
  log(`the new write reached the follower (notifications meanwhile: ${follower.stats.notifications - notifiedBefore})`);

  follower.done = true;
  follower.wakeUp();
  await followerDone;
  await Promise.all([...hx.values()].map((rec) => rec.stream.stop()));
  await db.end();
  clearInterval(progressTimer);
  writeProgress();
  fs.writeFileSync(path.join(dir, 'load-result'), `${results.passed} ${results.failed}\n`);
}

main().catch((err) => {
  console.error('load.js:', err.stack || err.message);
  results.failed++;
  fs.writeFileSync(path.join(dir, 'load-result'), `${results.passed} ${results.failed}\n`);
  process.exit(1);
}).then(() => process.exit(0));
