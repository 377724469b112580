'use strict';
// test/shard/common.js: what the sharding runs share: the check lines they
// print ("  ok   ..." / "  FAIL ..."), counted into "<label> <passed>
// <failed>" for HX_RESULTS; percentiles for the figures they print (never
// asserted); the router and shards built from the repository's SQL; the
// recorder of what each follower hands out.
const fs = require('node:fs');
const path = require('node:path');
const pg = require('pg');

const TOP = path.join(__dirname, '..', '..');
const MANUAL = fs.readFileSync(path.join(TOP, 'docs', 'sharding.md'), 'utf8');

/**
 * The SQL block of docs/sharding.md that follows the comment
 * <!-- shard-grants: NAME -->: the runs grant what the manual says, no
 * more, so that a grant it lacks fails them.
 */
function manualBlock(name) {
  const m = MANUAL.match(new RegExp(`<!-- shard-grants: ${name} [^>]*-->\\s*\`\`\`sql\\n([\\s\\S]*?)\`\`\``));
  if (!m) throw new Error(`docs/sharding.md has no block "shard-grants: ${name}"`);
  return m[1];
}

const SQL = {
  sessions: fs.readFileSync(path.join(TOP, 'docs', 'sessions.sql'), 'utf8'),
  shard: fs.readFileSync(path.join(TOP, 'shard', 'shard.sql'), 'utf8'),
  router: fs.readFileSync(path.join(TOP, 'shard', 'router.sql'), 'utf8'),
  roles: manualBlock('roles'),
  shardGrants: manualBlock('shard'),
  routerGrants: manualBlock('router'),
};

/** The roles of docs/sharding.md (app, mover, hub), once per server. */
async function createRoles(client) {
  const { rows } = await client.query("SELECT count(*)::int AS n FROM pg_roles WHERE rolname IN ('app', 'mover', 'hub')");
  if (rows[0].n === 0) await client.query(SQL.roles);
}

class Checks {
  constructor(label) {
    this.label = label;
    this.passed = 0;
    this.failed = 0;
  }

  ok(cond, what, detail) {
    if (cond) {
      this.passed++;
      console.log(`  ok   ${what}`);
    } else {
      this.failed++;
      console.log(`  FAIL ${what}${detail !== undefined ? `: ${detail}` : ''}`);
    }
    return cond;
  }

  /** Append "<label> <passed> <failed>" to HX_RESULTS; exit status. */
  finish() {
    console.log(`${this.label}: ${this.passed} passed, ${this.failed} failed`);
    if (process.env.HX_RESULTS) fs.appendFileSync(process.env.HX_RESULTS, `${this.label} ${this.passed} ${this.failed}\n`);
    return this.failed === 0 ? 0 : 1;
  }
}

function percentile(values, p) {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

/**
 * What a shard's database holds: hxstate, docs/sessions.sql,
 * shard/shard.sql, the log's publication, the roles and the grants of
 * docs/sharding.md.
 */
async function prepareShard(c) {
  await c.query('CREATE EXTENSION hxstate');
  await c.query(SQL.sessions);
  await c.query(SQL.shard);
  await c.query('SELECT hx_stream_publication()');
  await createRoles(c);
  await c.query(SQL.shardGrants);
}

/** A shard's database (prepareShard) on a server. */
async function setupShard(server, database) {
  await server.sql(`CREATE DATABASE ${database}`);
  const c = new pg.Client(server.config(database));
  await c.connect();
  try {
    await prepareShard(c);
  } finally {
    await c.end();
  }
}

/**
 * The router's database, with each conninfo added as a shard and the
 * buckets dealt round them, the roles and the grants of docs/sharding.md.
 * The conninfos name no user: PL/Proxy connects as the caller.
 */
async function setupRouter(server, database, conninfos) {
  await server.sql(`CREATE DATABASE ${database}`);
  const c = new pg.Client(server.config(database));
  await c.connect();
  try {
    await c.query(SQL.router);
    for (const ci of conninfos) await c.query('SELECT hxshard.add_shard($1, true)', [ci]);
    await createRoles(c);
    await c.query(SQL.routerGrants);
  } finally {
    await c.end();
  }
}

/**
 * Records what each follower hands out: every seq once and in order (a
 * gap or a duplicate is a violation), resyncs by reason, the last state.
 */
class Recorder {
  constructor() {
    this.violations = [];
    this.gaps = 0;
    this.duplicates = 0;
    this.events = 0;
    this.resyncs = {};
  }

  attach(sub) {
    const rec = { sub, last: null, resynced: false };
    sub.on('event', (event) => {
      const seq = event.metadata.seq;
      this.events++;
      if (rec.last !== null && !rec.resynced) {
        if (seq <= rec.last) {
          this.duplicates++;
          if (this.violations.length < 20) this.violations.push(`${sub.key}: ${rec.last} then ${seq}`);
        } else if (seq !== rec.last + 1) {
          this.gaps++;
          if (this.violations.length < 20) this.violations.push(`${sub.key}: ${rec.last} then ${seq}`);
        }
      }
      rec.resynced = false;
      rec.last = seq;
    });
    sub.on('resync', (r) => {
      rec.resynced = true;
      this.resyncs[r.reason] = (this.resyncs[r.reason] || 0) + 1;
    });
    return rec;
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(check, what, ms = 120000) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await sleep(50);
  }
}

module.exports = { Checks, percentile, prepareShard, setupShard, setupRouter, Recorder, SQL, TOP, sleep, waitFor };
