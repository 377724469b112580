'use strict';
// The event log's cached plan and partitions go stale while a trigger
// runs, and the trigger copes.
//
// hx_stream prepares the log's INSERT and finds its partitions at the start
// of each call; any lock it takes afterwards (detoasting a large state, for
// one) processes the invalidations other sessions sent, and ANALYZE,
// VACUUM or hx_stream_trim's TRUNCATE of the log send one.  Before this
// was handled, a write that drew such an invalidation between the two
// failed an assertion on an assert-enabled server (and so ended every
// connection).  Here 4 writers append large, TOASTed items to streamed rows
// while a fifth session runs ANALYZE on the log over and over: every write
// succeeds, each stream's seqs are 1..n, and the log replays to each row.
// On the assert-enabled server the harness also checks the server log for
// failed assertions.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

const DB = 'hx_stream_inval';
const ROWS = 10;
const WRITERS = 4;
const WRITES = 150;
let db;

before(async () => {
  db = await h.freshDatabase(DB);
  await h.streamTable(db, 't', 'payload=none');
  await db.query(`INSERT INTO t SELECT 'r' || i, '{"log": []}' FROM generate_series(1, ${ROWS}) i`);
});
after(async () => {
  await db.end();
});

test('writes stream while ANALYZE invalidates the log under them', async () => {
  const analyzer = await h.connect(DB);
  let analyzing = true;
  let analyzed = 0;
  const analyze = (async () => {
    while (analyzing) {
      await analyzer.query('ANALYZE hx_event');
      analyzed++;
    }
  })();
  try {
    await Promise.all(Array.from({ length: WRITERS }, async (_, w) => {
      const c = await h.connect(DB);
      const r = h.rng(w + 1);
      try {
        for (let i = 0; i < WRITES; i++) {
          // 6.4 kB of text that compresses poorly: the state is TOASTed
          const item = Array.from({ length: 200 }, () => r.int(1e9).toString(36)).join('');
          await c.query('UPDATE t SET state = hx_merge(state, $1) WHERE session_id = $2',
            [JSON.stringify([{ op: 'append', path: '/log', items: [`${w}-${i}-${item}`] }]), `r${1 + r.int(ROWS)}`]);
        }
      } finally {
        await c.end();
      }
    }));
  } finally {
    analyzing = false;
    await analyze;
    await analyzer.end();
  }
  assert.ok(analyzed > 0, 'ANALYZE ran during the writes');

  let items = 0;
  for (let i = 1; i <= ROWS; i++) {
    const stream = `t:r${i}`;
    const events = await h.loggedEvents(db, stream);
    assert.deepEqual(events.map((e) => e.seq), h.range(1, events.length), `${stream}: seqs 1..n`);
    const { rows: [row] } = await db.query(
      `SELECT state, hx_stream_state_at($1, $2) = state AS replayed FROM t WHERE session_id = $3`,
      [stream, events.length, `r${i}`]);
    assert.equal(row.replayed, true, `${stream}: the log replays to the row`);
    items += row.state.log.length;
  }
  assert.equal(items, WRITERS * WRITES, 'every write landed once');
});
