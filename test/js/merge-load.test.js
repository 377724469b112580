'use strict';
// Parallel writers on one row lose nothing: 16 connections each run 500
// "UPDATE ... SET state = hx_merge(state, $1)" on the same row, every one
// appending one item and incrementing one counter.  The row lock serialises
// them and the merge composes: at the end the row holds exactly 8,000 items,
// each exactly once, and the counter is 8,000.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { freshDatabase, connect } = require('./helpers');

const WRITERS = 16;
const WRITES = 500;
const DB = 'hx_merge_load';

let db;
before(async () => {
  db = await freshDatabase(DB);
  await db.query(`CREATE TABLE sessions (id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}')`);
  await db.query(`INSERT INTO sessions VALUES ('s-1', '{"items": [], "count": 0}')`);
});
after(async () => { await db.end(); });

test(`${WRITERS} connections x ${WRITES} hx_merge updates on one row`, async () => {
  const clients = await Promise.all(Array.from({ length: WRITERS }, () => connect(DB)));
  try {
    await Promise.all(clients.map(async (c, w) => {
      for (let i = 0; i < WRITES; i++) {
        const writes = [
          { op: 'append', path: '/items', items: [`w${w}-${i}`] },
          { op: 'increment', path: '/count', by: 1 },
        ];
        const res = await c.query('UPDATE sessions SET state = hx_merge(state, $1) WHERE id = $2',
          [JSON.stringify(writes), 's-1']);
        assert.equal(res.rowCount, 1);
      }
    }));
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }
  const { rows } = await db.query(`SELECT state FROM sessions WHERE id = 's-1'`);
  const { items, count } = rows[0].state;
  assert.equal(count, WRITERS * WRITES);
  assert.equal(items.length, WRITERS * WRITES);
  assert.equal(new Set(items).size, WRITERS * WRITES);
  for (let w = 0; w < WRITERS; w++) {
    // each writer's items are all there, in the order it wrote them
    const mine = items.filter((x) => x.startsWith(`w${w}-`));
    assert.deepStrictEqual(mine, Array.from({ length: WRITES }, (_, i) => `w${w}-${i}`));
  }
});
