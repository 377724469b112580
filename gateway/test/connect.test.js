'use strict';
// POST /agents/<table>/<key>/connect, AG-UI's connect, and HxAgent
// (hxstate-gateway/agent), whose connectAgent() uses it: a page that loads
// or reloads gets the thread's state and conversation, and the run in
// progress, if any, from where it is (its open message reopened with what
// it holds so far) to its end; with no run in progress the connect ends
// at once.  HttpAgent has no connect (its connectAgent() does nothing).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { HttpAgent } = require('@ag-ui/client');
const { RunWriter } = require('hxstate-client');
const t = require('./helpers');
const { mintToken, messagesOf } = require('..');
const { HxAgent } = require('../agent');

const DB = 'hx_gateway_connect';
let db;

before(async () => {
  db = await t.gatewayDatabase(DB);
  for (const key of ['c-idle', 'c-live', 'c-hook', 'c-other']) {
    await db.query(`INSERT INTO sessions (session_id, user_id, state) VALUES ($1, 'u-1', $2)`,
      [key, JSON.stringify({ messages: [{ id: 'u1', role: 'user', content: 'Hello' }], n: 1 })]);
  }
});
after(async () => { await db.end(); });

const auth = (key) => ({ authorization: `Bearer ${mintToken(t.SECRET, `sessions:${key}`)}` });
const body = (key, extra = {}) => JSON.stringify({ threadId: `sessions:${key}`, runId: 'connect-1', messages: [], tools: [], context: [], state: {}, forwardedProps: {}, ...extra });

async function row(key) {
  const { rows: [{ state }] } = await db.query('SELECT state::jsonb AS state FROM sessions WHERE session_id = $1', [key]);
  return state;
}

function transcript(messages) {
  return messages.map((m) => ({ id: m.id, role: m.role, content: m.content === undefined ? '' : m.content }));
}

test('with no run in progress, a connect ends at once with the thread\'s state and conversation (reason idle)', async () => {
  const g = await t.startGateway(DB);
  try {
    const c = t.sse(`${g.base}/agents/sessions/c-idle/connect`, { method: 'POST', headers: { ...auth('c-idle'), 'content-type': 'application/json' }, body: body('c-idle') });
    await t.ended(c);
    assert.equal(c.status, 200);
    const types = c.types();
    assert.equal(types[0], 'RUN_STARTED');
    assert.ok(types.includes('STATE_SNAPSHOT') && types.includes('MESSAGES_SNAPSHOT'), types.join(' '));
    const last = c.events()[c.events().length - 1];
    assert.equal(last.type, 'RUN_FINISHED');
    assert.equal(last.result.reason, 'idle');
    assert.equal(last.runId, 'connect-1');

    const agent = new HxAgent({ url: `${g.base}/agents/sessions/c-idle`, headers: auth('c-idle') });
    await agent.connectAgent();
    const state = await row('c-idle');
    assert.deepEqual(agent.state, state);
    assert.deepEqual(transcript(agent.messages), transcript(messagesOf(state.messages).messages));

    // HttpAgent, for comparison: no connect, nothing rehydrated
    const plain = new HttpAgent({ url: `${g.base}/agents/sessions/c-idle`, headers: auth('c-idle') });
    await plain.connectAgent();
    assert.deepEqual(plain.messages, []);
  } finally {
    await g.close();
  }
});

test('a page that loads in the middle of a message joins the run: the message reopened, then the rest, to the run\'s end', async () => {
  const g = await t.startGateway(DB);
  const writer = new RunWriter({ pg: { database: DB }, flushMs: 5 });
  try {
    const run = writer.open({ table: 'sessions', key: 'c-live' }, { runId: 'run-live' });
    const text = run.text({ messageId: 'a-1' });
    text.append('The weather ');
    text.append('in Paris ');
    await run.flush();

    const agent = new HxAgent({ url: `${g.base}/agents/sessions/c-live`, headers: auth('c-live') });
    const seen = [];
    const done = agent.connectAgent({}, { onEvent: ({ event }) => { seen.push(event); } });
    await t.waitFor(() => seen.some((e) => e.type === 'TEXT_MESSAGE_CONTENT'), 'the open message reopened');
    assert.equal(agent.messages.find((m) => m.id === 'a-1').content, 'The weather in Paris ', 'what the message held when the page loaded');
    let settled = false;
    done.then(() => { settled = true; }, () => { settled = true; });

    text.append('is 18 °C ');
    text.append('and cloudy.');
    text.end();
    await run.flush();
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(settled, false, 'the connect goes on while the run is in progress');
    await run.close();
    await done;

    const state = await row('c-live');
    const truth = transcript(messagesOf(state.messages).messages);
    assert.equal(truth.find((m) => m.id === 'a-1').content, 'The weather in Paris is 18 °C and cloudy.');
    assert.deepEqual(transcript(agent.messages), truth, 'the page ends with the row\'s conversation, each fragment once');
    assert.deepEqual(agent.state, state);
    const finished = seen.filter((e) => e.type === 'RUN_FINISHED');
    assert.equal(finished.length, 1);
    assert.equal(finished[0].result.reason, 'run_ended');

    // a second connect, now that the run has ended: at once, the same conversation
    const again = new HxAgent({ url: `${g.base}/agents/sessions/c-live`, headers: auth('c-live') });
    await again.connectAgent();
    assert.deepEqual(transcript(again.messages), truth);
  } finally {
    await writer.close();
    await g.close();
  }
});

test('a connect never calls the run hook, and a run after it does', async () => {
  const calls = [];
  const g = await t.startGateway(DB, {
    run: async (input) => { calls.push(input.runId); },
  });
  try {
    const agent = new HxAgent({ url: `${g.base}/agents/sessions/c-hook`, headers: { authorization: `Bearer ${mintToken(t.SECRET, 'sessions:c-hook', { scopes: ['read', 'run'] })}` } });
    await agent.connectAgent();
    assert.deepEqual(calls, []);
    assert.equal(agent.messages.length, 1);
    await agent.runAgent({ runId: 'run-after' });
    assert.deepEqual(calls, ['run-after']);
  } finally {
    await g.close();
  }
});

test('what a connect refuses: its status and nothing of the state', async () => {
  const g = await t.startGateway(DB);
  try {
    const post = (path, headers, b) => {
      const c = t.sse(`${g.base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: b });
      return t.ended(c).then(() => c);
    };
    const cases = [
      ['a resume[]', '/agents/sessions/c-other/connect', auth('c-other'), body('c-other', { resume: [{ interruptId: 'i-1', status: 'resolved', payload: {} }] }), 400],
      ['no token', '/agents/sessions/c-other/connect', {}, body('c-other'), 401],
      ['another key\'s token', '/agents/sessions/c-other/connect', auth('c-idle'), body('c-other'), 403],
      ['a table not served', '/agents/nosuch/c-other/connect', auth('c-other'), body('c-other'), 404],
      ['another sub-path', '/agents/sessions/c-other/reconnect', auth('c-other'), body('c-other'), 404],
      ['a body that is not JSON', '/agents/sessions/c-other/connect', auth('c-other'), '{', 400],
      ['a body that is not a RunAgentInput', '/agents/sessions/c-other/connect', auth('c-other'), '{"threadId": 7}', 400],
      ['a body nested 5,000 deep', '/agents/sessions/c-other/connect', auth('c-other'), `{"threadId":"t","runId":"r","state":${'['.repeat(5000)}${']'.repeat(5000)}}`, 400],
    ];
    for (const [what, path, headers, b, status] of cases) {
      const c = await post(path, headers, b);
      assert.equal(c.status, status, `${what}: ${c.text.slice(0, 200)}`);
      assert.ok(!c.text.includes('Hello'), `${what}: nothing of the state`);
    }
    const get = t.sse(`${g.base}/agents/sessions/c-other/connect`, { headers: auth('c-other') });
    await t.ended(get);
    assert.equal(get.status, 405);
  } finally {
    await g.close();
  }
});
