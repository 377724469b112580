'use strict';
// One hub follows 10,000 streams (10,000 rows of a table with hx_stream)
// while 8 writer connections run random hx_merge writes over 1,000 of them,
// some of them over NOTIFY's 8000 bytes: every followed stream hands out
// its snapshot and then every seq exactly once, in order, and ends at its
// head with the row's state.  The same over the WAL and over LISTEN.
// Throughout, the hub holds at most three connections (counted in
// pg_stat_activity by application_name), and its reads are batched: far
// fewer statements than streams.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');
const { HxHub } = require('..');
const { Recorder, waitForHeads, mismatches, runWriters, sampleConnections } = require('./hub-helpers');

const DB = 'hx_hub_scale';
const STREAMS = 10000;
const HOT = 1000;      // rows the writers write
const WRITERS = 8;
const WRITES = 250;    // per writer

let db;
before(async () => {
  db = await h.freshDatabase(DB);
  await h.streamTable(db, 'sessions');
  await db.query('SELECT hx_stream_publication()');
  await db.query(`INSERT INTO sessions SELECT 's-' || g, jsonb_build_object('n', 0, 'g', g)
                    FROM generate_series(1, ${STREAMS}) g`);
});
after(async () => { await db.end(); });

for (const [i, transport] of ['wal', 'listen'].entries()) {
  test(`${STREAMS} streams over ${transport === 'wal' ? 'the WAL' : 'LISTEN'}, ${WRITERS} writers`, async (t) => {
    const app = `hx-hub-scale-${transport}`;
    const sampler = sampleConnections(db, app);
    const hub = new HxHub({ pg: { database: DB, application_name: app }, transport, pollInterval: 1000 });
    const rec = new Recorder();
    try {
      await hub.start();
      assert.equal(hub.transport, transport);
      const keys = Array.from({ length: STREAMS }, (_, k) => `s-${k + 1}`);
      const subs = keys.map((key) => {
        const sub = hub.follow({ table: 'sessions', key });
        rec.attach(sub, key);
        return sub;
      });
      await Promise.all(subs.map((s) => s.ready));
      // one statement per 1,000 streams (batchSize) for the names; the
      // snapshots of 1,000 too, read as the streams' LISTENs complete (in
      // batches of 1,000 that need not line up with them)
      assert.equal(hub.stats.nameReads, STREAMS / 1000);
      assert.ok(hub.stats.snapshotReads <= 2 * (STREAMS / 1000), `${hub.stats.snapshotReads} snapshot reads`);
      assert.equal(hub.stats.streams, STREAMS);

      const commits = await runWriters({
        connect: () => h.connect(DB), n: WRITERS, writes: WRITES, table: 'sessions',
        keys: keys.slice(0, HOT), seed: 7 + i, bigChance: 0.02,
      });
      assert.equal(commits, WRITERS * WRITES);
      const truth = await waitForHeads(db, 'sessions', rec.records, 'every stream at its head');

      t.diagnostic(`events ${rec.events}, hub stats ${JSON.stringify(hub.stats)}`);
      assert.deepStrictEqual(rec.violations, []);
      assert.deepStrictEqual(mismatches(truth, rec.records), []);
      assert.equal(rec.resyncs, 0);
      // every event of the run was handed out once: the snapshots and the writes
      assert.equal(rec.events, STREAMS + WRITERS * WRITES);
      // the reads are batched: the timed polls read heads 1,000 streams a
      // statement (how many polls depends on how long the machine takes),
      // and every other statement is far fewer than the streams
      assert.ok(hub.stats.headReads <= (hub.stats.polls + 10) * (STREAMS / 1000), `${hub.stats.headReads} head reads in ${hub.stats.polls} polls`);
      assert.ok(hub.stats.queries - hub.stats.headReads < STREAMS / 10, `${hub.stats.queries - hub.stats.headReads} statements besides the heads`);
      if (transport === 'listen') assert.ok(hub.stats.references > 0, 'some events came as references');
      else assert.ok(hub.stats.walEvents >= WRITERS * WRITES);
    } finally {
      await hub.stop();
      const max = await sampler.stop();
      assert.ok(max >= 2 && max <= 3, `at most 3 connections at once (${max})`);
      assert.ok(hub.stats.maxConnections <= 3);
    }
  });
}
