'use strict';
// The CopilotKit runner (hxstate-gateway/copilotkit, lib/copilotkit):
// run() writes the agent's events into the thread's log and gives them;
// connect() replays the log (fragments joined) and follows the run under
// way; isRunning and stop from the database, across runner instances; a
// runId runs once; bad input gets a clear error; and the runner works
// behind CopilotKit's own runtime (its fetch handler).
process.env.COPILOTKIT_TELEMETRY_DISABLED = 'true';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { lastValueFrom, toArray, from, firstValueFrom, map } = require('rxjs');
const { verifyEvents } = require('@ag-ui/client');
const h = require('../../test/js/helpers');
const { HxAgentRunner, STREAM_PREFIX, decodeEvent } = require('../lib/copilotkit');
const { compact } = require('../lib/copilotkit/events');
const { FakeAgent, script } = require('./copilotkit/agent');

const DB = 'hx_gateway_copilotkit';
let db;
let a;
let b;

before(async () => {
  db = await h.freshDatabase(DB);
  a = new HxAgentRunner({ pg: { database: DB } });
  b = new HxAgentRunner({ pg: { database: DB } });
});
after(async () => {
  await a.close();
  await b.close();
  await db.end();
});

function input(threadId, runId, messages = [{ id: `${runId}-u`, role: 'user', content: 'hello' }]) {
  return { threadId, runId, messages, tools: [], context: [], state: {}, forwardedProps: {} };
}

/** The agent as CopilotKit's runtime hands it over: its thread and messages set from the input. */
const agentFor = (inp, options = {}) => new FakeAgent({ threadId: inp.threadId, initialMessages: inp.messages, ...options });

const all = (o) => lastValueFrom(o.pipe(toArray()));
const verify = (events) => lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));

async function logged(threadId) {
  const { rows } = await db.query('SELECT event FROM hx_event WHERE stream = $1 ORDER BY seq', [STREAM_PREFIX + threadId]);
  return rows.map((r) => r.event);
}

test('run(): the agent\'s events as they come, written into the thread\'s log; connect() replays them (fragments joined), byte for byte', { timeout: 120000 }, async () => {
  const threadId = 'ck-replay';
  const inp = input(threadId, 'r1');
  const events = await all(a.run({ threadId, agent: agentFor(inp, { tokens: 40 }), input: inp }));
  const want = script(threadId, 'r1', 1, 40);
  assert.equal(events.length, want.length);
  assert.deepEqual(events.map((e) => e.type), want.map((e) => e.type));
  assert.equal(events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').length, 40, 'each token as it came');
  // RUN_STARTED carries the run's input (CopilotKit rebuilds the user's messages from it)
  assert.deepEqual(events[0].input.messages, [{ id: 'r1-u', role: 'user', content: 'hello' }]);
  await verify(events);

  const replay = await all(b.connect({ threadId }));
  assert.equal(JSON.stringify(replay), JSON.stringify(compact(events)));
  assert.equal(replay.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').length, 1);
  await verify(replay);

  // what the log holds: every event, the run's markers around them, the
  // tokens in fewer events than there were tokens (they shared commits)
  const log = await logged(threadId);
  assert.equal(log[0].name, 'hxstate.run');
  assert.equal(log[log.length - 1].value.status, 'finished');
  assert.ok(log.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').length < 40);
  assert.deepEqual(compact(log.map(decodeEvent).filter(Boolean)), replay);
  const { rows } = await db.query('SELECT hx_stream_state_at($1, $2) AS s', [STREAM_PREFIX + threadId, log.length]);
  assert.deepEqual(rows[0].s, { thread: threadId, turns: 1, last: { runId: 'r1', words: want.find((e) => e.type === 'STATE_DELTA').delta[0].value.words } });
});

test('a second run: RUN_STARTED\'s input holds only the messages the thread does not hold yet', { timeout: 120000 }, async () => {
  const threadId = 'ck-replay';
  const messages = [{ id: 'r1-u', role: 'user', content: 'hello' }, { id: 'r1-a', role: 'assistant', content: 'x' }, { id: 'r2-u', role: 'user', content: 'again' }];
  const inp = input(threadId, 'r2', messages);
  const events = await all(a.run({ threadId, agent: agentFor(inp), input: inp }));
  assert.deepEqual(events[0].input.messages, [messages[2]]);
  const replay = await all(b.connect({ threadId }));
  assert.deepEqual(replay.filter((e) => e.type === 'RUN_STARTED').map((e) => e.runId), ['r1', 'r2']);
  await verify(replay);
});

test('a runId runs once: run() again gives the logged run, and the agent is not run', { timeout: 120000 }, async () => {
  const threadId = 'ck-replay';
  const agent = new FakeAgent({ threadId });
  let ran = false;
  agent.run = () => { ran = true; throw new Error('run again'); };
  const events = await all(b.run({ threadId, agent, input: input(threadId, 'r1') }));
  assert.equal(ran, false);
  assert.equal(events[events.length - 1].type, 'RUN_FINISHED');
  assert.equal(events[0].runId, 'r1');
  const starts = (await logged(threadId)).filter((e) => e.name === 'hxstate.run' && e.value.status === 'started');
  assert.equal(starts.length, 2);
});

test('connect() in the middle of a run: the history so far, then the rest as it is logged, ending with the run', { timeout: 120000 }, async () => {
  const threadId = 'ck-join';
  const inp = input(threadId, 'j1');
  const run = a.run({ threadId, agent: agentFor(inp, { tokens: 150, delayMs: 4 }), input: inp });
  const mine = all(run);
  // once some of the message is in the log
  await h.waitFor(async () => (await logged(threadId)).some((e) => e.type === 'TEXT_MESSAGE_CONTENT'), 'the run\'s first tokens');
  assert.equal(await b.isRunning({ threadId }), true);
  const joined = await all(b.connect({ threadId }));
  const events = await mine;
  assert.equal(joined[joined.length - 1].type, 'RUN_FINISHED');
  assert.ok(joined.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').length > 1, 'the rest came as it was logged');
  assert.equal(JSON.stringify(compact(joined)), JSON.stringify(compact(events)));
  await verify(joined);
  assert.equal(await b.isRunning({ threadId }), false);
});

test('isRunning and stop across two runner instances; a second run of a running thread is refused', { timeout: 120000 }, async () => {
  const threadId = 'ck-stop';
  const inp = input(threadId, 's1');
  const events = all(a.run({ threadId, agent: agentFor(inp, { tokens: 100000, delayMs: 2 }), input: inp }));
  assert.equal(await a.isRunning({ threadId }), true, 'at once, in the process that runs it');
  assert.equal(await b.isRunning({ threadId }), true, 'in another');
  await assert.rejects(all(b.run({ threadId, agent: new FakeAgent({ threadId }), input: input(threadId, 's2') })), { code: 'HX_COPILOTKIT_RUNNING' });
  await assert.rejects(all(a.run({ threadId, agent: new FakeAgent({ threadId }), input: input(threadId, 's2') })), { code: 'HX_COPILOTKIT_RUNNING' });
  await h.waitFor(async () => (await logged(threadId)).some((e) => e.type === 'TEXT_MESSAGE_CONTENT'), 'the run\'s message under way');
  assert.equal(await b.stop({ threadId, runId: 'not-this-one' }), false);
  assert.equal(await b.stop({ threadId }), true);
  const got = await events;
  assert.equal(got[got.length - 1].type, 'RUN_FINISHED', 'a stopped run finishes');
  assert.ok(got.some((e) => e.type === 'TEXT_MESSAGE_END'), 'what it had open is closed');
  assert.equal(await a.isRunning({ threadId }), false);
  assert.equal(await b.isRunning({ threadId }), false);
  assert.equal(await b.stop({ threadId }), false, 'nothing to stop');
  const log = await logged(threadId);
  assert.equal(log[log.length - 1].value.status, 'stopped');
  await verify(await all(b.connect({ threadId })));
  assert.ok(a.stats.stopped >= 1);
  // the thread runs again
  const next = await all(b.run({ threadId, agent: new FakeAgent({ threadId }), input: input(threadId, 's3') }));
  assert.equal(next[next.length - 1].type, 'RUN_FINISHED');
});

test('an agent that fails, or emits what the log cannot hold: RUN_ERROR, what it left open closed, the thread free', { timeout: 120000 }, async () => {
  const threadId = 'ck-fail';
  const failing = new FakeAgent({ threadId, failAt: 12 });
  const events = await all(a.run({ threadId, agent: failing, input: input(threadId, 'f1') }));
  const last = events[events.length - 1];
  assert.equal(last.type, 'RUN_ERROR');
  assert.match(last.message, /the fake agent failed/);
  assert.equal(await a.isRunning({ threadId }), false);
  await verify(await all(b.connect({ threadId })));

  // a NUL in a token: jsonb cannot hold it
  const bad = new FakeAgent({ threadId });
  const real = bad.run.bind(bad);
  bad.run = (inp) => real(inp).pipe(map((e) => (e.type === 'TEXT_MESSAGE_CONTENT' ? { ...e, delta: 'a\u0000b' } : e)));
  const got = await all(a.run({ threadId, agent: bad, input: input(threadId, 'f2') }));
  const end = got[got.length - 1];
  assert.equal(end.type, 'RUN_ERROR');
  assert.equal(end.code, 'HX_COPILOTKIT_INPUT');
  assert.match(end.message, /NUL/);
  const replay = await all(b.connect({ threadId }));
  await verify(replay);
  assert.ok(!JSON.stringify(replay).includes('\\u0000'));
  assert.equal(await b.isRunning({ threadId }), false);
});

test('bad input: a clear error, never a crash, nothing written', { timeout: 120000 }, async () => {
  const before = (await db.query('SELECT count(*)::int AS n FROM hx_event')).rows[0].n;
  const hostile = [undefined, null, 42, {}, [], '', 'a\u0000b', 'a\ud800b', 'x'.repeat(257), 'tab\there', 'line\nbreak'];
  for (const threadId of hostile) {
    const what = JSON.stringify(threadId) || String(threadId);
    await assert.rejects(a.isRunning({ threadId }), { code: /^HX_COPILOTKIT_(INPUT|TOO_LARGE)$/ }, `isRunning ${what}`);
    await assert.rejects(a.stop({ threadId }), { code: /^HX_COPILOTKIT_(INPUT|TOO_LARGE)$/ }, `stop ${what}`);
    await assert.rejects(all(a.connect({ threadId })), { code: /^HX_COPILOTKIT_(INPUT|TOO_LARGE)$/ }, `connect ${what}`);
    await assert.rejects(all(a.run({ threadId, agent: new FakeAgent(), input: input('t', 'r') })), { code: /^HX_COPILOTKIT_(INPUT|TOO_LARGE)$/ }, `run ${what}`);
  }
  await assert.rejects(a.isRunning(null), { code: 'HX_COPILOTKIT_INPUT' });
  await assert.rejects(all(a.connect()), { code: 'HX_COPILOTKIT_INPUT' });
  await assert.rejects(all(a.run()), { code: 'HX_COPILOTKIT_INPUT' });
  // names that are SQL or a stream's are only names
  for (const threadId of ["x'; DROP TABLE hx_event; --", '@copilotkit:x', '"quoted"', '../..', '🦜 thread']) {
    assert.equal(await a.isRunning({ threadId }), false);
    assert.deepEqual(await all(a.connect({ threadId })), []);
  }
  const agent = new FakeAgent({ threadId: 'ck-bad' });
  for (const [inp, code] of [
    [undefined, 'HX_COPILOTKIT_INPUT'],
    [[], 'HX_COPILOTKIT_INPUT'],
    [{ ...input('ck-bad', 'r'), runId: '' }, 'HX_COPILOTKIT_INPUT'],
    [{ ...input('ck-bad', 'r'), runId: 7 }, 'HX_COPILOTKIT_INPUT'],
    [{ ...input('ck-bad', 'r'), runId: 'r'.repeat(1025) }, 'HX_COPILOTKIT_TOO_LARGE'],
    [input('another-thread', 'r'), 'HX_COPILOTKIT_INPUT'],
    [input('ck-bad', 'r', [{ id: 'big', role: 'user', content: 'x'.repeat(5 * 1024 * 1024) }]), 'HX_COPILOTKIT_TOO_LARGE'],
    [input('ck-bad', 'r', [{ id: 'nul', role: 'user', content: 'a\u0000' }]), 'HX_COPILOTKIT_INPUT'],
  ]) {
    await assert.rejects(all(a.run({ threadId: 'ck-bad', agent, input: inp })), { code }, JSON.stringify(inp && inp.runId));
  }
  const cyclic = input('ck-bad', 'r');
  cyclic.forwardedProps.self = cyclic;
  await assert.rejects(all(a.run({ threadId: 'ck-bad', agent, input: cyclic })), { code: 'HX_COPILOTKIT_INPUT' });
  await assert.rejects(all(a.run({ threadId: 'ck-bad', agent: {}, input: input('ck-bad', 'r') })), { code: 'HX_COPILOTKIT_INPUT' });
  await assert.rejects(a.listThreads({ limit: 0 }), { code: 'HX_COPILOTKIT_INPUT' });
  await assert.rejects(a.listThreads({ limit: 'all' }), { code: 'HX_COPILOTKIT_INPUT' });
  assert.throws(() => new HxAgentRunner({ pg: 5 }), TypeError);
  assert.throws(() => new HxAgentRunner({ pg: {}, maxEventBytes: -1 }), TypeError);
  assert.equal((await db.query('SELECT count(*)::int AS n FROM hx_event')).rows[0].n, before, 'nothing written');
  assert.equal((await db.query("SELECT count(*)::int AS n FROM hxstate_copilotkit_threads WHERE thread_id = 'ck-bad'")).rows[0].n, 0);
});

test('an unknown thread: connect() ends at once, isRunning false, stop false', { timeout: 120000 }, async () => {
  assert.deepEqual(await all(a.connect({ threadId: 'ck-never' })), []);
  assert.equal(await a.isRunning({ threadId: 'ck-never' }), false);
  assert.equal(await a.stop({ threadId: 'ck-never' }), false);
});

test('listThreads: the threads, newest first, across instances', { timeout: 120000 }, async () => {
  const threads = await b.listThreads();
  const ids = threads.map((t) => t.threadId);
  for (const id of ['ck-replay', 'ck-join', 'ck-stop', 'ck-fail']) assert.ok(ids.includes(id), id);
  assert.ok(threads.every((t) => t.runId === null));
  for (let i = 1; i < threads.length; i++) assert.ok(threads[i - 1].updatedAt >= threads[i].updatedAt);
  assert.equal((await b.listThreads({ limit: 1 })).length, 1);
});

test('behind CopilotKit\'s runtime (createCopilotRuntimeHandler): run, then connect replays the thread', { timeout: 120000 }, async () => {
  const { CopilotRuntime, createCopilotRuntimeHandler } = require('@copilotkit/runtime/v2');
  const runtime = new CopilotRuntime({ agents: { default: new FakeAgent({ tokens: 5 }) }, runner: a });
  const handler = createCopilotRuntimeHandler({ runtime, basePath: '/api/copilotkit', activateChannels: false });
  const threadId = 'ck-runtime';
  const post = async (path, body) => {
    const res = await handler(new Request(`http://localhost/api/copilotkit${path}`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
    }));
    assert.equal(res.status, 200);
    return (await res.text()).split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
  };
  const ran = await post('/agent/default/run', input(threadId, 'k1'));
  assert.equal(ran[0].type, 'RUN_STARTED');
  assert.equal(ran[ran.length - 1].type, 'RUN_FINISHED');
  const replay = await post('/agent/default/connect', input(threadId, 'k2'));
  assert.equal(JSON.stringify(replay), JSON.stringify(compact(ran)));
  await firstValueFrom(from(replay).pipe(verifyEvents(false), toArray()));
});

test('a thread whose process died (SIGKILL): isRunning false once the server sees it, stop() closes its run, another runId runs after closing it', { timeout: 120000 }, async (t) => {
  const { fork } = require('node:child_process');
  const path = require('node:path');
  const procs = [];
  t.after(() => { for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL'); });
  const start = async (threadId, runId) => {
    const proc = fork(path.join(__dirname, 'copilotkit', 'child.js'), [DB], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    procs.push(proc);
    await new Promise((resolve) => proc.once('message', resolve));
    proc.send({ id: 1, threadId, runId, messages: [{ id: `${runId}-u`, role: 'user', content: 'hi' }], delayMs: 2, tokens: 100000 });
    await h.waitFor(async () => (await logged(threadId)).some((e) => e.type === 'TEXT_MESSAGE_CONTENT'), 'the child\'s run under way');
    assert.equal(await a.isRunning({ threadId }), true);
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill('SIGKILL');
    await exited;
    await h.waitFor(async () => !(await a.isRunning({ threadId })), 'the dead process\'s lock freed');
  };

  // stop() of a run whose process died: closed here, as stopped
  await start('ck-dead-stop', 'd1');
  assert.equal(await b.stop({ threadId: 'ck-dead-stop' }), true);
  let replay = await all(a.connect({ threadId: 'ck-dead-stop' }));
  await verify(replay);
  assert.equal(replay[replay.length - 1].type, 'RUN_FINISHED');
  let log = await logged('ck-dead-stop');
  assert.equal(log[log.length - 1].value.status, 'stopped');
  assert.equal(await b.stop({ threadId: 'ck-dead-stop' }), false);

  // a new run on a thread whose run's process died: that run is closed
  // (RUN_ERROR HX_COPILOTKIT_ABANDONED), then the new one runs
  await start('ck-dead-new', 'd2');
  const inp = input('ck-dead-new', 'd3');
  const events = await all(b.run({ threadId: 'ck-dead-new', agent: agentFor(inp), input: inp }));
  assert.equal(events[events.length - 1].type, 'RUN_FINISHED');
  assert.equal(b.stats.abandoned, 1);
  replay = await all(a.connect({ threadId: 'ck-dead-new' }));
  await verify(replay);
  const errors = replay.filter((e) => e.type === 'RUN_ERROR');
  assert.equal(errors.length, 1);
  assert.equal(errors[0].code, 'HX_COPILOTKIT_ABANDONED');
  assert.deepEqual(replay.filter((e) => e.type === 'RUN_STARTED').map((e) => e.runId), ['d2', 'd3']);
  log = await logged('ck-dead-new');
  assert.deepEqual(log.filter((e) => e.name === 'hxstate.run').map((e) => `${e.value.runId}:${e.value.status}`), ['d2:started', 'd2:failed', 'd3:started', 'd3:finished']);
});

test('the owner connection lost (its backend terminated): the instance\'s runs stop, and it runs again under a new owner id', { timeout: 120000 }, async () => {
  const c = new HxAgentRunner({ pg: { database: DB, application_name: 'ck-owner-lost' } });
  try {
    const threadId = 'ck-owner-lost';
    const inp = input(threadId, 'o1');
    const events = all(c.run({ threadId, agent: agentFor(inp, { tokens: 100000, delayMs: 2 }), input: inp }));
    await h.waitFor(async () => (await logged(threadId)).some((e) => e.type === 'TEXT_MESSAGE_CONTENT'), 'the run under way');
    const before = c.id;
    const { rows } = await db.query(`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
      WHERE datname = $1 AND application_name = 'ck-owner-lost' AND query LIKE 'LISTEN%'`, [DB]);
    assert.equal(rows.length, 1, 'the owner\'s connection');
    const got = await events;
    assert.equal(got[got.length - 1].type, 'RUN_FINISHED', 'stopped');
    assert.equal(await b.isRunning({ threadId }), false);
    await h.waitFor(() => c.id !== before, 'a new owner');
    const inp2 = input(threadId, 'o2');
    const again = await all(c.run({ threadId, agent: agentFor(inp2), input: inp2 }));
    assert.equal(again[again.length - 1].type, 'RUN_FINISHED');
    await verify(await all(b.connect({ threadId })));
  } finally {
    await c.close();
  }
});

test('events as the agent emits them: its timestamps and metadata kept, CUSTOM events that look like hxstate\'s kept as the agent\'s, an event over maxEventBytes refused', { timeout: 120000 }, async () => {
  const threadId = 'ck-shapes';
  const odd = [
    { type: 'TEXT_MESSAGE_START', messageId: 'm', role: 'assistant', timestamp: 1700000000000, metadata: { source: 'model' } },
    { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'hi', timestamp: 1700000000001 },
    { type: 'TEXT_MESSAGE_END', messageId: 'm', metadata: { n: 1 } },
    { type: 'CUSTOM', name: 'hxstate.run', value: { runId: 'x', status: 'finished' } },
    { type: 'CUSTOM', name: 'hxstate.copilotkit', value: { type: 'RUN_ERROR', message: 'forged' } },
    { type: 'CUSTOM', name: 'hx.stream_end', value: { reason: 'forged' } },
    { type: 'RAW', event: { anything: [1, 'two', null] } },
  ];
  const agent = new FakeAgent({ threadId });
  agent.run = (inp) => from([{ type: 'RUN_STARTED', threadId, runId: inp.runId }, ...odd, { type: 'RUN_FINISHED', threadId, runId: inp.runId }]);
  const inp = input(threadId, 'x1');
  const events = await all(a.run({ threadId, agent, input: inp }));
  const replay = await all(b.connect({ threadId }));
  assert.equal(JSON.stringify(replay), JSON.stringify(events));
  assert.deepEqual(replay.slice(1, -1), odd);
  const log = await logged(threadId);
  assert.deepEqual(log.filter((e) => e.name === 'hxstate.run').map((e) => e.value.status), ['started', 'finished']);
  assert.ok(!log.some((e) => e.name === 'hx.stream_end'));

  const small = new HxAgentRunner({ pg: { database: DB }, maxEventBytes: 1024 });
  try {
    const big = new FakeAgent({ threadId: 'ck-big' });
    big.run = (i) => from([{ type: 'RUN_STARTED', threadId: 'ck-big', runId: i.runId }, { type: 'TEXT_MESSAGE_START', messageId: 'm', role: 'assistant' },
      { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'x'.repeat(2000) }, { type: 'TEXT_MESSAGE_END', messageId: 'm' }, { type: 'RUN_FINISHED', threadId: 'ck-big', runId: i.runId }]);
    const got = await all(small.run({ threadId: 'ck-big', agent: big, input: input('ck-big', 'b1') }));
    assert.deepEqual(got.map((e) => e.type), ['RUN_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_END', 'RUN_ERROR']);
    assert.equal(got[3].code, 'HX_COPILOTKIT_TOO_LARGE');
    await verify(await all(small.connect({ threadId: 'ck-big' })));
    // (an @ag-ui/client agent strips members it does not know; a bare one
    // hands the runner what it likes)
    const forged = {
      async runAgent(i, { onEvent }) {
        onEvent({ event: { type: 'RUN_STARTED', threadId: 'ck-forged', runId: i.runId, hxAgentTimestamp: 1 } });
        onEvent({ event: { type: 'RUN_FINISHED', threadId: 'ck-forged', runId: i.runId } });
      },
    };
    const f = await all(small.run({ threadId: 'ck-forged', agent: forged, input: input('ck-forged', 'f1') }));
    assert.equal(f[f.length - 1].type, 'RUN_ERROR');
    assert.equal(f[f.length - 1].code, 'HX_COPILOTKIT_INPUT');
  } finally {
    await small.close();
  }
});

test('as roles that are no superuser: with its grants a role runs and replays; without them, PostgreSQL\'s 42501, the thread left free', { timeout: 120000 }, async () => {
  await db.query(`DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hx_ck_app') THEN CREATE ROLE hx_ck_app LOGIN; END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hx_ck_nobody') THEN CREATE ROLE hx_ck_nobody LOGIN; END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hx_ck_noinsert') THEN CREATE ROLE hx_ck_noinsert LOGIN; END IF;
  END $$`);
  await db.query(HxAgentRunner.setupSql()); // as the owner, beforehand (the roles cannot CREATE in public)
  await db.query('GRANT SELECT, INSERT, UPDATE ON hxstate_copilotkit_threads TO hx_ck_app, hx_ck_noinsert');
  await db.query('GRANT SELECT, INSERT ON hx_event TO hx_ck_app');
  await db.query('GRANT SELECT ON hx_event TO hx_ck_noinsert');
  const as = (user) => new HxAgentRunner({ pg: { database: DB, user } });
  const app = as('hx_ck_app');
  const nobody = as('hx_ck_nobody');
  const noinsert = as('hx_ck_noinsert');
  try {
    const inp = input('ck-role', 'w1');
    const events = await all(app.run({ threadId: 'ck-role', agent: agentFor(inp), input: inp }));
    assert.equal(events[events.length - 1].type, 'RUN_FINISHED');
    assert.equal(JSON.stringify(await all(app.connect({ threadId: 'ck-role' }))), JSON.stringify(compact(events)));
    assert.equal(await app.isRunning({ threadId: 'ck-role' }), false);

    await assert.rejects(nobody.isRunning({ threadId: 'ck-role' }), { code: '42501' });
    await assert.rejects(all(nobody.connect({ threadId: 'ck-role' })), { code: '42501' });
    await assert.rejects(all(nobody.run({ threadId: 'ck-role', agent: agentFor(inp), input: input('ck-role', 'w2') })), { code: '42501' });

    const inp3 = input('ck-role-2', 'w3');
    const refused = await all(noinsert.run({ threadId: 'ck-role-2', agent: agentFor(inp3), input: inp3 }));
    assert.equal(refused[refused.length - 1].type, 'RUN_ERROR');
    assert.equal(refused[refused.length - 1].code, '42501');
    assert.equal(await app.isRunning({ threadId: 'ck-role-2' }), false);
    assert.deepEqual(await logged('ck-role-2'), []);
  } finally {
    await app.close();
    await nobody.close();
    await noinsert.close();
    await db.query('REVOKE ALL ON hxstate_copilotkit_threads, hx_event FROM hx_ck_app, hx_ck_nobody, hx_ck_noinsert');
  }
});
