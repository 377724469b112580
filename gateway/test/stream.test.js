'use strict';
// GET /streams/<table>/<key>: what a browser's EventSource gets.
//   - a first join: RUN_STARTED, the state (a STATE_SNAPSHOT whose SSE id
//     is its seq), the conversation (MESSAGES_SNAPSHOT), then every event,
//     each with its seq as its id, and the conversation again when it changes;
//   - a reconnect with Last-Event-ID: RUN_STARTED, the events after that
//     seq (none when up to date: no second snapshot), the conversation; a
//     fresh snapshot when the log was trimmed, and when the events after it
//     cross the end of a previous row of the key (deleted, then inserted
//     again): never the previous row's history;
//   - heartbeat comments on an idle stream; hx.stream_end, RUN_FINISHED,
//     the end of the response, and 204 for a reconnect from it, on any
//     gateway process;
//   - an event @ag-ui/client would refuse is replaced by a snapshot;
//   - the live view's page (with its Content-Security-Policy), assets and
//     phases; mounting under a prefix.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const t = require('./helpers');
const { mintToken } = require('..');

const DB = 'hx_gateway_stream';
let db;
let g;

const auth = (key) => ({ authorization: `Bearer ${mintToken(t.SECRET, `sessions:${key}`)}` });
const url = (key) => `${g.base}/streams/sessions/${encodeURIComponent(key)}`;

async function insert(key, state, user = 'u-1') {
  await db.query('INSERT INTO sessions (session_id, user_id, state) VALUES ($1, $2, $3)', [key, user, JSON.stringify(state)]);
}
const merge = (key, ops) => t.merge(db, 'sessions', key, ops);
const head = (key) => t.lastSeq(db, `sessions:${key}`);

before(async () => {
  db = await t.gatewayDatabase(DB);
  g = await t.startGateway(DB, { heartbeat: 200 });
});
after(async () => {
  await g.close();
  await db.end();
});

test('a first join: RUN_STARTED, the state with its seq as the id, the conversation, then every event', async () => {
  await insert('a-1', { todos: [], messages: [{ type: 'human', id: 'm1', content: 'hello' }] });
  await merge('a-1', [{ op: 'append', path: '/todos', items: ['x'] }]);
  const c = t.sse(url('a-1'), { headers: auth('a-1') });
  await t.waitFor(() => c.events().length === 3, 'the prelude');
  assert.equal(c.status, 200);
  assert.match(c.headers['content-type'], /^text\/event-stream/);
  assert.equal(c.headers['x-content-type-options'], 'nosniff');
  assert.deepEqual(c.types(), ['RUN_STARTED', 'STATE_SNAPSHOT', 'MESSAGES_SNAPSHOT']);
  const [started, snap, msgs] = c.messages.filter((m) => m.data);
  assert.equal(started.data.threadId, 'sessions:a-1');
  assert.equal(started.id, undefined);
  assert.deepEqual(snap.data.snapshot, { todos: ['x'], messages: [{ type: 'human', id: 'm1', content: 'hello' }] });
  assert.equal(snap.id, String(await head('a-1')));
  assert.equal(msgs.id, undefined, 'the conversation has no id: a reconnect resumes after the state');
  assert.deepEqual(msgs.data.messages, [{ id: 'm1', role: 'user', content: 'hello' }]);
  for (let i = 0; i < 3; i++) await merge('a-1', [{ op: 'increment', path: '/n', by: 1 }]);
  await merge('a-1', [{ op: 'append', path: '/messages', items: [{ type: 'ai', id: 'm2', content: 'hi there' }] }]);
  await t.waitFor(() => c.seqEvents().length === 5, 'four deltas');
  await t.waitFor(() => c.types().at(-1) === 'MESSAGES_SNAPSHOT' && c.events().length === 8, 'the new conversation');
  const ids = c.messages.filter((m) => m.id !== undefined && m.data).map((m) => Number(m.id));
  assert.deepEqual(ids, t.range(ids[0], ids[0] + 4));
  for (const m of c.messages.filter((x) => x.data && x.id !== undefined)) assert.equal(Number(m.id), m.data.metadata.seq);
  assert.deepEqual(c.types().slice(3), ['STATE_DELTA', 'STATE_DELTA', 'STATE_DELTA', 'STATE_DELTA', 'MESSAGES_SNAPSHOT'],
    'the conversation again only when it changed');
  assert.deepEqual(c.events().at(-1).messages.map((m) => [m.id, m.role, m.content]), [['m1', 'user', 'hello'], ['m2', 'assistant', 'hi there']]);
  assert.deepEqual(t.stateOf(c.seqEvents()), await t.rowState(db, 'sessions', 'a-1'));
  c.close();
});

test('Last-Event-ID: the events after it and the conversation; up to date, no snapshot; trimmed, a snapshot', async () => {
  await insert('a-2', { n: 0, messages: [] });
  const c = t.sse(url('a-2'), { headers: auth('a-2') });
  await t.waitFor(() => c.seqEvents().length === 1, 'the snapshot');
  await merge('a-2', [{ op: 'increment', path: '/n', by: 1 }]);
  await t.waitFor(() => c.seqEvents().length === 2, 'a delta');
  c.close();
  const seen = c.seqEvents();
  const last = c.lastId();

  const up = t.sse(url('a-2'), { headers: { ...auth('a-2'), 'last-event-id': last } });
  await t.waitFor(() => up.events().length === 2, 'the prelude of an up-to-date client');
  assert.deepEqual(up.types(), ['RUN_STARTED', 'MESSAGES_SNAPSHOT'], 'no second snapshot');
  assert.deepEqual(up.events()[1].messages, []);
  up.close();

  for (let i = 0; i < 3; i++) await merge('a-2', [{ op: 'append', path: '/l', items: [i] }]);
  const r = t.sse(url('a-2'), { headers: { ...auth('a-2'), 'last-event-id': last } });
  await t.waitFor(() => r.events().length === 5, 'the three events after Last-Event-ID');
  assert.deepEqual(r.types(), ['RUN_STARTED', 'STATE_DELTA', 'STATE_DELTA', 'STATE_DELTA', 'MESSAGES_SNAPSHOT']);
  assert.equal(Number(r.messages.find((m) => m.id !== undefined).id), Number(last) + 1);
  assert.deepEqual(t.stateOf(r.seqEvents(), t.stateOf(seen)), await t.rowState(db, 'sessions', 'a-2'));
  r.close();

  // the log keeps only each stream's last event: the seq after r's is gone
  for (let i = 0; i < 2; i++) await merge('a-2', [{ op: 'increment', path: '/n', by: 1 }]);
  await db.query("SELECT hx_stream_trim('0 seconds')");
  const s = t.sse(url('a-2'), { headers: { ...auth('a-2'), 'last-event-id': r.lastId() } });
  await t.waitFor(() => s.events().length === 3, 'a fresh snapshot');
  assert.deepEqual(s.types(), ['RUN_STARTED', 'STATE_SNAPSHOT', 'MESSAGES_SNAPSHOT']);
  assert.equal(Number(s.lastId()), await head('a-2'));
  assert.deepEqual(s.seqEvents()[0].snapshot, await t.rowState(db, 'sessions', 'a-2'));
  s.close();
});

test('a reused key: a reconnect from before the current row gets its snapshot, never the previous row', async () => {
  const MARK = 'the-previous-owner-secret';
  await insert('a-9', { owner: 'alice', note: MARK }, 'alice');
  await merge('a-9', [{ op: 'replace', path: '/note', value: `${MARK}-2` }]);
  const alice = await head('a-9');
  await db.query("DELETE FROM sessions WHERE session_id = 'a-9'");
  await insert('a-9', { owner: 'bob' }, 'bob');
  await merge('a-9', [{ op: 'increment', path: '/n', by: 1 }]);
  for (const from of ['0', String(alice - 1), String(alice)]) {
    const c = t.sse(url('a-9'), { headers: { ...auth('a-9'), 'last-event-id': from } });
    await t.waitFor(() => c.events().length === 2, `the prelude from ${from}`);
    await t.sleep(100);
    // (a state with no conversation: no MESSAGES_SNAPSHOT)
    assert.deepEqual(c.types(), ['RUN_STARTED', 'STATE_SNAPSHOT'], `from ${from}`);
    assert.deepEqual(c.seqEvents()[0].snapshot, { owner: 'bob', n: 1 });
    assert.equal(Number(c.lastId()), await head('a-9'));
    assert.ok(!c.text.includes(MARK), `nothing of the previous row (from ${from})`);
    c.close();
  }
  // from the end of the previous row: the current row's events, all of its own
  const end = alice + 1;
  const c = t.sse(url('a-9'), { headers: { ...auth('a-9'), 'last-event-id': String(end) } });
  await t.waitFor(() => c.seqEvents().length === 2, 'the current row from its start');
  assert.deepEqual(c.seqEvents().map((e) => e.type), ['STATE_SNAPSHOT', 'STATE_DELTA']);
  assert.equal(c.messages.find((m) => m.id !== undefined).id, String(end + 1));
  assert.ok(!c.text.includes(MARK));
  assert.ok(g.gw.stats.crossed_ends >= 3);
  c.close();
});

test('an idle stream gets heartbeat comments', async () => {
  await insert('a-3', {});
  const c = t.sse(url('a-3'), { headers: auth('a-3') });
  await t.waitFor(() => c.messages.filter((m) => m.comment !== undefined).length >= 2, 'two heartbeats');
  assert.deepEqual(c.types(), ['RUN_STARTED', 'STATE_SNAPSHOT'], 'nothing but the prelude (no conversation) and comments');
  c.close();
});

test('hx.stream_end, RUN_FINISHED, the end of the response; a reconnect from it gets 204, on any gateway', async () => {
  await insert('a-4', { v: 1 });
  const c = t.sse(url('a-4'), { headers: auth('a-4') });
  await t.waitFor(() => c.seqEvents().length === 1, 'the snapshot');
  await db.query("DELETE FROM sessions WHERE session_id = 'a-4'");
  await t.ended(c, 'the response to end after hx.stream_end');
  const [end, finished] = c.events().slice(-2);
  assert.equal(end.type, 'CUSTOM');
  assert.equal(end.name, 'hx.stream_end');
  assert.deepEqual(end.value, { reason: 'deleted' });
  assert.equal(finished.type, 'RUN_FINISHED');
  assert.deepEqual(finished.outcome, { type: 'success' });
  assert.equal(finished.result.reason, 'stream_end');
  const again = t.sse(url('a-4'), { headers: { ...auth('a-4'), 'last-event-id': c.lastId() } });
  await t.ended(again);
  assert.equal(again.status, 204);
  // another gateway (or this one restarted) knows it as well: the log says so
  const other = await t.startGateway(DB, { appName: 'hx-gateway-other' });
  try {
    const o = t.sse(`${other.base}/streams/sessions/a-4`, { headers: { ...auth('a-4'), 'last-event-id': c.lastId() } });
    await t.ended(o);
    assert.equal(o.status, 204);
  } finally {
    await other.close();
  }
  // a stream that ended before the browser came: its end, then the end of the response
  const late = t.sse(url('a-4'), { headers: auth('a-4') });
  await t.ended(late);
  assert.deepEqual(late.types(), ['RUN_STARTED', 'CUSTOM', 'RUN_FINISHED']);
});

test('an event @ag-ui/client would refuse never goes out: a fresh snapshot instead', async () => {
  await insert('a-8', { v: 1 });
  const c = t.sse(url('a-8'), { headers: auth('a-8') });
  await t.waitFor(() => c.seqEvents().length === 1, 'the snapshot');
  // something other than hx_stream writes the log: a delta through __proto__
  // (fast-json-patch refuses it), then one that is no AG-UI event at all
  const seq = await head('a-8');
  for (const [i, event] of [
    { type: 'STATE_DELTA', delta: [{ op: 'add', path: '/__proto__/x', value: 1 }] },
    { type: 'STATE_DELTA', delta: [{ op: 'add', path: 'no-slash', value: 1 }] },
  ].entries()) {
    const e = { ...event, timestamp: Date.now(), metadata: { stream: 'sessions:a-8', seq: seq + 1 + i } };
    await db.query('INSERT INTO hx_event (stream, seq, type, event) VALUES ($1, $2, $3, $4)', ['sessions:a-8', seq + 1 + i, e.type, e]);
  }
  await merge('a-8', [{ op: 'replace', path: '/v', value: 2 }]);
  const end = await head('a-8');
  await t.waitFor(() => Number(c.lastId()) === end, 'the browser to reach the head');
  const sent = c.seqEvents();
  assert.ok(sent.every((e) => !e.delta || e.delta.every((op) => op.path.startsWith('/v'))), 'neither event went out');
  assert.ok(sent.slice(1).some((e) => e.type === 'STATE_SNAPSHOT'), 'a fresh snapshot instead');
  assert.deepEqual(t.stateOf(sent), { v: 2 });
  assert.ok(g.gw.stats.refused_events >= 1);
  c.close();
});

test('the live view: its page with its Content-Security-Policy, its assets, and the phases on the machine', async () => {
  await insert('a-6', {});
  const token = mintToken(t.SECRET, 'sessions:a-6');
  const page = t.sse(`${g.base}/view/sessions/a-6?token=${token}`);
  await t.ended(page);
  assert.equal(page.status, 200);
  assert.match(page.headers['content-type'], /^text\/html/);
  const csp = page.headers['content-security-policy'];
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'self'(;|$)/);
  assert.match(csp, /connect-src 'self'(;|$)/);
  assert.match(csp, /frame-ancestors 'none'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  assert.equal(page.headers['x-content-type-options'], 'nosniff');
  assert.match(page.text, /<title>sessions:a-6 /);
  assert.match(page.text, /src="\.\.\/\.\.\/assets\/view\.js"/);
  assert.doesNotMatch(page.text, /<script>|<style>|\sstyle="|\son[a-z]+="/, 'nothing inline that the policy would block');
  assert.doesNotMatch(page.text, /https?:\/\//, 'nothing fetched from elsewhere');
  for (const asset of ['view.js', 'view.css']) {
    const a = t.sse(`${g.base}/assets/${asset}`);
    await t.ended(a);
    assert.equal(a.status, 200);
    assert.equal(a.headers['x-content-type-options'], 'nosniff');
    assert.doesNotMatch(a.text.replace(/http:\/\/www\.w3\.org\/2000\/svg/g, ''), /https?:\/\//, `${asset} fetches nothing from elsewhere`);
  }
  const p = t.sse(`${g.base}/phases/sessions/a-6?token=${token}`);
  await t.waitFor(() => p.messages.some((m) => m.event === 'phase'), 'the phase');
  const machine = p.messages.find((m) => m.event === 'machine').data;
  assert.equal(machine.machine, 'agent_session');
  assert.equal(machine.initial, 'chatting');
  assert.ok(machine.transitions.some((e) => e.from === 'chatting' && e.event === 'start_build' && e.to === 'building'));
  assert.deepEqual(p.messages.find((m) => m.event === 'phase').data, { phase: 'chatting', exists: true });
  await db.query("UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'start_build') WHERE session_id = 'a-6'");
  await t.waitFor(() => p.messages.filter((m) => m.event === 'phase').length === 2, 'the phase change');
  assert.deepEqual(p.messages.filter((m) => m.event === 'phase')[1].data, { phase: 'building', exists: true });
  p.close();
});

test('mounted under a prefix: its paths are the gateway\'s, the others the application\'s', async () => {
  const server = http.createServer((req, res) => {
    if (req.url.startsWith('/hx/')) {
      req.url = req.url.slice(3);
      g.gw.handler(req, res, () => res.writeHead(418).end());
      return;
    }
    res.writeHead(200).end('app');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const base = `http://127.0.0.1:${server.address().port}`;
    await insert('a-7', { ok: true });
    const c = t.sse(`${base}/hx/streams/sessions/a-7`, { headers: auth('a-7') });
    await t.waitFor(() => c.seqEvents().length === 1, 'the snapshot');
    assert.deepEqual(c.seqEvents()[0].snapshot, { ok: true });
    c.close();
    const other = t.sse(`${base}/hx/elsewhere`);
    await t.ended(other);
    assert.equal(other.status, 418, 'next() for a path that is not the gateway\'s');
    const health = t.sse(`${base}/hx/healthz`);
    await t.ended(health);
    assert.equal(JSON.parse(health.text).ok, true);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});
