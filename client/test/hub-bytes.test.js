'use strict';
// A stalled consumer costs at most maxQueueBytes bytes, not only maxQueue
// events: with events of 50 kB, a subscription whose consumer hangs holds
// no more than its byte bound (and one event more, the one an empty queue
// always takes), whatever maxQueue allows; once the consumer goes on it
// gets every seq exactly once (overflow 'log': the rest is read from the
// log as far as the queue has room), with the row's state.  With state:
// true each queued event counts with the state kept beside it.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');
const { HxHub } = require('..');
const { gate } = require('./hub-helpers');

const DB = 'hx_hub_bytes';
const EVENT = 50000;          // bytes of each write's value
const BOUND = 256 * 1024;     // maxQueueBytes
const WRITES = 40;            // 2 MB in all

let db;
before(async () => {
  db = await h.freshDatabase(DB);
  await db.query('SELECT hx_stream_publication()');
});
after(async () => { await db.end(); });

for (const transport of ['wal', 'listen']) {
  for (const state of [false, true]) {
    test(`big events: a stalled consumer holds at most maxQueueBytes (${transport}, state: ${state})`, async () => {
      const table = `big_${transport}_${state}`;
      await h.streamTable(db, table);
      await db.query(`INSERT INTO ${table} VALUES ('b', '{"n": 0}')`);
      const hub = new HxHub({ pg: { database: DB }, transport, pollInterval: 200 });
      await hub.start();
      try {
        const sub = hub.follow({ table, key: 'b' }, { maxQueue: 1000, maxQueueBytes: BOUND, state });
        const g = gate();
        const seqs = [];
        let hung = false;
        let mostQueued = 0;
        sub.on('event', (event) => {
          seqs.push(event.metadata.seq);
          mostQueued = Math.max(mostQueued, sub.queued);
          if (event.type === 'STATE_DELTA' && !hung) {
            hung = true;
            return g.promise;
          }
          return undefined;
        });
        await sub.ready;
        for (let i = 1; i <= WRITES; i++) {
          await h.merge(db, table, 'b', [{ op: 'replace', path: '/x', value: `${i}`.padEnd(EVENT, 'x') },
            { op: 'increment', path: '/n', by: 1 }]);
          mostQueued = Math.max(mostQueued, sub.queued);
        }
        const head = await h.lastSeq(db, `${table}:b`);
        // the consumer hangs on seq 2; what waits for it fills the queue past
        // its low-water mark (half the bound: no more is read until the
        // consumer brings it below), and no further than the bound
        const perEvent = EVENT * (state ? 2 : 1); // an event, and the state kept with it
        await h.waitFor(() => sub.queuedBytes > BOUND / 2, 'the queue to fill past half its bound in bytes');
        assert.ok(sub.queuedBytes <= BOUND, `${sub.queuedBytes} bytes queued`);
        assert.ok(sub.stats.maxQueuedBytes <= BOUND + perEvent + 1000, `at most ${sub.stats.maxQueuedBytes} bytes queued`);
        assert.ok(sub.queued * EVENT <= BOUND, `${sub.queued} events of ${EVENT} bytes queued`);
        assert.ok(sub.queued < WRITES / 4);

        g.open();
        await h.waitFor(() => sub.seq === head, `seq ${head}`);
        assert.deepStrictEqual(seqs, h.range(1, head), 'every seq once, in order');
        assert.ok(mostQueued * EVENT <= BOUND + perEvent, `at most ${mostQueued} events queued at once`);
        assert.ok(sub.stats.maxQueuedBytes <= BOUND + perEvent + 1000);
        if (state) assert.deepStrictEqual(sub.state, await h.rowState(db, table, 'b'));
        assert.equal(sub.stats.resyncs, 0);
      } finally {
        await hub.stop();
      }
    });
  }
}
