'use strict';
// @ag-ui/client, unchanged, follows a session through the gateway.
//
// Its HttpAgent POSTs a RunAgentInput to /agents/sessions/<key> and gets a
// run: RUN_STARTED, the stream's events, RUN_FINISHED.  While writers run
// hx_merge UPDATEs on the row, and across a restart of the gateway (the
// first run finishes with reason "gateway_closed", a second run starts on
// the new gateway), the agent's state after every event that carries a
// seq equals the row's state at that seq (hx_stream_state_at), and at the
// end equals the row.  Deleting the row ends the run: hx.stream_end, then
// RUN_FINISHED with reason "stream_end".  The client's own verifyEvents
// and schema checks run on every event: a refused one would fail the run.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { HttpAgent } = require('@ag-ui/client');
const t = require('./helpers');
const { mintToken } = require('..');

const DB = 'hx_gateway_agui';
const KEY = 's-agui';
const STREAM = `sessions:${KEY}`;
let db;

before(async () => {
  db = await t.freshDatabase(DB);
  await t.sessionsTable(db);
  await db.query('SELECT hx_stream_publication()');
});
after(async () => { await db.end(); });

/** An HttpAgent run, recording each event and the agent's state after it. */
function startRun(agent, runId, forwardedProps) {
  const records = [];
  const run = agent.runAgent({ runId, forwardedProps }, {
    onEvent({ event }) {
      records.push({ event, state: undefined });
    },
    onStateChanged({ state }) {
      records[records.length - 1].state = state;
    },
  });
  return { records, run };
}

/** Random hx_merge op lists: appends, counters, merges, now and then over NOTIFY's 8000 bytes. */
function ops(r, w, i) {
  const list = [{ op: 'increment', path: '/n', by: 1 }];
  const roll = r.int(4);
  if (roll === 0) list.push({ op: 'append', path: '/log', items: [`${w}-${i}`] });
  else if (roll === 1) list.push({ op: 'merge', path: '/m', value: { [`k${r.int(4)}`]: r.chance(0.3) ? null : i } });
  else if (roll === 2) list.push({ op: 'replace', path: `/r${r.int(3)}`, value: `w${w}/${i} "ü"` });
  if (r.chance(0.05)) list.push({ op: 'replace', path: '/big', value: 'x'.repeat(9000) + i });
  return list;
}

async function write(writers, count, seed) {
  await Promise.all(Array.from({ length: writers }, async (_, w) => {
    const c = await t.connect(DB);
    const r = t.rng(seed * 31 + w);
    try {
      for (let i = 0; i < count; i++) {
        await c.query('UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2', [JSON.stringify(ops(r, w, i)), KEY]);
      }
    } finally {
      await c.end();
    }
  }));
}

/** Check a run's records: the state after each event with a seq is the row's at that seq. */
async function checkRecords(records, what) {
  let checked = 0;
  let last = null;
  for (const r of records) {
    const seq = r.event.metadata && r.event.metadata.seq;
    if (seq === undefined || r.state === undefined) continue;
    if (last !== null && r.event.type === 'STATE_DELTA') assert.equal(seq, last + 1, `${what}: seq ${last} then ${seq}`);
    last = seq;
    const { rows: [row] } = await db.query('SELECT hx_stream_state_at($1, $2) AS s', [STREAM, seq]);
    assert.equal(t.canonical(r.state), t.canonical(row.s), `${what}: the agent's state after seq ${seq}`);
    checked++;
  }
  return checked;
}

test('HttpAgent follows a session while writers run, and across a gateway restart', async () => {
  const warnings = [];
  const warn = console.warn;
  console.warn = (...args) => { warnings.push(args.join(' ')); };
  let g = await t.startGateway(DB, { appName: 'hx-gateway-agui' });
  const port = g.port;
  try {
    await db.query('INSERT INTO sessions (session_id, user_id, state) VALUES ($1, $2, $3)', [KEY, 'u-1', '{"n": 0}']);
    const agent = new HttpAgent({
      url: `${g.base}/agents/sessions/${KEY}`,
      headers: { authorization: `Bearer ${mintToken(t.SECRET, STREAM)}` },
      threadId: 'thread-1',
    });

    const one = startRun(agent, 'run-1');
    await t.waitFor(() => one.records.length >= 2, 'the first run to start');
    await write(4, 40, 1);
    const head1 = await t.lastSeq(db, STREAM);
    await t.waitFor(() => one.records.some((r) => r.event.metadata && r.event.metadata.seq === head1), 'the first run to reach the head');

    // the gateway restarts while the writers go on
    const writing = write(3, 40, 2);
    await g.close();
    const result1 = await one.run;
    assert.equal(result1.result.reason, 'gateway_closed');
    g = await t.startGateway(DB, { appName: 'hx-gateway-agui' }, port);
    const two = startRun(agent, 'run-2');
    await writing;
    await t.waitFor(() => two.records.length >= 2, 'the second run to start');
    await write(2, 30, 3);
    const head2 = await t.lastSeq(db, STREAM);
    await t.waitFor(() => two.records.some((r) => r.event.metadata && r.event.metadata.seq === head2), 'the second run to reach the head');
    assert.equal(t.canonical(agent.state), t.canonical(await t.rowState(db, 'sessions', KEY)), "the agent's state is the row's");

    // the row goes: hx.stream_end, then RUN_FINISHED, and the run is over
    await db.query('DELETE FROM sessions WHERE session_id = $1', [KEY]);
    const result2 = await two.run;
    assert.equal(result2.result.reason, 'stream_end');
    assert.deepEqual(result2.result.end, { reason: 'deleted' });

    for (const [records, runId] of [[one.records, 'run-1'], [two.records, 'run-2']]) {
      const types = records.map((r) => r.event.type);
      assert.equal(types[0], 'RUN_STARTED');
      assert.equal(records[0].event.runId, runId);
      assert.equal(records[0].event.threadId, 'thread-1');
      assert.equal(types.at(-1), 'RUN_FINISHED');
      assert.equal(types[1], 'STATE_SNAPSHOT', 'each run starts from the current state');
      assert.ok(await checkRecords(records, runId) > 10, `${runId} checked against the log`);
    }
    const tail = two.records.slice(-2).map((r) => r.event);
    assert.equal(tail[0].type, 'CUSTOM');
    assert.equal(tail[0].name, 'hx.stream_end');
    assert.deepEqual(warnings.filter((w) => /Failed to apply|Removed unrecognised|Dropping/.test(w)), []);
  } finally {
    console.warn = warn;
    await g.close();
  }
});

test('a run ends at its maximum duration, RUN_FINISHED with reason "max_duration"', async () => {
  const g = await t.startGateway(DB, { appName: 'hx-gateway-agui-max' });
  try {
    await db.query("INSERT INTO sessions (session_id, user_id, state) VALUES ('s-max', 'u', '{\"a\": 1}')");
    const agent = new HttpAgent({
      url: `${g.base}/agents/sessions/s-max`,
      headers: { authorization: `Bearer ${mintToken(t.SECRET, 'sessions:s-max')}` },
    });
    const { records, run } = startRun(agent, 'run-max', { hxstate: { maxDurationMs: 300 } });
    const { result } = await run;
    assert.equal(result.reason, 'max_duration');
    assert.equal(result.stream, 'sessions:s-max');
    assert.deepEqual(records.map((r) => r.event.type), ['RUN_STARTED', 'STATE_SNAPSHOT', 'RUN_FINISHED']);
    assert.deepEqual(agent.state, { a: 1 });
  } finally {
    await g.close();
  }
});
