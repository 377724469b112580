'use strict';
// What happens to the server, on a cluster of this file's own (the shared
// cluster runs every other test file, and its log is checked for crashes):
//   - the server killed with kill -9 (test/lib/cluster.sh's hx_cluster_kill:
//     the postmaster and every server process) and started again (crash
//     recovery) while 8 writers write and a hub follows 1,000 streams over
//     the WAL: every stream still hands out every seq exactly once, in
//     order, and ends at its head with the row's state; the hub
//     reconnects, on a new temporary slot, by itself;
//   - wal_level = replica: 'auto' follows over LISTEN and says why, and
//     'wal' refuses to start, saying why.
// The cluster is started by a bash child running test/lib/cluster.sh with
// the binaries of the server under test (the shared cluster's BINDIR).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');
const { HxHub } = require('..');
const { Recorder, followAll, waitForHeads, mismatches, runWriters, PrivateCluster } = require('./hub-helpers');

const DB = 'hx_hub_server';
const STREAMS = 1000;
const HOT = 300;
const keys = Array.from({ length: STREAMS }, (_, k) => `k-${k + 1}`);

let cluster;
before(async () => {
  cluster = await PrivateCluster.start();
});
after(async () => {
  if (cluster) await cluster.stop();
});

test('the server killed with kill -9 and restarted', async (t) => {
  let db = await cluster.createDatabase(DB);
  await h.streamTable(db, 'sessions');
  await db.query('SELECT hx_stream_publication()');
  await db.query(`INSERT INTO sessions SELECT 'k-' || g, '{"n": 0}' FROM generate_series(1, ${STREAMS}) g`);
  const hub = new HxHub({ pg: cluster.config(DB, { application_name: 'hx-hub-crash' }), pollInterval: 500,
    reconnect: { min: 50, max: 500 } });
  const lost = [];
  hub.on('error', (err) => lost.push(err.message));
  try {
    await hub.start();
    assert.equal(hub.transport, 'wal');
    const slot = hub.slot;
    const rec = await followAll(hub, 'sessions', keys);
    const progress = { commits: 0 };
    const writing = runWriters({
      connect: () => cluster.connect(DB), n: 8, writes: 150, table: 'sessions', keys: keys.slice(0, HOT),
      seed: 41, bigChance: 0.02, survive: true, onCommit: (n) => { progress.commits = n; },
    });
    await h.waitFor(() => progress.commits >= 400, '400 commits');
    db.on('error', () => {});
    await db.end().catch(() => {});
    assert.equal(await cluster.command('kill'), 'done');
    await h.sleep(300); // writes and reconnects fail meanwhile
    assert.equal(await cluster.command('up'), 'done');
    db = await cluster.connect(DB);
    await writing;
    await h.waitFor(() => hub.stats.reconnects >= 1 && hub.connected, 'the hub to reconnect');
    const truth = await waitForHeads(db, 'sessions', rec.records, 'every stream at its head');
    t.diagnostic(`hub stats ${JSON.stringify(hub.stats)}; errors seen: ${lost.length}`);
    assert.deepStrictEqual(rec.violations, []);
    assert.deepStrictEqual(mismatches(truth, rec.records), []);
    assert.equal(hub.transport, 'wal');
    assert.notEqual(hub.slot, slot, 'a new slot after the crash');
    const { rows } = await db.query('SELECT slot_name FROM pg_replication_slots');
    assert.deepStrictEqual(rows.map((r) => r.slot_name), [hub.slot], 'only the new slot');
  } finally {
    await hub.stop();
    await db.end().catch(() => {});
  }
  // the kill -9 is the only thing that happened to the server
  assert.equal(await cluster.command('check'), 'done');
});

test('wal_level = replica: auto follows over LISTEN and says why; wal refuses', async () => {
  assert.equal(await cluster.command('reconfigure wal_level=replica'), 'done');
  const db = await cluster.connect(DB);
  const wal = new HxHub({ pg: cluster.config(DB), transport: 'wal' });
  await assert.rejects(wal.start(), /cannot follow over the WAL: wal_level is replica, not logical/);

  const hub = new HxHub({ pg: cluster.config(DB), pollInterval: 0 });
  const said = [];
  hub.on('transport', (info) => said.push(info));
  try {
    await hub.start();
    assert.equal(hub.transport, 'listen');
    assert.equal(hub.transportReason, 'wal_level is replica, not logical: following over LISTEN');
    assert.deepStrictEqual(said, [{ transport: 'listen', reason: hub.transportReason }]);
    const rec = new Recorder();
    const subs = keys.slice(0, 50).map((key) => {
      const sub = hub.follow({ table: 'sessions', key });
      rec.attach(sub, key);
      return sub;
    });
    await Promise.all(subs.map((s) => s.ready));
    await runWriters({ connect: () => cluster.connect(DB), n: 4, writes: 50, table: 'sessions',
      keys: keys.slice(0, 50), seed: 43, bigChance: 0.05 });
    const truth = await waitForHeads(db, 'sessions', rec.records, 'every stream at its head');
    assert.deepStrictEqual(rec.violations, []);
    assert.deepStrictEqual(mismatches(truth, rec.records), []);
    assert.ok(hub.stats.notifications > 0);
  } finally {
    await hub.stop();
    await db.end();
  }
});
