'use strict';
// The Durable Streams endpoint with hxstate's streams: reads of a table's
// stream and of log streams (an offset is a seq; the log trimmed under an
// offset is 410), appends to log streams through hx_stream_send with
// idempotent producers kept in PostgreSQL (exactly once across a restart,
// and nothing of a refused append kept), who may read and write what
// (tokens and their scopes), and what a client may make it spend.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const t = require('./helpers');
const { mintToken, durableToken, setupDurable } = require('..');

const DB = 'hx_gateway_durable';
const OFF = (seq) => `0000000000000000_${String(seq).padStart(16, '0')}`;
let db;
let g;

const OPTIONS = {
  maxBody: 64 * 1024,
  maxPerClient: 3,
  stallTimeout: 500,
  durable: { logPrefixes: ['@agent:'], maxStreamBytes: 256 * 1024, maxProducers: 3, longPollMs: 3000, maxReadBytes: 600 },
};

const read = (k) => `Bearer ${mintToken(t.SECRET, k)}`;
const write = (k, scopes = ['read', 'append']) => `Bearer ${durableToken(t.SECRET, k, { scopes })}`;

async function req(path, { method = 'GET', headers = {}, body } = {}) {
  const res = await fetch(`${g.base}${path}`, { method, headers, body });
  const text = method === 'HEAD' ? '' : await res.text();
  return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) };
}

/** Every message of a stream from offset, following Stream-Next-Offset until up to date: {messages, reads}. */
async function readAll(path, headers, offset = '-1') {
  const messages = [];
  let reads = 0;
  for (;;) {
    const r = await req(`${path}?offset=${offset}`, { headers });
    assert.equal(r.status, 200);
    reads++;
    messages.push(...r.json());
    offset = r.headers.get('stream-next-offset');
    if (r.headers.get('stream-up-to-date') === 'true') return { messages, reads, offset };
  }
}

async function bump(key, n = 1) {
  for (let i = 0; i < n; i++) {
    await db.query("UPDATE sessions SET state = hx_merge(state, '[{\"op\": \"increment\", \"path\": \"/n\", \"by\": 1}]') WHERE session_id = $1", [key]);
  }
}

before(async () => {
  db = await t.gatewayDatabase(DB);
  await setupDurable(db);
  await db.query("INSERT INTO sessions (session_id, user_id, state) VALUES ('s-1', 'u', '{\"n\": 0}')");
  await bump('s-1', 4);
  g = await t.startGateway(DB, OPTIONS);
});

after(async () => {
  await g.close();
  await db.end();
});

test("a table's stream reads as JSON messages, one event each; an offset is the seq of the last event read", async () => {
  const auth = { authorization: read('sessions:s-1') };
  const first = await req('/ds/sessions:s-1?offset=-1', { headers: auth });
  assert.equal(first.status, 200);
  assert.equal(first.headers.get('content-type'), 'application/json');
  const all = await readAll('/ds/sessions:s-1', auth);
  assert.deepEqual(all.messages.map((e) => e.metadata.seq), [1, 2, 3, 4, 5]);
  assert.deepEqual(all.messages.map((e) => e.type), ['STATE_SNAPSHOT', 'STATE_DELTA', 'STATE_DELTA', 'STATE_DELTA', 'STATE_DELTA']);
  assert.equal(all.offset, OFF(5));
  const from3 = await readAll('/ds/sessions:s-1', auth, OFF(3));
  assert.deepEqual(from3.messages.map((e) => e.metadata.seq), [4, 5]);
  const head = await req('/ds/sessions:s-1', { method: 'HEAD', headers: auth });
  assert.equal(head.status, 200);
  assert.equal(head.headers.get('stream-next-offset'), OFF(5));
  assert.equal(head.headers.get('stream-closed'), null, "hxstate's streams are never closed (hx.stream_end is a message)");
  // a key with no event, and a prefix no served table has
  assert.equal((await req('/ds/sessions:nobody', { headers: { authorization: read('sessions:nobody') } })).status, 404);
  assert.equal((await req('/ds/other:s-1', { headers: auth })).status, 404);
});

test('a read holds at most maxReadBytes (the first message always); following the offsets reads every event once', async () => {
  const auth = { authorization: read('sessions:s-1') };
  const { messages, reads } = await readAll('/ds/sessions:s-1', auth);
  assert.deepEqual(messages.map((e) => e.metadata.seq), [1, 2, 3, 4, 5]);
  assert.ok(reads > 1, `600 bytes hold fewer than five events: ${reads} reads`);
});

test('an offset before the part of the log that was dropped is 410; -1 reads from the oldest event held', async () => {
  await db.query("INSERT INTO sessions (session_id, user_id, state) VALUES ('s-trim', 'u', '{\"n\": 0}')");
  await bump('s-trim', 3);
  // what the ring does when a day's partition goes: the oldest events are no more
  await db.query("DELETE FROM hx_event WHERE stream = 'sessions:s-trim' AND seq <= 2");
  const auth = { authorization: read('sessions:s-trim') };
  const gone = await req(`/ds/sessions:s-trim?offset=${OFF(1)}`, { headers: auth });
  assert.equal(gone.status, 410);
  assert.match(gone.json().error, /no longer holds/);
  assert.equal((await req(`/ds/sessions:s-trim?offset=${OFF(0)}`, { headers: auth })).status, 410);
  const oldest = await req('/ds/sessions:s-trim?offset=-1', { headers: auth });
  assert.deepEqual(oldest.json().map((e) => e.metadata.seq), [3, 4]);
  assert.equal((await req(`/ds/sessions:s-trim?offset=${OFF(2)}`, { headers: auth })).status, 200, 'from the first event held');
});

test('a log stream under a log prefix takes AG-UI events through hx_stream_send, each append once per (producer, epoch, seq), across a restart', async () => {
  const auth = { authorization: write('@agent:t-1'), 'content-type': 'application/json' };
  assert.equal((await req('/ds/@agent:t-1', { method: 'PUT', headers: auth })).status, 201);
  assert.equal((await req('/ds/@agent:t-1', { method: 'PUT', headers: auth })).status, 200);
  const p = (seq) => ({ ...auth, 'producer-id': 'w-1', 'producer-epoch': '0', 'producer-seq': String(seq) });
  const events = JSON.stringify([{ type: 'STATE_SNAPSHOT', snapshot: { a: 1 } }, { type: 'STATE_DELTA', delta: [{ op: 'replace', path: '/a', value: 2 }] }]);
  const first = await req('/ds/@agent:t-1', { method: 'POST', headers: p(0), body: events });
  assert.equal(first.status, 200);
  assert.equal(first.headers.get('stream-next-offset'), OFF(2));
  assert.equal(first.headers.get('producer-seq'), '0');
  const retry = await req('/ds/@agent:t-1', { method: 'POST', headers: p(0), body: events });
  assert.equal(retry.status, 204, 'a retry is acknowledged, not appended');
  // the gateway restarts: the producer's state is in PostgreSQL
  const port = g.port;
  await g.close();
  g = await t.startGateway(DB, OPTIONS, port);
  assert.equal((await req('/ds/@agent:t-1', { method: 'POST', headers: p(0), body: events })).status, 204, 'deduplicated after a restart');
  const gap = await req('/ds/@agent:t-1', { method: 'POST', headers: p(2), body: events });
  assert.equal(gap.status, 409);
  assert.equal(gap.headers.get('producer-expected-seq'), '1');
  // an append the extension refuses (its second event) leaves nothing: no event, no producer state
  const bad = JSON.stringify([{ type: 'CUSTOM', name: 'ok', value: 1 }, { type: 'CUSTOM', name: 'hx.mine', value: 1 }]);
  const refused = await req('/ds/@agent:t-1', { method: 'POST', headers: p(1), body: bad });
  assert.equal(refused.status, 400);
  assert.match(refused.json().error, /reserved/);
  const good = await req('/ds/@agent:t-1', { method: 'POST', headers: p(1), body: JSON.stringify({ type: 'CUSTOM', name: 'ok', value: 1 }) });
  assert.equal(good.status, 200, 'the same producer seq is still the next one');
  const { rows } = await db.query("SELECT seq, type FROM hx_event WHERE stream = '@agent:t-1' ORDER BY seq");
  assert.deepEqual(rows.map((r) => [Number(r.seq), r.type]), [[1, 'STATE_SNAPSHOT'], [2, 'STATE_DELTA'], [3, 'CUSTOM']]);
  const { rows: prod } = await db.query("SELECT epoch, seq FROM hx_durable.producer WHERE stream = '@agent:t-1' AND producer = 'w-1'");
  assert.deepEqual(prod.map((r) => [Number(r.epoch), Number(r.seq)]), [[0, 1]]);
  // a zombie of an older epoch is fenced off once a newer epoch wrote
  const e1 = await req('/ds/@agent:t-1', { method: 'POST', headers: { ...p(0), 'producer-epoch': '1' }, body: JSON.stringify({ type: 'CUSTOM', name: 'e1', value: 1 }) });
  assert.equal(e1.status, 200);
  const zombie = await req('/ds/@agent:t-1', { method: 'POST', headers: p(2), body: JSON.stringify({ type: 'CUSTOM', name: 'z', value: 1 }) });
  assert.equal(zombie.status, 403);
  assert.equal(zombie.headers.get('producer-epoch'), '1');
  // Stream-Seq: a writer's own order, refused when it goes back
  assert.equal((await req('/ds/@agent:t-1', { method: 'POST', headers: { ...auth, 'stream-seq': 'b' }, body: JSON.stringify({ type: 'CUSTOM', name: 's', value: 1 }) })).status, 204);
  assert.equal((await req('/ds/@agent:t-1', { method: 'POST', headers: { ...auth, 'stream-seq': 'a' }, body: JSON.stringify({ type: 'CUSTOM', name: 's', value: 2 }) })).status, 409);
  // a reader of the log stream sees what hx_stream_send logged
  const all = await readAll('/ds/@agent:t-1', { authorization: read('@agent:t-1') });
  assert.deepEqual(all.messages.map((e) => e.metadata.seq), [1, 2, 3, 4, 5]);
});

test("what the endpoint does not write: a table's stream, log streams outside the prefixes, deletes and closes of log streams", async () => {
  const json = { 'content-type': 'application/json' };
  const ev = JSON.stringify({ type: 'CUSTOM', name: 'x', value: 1 });
  const table = await req('/ds/sessions:s-1', { method: 'POST', headers: { ...json, authorization: write('sessions:s-1') }, body: ev });
  assert.equal(table.status, 405);
  assert.equal(table.headers.get('allow'), 'GET, HEAD, OPTIONS');
  assert.equal((await req('/ds/sessions:s-1', { method: 'PUT', headers: { ...json, authorization: write('sessions:s-1') } })).status, 405);
  assert.equal((await req('/ds/sessions:s-1', { method: 'DELETE', headers: { authorization: write('sessions:s-1') } })).status, 405);
  assert.equal((await req('/ds/@other:t-1', { method: 'PUT', headers: { ...json, authorization: write('@other:t-1') } })).status, 403);
  assert.equal((await req('/ds/@agent:t-1', { method: 'DELETE', headers: { authorization: write('@agent:t-1') } })).status, 405);
  assert.equal((await req('/ds/@agent:t-1', { method: 'POST', headers: { ...json, 'stream-closed': 'true', authorization: write('@agent:t-1') } })).status, 405);
  assert.equal((await req('/ds/@agent:t-1', { method: 'PUT', headers: { 'content-type': 'text/plain', authorization: write('@agent:t-1') } })).status, 409);
  assert.equal((await req('/ds/@agent:new', { method: 'POST', headers: { ...json, authorization: write('@agent:new') }, body: ev })).status, 404, 'a log stream is created first');
  const notAgui = await req('/ds/@agent:t-1', { method: 'POST', headers: { ...json, authorization: write('@agent:t-1') }, body: '{"x": 1}' });
  assert.equal(notAgui.status, 400);
});

test('tokens: none is 401, another stream is 403, a read token does not write, scopes grant what they name', async () => {
  const ev = JSON.stringify({ type: 'CUSTOM', name: 'x', value: 1 });
  const json = { 'content-type': 'application/json' };
  assert.equal((await req('/ds/sessions:s-1')).status, 401);
  assert.equal((await req('/ds/sessions:s-1', { headers: { authorization: 'Bearer nonsense.sig' } })).status, 401);
  assert.equal((await req('/ds/sessions:s-1', { headers: { authorization: read('sessions:s-2') } })).status, 403);
  assert.equal((await req('/ds/@agent:t-1', { headers: { authorization: read('sessions:s-1') } })).status, 403);
  assert.equal((await req('/ds/@agent:t-1', { method: 'POST', headers: { ...json, authorization: read('@agent:t-1') }, body: ev })).status, 403, 'a token without scopes reads only');
  assert.equal((await req('/ds/@agent:t-1', { method: 'POST', headers: { ...json, authorization: write('@agent:t-1', ['read']) }, body: ev })).status, 403);
  assert.equal((await req('/ds/@agent:t-1', { headers: { authorization: write('@agent:t-1', ['append']) } })).status, 403, 'append alone does not read');
  assert.equal((await req('/ds/@agent:t-1', { method: 'POST', headers: { ...json, authorization: write('@agent:t-1', ['append']) }, body: ev })).status, 204);
  assert.equal((await req('/ds/@agent:t-1', { method: 'POST', headers: { ...json, authorization: write({ table: '@agent', all: true }) }, body: ev })).status, 204, 'a token for every key of "@agent"');
  // byte streams are the table "ds" to tokens; a fork reads its source, so needs a token for it too
  const bytes = write({ table: 'ds', key: 'b/one' });
  assert.equal((await req('/ds/b/one', { method: 'PUT', headers: { 'content-type': 'text/plain', authorization: bytes }, body: 'hello' })).status, 201);
  assert.equal((await req('/ds/b/fork', { method: 'PUT', headers: { authorization: write({ table: 'ds', key: 'b/fork' }), 'stream-forked-from': '/ds/b/one' } })).status, 403);
  assert.equal((await req('/ds/b/fork', { method: 'PUT', headers: { authorization: write({ table: 'ds', all: true }), 'stream-forked-from': '/ds/b/one' } })).status, 201);
  assert.equal((await req('/ds/b/fork', { headers: { authorization: bytes } })).status, 403);
  assert.throws(() => durableToken(t.SECRET, 'sessions:s-1', { scopes: ['delete'] }), /scopes/);
});

test('bounds: a body past maxBody is 413, a stream past maxStreamBytes is 413, a producer past maxProducers is 429', async () => {
  const auth = write({ table: 'ds', all: true });
  const bin = { authorization: auth, 'content-type': 'application/octet-stream' };
  assert.equal((await req('/ds/big', { method: 'PUT', headers: bin })).status, 201);
  assert.equal((await req('/ds/big', { method: 'POST', headers: bin, body: Buffer.alloc(65 * 1024) })).status, 413);
  for (let i = 0; i < 4; i++) assert.equal((await req('/ds/big', { method: 'POST', headers: bin, body: Buffer.alloc(60 * 1024) })).status, 204);
  const full = await req('/ds/big', { method: 'POST', headers: bin, body: Buffer.alloc(60 * 1024) });
  assert.equal(full.status, 413);
  assert.match(full.json().error, /at most 262144 bytes/);
  const { rows: [s] } = await db.query("SELECT tail, bytes FROM hx_durable.stream WHERE name = 'big'");
  assert.deepEqual([Number(s.tail), Number(s.bytes)], [4, 4 * 60 * 1024], 'nothing of the refused appends was kept');
  for (let i = 0; i < 3; i++) {
    assert.equal((await req('/ds/big', { method: 'POST', headers: { ...bin, 'producer-id': `p${i}`, 'producer-epoch': '0', 'producer-seq': '0' }, body: 'x' })).status, 200);
  }
  const many = await req('/ds/big', { method: 'POST', headers: { ...bin, 'producer-id': 'p3', 'producer-epoch': '0', 'producer-seq': '0' }, body: 'x' });
  assert.equal(many.status, 429);
  assert.equal(many.headers.get('retry-after'), '60');
  assert.equal((await req('/ds/big', { method: 'POST', headers: { ...bin, 'producer-id': 'p0', 'producer-epoch': '0', 'producer-seq': '1' }, body: 'x' })).status, 200, 'known producers go on');
});

test('live readers hold client slots: past maxPerClient a long-poll is 429', async () => {
  const auth = { authorization: read('sessions:s-1') };
  const polls = [0, 1, 2].map(() => req(`/ds/sessions:s-1?offset=${OFF(5)}&live=long-poll`, { headers: auth }));
  await t.waitFor(() => g.gw.durable.waiting === 3, 'three long-polls to wait');
  const fourth = await req(`/ds/sessions:s-1?offset=${OFF(5)}&live=long-poll`, { headers: auth });
  assert.equal(fourth.status, 429);
  assert.equal(fourth.headers.get('retry-after'), '10');
  const done = await Promise.all(polls);
  assert.deepEqual(done.map((r) => r.status), [204, 204, 204], 'the three time out with 204 at the tail');
  assert.equal(done[0].headers.get('stream-up-to-date'), 'true');
  assert.match(done[0].headers.get('stream-cursor'), /^[0-9]+$/);
});

test('an SSE reader that does not read is cut off after stallTimeout; what it holds is one event and its socket', { timeout: 120000 }, async () => {
  // a gateway whose streams hold more than the kernel's socket buffers
  const big = await t.startGateway(DB, { maxBody: 1024 * 1024, stallTimeout: 500, durable: { maxStreamBytes: 40 * 1024 * 1024 } });
  try {
    const auth = write({ table: 'ds', all: true });
    const bin = { authorization: auth, 'content-type': 'application/octet-stream' };
    const put = await fetch(`${big.base}/ds/stall`, { method: 'PUT', headers: bin });
    assert.equal(put.status, 201);
    for (let i = 0; i < 32; i++) {
      const r = await fetch(`${big.base}/ds/stall`, { method: 'POST', headers: bin, body: Buffer.alloc(1024 * 1024, 0x41 + (i % 26)) });
      assert.equal(r.status, 204);
    }
    let received = 0;
    const r = http.request(`${big.base}/ds/stall?offset=-1&live=sse`, { headers: { authorization: auth }, agent: false });
    r.on('response', (res) => {
      res.once('data', (chunk) => {
        received += chunk.length;
        res.pause(); // and reads no more
      });
    });
    r.on('error', () => {});
    r.end();
    await t.waitFor(() => big.gw.durable.stats.stalled === 1, 'the gateway to cut the stalled reader off');
    r.destroy();
    assert.ok(received > 0, 'the reader got the start of the stream');
    assert.equal(big.gw.durable.stats.stalled, 1, 'the gateway cut the stalled reader off');
  } finally {
    await big.close();
  }
});

test('the command: --durable-log-prefixes serves the endpoint, and token --scopes mints its tokens', { timeout: 60000 }, async () => {
  const { spawn, execFileSync } = require('node:child_process');
  const path = require('node:path');
  const bin = path.join(__dirname, '..', 'bin', 'hxstate-gateway.js');
  const env = { ...process.env, HX_GATEWAY_SECRET: t.SECRET, DATABASE_URL: t.databaseUrl(DB) };
  const mint = (...args) => execFileSync(process.execPath, [bin, 'token', ...args], { env, encoding: 'utf8' }).trim().split('\n')[0];
  const child = spawn(process.execPath, [bin, '--port', '0', '--durable-log-prefixes', '@cli:'], { env });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  try {
    await t.waitFor(() => /Durable Streams: (http:\/\/\S+)\/ds\/<stream>/.test(out), `the command to listen: ${out}`);
    const base = /Durable Streams: (http:\/\/\S+)\/ds\/<stream>/.exec(out)[1];
    const writer = { authorization: `Bearer ${mint('@cli:t-1', '--scopes', 'read,append')}`, 'content-type': 'application/json' };
    assert.equal((await fetch(`${base}/ds/@cli:t-1`, { method: 'PUT', headers: writer })).status, 201);
    const ev = JSON.stringify({ type: 'CUSTOM', name: 'from-cli', value: 1 });
    assert.equal((await fetch(`${base}/ds/@cli:t-1`, { method: 'POST', headers: writer, body: ev })).status, 204);
    const readOnly = { authorization: `Bearer ${mint('@cli:t-1')}`, 'content-type': 'application/json' };
    assert.equal((await fetch(`${base}/ds/@cli:t-1`, { method: 'POST', headers: readOnly, body: ev })).status, 403);
    const r = await fetch(`${base}/ds/@cli:t-1`, { headers: readOnly });
    assert.deepEqual((await r.json()).map((e) => e.name), ['from-cli']);
    assert.throws(() => mint('@cli:t-1', '--scopes', 'delete'), /--scopes is a list of read, run, resume, append/);
  } finally {
    child.kill('SIGTERM');
    const code = await new Promise((resolve) => (child.exitCode === null ? child.on('exit', resolve) : resolve(child.exitCode)));
    assert.equal(code, 0, 'the command stops cleanly');
  }
});

test("a gateway with durable on a database without the endpoint's tables does not start, and says what to run", async () => {
  const bare = await t.gatewayDatabase('hx_gateway_durable_bare');
  try {
    const { createGateway } = require('..');
    const gw = createGateway({ pg: { database: 'hx_gateway_durable_bare' }, tables: ['sessions'], secret: t.SECRET, durable: true, log: () => {} });
    await assert.rejects(gw.ready, /durable\.sql/);
    await gw.close();
    assert.throws(() => createGateway({ pg: {}, secret: t.SECRET, durable: { logPrefixes: ['agent:'] } }), /logPrefixes/);
    assert.throws(() => createGateway({ pg: {}, secret: t.SECRET, durable: { maxReadBytes: 0 } }), /maxReadBytes/);
  } finally {
    await bare.end();
  }
});

test("@durable-streams/client's IdempotentProducer, 5 batches in flight, lands 500 events on a log stream once each, in order", { timeout: 60000 }, async () => {
  const { DurableStream, IdempotentProducer } = require('@durable-streams/client');
  const name = '@agent:pipelined';
  const headers = { authorization: write(name) };
  const s = await DurableStream.create({ url: `${g.base}/ds/${name}`, contentType: 'application/json', headers });
  const errors = [];
  const p = new IdempotentProducer(s, 'w', { lingerMs: 0, maxInFlight: 5, maxBatchBytes: 300, onError: (e) => errors.push(e) });
  for (let i = 0; i < 500; i++) p.append(JSON.stringify({ type: 'CUSTOM', name: 'n', value: i }));
  await p.flush();
  await p.detach();
  assert.deepEqual(errors, []);
  const { rows } = await db.query("SELECT seq, (event->>'value')::int AS v FROM hx_event WHERE stream = $1 ORDER BY seq", [name]);
  assert.deepEqual(rows.map((r) => [Number(r.seq), r.v]), Array.from({ length: 500 }, (_, i) => [i + 1, i]));
  const { rows: [prod] } = await db.query("SELECT epoch, seq FROM hx_durable.producer WHERE stream = $1 AND producer = 'w'", [name]);
  assert.ok(Number(prod.seq) > 10, `many batches (${prod.seq + 1})`);
});
