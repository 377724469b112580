'use strict';
// @ag-ui/client, unchanged, follows a session through the gateway, and
// runs an application's work through the run hook.
//
//   - HttpAgent POSTs a RunAgentInput to /agents/sessions/<key>: RUN_STARTED,
//     STATE_SNAPSHOT, MESSAGES_SNAPSHOT, the stream's events, RUN_FINISHED.
//     While writers run hx_merge UPDATEs, and across a restart of the
//     gateway, the agent's state after every event that carries a seq
//     equals the row's at that seq (hx_stream_state_at), and at the end its
//     state and messages equal the row's.  Deleting the row ends the run.
//   - @ag-ui/client's own verifier (verifyEvents) accepts what every path
//     sends, on GET /streams as on POST /agents: a first join, a reconnect
//     behind and up to date, a trimmed log, the stream's end, a restart.
//   - the run hook: a runtime written here (a stand-in for a LangGraph
//     graph that calls interrupt()) answers the input; the run finishes with
//     outcome success, or interrupt with its interrupts[] when the state
//     marks one, and the next run's resume[] reaches the hook; a pending
//     interrupt not answered, a failing hook (RUN_ERROR), a client that
//     aborts and a gateway that closes (outcome cancelled, signal aborted).
//   - capabilities, in AG-UI 1.0's form.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { from, lastValueFrom, toArray } = require('rxjs');
const { HttpAgent, verifyEvents } = require('@ag-ui/client');
const { AgentCapabilitiesSchema } = require('@ag-ui/core/schemas');
const t = require('./helpers');
const { mintToken, messagesOf } = require('..');

const DB = 'hx_gateway_agui';
const KEY = 's-agui';
const STREAM = `sessions:${KEY}`;
let db;

before(async () => {
  db = await t.gatewayDatabase(DB);
});
after(async () => { await db.end(); });

// the runs here call the run hook, and answer interrupts: tokens with the scopes for that
const bearer = (key) => ({ authorization: `Bearer ${mintToken(t.SECRET, `sessions:${key}`, { scopes: ['read', 'run', 'resume'] })}` });

/** @ag-ui/client's verifier over a recorded list of events: resolves, or rejects with its error. */
function verify(events) {
  return lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
}

/** An HttpAgent run, recording each event and the agent's state after it. */
function startRun(agent, runId, forwardedProps, extra = {}) {
  const records = [];
  const run = agent.runAgent({ runId, forwardedProps, ...extra }, {
    onEvent({ event }) {
      records.push({ event, state: undefined });
    },
    onStateChanged({ state }) {
      records[records.length - 1].state = state;
    },
  });
  return { records, run };
}

/** Random hx_merge op lists: appends, counters, merges, messages, now and then over NOTIFY's 8000 bytes. */
function ops(r, w, i, seed) {
  const list = [{ op: 'increment', path: '/n', by: 1 }];
  const roll = r.int(5);
  if (roll === 0) list.push({ op: 'append', path: '/log', items: [`${w}-${i}`] });
  else if (roll === 1) list.push({ op: 'merge', path: '/m', value: { [`k${r.int(4)}`]: r.chance(0.3) ? null : i } });
  else if (roll === 2) list.push({ op: 'replace', path: `/r${r.int(3)}`, value: `w${w}/${i} "ü"` });
  else if (roll === 3) list.push({ op: 'append', path: '/messages', items: [{ type: r.chance(0.5) ? 'human' : 'ai', id: `m-${seed}-${w}-${i}`, content: `say ${i}` }] });
  if (r.chance(0.05)) list.push({ op: 'replace', path: '/big', value: 'x'.repeat(9000) + i });
  return list;
}

async function write(writers, count, seed) {
  await Promise.all(Array.from({ length: writers }, async (_, w) => {
    const c = await t.connect(DB);
    const r = t.rng(seed * 31 + w);
    try {
      for (let i = 0; i < count; i++) {
        await c.query('UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2', [JSON.stringify(ops(r, w, i, seed)), KEY]);
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
    if (seq === undefined || r.state === undefined || r.event.type === 'MESSAGES_SNAPSHOT') continue;
    if (last !== null && r.event.type === 'STATE_DELTA') assert.equal(seq, last + 1, `${what}: seq ${last} then ${seq}`);
    last = seq;
    const { rows: [row] } = await db.query('SELECT hx_stream_state_at($1, $2) AS s', [STREAM, seq]);
    assert.equal(t.canonical(r.state), t.canonical(row.s), `${what}: the agent's state after seq ${seq}`);
    checked++;
  }
  return checked;
}

test('HttpAgent follows a session, state and messages, while writers run and across a gateway restart', async () => {
  const warnings = [];
  const warn = console.warn;
  console.warn = (...args) => { warnings.push(args.join(' ')); };
  let g = await t.startGateway(DB, { appName: 'hx-gateway-agui' });
  const port = g.port;
  try {
    await db.query('INSERT INTO sessions (session_id, user_id, state) VALUES ($1, $2, $3)',
      [KEY, 'u-1', JSON.stringify({ n: 0, messages: [{ type: 'human', id: 'm0', content: 'hello' }] })]);
    const agent = new HttpAgent({ url: `${g.base}/agents/sessions/${KEY}`, headers: bearer(KEY), threadId: 'thread-1' });

    const one = startRun(agent, 'run-1');
    await t.waitFor(() => one.records.length >= 3, 'the first run to start');
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
    await t.waitFor(() => two.records.length >= 3, 'the second run to start');
    await write(2, 30, 3);
    const head2 = await t.lastSeq(db, STREAM);
    await t.waitFor(() => two.records.some((r) => r.event.metadata && r.event.metadata.seq === head2 && r.event.type !== 'MESSAGES_SNAPSHOT'),
      'the second run to reach the head');
    await t.sleep(100);
    const row = await t.rowState(db, 'sessions', KEY);
    assert.equal(t.canonical(agent.state), t.canonical(row), "the agent's state is the row's");
    assert.deepEqual(agent.messages, messagesOf(row.messages).messages, "the agent's messages are the row's");
    assert.ok(agent.messages.length > 5);

    // the row goes: hx.stream_end, then RUN_FINISHED, and the run is over
    await db.query('DELETE FROM sessions WHERE session_id = $1', [KEY]);
    const result2 = await two.run;
    assert.equal(result2.result.reason, 'stream_end');
    assert.deepEqual(result2.result.end, { reason: 'deleted' });

    for (const [records, runId] of [[one.records, 'run-1'], [two.records, 'run-2']]) {
      const types = records.map((r) => r.event.type);
      assert.deepEqual(types.slice(0, 3), ['RUN_STARTED', 'STATE_SNAPSHOT', 'MESSAGES_SNAPSHOT'], 'the prelude');
      assert.equal(records[0].event.runId, runId);
      assert.equal(records[0].event.threadId, 'thread-1');
      assert.equal(types.at(-1), 'RUN_FINISHED');
      assert.deepEqual(records.at(-1).event.outcome, { type: 'success' });
      assert.ok(await checkRecords(records, runId) > 10, `${runId} checked against the log`);
      await verify(records.map((r) => r.event));
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

test('@ag-ui/client\'s verifier accepts every path: join, reconnect, trimmed log, stream end, restart', async () => {
  let g = await t.startGateway(DB, { appName: 'hx-gateway-agui-paths' });
  const port = g.port;
  const key = 's-paths';
  const url = () => `${g.base}/streams/sessions/${key}`;
  const captures = {};
  try {
    await db.query('INSERT INTO sessions (session_id, user_id, state) VALUES ($1, $2, $3)', [key, 'u', '{"messages": []}']);
    const merge = (i) => t.merge(db, 'sessions', key, [{ op: 'append', path: '/messages', items: [{ type: 'human', id: `p${i}`, content: `m${i}` }] }]);
    // a first join, ended by a restart of the gateway
    const join = t.sse(url(), { headers: bearer(key) });
    await t.waitFor(() => join.events().length === 3, 'the prelude');
    await merge(1);
    await t.waitFor(() => join.seqEvents().length === 2, 'a delta');
    await g.close();
    await t.ended(join);
    captures.join_and_restart = join.events();
    assert.equal(captures.join_and_restart.at(-1).result.reason, 'gateway_closed');
    await merge(2);
    g = await t.startGateway(DB, { appName: 'hx-gateway-agui-paths' }, port);
    // the reconnect after the restart: behind, then up to date
    const behind = t.sse(url(), { headers: { ...bearer(key), 'last-event-id': join.lastId() } });
    await t.waitFor(() => behind.events().length === 3, 'the events after Last-Event-ID');
    behind.close();
    captures.reconnect_behind = behind.events();
    const upToDate = t.sse(url(), { headers: { ...bearer(key), 'last-event-id': behind.lastId() } });
    await t.waitFor(() => upToDate.events().length === 2, 'the prelude of an up-to-date reconnect');
    upToDate.close();
    captures.reconnect_up_to_date = upToDate.events();
    // a trimmed log
    await merge(3);
    await merge(4);
    await db.query("SELECT hx_stream_trim('0 seconds')");
    const trimmed = t.sse(url(), { headers: { ...bearer(key), 'last-event-id': upToDate.lastId() || behind.lastId() } });
    await t.waitFor(() => trimmed.events().length === 3, 'a fresh snapshot');
    // the stream's end
    await db.query('DELETE FROM sessions WHERE session_id = $1', [key]);
    await t.ended(trimmed);
    captures.trimmed_then_end = trimmed.events();
    for (const [name, events] of Object.entries(captures)) {
      assert.equal(events[0].type, 'RUN_STARTED', name);
      // a capture cut by the client has no RUN_FINISHED: as the client sees it, the run goes on
      await verify(events).catch((err) => assert.fail(`${name}: ${err.message}`));
    }
    assert.deepEqual(captures.reconnect_up_to_date.map((e) => e.type), ['RUN_STARTED', 'MESSAGES_SNAPSHOT']);
    assert.deepEqual(captures.trimmed_then_end.map((e) => e.type),
      ['RUN_STARTED', 'STATE_SNAPSHOT', 'MESSAGES_SNAPSHOT', 'CUSTOM', 'RUN_FINISHED']);
  } finally {
    await g.close();
  }
});

test('a run ends at its maximum duration, RUN_FINISHED with reason "max_duration"', async () => {
  const g = await t.startGateway(DB, { appName: 'hx-gateway-agui-max' });
  try {
    await db.query("INSERT INTO sessions (session_id, user_id, state) VALUES ('s-max', 'u', '{\"a\": 1}')");
    const agent = new HttpAgent({ url: `${g.base}/agents/sessions/s-max`, headers: bearer('s-max') });
    const { records, run } = startRun(agent, 'run-max', { hxstate: { maxDurationMs: 300 } });
    const { result } = await run;
    assert.equal(result.reason, 'max_duration');
    assert.equal(result.stream, 'sessions:s-max');
    // a state with no conversation: no MESSAGES_SNAPSHOT
    assert.deepEqual(records.map((r) => r.event.type), ['RUN_STARTED', 'STATE_SNAPSHOT', 'RUN_FINISHED']);
    assert.deepEqual(agent.state, { a: 1 });
    assert.deepEqual(agent.messages, []);
  } finally {
    await g.close();
  }
});

/**
 * A runtime for the run hook, as an application would write one around an
 * agent framework: it keeps the thread's state in the row, as a LangGraph
 * checkpointer would (LangChain messages at /messages, pending interrupts
 * at /__interrupt__), and pauses for approval before a tool call.
 */
function runtime() {
  const calls = [];
  const run = async (input, target, { signal }) => {
    const call = { input, target, signal };
    calls.push(call);
    const c = await t.connect(DB);
    try {
      const user = input.messages.filter((m) => m.role === 'user').at(-1);
      const merge = (list) => c.query('UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2', [JSON.stringify(list), target.key]);
      if (input.forwardedProps && input.forwardedProps.fail) {
        const err = new Error(input.forwardedProps.fail);
        err.expose = input.forwardedProps.expose === true;
        err.code = 'tool_exploded';
        throw err;
      }
      if (input.forwardedProps && input.forwardedProps.slow) {
        if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        call.aborted = signal.reason;
        return undefined;
      }
      if (input.resume && input.resume.length > 0) {
        const approved = input.resume[0].status === 'resolved' && input.resume[0].payload.approved === true;
        await merge([
          { op: 'replace', path: '/__interrupt__', value: [] },
          { op: 'append', path: '/messages', items: [{ type: 'tool', id: 'tool-1', content: approved ? 'sent' : 'not sent', tool_call_id: 'call-1' }] },
        ]);
        await merge([{ op: 'append', path: '/messages', items: [{ type: 'ai', id: 'ai-2', content: approved ? 'Done: sent.' : 'Cancelled.' }] }]);
        return { approved };
      }
      await merge([{ op: 'append', path: '/messages', items: [{ type: 'human', id: user.id, content: user.content }] }]);
      await merge([{ op: 'append', path: '/messages', items: [{ type: 'ai', id: 'ai-1', content: '',
        tool_calls: [{ name: 'send_email', args: { to: 'a@b.c' }, id: 'call-1', type: 'tool_call' }] }] }]);
      await merge([{ op: 'replace', path: '/__interrupt__', value: [{ id: 'int-1', value: { reason: 'tool_call', message: 'Send the email?', toolCallId: 'call-1' } }] }]);
      return undefined;
    } finally {
      await c.end();
    }
  };
  return { run, calls };
}

test('the run hook: outcome interrupt with interrupts[], then resume[] to the hook, outcome success', async () => {
  const rt = runtime();
  const g = await t.startGateway(DB, { appName: 'hx-gateway-agui-hook', run: rt.run });
  try {
    await db.query("INSERT INTO sessions (session_id, user_id, state) VALUES ('s-hitl', 'u', '{\"messages\": []}')");
    const agent = new HttpAgent({ url: `${g.base}/agents/sessions/s-hitl`, headers: bearer('s-hitl'), threadId: 'th-hitl' });
    agent.addMessage({ id: 'u-1', role: 'user', content: 'email a@b.c' });
    const finished = [];
    const first = await agent.runAgent({ runId: 'r-1' }, { onRunFinishedEvent: (e) => { finished.push(e); } });
    assert.equal(first.result, undefined);
    assert.equal(finished[0].outcome, 'interrupt');
    assert.deepEqual(agent.pendingInterrupts.map((i) => [i.id, i.reason, i.toolCallId, i.message]),
      [['int-1', 'tool_call', 'call-1', 'Send the email?']]);
    assert.equal(rt.calls.length, 1);
    assert.equal(rt.calls[0].input.threadId, 'th-hitl');
    assert.deepEqual(rt.calls[0].target, { table: 'sessions', key: 's-hitl', stream: 'sessions:s-hitl', scopes: ['read', 'run', 'resume'] });
    assert.deepEqual(agent.messages.map((m) => [m.id, m.role]), [['u-1', 'user'], ['ai-1', 'assistant']]);
    assert.equal(agent.messages[1].toolCalls[0].function.arguments, '{"to":"a@b.c"}');

    // a POST that does not answer the pending interrupt: RUN_ERROR, and the hook is not called
    const raw = t.sse(`${g.base}/agents/sessions/s-hitl`, {
      method: 'POST', headers: { ...bearer('s-hitl'), 'content-type': 'application/json' },
      body: JSON.stringify({ threadId: 'th-hitl', runId: 'r-x', messages: [] }),
    });
    await t.ended(raw);
    assert.deepEqual(raw.types(), ['RUN_STARTED', 'STATE_SNAPSHOT', 'MESSAGES_SNAPSHOT', 'RUN_ERROR']);
    assert.equal(raw.events().at(-1).code, 'hxstate_interrupt_pending');
    assert.equal(rt.calls.length, 1);

    const second = await agent.runAgent({ runId: 'r-2', resume: [{ interruptId: 'int-1', status: 'resolved', payload: { approved: true } }] });
    assert.equal(second.result.reason, 'completed');
    assert.deepEqual(second.result.output, { approved: true });
    assert.deepEqual(rt.calls[1].input.resume, [{ interruptId: 'int-1', status: 'resolved', payload: { approved: true } }]);
    assert.deepEqual(agent.pendingInterrupts, []);
    const row = await t.rowState(db, 'sessions', 's-hitl');
    assert.equal(t.canonical(agent.state), t.canonical(row));
    assert.deepEqual(agent.messages, messagesOf(row.messages).messages);
    assert.deepEqual(agent.messages.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
    // without a hook, a resume cannot be answered
    const plain = await t.startGateway(DB, { appName: 'hx-gateway-agui-plain' });
    try {
      const r = t.sse(`${plain.base}/agents/sessions/s-hitl`, {
        method: 'POST', headers: { ...bearer('s-hitl'), 'content-type': 'application/json' },
        body: JSON.stringify({ threadId: 't', runId: 'r', messages: [], resume: [{ interruptId: 'int-1', status: 'cancelled' }] }),
      });
      await t.ended(r);
      assert.equal(r.status, 400);
    } finally {
      await plain.close();
    }
  } finally {
    await g.close();
  }
});

test('the run hook: RUN_ERROR when it fails; outcome cancelled and its signal aborted when the run is cut short', async () => {
  const rt = runtime();
  const g = await t.startGateway(DB, { appName: 'hx-gateway-agui-fail', run: rt.run });
  try {
    await db.query("INSERT INTO sessions (session_id, user_id, state) VALUES ('s-fail', 'u', '{}')");
    const post = (props) => t.sse(`${g.base}/agents/sessions/s-fail`, {
      method: 'POST', headers: { ...bearer('s-fail'), 'content-type': 'application/json' },
      body: JSON.stringify({ threadId: 't', runId: 'r', messages: [{ id: 'u', role: 'user', content: 'go' }], forwardedProps: props }),
    });
    for (const [props, message] of [[{ fail: 'internal detail' }, 'the run failed'], [{ fail: 'the tool exploded', expose: true }, 'the tool exploded']]) {
      const c = post(props);
      await t.ended(c);
      const last = c.events().at(-1);
      assert.equal(last.type, 'RUN_ERROR');
      assert.equal(last.code, 'tool_exploded');
      assert.equal(last.message, message);
      await verify(c.events());
    }
    // the client goes away: the hook's signal aborts
    const gone = post({ slow: true });
    await t.waitFor(() => rt.calls.length === 3, 'the hook to be called');
    gone.close();
    await t.waitFor(() => rt.calls[2].aborted !== undefined, 'the signal to abort');
    assert.equal(rt.calls[2].aborted, 'client_closed');
    // the run's longest duration, and the gateway closing: outcome cancelled
    const long = post({ slow: true, hxstate: { maxDurationMs: 300 } });
    await t.ended(long);
    assert.deepEqual(long.events().at(-1).outcome, { type: 'cancelled' });
    assert.equal(long.events().at(-1).result.reason, 'max_duration');
    await t.waitFor(() => rt.calls[3].aborted !== undefined, 'the signal to abort');
    assert.equal(rt.calls[3].aborted, 'max_duration');
    const closing = post({ slow: true });
    await t.waitFor(() => rt.calls.length === 5, 'the hook to be called');
    await g.close();
    await t.ended(closing);
    await t.waitFor(() => rt.calls[4].aborted !== undefined, 'the signal to abort');
    assert.deepEqual(closing.events().at(-1).outcome, { type: 'cancelled' });
    assert.equal(closing.events().at(-1).result.reason, 'gateway_closed');
    assert.equal(rt.calls[4].aborted, 'gateway_closed');
    for (const c of [long, closing]) await verify(c.events());
  } finally {
    await g.close();
  }
});

test('capabilities in AG-UI 1.0\'s form, per table', async () => {
  const g = await t.startGateway(DB, { appName: 'hx-gateway-agui-caps', run: async () => {}, tables: ['sessions'] });
  try {
    for (const path of ['/capabilities/sessions', '/agents/sessions/any-key/capabilities']) {
      const c = t.sse(`${g.base}${path}`, { headers: bearer('any-key') });
      await t.ended(c);
      assert.equal(c.status, 200);
      const caps = JSON.parse(c.text);
      assert.ok(AgentCapabilitiesSchema.safeParse(caps).success);
      assert.equal(caps.transport.resumable, true);
      assert.equal(caps.state.persistentState, true);
      assert.equal(caps.humanInTheLoop.interrupts, true);
    }
    const none = t.sse(`${g.base}/capabilities/elsewhere`, { headers: bearer('any-key') });
    await t.ended(none);
    assert.equal(none.status, 404);
  } finally {
    await g.close();
  }
});
