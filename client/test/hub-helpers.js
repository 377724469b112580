'use strict';
// What the hub tests share (not a test file: node --test runs *.test.js):
//   - a recorder that checks, as the events come, that each subscription's
//     seqs follow one another (every seq once, in order; a new start only
//     right after 'resync'), and a check of the end: each stream at its
//     head, its state the row's;
//   - writers: connections running random hx_merge writes over some rows,
//     optionally surviving a server that goes away;
//   - a sampler of the connections an application holds (pg_stat_activity);
//   - a private cluster, for tests that kill or reconfigure a server (the
//     shared one belongs to every test file): test/lib/cluster.sh run by a
//     bash child that takes commands on its standard input.
const { spawn } = require('node:child_process');
const path = require('node:path');
const { Client } = require('pg');
const h = require('../../test/js/helpers');

const TOP = path.join(__dirname, '..', '..');

// ---------------------------------------------------------------------
// Recording and checking
// ---------------------------------------------------------------------

class Recorder {
  constructor() {
    this.records = [];
    this.violations = [];
    this.events = 0;
    this.resyncs = 0;
    this.ends = 0;
  }

  /** Record what sub hands out; returns its record. */
  attach(sub, key) {
    const rec = { sub, key, first: null, last: null, count: 0, state: undefined, resync: false };
    this.records.push(rec);
    sub.on('event', (event, state) => this.record(rec, event, state));
    sub.on('resync', () => {
      rec.resync = true;
      this.resyncs++;
    });
    sub.on('end', () => { this.ends++; });
    return rec;
  }

  record(rec, event, state) {
    const seq = event.metadata.seq;
    this.events++;
    rec.count++;
    if (rec.last === null) {
      rec.first = seq;
    } else if (rec.resync) {
      rec.resync = false;
      if (!(seq >= rec.last)) this.violations.push(`${rec.sub.stream}: resync from ${rec.last} back to ${seq}`);
    } else if (seq !== rec.last + 1) {
      if (this.violations.length < 50) this.violations.push(`${rec.sub.stream}: ${rec.last} then ${seq}`);
    }
    rec.last = seq;
    rec.state = state;
  }
}

/** Follow every key of table on hub, each recorded; the recorder once every subscription is ready. */
async function followAll(hub, table, keys) {
  const rec = new Recorder();
  const subs = keys.map((key) => {
    const sub = hub.follow({ table, key });
    rec.attach(sub, key);
    return sub;
  });
  await Promise.all(subs.map((s) => s.ready));
  return rec;
}

/** The head of every stream and the state of every row of table, by key. */
async function truth(db, table, records) {
  const streams = records.map((r) => r.sub.stream);
  const heads = new Map((await db.query('SELECT stream, seq::int FROM hx_stream_heads($1)', [streams]))
    .rows.map((r) => [r.stream, r.seq]));
  const rows = new Map((await db.query(`SELECT session_id, state::jsonb AS state FROM ${table}`)).rows
    .map((r) => [r.session_id, r.state]));
  return { heads, rows };
}

/** Wait until every record has reached its stream's head. */
async function waitForHeads(db, table, records, what, patience = 60000) {
  let t = await truth(db, table, records);
  await h.waitFor(() => records.every((r) => r.last === t.heads.get(r.sub.stream)), what, patience);
  t = await truth(db, table, records); // nothing moved meanwhile: the writers are done
  return t;
}

/** The records whose last seq or state is not the stream's head or the row's state. */
function mismatches(t, records, stateOf = (r) => r.state) {
  const bad = [];
  for (const r of records) {
    const head = t.heads.get(r.sub.stream);
    if (r.last !== head) bad.push(`${r.sub.stream}: at ${r.last}, head ${head}`);
    else if (h.canonical(stateOf(r)) !== h.canonical(t.rows.get(r.key) === undefined ? null : t.rows.get(r.key))) {
      bad.push(`${r.sub.stream}: state ${JSON.stringify(stateOf(r))} is not the row's`);
    }
    if (bad.length >= 20) break;
  }
  return bad;
}

/** A promise and the function that settles it: a consumer held until the test lets it go. */
function gate() {
  let open;
  const promise = new Promise((resolve) => { open = resolve; });
  return { promise, open };
}

// ---------------------------------------------------------------------
// Writers
// ---------------------------------------------------------------------

/** One random hx_merge op list (now and then an event over NOTIFY's 8000 bytes). */
function randomOps(r, w, i, bigChance) {
  const ops = [{ op: 'increment', path: '/n', by: 1 }];
  const roll = r.int(4);
  if (roll === 0) ops.push({ op: 'append', path: '/l', items: [`${w}-${i}`] });
  else if (roll === 1) ops.push({ op: 'merge', path: '/m', value: { [`k${r.int(5)}`]: r.chance(0.3) ? null : i } });
  else if (roll === 2) ops.push({ op: 'replace', path: `/r${r.int(3)}`, value: `w${w}/${i}~"ü"` });
  if (r.chance(bigChance)) ops.push({ op: 'replace', path: '/big', value: `${w}-${i}-${'x'.repeat(9000)}` });
  return ops;
}

/**
 * n connections (from connect()) each running `writes` random hx_merge
 * writes on random keys of table.  With survive, a write that fails (the
 * server went away) is retried on a new connection until it goes through,
 * so the run completes whatever happens to the server meanwhile.
 */
async function runWriters({ connect, n = 8, writes, table, keys, seed = 1, bigChance = 0, survive = false, onCommit }) {
  let commits = 0;
  // an idle connection whose server goes away emits 'error': the next write notices
  const open = async () => {
    const c = await connect();
    c.on('error', () => {});
    return c;
  };
  await Promise.all(Array.from({ length: n }, async (_, w) => {
    const r = h.rng(seed * 131 + w);
    let c = await open();
    try {
      for (let i = 0; i < writes; i++) {
        const key = r.pick(keys);
        const ops = JSON.stringify(randomOps(r, w, i, bigChance));
        for (;;) {
          try {
            await c.query(`UPDATE ${table} SET state = hx_merge(state, $1) WHERE session_id = $2`, [ops, key]);
            break;
          } catch (err) {
            if (!survive) throw err;
            await c.end().catch(() => {});
            await h.sleep(100);
            c = await open().catch(() => null);
            while (!c) {
              await h.sleep(200);
              c = await open().catch(() => null);
            }
          }
        }
        commits++;
        if (onCommit) await onCommit(commits);
      }
    } finally {
      await c.end().catch(() => {});
    }
  }));
  return commits;
}

// ---------------------------------------------------------------------
// Connections
// ---------------------------------------------------------------------

/**
 * Count, every few ms until stop(), the backends of application_name
 * appName (walsenders included), less those in ignore: backends a test
 * terminated, which linger in pg_stat_activity while they exit, after the
 * client has let go of them.  stop() resolves to the most seen at once.
 */
function sampleConnections(db, appName, every = 25) {
  let max = 0;
  let done = false;
  const ignore = new Set();
  const loop = (async () => {
    while (!done) {
      const { rows } = await db.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE application_name = $1 AND pid <> ALL ($2::int[])`, [appName, [...ignore]]);
      if (rows[0].n > max) max = rows[0].n;
      await h.sleep(every);
    }
  })();
  return {
    ignore,
    get max() { return max; },
    async stop() {
      done = true;
      await loop;
      return max;
    },
  };
}

async function backendPids(db, appName, backendType) {
  const { rows } = await db.query(
    `SELECT pid FROM pg_stat_activity WHERE application_name = $1
        AND ($2::text IS NULL OR backend_type = $2) ORDER BY pid`, [appName, backendType || null]);
  return rows.map((r) => r.pid);
}

/**
 * pg_terminate_backend of appName's backends (of one type, if given); how
 * many.  A sampler given is told to ignore them from now on (and those it
 * ignores already, still exiting, are not counted again).
 */
async function terminate(db, appName, backendType, sampler) {
  const pids = (await backendPids(db, appName, backendType)).filter((pid) => !(sampler && sampler.ignore.has(pid)));
  if (sampler) for (const pid of pids) sampler.ignore.add(pid);
  for (const pid of pids) await db.query('SELECT pg_terminate_backend($1)', [pid]);
  return pids.length;
}

// ---------------------------------------------------------------------
// A private cluster
// ---------------------------------------------------------------------

// The bash side: start a cluster with test/lib/cluster.sh, print its
// socket directory, then run one command a line: kill (hx_cluster_kill: a
// kill -9 of the postmaster and every server process), up
// (hx_cluster_up: crash recovery, then running), reconfigure name=value
// (a restart with the setting), check (hx_cluster_check_log), stop.  When
// its standard input closes (the test process ended, however), it exits
// and cluster.sh's EXIT trap removes the cluster.
const CLUSTER_SCRIPT = `
. "$HX_TOP/test/lib/cluster.sh"
hx_cluster_start "$@" >&2 || exit 1
echo "host $PGHOST $PGPORT"
while read -r cmd args; do
	case $cmd in
		kill) hx_cluster_kill ;;
		up) hx_cluster_up >&2 || { echo "failed"; continue; } ;;
		reconfigure) hx_cluster_reconfigure $args >&2 || { echo "failed"; continue; } ;;
		check) bad=$(hx_cluster_check_log) || { echo "bad $(echo "$bad" | tr '\\n' ' ')"; continue; } ;;
		stop) break ;;
	esac
	echo done
done
`;

class PrivateCluster {
  /** The server binaries of the shared cluster's server (release or assert-enabled). */
  static async bindir() {
    const c = new Client({ database: 'postgres' });
    await c.connect();
    try {
      const { rows } = await c.query(`SELECT setting FROM pg_config WHERE name = 'BINDIR'`);
      return rows[0].setting;
    } finally {
      await c.end();
    }
  }

  static async start(settings = []) {
    const bindir = await PrivateCluster.bindir();
    const cluster = new PrivateCluster();
    cluster.child = spawn('bash', ['-c', CLUSTER_SCRIPT, 'hx-private-cluster', bindir, ...settings], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, HX_TOP: TOP },
    });
    cluster.err = '';
    cluster.lines = [];
    cluster.waiters = [];
    let buf = '';
    cluster.child.stdout.setEncoding('utf8');
    cluster.child.stdout.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        const w = cluster.waiters.shift();
        if (w) w(line);
        else cluster.lines.push(line);
      }
    });
    cluster.child.stderr.setEncoding('utf8');
    cluster.child.stderr.on('data', (d) => { cluster.err += d; });
    cluster.exited = new Promise((resolve) => cluster.child.on('exit', resolve));
    const first = await cluster._line();
    const m = /^host (\S+) (\d+)$/.exec(first || '');
    if (!m) throw new Error(`the private cluster did not start: ${first}\n${cluster.err}`);
    cluster.host = m[1];
    cluster.port = Number(m[2]);
    return cluster;
  }

  _line() {
    if (this.lines.length > 0) return Promise.resolve(this.lines.shift());
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      this.exited.then(() => resolve(null));
    });
  }

  /** Run a command; resolves to its answer ('done', 'failed' or 'bad ...'). */
  async command(cmd) {
    this.child.stdin.write(`${cmd}\n`);
    return this._line();
  }

  /** A pg config for a database of this cluster. */
  config(database, extra = {}) {
    return { host: this.host, port: this.port, user: 'postgres', database, ...extra };
  }

  async connect(database, extra) {
    const c = new Client(this.config(database, extra));
    await c.connect();
    return c;
  }

  async createDatabase(name) {
    const admin = await this.connect('postgres');
    try {
      await admin.query(`CREATE DATABASE ${name}`);
    } finally {
      await admin.end();
    }
    const db = await this.connect(name);
    await db.query('CREATE EXTENSION hxstate');
    return db;
  }

  async stop() {
    if (this.child.exitCode === null) this.child.stdin.end('stop\n');
    await this.exited;
  }
}

module.exports = {
  Recorder, followAll, truth, waitForHeads, mismatches, gate, randomOps, runWriters, sampleConnections, backendPids,
  terminate, PrivateCluster,
};
