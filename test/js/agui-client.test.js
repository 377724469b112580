'use strict';
// A stock AG-UI client stays exact whatever the state's keys.
//
// @ag-ui/client applies STATE_DELTA events with fast-json-patch, which
// refuses any patch whose path goes through a member "__proto__", or
// through a member "prototype" of a member "constructor" (prototype
// pollution): the client then logs a warning and keeps its old state.  So
// hx_stream sends a STATE_SNAPSHOT instead of such a delta.  Here the log
// of a session whose writes touch those members is replayed into
// @ag-ui/client's own AbstractAgent, as a run: after every event its state
// equals the row's state at that seq.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { AbstractAgent, EventType } = require('@ag-ui/client');
const { Observable } = require('rxjs');
const jsonpatch = require('fast-json-patch');
const { freshDatabase, streamTable, canonical } = require('./helpers');

const DB = 'hx_agui_client';

let db;
before(async () => {
  db = await freshDatabase(DB);
  await streamTable(db, 'sessions');
});
after(async () => { await db.end(); });

/** An AG-UI agent whose run replays the given events inside RUN_STARTED ... RUN_FINISHED. */
class ReplayAgent extends AbstractAgent {
  constructor(events) {
    super({ threadId: 'thread-1' });
    this.events = events;
  }

  run(input) {
    return new Observable((subscriber) => {
      subscriber.next({ type: EventType.RUN_STARTED, threadId: input.threadId, runId: input.runId });
      for (const event of this.events) subscriber.next(event);
      subscriber.next({ type: EventType.RUN_FINISHED, threadId: input.threadId, runId: input.runId });
      subscriber.complete();
    });
  }
}

/** Replay events into a ReplayAgent; its state after each of them. */
async function replay(events) {
  const agent = new ReplayAgent(events);
  const states = [];
  await agent.runAgent({}, {
    onEvent({ event }) {
      // the state as it stands once this event is applied is read at the next event
      states.push({ event, before: agent.state });
    },
    onStateChanged({ state }) {
      states[states.length - 1].after = state;
    },
  });
  return { agent, states };
}

test('a stock @ag-ui/client follows a session whose writes touch __proto__ and constructor/prototype', async () => {
  const warnings = [];
  const warn = console.warn;
  console.warn = (...args) => { warnings.push(args.join(' ')); };
  try {
    await db.query(`INSERT INTO sessions VALUES ('s-1', '{"todos": []}')`);
    const writes = [
      [{ op: 'append', path: '/todos', items: [{ id: 't1' }] }],
      [{ op: 'replace', path: '/__proto__', value: { polluted: true } }],
      [{ op: 'append', path: '/todos', items: [{ id: 't2' }] }],
      [{ op: 'merge', path: '/constructor', value: { prototype: { x: 1 } } }],
      [{ op: 'replace', path: '/constructor/prototype/x', value: 2 }],
      // a computed key: "__proto__" as an own member, as JSON.parse makes it
      [{ op: 'replace', path: '/meta', value: { ['__proto__']: { y: 1 } } }],
      [{ op: 'replace', path: '/meta/__proto__/y', value: 3 }],
      [{ op: 'delete', path: '/__proto__' }],
      [{ op: 'increment', path: '/n', by: 1 }],
    ];
    const rowAt = new Map();
    for (const ops of writes) {
      const { rows } = await db.query(
        `UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = 's-1'
         RETURNING state, (SELECT max(seq) FROM hx_event WHERE stream = 'sessions:s-1') AS seq`,
        [JSON.stringify(ops)]);
      // the log row of this UPDATE is not visible to its own RETURNING: read it after
      rowAt.set(rowAt.size + 2, rows[0].state);
    }
    const { rows: logRows } = await db.query(
      `SELECT seq::int, event FROM hx_event WHERE stream = 'sessions:s-1' ORDER BY seq`);
    assert.equal(logRows.length, writes.length + 1, 'one event per write, after the snapshot');

    // the writes that touch those members came as snapshots, the others as deltas
    const types = logRows.map((r) => r.event.type);
    assert.deepEqual(types, ['STATE_SNAPSHOT', 'STATE_DELTA', 'STATE_SNAPSHOT', 'STATE_DELTA',
      'STATE_DELTA', 'STATE_SNAPSHOT', 'STATE_DELTA', 'STATE_SNAPSHOT', 'STATE_SNAPSHOT', 'STATE_DELTA']);

    // and such a delta is what the client would have refused
    const { rows: [d] } = await db.query(`SELECT hx_diff('{"a": 1}', '{"a": 1, "__proto__": {"p": 1}}') AS delta`);
    assert.throws(() => jsonpatch.applyPatch({ a: 1 }, d.delta, true, false), /__proto__/);

    const { agent, states } = await replay(logRows.map((r) => r.event));
    const stateEvents = states.filter((s) => s.event.type === 'STATE_SNAPSHOT' || s.event.type === 'STATE_DELTA');
    assert.equal(stateEvents.length, logRows.length);
    stateEvents.forEach((s, i) => {
      const seq = logRows[i].seq;
      const want = seq === 1 ? { todos: [] } : rowAt.get(seq);
      assert.equal(canonical(s.after), canonical(want), `the client's state after seq ${seq}`);
    });
    const { rows: [row] } = await db.query(`SELECT state FROM sessions WHERE session_id = 's-1'`);
    assert.equal(canonical(agent.state), canonical(row.state));
    assert.deepEqual(warnings.filter((w) => /Failed to apply/.test(w)), [], 'the client applied every event');
  } finally {
    console.warn = warn;
  }
});
