'use strict';
// probe8: a POST /agents (a run, or AG-UI's connect) whose body's threadId
// names another thread of the gateway than its URL, and a resume cursor
// (Last-Event-ID) beyond the stream's head.  The threadId tests fail on
// the code before the fix (the body's thread was echoed over the URL's
// stream, and a run hook was called with it); the Last-Event-ID ones
// assert what the README says a resume ahead of the head gets.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const t = require('./helpers');
const { mintToken } = require('..');
const { HxAgent } = require('../agent');

const DB = 'hx_gateway_probe8';
let db;

before(async () => {
  db = await t.gatewayDatabase(DB);
  for (const key of ['p-a', 'p-b', 'p:colon']) {
    await db.query(`INSERT INTO sessions (session_id, user_id, state) VALUES ($1, 'u-1', $2)`,
      [key, JSON.stringify({ messages: [{ id: 'u1', role: 'user', content: 'Hello' }], n: 1 })]);
  }
});
after(async () => { await db.end(); });

const auth = (key, scopes) => ({ authorization: `Bearer ${mintToken(t.SECRET, `sessions:${key}`, scopes ? { scopes } : undefined)}` });
const input = (threadId, extra = {}) => JSON.stringify({ threadId, runId: 'p8-run', messages: [], tools: [], context: [], state: {}, forwardedProps: {}, ...extra });
const url = (g, key, connect) => `${g.base}/agents/sessions/${encodeURIComponent(key)}${connect ? '/connect' : ''}`;

function post(target, headers, body) {
  const c = t.sse(target, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return t.ended(c).then(() => c);
}

test('a connect or a run whose threadId names another thread of the gateway than its URL: 409, nothing of either state, no hook called', async () => {
  let hooked = 0;
  const g = await t.startGateway(DB, { run: async () => { hooked++; } });
  try {
    for (const connect of [true, false]) {
      const headers = auth('p-a', ['read', 'run']);
      for (const other of ['sessions:p-b', 'sessions:nobody', 'sessions:', 'sessions:p-a ', 'sessions:p:colon']) {
        const c = await post(url(g, 'p-a', connect), headers, input(other));
        assert.equal(c.status, 409, `${connect ? 'connect' : 'run'} naming ${other}: ${c.text.slice(0, 300)}`);
        const body = JSON.parse(c.text);
        assert.equal(body.code, 'hxstate_thread_mismatch');
        assert.ok(body.error.includes(JSON.stringify(other)) && body.error.includes('"sessions:p-a"'), body.error);
        assert.ok(!c.text.includes('Hello'), 'nothing of the state');
      }
    }
    assert.equal(hooked, 0, 'the run hook is never called for another thread');
  } finally {
    await g.close();
  }
});

test("a connect's and a run's events carry the threadId asked for: the URL's stream, or a client's own name for the thread", async () => {
  const g = await t.startGateway(DB);
  try {
    for (const connect of [true, false]) {
      for (const threadId of ['sessions:p-a', 'a0b1c2d3-e4f5-4a6b-8c9d-0e1f2a3b4c5d', 'thread-1', 'p-b', 'other:p-b']) {
        const extra = connect ? {} : { forwardedProps: { hxstate: { maxDurationMs: 1 } } };
        const c = await post(url(g, 'p-a', connect), auth('p-a'), input(threadId, extra));
        assert.equal(c.status, 200, `${threadId}: ${c.text.slice(0, 200)}`);
        const runEvents = c.events().filter((e) => e.type === 'RUN_STARTED' || e.type === 'RUN_FINISHED');
        assert.deepEqual(runEvents.map((e) => [e.type, e.threadId, e.runId]),
          [['RUN_STARTED', threadId, 'p8-run'], ['RUN_FINISHED', threadId, 'p8-run']]);
        assert.equal(c.events()[c.events().length - 1].result.stream, 'sessions:p-a', 'the URL\'s stream, whatever the client calls it');
      }
    }
    // a key with a colon: its own stream is its thread
    const c = await post(url(g, 'p:colon', true), auth('p:colon'), input('sessions:p:colon'));
    assert.equal(c.status, 200, c.text.slice(0, 200));
    // HxAgent with no threadId of its own (a random one) connects as before
    const agent = new HxAgent({ url: url(g, 'p-a'), headers: auth('p-a') });
    await agent.connectAgent();
    assert.equal(agent.state.n, 1);
  } finally {
    await g.close();
  }
});

test('a Last-Event-ID beyond the head gets a first join (the snapshot at the head), on GET /streams, a run and a connect; never a wait', async () => {
  const g = await t.startGateway(DB);
  try {
    const { rows: [{ seq: head }] } = await db.query("SELECT coalesce(max(seq), 0)::int AS seq FROM hx_event WHERE stream = 'sessions:p-b'");
    const ahead = String(head + 1000);
    const get = t.sse(`${g.base}/streams/sessions/p-b`, { headers: { ...auth('p-b'), 'last-event-id': ahead } });
    await t.waitFor(() => get.seqEvents().length === 1, 'the snapshot');
    assert.equal(get.status, 200);
    assert.deepEqual(get.types().slice(0, 3), ['RUN_STARTED', 'STATE_SNAPSHOT', 'MESSAGES_SNAPSHOT']);
    assert.equal(Number(get.lastId()), head, 'its id the head, below the client\'s');
    await t.merge(db, 'sessions', 'p-b', [{ op: 'increment', path: '/n', by: 1 }]);
    await t.waitFor(() => get.seqEvents().length === 2, 'the next write');
    assert.equal(Number(get.lastId()), head + 1);
    get.close();
    const c = await post(url(g, 'p-b', true), { ...auth('p-b'), 'last-event-id': ahead }, input('sessions:p-b'));
    assert.equal(c.status, 200);
    assert.deepEqual(c.types(), ['RUN_STARTED', 'STATE_SNAPSHOT', 'MESSAGES_SNAPSHOT', 'RUN_FINISHED']);
    assert.equal(c.seqEvents()[0].metadata.seq, head + 1);
  } finally {
    await g.close();
  }
});
