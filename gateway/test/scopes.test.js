'use strict';
// What a token lets its holder do: its scopes.
//   read    follow a stream (GET /streams, the live view and its phases, a
//           POST /agents that calls no run hook)
//   run     a POST /agents that calls the run hook without resume[]
//   resume  a POST /agents whose resume[] answers interrupts
// A token is read-only unless minted with more; a token of before its
// scopes existed is read-only; a token in a URL (?token=, what a live
// view's address carries into logs and browser history) is read-only
// whatever it says.  A request a token's scopes do not cover gets 403,
// and the hook is not called.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const crypto = require('node:crypto');
const { execFile } = require('node:child_process');
const t = require('./helpers');
const { mintToken, verifyToken } = require('..');

const DB = 'hx_gateway_scopes';
const BIN = path.join(__dirname, '..', 'bin', 'hxstate-gateway.js');
let db;
let g;
const calls = [];

before(async () => {
  db = await t.gatewayDatabase(DB);
  await db.query(`INSERT INTO sessions (session_id, user_id, state) VALUES
    ('k', 'u', '{"messages": []}'),
    ('waits', 'u', '{"__interrupt__": [{"id": "i-1", "value": {"message": "send it?"}}]}')`);
  g = await t.startGateway(DB, {
    appName: 'hx-gateway-scopes',
    run: (input, target) => { calls.push({ input, target }); },
  });
});
after(async () => {
  await g.close();
  await db.end();
});

function post(key, { token, query = false, resume } = {}) {
  const body = { threadId: 't', runId: 'r', messages: [], forwardedProps: { hxstate: { maxDurationMs: 200 } } };
  if (resume) body.resume = resume;
  return t.sse(`${g.base}/agents/sessions/${key}${query ? `?token=${token}` : ''}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(query ? {} : { authorization: `Bearer ${token}` }) },
    body: JSON.stringify(body),
  });
}

async function status(c) {
  await t.ended(c);
  return c.status;
}

/** A token of the form before 0.6.0, {"s": "<table>:<key>", "e"}, signed with secret. */
function oldToken(secret, s) {
  const b64 = (b) => Buffer.from(b).toString('base64url');
  const payload = b64(JSON.stringify({ s, e: Math.floor(Date.now() / 1000) + 600 }));
  return `${payload}.${b64(crypto.createHmac('sha256', secret).update(payload).digest())}`;
}

const RESUME = [{ interruptId: 'i-1', status: 'resolved', payload: { approved: true } }];

test('tokens carry scopes: read by default; run and resume only when minted with them', () => {
  const read = verifyToken(t.SECRET, mintToken(t.SECRET, 'sessions:k'), 'sessions:k');
  assert.deepEqual(read.scopes, ['read']);
  const all = verifyToken(t.SECRET, mintToken(t.SECRET, 'sessions:k', { scopes: ['read', 'run', 'resume'] }), 'sessions:k');
  assert.deepEqual(all.scopes, ['read', 'run', 'resume']);
  assert.deepEqual(verifyToken(t.SECRET, oldToken(t.SECRET, 'sessions:k'), 'sessions:k').scopes, ['read']);
  assert.throws(() => mintToken(t.SECRET, 'sessions:k', { scopes: ['write'] }), /scopes are read, run, resume and append/);
  assert.throws(() => mintToken(t.SECRET, 'sessions:k', { scopes: [] }), /scopes are read, run, resume and append/);
  assert.throws(() => mintToken(t.SECRET, 'sessions:k', { scopes: 'run' }), /scopes are read, run, resume and append/);
});

test('a read-only token follows but runs nothing; run runs; resume answers; the hook is called only when granted', async () => {
  const readOnly = mintToken(t.SECRET, 'sessions:k');
  const c = t.sse(`${g.base}/streams/sessions/k`, { headers: { authorization: `Bearer ${readOnly}` } });
  await t.waitFor(() => c.types().includes('STATE_SNAPSHOT'), 'a read-only token to follow');
  c.close();
  const n = calls.length;
  const refused = post('k', { token: readOnly });
  assert.equal(await status(refused), 403);
  assert.match(JSON.parse(refused.text).error, /the token does not grant run/);
  assert.equal(await status(post('k', { token: oldToken(t.SECRET, 'sessions:k') })), 403, 'a token of before 0.6.0 is read-only');
  assert.equal(calls.length, n, 'no hook called');
  assert.equal(await status(post('k', { token: mintToken(t.SECRET, 'sessions:k', { scopes: ['run'] }) })), 200);
  assert.equal(calls.length, n + 1);
  assert.deepEqual(calls.at(-1).target.scopes, ['run']);
  // answering an interrupt needs resume
  const runOnly = post('waits', { token: mintToken(t.SECRET, 'sessions:waits', { scopes: ['read', 'run'] }), resume: RESUME });
  assert.equal(await status(runOnly), 403);
  assert.match(JSON.parse(runOnly.text).error, /the token does not grant resume/);
  assert.equal(calls.length, n + 1);
  const approver = post('waits', { token: mintToken(t.SECRET, 'sessions:waits', { scopes: ['read', 'resume'] }), resume: RESUME });
  assert.equal(await status(approver), 200);
  assert.equal(calls.length, n + 2);
  assert.deepEqual(calls.at(-1).input.resume, RESUME);
});

test('a token in a URL is read-only, whatever its scopes: the live view\'s address answers no interrupt', async () => {
  const everything = mintToken(t.SECRET, 'sessions:waits', { scopes: ['read', 'run', 'resume'] });
  const n = calls.length;
  const c = post('waits', { token: everything, query: true, resume: RESUME });
  assert.equal(await status(c), 403);
  assert.match(JSON.parse(c.text).error, /a token in the URL is read-only/);
  assert.equal(calls.length, n);
  const view = t.sse(`${g.base}/view/sessions/waits?token=${everything}`);
  await t.ended(view);
  assert.equal(view.status, 200);
});

test('the command mints scopes with --scopes, and its live view\'s URL carries a read-only token', async () => {
  const env = { ...process.env, HX_GATEWAY_SECRET: t.SECRET };
  const run = (...args) => new Promise((resolve, reject) => {
    execFile(process.execPath, [BIN, 'token', ...args], { env }, (err, out, errOut) => (err ? reject(new Error(errOut)) : resolve(out.trim().split('\n'))));
  });
  const [tok, url] = await run('sessions:waits', '--scopes', 'read,run,resume', '--base', g.base);
  assert.deepEqual(verifyToken(t.SECRET, tok, 'sessions:waits').scopes, ['read', 'run', 'resume']);
  const viewToken = new URL(url).searchParams.get('token');
  assert.deepEqual(verifyToken(t.SECRET, viewToken, 'sessions:waits').scopes, ['read']);
  const [plain] = await run('sessions:waits');
  assert.deepEqual(verifyToken(t.SECRET, plain, 'sessions:waits').scopes, ['read']);
  await assert.rejects(run('sessions:waits', '--scopes', 'read,admin'), /--scopes is a list of read, run, resume, append/);
  // the view's token, as a bearer token, answers nothing either
  const n = calls.length;
  assert.equal(await status(post('waits', { token: viewToken, resume: RESUME })), 403);
  assert.equal(calls.length, n);
});

test('an authorize hook\'s grant: true is every scope, {ok, scopes} those scopes, scopes that are not an array a 500', async () => {
  const grants = { all: true, read: { ok: true, scopes: ['read'] }, bad: { ok: true, scopes: 'run' }, none: { ok: true, scopes: [] } };
  const logged = [];
  const h = await t.startGateway(DB, {
    appName: 'hx-gateway-scopes-hook', secret: undefined,
    authorize: (req) => grants[req.headers['x-grant']],
    run: (input, target) => { calls.push({ input, target }); },
    log: (level, message) => { if (level === 'error') logged.push(message); },
  });
  try {
    const n = calls.length;
    const run = (grant) => t.sse(`${h.base}/agents/sessions/k`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-grant': grant },
      body: JSON.stringify({ threadId: 't', runId: 'r', messages: [], forwardedProps: { hxstate: { maxDurationMs: 100 } } }),
    });
    assert.equal(await status(run('all')), 200);
    assert.equal(await status(run('read')), 403);
    assert.equal(await status(run('bad')), 500);
    assert.match(logged.join('\n'), /scopes that are not an array: "run"/);
    assert.equal(await status(run('none')), 403);
    const follow = t.sse(`${h.base}/streams/sessions/k`, { headers: { 'x-grant': 'none' } });
    assert.equal(await status(follow), 403, 'no scope, not even read');
    assert.equal(calls.length, n + 1, 'the hook was called for the grant of every scope only');
  } finally {
    await h.close();
  }
});
