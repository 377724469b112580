'use strict';
// How AG-UI runs end, and what comes before their end, with
// @ag-ui/client's HttpAgent:
//   - the conversation written in the interrupt's own commit reaches the
//     client before the RUN_FINISHED that carries the interrupt;
//   - a run hook that resolves as soon as its write has committed (a
//     runtime that keeps its connection, unlike one that closes it first)
//     gets RUN_FINISHED, every time;
//   - without a run hook, a pending interrupt is no dead end: the run
//     reports it as a CUSTOM hx.interrupts event and goes on (a gateway
//     without a hook cannot take resume[], so it never ends a run with
//     outcome interrupt, which would make HttpAgent refuse its next run),
//     and the application that runs the agent answers it;
//   - MESSAGES_SNAPSHOT only when there is a conversation and it changed:
//     not after a write logged as a snapshot that left it as it was, and
//     never for a state that has none (which would wipe a conversation the
//     client keeps); RUN_STARTED carries the protocol's version.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { HttpAgent } = require('@ag-ui/client');
const { PROTOCOL_VERSION } = require('@ag-ui/core');
const t = require('./helpers');
const { mintToken } = require('..');

const DB = 'hx_gateway_outcomes';
let db;

before(async () => {
  db = await t.gatewayDatabase(DB);
});
after(async () => { await db.end(); });

const headers = (key) => ({ authorization: `Bearer ${mintToken(t.SECRET, `sessions:${key}`, { scopes: ['read', 'run', 'resume'] })}` });
const insert = (key, state) => db.query('INSERT INTO sessions (session_id, user_id, state) VALUES ($1, $2, $3)', [key, 'u', JSON.stringify(state)]);

test('the conversation written in the interrupt\'s own commit reaches the client before the RUN_FINISHED that carries it', async () => {
  const c = await t.connect(DB);
  const run = async (input, target) => {
    // the model's tool call and the interrupt that asks to approve it: one UPDATE
    await c.query('UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2', [JSON.stringify([
      { op: 'append', path: '/messages', items: [{ type: 'ai', id: 'ai-1', content: '', tool_calls: [{ name: 'send', args: { to: 'x' }, id: 'call-1' }] }] },
      { op: 'replace', path: '/__interrupt__', value: [{ id: 'int-1', value: { message: 'send it?', toolCallId: 'call-1' } }] },
    ]), target.key]);
  };
  const g = await t.startGateway(DB, { appName: 'hx-gateway-outcomes-same', run });
  try {
    for (const key of ['same-1', 'same-2', 'same-3']) {
      await insert(key, { messages: [] });
      const agent = new HttpAgent({ url: `${g.base}/agents/sessions/${key}`, headers: headers(key) });
      const types = [];
      const finished = [];
      await agent.runAgent({}, { onEvent: ({ event }) => { types.push(event.type); }, onRunFinishedEvent: (e) => { finished.push(e); } });
      assert.equal(finished[0].outcome, 'interrupt');
      assert.equal(agent.pendingInterrupts[0].toolCallId, 'call-1');
      assert.deepEqual(agent.messages.map((m) => m.id), ['ai-1'], `${key}: the message with the call (${types})`);
      assert.equal(agent.messages[0].toolCalls[0].id, 'call-1');
      assert.equal(agent.state.__interrupt__[0].id, 'int-1');
      // state and messages before the end
      assert.ok(types.lastIndexOf('MESSAGES_SNAPSHOT') < types.indexOf('RUN_FINISHED'));
    }
  } finally {
    await g.close();
    await c.end();
  }
});

test('a hook that resolves as soon as its write has committed: RUN_FINISHED success, twelve times in twelve', async () => {
  // a runtime that keeps its connection (a pool), so it resolves right after COMMIT
  const c = await t.connect(DB);
  const run = async (input, target) => {
    await c.query(`UPDATE ${target.table} SET state = hx_merge(state, $1) WHERE session_id = $2`, [JSON.stringify([{ op: 'increment', path: '/n', by: 1 }]), target.key]);
    return { done: true };
  };
  await insert('quick', { n: 0 });
  // a table whose writes notify no one: its followers hear of them by polling
  await db.query(`CREATE TABLE quiet (session_id text PRIMARY KEY, state jsonb);
    CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON quiet FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id', 'payload=none');
    INSERT INTO quiet VALUES ('quick', '{"n": 0}')`);
  // over LISTEN (a hint, then a read of the log), over LISTEN with no hint
  // (a poll), and over the WAL
  for (const [table, transport] of [['sessions', 'listen'], ['quiet', 'listen'], ['sessions', 'wal']]) {
    const g = await t.startGateway(DB, {
      appName: `hx-gateway-outcomes-quick-${transport}`, run, transport, tables: [table], hubOptions: { pollInterval: 100 },
    });
    const token = { authorization: `Bearer ${mintToken(t.SECRET, `${table}:quick`, { scopes: ['run'] })}` };
    let n = (await t.rowState(db, table, 'quick')).n;
    try {
      const ends = [];
      for (let i = 0; i < 12; i++) {
        const agent = new HttpAgent({ url: `${g.base}/agents/${table}/quick`, headers: token });
        const events = [];
        await agent.runAgent({}, { onEvent: ({ event }) => { events.push(event); } }).catch((err) => events.push({ type: 'FAILED', message: err.message }));
        const last = events.at(-1);
        ends.push(last.type === 'RUN_FINISHED' ? `${last.outcome.type}/${last.result.reason}` : `${last.type}: ${last.message}`);
        n++;
        if (last.type === 'RUN_FINISHED') {
          assert.deepEqual(last.result.output, { done: true });
          assert.equal(agent.state.n, n, 'the write is in the state before RUN_FINISHED');
        }
      }
      assert.equal(g.gw.hub.transport, transport);
      assert.deepEqual(ends, Array(12).fill('success/completed'), `${table} over ${transport}`);
    } finally {
      await g.close();
    }
  }
  await c.end();
});

test('without a run hook a pending interrupt is reported (CUSTOM hx.interrupts), not an outcome: HttpAgent\'s next run goes on', async () => {
  await insert('waits', { messages: [], __interrupt__: [{ id: 'int-9', value: { message: 'approve?' } }] });
  const g = await t.startGateway(DB, { appName: 'hx-gateway-outcomes-nohook' });
  try {
    const agent = new HttpAgent({ url: `${g.base}/agents/sessions/waits`, headers: headers('waits') });
    const custom = [];
    const follow = () => agent.runAgent({ forwardedProps: { hxstate: { maxDurationMs: 400 } } }, {
      onCustomEvent: ({ event }) => { custom.push(event); },
    });
    const first = await follow();
    assert.equal(first.result.reason, 'max_duration');
    assert.deepEqual(agent.pendingInterrupts, []);
    assert.deepEqual(custom.map((e) => [e.name, e.value.interrupts.map((i) => [i.id, i.message])]), [['hx.interrupts', [['int-9', 'approve?']]]]);
    // the application that runs the agent answers it, while the client follows
    const second = follow();
    await t.waitFor(() => g.gw.stats.runs === 1, 'the second run');
    await t.sleep(50);
    await t.merge(db, 'sessions', 'waits', [{ op: 'replace', path: '/__interrupt__', value: [] },
      { op: 'append', path: '/messages', items: [{ type: 'ai', id: 'a', content: 'approved, sent' }] }]);
    const r = await second;
    assert.equal(r.result.reason, 'max_duration');
    assert.deepEqual(custom.slice(1).map((e) => e.value.interrupts.length), [1, 0], 'pending, then none');
    assert.deepEqual(agent.messages.map((m) => m.content), ['approved, sent']);
    // a resume[] still has no hook to go to: 400, saying what to do
    const c = t.sse(`${g.base}/agents/sessions/waits`, {
      method: 'POST', headers: { ...headers('waits'), 'content-type': 'application/json' },
      body: JSON.stringify({ threadId: 't', runId: 'r', messages: [], resume: [{ interruptId: 'int-9', status: 'cancelled' }] }),
    });
    await t.ended(c);
    assert.equal(c.status, 400);
    assert.match(JSON.parse(c.text).error, /no run hook: it reports interrupts as hx.interrupts events and takes no resume/);
  } finally {
    await g.close();
  }
});

test('MESSAGES_SNAPSHOT only for a conversation, and only when it changed; RUN_STARTED carries protocolVersion', async () => {
  await insert('conv', { messages: [{ type: 'human', id: 'h', content: 'hi' }], n: 0 });
  await insert('plain', { n: 0 });
  const g = await t.startGateway(DB, { appName: 'hx-gateway-outcomes-msgs' });
  try {
    const conv = t.sse(`${g.base}/streams/sessions/conv`, { headers: headers('conv') });
    const plain = t.sse(`${g.base}/streams/sessions/plain`, { headers: headers('plain') });
    await t.waitFor(() => conv.types().includes('MESSAGES_SNAPSHOT') && plain.types().includes('STATE_SNAPSHOT'), 'the preludes');
    // a write hx_stream logs as a snapshot (a delta through __proto__, which clients refuse)
    for (const key of ['conv', 'plain']) await t.merge(db, 'sessions', key, [{ op: 'replace', path: '/__proto__', value: 1 }]);
    await t.merge(db, 'sessions', 'conv', [{ op: 'append', path: '/messages', items: [{ type: 'ai', id: 'a', content: 'yo' }] }]);
    await t.merge(db, 'sessions', 'plain', [{ op: 'increment', path: '/n', by: 1 }]);
    await t.waitFor(() => conv.seqEvents().length === 3 && plain.seqEvents().length === 3, 'the events');
    await t.waitFor(() => conv.types().filter((x) => x === 'MESSAGES_SNAPSHOT').length === 2, 'the changed conversation');
    assert.deepEqual(conv.types(), ['RUN_STARTED', 'STATE_SNAPSHOT', 'MESSAGES_SNAPSHOT', 'STATE_SNAPSHOT', 'STATE_DELTA', 'MESSAGES_SNAPSHOT']);
    assert.deepEqual(plain.types(), ['RUN_STARTED', 'STATE_SNAPSHOT', 'STATE_SNAPSHOT', 'STATE_DELTA']);
    // a conversation removed: an empty one, once
    await t.merge(db, 'sessions', 'conv', [{ op: 'remove', path: '/messages' }]);
    await t.merge(db, 'sessions', 'conv', [{ op: 'increment', path: '/n', by: 1 }]);
    await t.waitFor(() => conv.seqEvents().length === 5, 'the removal');
    await t.sleep(100);
    assert.deepEqual(conv.types().slice(6), ['STATE_DELTA', 'MESSAGES_SNAPSHOT', 'STATE_DELTA']);
    assert.deepEqual(conv.events().at(-2).messages, []);
    for (const c of [conv, plain]) {
      assert.equal(c.events()[0].protocolVersion, PROTOCOL_VERSION);
      c.close();
    }
    // HttpAgent keeps the conversation it has when the state has none
    const agent = new HttpAgent({ url: `${g.base}/agents/sessions/plain`, headers: headers('plain') });
    agent.addMessage({ id: 'mine', role: 'user', content: 'kept elsewhere' });
    const started = [];
    await agent.runAgent({ forwardedProps: { hxstate: { maxDurationMs: 200 } } }, { onRunStartedEvent: ({ event }) => { started.push(event); } });
    assert.deepEqual(agent.messages.map((m) => m.id), ['mine']);
    assert.equal(started[0].protocolVersion, PROTOCOL_VERSION);
  } finally {
    await g.close();
  }
});
