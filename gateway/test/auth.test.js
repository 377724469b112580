'use strict';
// Who may read which stream.  Every refusal is a status and a JSON error,
// and nothing of the state:
//   401  no credentials, or not ones the gateway issued (malformed token, bad signature)
//   403  valid credentials, but not for this stream, or expired
//   400  a malformed key (or one its column's type rejects), a malformed Last-Event-ID
//   429  too many open streams from one client
// Both forms: signed tokens (the command's, and createGateway's secret)
// and an authorize hook of the application's, sync or async.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn, execFile } = require('node:child_process');
const t = require('./helpers');
const { mintToken, verifyToken } = require('..');

const DB = 'hx_gateway_auth';
const MARK = 'the-secret-state-marker';
const BIN = path.join(__dirname, '..', 'bin', 'hxstate-gateway.js');
let db;
let g;

const bearer = (token) => ({ authorization: `Bearer ${token}` });

before(async () => {
  db = await t.freshDatabase(DB);
  await t.sessionsTable(db);
  await db.query(`INSERT INTO sessions (session_id, user_id, state) VALUES ('k-1', 'u', '{"m": "${MARK}"}'),
                                                                        ('k-2', 'u', '{"m": "${MARK}"}')`);
  await db.query('CREATE TABLE counters (id integer PRIMARY KEY, state jsonb NOT NULL DEFAULT \'{}\')');
  await db.query("CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON counters FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id')");
  await db.query(`INSERT INTO counters VALUES (7, '{"m": "${MARK}"}')`);
  g = await t.startGateway(DB, { tables: ['sessions', 'counters'], maxPerClient: 3 });
});
after(async () => {
  await g.close();
  await db.end();
});

/** GET path with headers; the finished response (nothing of the state in it). */
async function refusedWith(status, p, headers = {}, method = 'GET', body) {
  const c = t.sse(`${g.base}${p}`, { headers, method, body });
  await t.ended(c, `the response to ${p}`);
  assert.equal(c.status, status, `${method} ${p}: ${c.text}`);
  assert.ok(!c.text.includes(MARK), 'nothing of the state');
  assert.ok(!c.text.includes('data:'), 'no event');
  if (status >= 400) assert.ok(JSON.parse(c.text).error, 'a JSON error');
  return c;
}

/** A token of the form before 0.6.0, {"s": "<table>:<key>", "e"}, signed with secret. */
function oldToken(secret, s) {
  const crypto = require('node:crypto');
  const b64 = (b) => Buffer.from(b).toString('base64url');
  const payload = b64(JSON.stringify({ s, e: Math.floor(Date.now() / 1000) + 600 }));
  return `${payload}.${b64(crypto.createHmac('sha256', secret).update(payload).digest())}`;
}

test('tokens: minted for a key or a whole table, until an expiry, checked in constant time', () => {
  const tok = mintToken(t.SECRET, 'sessions:k-1', { ttl: 60 });
  assert.deepEqual(verifyToken(t.SECRET, tok, 'sessions:k-1').ok, true);
  assert.equal(verifyToken(t.SECRET, tok, { table: 'sessions', key: 'k-1' }).ok, true);
  assert.equal(verifyToken(t.SECRET, tok, 'sessions:k-2').status, 403);
  assert.equal(verifyToken('another secret of at least 32 bytes....', tok, 'sessions:k-1').status, 401);
  assert.equal(verifyToken(t.SECRET, mintToken(t.SECRET, { table: 'sessions', all: true }), 'sessions:k-9').ok, true);
  assert.equal(verifyToken(t.SECRET, mintToken(t.SECRET, { table: 'sessions', all: true }), 'counters:7').status, 403);
  assert.equal(verifyToken(t.SECRET, mintToken(t.SECRET, 'sessions:k-1', { expires: new Date(Date.now() - 1000) }), 'sessions:k-1').status, 403);
  assert.throws(() => mintToken('short', 'sessions:k-1'), /at least 32 bytes/);
});

test('a key that is literally "*" is a key: its token grants it and nothing else, old tokens too', () => {
  // the application checks that the user owns session "*", and mints a token for it
  const star = mintToken(t.SECRET, 'sessions:*');
  assert.equal(verifyToken(t.SECRET, star, 'sessions:*').ok, true);
  assert.equal(verifyToken(t.SECRET, star, 'sessions:k-1').status, 403, 'not every session');
  assert.equal(verifyToken(t.SECRET, mintToken(t.SECRET, { table: 'sessions', key: '*' }), 'sessions:k-1').status, 403);
  // a whole table is a claim of its own, never a key
  assert.throws(() => mintToken(t.SECRET, { table: 'sessions', key: 'k-1', all: true }), /table/);
  assert.throws(() => mintToken(t.SECRET, { table: 'sessions', all: 'yes' }), /table/);
  // tokens minted before 0.6.0 grant exactly the stream they name
  assert.equal(verifyToken(t.SECRET, oldToken(t.SECRET, 'sessions:k-1'), 'sessions:k-1').ok, true);
  assert.equal(verifyToken(t.SECRET, oldToken(t.SECRET, 'sessions:*'), 'sessions:k-1').status, 403);
  assert.equal(verifyToken(t.SECRET, oldToken(t.SECRET, 'sessions:*'), 'sessions:*').ok, true);
});

test('secrets an attacker could guess, and absurd lifetimes, are refused', async () => {
  for (const weak of ['a'.repeat(40), 'abcd'.repeat(8), 'password'.repeat(4), '0123456789abcdef'.repeat(2)]) {
    assert.throws(() => mintToken(weak, 'sessions:k-1'), /too easy to guess/, weak);
    assert.throws(() => require('..').createGateway({ pg: {}, tables: ['sessions'], secret: weak }), /too easy to guess/, weak);
  }
  assert.doesNotThrow(() => mintToken(require('node:crypto').randomBytes(32).toString('hex'), 'sessions:k-1'));
  for (const ttl of [0, -5, 1.5, 31 * 24 * 3600, 10 * 365 * 24 * 3600, 'forever']) {
    assert.throws(() => mintToken(t.SECRET, 'sessions:k-1', { ttl }), /ttl/, String(ttl));
  }
  assert.throws(() => mintToken(t.SECRET, 'sessions:k-1', { expires: new Date(Date.now() + 365 * 24 * 3600e3) }), /30 days/);
  // a token that claims to live for years (signed with the secret, by other software) is refused
  const crypto = require('node:crypto');
  const payload = Buffer.from(JSON.stringify({ t: 'sessions', k: 'k-1', e: Math.floor(Date.now() / 1000) + 5 * 365 * 24 * 3600 })).toString('base64url');
  const forever = `${payload}.${crypto.createHmac('sha256', t.SECRET).update(payload).digest('base64url')}`;
  assert.equal(verifyToken(t.SECRET, forever, 'sessions:k-1').status, 403);
  const cli = await new Promise((resolve) => {
    execFile(process.execPath, [BIN, 'token', 'sessions:k-2', '--ttl', '315360000'], { env: { ...process.env, HX_GATEWAY_SECRET: t.SECRET } },
      (err, out, errOut) => resolve({ err, out, errOut }));
  });
  assert.ok(cli.err, 'the command refuses');
  assert.equal(cli.out, '');
  assert.match(cli.errOut, /ttl/);
});

test('401: no token, a malformed one, or one signed with another secret', async () => {
  const c = await refusedWith(401, '/streams/sessions/k-1');
  assert.match(c.headers['www-authenticate'], /^Bearer/);
  await refusedWith(401, '/streams/sessions/k-1', bearer('not-a-token'));
  await refusedWith(401, '/streams/sessions/k-1', { authorization: 'Basic dTpw' });
  await refusedWith(401, '/streams/sessions/k-1', bearer(mintToken('another secret of at least 32 bytes....', 'sessions:k-1')));
  const tok = mintToken(t.SECRET, 'sessions:k-1');
  await refusedWith(401, '/streams/sessions/k-1', bearer(`${tok.slice(0, -2)}xx`));
  await refusedWith(401, '/agents/sessions/k-1', { 'content-type': 'application/json' }, 'POST', '{}');
  await refusedWith(401, '/view/sessions/k-1');
  await refusedWith(401, '/phases/sessions/k-1');
});

test('403: a valid token for another stream, or an expired one', async () => {
  await refusedWith(403, '/streams/sessions/k-1', bearer(mintToken(t.SECRET, 'sessions:k-2')));
  await refusedWith(403, '/streams/sessions/k-1', bearer(mintToken(t.SECRET, { table: 'counters', all: true })));
  await refusedWith(403, '/streams/sessions/k-1', bearer(mintToken(t.SECRET, 'sessions:k-1', { expires: Math.floor(Date.now() / 1000) - 1 })));
  await refusedWith(403, `/streams/sessions/k-1?token=${mintToken(t.SECRET, 'sessions:k-2')}`);
  // and the right one works, in the header or the query (EventSource cannot set headers)
  for (const headers of [bearer(mintToken(t.SECRET, 'sessions:k-1')), {}]) {
    const q = Object.keys(headers).length ? '' : `?token=${mintToken(t.SECRET, 'sessions:k-1')}`;
    const ok = t.sse(`${g.base}/streams/sessions/k-1${q}`, { headers });
    await t.waitFor(() => ok.seqEvents().length === 1, 'the snapshot');
    assert.equal(ok.seqEvents()[0].snapshot.m, MARK);
    ok.close();
  }
});

test('400: a malformed key or Last-Event-ID; 404: a table not served', async () => {
  const any = bearer(mintToken(t.SECRET, { table: 'sessions', all: true }));
  await refusedWith(400, '/streams/sessions/%E0%A4%A', any);
  await refusedWith(400, '/streams/sessions/a%00b', any);
  await refusedWith(400, `/streams/sessions/${'k'.repeat(1025)}`, any);
  for (const id of ['abc', '-1', '1.5', '99999999999999999999', '']) {
    await refusedWith(400, '/streams/sessions/k-1', { ...bearer(mintToken(t.SECRET, 'sessions:k-1')), 'last-event-id': id });
  }
  // a key its column's type rejects (counters.id is an integer)
  await refusedWith(400, '/streams/counters/abc', bearer(mintToken(t.SECRET, 'counters:abc')));
  await refusedWith(404, '/streams/hx_event/x', bearer(mintToken(t.SECRET, 'hx_event:x')));
  await refusedWith(404, '/streams/sessions', any);
  await refusedWith(405, '/streams/sessions/k-1', any, 'POST', '{}');
  await refusedWith(400, '/agents/sessions/k-1', { ...bearer(mintToken(t.SECRET, 'sessions:k-1')), 'content-type': 'application/json' }, 'POST', '{"threadId": 1}');
  await refusedWith(400, '/agents/sessions/k-1', bearer(mintToken(t.SECRET, 'sessions:k-1')), 'POST', 'not json');
  const ok = t.sse(`${g.base}/streams/counters/007`, { headers: bearer(mintToken(t.SECRET, 'counters:007')) });
  await t.waitFor(() => ok.seqEvents().length === 1, 'the integer key 007 (7)');
  ok.close();
});

test('429: too many open streams from one client, until one closes', async () => {
  const tok = bearer(mintToken(t.SECRET, { table: 'sessions', all: true }));
  const open = [];
  for (let i = 0; i < 3; i++) {
    const c = t.sse(`${g.base}/streams/sessions/k-${1 + (i % 2)}`, { headers: tok });
    await t.waitFor(() => c.seqEvents().length === 1, 'a snapshot');
    open.push(c);
  }
  const c = await refusedWith(429, '/streams/sessions/k-1', tok);
  assert.ok(c.headers['retry-after']);
  await refusedWith(429, '/agents/sessions/k-1', { ...tok, 'content-type': 'application/json' }, 'POST',
    JSON.stringify({ threadId: 't', runId: 'r', messages: [] }));
  assert.ok(!c.text.includes(MARK));
  open.pop().close();
  await t.waitFor(() => g.gw.clients === 2, 'the gateway to see the stream closed');
  const again = t.sse(`${g.base}/streams/sessions/k-1`, { headers: tok });
  await t.waitFor(() => again.seqEvents().length === 1, 'a snapshot again');
  for (const x of [...open, again]) x.close();
  await t.waitFor(() => g.gw.clients === 0, 'every stream closed');
});

test('429: a POST counts from its headers, before its body has arrived', async () => {
  const http = require('node:http');
  const tok = bearer(mintToken(t.SECRET, { table: 'sessions', all: true }));
  // three POSTs whose bodies never come hold the client's three places
  const pending = [];
  for (let i = 0; i < 3; i++) {
    const req = http.request(`${g.base}/agents/sessions/k-1`, {
      method: 'POST', agent: false, headers: { ...tok, 'content-type': 'application/json', 'content-length': '100' },
    });
    req.on('error', () => {});
    req.flushHeaders();
    pending.push(req);
  }
  await t.waitFor(() => g.gw.openFor('127.0.0.1') === 3, 'the three POSTs to be counted');
  const statuses = [];
  for (let i = 0; i < 5; i++) {
    const c = await refusedWith(429, '/agents/sessions/k-1', { ...tok, 'content-type': 'application/json' }, 'POST',
      JSON.stringify({ threadId: 't', runId: `r${i}`, messages: [] }));
    statuses.push(c.status);
  }
  await refusedWith(429, '/streams/sessions/k-1', tok);
  assert.deepEqual(statuses, [429, 429, 429, 429, 429]);
  for (const req of pending) req.destroy();
  await t.waitFor(() => g.gw.openFor('127.0.0.1') === 0, 'the places to be given back');
});

test("an application's authorize hook, sync or async", async () => {
  const seen = [];
  const hooked = await t.startGateway(DB, {
    secret: undefined,
    appName: 'hx-gateway-hook',
    authorize: async (req, target) => {
      seen.push(target);
      const who = req.headers['x-user'];
      if (!who) return { status: 401, message: 'log in' };
      if (who === 'boom') throw new Error('the hook failed');
      return who === 'alice' && target.key === 'k-1';
    },
  });
  try {
    const get = (user) => t.sse(`${hooked.base}/streams/sessions/k-1`, { headers: user ? { 'x-user': user } : {} });
    for (const [user, status] of [[null, 401], ['bob', 403], ['boom', 500]]) {
      const c = get(user);
      await t.ended(c);
      assert.equal(c.status, status, `${user}: ${c.text}`);
      assert.ok(!c.text.includes(MARK));
    }
    const ok = get('alice');
    await t.waitFor(() => ok.seqEvents().length === 1, 'the snapshot for alice');
    ok.close();
    assert.deepEqual(Object.keys(seen[0]).sort(), ['key', 'kind', 'stream', 'table', 'url']);
    assert.equal(seen[0].stream, 'sessions:k-1');
    assert.equal(seen[0].kind, 'stream');
  } finally {
    await hooked.close();
  }
  assert.throws(() => require('..').createGateway({ pg: {}, tables: ['sessions'] }), /authorize/);
});

test('the command: a token minted by it opens the stream it names, and nothing else', async () => {
  const env = { ...process.env, PGDATABASE: DB, HX_GATEWAY_SECRET: t.SECRET };
  const token = await new Promise((resolve, reject) => {
    execFile(process.execPath, [BIN, 'token', 'sessions:k-2', '--ttl', '600'], { env }, (err, out) => (err ? reject(err) : resolve(out.trim())));
  });
  assert.equal(verifyToken(t.SECRET, token, 'sessions:k-2').ok, true);
  // serving needs a secret (or --no-auth)
  const noSecret = await new Promise((resolve) => {
    execFile(process.execPath, [BIN, '--port', '0'], { env: { ...env, HX_GATEWAY_SECRET: '' } }, (err, out, errOut) => resolve({ err, errOut }));
  });
  assert.ok(noSecret.err);
  assert.match(noSecret.errOut, /no secret/);
  const child = spawn(process.execPath, [BIN, '--port', '0', '--quiet'], { env });
  try {
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    await t.waitFor(() => /listening on (http:\S+)/.test(out), 'the gateway to listen');
    const base = /listening on (http:\S+)/.exec(out)[1];
    const ok = t.sse(`${base}/streams/sessions/k-2`, { headers: bearer(token) });
    await t.waitFor(() => ok.seqEvents().length === 1, 'the snapshot');
    ok.close();
    const no = t.sse(`${base}/streams/sessions/k-1`, { headers: bearer(token) });
    await t.ended(no);
    assert.equal(no.status, 403);
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.on('exit', resolve));
  }
});
