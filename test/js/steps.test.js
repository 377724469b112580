'use strict';
// Exactly-once steps under the runtimes' failure modes.
//
// Property: a step of N random tool calls, staged in random completion
// order, with random retries (the same call staged again, as an activity
// retry or a resend after a timeout does) and a runtime that dies part way
// and stages every call again, then promoted (sometimes twice), leaves the
// state that applying each tool's writes once, in the model's tool-call
// order, gives.
//
// Load: 16 connections stage and promote 1,000 steps of 4 calls over 50
// sessions, with retries injected everywhere (duplicate stagings, some of
// them concurrent, and racing promotes): every item lands exactly once.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { freshDatabase, connect, rng, canonical } = require('./helpers');

const DB = 'hx_steps';

let db;
before(async () => {
  db = await freshDatabase(DB);
  await db.query(`CREATE TABLE sessions (session_id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}')`);
  await db.query(`CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON sessions
                  FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id')`);
});
after(async () => { await db.end(); });

/** One tool call's writes: composing ops, and a last-write-wins replace. */
function toolWrites(r, step, call) {
  const ops = [{ op: 'append', path: '/items', items: [`${step}/${call}`] },
    { op: 'increment', path: '/n', by: 1 }];
  if (r.chance(0.5)) ops.push({ op: 'replace', path: '/last', value: call });
  if (r.chance(0.3)) ops.push({ op: 'union', path: '/tags', items: [r.pick(['x', 'y', 'z'])] });
  if (r.chance(0.3)) ops.push({ op: 'upsert', path: '/by_id', items: [{ id: r.int(3), from: call }] });
  return ops;
}

function shuffle(r, xs) {
  const a = xs.slice();
  for (let i = a.length - 1; i > 0; i--) {
    const j = r.int(i + 1);
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

async function stage(c, stream, step, call) {
  const { rows } = await c.query('SELECT hx_stage($1, $2, $3, $4, $5) AS staged',
    [stream, step, call.id, JSON.stringify(call.writes), call.ord]);
  return rows[0].staged;
}

async function promote(c, key, step) {
  await c.query(`UPDATE sessions SET state = hx_merge(state, hx_promote($1, $2)) WHERE session_id = $3`,
    [`sessions:${key}`, step, key]);
}

test('a step staged in any order, with retries and a restarted runtime, applies each call once in tool-call order', async () => {
  const r = rng(20261123);
  const CASES = 200;
  for (let i = 0; i < CASES; i++) {
    const key = `p-${i}`;
    const stream = `sessions:${key}`;
    const base = { items: ['base'], n: 0, last: 'base' };
    await db.query('INSERT INTO sessions VALUES ($1, $2)', [key, JSON.stringify(base)]);
    const step = `step-${i}`;
    const n = 1 + r.int(6);
    // the model's call order is ord; call ids are unrelated to it, and some calls have no ord
    const calls = Array.from({ length: n }, (_, j) => ({
      id: `toolu_${r.int(1000).toString(36)}_${j}`,
      ord: r.chance(0.85) ? j + 1 : null,
      writes: null,
    }));
    for (const call of calls) call.writes = toolWrites(r, step, call.id);

    // completion order, retries, and a runtime that dies part way and
    // stages everything again
    const order = shuffle(r, calls);
    const crashAt = r.chance(0.3) ? r.int(n) : -1;
    for (let k = 0; k < order.length; k++) {
      if (k === crashAt) break;
      assert.equal(await stage(db, stream, step, order[k]), true);
      if (r.chance(0.3)) assert.equal(await stage(db, stream, step, order[k]), false, 'a retry is a no-op');
    }
    if (crashAt >= 0) {
      for (const call of shuffle(r, calls)) await stage(db, stream, step, call);
    }
    await promote(db, key, step);
    if (r.chance(0.3)) await promote(db, key, step);

    // expected: the base state with each call's writes once, in ord order, then by call id
    const expectedOrder = calls.slice().sort((a, b) => {
      if (a.ord !== b.ord) {
        if (a.ord === null) return 1;
        if (b.ord === null) return -1;
        return a.ord - b.ord;
      }
      return Buffer.compare(Buffer.from(a.id), Buffer.from(b.id));
    });
    const { rows: [want] } = await db.query('SELECT hx_merge($1, $2) AS s',
      [JSON.stringify(base), JSON.stringify(expectedOrder.flatMap((c) => c.writes))]);
    const { rows: [got] } = await db.query('SELECT state FROM sessions WHERE session_id = $1', [key]);
    assert.equal(canonical(got.state), canonical(want.s), `case ${i}: ${n} calls, crash at ${crashAt}`);
    assert.equal(got.state.n, n, `case ${i}: each call counted once`);
    // one change, one delta
    const { rows: [log] } = await db.query(
      `SELECT count(*) FILTER (WHERE type = 'STATE_DELTA')::int AS deltas FROM hx_event WHERE stream = $1`, [stream]);
    assert.equal(log.deltas, 1, `case ${i}: the step was one STATE_DELTA`);
  }
});

test('16 connections stage and promote 1,000 steps with injected retries: every item exactly once', async () => {
  const r = rng(7);
  const SESSIONS = 50;
  const STEPS = 1000;
  const CALLS = 4;
  const conns = await Promise.all(Array.from({ length: 16 }, () => connect(DB)));
  try {
    for (let s = 0; s < SESSIONS; s++) {
      await db.query(`INSERT INTO sessions VALUES ($1, '{"n": 0}')`, [`l-${s}`]);
    }
    // the work: per step, its calls (each maybe retried) then its promote
    // (maybe twice, racing); steps of one session run one after another,
    // different sessions' steps interleave over the 16 connections
    const perSession = Array.from({ length: SESSIONS }, () => []);
    for (let i = 0; i < STEPS; i++) perSession[i % SESSIONS].push(i);
    let retries = 0;
    let racedPromotes = 0;
    const pick = () => conns[r.int(conns.length)];
    await Promise.all(perSession.map(async (steps, s) => {
      const key = `l-${s}`;
      for (const i of steps) {
        const step = `step-${i}`;
        const calls = Array.from({ length: CALLS }, (_, j) => ({
          id: `call-${j}`, ord: j + 1, writes: [{ op: 'append', path: '/items', items: [`${i}/${j}`] }, { op: 'increment', path: '/n', by: 1 }],
        }));
        await Promise.all(calls.map(async (call) => {
          await stage(pick(), `sessions:${key}`, step, call);
          if (r.chance(0.3)) {
            retries++;
            await Promise.all([stage(pick(), `sessions:${key}`, step, call), stage(pick(), `sessions:${key}`, step, call)]);
          }
        }));
        if (r.chance(0.2)) {
          racedPromotes++;
          await Promise.all([promote(pick(), key, step), promote(pick(), key, step)]);
        } else {
          await promote(pick(), key, step);
        }
      }
    }));

    const { rows } = await db.query(`SELECT session_id, state FROM sessions WHERE session_id LIKE 'l-%'`);
    let total = 0;
    for (const row of rows) {
      const s = Number(row.session_id.slice(2));
      const expected = [];
      for (let i = s; i < STEPS; i += SESSIONS) for (let j = 0; j < CALLS; j++) expected.push(`${i}/${j}`);
      const items = row.state.items || [];
      assert.deepEqual(items.slice().sort(), expected.slice().sort(), `session ${row.session_id}: every item once`);
      assert.equal(row.state.n, expected.length, `session ${row.session_id}: the counter counts each call once`);
      total += items.length;
    }
    assert.equal(total, STEPS * CALLS);
    assert.ok(retries > 100 && racedPromotes > 50, `retries were injected (${retries} retried calls, ${racedPromotes} raced promotes)`);
    const { rows: [left] } = await db.query('SELECT count(*)::int AS n FROM hx_step_call');
    assert.equal(left.n, 0, 'nothing is left staged');
  } finally {
    await Promise.all(conns.map((c) => c.end()));
  }
});
