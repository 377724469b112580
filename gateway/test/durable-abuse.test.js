'use strict';
// The abuse probe of the Durable Streams endpoint, kept as a test: every
// route and method with hostile input, as three clients: one with no
// token, one with a token for another stream (every scope), and one with
// a token for the stream (every scope).  Each request gets the status its
// row says, with a JSON {error} body (a HEAD: the status alone), and the
// gateway answers /healthz afterwards; nothing is written by a refused
// request.  What is refused before any token is read (a malformed name, a
// method the protocol does not have, a write to a stream the endpoint
// never writes) is refused alike for all three.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const t = require('./helpers');
const { durableToken, setupDurable } = require('..');

const DB = 'hx_gateway_durable_abuse';
const OFF = (seq) => `0000000000000000_${String(seq).padStart(16, '0')}`;
let db;
let g;

before(async () => {
  db = await t.gatewayDatabase(DB);
  await setupDurable(db);
  await db.query("INSERT INTO sessions (session_id, user_id, state) VALUES ('s-1', 'u', '{\"n\": 0}')");
  g = await t.startGateway(DB, { maxBody: 4096, durable: { logPrefixes: ['@agent:'], maxStreamBytes: 16384 } });
  const all = `Bearer ${durableToken(t.SECRET, { table: 'ds', all: true }, { scopes: ['read', 'append'] })}`;
  const log = `Bearer ${durableToken(t.SECRET, '@agent:a', { scopes: ['read', 'append'] })}`;
  for (const [path, headers, body] of [
    ['/ds/p/json', { 'content-type': 'application/json', authorization: all }, '[1,2]'],
    ['/ds/p/text', { 'content-type': 'text/plain', authorization: all }, 'abc'],
    ['/ds/@agent:a', { 'content-type': 'application/json', authorization: log }, '{"type": "CUSTOM", "name": "x", "value": 1}'],
  ]) {
    const r = await fetch(`${g.base}${path}`, { method: 'PUT', headers, body });
    assert.equal(r.status, 201, path);
  }
});

after(async () => {
  await g.close();
  await db.end();
});

const json = { 'content-type': 'application/json' };
const text = { 'content-type': 'text/plain' };
const deep = `${'['.repeat(1500)}${']'.repeat(1500)}`;
const prod = (id, epoch, seq) => ({ 'producer-id': id, 'producer-epoch': epoch, 'producer-seq': seq });

// [what, method, path, headers, body, status for the stream's own token, refused before the token is read]
const PROBES = [
  ['a name that is not percent-encoded UTF-8', 'GET', '/ds/%ZZ', {}, undefined, 400, true],
  ['a name with a NUL', 'GET', '/ds/a%00b', {}, undefined, 400, true],
  ['a name of 1025 bytes', 'GET', `/ds/${'n'.repeat(1025)}`, {}, undefined, 400, true],
  ['a prefix no served table has', 'GET', '/ds/other:s-1', {}, undefined, 404, true],
  ['a method Durable Streams does not have', 'PATCH', '/ds/p/json', json, '[1]', 405, true],
  ["a write to a table's stream", 'POST', '/ds/sessions:s-1', json, '{"type": "CUSTOM", "name": "x", "value": 1}', 405, true],
  ["a create of a table's stream", 'PUT', '/ds/sessions:s-2', json, undefined, 405, true],
  ['a log stream outside the log prefixes', 'PUT', '/ds/@langgraph:t', json, undefined, 403, true],
  ['a delete of a log stream', 'DELETE', '/ds/@agent:a', {}, undefined, 405, true],
  ['two offsets', 'GET', `/ds/p/json?offset=-1&offset=${OFF(1)}`, {}, undefined, 400],
  ['an empty offset', 'GET', '/ds/p/json?offset=', {}, undefined, 400],
  ['an offset of another form', 'GET', '/ds/p/json?offset=1', {}, undefined, 400],
  ['an offset with a path', 'GET', '/ds/p/json?offset=..%2F..%2Fetc', {}, undefined, 400],
  ['an offset past 2^53', 'GET', '/ds/p/json?offset=0000000000000000_9999999999999999', {}, undefined, 400],
  ['an offset past the tail', 'GET', `/ds/p/json?offset=${OFF(99)}`, {}, undefined, 400],
  ['a live mode that does not exist', 'GET', '/ds/p/json?offset=-1&live=poll', {}, undefined, 400],
  ['a long-poll without an offset', 'GET', '/ds/p/json?live=long-poll', {}, undefined, 400],
  ['an SSE read without an offset', 'GET', '/ds/p/json?live=sse', {}, undefined, 400],
  ['a cursor of 10^30', 'GET', `/ds/p/json?offset=${OFF(1)}&live=long-poll&cursor=${'9'.repeat(30)}`, {}, undefined, 200],
  ['a stream that does not exist', 'GET', '/ds/p/none', {}, undefined, 404],
  ['HEAD of a stream that does not exist', 'HEAD', '/ds/p/none', {}, undefined, 404],
  ['a TTL with a sign', 'PUT', '/ds/p/new', { ...text, 'stream-ttl': '+5' }, undefined, 400],
  ['a TTL past 2^31 - 1 seconds', 'PUT', '/ds/p/new', { ...text, 'stream-ttl': '9007199254740991' }, undefined, 400],
  ['a TTL and an expiry', 'PUT', '/ds/p/new', { ...text, 'stream-ttl': '5', 'stream-expires-at': '2030-01-01T00:00:00Z' }, undefined, 400],
  ['an expiry that is no RFC 3339 timestamp', 'PUT', '/ds/p/new', { ...text, 'stream-expires-at': 'tomorrow' }, undefined, 400],
  ['an expiry in year 0', 'PUT', '/ds/p/new', { ...text, 'stream-expires-at': '0000-01-01T00:00:00Z' }, undefined, 400],
  ['a content type that is no media type', 'PUT', '/ds/p/new', { 'content-type': 'not a type' }, undefined, 400],
  ['a content type of 300 bytes', 'PUT', '/ds/p/new', { 'content-type': `text/${'x'.repeat(300)}` }, undefined, 400],
  ['a fork of another server', 'PUT', '/ds/p/new', { 'stream-forked-from': 'http://elsewhere.invalid/ds/p/json' }, undefined, 400],
  ['a fork of a log stream', 'PUT', '/ds/p/new', { 'stream-forked-from': '/ds/@agent:a' }, undefined, 400],
  ['a fork of a stream that does not exist', 'PUT', '/ds/p/new', { 'stream-forked-from': '/ds/p/none' }, undefined, 404],
  ['a fork past its source', 'PUT', '/ds/p/new', { 'stream-forked-from': '/ds/p/json', 'stream-fork-offset': OFF(9) }, undefined, 400],
  ['a negative fork sub-offset', 'PUT', '/ds/p/new', { 'stream-forked-from': '/ds/p/json', 'stream-fork-sub-offset': '-1' }, undefined, 400],
  ['a fork sub-offset without a fork', 'PUT', '/ds/p/new', { ...text, 'stream-fork-sub-offset': '1' }, undefined, 400],
  ['a body past maxBody', 'PUT', '/ds/p/new', text, 'x'.repeat(5000), 413],
  ['an append of no body', 'POST', '/ds/p/text', text, undefined, 400],
  ['an append without a content type', 'POST', '/ds/p/text', {}, Buffer.from('abc'), 400],
  ['an append of another content type', 'POST', '/ds/p/text', json, '[1]', 409],
  ['an append of text that is no JSON', 'POST', '/ds/p/json', json, '{"a": ', 400],
  ['an append of JSON nested 1500 deep', 'POST', '/ds/p/json', json, deep, 204 /* JSON.parse takes it */],
  ['an append of an empty array', 'POST', '/ds/p/json', json, '[]', 400],
  ['an append of bytes that are no UTF-8', 'POST', '/ds/p/json', json, Buffer.from([0x22, 0xff, 0xfe, 0x22]), 400],
  ['some producer headers', 'POST', '/ds/p/json', { ...json, 'producer-id': 'p' }, '[1]', 400],
  ['an empty producer id', 'POST', '/ds/p/json', { ...json, ...prod('', '0', '0') }, '[1]', 400],
  ['a producer id of 300 bytes', 'POST', '/ds/p/json', { ...json, ...prod('p'.repeat(300), '0', '0') }, '[1]', 400],
  ['an epoch of 1e3', 'POST', '/ds/p/json', { ...json, ...prod('p', '1e3', '0') }, '[1]', 400],
  ['a negative seq', 'POST', '/ds/p/json', { ...json, ...prod('p', '0', '-1') }, '[1]', 400],
  ['a seq past 2^53', 'POST', '/ds/p/json', { ...json, ...prod('p', '0', '9007199254740993') }, '[1]', 400],
  ['a first seq that is not 0', 'POST', '/ds/p/json', { ...json, ...prod('p', '0', '5') }, '[1]', 409],
  ['a Stream-Seq of 300 bytes', 'POST', '/ds/p/json', { ...json, 'stream-seq': 's'.repeat(300) }, '[1]', 400],
  ['a log event that is no AG-UI event', 'POST', '/ds/@agent:a', json, '{"x": 1}', 400],
  ['a log event with a lone surrogate', 'POST', '/ds/@agent:a', json, '{"type": "CUSTOM", "name": "\\ud800", "value": 1}', 400],
  ['a log event nested 1500 deep (jsonb takes it)', 'POST', '/ds/@agent:a', json, `{"type": "CUSTOM", "name": "d", "value": ${deep}}`, 204],
  ['a log stream created closed', 'PUT', '/ds/@agent:b', { ...json, 'stream-closed': 'true' }, undefined, 400],
  ['a log stream with a TTL', 'PUT', '/ds/@agent:b', { ...json, 'stream-ttl': '5' }, undefined, 400],
  ['a close of a log stream', 'POST', '/ds/@agent:a', { 'stream-closed': 'true' }, undefined, 405],
];

function tokenFor(path, who) {
  const name = decodeURIComponent(path.slice(4).split('?')[0]);
  const colon = name.indexOf(':');
  let what;
  if (name.startsWith('@')) what = { table: name.slice(0, colon), key: name.slice(colon + 1) };
  else if (name.includes(':')) what = { table: 'sessions', key: name.slice(colon + 1) };
  else what = who === 'own' ? { table: 'ds', all: true } : { table: 'ds', key: name }; // a fork reads its source too
  if (who === 'other') what = { ...what, key: `${what.key}-other` };
  return `Bearer ${durableToken(t.SECRET, what, { scopes: ['read', 'append'] })}`;
}

for (const who of ['none', 'other', 'own']) {
  test(`the abuse probe, as ${who === 'none' ? 'a client with no token' : who === 'other' ? 'the holder of a token for another stream' : "the holder of the stream's token"}`, async () => {
    const { rows: [before] } = await db.query('SELECT (SELECT count(*) FROM hx_durable.stream) + (SELECT count(*) FROM hx_durable.chunk) AS n');
    for (const [what, method, path, headers, body, status, early] of PROBES) {
      const h = { ...headers };
      if (who !== 'none' && !path.includes('%ZZ') && !path.includes('%00') && path.length < 1000) h.authorization = tokenFor(path, who);
      const want = early || who === 'own' ? status : who === 'none' ? 401 : 403;
      const res = await fetch(`${g.base}${path}`, { method, headers: h, body });
      const got = method === 'HEAD' ? '' : await res.text();
      assert.equal(res.status, want, `${what}: ${method} ${path.slice(0, 80)} (${got.slice(0, 200)})`);
      if (want >= 400 && method !== 'HEAD') assert.equal(typeof JSON.parse(got).error, 'string', `${what}: a JSON error`);
    }
    const { rows: [after] } = await db.query('SELECT (SELECT count(*) FROM hx_durable.stream) + (SELECT count(*) FROM hx_durable.chunk) AS n');
    if (who !== 'own') assert.equal(after.n, before.n, 'a refused client wrote nothing');
    const health = await fetch(`${g.base}/healthz`);
    assert.equal(health.status, 200);
  });
}
