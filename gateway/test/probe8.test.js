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
    // hostile threadIds: long (the message clipped), a NUL, a lone surrogate, another table's prefix
    const long = `sessions:${'x'.repeat(100000)}`;
    const c = await post(url(g, 'p-a', true), auth('p-a'), input(long));
    assert.equal(c.status, 409);
    assert.ok(c.text.length < 1000, `the answer does not echo 100 kB back (${c.text.length} bytes)`);
    for (const other of ['sessions:p-a\u0000', 'sessions:\ud800', 'sessions:日本']) {
      const r = await post(url(g, 'p-a', true), auth('p-a'), input(other));
      assert.equal(r.status, 409, other);
      assert.equal(JSON.parse(r.text).code, 'hxstate_thread_mismatch');
    }
    for (const mine of ['', '\u0000', '\ud800', 'SESSIONS:p-b', ' sessions:p-b', 'sessions']) {
      const r = await post(url(g, 'p-a', true), auth('p-a'), input(mine));
      assert.equal(r.status, 200, `${JSON.stringify(mine)}: ${r.text.slice(0, 200)}`);
      assert.equal(r.events()[0].threadId, mine, 'echoed as asked');
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
    await t.waitFor(() => get.events().length >= 3, 'the prelude: RUN_STARTED, the snapshot, the conversation');
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

// -------------------------------------------------------------------------
// HxAgentRunner (CopilotKit): a run's events carry its thread
// -------------------------------------------------------------------------

const { lastValueFrom, toArray, Observable } = require('rxjs');
const { HxAgentRunner, STREAM_PREFIX } = require('../lib/copilotkit');
const { FakeAgent } = require('./copilotkit/agent');

const ckInput = (threadId, runId) => ({ threadId, runId, messages: [{ id: `${runId}-u`, role: 'user', content: 'hi' }], tools: [], context: [], state: {}, forwardedProps: {} });
const all = (o) => lastValueFrom(o.pipe(toArray()));
const threadsOf = (events) => [...new Set(events.filter((e) => e.threadId !== undefined).map((e) => e.threadId))];
async function logged(threadId) {
  const { rows } = await db.query('SELECT event FROM hx_event WHERE stream = $1 ORDER BY seq', [STREAM_PREFIX + threadId]);
  return rows.map((r) => r.event);
}

/** An agent whose events name another thread than its own threadId (a remote agent that answers for another). */
class ElsewhereAgent extends FakeAgent {
  run(input) {
    return new Observable((sub) => super.run(input).subscribe({
      next: (e) => sub.next(e.threadId === undefined ? e : { ...e, threadId: 'p8-elsewhere' }),
      error: (err) => sub.error(err),
      complete: () => sub.complete(),
    }));
  }
}

async function withRunner(fn) {
  const runner = new HxAgentRunner({ pg: { database: DB } });
  try {
    await fn(runner);
  } finally {
    await runner.close();
  }
}

test('HxAgentRunner: run() with an agent of another thread than the request\'s is refused (HX_COPILOTKIT_INPUT), nothing written', { timeout: 60000 }, () => withRunner(async (runner) => {
  const tid = 'p8-ck-agent';
  await assert.rejects(all(runner.run({ threadId: tid, agent: new FakeAgent({ threadId: 'p8-other' }), input: ckInput(tid, 'r1') })),
    (err) => err.code === 'HX_COPILOTKIT_INPUT' && /agent\.threadId/.test(err.message));
  for (const other of [5, null, '', `${tid} `, {}]) {
    const agent = new FakeAgent({ threadId: tid });
    agent.threadId = other;
    await assert.rejects(all(runner.run({ threadId: tid, agent, input: ckInput(tid, 'r1') })), (err) => err.code === 'HX_COPILOTKIT_INPUT', JSON.stringify(other));
  }
  assert.deepEqual(await logged(tid), [], 'nothing written, the thread not claimed');
  assert.equal(await runner.isRunning({ threadId: tid }), false);
}));

test('HxAgentRunner: an agent whose events name another thread fails its run (RUN_ERROR HX_COPILOTKIT_THREAD); none of them handed out, logged or replayed', { timeout: 60000 }, () => withRunner(async (runner) => {
  const t2 = 'p8-ck-events';
  const events = await all(runner.run({ threadId: t2, agent: new ElsewhereAgent({ threadId: t2 }), input: ckInput(t2, 'r1') }));
  const last = events[events.length - 1];
  assert.equal(last.type, 'RUN_ERROR');
  assert.equal(last.code, 'HX_COPILOTKIT_THREAD');
  assert.deepEqual(threadsOf(events), [], 'no event of another thread handed out');
  assert.deepEqual(threadsOf((await logged(t2)).map((e) => (e.name === 'hxstate.copilotkit' ? e.value : e))), [], 'nor logged');
  assert.deepEqual(threadsOf(await all(runner.connect({ threadId: t2 }))), []);
}));

test('HxAgentRunner: connect() of a log holding a run under another thread\'s name (written before the runner checked) replays it as the thread\'s', { timeout: 60000 }, () => withRunner(async (runner) => {
  const t3 = 'p8-ck-replay';
  const good = await all(runner.run({ threadId: t3, agent: new FakeAgent({ threadId: t3 }), input: ckInput(t3, 'r1') }));
  assert.deepEqual(threadsOf(good), [t3]);
  for (const e of [{ type: 'RUN_STARTED', threadId: 'p8-old-name', runId: 'r0' }, { type: 'RUN_FINISHED', threadId: 'p8-old-name', runId: 'r0' }]) {
    await db.query('SELECT hx_stream_send($1, $2)', [STREAM_PREFIX + t3, JSON.stringify({ type: 'CUSTOM', name: 'hxstate.copilotkit', value: e })]);
  }
  const replay = await all(runner.connect({ threadId: t3 }));
  assert.deepEqual(threadsOf(replay), [t3], 'every RUN_STARTED and RUN_FINISHED of the replay names the thread asked for');
  assert.deepEqual(replay.filter((e) => e.runId === 'r0').map((e) => e.type), ['RUN_STARTED', 'RUN_FINISHED']);
}));
