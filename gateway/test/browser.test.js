'use strict';
// A real browser follows a session in the live view: Debian's chromium,
// driven by playwright-core (never a downloaded browser).  The page loads
// from the gateway alone (under its Content-Security-Policy), shows the
// row's state, its conversation and its phase on the machine, survives a
// restart of the gateway (it closes every SSE response and comes back on
// the same port) and a dropped connection (its socket destroyed mid-stream):
// each time the page's EventSource reconnects with Last-Event-ID and
// resumes with no second snapshot, and it ends with the row's state and
// conversation exactly.  A screenshot is kept under
// test/artifacts/ as the run's record of what a person sees.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const t = require('./helpers');
const { mintToken, tokenAuthorizer, messagesOf } = require('..');

const DB = 'hx_gateway_browser';
const KEY = 's-view';
const STREAM = `sessions:${KEY}`;
const ARTIFACTS = path.join(__dirname, '..', '..', 'test', 'artifacts');

let db;
before(async () => {
  db = await t.gatewayDatabase(DB);
});
after(async () => { await db.end(); });

test('chromium follows a session in the live view, across a gateway restart and a dropped connection', {
  skip: t.noChromium(),
}, async (tt) => {
  const lastEventIds = [];
  const check = tokenAuthorizer(t.SECRET);
  const options = {
    appName: 'hx-gateway-browser',
    secret: undefined,
    // the tokens' rule, and a record of the Last-Event-ID each stream request carried
    authorize: (req, target) => {
      if (target.kind === 'stream') lastEventIds.push(req.headers['last-event-id'] || null);
      return check(req, target);
    },
  };
  let g = await t.startGateway(DB, options);
  const port = g.port;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hx-chromium-'));
  let context;
  try {
    await db.query(`INSERT INTO sessions (session_id, user_id, state) VALUES ($1, 'u-7', $2)`,
      [KEY, JSON.stringify({ messages: [{ type: 'human', id: 'h-1', content: 'build me a site' }], todos: [] })]);
    context = await t.launchChromium(dir, { width: 1280, height: 820 });
    const page = await context.newPage();
    const blocked = [];
    page.on('console', (m) => { if (/Content Security Policy|Refused to/.test(m.text())) blocked.push(m.text()); });
    const outside = [];
    page.on('request', (r) => { if (!r.url().startsWith(g.base)) outside.push(r.url()); });
    await page.goto(`${g.base}/view/sessions/${KEY}?token=${mintToken(t.SECRET, STREAM)}`);
    const view = () => page.evaluate(() => ({ ...window.hxView, machine: undefined }));
    const reach = async (what) => {
      const seq = await t.lastSeq(db, STREAM);
      await t.waitFor(async () => (await view()).seq === seq, `the page to show seq ${seq} (${what})`);
    };
    await reach('the first snapshot');

    const merge = (ops) => t.merge(db, 'sessions', KEY, ops);
    await db.query("UPDATE sessions SET project_id = 'prj_8821', phase = hx_next_phase('agent_session', phase, 'start_build') WHERE session_id = $1", [KEY]);
    await merge([{ op: 'append', path: '/todos', items: [{ id: 't1', text: 'scaffold', done: false }] }, { op: 'increment', path: '/stats/tool_calls', by: 1 }]);
    await merge([{ op: 'append', path: '/todos', items: [{ id: 't2', text: 'deploy', done: false }] }, { op: 'increment', path: '/stats/tool_calls', by: 1 }]);
    await reach('two deltas');
    await t.waitFor(async () => (await view()).phase === 'building', 'the phase on the page');

    // the gateway goes away and comes back; the page's EventSource reconnects by itself
    await g.close();
    await merge([{ op: 'replace', path: '/todos/0/done', value: true }, { op: 'replace', path: '/last_tool', value: 'scaffold' }]);
    g = await t.startGateway(DB, options, port);
    await merge([{ op: 'increment', path: '/stats/tool_calls', by: 1 }, { op: 'union', path: '/tags', items: ['web', 'landing'] }]);
    await db.query("UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'todo_done_build') WHERE session_id = $1", [KEY]);
    await reach('the events after the reconnect');
    await t.waitFor(async () => (await view()).phase === 'verifying', 'the new phase on the page');

    // the connection drops mid-stream (its socket destroyed, as a network would)
    for (const c of g.gw.responses.filter((x) => x.kind === 'stream')) c.res.socket.destroy();
    await merge([{ op: 'append', path: '/messages', items: [{ type: 'ai', id: 'a-1', content: 'Here is your site.' }] }]);
    await reach('the events after the dropped connection');
    await t.waitFor(async () => (await view()).opens === 3, 'the third open');

    // the conversation's MESSAGES_SNAPSHOT follows the delta that changed it: the page
    // reaches the delta's seq a moment before it has the conversation
    const conversation = messagesOf((await t.rowState(db, 'sessions', KEY)).messages).messages;
    await t.waitFor(async () => JSON.stringify((await view()).messages) === JSON.stringify(conversation), 'the conversation after the dropped connection');
    const v = await view();
    assert.equal(v.opens, 3, 'the EventSource opened three times');
    assert.equal(lastEventIds[0], null);
    assert.equal(lastEventIds.filter((id) => id !== null).length, 2, `each reconnect carried Last-Event-ID (${lastEventIds})`);
    assert.equal(v.snapshots, 1, 'the reconnect resumed with no snapshot');
    assert.equal(v.errors, 0);
    const row = await t.rowState(db, 'sessions', KEY);
    assert.equal(t.canonical(v.state), t.canonical(row), "the page's state is the row's");
    assert.deepEqual(v.messages, messagesOf(row.messages).messages, "the page's conversation is the row's");
    // the conversation comes with each prelude, once what the stream's runs have open there is known
    // (read back from the log on the hub's reader after a restart): it may follow the catch-up events
    await t.waitFor(async () => (await view()).messageSnapshots >= 3, 'the conversation on every (re)connect');
    assert.deepEqual(blocked, [], 'nothing the Content-Security-Policy blocked');
    // what a person sees: the tree, the events with their seqs, the phase on the machine
    assert.equal(await page.textContent('#seq'), String(v.seq));
    assert.equal(await page.locator('#events li').count(), v.events);
    assert.equal(await page.getAttribute('#events li:first-child', 'data-seq'), String(v.seq));
    assert.equal(await page.locator('svg .node.current').getAttribute('data-phase'), 'verifying');
    assert.ok(await page.locator('svg .edge.taken[data-from="building"][data-to="verifying"]').count() === 1);
    assert.ok((await page.textContent('#tree')).includes('"landing"'));
    assert.ok(await page.locator('#tree .changed').count() > 0, 'the last change is highlighted');
    assert.deepEqual(outside, [], 'nothing fetched from elsewhere');

    fs.mkdirSync(ARTIFACTS, { recursive: true });
    const shot = path.join(ARTIFACTS, 'gateway-live-view.png');
    await page.screenshot({ path: shot, fullPage: true });
    tt.diagnostic(`screenshot: ${shot}`);
    console.log(`screenshot of the live view: ${shot}`);
  } finally {
    if (context) await context.close();
    fs.rmSync(dir, { recursive: true, force: true });
    await g.close();
  }
});
