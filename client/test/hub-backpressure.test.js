'use strict';
// A consumer that stalls (its 'event' listener returns a promise that does
// not settle) holds back only its own subscription: the other streams of
// the hub keep being handed every event, the stalled subscription's queue
// never holds more than maxQueue events, and once the consumer goes on it
// is exact again:
//   - overflow 'log' (the default): it gets every seq, once, in order,
//     read from the log after the events it had queued;
//   - overflow 'snapshot': what was queued is dropped, and it resumes
//     with 'resync' (reason 'overflow') and a fresh snapshot.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');
const { HxHub } = require('..');
const { Recorder, waitForHeads, mismatches, gate, runWriters } = require('./hub-helpers');

const DB = 'hx_hub_backpressure';
const STREAMS = 50;
const MAX_QUEUE = 20;
const keys = Array.from({ length: STREAMS }, (_, k) => `b-${k + 1}`);

let db;
before(async () => {
  db = await h.freshDatabase(DB);
  await db.query('SELECT hx_stream_publication()');
});
after(async () => { await db.end(); });

for (const [i, overflow] of ['log', 'snapshot'].entries()) {
  test(`a stalled consumer holds back only itself (overflow '${overflow}')`, async (t) => {
    const table = `bp_${overflow}`;
    await h.streamTable(db, table);
    await db.query(`INSERT INTO ${table} SELECT 'b-' || g, '{"n": 0}' FROM generate_series(1, ${STREAMS}) g`);
    const hub = new HxHub({ pg: { database: DB }, maxQueue: MAX_QUEUE, pollInterval: 200 });
    try {
      await hub.start();
      const rec = new Recorder();
      const subs = keys.map((key) => {
        const sub = hub.follow({ table, key }, key === 'b-1' ? { overflow } : {});
        rec.attach(sub, key);
        return sub;
      });
      const stalled = subs[0];
      const stalledRec = rec.records[0];
      // the stalled consumer: the snapshot goes through, then it hangs on
      // the first delta until the gate opens
      const g = gate();
      let hung = null;
      let maxQueued = 0;
      stalled.on('event', (event) => {
        maxQueued = Math.max(maxQueued, stalled.queued);
        if (event.type === 'STATE_DELTA' && hung === null) {
          hung = event.metadata.seq;
          return g.promise;
        }
        return undefined;
      });
      // a slow but steady consumer
      subs[1].on('event', () => h.sleep(2));
      await Promise.all(subs.map((s) => s.ready));

      // one write on the stalled stream, and its consumer hangs on it (a
      // burst of more than maxQueue events in one read would overflow the
      // queue before the consumer had any); then 160 more, and 300 over
      // the others
      await h.merge(db, table, 'b-1', [{ op: 'increment', path: '/n', by: 1 }]);
      await h.waitFor(() => hung !== null, 'the consumer to hang');
      await runWriters({ connect: () => h.connect(DB), n: 4, writes: 40, table, keys: ['b-1'], seed: 51 + i });
      await runWriters({ connect: () => h.connect(DB), n: 4, writes: 75, table, keys: keys.slice(1), seed: 61 + i });

      // the others are all at their heads while b-1 still hangs
      const others = rec.records.slice(1);
      const truth = await waitForHeads(db, table, others, 'the other streams at their heads');
      assert.deepStrictEqual(mismatches(truth, others), []);
      assert.equal(stalled.seq, hung, 'the stalled consumer is still on its first delta');
      assert.equal(stalled.behind, true);
      assert.ok(stalled.queued <= MAX_QUEUE, `${stalled.queued} queued`);
      assert.ok(stalled.stats.maxQueued <= MAX_QUEUE, `at most ${stalled.stats.maxQueued} queued`);
      assert.ok(stalled.stats.overflows > 0);
      for (const s of subs) assert.ok(s.stats.maxQueued <= MAX_QUEUE);

      // the consumer goes on, and the stalled stream reaches its head, exactly
      g.open();
      const all = await waitForHeads(db, table, rec.records, 'every stream at its head');
      t.diagnostic(`b-1 stats ${JSON.stringify(stalled.stats)}; hub ${JSON.stringify(hub.stats)}`);
      assert.deepStrictEqual(rec.violations, []);
      assert.deepStrictEqual(mismatches(all, rec.records), []);
      assert.ok(maxQueued <= MAX_QUEUE);
      assert.equal(stalled.behind, false);
      if (overflow === 'log') {
        assert.equal(rec.resyncs, 0, 'every seq from the log, none skipped');
        assert.equal(stalledRec.count, all.heads.get(stalled.stream), 'b-1: every seq from 1, once');
      } else {
        assert.equal(rec.resyncs, 1, 'b-1 skipped to a fresh snapshot');
        assert.equal(stalled.stats.resyncs, 1);
      }
    } finally {
      await hub.stop();
    }
  });
}

test("'resync' after an overflow says so", async () => {
  await h.streamTable(db, 'bp_reason');
  await db.query(`INSERT INTO bp_reason VALUES ('r-1', '{"n": 0}')`);
  const hub = new HxHub({ pg: { database: DB }, pollInterval: 0 });
  try {
    await hub.start();
    const sub = hub.follow({ table: 'bp_reason', key: 'r-1' }, { maxQueue: 2, overflow: 'snapshot' });
    const g = gate();
    const resyncs = [];
    const seqs = [];
    sub.on('resync', (info) => resyncs.push(info));
    sub.on('event', (event) => {
      seqs.push(event.metadata.seq);
      return event.metadata.seq === 2 ? g.promise : undefined;
    });
    await sub.ready;
    await h.merge(db, 'bp_reason', 'r-1', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => sub.seq === 2, 'the consumer to hang on seq 2');
    for (let k = 0; k < 5; k++) await h.merge(db, 'bp_reason', 'r-1', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => sub.stats.overflows > 0, 'the overflow');
    g.open();
    await h.waitFor(() => sub.seq === 7, 'seq 7');
    assert.deepStrictEqual(resyncs, [{ seq: 7, previousSeq: 2, state: { n: 6 }, reason: 'overflow' }]);
    assert.deepStrictEqual(seqs, [1, 2, 7]);
    assert.deepStrictEqual(sub.state, { n: 6 });
  } finally {
    await hub.stop();
  }
});
