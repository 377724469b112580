'use strict';
// Signed tokens: who may read which stream, until when.
//
// A token is   <payload>.<signature>   where payload is the base64url of
// the JSON {"s": "<table>:<key>", "e": <expiry, seconds since the epoch>}
// and signature the base64url of HMAC-SHA256(secret, payload).  The
// stream named is the URL's table and key ("sessions:s-42"); "<table>:*"
// names every key of a table.  The secret never leaves the server that
// mints and checks tokens; the payload is readable by whoever holds the
// token (it says which stream and until when, nothing of the state).
const crypto = require('node:crypto');

function b64url(buf) {
  return Buffer.from(buf).toString('base64').replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_');
}

function fromB64url(text) {
  return Buffer.from(text.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
}

function sign(secret, payload) {
  return b64url(crypto.createHmac('sha256', secret).update(payload).digest());
}

function checkSecret(secret) {
  if (typeof secret !== 'string' && !Buffer.isBuffer(secret)) throw new TypeError('hxstate-gateway: the secret must be a string');
  // HMAC-SHA256 keys shorter than the hash's 32 bytes weaken it
  if (Buffer.byteLength(secret) < 32) throw new TypeError('hxstate-gateway: the secret must be at least 32 bytes');
}

/**
 * A token for stream ("<table>:<key>" or "<table>:*"), valid for ttl
 * seconds (default 3600) or until expires (a Date or seconds since the
 * epoch).
 */
function mintToken(secret, stream, { ttl = 3600, expires } = {}) {
  checkSecret(secret);
  if (typeof stream !== 'string' || !stream.includes(':')) {
    throw new TypeError('hxstate-gateway: a token names a stream as "<table>:<key>" (or "<table>:*")');
  }
  let e;
  if (expires instanceof Date) e = Math.floor(expires.getTime() / 1000);
  else if (expires !== undefined) e = Math.floor(Number(expires));
  else e = Math.floor(Date.now() / 1000) + Math.floor(Number(ttl));
  if (!Number.isSafeInteger(e)) throw new TypeError('hxstate-gateway: a token needs an expiry');
  const payload = b64url(JSON.stringify({ s: stream, e }));
  return `${payload}.${sign(secret, payload)}`;
}

/**
 * Check a token for stream: {ok: true, stream, expires} or {ok: false,
 * status, reason}.  401: no token, or not one this secret signed
 * (malformed, bad signature); 403: signed, but for another stream or
 * expired.
 */
function verifyToken(secret, token, stream, now = Date.now()) {
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
  let claims;
  try {
    claims = JSON.parse(fromB64url(payload).toString('utf8'));
  } catch (err) {
    return { ok: false, status: 401, reason: 'malformed token' };
  }
  if (!claims || typeof claims.s !== 'string' || !Number.isSafeInteger(claims.e)) {
    return { ok: false, status: 401, reason: 'malformed token' };
  }
  const table = stream.slice(0, stream.indexOf(':'));
  if (claims.s !== stream && claims.s !== `${table}:*`) {
    return { ok: false, status: 403, reason: `the token is for ${claims.s}` };
  }
  if (claims.e * 1000 <= now) return { ok: false, status: 403, reason: 'the token has expired' };
  return { ok: true, stream: claims.s, expires: claims.e };
}

/** The token a request carries: "Authorization: Bearer <token>", else ?token=. */
function requestToken(req, url) {
  const auth = req.headers.authorization;
  if (typeof auth === 'string') {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    return m ? m[1] : '';
  }
  const q = url.searchParams.get('token');
  return q === null ? null : q;
}

/**
 * An authorize hook (see createGateway) that checks signed tokens with
 * secret: the stream of the request must be the token's.
 */
function tokenAuthorizer(secret) {
  checkSecret(secret);
  return (req, target) => {
    const r = verifyToken(secret, requestToken(req, target.url), target.stream);
    return r.ok ? true : { status: r.status, message: r.reason };
  };
}

module.exports = { mintToken, verifyToken, tokenAuthorizer, requestToken };
