'use strict';
// Requests, large states and the server's own bounds:
//   - a conversation of 0.7 MB (a state of 0.7 MB and its MESSAGES_SNAPSHOT
//     of 0.7 MB: more than maxClientBytes together) reaches a fast
//     client: its MESSAGES_SNAPSHOT comes, in the prelude and after a
//     change, with no overflow;
//   - every run ends with RUN_FINISHED or RUN_ERROR, whatever the client
//     holds: a state of 1.2 MiB, past maxClientBytes;
//   - a refused request's body is not read: a POST without a token gets
//     401 and its connection is closed (lingeringly) after at most a
//     bounded number of bytes, whether the body comes fast or trickles;
//   - createServer(gateway): headersTimeout, requestTimeout and
//     maxConnections set (a client that never finishes its headers is cut
//     off);
//   - capabilities need a token that may read the table.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const http = require('node:http');
const t = require('./helpers');
const { mintToken, createGateway, createServer } = require('..');

const DB = 'hx_gateway_requests';
const KB = 1024;
const MB = 1024 * 1024;
let db;

before(async () => {
  db = await t.gatewayDatabase(DB);
});
after(async () => { await db.end(); });

const bearer = (key) => ({ authorization: `Bearer ${mintToken(t.SECRET, `sessions:${key}`)}`, 'content-type': 'application/json' });

test('a conversation of 0.7 MB: its MESSAGES_SNAPSHOT comes, in the prelude and after each change, with no overflow', async () => {
  const messages = Array.from({ length: 7 }, (_, i) => ({ type: 'human', id: `m-${i}`, content: String(i).repeat(100 * KB) }));
  await db.query('INSERT INTO sessions (session_id, user_id, state) VALUES ($1, $2, $3)', ['conv', 'u', JSON.stringify({ messages })]);
  const g = await t.startGateway(DB, { appName: 'hx-gateway-requests-conv' });
  try {
    const c = t.sse(`${g.base}/streams/sessions/conv`, { headers: bearer('conv') });
    await t.waitFor(() => c.types().includes('MESSAGES_SNAPSHOT'), 'the conversation');
    assert.deepEqual(c.types(), ['RUN_STARTED', 'STATE_SNAPSHOT', 'MESSAGES_SNAPSHOT']);
    assert.equal(c.events()[2].messages.length, 7);
    await t.merge(db, 'sessions', 'conv', [{ op: 'append', path: '/messages', items: [{ type: 'ai', id: 'm-7', content: 'ok' }] }]);
    await t.waitFor(() => c.types().filter((x) => x === 'MESSAGES_SNAPSHOT').length === 2, 'the conversation after the change');
    assert.equal(c.events().at(-1).messages.length, 8);
    assert.equal(g.gw.stats.overflows, 0);
    c.close();
  } finally {
    await g.close();
  }
});

test('every run ends with RUN_FINISHED or RUN_ERROR, past maxClientBytes too', async () => {
  await db.query('INSERT INTO sessions (session_id, user_id, state) VALUES ($1, $2, $3)',
    ['big', 'u', JSON.stringify({ s: 'z'.repeat(1.2 * MB), messages: [{ type: 'human', id: 'm', content: 'y'.repeat(0.6 * MB) }] })]);
  const g = await t.startGateway(DB, { appName: 'hx-gateway-requests-big' });
  try {
    const run = t.sse(`${g.base}/agents/sessions/big`, {
      method: 'POST', headers: bearer('big'),
      body: JSON.stringify({ threadId: 't', runId: 'r', messages: [], forwardedProps: { hxstate: { maxDurationMs: 2000 } } }),
    });
    await t.ended(run);
    assert.deepEqual(run.types(), ['RUN_STARTED', 'STATE_SNAPSHOT', 'MESSAGES_SNAPSHOT', 'RUN_FINISHED']);
    assert.equal(run.events().at(-1).result.reason, 'max_duration');
    const stream = t.sse(`${g.base}/streams/sessions/big`, { headers: bearer('big') });
    await t.waitFor(() => stream.types().includes('MESSAGES_SNAPSHOT'), 'the prelude');
    await g.gw.close();
    await t.ended(stream);
    assert.equal(stream.events().at(-1).type, 'RUN_FINISHED');
    assert.equal(stream.events().at(-1).result.reason, 'gateway_closed');
  } finally {
    await g.close();
  }
});

/**
 * POST a body of length bytes without a token, as fast as the socket
 * takes it (or a byte at a time with trickle): resolves with {status, sent}
 * once the gateway has closed the connection (sent: the bytes the socket
 * took before).
 */
function unauthorisedPost(base, { length, trickle = false }) {
  return new Promise((resolve) => {
    const s = net.connect(Number(new URL(base).port), '127.0.0.1');
    let status = null;
    let sent = 0;
    let closed = false;
    let text = '';
    s.on('data', (d) => {
      text += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d+)/.exec(text);
      if (m) status = Number(m[1]);
    });
    const done = () => {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      resolve({ status, sent, text });
    };
    s.on('close', done);
    s.on('error', done);
    s.write(`POST /agents/sessions/conv HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n`);
    const chunk = Buffer.alloc(64 * KB, 0x20);
    let timer = null;
    if (trickle) {
      timer = setInterval(() => {
        if (!closed && sent < length) s.write(' ', () => { sent += 1; });
      }, 50);
    } else {
      const pump = () => {
        while (!closed && sent < length) {
          const ok = s.write(chunk, (err) => { if (!err) sent += chunk.length; });
          if (!ok) {
            s.once('drain', pump);
            return;
          }
        }
      };
      pump();
    }
  });
}

test('a refused request\'s body is not read: 401, and the connection closed after a bounded number of bytes, fast or trickled', async () => {
  const g = await t.startGateway(DB, { appName: 'hx-gateway-requests-401' });
  try {
    const fast = await unauthorisedPost(g.base, { length: 256 * MB });
    assert.equal(fast.status, 401, fast.text.slice(0, 200));
    assert.match(fast.text, /connection: close/i);
    // what the socket took: at most the lingering close's bound and the kernel's buffers, not the body
    assert.ok(fast.sent < 32 * MB, `the client sent ${Math.round(fast.sent / MB)} MB before the gateway closed`);
    console.log(`a 256 MB body without a token: 401, and the connection closed after the socket took ${(fast.sent / MB).toFixed(1)} MB`);
    const slow = await unauthorisedPost(g.base, { length: 10 * MB, trickle: true });
    assert.equal(slow.status, 401);
    assert.ok(slow.sent < 10 * MB, 'closed while the body trickled');
  } finally {
    await g.close();
  }
});

test('createServer(gateway): headersTimeout, requestTimeout and maxConnections; a client that never finishes its headers is cut off', async () => {
  const gw = createGateway({ pg: { database: DB, application_name: 'hx-gateway-requests-server' }, secret: t.SECRET, log: () => {} });
  await gw.ready;
  const defaults = createServer(gw);
  assert.equal(defaults.headersTimeout, 10000);
  assert.equal(defaults.requestTimeout, 30000);
  assert.equal(defaults.maxConnections, 10000);
  assert.ok(defaults instanceof http.Server);
  const server = createServer(gw, { headersTimeout: 300, requestTimeout: 600, maxConnections: 2 });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = server.address().port;
  try {
    // headers that never end: answered 408 and closed
    const slow = net.connect(port, '127.0.0.1');
    let got = '';
    slow.on('data', (d) => { got += d; });
    slow.write('GET /healthz HTTP/1.1\r\nhost: x\r\n');
    await new Promise((resolve) => slow.on('close', resolve));
    assert.match(got, /^HTTP\/1\.1 408/);
    // two connections at most: a third is closed at once
    const open = [net.connect(port, '127.0.0.1'), net.connect(port, '127.0.0.1')];
    await Promise.all(open.map((s) => new Promise((resolve) => s.on('connect', resolve))));
    await t.waitFor(() => new Promise((resolve) => server.getConnections((e, n) => resolve(n === 2))), 'two connections');
    const third = net.connect(port, '127.0.0.1');
    third.on('error', () => {});
    third.write('GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n');
    let answer = '';
    third.on('data', (d) => { answer += d; });
    await new Promise((resolve) => third.on('close', resolve));
    assert.equal(answer, '', 'a connection past maxConnections is closed unanswered');
    for (const s of open) s.destroy();
  } finally {
    await gw.close();
    await new Promise((resolve) => {
      server.close(resolve);
      server.closeAllConnections();
    });
  }
});

test('capabilities need a token that may read the table: 401 without one', async () => {
  const g = await t.startGateway(DB, { appName: 'hx-gateway-requests-caps', tables: [{ name: 'sessions' }, { name: 'threads', source: 'public.nowhere' }] });
  try {
    for (const path of ['/capabilities/threads', '/agents/threads/t-1/capabilities']) {
      const c = t.sse(`${g.base}${path}`);
      await t.ended(c);
      assert.equal(c.status, 401, path);
      assert.ok(!c.text.includes('nowhere'), 'nothing of the source');
    }
    const key = { authorization: `Bearer ${mintToken(t.SECRET, 'threads:t-1')}` };
    const all = { authorization: `Bearer ${mintToken(t.SECRET, { table: 'threads', all: true })}` };
    const other = { authorization: `Bearer ${mintToken(t.SECRET, 'sessions:t-1')}` };
    for (const [path, headers, status] of [
      ['/agents/threads/t-1/capabilities', key, 200], ['/agents/threads/t-2/capabilities', key, 403],
      ['/capabilities/threads', key, 200], ['/capabilities/threads', all, 200], ['/capabilities/threads', other, 403],
    ]) {
      const c = t.sse(`${g.base}${path}`, { headers });
      await t.ended(c);
      assert.equal(c.status, status, `${path}: ${c.text}`);
      if (status === 200) assert.equal(JSON.parse(c.text).custom.hxstate.source, 'public.nowhere');
    }
  } finally {
    await g.close();
  }
});

test('a client that goes away while its request is checked holds nothing: no response, no place, no run', async () => {
  await db.query("INSERT INTO sessions (session_id, user_id, state) VALUES ('gone', 'u', '{}')");
  let calls = 0;
  const g = await t.startGateway(DB, {
    appName: 'hx-gateway-requests-gone',
    secret: undefined,
    // an authorize hook that takes its time (a session store, say)
    authorize: async () => {
      await t.sleep(300);
      return true;
    },
    run: () => { calls++; },
  });
  try {
    for (const method of ['GET', 'POST']) {
      const c = t.sse(`${g.base}/${method === 'GET' ? 'streams' : 'agents'}/sessions/gone`, {
        method, headers: { 'content-type': 'application/json' },
        body: method === 'POST' ? JSON.stringify({ threadId: 't', runId: 'r', messages: [] }) : undefined,
      });
      await t.sleep(100);
      c.close(); // before the hook has answered
      await t.sleep(600);
      assert.equal(g.gw.clients, 0, `${method}: no response left open`);
      assert.equal(g.gw.openFor('127.0.0.1'), 0, `${method}: the client's place given back`);
    }
    assert.equal(calls, 0, 'no run hook called for a client that went away');
    // and the thread is free: a run now is served
    const c = t.sse(`${g.base}/agents/sessions/gone`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ threadId: 't', runId: 'r', messages: [] }),
    });
    await t.ended(c);
    assert.equal(c.events().at(-1).type, 'RUN_FINISHED');
    assert.equal(calls, 1);
  } finally {
    await g.close();
  }
});
