'use strict';
// Signed tokens: who may read which stream, until when.
//
// A token is   <payload>.<signature>   where payload is the base64url of
// the JSON claims and signature the base64url of HMAC-SHA256(secret,
// payload).  The claims name a table and either one key or the whole
// table, as two distinct members, so that no key can stand for more
// than itself:
//
//   {"t": "sessions", "k": "s-42", "e": 1735689600}   the key s-42 (even a key "*")
//   {"t": "sessions", "all": true, "e": 1735689600}   every key of the table
//
// Tokens of the form before 0.6.0, {"s": "<table>:<key>", "e": ...}, are
// still read, as the one stream their "s" names exactly: "<table>:*"
// grants the key "*" and nothing else.
//
// And what the holder may do, its scopes ("sc", a list):
//
//   read    follow the stream (GET /streams, the live view, a POST /agents
//           that calls no run hook; reads of the Durable Streams endpoint)
//   run     a POST /agents that calls the run hook, without resume[]
//   resume  a POST /agents whose resume[] answers the stream's interrupts
//   append  writes of the Durable Streams endpoint (durable/auth.js)
//
// A token without "sc" (the default of mintToken, and every token of
// before 0.6.0) is read-only.  A token a request carries in its URL
// (?token=) is read-only whatever it says: URLs end up in access logs,
// browser history and Referer headers.
//
// The secret never leaves the server that mints and checks tokens; the
// payload is readable by whoever holds the token (what it grants and until
// when, nothing of the state).
const crypto = require('node:crypto');
const zlib = require('node:zlib');

/** The longest lifetime a token may have: 30 days. */
const MAX_TTL = 30 * 24 * 3600;
/** What a token may grant, in this order. */
const SCOPES = ['read', 'run', 'resume', 'append'];
const READ_ONLY = ['read'];
const MIN_SECRET_BYTES = 32;

function b64url(buf) {
  return Buffer.from(buf).toString('base64').replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_');
}

function fromB64url(text) {
  return Buffer.from(text.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
}

function sign(secret, payload) {
  return b64url(crypto.createHmac('sha256', secret).update(payload).digest());
}

/**
 * An estimate, in bits, of how much a secret could be guessed: the
 * smaller of its bytes' Shannon entropy times its length and eight times
 * its deflated length (which sees repeats: "abcd" eight times deflates to
 * a few bytes).  A generous estimate for text, so a floor, not a proof.
 */
function secretBits(buf) {
  const counts = new Map();
  for (const b of buf) counts.set(b, (counts.get(b) || 0) + 1);
  let perByte = 0;
  for (const n of counts.values()) perByte -= (n / buf.length) * Math.log2(n / buf.length);
  const shannon = perByte * buf.length;
  const deflated = zlib.deflateRawSync(buf, { level: 9 }).length * 8;
  return Math.min(shannon, deflated);
}

/**
 * Refuse a secret an attacker could guess: shorter than 32 bytes (an
 * HMAC-SHA256 key shorter than the hash weakens it), or of low entropy
 * (repeated characters or patterns, a word repeated): less than 100 bits
 * by the estimate of secretBits, or deflating to less than 24 bytes.
 * `openssl rand -hex 32` gives one that passes by far.
 */
function checkSecret(secret) {
  if (typeof secret !== 'string' && !Buffer.isBuffer(secret)) throw new TypeError('hxstate-gateway: the secret must be a string');
  const buf = Buffer.from(secret);
  if (buf.length < MIN_SECRET_BYTES) throw new TypeError(`hxstate-gateway: the secret must be at least ${MIN_SECRET_BYTES} bytes`);
  const bits = secretBits(buf);
  if (bits < 100 || zlib.deflateRawSync(buf, { level: 9 }).length < 24) {
    throw new TypeError(`hxstate-gateway: the secret is too easy to guess (about ${Math.floor(bits)} bits: repeated characters ` +
      'or patterns); use a random one, such as `openssl rand -hex 32`');
  }
}

/**
 * What a token grants, from what mintToken is given: {table, key}, or
 * {table, all: true}; a string "<table>:<key>" is {table, key} split at
 * its first colon ("sessions:*" is the key "*", not the table).
 */
function grantOf(what) {
  if (typeof what === 'string') {
    const colon = what.indexOf(':');
    if (colon <= 0) throw new TypeError('hxstate-gateway: a token names a stream as "<table>:<key>", or {table, key}, or {table, all: true}');
    return { table: what.slice(0, colon), key: what.slice(colon + 1) };
  }
  if (what && typeof what.table === 'string' && what.table !== '') {
    if (what.all === true && what.key === undefined) return { table: what.table, all: true };
    if (typeof what.key === 'string' && what.key !== '' && what.all === undefined) return { table: what.table, key: what.key };
  }
  throw new TypeError('hxstate-gateway: a token names {table, key} (a key, as text) or {table, all: true} (every key of the table)');
}

/** The scopes option of mintToken, checked: a non-empty array of SCOPES, in SCOPES' order. */
function scopesOf(scopes) {
  if (scopes === undefined) return READ_ONLY;
  if (!Array.isArray(scopes) || scopes.length === 0 || !scopes.every((x) => SCOPES.includes(x))) {
    throw new TypeError(`hxstate-gateway: a token's scopes are read, run, resume and append: a non-empty array of them (${JSON.stringify(scopes)})`);
  }
  return SCOPES.filter((x) => scopes.includes(x));
}

/** The expiry, seconds since the epoch, of {ttl, expires}; TypeError if absurd. */
function expiryOf({ ttl = 3600, expires } = {}, now = Date.now()) {
  const nowS = Math.floor(now / 1000);
  let e;
  if (expires instanceof Date) e = Math.floor(expires.getTime() / 1000);
  else if (expires !== undefined) e = Number(expires);
  else {
    const t = Number(ttl);
    if (!Number.isSafeInteger(t) || t < 1 || t > MAX_TTL) {
      throw new TypeError(`hxstate-gateway: a token's ttl is a whole number of seconds from 1 to ${MAX_TTL} (30 days)`);
    }
    e = nowS + t;
  }
  if (!Number.isSafeInteger(e)) throw new TypeError('hxstate-gateway: a token needs an expiry (seconds since the epoch, or a Date)');
  if (e > nowS + MAX_TTL) throw new TypeError(`hxstate-gateway: a token may not live longer than ${MAX_TTL} seconds (30 days)`);
  return e;
}

/**
 * A token for one key of a table, or for every key of it: what is
 * {table, key}, {table, all: true} or "<table>:<key>" (see grantOf).  It is
 * valid for ttl seconds (default 3600, at most 30 days) or until expires
 * (a Date or seconds since the epoch, at most 30 days ahead), and grants
 * scopes (default ['read']; 'run', 'resume').
 */
function mintToken(secret, what, options = {}) {
  checkSecret(secret);
  const grant = grantOf(what);
  const e = expiryOf(options);
  const scopes = scopesOf(options.scopes);
  const claims = grant.all ? { t: grant.table, all: true, e } : { t: grant.table, k: grant.key, e };
  if (scopes.join() !== 'read') claims.sc = scopes;
  const payload = b64url(JSON.stringify(claims));
  return `${payload}.${sign(secret, payload)}`;
}

/**
 * {table, key} of a target: an object, or the string "<table>:<key>" (split
 * at its first colon).  A key null is the table itself (its capabilities),
 * which any token of the table may read.
 */
function targetOf(target) {
  if (typeof target === 'string') {
    const colon = target.indexOf(':');
    return { table: target.slice(0, Math.max(colon, 0)), key: colon < 0 ? '' : target.slice(colon + 1) };
  }
  return { table: String(target.table), key: target.key === null ? null : String(target.key) };
}

/**
 * Check a token for a target ({table, key}, or "<table>:<key>"): {ok:
 * true, grant, expires, scopes} or {ok: false, status, reason}.  401: no
 * token, or not one this secret signed (malformed, bad signature, a scope
 * this gateway does not know); 403: signed, but for another key or table,
 * expired, or living longer than 30 days.
 */
function verifyToken(secret, token, target, now = Date.now()) {
  if (typeof token !== 'string' || token.length === 0) return { ok: false, status: 401, reason: 'no token' };
  const dot = token.indexOf('.');
  if (dot <= 0 || dot !== token.lastIndexOf('.') || token.length > 4096) {
    return { ok: false, status: 401, reason: 'malformed token' };
  }
  const payload = token.slice(0, dot);
  const given = Buffer.from(token.slice(dot + 1));
  const want = Buffer.from(sign(secret, payload));
  // compare in constant time (timingSafeEqual needs equal lengths)
  if (given.length !== want.length || !crypto.timingSafeEqual(given, want)) {
    return { ok: false, status: 401, reason: 'bad signature' };
  }
  let c;
  try {
    c = JSON.parse(fromB64url(payload).toString('utf8'));
  } catch (err) {
    return { ok: false, status: 401, reason: 'malformed token' };
  }
  if (!c || typeof c !== 'object' || !Number.isSafeInteger(c.e)) return { ok: false, status: 401, reason: 'malformed token' };
  let scopes = READ_ONLY;
  if (c.sc !== undefined) {
    if (!Array.isArray(c.sc) || c.sc.length === 0 || !c.sc.every((x) => SCOPES.includes(x))) return { ok: false, status: 401, reason: 'malformed token' };
    scopes = SCOPES.filter((x) => c.sc.includes(x));
  }
  const { table, key } = targetOf(target);
  let grant;
  let granted;
  if (typeof c.t === 'string' && c.all === true && c.k === undefined) {
    grant = { table: c.t, all: true };
    granted = c.t === table;
  } else if (typeof c.t === 'string' && typeof c.k === 'string' && c.all === undefined) {
    grant = { table: c.t, key: c.k };
    granted = c.t === table && (key === null || c.k === key);
  } else if (typeof c.s === 'string' && c.t === undefined) {
    // the form before 0.6.0: exactly the stream it names, never a pattern
    grant = { stream: c.s };
    granted = key === null ? c.s.startsWith(`${table}:`) : c.s === `${table}:${key}`;
  } else {
    return { ok: false, status: 401, reason: 'malformed token' };
  }
  if (!granted) {
    const what = grant.all ? `every key of ${grant.table}` : grant.stream || `${grant.table}:${grant.key}`;
    return { ok: false, status: 403, reason: `the token is for ${what}` };
  }
  const nowS = Math.floor(now / 1000);
  if (c.e <= nowS) return { ok: false, status: 403, reason: 'the token has expired' };
  if (c.e > nowS + MAX_TTL) return { ok: false, status: 403, reason: 'the token lives longer than 30 days' };
  return { ok: true, grant, expires: c.e, scopes };
}

/** The token a request carries and where: {token, inUrl}; token is null when there is none. */
function tokenOf(req, url) {
  const auth = req.headers.authorization;
  if (typeof auth === 'string') {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    return { token: m ? m[1] : '', inUrl: false };
  }
  return { token: url.searchParams.get('token'), inUrl: true };
}

/** The token a request carries: "Authorization: Bearer <token>", else ?token=. */
function requestToken(req, url) {
  return tokenOf(req, url).token;
}

/**
 * An authorize hook (see createGateway) that checks signed tokens with
 * secret: the token must grant the request's table and key.  It returns
 * {ok: true, principal, scopes, limited} (principal: the token's
 * signature, whom runs count against; scopes: the token's, read only for
 * a token in the URL, and limited then says why), or {status, message}.
 */
function tokenAuthorizer(secret) {
  checkSecret(secret);
  return (req, target) => {
    const { token, inUrl } = tokenOf(req, target.url);
    const r = verifyToken(secret, token, target);
    if (!r.ok) return { status: r.status, message: r.reason };
    const grant = { ok: true, principal: `token:${token.slice(token.indexOf('.') + 1)}`, scopes: r.scopes };
    if (inUrl && r.scopes.some((x) => x !== 'read')) {
      grant.scopes = r.scopes.filter((x) => x === 'read');
      grant.limited = 'a token in the URL is read-only: send it in an Authorization: Bearer header';
    }
    return grant;
  };
}

module.exports = { mintToken, verifyToken, tokenAuthorizer, requestToken, checkSecret, secretBits, MAX_TTL, SCOPES };
