'use strict';
// The example gateway (examples/sse-gateway.js) forwards a row's AG-UI
// events to browsers as server-sent events: the current state first, then
// every event, the same to every browser; a browser that leaves costs the
// others nothing, and the last one to leave stops the stream.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { createGateway } = require('../examples/sse-gateway');
const { applyEvent } = require('..');
const h = require('../../test/js/helpers');

const DB = 'hx_client_gateway';

let db;
let server;
let port;
before(async () => {
  db = await h.freshDatabase(DB);
  await h.streamTable(db, 'sessions');
  server = createGateway({ table: 'sessions', pg: { database: DB, application_name: 'hx-gateway' } });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = server.address().port;
});
after(async () => {
  await new Promise((resolve) => server.close(resolve));
  await db.end();
});

/** GET path; collects the SSE messages as { id, data } with data parsed. */
function browse(path) {
  const b = { messages: [], status: null, done: false };
  b.req = http.get({ host: '127.0.0.1', port, path }, (res) => {
    b.status = res.statusCode;
    b.type = res.headers['content-type'];
    let buf = '';
    res.setEncoding('utf8');
    res.on('data', (chunk) => {
      buf += chunk;
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const msg = {};
        for (const line of block.split('\n')) {
          const c = line.indexOf(': ');
          msg[line.slice(0, c)] = line.slice(c + 2);
        }
        if (msg.data) msg.data = JSON.parse(msg.data);
        b.messages.push(msg);
      }
    });
    res.on('end', () => { b.done = true; });
  });
  b.req.on('error', () => { b.done = true; });
  return b;
}

test('browsers get the state, then every event, and can rebuild the state', async () => {
  await db.query(`INSERT INTO sessions VALUES ('g-1', '{"notes": [], "n": 0}')`);
  await h.merge(db, 'sessions', 'g-1', [{ op: 'increment', path: '/n', by: 1 }]);
  const one = browse('/streams/g-1');
  await h.waitFor(() => one.messages.length === 1, 'the first snapshot');
  assert.equal(one.status, 200);
  assert.equal(one.type, 'text/event-stream');
  assert.equal(one.messages[0].data.type, 'STATE_SNAPSHOT');
  assert.deepStrictEqual(one.messages[0].data.snapshot, { notes: [], n: 1 });
  assert.equal(one.messages[0].id, '2');

  for (let i = 0; i < 3; i++) await h.merge(db, 'sessions', 'g-1', [{ op: 'append', path: '/notes', items: [i] }]);
  await h.waitFor(() => one.messages.length === 4, 'three deltas');
  const two = browse('/streams/g-1'); // joins late, shares the stream
  await h.waitFor(() => two.messages.length === 1, 'the second browser\'s snapshot');
  assert.deepStrictEqual(two.messages[0].data.snapshot, { notes: [0, 1, 2], n: 1 });
  assert.equal(two.messages[0].id, '5');
  assert.equal((await h.backendPids(db, 'hx-gateway')).length, 1, 'one stream for both browsers');

  await h.merge(db, 'sessions', 'g-1', [{ op: 'replace', path: '/title', value: 't' }]);
  await h.waitFor(() => one.messages.length === 5 && two.messages.length === 2, 'the next delta');
  const row = await h.rowState(db, 'sessions', 'g-1');
  for (const b of [one, two]) {
    const ids = b.messages.map((m) => Number(m.id));
    assert.deepStrictEqual(ids, h.range(ids[0], 6));
    let state = null;
    for (const m of b.messages) state = applyEvent(state, m.data);
    assert.deepStrictEqual(state, row);
  }

  one.req.destroy();
  await h.merge(db, 'sessions', 'g-1', [{ op: 'replace', path: '/title', value: 'u' }]);
  await h.waitFor(() => two.messages.length === 3, 'a delta after the first browser left');
  two.req.destroy();
  await h.waitFor(async () => (await h.backendPids(db, 'hx-gateway')).length === 0,
    'the last browser leaving to stop the stream');
});

test('other paths are 404', async () => {
  const b = browse('/nope');
  await h.waitFor(() => b.done, 'the response');
  assert.equal(b.status, 404);
});
