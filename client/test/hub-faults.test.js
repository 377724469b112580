'use strict';
// The hub's guarantees survive what happens to connections and processes,
// while 8 writers run random hx_merge writes over 300 of 1,000 followed
// streams: every stream hands out every seq exactly once, in order, and
// ends at its head with the row's state, through
//   - connection cuts: pg_terminate_backend of every hub connection (the
//     reader and the transport), twice, over the WAL and over LISTEN;
//   - the replication slot dropped by an administrator: its walsender
//     terminated (the slot is temporary, so it goes with it), twice;
//   - the hub's process killed with kill -9 and started again: a child
//     process records each event as it hands it out, and the new process
//     resumes every stream after the last seq the dead one handed out.
// The server crash (kill -9 of the server) is in hub-server.test.js, on a
// cluster of its own.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const h = require('../../test/js/helpers');
const { HxHub, applyEvent } = require('..');
const { followAll, truth, waitForHeads, mismatches, runWriters, sampleConnections, terminate } = require('./hub-helpers');

const DB = 'hx_hub_faults';
const STREAMS = 1000;
const HOT = 300;
const WRITERS = 8;
const WRITES = 200;
const keys = Array.from({ length: STREAMS }, (_, k) => `k-${k + 1}`);

let db;
before(async () => {
  db = await h.freshDatabase(DB);
  await db.query('SELECT hx_stream_publication()');
});
after(async () => { await db.end(); });

async function streamTable(name) {
  await h.streamTable(db, name);
  await db.query(`INSERT INTO ${name} SELECT 'k-' || g, jsonb_build_object('n', 0) FROM generate_series(1, ${STREAMS}) g`);
}

function writers(table, seed, progress) {
  return runWriters({
    connect: () => h.connect(DB), n: WRITERS, writes: WRITES, table, keys: keys.slice(0, HOT), seed,
    bigChance: 0.02, onCommit: (n) => { progress.commits = n; },
  });
}

async function slotExists(slot) {
  const { rows } = await db.query('SELECT count(*)::int AS n FROM pg_replication_slots WHERE slot_name = $1', [slot]);
  return rows[0].n > 0;
}

for (const [i, transport] of ['wal', 'listen'].entries()) {
  test(`every hub connection terminated twice, over ${transport === 'wal' ? 'the WAL' : 'LISTEN'}`, async (t) => {
    const table = `cut_${transport}`;
    const app = `hx-hub-cut-${transport}`;
    await streamTable(table);
    const sampler = sampleConnections(db, app);
    const hub = new HxHub({ pg: { database: DB, application_name: app }, transport, pollInterval: 500,
      reconnect: { min: 20, max: 200 } });
    try {
      await hub.start();
      const rec = await followAll(hub, table, keys);
      const progress = { commits: 0 };
      const writing = writers(table, 11 + i, progress);
      const cutting = (async () => {
        for (const at of [400, 1000]) {
          await h.waitFor(() => progress.commits >= at && hub.connected, `${at} commits and a connected hub`);
          const lost = hub.stats.disconnects;
          assert.equal(await terminate(db, app, null, sampler), 2, 'the reader and the transport');
          // both noticed, and both back (in one reconnect or two)
          await h.waitFor(() => hub.stats.disconnects === lost + 2 && hub.connected, `the reconnect after ${at} commits`);
        }
      })();
      await Promise.all([writing, cutting]);
      const tr = await waitForHeads(db, table, rec.records, 'every stream at its head');
      t.diagnostic(`hub stats ${JSON.stringify(hub.stats)}`);
      assert.deepStrictEqual(rec.violations, []);
      assert.deepStrictEqual(mismatches(tr, rec.records), []);
      assert.equal(rec.resyncs, 0);
      assert.equal(hub.stats.disconnects, 4);
      assert.ok(hub.stats.reconnects >= 2);
    } finally {
      await hub.stop();
      const max = await sampler.stop();
      assert.ok(max <= 3, `at most 3 connections at once (${max})`);
    }
  });
}

test('the replication slot dropped by an administrator, twice', async (t) => {
  const table = 'slot_drop';
  const app = 'hx-hub-slot';
  await streamTable(table);
  const hub = new HxHub({ pg: { database: DB, application_name: app }, transport: 'wal', pollInterval: 500,
    reconnect: { min: 20, max: 200 } });
  try {
    await hub.start();
    const rec = await followAll(hub, table, keys);
    const progress = { commits: 0 };
    const writing = writers(table, 23, progress);
    const dropping = (async () => {
      for (const at of [300, 900]) {
        await h.waitFor(() => progress.commits >= at && hub.slot, `${at} commits`);
        const slot = hub.slot;
        assert.ok(await slotExists(slot), `the hub's slot ${slot} is in pg_replication_slots`);
        // A temporary slot is its walsender's: terminating the walsender
        // drops it; drop it by hand should it linger.
        await db.query('SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1', [slot]);
        await h.waitFor(async () => {
          await db.query(`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                           WHERE slot_name = $1 AND NOT active`, [slot]).catch(() => {});
          return !(await slotExists(slot));
        }, 'the slot to be gone');
        await h.waitFor(async () => hub.slot && hub.slot !== slot && slotExists(hub.slot), 'a new slot');
      }
    })();
    await Promise.all([writing, dropping]);
    const tr = await waitForHeads(db, table, rec.records, 'every stream at its head');
    t.diagnostic(`hub stats ${JSON.stringify(hub.stats)}`);
    assert.deepStrictEqual(rec.violations, []);
    assert.deepStrictEqual(mismatches(tr, rec.records), []);
    assert.equal(hub.stats.disconnects, 2, 'the replication connection, twice');
    assert.equal(hub.stats.reconnects, 2);
  } finally {
    await hub.stop();
  }
});

/** The lines a child wrote: {k, e} per event handed out, {k, resync} before a resync's snapshot. */
function readLines(file) {
  const out = [];
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  for (const line of text.split('\n')) {
    if (!line) continue;
    try {
      out.push(JSON.parse(line));
    } catch (err) {
      break; // a line being written as we read
    }
  }
  return out;
}

function startChild(cfg) {
  const child = spawn(process.execPath, [path.join(__dirname, 'hub-child.js'), JSON.stringify(cfg)],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  child.out = '';
  child.stdout.on('data', (d) => { child.out += d; });
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return child;
}

test('the hub process killed with kill -9 and started again', async (t) => {
  const table = 'proc_kill';
  const app = 'hx-hub-child';
  await streamTable(table);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hx-hub-child-'));
  const out = path.join(dir, 'events.jsonl');
  const cfg = { pg: { database: DB, application_name: app }, table, keys, resume: {}, out, transport: 'wal' };
  let child = startChild(cfg);
  try {
    await h.waitFor(() => child.out.includes('ready'), 'the first process to be ready');
    const slot = child.out.split(' ')[2].trim();
    assert.ok(await slotExists(slot));
    const progress = { commits: 0 };
    const writing = writers(table, 31, progress);

    await h.waitFor(() => progress.commits >= 500, '500 commits');
    child.kill('SIGKILL');
    assert.deepStrictEqual(await child.exited, { code: null, signal: 'SIGKILL' });
    // the server notices the dead process: its connections and its slot go
    await h.waitFor(async () => !(await slotExists(slot)), 'the dead hub\'s slot to go');
    await h.waitFor(async () => (await h.backendPids(db, app)).length === 0, 'the dead hub\'s connections to go');

    // resume each stream after the last seq the dead process handed out
    const handed = readLines(out);
    const resume = {};
    for (const line of handed) if (line.e) resume[line.k] = line.e.metadata.seq;
    assert.ok(Object.keys(resume).length === STREAMS, 'the first process had started every stream');
    child = startChild({ ...cfg, resume });
    await h.waitFor(() => child.out.includes('ready'), 'the second process to be ready');
    const commits = await writing;
    assert.equal(commits, WRITERS * WRITES);

    // the union of what both processes handed out, stream by stream
    const records = keys.map((key) => ({ key, sub: { stream: `${table}:${key}` } }));
    const tr = await truth(db, table, records);
    let lines;
    await h.waitFor(() => {
      lines = readLines(out);
      const last = new Map();
      for (const line of lines) if (line.e) last.set(line.k, line.e.metadata.seq);
      return records.every((r) => last.get(r.key) === tr.heads.get(r.sub.stream));
    }, 'the second process to hand out every head');
    const byKey = new Map(records.map((r) => [r.key, Object.assign(r, { last: null, state: null, resync: false })]));
    const violations = [];
    for (const line of lines) {
      const r = byKey.get(line.k);
      if (line.resync !== undefined) {
        r.resync = true;
        continue;
      }
      const seq = line.e.metadata.seq;
      if (r.last !== null && !r.resync && seq !== r.last + 1) violations.push(`${line.k}: ${r.last} then ${seq}`);
      r.resync = false;
      r.last = seq;
      r.state = applyEvent(r.state, line.e);
    }
    t.diagnostic(`${lines.length} events handed out, ${handed.length} by the killed process`);
    assert.deepStrictEqual(violations.slice(0, 20), []);
    assert.deepStrictEqual(mismatches(tr, records), []);
    assert.ok(handed.length > STREAMS, 'the killed process had handed out events after the snapshots');
    assert.ok(lines.length > handed.length, 'the second process handed out events');
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await child.exited;
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
