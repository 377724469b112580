'use strict';
// The streamed chat page (gateway/examples/chat.html, served by
// examples/chat.js, both as the README shows them) in a real browser:
// Debian's chromium, driven by playwright-core.  The user types a message;
// the run hook writes it and hands the run to the test's agent, which
// writes its answer with a RunWriter a token at a time, each token
// committed before the test looks: the page shows the message growing
// token by token and the tool call as its arguments stream.  The page is
// reloaded in the middle of the answer and again in the middle of the tool
// call's arguments: each time it shows the conversation and the message in
// progress at once, exactly (nothing twice, nothing lost), and goes on
// with the next token; and so it does when its connection drops in the
// middle of the second message (the EventSource's own reconnect, with
// Last-Event-ID).  At the end the page's transcript (ids, roles,
// text, tool calls) is the row's conversation, exactly; nothing was
// fetched from elsewhere and nothing blocked by the page's policy.  A
// token that may only read gets the gateway's 403 on the page.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { RunWriter } = require('hxstate-client');
const t = require('./helpers');
const { mintToken, messagesOf } = require('..');
const { spawn } = require('node:child_process');
const { chatServer } = require('../examples/chat');

const DB = 'hx_gateway_chat_page';
const KEY = 's-chat';
const ARTIFACTS = path.join(__dirname, '..', '..', 'test', 'artifacts');
const QUESTION = 'What is the weather in Paris?';
const WORDS = 'Let me look up the weather in Paris — 🌥 — for you. '.split(/(?<= )/);
const ARGS = ['{"city": ', '"Paris", ', '"unit": "C"}'];
const ANSWER = 'It is 18 °C and cloudy: a mild day. '.split(/(?<= )/);

let db;
before(async () => {
  db = await t.gatewayDatabase(DB);
  await db.query(`INSERT INTO sessions (session_id, user_id, state) VALUES ($1, 'u-1', $2)`,
    [KEY, JSON.stringify({ messages: [{ id: 'u0', role: 'user', content: 'Hello' }, { id: 'a0', role: 'assistant', content: 'Hi! What can I do for you?' }] })]);
});
after(async () => { await db.end(); });

function defer() {
  let resolve;
  const promise = new Promise((r) => { resolve = r; });
  return { promise, resolve };
}

/**
 * The test's agent: it writes a piece, commits it, and waits at a stop
 * until the test says next().  next() resolves once the agent has
 * committed its next piece and stopped again (or finished).
 */
function steppedAgent() {
  let stopped = defer();
  let go = null;
  const calls = [];
  const stop = async () => {
    const d = defer();
    go = d.resolve;
    stopped.resolve();
    await d.promise;
  };
  async function agent(run, said, signal) {
    calls.push({ said, aborted: () => signal.aborted });
    const text = run.text({ messageId: 'a-1' });
    await run.flush();
    await stop();
    for (const w of WORDS) {
      text.append(w);
      await run.flush();
      await stop();
    }
    const call = run.toolCall({ toolCallId: 'call-1', toolCallName: 'weather', parentMessageId: 'a-1' });
    for (const piece of ARGS) {
      call.append(piece);
      await run.flush();
      await stop();
    }
    await call.end();
    await text.end();
    await run.toolResult({ messageId: 'tool-1', toolCallId: 'call-1', content: '18 °C, clouds' });
    const answer = run.text({ messageId: 'a-2' });
    for (const w of ANSWER) {
      answer.append(w);
      await run.flush();
      await stop();
    }
    await answer.end();
    stopped.resolve();
  }
  return {
    agent,
    calls,
    stopped: () => stopped.promise,
    async next() {
      stopped = defer();
      const g = go;
      go = null;
      g();
      await stopped.promise;
    },
  };
}

/** A conversation as compared: id, role, text, tool calls (id, name, arguments), a tool message's toolCallId. */
function transcript(messages) {
  return messages.map((m) => ({
    id: m.id,
    role: m.role,
    content: typeof m.content === 'string' ? m.content : '',
    toolCalls: (m.toolCalls || []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
    ...(m.toolCallId !== undefined ? { toolCallId: m.toolCallId } : {}),
  }));
}

/** What the page shows, read from its DOM in the same shape. */
function shown(page) {
  return page.$$eval('#transcript > li', (lis) => lis.map((li) => ({
    id: li.dataset.id,
    role: li.dataset.role,
    content: li.querySelector('.content').textContent,
    toolCalls: [...li.querySelectorAll('.tool-call')].map((c) => ({
      id: c.dataset.id,
      name: c.querySelector('.tool-name').textContent,
      arguments: c.querySelector('.tool-args').textContent,
    })),
    ...(li.dataset.toolCallId !== undefined ? { toolCallId: li.dataset.toolCallId } : {}),
  })));
}

async function rowTranscript() {
  const { rows: [{ state }] } = await db.query('SELECT state::jsonb AS state FROM sessions WHERE session_id = $1', [KEY]);
  return transcript(messagesOf(state.messages).messages);
}

test('the chat page streams an answer token by token, renders its tool call, survives reloads mid-message and ends with the row\'s conversation', {
  skip: t.noChromium(),
}, async (tt) => {
  const stepped = steppedAgent();
  const writer = new RunWriter({ pg: { database: DB }, flushMs: 5 });
  const server = chatServer({
    gateway: { pg: { database: DB, application_name: 'hx-gateway-chat' }, tables: ['sessions'], secret: t.SECRET, log: () => {} },
    writer,
    agent: stepped.agent,
  });
  await server.gateway.ready;
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${server.address().port}`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hx-chromium-'));
  let context;
  try {
    context = await t.launchChromium(dir, { width: 1000, height: 800 });
    const page = await context.newPage();
    const blocked = [];
    const errors = [];
    page.on('console', (m) => { if (/Content Security Policy|Refused to/.test(m.text())) blocked.push(m.text()); });
    page.on('pageerror', (err) => errors.push(String(err)));
    const outside = [];
    page.on('request', (r) => { if (!r.url().startsWith(base)) outside.push(r.url()); });
    const token = mintToken(t.SECRET, `sessions:${KEY}`, { scopes: ['read', 'run'] });
    await page.goto(`${base}/chat/sessions/${KEY}#token=${token}`);

    const truthBefore = await rowTranscript();
    await t.waitFor(async () => JSON.stringify(await shown(page)) === JSON.stringify(truthBefore), 'the conversation on the page');
    assert.equal(await page.textContent('#status'), 'live');

    // the user sends a message: the hook writes it, the agent starts its answer
    await page.fill('#text', QUESTION);
    await page.press('#text', 'Enter');
    await stepped.stopped();
    assert.deepEqual(stepped.calls.map((c) => c.said), [QUESTION], 'the hook got the message typed');
    const message = async (id) => (await shown(page)).find((m) => m.id === id);
    const streaming = (id) => page.getAttribute(`#transcript > li[data-id="${id}"]`, 'data-streaming');
    await t.waitFor(async () => (await message('a-1')) !== undefined, 'the answer begun on the page');
    const user = (await shown(page))[2];
    assert.equal(user.role, 'user');
    assert.equal(user.content, QUESTION, 'the message sent, as the row has it');
    await t.waitFor(async () => (await page.inputValue('#text')) === '', 'the box emptied once the run started');

    // token by token: the page shows each prefix of the answer, in turn
    const sees = async (id, content, what) => {
      await t.waitFor(async () => ((await message(id)) || {}).content === content, `${what}: ${JSON.stringify(content)}`);
    };
    let sofar = '';
    const reloaded = async (what) => {
      await page.reload();
      const m = await message('a-1');
      // the page's first paint after the reload may not have the stream yet; once it has, it is exact
      await t.waitFor(async () => ((await message('a-1')) || {}).content === sofar, `${what}: the message so far after the reload`);
      assert.ok(m === undefined || sofar.startsWith(m.content), `${what}: never more than what was written (${JSON.stringify(m)})`);
      assert.equal(await streaming('a-1'), 'true', `${what}: the message still in progress`);
    };
    for (const [i, w] of WORDS.entries()) {
      await stepped.next();
      sofar += w;
      await sees('a-1', sofar, `token ${i}`);
      assert.equal(await streaming('a-1'), 'true');
      if (i === 3) {
        // a reload in the middle of the message: the page comes back with it, exactly, and goes on
        await reloaded('reload in the message');
        const now = await shown(page);
        assert.deepEqual(now.slice(0, 2), truthBefore, 'the conversation before, rehydrated');
        assert.equal(now[2].content, QUESTION);
      }
    }

    // the tool call, as its arguments stream
    let args = '';
    for (const [i, piece] of ARGS.entries()) {
      await stepped.next();
      args += piece;
      await t.waitFor(async () => {
        const m = await message('a-1');
        return m.toolCalls.length === 1 && m.toolCalls[0].arguments === args;
      }, `the tool call's arguments ${JSON.stringify(args)}`);
      const m = await message('a-1');
      assert.deepEqual(m.toolCalls, [{ id: 'call-1', name: 'weather', arguments: args }]);
      assert.equal(m.content, sofar, 'the message\'s text unchanged by its tool call');
      assert.equal(await page.getAttribute('.tool-call[data-id="call-1"]', 'data-streaming'), 'true');
      if (i === 1) {
        await reloaded('reload in the tool call');
        await t.waitFor(async () => ((await message('a-1')).toolCalls[0] || {}).arguments === args, 'the tool call\'s arguments after the reload');
        assert.deepEqual((await message('a-1')).toolCalls, [{ id: 'call-1', name: 'weather', arguments: args }]);
      }
    }

    // the tool's result and the second message, then the end
    let answer = '';
    for (const [i, w] of ANSWER.entries()) {
      await stepped.next();
      answer += w;
      await sees('a-2', answer, 'the second message');
      if (i === 2) {
        // the connection drops (its socket destroyed, as a network would): the
        // page's EventSource comes back with Last-Event-ID, the message reopened
        const streams = server.gateway.responses.filter((c) => c.kind === 'stream');
        assert.equal(streams.length, 1, 'the page follows one stream');
        for (const c of streams) c.res.socket.destroy();
        await t.waitFor(() => server.gateway.responses.some((c) => c.kind === 'stream' && !streams.includes(c)), 'the page\'s reconnect');
      }
    }
    assert.equal(await page.getAttribute('.tool-call[data-id="call-1"]', 'data-streaming'), 'false', 'the tool call ended');
    await stepped.next();
    assert.equal(stepped.calls[0].aborted(), false, 'the reload ended the POST, not the answer');

    const truth = await rowTranscript();
    assert.deepEqual(truth.slice(3).map((m) => m.id), ['a-1', 'tool-1', 'a-2']);
    assert.equal(truth[3].content, WORDS.join(''));
    assert.deepEqual(truth[3].toolCalls, [{ id: 'call-1', name: 'weather', arguments: ARGS.join('') }]);
    await t.waitFor(async () => JSON.stringify(await shown(page)) === JSON.stringify(truth), 'the row\'s conversation on the page');
    // the last message's text is whole before its END arrives: wait for the END too
    await t.waitFor(async () => (await page.locator('[data-streaming="true"]').count()) === 0, 'nothing left in progress');
    assert.deepEqual(await shown(page), truth, 'the page\'s transcript is the row\'s conversation, exactly');
    assert.equal(await page.textContent('#transcript > li[data-id="tool-1"] .content'), '18 °C, clouds');

    fs.mkdirSync(ARTIFACTS, { recursive: true });
    const shot = path.join(ARTIFACTS, 'gateway-chat.png');
    await page.screenshot({ path: shot, fullPage: true });
    tt.diagnostic(`screenshot: ${shot}`);

    // a message the hook refuses: its RUN_ERROR shown under the box, no run of the agent
    await page.evaluate(() => { document.getElementById('text').value = 'half a pair \ud800'; });
    await page.click('#send');
    await t.waitFor(async () => (await page.textContent('#error')) !== '', 'the run\'s error on the page');
    assert.equal(await page.textContent('#error'), 'the run failed: the message holds a NUL character or a lone surrogate (chat_bad_message)');
    assert.equal(await page.inputValue('#text'), 'half a pair \ud800', 'the text given back to the box');
    assert.equal(stepped.calls.length, 1);
    assert.deepEqual(await shown(page), truth, 'nothing written');

    // a token that may only read: the gateway's 403 shown, no run, the box kept
    const reader = mintToken(t.SECRET, `sessions:${KEY}`);
    await page.goto(`${base}/chat/sessions/${KEY}#token=${reader}`); // a new fragment: the same document
    await page.reload();
    await t.waitFor(async () => JSON.stringify(await shown(page)) === JSON.stringify(truth), 'the conversation for a reader');
    await page.fill('#text', 'may I?');
    await page.click('#send');
    await t.waitFor(async () => /^the message was not sent: 403/.test(await page.textContent('#error')), 'the refusal on the page');
    assert.equal(await page.inputValue('#text'), 'may I?');
    assert.equal(stepped.calls.length, 1, 'no run for a token without run');

    assert.deepEqual(errors, [], 'no error in the page');
    assert.deepEqual(blocked, [], 'nothing the Content-Security-Policy blocked');
    assert.deepEqual(outside, [], 'nothing fetched from elsewhere');
  } finally {
    if (context) await context.close();
    fs.rmSync(dir, { recursive: true, force: true });
    await server.gateway.close();
    await new Promise((resolve) => {
      server.close(resolve);
      server.closeAllConnections();
    });
    await writer.close();
  }
});

// The abuse probe of examples/chat.js: what its run hook takes from a
// client is untrusted (the gateway has checked the body's size, depth and
// schema; the hook checks the message), and a message it refuses writes
// nothing: RUN_ERROR with its reason, the agent not called, the log as it was.
test('the chat server refuses hostile messages with RUN_ERROR and writes nothing; the page is served under its policy only', async () => {
  const PROBE = 's-probe';
  await db.query(`INSERT INTO sessions (session_id, user_id, state) VALUES ($1, 'u-1', $2)`,
    [PROBE, JSON.stringify({ messages: [{ id: 'u0', role: 'user', content: 'Hello' }] })]);
  const calls = [];
  const writer = new RunWriter({ pg: { database: DB }, flushMs: 5 });
  const server = chatServer({
    gateway: { pg: { database: DB, application_name: 'hx-gateway-chat-probe' }, tables: ['sessions'], secret: t.SECRET, log: () => {} },
    writer,
    agent: async (run, said) => { calls.push(said); },
  });
  await server.gateway.ready;
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${server.address().port}`;
  const head = async () => (await db.query('SELECT coalesce(max(seq), 0)::int AS seq FROM hx_event WHERE stream = $1', [`sessions:${PROBE}`])).rows[0].seq;
  try {
    const token = mintToken(t.SECRET, `sessions:${PROBE}`, { scopes: ['read', 'run'] });
    const post = (body, headers = { authorization: `Bearer ${token}` }) => fetch(`${base}/hx/agents/sessions/${PROBE}`, {
      method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body),
    });
    const input = (messages) => ({ threadId: `sessions:${PROBE}`, runId: 'r-1', messages, tools: [], context: [], state: {}, forwardedProps: {} });
    const before = await head();
    const hostile = [
      ['no message', [], "the last message is the user's"],
      ['the last message an assistant\'s', [{ id: 'x', role: 'assistant', content: 'I am the model' }], "the last message is the user's"],
      ['content parts, not text', [{ id: 'x', role: 'user', content: [{ type: 'text', text: 'hi' }] }], 'the message is text'],
      ['blank', [{ id: 'x', role: 'user', content: ' \n\t ' }], 'the message is text'],
      ['4,001 characters', [{ id: 'x', role: 'user', content: 'a'.repeat(4001) }], 'a message is at most 4000 characters'],
      ['a NUL character', [{ id: 'x', role: 'user', content: 'a\u0000b' }], 'the message holds a NUL character or a lone surrogate'],
      ['a lone surrogate', [{ id: 'x', role: 'user', content: 'a\ud800b' }], 'the message holds a NUL character or a lone surrogate'],
    ];
    for (const [what, messages, reason] of hostile) {
      const res = await post(input(messages));
      assert.equal(res.status, 200, what);
      const events = (await res.text()).split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
      const last = events[events.length - 1];
      assert.deepEqual({ type: last.type, code: last.code, message: last.message }, { type: 'RUN_ERROR', code: 'chat_bad_message', message: reason }, what);
    }
    assert.deepEqual(calls, [], 'the agent was never called');
    assert.equal(await head(), before, 'nothing written to the stream');

    // the message's id is the server's: a client's id naming a message of the row replaces nothing
    const res = await post(input([{ id: 'u0', role: 'user', content: 'again' }]));
    assert.match(await res.text(), /"RUN_FINISHED"/);
    assert.deepEqual(calls, ['again']);
    const { rows: [{ state }] } = await db.query('SELECT state::jsonb AS state FROM sessions WHERE session_id = $1', [PROBE]);
    assert.equal(state.messages.length, 2);
    assert.deepEqual(state.messages[0], { id: 'u0', role: 'user', content: 'Hello' });
    assert.match(state.messages[1].id, /^u-[0-9a-f-]{36}$/);
    assert.equal(state.messages[1].content, 'again');

    // no token, another stream's token: the gateway's 401 and 403, no run
    assert.equal((await post(input([{ id: 'x', role: 'user', content: 'hi' }]), {})).status, 401);
    const other = mintToken(t.SECRET, 'sessions:s-chat', { scopes: ['read', 'run'] });
    assert.equal((await post(input([{ id: 'x', role: 'user', content: 'hi' }]), { authorization: `Bearer ${other}` })).status, 403);
    assert.deepEqual(calls, ['again']);

    // the page: its inline script and style by hash, nothing else; other paths and methods 404
    const page = await fetch(`${base}/chat/sessions/${PROBE}`);
    assert.equal(page.status, 200);
    const policy = page.headers.get('content-security-policy');
    assert.match(policy, /^default-src 'none'; script-src 'sha256-[A-Za-z0-9+/]+=*'; style-src 'sha256-[A-Za-z0-9+/]+=*'; connect-src 'self';/);
    assert.doesNotMatch(policy, /unsafe/);
    assert.equal(page.headers.get('x-frame-options'), 'DENY');
    assert.equal(await page.text(), fs.readFileSync(path.join(__dirname, '..', 'examples', 'chat.html'), 'utf8'));
    for (const [method, url] of [['GET', '/'], ['GET', '/chat/sessions'], ['GET', '/chat/sessions/a/b'], ['POST', `/chat/sessions/${PROBE}`], ['GET', '/hxx/streams/sessions/a']]) {
      assert.equal((await fetch(`${base}${url}`, { method })).status, 404, `${method} ${url}`);
    }
  } finally {
    await server.gateway.close();
    await new Promise((resolve) => {
      server.close(resolve);
      server.closeAllConnections();
    });
    await writer.close();
  }
});

// The example as the README runs it: the command prints the page's URL with
// a token; the page is served; a message sent with that token gets the
// stand-in agent's answer (a tool call, then the words back) in the row.
test('node gateway/examples/chat.js, as the README runs it: the URL it prints serves the page, and a message gets its answer', async () => {
  const KEY2 = 's-example';
  await db.query(`INSERT INTO sessions (session_id, user_id, state) VALUES ($1, 'u-1', '{"messages": []}')`, [KEY2]);
  const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## A streamed chat in a page'), readme.indexOf('## Interrupts'));
  assert.match(section, /\[examples\/chat\.html\]\(examples\/chat\.html\)/);
  assert.match(section, /\[examples\/chat\.js\]\(examples\/chat\.js\)/);
  assert.ok(section.includes('DATABASE_URL=postgres:///app HX_SECRET=<32+ bytes> node gateway/examples/chat.js'), 'the README runs the file the test runs');
  const top = path.join(__dirname, '..', '..');
  const child = spawn(process.execPath, ['gateway/examples/chat.js'], {
    cwd: top, env: { ...process.env, DATABASE_URL: t.databaseUrl(DB), HX_SECRET: t.SECRET, PORT: '0', SESSION: KEY2 }, stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    let out = '';
    child.stdout.on('data', (b) => { out += b; });
    await t.waitFor(() => /\n/.test(out), 'the URL the command prints');
    const url = new URL(out.trim());
    assert.equal(url.pathname, `/chat/sessions/${KEY2}`);
    const token = new URLSearchParams(url.hash.slice(1)).get('token');
    assert.equal((await fetch(url)).status, 200);
    const res = await fetch(new URL(`/hx/agents/sessions/${KEY2}`, url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ threadId: `sessions:${KEY2}`, runId: 'r-1', messages: [{ id: 'x', role: 'user', content: 'three small words' }], tools: [], context: [], state: {}, forwardedProps: {} }),
    });
    assert.match(await res.text(), /"RUN_FINISHED"/);
    const { rows: [{ state }] } = await db.query('SELECT state::jsonb AS state FROM sessions WHERE session_id = $1', [KEY2]);
    assert.deepEqual(state.messages.map((m) => [m.role, m.content]), [
      ['user', 'three small words'],
      ['assistant', 'Let me count your words. '],
      ['tool', '3'],
      ['assistant', '3 words: three small words'],
    ]);
    assert.deepEqual(state.messages[1].toolCalls.map((c) => [c.function.name, c.function.arguments]), [['count_words', '{"text": "three small words"}']]);

    // the command stopped (SIGTERM) in the middle of an answer: the agent stops, its run is closed as stopped
    const markers = () => db.query(`SELECT event->'value'->>'status' AS status FROM hx_event
      WHERE stream = $1 AND event->>'name' = 'hxstate.run' ORDER BY seq`, [`sessions:${KEY2}`]);
    const second = fetch(new URL(`/hx/agents/sessions/${KEY2}`, url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ threadId: `sessions:${KEY2}`, runId: 'r-2', messages: [{ id: 'y', role: 'user', content: 'stop me' }], tools: [], context: [], state: {}, forwardedProps: {} }),
    }).then((r) => r.text());
    // the first answer had two assistant messages: a third is the second answer begun
    await t.waitFor(async () => (await db.query("SELECT 1 FROM hx_event WHERE stream = $1 AND event->>'type' = 'TEXT_MESSAGE_START' AND event->>'role' = 'assistant'", [`sessions:${KEY2}`])).rowCount === 3, 'the second answer begun');
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    assert.equal(await exited, 0, 'the command exits by itself');
    assert.match(await second, /"RUN_FINISHED".*"reason":"gateway_closed"/);
    assert.deepEqual((await markers()).rows.map((r) => r.status), ['started', 'finished', 'started', 'stopped']);
  } finally {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }
  }
});
