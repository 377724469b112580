'use strict';
// test/shard/standby.js: followers off the primary, and no divergence at
// failover (PostgreSQL 17 and later; run on 18 by test/shard/run).
//
//   HX_BINDIR=... HX_DIR=... node test/shard/standby.js [--long]
//
// Two servers on 127.0.0.1, a primary and a hot standby streaming from a
// physical slot (each has the slot of the other, for when the roles
// swap), replication asynchronous; hxstate with docs/sessions.sql;
// HX_SESSIONS sessions (50) written by 4 writers (hx_merge appends) on
// whichever server is the primary; an HxHub following every session.
//
// 1. Decoding on the standby: the hub's replication connection goes to
//    the standby (its reader to the primary).  Across the standby's
//    promotion (kill -9 of the primary, pg_ctl promote, the old primary
//    rewound into the new one's standby) and across a switchover (a clean
//    stop of the primary, promotion, rewind): every seq once, in order, no
//    resync, every follower at its row.
// 2. Failovers with the slot held back: the hub decodes on the primary
//    through a failover slot (failoverSlot), which
//    synchronized_standby_slots (the standby's slot) holds back; it does
//    not poll (replication being asynchronous here, a poll's read of the
//    log on the primary would show what the stream holds back: in
//    production synchronous replication keeps it from the reads).  Each
//    failover: the standby, once it has caught up, stops receiving
//    (primary_conninfo emptied: its WAL receiver ends), the writers go on for a while, the primary is
//    killed (kill -9), the
//    standby promoted without what it had not received, the old primary
//    rewound.  HX_FAILOVERS failovers (4; 20 with --long): 0 'diverged'
//    resyncs, every seq once, every follower at its row on the new
//    primary.  Before them, the same failover twice with a temporary slot
//    (no holdback): the followers must show 'diverged' resyncs there,
//    which shows that the failovers do lose commits a follower saw.
// 3. A misconfigured holdback is reported: synchronized_standby_slots
//    naming a slot that does not exist, then a standby that stops; each
//    an 'error' HX_HOLDBACK within two of the hub's checks (10 s), and
//    the repair seen.
const path = require('node:path');
const pg = require('pg');
const { Server, freePorts, makeDir, sleep, pluginSettings } = require('./servers');
const { Checks, Recorder, SQL, waitFor } = require('./common');
const { HxHub } = require('../../client');

const long = process.argv.includes('--long');
const BINDIR = process.env.HX_BINDIR;
const DIR = process.env.HX_DIR;
const SESSIONS = Number(process.env.HX_SESSIONS || 50);
const FAILOVERS = Number(process.env.HX_FAILOVERS || (long ? 20 : 4));
const WRITERS = 4;
const label = process.env.HX_LABEL || 'shard-standby';
const slotOf = (s) => `node_${s.name}`;

const checks = new Checks(label);
let nodes = [];        // [primary, standby], swapped at each failover
const keys = [];
for (let i = 1; i <= SESSIONS; i++) keys.push(`h-${i}`);

// Which server is the primary is the run's to say (nodes[0], swapped once
// a promotion has completed): nothing here probes a server while it is
// promoted.  (A probe that connected at the end of recovery, a bare
// SELECT pg_is_in_recovery(), failed an assertion in PostgreSQL 18.6's
// GetSnapshotData, TransactionXmin <= RecentXmin, in one failover of 27:
// core's race, not hxstate's; these runs keep out of its way.)
async function currentPrimary() {
  return nodes[0];
}

/** The standby (nodes[1]) when it is up as one, else the primary. */
async function currentStandby() {
  const s = nodes[1];
  try {
    if ((await s.sql('SELECT pg_is_in_recovery() AS r'))[0].r) return s;
  } catch (err) { /* down */ }
  return nodes[0];
}

// -- writers ---------------------------------------------------------------

function startWriters() {
  const state = { stop: false, paused: false, acked: 0, errors: 0, busy: 0 };
  let n = 0;
  const one = async (w) => {
    let c = null;
    for (let i = 0; !state.stop; i++) {
      if (state.paused) {
        await sleep(20);
        continue;
      }
      state.busy++;
      try {
        if (!c) {
          const p = await currentPrimary();
          c = new pg.Client(p.config('app'));
          c.on('error', () => {});
          await c.connect();
        }
        const k = keys[(w * 7919 + i) % keys.length];
        await c.query('UPDATE sessions SET state = hx_merge(state, $2) WHERE session_id = $1',
          [k, JSON.stringify([{ op: 'append', path: '/items', items: [`${w}-${n++}`] }])]);
        state.acked++;
      } catch (err) {
        state.errors++;
        if (c) c.end().catch(() => {});
        c = null;
        await sleep(20);
      } finally {
        state.busy--;
      }
    }
    if (c) await c.end().catch(() => {});
  };
  /** Stop writing for a while (the writes in flight finish first). */
  state.pause = async () => {
    state.paused = true;
    await waitFor(() => state.busy === 0, 'the writes in flight');
  };
  state.resume = () => { state.paused = false; };
  state.done = Promise.all(Array.from({ length: WRITERS }, (_, w) => one(w)));
  return state;
}

async function waitAcks(writers, n) {
  const want = writers.acked + n;
  await waitFor(() => writers.acked >= want, `${n} more writes`);
}

// -- followers -------------------------------------------------------------

async function follow(hubOptions) {
  const hub = new HxHub({ reconnect: { min: 50, max: 1000 }, ...hubOptions });
  const errors = [];
  hub.on('error', (err) => errors.push(err));
  await hub.start();
  const rec = new Recorder();
  const subs = keys.map((k) => {
    const sub = hub.follow({ table: 'sessions', key: k });
    rec.attach(sub);
    return sub;
  });
  await Promise.all(subs.map((s) => s.ready));
  return { hub, rec, subs, errors };
}

/**
 * The hub decodes on the primary again (20 more events of followed
 * streams), and every follower has reached the seq its row had then: the
 * reads that caught it up after a failover are done.
 */
async function settled(f) {
  const mark = f.hub.stats.walEvents;
  await waitFor(() => f.hub.stats.walEvents >= mark + 20, 'the hub decoding on the primary');
  const p = await currentPrimary();
  const rows = await p.sql(`SELECT s.session_id AS k, h.seq
    FROM sessions s CROSS JOIN LATERAL hx_stream_snapshot('sessions', s.session_id) h`, [], 'app');
  const heads = new Map(rows.map((r) => [r.k, Number(r.seq)]));
  await waitFor(() => f.subs.every((s) => s.seq >= heads.get(s.key)), 'every follower caught up', 60000);
}

/** Every follower at its row's seq and state on the primary (the writers paused meanwhile). */
async function checkFollowers(f, what, writers) {
  await writers.pause();
  try {
    await checkRows(f, what);
  } finally {
    writers.resume();
  }
}

async function checkRows(f, what) {
  const p = await currentPrimary();
  const rows = await p.sql(`SELECT s.session_id AS k, s.state::jsonb AS state, h.seq
    FROM sessions s CROSS JOIN LATERAL hx_stream_snapshot('sessions', s.session_id) h`, [], 'app');
  const by = new Map(rows.map((r) => [r.k, r]));
  try {
    await waitFor(() => f.subs.every((s) => s.seq === Number(by.get(s.key).seq)), `${what}: followers at their heads`, 60000);
  } catch (err) { /* reported below */ }
  const behind = f.subs.filter((s) => s.seq !== Number(by.get(s.key).seq));
  checks.ok(behind.length === 0, `${what}: every follower at its row's seq`, behind.slice(0, 3).map((s) => `${s.key}: ${s.seq} of ${by.get(s.key).seq}`).join(', '));
  const wrong = f.subs.filter((s) => JSON.stringify(s.state) !== JSON.stringify(by.get(s.key).state));
  checks.ok(wrong.length === 0, `${what}: every follower's state is its row's`, wrong.slice(0, 3).map((s) => s.key).join(', '));
}

// -- the servers -----------------------------------------------------------

/** Keep the slot of the other server on s (reserved now), for when s is the primary. */
async function keepSlot(s, other) {
  await s.sql(`SELECT pg_create_physical_replication_slot($1, true)
                WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, [slotOf(other)]);
}

/** The standby has replayed what the primary has written so far. */
async function caughtUp(primary, standby) {
  const [{ lsn }] = await primary.sql('SELECT pg_current_wal_lsn()::text AS lsn');
  await waitFor(async () => {
    const r = await standby.sql('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', [lsn]).catch(() => [{ ok: false }]);
    return r[0].ok;
  }, `${standby.name} replaying up to ${lsn}`);
}

async function streaming(primary, standby) {
  await waitFor(async () => {
    const r = await primary.sql('SELECT active FROM pg_replication_slots WHERE slot_name = $1', [slotOf(standby)]).catch(() => []);
    return r.length === 1 && r[0].active;
  }, `${standby.name} streaming from ${primary.name}`);
}

/**
 * A failover: optionally the standby lags first (its WAL receiver
 * stopped while the writers go on), then kill -9 of the primary (or a
 * clean stop: a switchover), the standby promoted, the old primary
 * rewound into its standby.
 */
async function failover(writers, { lag = false, clean = false, seen = null } = {}) {
  const [primary, standby] = nodes;
  if (lag) {
    // First the standby has everything committed so far.  The hub's
    // stream is held back, but its reads are not: after the last failover
    // it caught its followers up by reading the log on the new primary
    // while this standby was still being rewound, and replication here is
    // asynchronous (docs/sharding.md: the reads need synchronous
    // replication).  Losing those commits too would measure the reads;
    // this run measures the stream.
    await caughtUp(primary, standby);
    // the standby stops receiving (its WAL receiver ends: no primary to
    // stream from); what the writers commit from now on it never gets
    standby.configure({ primary_conninfo: '' });
    await standby.reload();
    await waitFor(async () => (await standby.sql('SELECT count(*)::int AS n FROM pg_stat_wal_receiver'))[0].n === 0,
      `${standby.name}'s WAL receiver gone`);
    await waitAcks(writers, 40);
    // (without the holdback: until the hub has decoded some of them)
    if (seen) await seen();
  }
  if (clean) await primary.stop('fast');
  else await primary.kill();
  await standby.promote();
  nodes = [standby, primary];
  await primary.stop('immediate').catch(() => {});
  await primary.rewindTo(standby, slotOf(primary), { synchronized_standby_slots: slotOf(standby) });
  await primary.start();
  await keepSlot(primary, standby);
  await streaming(standby, primary);
}

async function main() {
  const ports = await freePorts(2);
  makeDir(DIR);
  const a = new Server(BINDIR, path.join(DIR, 'a'), ports[0], 'a');
  const b = new Server(BINDIR, path.join(DIR, 'b'), ports[1], 'b');
  nodes = [a, b];
  let f = null;
  let writers = null;
  try {
    await a.init({ fsync: 'on', wal_log_hints: 'on', synchronized_standby_slots: slotOf(b), wal_sender_timeout: '10s' });
    await a.start();
    await a.sql('SELECT pg_create_physical_replication_slot($1, true)', [slotOf(b)]);
    await b.initStandby(a, slotOf(b), { synchronized_standby_slots: slotOf(a) });
    await b.start();
    await keepSlot(b, a);
    await streaming(a, b);
    await a.sql('CREATE DATABASE app');
    const c = new pg.Client(a.config('app'));
    await c.connect();
    await c.query('CREATE EXTENSION hxstate');
    await c.query(SQL.sessions);
    await c.query('SELECT hx_stream_publication()');
    await c.query("INSERT INTO sessions (session_id, user_id, state) SELECT k, 'u', '{\"items\": []}' FROM unnest($1::text[]) k", [keys]);
    await c.end();
    await caughtUp(a, b);
    writers = startWriters();
    await waitAcks(writers, 100);

    // 1. decoding on the standby, across its promotion and a switchover
    console.log('== 1. the hub decodes on the standby');
    const onStandby = async (role) => (role === 'replication' ? currentStandby() : currentPrimary()).then((s) => s.config('app'));
    f = await follow({ pg: onStandby, transport: 'wal' });
    checks.ok(f.hub.transport === 'wal', 'the hub follows over the WAL');
    const decodedOn = (await nodes[1].sql("SELECT count(*)::int AS n, max(plugin) AS plugin FROM pg_replication_slots WHERE slot_type = 'logical' AND active", []))[0];
    checks.ok(decodedOn.n === 1, 'its slot is on the standby');
    // the servers here trust hxstate's output plugin where they have the setting (servers.js)
    const plugin = pluginSettings(BINDIR).output_plugin_libraries ? 'hxstate' : 'pgoutput';
    checks.ok(f.hub.decoder === plugin && decodedOn.plugin === plugin, `the standby decodes with ${plugin}'s plugin`, `${f.hub.decoder} / ${decodedOn.plugin}: ${f.hub.decoderReason}`);
    const primarySlots = (await nodes[0].sql("SELECT count(*)::int AS n FROM pg_replication_slots WHERE slot_type = 'logical'", []))[0];
    checks.ok(primarySlots.n === 0, 'the primary decodes nothing for it');
    await waitAcks(writers, 200);
    await failover(writers, { clean: false });
    console.log(`  promoted ${nodes[0].name} (the standby the hub decodes on) after kill -9 of ${nodes[1].name}`);
    await waitAcks(writers, 200);
    await failover(writers, { clean: true });
    console.log(`  switchover to ${nodes[0].name}`);
    await waitAcks(writers, 200);
    await checkFollowers(f, 'decoding on the standby', writers);
    checks.ok(f.rec.gaps === 0 && f.rec.duplicates === 0, `decoding on the standby: every seq once, in order (${f.rec.events} events)`, f.rec.violations.join('; '));
    checks.ok(Object.keys(f.rec.resyncs).length === 0, 'decoding on the standby: no resync', JSON.stringify(f.rec.resyncs));
    await f.hub.stop();
    f = null;

    // 2. failovers: first without the holdback (a temporary slot), then with it
    const onPrimary = async () => (await currentPrimary()).config('app');
    console.log('== 2. failovers without the holdback (a temporary slot)');
    f = await follow({ pg: onPrimary, transport: 'wal' });
    for (let i = 0; i < 2; i++) {
      await waitAcks(writers, 100);
      await settled(f); // as below: the stream is what loses commits here, not a late read
      const hub = f.hub;
      let mark = null;
      await failover(writers, {
        lag: true,
        seen: () => {
          mark = hub.stats.walEvents;
          return waitFor(() => hub.stats.walEvents >= mark + 20, 'the hub decoding what the standby lacks');
        },
      });
    }
    await waitAcks(writers, 100);
    await checkFollowers(f, 'without the holdback', writers);
    const control = f.rec.resyncs.diverged || 0;
    checks.ok(control > 0, `without the holdback the followers showed commits the failovers lost (${control} 'diverged' resyncs): the failovers below lose commits`);
    await f.hub.stop();
    f = null;

    console.log(`== 2. ${FAILOVERS} failovers with the slot held back (failoverSlot, synchronized_standby_slots)`);
    // no polls: replication here is asynchronous, and a poll that reads the
    // log on the primary while the standby lags would read what the
    // holdback keeps from the stream (synchronous replication keeps it
    // from the reads: docs/sharding.md); this run measures the stream
    f = await follow({ pg: onPrimary, transport: 'wal', failoverSlot: true, slotName: 'hx_test_hub', holdbackInterval: 5000,
      pollInterval: 0 });
    const holdbackErrors = [];
    f.hub.on('error', (err) => { if (err.code === 'HX_HOLDBACK') holdbackErrors.push(err.message); });
    await waitFor(() => f.hub.holdback !== undefined, 'the first holdback check');
    checks.ok(f.hub.holdback === null, 'the holdback is configured', f.hub.holdback);
    for (let i = 0; i < FAILOVERS; i++) {
      await waitAcks(writers, 100);
      // the hub has come back from the last failover (its stream is live
      // on the new primary, and every follower has read what it missed)
      // before the standby lags: a catch-up read that came after the
      // standby stopped receiving would read what the standby never gets
      // (reads are not held back: docs/sharding.md), and this run
      // measures the stream
      await settled(f);
      await failover(writers, { lag: true });
      process.stdout.write(`  failover ${i + 1}: ${nodes[0].name} promoted, ${writers.acked} writes acknowledged, ${f.hub.stats.divergences} divergences\n`);
    }
    await waitAcks(writers, 100);
    await checkFollowers(f, 'with the holdback', writers);
    checks.ok((f.rec.resyncs.diverged || 0) === 0 && f.hub.stats.divergences === 0, `${FAILOVERS} failovers: no follower showed a commit a failover lost (0 'diverged' resyncs)`, JSON.stringify(f.rec.resyncs));
    checks.ok(f.rec.gaps === 0 && f.rec.duplicates === 0, `with the holdback: every seq once, in order (${f.rec.events} events)`, f.rec.violations.join('; '));

    // 3. a misconfigured holdback is reported
    console.log('== 3. a misconfigured holdback');
    const [primary, standby] = nodes;
    const reported = async (what, pattern, act) => {
      holdbackErrors.length = 0; // what was reported before (the failovers above) does not count
      await act();
      const t0 = Date.now();
      try {
        await waitFor(() => holdbackErrors.some((m) => pattern.test(m)), what, 10000);
        checks.ok(true, `${what}: reported (HX_HOLDBACK) in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      } catch (err) {
        checks.ok(false, `${what}: reported within 10 s`, `hub.holdback = ${f.hub.holdback}`);
      }
    };
    await reported('synchronized_standby_slots names a slot that does not exist', /"no_such_slot", which does not exist/, async () => {
      await primary.sql("ALTER SYSTEM SET synchronized_standby_slots = 'no_such_slot'");
      await primary.sql('SELECT pg_reload_conf()');
    });
    await primary.sql('ALTER SYSTEM RESET synchronized_standby_slots');
    await primary.sql('SELECT pg_reload_conf()');
    await waitFor(() => f.hub.holdback === null, 'the repair seen', 15000).catch(() => {});
    checks.ok(f.hub.holdback === null, 'the repaired holdback is seen');
    await reported('the standby stops streaming', new RegExp(`"${slotOf(standby)}", which no standby streams from`),
      () => standby.stop('fast'));
    await standby.start();
    await streaming(primary, standby);
    writers.stop = true;
    await writers.done;
    for (const s of nodes) {
      const p = s.problems();
      checks.ok(p.length === 0, `no crash in ${s.name}'s log`, p.slice(0, 3).join('\n'));
    }
  } catch (err) {
    checks.ok(false, 'the run completes', err.stack);
  } finally {
    if (writers) {
      writers.stop = true;
      await Promise.race([writers.done, sleep(5000)]);
    }
    if (f) await f.hub.stop().catch(() => {});
    for (const s of [a, b]) await s.stop('immediate').catch(() => {});
  }
  return checks.finish();
}

main().then((code) => process.exit(code), (err) => {
  console.error(err);
  process.exit(1);
});
