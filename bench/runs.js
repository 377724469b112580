'use strict';
// bench/runs.js: agent runs streamed token by token, through hxstate-gateway
// to browsers, with followers dropped and reconnected mid-message.
//
//   node bench/runs.js [--runs 200] [--rate 30] [--seconds 20] [--message 150]
//                      [--flush-ms 50] [--drops 3] [--gap-ms 1000] [--peer-connections 32]
//
// Assumes a running cluster reachable with the PG* variables (e.g.
// test/lib/cluster.sh's hx_cluster_start), where it creates (and drops
// first) the database hx_bench_runs, with docs/sessions.sql's table and one
// session per run.  The gateway runs in a child process of its own (this
// file, with --child); the writers and the followers run here.
//
// Two phases, each --seconds long, with the same followers:
//   A. hxstate-client's RunWriter (flushMs --flush-ms, its 2 connections):
//      --runs runs, one per session, each appending --rate tokens a second
//      to text messages of --message tokens (END, then the next message);
//      the writer batches them (a token costs no commit of its own);
//   B. the peer: the same tokens, each its own transaction (one
//      hx_stream_emit of that one TEXT_MESSAGE_CONTENT per commit, from a
//      pool of --peer-connections connections, each run's tokens in order;
//      a token that is due while its run's previous one is in flight waits
//      for it), as a writer with no batching would.
// Every run has one follower: GET /streams/sessions/<key> with the
// gateway's token, read as a browser's EventSource reads it.  A token is
// "<n> " (its index in the run); the bench keeps the time of the append()
// (or of the peer's enqueue) that produced each, and a follower that
// receives TEXT_MESSAGE_CONTENT takes every token it has not seen yet out
// of its delta.
//
// Figures, per phase:
//   - token to browser: from the writer's call that produced the token to
//     the follower's parse of the SSE event carrying it (both clocks this
//     process's performance.now()); p50, p99 and max over every token of
//     every follower, counted only on a connection opened before the token
//     was made (the tokens a follower gets in a reconnect's prelude are the
//     reconnect's, below);
//   - WAL bytes per token: pg_wal_lsn_diff of pg_current_wal_lsn() over the
//     phase, divided by the tokens committed in it (everything the cluster
//     wrote: the events, the messages upserted into the state at each END,
//     the gateway's reads);
//   - commits a second: xact_commit of pg_stat_database (this database)
//     over the phase, divided by its length (1.5 s of quiet before and
//     after, so that every backend has reported its counts);
//   - reconnect to the next token: each follower drops its connection
//     --drops times at random moments of the phase while a message is open
//     (mid-message), waits a random 0 to --gap-ms (a browser's retry), and
//     GETs again with Last-Event-ID the last id it got; from that request
//     to the first token it had not seen (from the prelude's reopened
//     message or a later event): p50, p99, max;
//     (a token of a message that ended while it was away counts when its
//     MESSAGES_SNAPSHOT comes);
//   - for the RunWriter, the token-to-browser time in three parts: from the
//     call to the moment its statement has run in the writer's transaction
//     (the run's inTransaction hook, which runs no statement, just before
//     COMMIT: the batch's wait for flushMs and for a writer connection);
//     from then to its commit (COMMIT and its fsync; seen as the run's new
//     lastSeq by a 2 ms timer); from the commit to the browser (logical
//     decoding, the hub, the gateway, SSE, the follower's parse);
//   - CPU during the phase: the gateway's process, this process (writers
//     and followers), the cluster's processes, and the machine's (all of
//     /proc/stat: other work shares these cores), each as a share of one
//     core.
// HX_BENCH_PROF=<dir> writes the gateway process's CPU profile there
// (node --cpu-prof).  HX_BENCH_DEBUG=1 prints, per phase, the 15 slowest reconnects (the gap,
// the time to the response's first frame, the frames before the token).
// Targets (the product's): token to browser p99 <= 100 ms and reconnect to
// the next token p99 <= 100 ms for the RunWriter; "Targets met: N of M" says
// how many were.  It exits with status 1 only when something failed (a
// writer's error, a follower's socket error or non-200 response, a follower
// that did not get every token of phase A), so that a missed target does not
// stop the parts of bench/run that follow it.  The peer's figures are
// printed beside it, with the ratios RunWriter / peer of WAL per token and
// commits a second.
const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');
const { fork } = require('node:child_process');
const { parseArgs } = require('node:util');
const { performance } = require('node:perf_hooks');
const pg = require('pg');

const DB = 'hx_bench_runs';
const SECRET = 'the benchmark secret, at least 32 bytes long';

// ---------------------------------------------------------------------
// The gateway's process
// ---------------------------------------------------------------------

async function child() {
  const { createGateway } = require('hxstate-gateway');
  const gateway = createGateway({
    pg: { database: DB, application_name: 'hx-bench-runs-gateway' },
    tables: ['sessions'],
    secret: SECRET,
    maxPerClient: 1000000,
    heartbeat: 60000,
    log: () => {},
  });
  await gateway.ready;
  const server = http.createServer(gateway.handler);
  server.keepAliveTimeout = 0;
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port, transport: gateway.hub.transport }));
  // the bench that forked it is gone (it failed, or was killed): so is this
  process.on('disconnect', () => process.exit(1));
  process.on('message', async (m) => {
    if (m === 'stats') {
      process.send({ stats: gateway.stats });
    } else if (m === 'stop') {
      server.close();
      server.closeAllConnections();
      await gateway.close();
      process.exit(0);
    }
  });
}

// ---------------------------------------------------------------------
// Measuring
// ---------------------------------------------------------------------

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(check, what, ms = 120000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await sleep(20);
  }
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** CPU seconds (user + system) of pids, from /proc (a pid gone counts 0). */
function cpuOf(pids) {
  let cpu = 0;
  for (const pid of pids) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      cpu += (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100; // utime stime cutime cstime, USER_HZ
    } catch (err) { /* gone */ }
  }
  return cpu;
}

/** The cluster's processes: the postmaster (PGHOST/data/postmaster.pid) and its children. */
function clusterPids() {
  let postmaster;
  try {
    postmaster = Number(fs.readFileSync(path.join(process.env.PGHOST || '', 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch (err) {
    return [];
  }
  const pids = [postmaster];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster) pids.push(Number(d));
    } catch (err) { /* gone */ }
  }
  return pids;
}

/** The machine's busy and total CPU seconds, from /proc/stat. */
function machineCpu() {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3] + f[4];
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: (total - idle) / 100, total: total / 100 };
}

// ---------------------------------------------------------------------
// The followers
// ---------------------------------------------------------------------

/**
 * A follower of one run's session, as a browser's EventSource: GET the
 * stream, and again with Last-Event-ID after each drop.  sent(n) is the
 * time token n of its run was made (undefined for one not made yet).
 */
class Follower {
  constructor(base, key, token, sent, out, staged, prefix) {
    this.staged = staged;
    this.prefix = prefix; // the ids of the messages of this phase's run
    this.base = base;
    this.key = key;
    this.token = token;
    this.sent = sent;
    this.out = out; // {latencies: [], reconnects: []}
    this.seen = -1; // the highest token index received
    this.lastId = null; // the last SSE id
    this.open = false; // a message is open
    this.pending = null; // a reconnect's request time, until its first unseen token
    this.openedAt = 0;
    this.joined = false;
    this.errors = 0;
    this.statuses = [];
    this.dropped = false;
  }

  connect() {
    const headers = { authorization: `Bearer ${this.token}` };
    if (this.lastId !== null) headers['last-event-id'] = this.lastId;
    this.openedAt = performance.now();
    this.open = false; // the prelude reopens what is open
    this.frames = 0;
    this.types = [];
    this.lastIdSent = this.lastId;
    const req = http.get(`${this.base}/streams/sessions/${this.key}`, { agent: false, headers }, (res) => {
      this.statuses.push(res.statusCode);
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        if (req !== this.req) return;
        buf += chunk;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          this.frame(block);
        }
      });
    });
    req.on('error', () => { if (req === this.req) this.errors++; });
    this.req = req;
  }

  frame(block) {
    const now = performance.now();
    let data = null;
    for (const line of block.split('\n')) {
      if (line.startsWith('id: ')) this.lastId = line.slice(4);
      else if (line.startsWith('data: ')) data = line.slice(6);
    }
    if (data === null) return;
    const e = JSON.parse(data);
    if (this.frames++ === 0) this.firstFrame = now;
    if (this.types.length < 12) this.types.push(e.type);
    if (e.type === 'STATE_SNAPSHOT' || e.type === 'MESSAGES_SNAPSHOT') this.joined = true;
    if (e.type === 'TEXT_MESSAGE_START') this.open = true;
    else if (e.type === 'TEXT_MESSAGE_END') this.open = false;
    else if (e.type === 'TEXT_MESSAGE_CONTENT') {
      this.open = true;
      this.take(e.delta, now, true);
    } else if (e.type === 'MESSAGES_SNAPSHOT') {
      // a message that ended while the follower was away is here whole
      for (const msg of e.messages) {
        if (typeof msg.id === 'string' && msg.id.startsWith(this.prefix) && typeof msg.content === 'string') this.take(msg.content, now, false);
      }
    }
  }

  /** The tokens of text not seen yet; timed: a content event (counted in the latencies). */
  take(text, now, timed) {
    for (const t of text.split(' ')) {
      if (t === '') continue;
      const n = Number(t);
      if (n <= this.seen) continue;
      this.seen = n;
      if (this.pending !== null) {
        if (process.env.HX_BENCH_DEBUG) {
          this.out.debug = this.out.debug || [];
          this.out.debug.push({ ms: Math.round(now - this.pending), frames: this.frames, firstFrame: Math.round(this.firstFrame - this.pending),
            gap: Math.round(this.pending - this.droppedAt), lastId: this.lastIdSent, types: this.types.join(','), n, seen: this.seen });
        }
        this.out.reconnects.push(now - this.pending);
        this.pending = null;
        continue;
      }
      const at = this.sent(n);
      if (!timed || at === undefined || at < this.openedAt) continue;
      this.out.latencies.push(now - at);
      const [st, cm] = this.staged(n);
      if (st !== undefined && cm !== undefined) {
        this.out.toStaged.push(st - at);
        this.out.toCommitted.push(cm - st);
        this.out.fromCommitted.push(now - cm);
      }
    }
  }

  /** Drop the connection (mid-message: later if none is open), and GET again after gap ms. */
  drop(gapMs) {
    if (!this.open || this.pending !== null || this.req === null) return false;
    const req = this.req;
    this.req = null;
    this.open = false;
    this.droppedAt = performance.now();
    req.destroy();
    setTimeout(() => {
      if (this.stopped) return;
      this.pending = performance.now();
      this.connect();
    }, Math.random() * gapMs);
    return true;
  }

  stop() {
    this.stopped = true;
    if (this.req) this.req.destroy();
    this.req = null;
  }
}

// ---------------------------------------------------------------------
// The writers
// ---------------------------------------------------------------------

/** The schedule of a phase: calls token(i) for run i, rate a second, until seconds pass; resolves then. */
function schedule(runs, rate, seconds, token) {
  const start = performance.now();
  const made = new Array(runs).fill(0);
  const offset = Array.from({ length: runs }, () => Math.random()); // runs not in lockstep
  return new Promise((resolve) => {
    const tick = setInterval(() => {
      const elapsed = (performance.now() - start) / 1000;
      const last = elapsed >= seconds;
      const t = Math.min(elapsed, seconds);
      for (let i = 0; i < runs; i++) {
        const due = Math.floor(t * rate + offset[i]);
        while (made[i] < due) {
          token(i);
          made[i]++;
        }
      }
      if (last) {
        clearInterval(tick);
        resolve(made.reduce((a, b) => a + b, 0));
      }
    }, 5);
  });
}

/** Phase A: RunWriter. */
async function phaseRunWriter(o, keys, sent, staged, committed) {
  const { RunWriter } = require('hxstate-client');
  const writer = new RunWriter({ pg: { database: DB, application_name: 'hx-bench-runs-writer' }, flushMs: o.flushMs });
  const errors = [];
  writer.on('error', (err) => errors.push(err));
  // the moment a token's statement has run, just before its COMMIT (the
  // run's inTransaction hook, which runs no statement of its own)
  const inTransaction = (i) => (client, { events }) => {
    const now = performance.now();
    for (const e of events) {
      if (e.type !== 'TEXT_MESSAGE_CONTENT') continue;
      for (const t of e.delta.split(' ')) {
        if (t === '') continue;
        staged[i][Number(t)] = now;
        runs[i].uncommitted.push(Number(t));
      }
    }
  };
  const runs = keys.map((key, i) => {
    const run = writer.open({ table: 'sessions', key }, { runId: `a-${i}`, inTransaction: inTransaction(i) });
    return { run, m: null, n: 0, inMessage: 0, msg: 0, seq: run.lastSeq, uncommitted: [] };
  });
  // a run's commit is seen as a new lastSeq (a run has one batch in flight
  // at most), at the next turn of a 2 ms timer (so
  // the bench's own event-loop delay is in it): what it had staged is committed
  const watch = setInterval(() => {
    const now = performance.now();
    for (const [i, r] of runs.entries()) {
      if (r.run.lastSeq === r.seq) continue;
      r.seq = r.run.lastSeq;
      for (const n of r.uncommitted) committed[i][n] = now;
      r.uncommitted = [];
    }
  }, 2);
  const ends = [];
  let blocked = 0;
  const made = await schedule(keys.length, o.rate, o.seconds, (i) => {
    const r = runs[i];
    if (r.m === null) r.m = r.run.text({ messageId: `a-${i}-${r.msg++}` });
    const n = sent[i].length;
    sent[i].push(performance.now());
    if (!r.m.append(`${n} `)) blocked++;
    if (++r.inMessage === o.message) {
      ends.push(r.m.end());
      r.m = null;
      r.inMessage = 0;
    }
  });
  for (const r of runs) if (r.m) ends.push(r.m.end());
  await Promise.all(ends);
  await Promise.all(runs.map((r) => r.run.close()));
  clearInterval(watch);
  const stats = { ...writer.stats };
  await writer.close();
  return { made, committed: made, transactions: stats.transactions, stats, errors, blocked };
}

/** Phase B: the peer, one commit per token. */
async function phasePerToken(o, keys, sent, staged) {
  const pool = new pg.Pool({ database: DB, max: o.peerConnections, application_name: 'hx-bench-runs-peer' });
  await Promise.all(Array.from({ length: o.peerConnections }, () => pool.query('SELECT 1')));
  const emit = (key, events) => pool.query('SELECT hx_stream_emit($1::regclass, $2, $3::jsonb)', ['sessions', key, JSON.stringify(events)]);
  const runs = keys.map(() => ({ queue: [], busy: false, n: 0, inMessage: 0, msg: 0, id: null }));
  let committed = 0;
  let transactions = 0;
  let inFlight = 0;
  let stopping = false;
  const errors = [];
  const pump = (i) => {
    const r = runs[i];
    if (r.busy || r.queue.length === 0 || stopping) return;
    r.busy = true;
    inFlight++;
    const events = r.queue.shift();
    emit(keys[i], events).then(() => {
      transactions++;
      committed += events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').length;
    }, (err) => errors.push(err)).finally(() => {
      r.busy = false;
      inFlight--;
      pump(i);
    });
  };
  // the run's start marker, as RunWriter writes one
  await Promise.all(keys.map((key, i) => emit(key, [{ type: 'CUSTOM', name: 'hxstate.run', value: { runId: `b-${i}`, status: 'started' } }])));
  transactions += keys.length;
  const made = await schedule(keys.length, o.rate, o.seconds, (i) => {
    const r = runs[i];
    if (r.id === null) {
      r.id = `b-${i}-${r.msg++}`;
      r.queue.push([{ type: 'TEXT_MESSAGE_START', messageId: r.id, role: 'assistant' }]);
    }
    const n = sent[i].length;
    sent[i].push(performance.now());
    r.queue.push([{ type: 'TEXT_MESSAGE_CONTENT', messageId: r.id, delta: `${n} ` }]);
    if (++r.inMessage === o.message) {
      r.queue.push([{ type: 'TEXT_MESSAGE_END', messageId: r.id }]);
      r.id = null;
      r.inMessage = 0;
    }
    pump(i);
  });
  const backlog = runs.reduce((s, r) => s + r.queue.length, 0);
  stopping = true; // what is still queued is not written: the phase is over
  await waitFor(() => inFlight === 0, 'the peer\'s writes in flight');
  await pool.end();
  return { made, committed, transactions, backlog, errors };
}

// ---------------------------------------------------------------------
// The benchmark
// ---------------------------------------------------------------------

async function main() {
  const { values } = parseArgs({
    strict: true,
    options: {
      runs: { type: 'string', default: '200' },
      rate: { type: 'string', default: '30' },
      seconds: { type: 'string', default: '20' },
      message: { type: 'string', default: '150' },
      'flush-ms': { type: 'string', default: '50' },
      drops: { type: 'string', default: '3' },
      'gap-ms': { type: 'string', default: '1000' },
      'peer-connections': { type: 'string', default: '32' },
    },
  });
  // each option a number in its range, or a clear error before anything starts
  const num = (name, min, max, integer = true) => {
    const v = Number(values[name]);
    if (values[name].trim() === '' || !Number.isFinite(v) || (integer && !Number.isInteger(v)) || v < min || v > max) {
      throw new RangeError(`bench/runs.js: --${name} is ${integer ? 'an integer' : 'a number'} from ${min} to ${max}, not ${JSON.stringify(values[name])}`);
    }
    return v;
  };
  const o = {
    runs: num('runs', 1, 10000),
    rate: num('rate', 0.1, 1000, false),
    seconds: num('seconds', 3, 3600, false),
    message: num('message', 1, 1000000),
    flushMs: num('flush-ms', 0, 60000, false),
    drops: num('drops', 0, 100),
    gapMs: num('gap-ms', 0, 60000, false),
    peerConnections: num('peer-connections', 1, 90),
  };

  const admin = new pg.Client({ database: 'postgres' });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${DB}`);
  await admin.end();
  const db = new pg.Client({ database: DB, application_name: 'hx-bench-runs' });
  await db.connect();
  await db.query('CREATE EXTENSION hxstate');
  await db.query(fs.readFileSync(path.join(__dirname, '..', 'docs', 'sessions.sql'), 'utf8'));
  await db.query('SELECT hx_stream_publication()');
  const keys = Array.from({ length: o.runs }, (_, i) => `r-${i}`);
  await db.query(`INSERT INTO sessions (session_id, user_id, state)
                  SELECT 'r-' || g, 'u', '{"messages": [{"id": "u", "role": "user", "content": "Tell me a long story."}]}'
                    FROM generate_series(0, ${o.runs - 1}) g`);
  const { rows: [{ version }] } = await db.query("SELECT current_setting('server_version') AS version");
  const { rows: [{ fsync }] } = await db.query("SELECT current_setting('fsync') AS fsync");

  const prof = process.env.HX_BENCH_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.HX_BENCH_PROF] : [];
  const gw = fork(__filename, ['--child'], { execArgv: prof, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const m = await new Promise((resolve) => gw.once('message', resolve));
  const base = `http://127.0.0.1:${m.port}`;
  const { mintToken } = require('hxstate-gateway');
  const token = mintToken(SECRET, { table: 'sessions', all: true }, { ttl: 3600 });

  const counters = async () => (await db.query(
    `SELECT pg_current_wal_lsn()::text AS lsn, xact_commit::float8 AS commits
       FROM pg_stat_database WHERE datname = current_database()`)).rows[0];

  const phases = [
    { name: 'RunWriter', label: `RunWriter (flushMs ${o.flushMs})`, write: phaseRunWriter },
    { name: 'peer', label: 'a commit per token', write: phasePerToken },
  ];
  const results = [];
  for (const phase of phases) {
    const sent = keys.map(() => []);
    const staged = keys.map(() => []);
    const committed = keys.map(() => []);
    const out = { latencies: [], reconnects: [], toStaged: [], toCommitted: [], fromCommitted: [] };
    const followers = keys.map((key, i) => new Follower(base, key, token, (n) => sent[i][n], out, (n) => [staged[i][n], committed[i][n]], `${phase.name === 'peer' ? 'b' : 'a'}-${i}-`));
    for (const f of followers) f.connect();
    await waitFor(() => followers.every((f) => f.joined || f.errors), 'every follower\'s prelude');
    // each follower's drops, at random moments of the phase (not its first or last second)
    const timers = [];
    let dropsDone = 0;
    for (const f of followers) {
      for (let d = 0; d < o.drops; d++) {
        const at = 1000 + Math.random() * Math.max(0, o.seconds * 1000 - 2000);
        const tryDrop = () => {
          if (f.stopped) return;
          if (f.drop(o.gapMs)) dropsDone++;
          else timers.push(setTimeout(tryDrop, 50));
        };
        timers.push(setTimeout(tryDrop, at));
      }
    }
    await sleep(1500);
    const c0 = await counters();
    const cpu0 = { gw: cpuOf([gw.pid]), me: process.cpuUsage(), pgs: cpuOf(clusterPids()), machine: machineCpu() };
    const t0 = performance.now();
    const w = await phase.write(o, keys, sent, staged, committed);
    const wall = (performance.now() - t0) / 1000;
    const cpu1 = { gw: cpuOf([gw.pid]), me: process.cpuUsage(cpu0.me), pgs: cpuOf(clusterPids()), machine: machineCpu() };
    // the followers catch up (or give up after 10 s)
    const want = (i) => (phase.name === 'peer' ? -1 : sent[i].length - 1);
    await waitFor(() => followers.every((f, i) => f.pending === null && f.seen >= want(i)), 'the followers', 10000).catch(() => {});
    await sleep(1500);
    const c1 = await counters();
    for (const t of timers) clearTimeout(t);
    const behind = followers.filter((f, i) => f.pending !== null || f.seen < (phase.name === 'peer' ? 0 : want(i))).length;
    for (const f of followers) f.stop();
    const { rows: [{ wal }] } = await db.query('SELECT pg_wal_lsn_diff($1, $2)::float8 AS wal', [c1.lsn, c0.lsn]);
    if (out.debug) {
      out.debug.sort((x, y) => y.ms - x.ms);
      console.error(phase.name, JSON.stringify(out.debug.slice(0, 15), null, 0));
    }
    const lat = out.latencies.sort((a, b) => a - b);
    const toStaged = out.toStaged.sort((a, b) => a - b);
    const toCommitted = out.toCommitted.sort((a, b) => a - b);
    const fromCommitted = out.fromCommitted.sort((a, b) => a - b);
    const rec = out.reconnects.sort((a, b) => a - b);
    results.push({
      phase, w, wall, wal, behind, dropsDone,
      commits: c1.commits - c0.commits,
      lat, rec, toStaged, toCommitted, fromCommitted,
      statuses: followers.flatMap((f) => f.statuses).filter((s) => s !== 200).length,
      errors: followers.reduce((n, f) => n + f.errors, 0),
      cpu: {
        gw: (cpu1.gw - cpu0.gw) / wall,
        me: (cpu1.me.user + cpu1.me.system) / 1e6 / wall,
        pgs: (cpu1.pgs - cpu0.pgs) / wall,
        machine: (cpu1.machine.busy - cpu0.machine.busy) / wall,
        cores: (cpu1.machine.total - cpu0.machine.total) / wall,
      },
    });
    await sleep(500);
  }

  const gstats = await new Promise((resolve) => {
    gw.once('message', resolve);
    gw.send('stats');
  });
  await new Promise((resolve) => {
    gw.once('exit', resolve);
    gw.send('stop');
  });
  await db.end();

  // ---- the table
  const [a, b] = results;
  const ms = (x) => (x === undefined || Number.isNaN(x) ? '-' : `${x.toFixed(1)} ms`);
  const pct = (x) => `${(x * 100).toFixed(0)}%`;
  const tokensPerSec = (r) => r.w.committed / r.phase.seconds;
  const rows = [
    ['tokens made (committed)', (r) => `${r.w.made} (${r.w.committed})`, '', null],
    ['tokens committed a second', (r) => (r.w.committed / o.seconds).toFixed(0), `${o.runs * o.rate}`, null],
    ['token to browser p50', (r) => ms(percentile(r.lat, 50)), '', null],
    ['token to browser p99', (r) => ms(percentile(r.lat, 99)), '<= 100 ms', (r) => percentile(r.lat, 99) <= 100],
    ['token to browser max', (r) => ms(r.lat[r.lat.length - 1]), '', null],
    ['  call to statement run p50', (r) => ms(percentile(r.toStaged, 50)), '', null],
    ['  call to statement run p99', (r) => ms(percentile(r.toStaged, 99)), '', null],
    ['  statement run to committed p50', (r) => ms(percentile(r.toCommitted, 50)), '', null],
    ['  statement run to committed p99', (r) => ms(percentile(r.toCommitted, 99)), '', null],
    ['  committed to browser p50', (r) => ms(percentile(r.fromCommitted, 50)), '', null],
    ['  committed to browser p99', (r) => ms(percentile(r.fromCommitted, 99)), '', null],
    ['tokens timed', (r) => String(r.lat.length), '', null],
    ['reconnect to next token p50', (r) => ms(percentile(r.rec, 50)), '', null],
    ['reconnect to next token p99', (r) => ms(percentile(r.rec, 99)), '<= 100 ms', (r) => percentile(r.rec, 99) <= 100],
    ['reconnect to next token max', (r) => ms(r.rec[r.rec.length - 1]), '', null],
    ['reconnects timed (drops)', (r) => `${r.rec.length} (${r.dropsDone})`, '', null],
    ['WAL bytes per token', (r) => (r.wal / r.w.committed).toFixed(0), '', null],
    ['commits a second (xact_commit)', (r) => (r.commits / o.seconds).toFixed(1), '', null],
    ['  of which the writer\'s', (r) => (r.w.transactions / o.seconds).toFixed(1), '', null],
    ['CPU: gateway process', (r) => pct(r.cpu.gw), '', null],
    ['CPU: writers + followers', (r) => pct(r.cpu.me), '', null],
    ['CPU: PostgreSQL', (r) => pct(r.cpu.pgs), '', null],
    ['CPU: machine (all work)', (r) => `${pct(r.cpu.machine)} of ${pct(r.cpu.cores)}`, '', null],
    ['followers behind at the end', (r) => String(r.behind), '0', null],
  ];
  void tokensPerSec;
  console.log(`agent runs through hxstate-gateway: ${o.runs} runs x ${o.rate} tokens/s for ${o.seconds} s per phase, ` +
    `messages of ${o.message} tokens, ${o.runs} SSE followers, ${o.drops} drops each (retry after 0-${o.gapMs} ms); ` +
    `PostgreSQL ${version} fsync=${fsync}, transport ${m.transport}, Node ${process.version}, ${require('node:os').cpus().length} cores`);
  const header = ['metric', `A: ${a.phase.label}`, `B: ${b.phase.label}`, 'A/B', 'target', 'met?'];
  const table = rows.map(([name, f, target, check]) => {
    const met = check ? (check(a) ? 'yes' : 'NO') : '-';
    return [name, f(a), f(b), '', target || '', check ? met : ''];
  });
  const ratio = (x, y) => (y ? (x / y).toFixed(3) : '-');
  table.find((r) => r[0] === 'WAL bytes per token')[3] = ratio(a.wal / a.w.committed, b.wal / b.w.committed);
  table.find((r) => r[0] === 'commits a second (xact_commit)')[3] = ratio(a.commits, b.commits);
  table.find((r) => r[0] === '  of which the writer\'s')[3] = ratio(a.w.transactions, b.w.transactions);
  table.find((r) => r[0] === 'token to browser p99')[3] = ratio(percentile(a.lat, 99), percentile(b.lat, 99));
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((r) => r[i].length)));
  const line = (r) => r.map((x, i) => (i >= 1 && i <= 3 ? x.padStart(widths[i]) : x.padEnd(widths[i]))).join(' | ');
  console.log(line(header));
  console.log(widths.map((n) => '-'.repeat(n)).join('-+-'));
  for (const r of table) console.log(line(r));
  console.log(`RunWriter: ${a.w.stats.transactions} transactions, ${a.w.stats.commits} commits, ${a.w.stats.events} events, ` +
    `${a.w.blocked} appends past maxBatchBytes, ${a.w.errors.length} errors; peer: ${b.w.backlog} tokens still queued at the end, ` +
    `${b.w.errors.length} errors; followers: ${a.errors + b.errors} socket errors, ${a.statuses + b.statuses} non-200 responses; ` +
    `gateway: ${JSON.stringify(gstats.stats)}`);
  const met = [percentile(a.lat, 99) <= 100, percentile(a.rec, 99) <= 100];
  console.log(`Targets met: ${met.filter(Boolean).length} of ${met.length}.`);
  // a missed target is printed (the parts of bench/run after this one still
  // run); a writer that failed or a follower that missed tokens is an error
  if (a.w.errors.length || b.w.errors.length || a.behind || a.errors + b.errors > 0 || a.statuses + b.statuses > 0) process.exitCode = 1;
}

if (process.argv.includes('--child')) {
  child().catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else {
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
