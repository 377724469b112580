'use strict';
// GET /streams/<table>/<key>: what a browser's EventSource gets.
//   - the current state first (a STATE_SNAPSHOT whose SSE id is its seq),
//     then every event, each with its seq as its id;
//   - a reconnect with Last-Event-ID resumes after that seq, with no
//     snapshot, while the log holds what follows; a fresh snapshot when the
//     log was trimmed;
//   - heartbeat comments on an idle stream; hx.stream_end, then the
//     response ends, and a reconnect from it gets 204 (stop reconnecting);
//   - a browser that stops reading holds at most maxQueue events in the
//     gateway, then skips to a fresh snapshot, and is exact again;
//   - the live view's page, assets and phases; mounting under a prefix.
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

async function insert(key, state) {
  await db.query('INSERT INTO sessions (session_id, user_id, state) VALUES ($1, $2, $3)', [key, 'u-1', JSON.stringify(state)]);
}
const merge = (key, ops) => t.merge(db, 'sessions', key, ops);
const head = (key) => t.lastSeq(db, `sessions:${key}`);

before(async () => {
  db = await t.freshDatabase(DB);
  await t.sessionsTable(db);
  await db.query('SELECT hx_stream_publication()');
  g = await t.startGateway(DB, { heartbeat: 200 });
});
after(async () => {
  await g.close();
  await db.end();
});

test('the state first, its seq as the id, then every event with its seq', async () => {
  await insert('a-1', { todos: [] });
  await merge('a-1', [{ op: 'append', path: '/todos', items: ['x'] }]);
  const c = t.sse(url('a-1'), { headers: auth('a-1') });
  await t.waitFor(() => c.events().length === 1, 'the snapshot');
  assert.equal(c.status, 200);
  assert.match(c.headers['content-type'], /^text\/event-stream/);
  const [snap] = c.messages.filter((m) => m.data);
  assert.equal(snap.data.type, 'STATE_SNAPSHOT');
  assert.deepEqual(snap.data.snapshot, { todos: ['x'] });
  assert.equal(snap.id, String(await head('a-1')));
  for (let i = 0; i < 3; i++) await merge('a-1', [{ op: 'increment', path: '/n', by: 1 }]);
  await t.waitFor(() => c.events().length === 4, 'three deltas');
  const ids = c.messages.filter((m) => m.data).map((m) => Number(m.id));
  assert.deepEqual(ids, t.range(ids[0], ids[0] + 3));
  for (const m of c.messages.filter((x) => x.data)) assert.equal(Number(m.id), m.data.metadata.seq);
  assert.deepEqual(t.stateOf(c.events()), await t.rowState(db, 'sessions', 'a-1'));
  c.close();
});

test('Last-Event-ID resumes after that seq with no snapshot; a trimmed log gets a snapshot', async () => {
  await insert('a-2', { n: 0 });
  const c = t.sse(url('a-2'), { headers: auth('a-2') });
  await t.waitFor(() => c.events().length === 1, 'the snapshot');
  await merge('a-2', [{ op: 'increment', path: '/n', by: 1 }]);
  await t.waitFor(() => c.events().length === 2, 'a delta');
  c.close();
  const seen = c.events();
  const last = c.lastId();
  for (let i = 0; i < 3; i++) await merge('a-2', [{ op: 'append', path: '/l', items: [i] }]);
  const r = t.sse(url('a-2'), { headers: { ...auth('a-2'), 'last-event-id': last } });
  await t.waitFor(() => r.events().length === 3, 'the three events after Last-Event-ID');
  assert.deepEqual(r.events().map((e) => e.type), ['STATE_DELTA', 'STATE_DELTA', 'STATE_DELTA']);
  assert.equal(Number(r.messages.find((m) => m.data).id), Number(last) + 1);
  assert.deepEqual(t.stateOf(r.events(), t.stateOf(seen)), await t.rowState(db, 'sessions', 'a-2'));
  r.close();

  // the log keeps only each stream's last event: the seq after r's is gone
  for (let i = 0; i < 2; i++) await merge('a-2', [{ op: 'increment', path: '/n', by: 1 }]);
  await db.query("SELECT hx_stream_trim('0 seconds')");
  const s = t.sse(url('a-2'), { headers: { ...auth('a-2'), 'last-event-id': r.lastId() } });
  await t.waitFor(() => s.events().length === 1, 'a fresh snapshot');
  assert.equal(s.events()[0].type, 'STATE_SNAPSHOT');
  assert.equal(Number(s.lastId()), await head('a-2'));
  assert.deepEqual(s.events()[0].snapshot, await t.rowState(db, 'sessions', 'a-2'));
  s.close();
});

test('an idle stream gets heartbeat comments', async () => {
  await insert('a-3', {});
  const c = t.sse(url('a-3'), { headers: auth('a-3') });
  await t.waitFor(() => c.messages.filter((m) => m.comment !== undefined).length >= 2, 'two heartbeats');
  assert.equal(c.events().length, 1, 'nothing but the snapshot and comments');
  c.close();
});

test('hx.stream_end goes out, the response ends, and a reconnect from it gets 204', async () => {
  await insert('a-4', { v: 1 });
  const c = t.sse(url('a-4'), { headers: auth('a-4') });
  await t.waitFor(() => c.events().length === 1, 'the snapshot');
  await db.query("DELETE FROM sessions WHERE session_id = 'a-4'");
  await t.ended(c, 'the response to end after hx.stream_end');
  const last = c.events().at(-1);
  assert.equal(last.type, 'CUSTOM');
  assert.equal(last.name, 'hx.stream_end');
  assert.deepEqual(last.value, { reason: 'deleted' });
  const again = t.sse(url('a-4'), { headers: { ...auth('a-4'), 'last-event-id': c.lastId() } });
  await t.ended(again);
  assert.equal(again.status, 204);
  // a stream that ended before the browser came: its end, then the end of the response
  const late = t.sse(url('a-4'), { headers: auth('a-4') });
  await t.ended(late);
  assert.deepEqual(late.events().map((e) => e.name), ['hx.stream_end']);
});

test('a browser that stops reading holds at most maxQueue events, then skips to a snapshot', async () => {
  const MAX_QUEUE = 4;
  const slow = await t.startGateway(DB, { maxQueue: MAX_QUEUE, appName: 'hx-gateway-slow' });
  try {
    await insert('a-5', { big: [] });
    const c = t.sse(`${slow.base}/streams/sessions/a-5`, { headers: auth('a-5') });
    await t.waitFor(() => c.events().length === 1, 'the snapshot');
    c.res.pause(); // the browser stops reading: the socket's buffers fill, then the hub's queue
    const big = 'x'.repeat(200000);
    let maxQueued = 0;
    for (let i = 0; i < 40; i++) {
      await merge('a-5', [{ op: 'replace', path: '/big', value: `${i}${big}` }, { op: 'increment', path: '/n', by: 1 }]);
      for (const sub of slow.gw.hub.subscriptions) maxQueued = Math.max(maxQueued, sub.stats.maxQueued);
    }
    await t.waitFor(() => slow.gw.hub.subscriptions.some((s) => s.stats.overflows > 0), 'the queue to overflow');
    for (const sub of slow.gw.hub.subscriptions) maxQueued = Math.max(maxQueued, sub.stats.maxQueued);
    assert.ok(maxQueued <= MAX_QUEUE, `at most ${MAX_QUEUE} events queued (${maxQueued})`);
    c.res.resume();
    const end = await head('a-5');
    await t.waitFor(() => Number(c.lastId()) === end, 'the browser to catch up');
    const events = c.events();
    // it skipped: a fresh snapshot mid-stream, and fewer events than seqs
    assert.ok(events.slice(1).some((e) => e.type === 'STATE_SNAPSHOT'), 'a snapshot after the overflow');
    assert.ok(events.length < 41, `skipped some events (${events.length})`);
    assert.deepEqual(t.stateOf(events), await t.rowState(db, 'sessions', 'a-5'));
    c.close();
  } finally {
    await slow.close();
  }
});

test('an event @ag-ui/client would refuse never goes out: a fresh snapshot instead', async () => {
  await insert('a-8', { v: 1 });
  const c = t.sse(url('a-8'), { headers: auth('a-8') });
  await t.waitFor(() => c.events().length === 1, 'the snapshot');
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
  const sent = c.events();
  assert.ok(sent.every((e) => !e.delta || e.delta.every((op) => op.path.startsWith('/v'))), 'neither event went out');
  assert.ok(sent.slice(1).some((e) => e.type === 'STATE_SNAPSHOT'), 'a fresh snapshot instead');
  assert.deepEqual(t.stateOf(sent), { v: 2 });
  assert.ok(g.gw.stats.refused_events >= 1);
  c.close();
});

test('the live view: its page, its assets, and the phases on the machine', async () => {
  await insert('a-6', {});
  const token = mintToken(t.SECRET, 'sessions:a-6');
  const page = t.sse(`${g.base}/view/sessions/a-6?token=${token}`);
  await t.ended(page);
  assert.equal(page.status, 200);
  assert.match(page.headers['content-type'], /^text\/html/);
  assert.match(page.text, /<title>sessions:a-6 /);
  assert.match(page.text, /src="\.\.\/\.\.\/assets\/view\.js"/);
  assert.doesNotMatch(page.text, /https?:\/\//, 'nothing fetched from elsewhere');
  for (const asset of ['view.js', 'view.css']) {
    const a = t.sse(`${g.base}/assets/${asset}`);
    await t.ended(a);
    assert.equal(a.status, 200);
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
    await t.waitFor(() => c.events().length === 1, 'the snapshot');
    assert.deepEqual(c.events()[0].snapshot, { ok: true });
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
