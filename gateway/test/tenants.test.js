'use strict';
// What gateways share is never shared across what they serve: a frame or
// a projection made for one stream is given only to readers of that very
// stream, of that gateway (and so of its database).
//   - two gateways in one process, on two databases whose rows have the
//     same key and seq: Bob, with gateway B's token, gets his own
//     STATE_SNAPSHOT and MESSAGES_SNAPSHOT, never Alice's, even while
//     Alice's frames are held (her socket reads nothing);
//   - one gateway serving a source and a table whose URLs name the same
//     stream ("conv:k", the table's prefix being the source's name): each
//     reader gets its own stream's conversation.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const t = require('./helpers');
const { mintToken } = require('..');

const DB_A = 'hx_gateway_tenant_a';
const DB_B = 'hx_gateway_tenant_b';
const SECRET_B = 'another secret, for gateway B, of 32 bytes or more';
let dbA;
let dbB;

before(async () => {
  dbA = await t.gatewayDatabase(DB_A);
  dbB = await t.gatewayDatabase(DB_B);
});
after(async () => {
  await dbA.end();
  await dbB.end();
});

/** A socket that asks for path and never reads a byte. */
function stalled(base, path, token) {
  const s = net.connect(Number(new URL(base).port), '127.0.0.1');
  s.on('error', () => {});
  s.write(`GET ${path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\n\r\n`);
  s.pause();
  return s;
}

test('two gateways on two databases: Bob gets his own snapshot and conversation, never Alice\'s', async () => {
  const alice = { who: 'alice', card: 'ALICE-SECRET', filler: 'a'.repeat(4 * 1024 * 1024), messages: [{ type: 'human', id: 'm-1', content: 'ALICE-SECRET' }] };
  const bob = { who: 'bob', messages: [{ type: 'human', id: 'm-1', content: 'bob here' }] };
  await dbA.query("INSERT INTO sessions (session_id, user_id, state) VALUES ('s-1', 'alice', $1)", [JSON.stringify(alice)]);
  await dbB.query("INSERT INTO sessions (session_id, user_id, state) VALUES ('s-1', 'bob', $1)", [JSON.stringify(bob)]);
  const ga = await t.startGateway(DB_A, { appName: 'hx-gateway-tenant-a' });
  const gb = await t.startGateway(DB_B, { appName: 'hx-gateway-tenant-b', secret: SECRET_B });
  const sockets = [];
  try {
    // Alice joins, and holds her frames: her socket reads nothing
    sockets.push(stalled(ga.base, '/streams/sessions/s-1', mintToken(t.SECRET, 'sessions:s-1')));
    await t.waitFor(() => ga.gw.clients === 1 && ga.gw.stats.frames > 0, 'Alice to be served');
    for (const path of ['/streams/sessions/s-1', '/agents/sessions/s-1']) {
      const run = path.startsWith('/agents');
      const c = t.sse(`${gb.base}${path}`, {
        method: run ? 'POST' : 'GET',
        headers: { authorization: `Bearer ${mintToken(SECRET_B, 'sessions:s-1')}`, 'content-type': 'application/json' },
        body: run ? JSON.stringify({ threadId: 't', runId: 'r', messages: [], forwardedProps: { hxstate: { maxDurationMs: 300 } } }) : undefined,
      });
      await t.waitFor(() => c.types().includes('MESSAGES_SNAPSHOT'), `Bob's conversation on ${path}`);
      c.close();
      assert.ok(!c.text.includes('ALICE-SECRET'), `${path}: nothing of Alice's`);
      const snap = c.events().find((e) => e.type === 'STATE_SNAPSHOT');
      assert.deepEqual(snap.snapshot, bob);
      assert.deepEqual(c.events().find((e) => e.type === 'MESSAGES_SNAPSHOT').messages, [{ id: 'm-1', role: 'user', content: 'bob here' }]);
    }
  } finally {
    for (const s of sockets) s.destroy();
    await ga.close();
    await gb.close();
  }
});

test('a source and a table whose URLs name the same stream: each reader gets its own conversation', async () => {
  // the table convs names its streams conv:<key>; the source served as "conv" is log streams @conv:<key>
  await dbA.query(`CREATE TABLE convs (session_id text PRIMARY KEY, state jsonb);
    CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON convs FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id', 'stream=conv');
    CREATE TABLE conv_log (key text PRIMARY KEY, seq bigint NOT NULL, state jsonb NOT NULL);
    CREATE FUNCTION conv_snapshots(keys text[]) RETURNS TABLE (key text, stream text, seq bigint, state jsonb)
      LANGUAGE sql STABLE AS $$ SELECT l.key, '@conv:' || l.key, l.seq, l.state FROM conv_log l WHERE l.key = ANY (keys) $$`);
  const source = { messages: [{ type: 'human', id: 'm-1', content: 'SOURCE-SECRET' }] };
  const table = { messages: [{ type: 'human', id: 'm-1', content: 'the table\'s' }] };
  await dbA.query("SELECT hx_stream_send('@conv:k', $1)", [JSON.stringify({ type: 'STATE_SNAPSHOT', snapshot: source })]);
  await dbA.query("INSERT INTO conv_log VALUES ('k', 1, $1)", [JSON.stringify(source)]);
  await dbA.query("INSERT INTO convs VALUES ('k', $1)", [JSON.stringify(table)]);
  const g = await t.startGateway(DB_A, { appName: 'hx-gateway-tenant-src', tables: ['convs', { name: 'conv', source: 'public.conv_snapshots' }] });
  try {
    const token = (name) => ({ authorization: `Bearer ${mintToken(t.SECRET, `${name}:k`)}` });
    const a = t.sse(`${g.base}/streams/conv/k`, { headers: token('conv') });
    await t.waitFor(() => a.types().includes('MESSAGES_SNAPSHOT'), 'the source\'s reader');
    const b = t.sse(`${g.base}/streams/convs/k`, { headers: token('convs') });
    await t.waitFor(() => b.types().includes('MESSAGES_SNAPSHOT'), 'the table\'s reader');
    assert.equal(a.events().find((e) => e.type === 'MESSAGES_SNAPSHOT').messages[0].content, 'SOURCE-SECRET');
    assert.equal(b.events().find((e) => e.type === 'MESSAGES_SNAPSHOT').messages[0].content, 'the table\'s');
    assert.ok(!b.text.includes('SOURCE-SECRET'), 'nothing of the source');
    a.close();
    b.close();
  } finally {
    await g.close();
  }
});
