'use strict';
// A run's messages, tool calls and reasoning streamed as they are made
// (hxstate-client's RunWriter, through hx_stream_emit), and the clients
// that join or come back in the middle of them.
//
// A scripted run (a step; reasoning; a text message with a tool call; the
// tool's result; a second message) is written a piece at a time, each
// piece committed before the next, so the stream's head stops inside every
// construct.  At each stop the test opens, on GET /streams:
//   - a first join (a page reload), with no Last-Event-ID;
//   - a reconnect that is up to date (Last-Event-ID the head);
//   - reconnects behind by one and by three stops (events committed while
//     the client was away).
// Once the run has ended, the gateway closes: every response ends with
// RUN_FINISHED.  Then for every response:
//   - @ag-ui/client's verifier (verifyEvents, through an agent's runAgent)
//     accepts it;
//   - ag-ui-validate (PyPI, in HX_AGUI_VENV) reports no error and no warning;
//   - a client that got a first join up to the reconnect's Last-Event-ID and
//     then the reconnect (two runs of one agent: its messages carried over,
//     partial ones too) ends with the row's conversation, exactly; and so
//     does a first join on its own;
//   - every MESSAGES_SNAPSHOT that follows a message's END holds that
//     message as the stream had it (the state's messages are the truth);
// and HttpAgent, unchanged, joining mid-message over POST /agents, ends
// with the row's conversation.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { from, lastValueFrom, toArray } = require('rxjs');
const { AbstractAgent, HttpAgent, verifyEvents } = require('@ag-ui/client');
const { RunWriter } = require('hxstate-client');
const t = require('./helpers');
const { mintToken, messagesOf } = require('..');

const DB = 'hx_gateway_resume_runs';
const KEY = 's-runs';
const VENV = process.env.HX_AGUI_VENV;
const BIN = VENV && fs.existsSync(path.join(VENV, 'ag-ui-validate')) ? path.join(VENV, 'ag-ui-validate') : null;
const OUT = path.join(__dirname, '..', '..', 'test', 'artifacts', 'ag-ui-validate', 'runs');
let db;

before(async () => {
  db = await t.gatewayDatabase(DB);
  await db.query(`INSERT INTO sessions (session_id, user_id, state) VALUES ($1, 'u-1', $2)`,
    [KEY, JSON.stringify({ messages: [{ id: 'u1', role: 'user', content: 'What is the weather in Paris?' }] })]);
});
after(async () => { await db.end(); });

const auth = { authorization: `Bearer ${mintToken(t.SECRET, `sessions:${KEY}`)}` };

/** An agent that plays recorded events as its runs (each runAgent, the next list): @ag-ui/client's verifier and reducer. */
class Replay extends AbstractAgent {
  constructor() {
    super({ threadId: `sessions:${KEY}` });
    this.next = [];
  }

  run() { return from(this.next); }
}

async function play(agent, events) {
  agent.next = events;
  await agent.runAgent({});
  return agent.messages;
}

function verify(events) {
  return lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
}

/** A conversation's messages as compared: id, role, content, tool calls (what AG-UI's reducer builds). */
function transcript(messages) {
  return messages.map((m) => ({
    id: m.id,
    role: m.role,
    content: m.content === undefined ? '' : m.content,
    toolCalls: (m.toolCalls || []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
    ...(m.toolCallId !== undefined ? { toolCallId: m.toolCallId } : {}),
  }));
}

function validate(name, file, shared) {
  return new Promise((resolve, reject) => {
    execFile(BIN, ['--json', '--no-color', ...(shared ? ['--features', 'shared-state'] : []), file], { maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      try {
        resolve(JSON.parse(stdout));
      } catch (e) {
        reject(new Error(`${name}: ag-ui-validate gave no report (${err && err.code}): ${stderr}`));
      }
    });
  });
}

/**
 * The scripted run: pieces, each a function of the run that writes some
 * events (the writer commits each piece before the next).
 */
function script(run) {
  const words = (s) => s.split(/(?<= )/);
  let text;
  let call;
  let thought;
  const pieces = [
    () => run.startStep('model'),
    () => { thought = run.reasoning({ messageId: 'th-1' }); },
    () => thought.append('The user asks '),
    () => thought.append('about the weather.'),
    () => thought.end(),
    () => { text = run.text({ messageId: 'a-1' }); },
    ...words('Let me look up the weather in Paris for you. ').map((w) => () => text.append(w)),
    () => { call = run.toolCall({ toolCallId: 'call-1', toolCallName: 'weather', parentMessageId: 'a-1' }); },
    () => call.append('{"city":'),
    () => call.append(' "Paris", "unit": '),
    () => call.append('"C"}'),
    () => call.end(),
    () => text.end(),
    () => run.finishStep('model'),
    () => run.toolResult({ messageId: 'tool-1', toolCallId: 'call-1', content: '18 °C, clouds 🌥' }),
    () => run.startStep('answer'),
    () => { text = run.text({ messageId: 'a-2' }); },
    ...words('It is 18 °C and cloudy in Paris — 🌥 — a mild day. ').map((w) => () => text.append(w)),
    () => text.end(),
    () => run.finishStep('answer'),
  ];
  return pieces;
}

test('a client that joins or comes back in the middle of a message resumes at the next fragment: every cut verified, validated, exact', async () => {
  assert.ok(BIN, `no ag-ui-validate in HX_AGUI_VENV (${VENV || 'unset'}): pip install --require-hashes -r gateway/test/requirements.txt`);
  const g = await t.startGateway(DB, { maxPerClient: 1000 });
  const writer = new RunWriter({ pg: { database: DB }, flushMs: 5 });
  const run = writer.open({ table: 'sessions', key: KEY }, { runId: 'run-1' });
  const cuts = [];     // {head, join, behind: [{after, c}]}
  const heads = [];
  const head = async () => (await db.query('SELECT max(seq)::int AS seq FROM hx_event WHERE stream = $1', [`sessions:${KEY}`])).rows[0].seq;
  const agents = [];
  let i = 0;
  for (const piece of script(run)) {
    await piece();
    await run.flush();
    const m = await head();
    heads.push(m);
    const cut = { head: m, join: t.sse(`${g.base}/streams/sessions/${KEY}`, { headers: auth }), reconnects: [] };
    for (const back of [0, 1, 3]) {
      if (heads.length <= back) continue;
      const after = heads[heads.length - 1 - back];
      cut.reconnects.push({ after, c: t.sse(`${g.base}/streams/sessions/${KEY}`, { headers: { ...auth, 'last-event-id': String(after) } }) });
    }
    cuts.push(cut);
    // the stop is where they join: each has its prelude before the run goes on
    const opened = [cut.join, ...cut.reconnects.map((r) => r.c)];
    await t.waitFor(() => opened.every((c) => c.events().length >= 2), `the prelude of the responses at cut ${i}`);
    if (i === 12) {
      // HttpAgent, unchanged, joining in the middle of the first message
      const agent = new HttpAgent({ url: `${g.base}/agents/sessions/${KEY}`, headers: auth });
      agents.push({ agent, done: agent.runAgent({ forwardedProps: { hxstate: { maxDurationMs: 600000 } } }).catch((err) => err) });
    }
    i++;
  }
  await run.close();
  const last = await head();
  const all = cuts.flatMap((c) => [c.join, ...c.reconnects.map((r) => r.c)]);
  await t.waitFor(() => all.every((c) => c.messages.some((msg) => msg.id !== undefined && Number(msg.id) >= last)), 'every response at the run\'s end');
  await g.close();
  await t.waitFor(() => all.every((c) => c.done), 'every response ended');
  for (const { done } of agents) assert.ok(!((await done) instanceof Error), 'HttpAgent\'s run ended without an error');
  await writer.close();

  const { rows: [{ state }] } = await db.query('SELECT state::jsonb AS state FROM sessions WHERE session_id = $1', [KEY]);
  const truth = transcript(messagesOf(state.messages).messages);
  assert.deepEqual(truth.map((m) => m.id), ['u1', 'th-1', 'a-1', 'tool-1', 'a-2']);
  assert.equal(truth.find((m) => m.id === 'a-2').content, 'It is 18 °C and cloudy in Paris — 🌥 — a mild day. ');
  assert.deepEqual(truth.find((m) => m.id === 'a-1').toolCalls, [{ id: 'call-1', name: 'weather', arguments: '{"city": "Paris", "unit": "C"}' }]);
  for (const { agent } of agents) assert.deepEqual(transcript(agent.messages), truth, 'HttpAgent joining mid-message: the row\'s conversation');

  fs.mkdirSync(OUT, { recursive: true });
  let validated = 0;
  let reopened = 0;
  for (const [n, cut] of cuts.entries()) {
    const join = cut.join.events();
    assert.equal(join[0].type, 'RUN_STARTED');
    assert.equal(join[join.length - 1].type, 'RUN_FINISHED');
    await verify(join);
    const fresh = new Replay();
    assert.deepEqual(transcript(await play(fresh, join)), truth, `cut ${n} (head ${cut.head}): a first join ends with the row's conversation`);
    assert.deepEqual(fresh.state, state, `cut ${n}: a first join ends with the row's state`);
    if (join.some((e) => e.metadata && e.metadata.synthetic && e.type !== 'STATE_SNAPSHOT')) reopened++;
    const files = [{ name: `join-${n}`, c: cut.join, shared: true }];
    for (const { after, c } of cut.reconnects) {
      const events = c.events();
      assert.equal(events[0].type, 'RUN_STARTED', `cut ${n}, from ${after}`);
      await verify(events);
      // the client had a first join up to `after`, then this reconnect
      const ids = (x) => x.join.messages.filter((msg) => msg.id !== undefined).map((msg) => Number(msg.id));
      const earlier = cuts.find((x) => ids(x)[0] <= after && ids(x).some((id) => id >= after));
      const upto = earlier.join.messages.findIndex((msg) => msg.id !== undefined && Number(msg.id) > after);
      const before = earlier.join.messages.slice(0, upto < 0 ? undefined : upto).filter((msg) => msg.data !== undefined).map((msg) => msg.data);
      const agent = new Replay();
      await play(agent, before);
      assert.deepEqual(transcript(await play(agent, events)), truth, `cut ${n} (head ${cut.head}): back from ${after}, the row's conversation`);
      assert.deepEqual(agent.state, state, `cut ${n}: back from ${after}, the row's state`);
      files.push({ name: `reconnect-${n}-from-${after}`, c, shared: false });
    }
    for (const f of files) {
      const file = path.join(OUT, `${f.name}.sse`);
      fs.writeFileSync(file, f.c.text);
      const report = await validate(f.name, file, f.shared);
      const bad = report.diagnostics.filter((d) => d.severity === 'error' || d.severity === 'warning');
      assert.deepEqual(bad.map((d) => `${d.rule} ${d.message}`), [], `${f.name}: ag-ui-validate finds no error and no warning`);
      validated++;
    }
  }
  assert.ok(reopened >= 10, `the prelude reopened what was open at ${reopened} cuts`);
  console.log(`# ${cuts.length} cuts, ${validated} responses verified and validated, ${reopened} first joins reopened a construct`);

  // every MESSAGES_SNAPSHOT after a message's END (in a response that saw it live) holds it as streamed
  for (const cut of cuts) {
    const events = cut.join.events();
    const text = new Map();
    for (let k = 0; k < events.length; k++) {
      const e = events[k];
      if (e.type === 'TEXT_MESSAGE_START') text.set(e.messageId, '');
      if (e.type === 'TEXT_MESSAGE_CONTENT') text.set(e.messageId, text.get(e.messageId) + e.delta);
      if (e.type === 'TEXT_MESSAGE_END' && !e.metadata) continue; // a closer the gateway sent
      if (e.type === 'TEXT_MESSAGE_END') {
        const snap = events.slice(k + 1).find((x) => x.type === 'MESSAGES_SNAPSHOT');
        assert.ok(snap, 'a MESSAGES_SNAPSHOT follows the END');
        assert.equal(snap.messages.find((m) => m.id === e.messageId).content, text.get(e.messageId), `the END of ${e.messageId} and the next conversation agree`);
      }
    }
  }
});
