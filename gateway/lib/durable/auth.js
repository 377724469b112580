'use strict';
// Who may read and write a Durable Stream.
//
// Every request is first put to the gateway's authorize hook, as the
// AG-UI routes' are, with a target {table, key, stream, kind: 'durable',
// access: 'read' | 'write', url} (names.js says what table and key a
// stream is).  An application's own hook decides with target.access.
//
// With the gateway's signed tokens (options.secret), a token grants its
// table and key as before, and what it may do there by its scopes, the
// claim "sc" (a list): a write (PUT, POST, DELETE) needs "append"; a read
// (GET, HEAD) needs "read", or a token without "sc" (tokens minted
// before scopes read).  durableToken() mints one with scopes.
const crypto = require('node:crypto');
const { HttpError } = require('../limits');
const { mintToken, requestToken } = require('../token');

const SCOPES = ['read', 'append'];

function b64url(buf) {
  return Buffer.from(buf).toString('base64').replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_');
}

/**
 * A signed token as mintToken makes one (what, {ttl, expires}), with the
 * scopes it grants on the Durable Streams endpoint: ['read'],
 * ['append'], or both.
 */
function durableToken(secret, what, { scopes = ['read'], ...options } = {}) {
  if (!Array.isArray(scopes) || scopes.length === 0 || scopes.some((s) => !SCOPES.includes(s))) {
    throw new TypeError(`hxstate-gateway: a Durable Streams token's scopes are some of ${SCOPES.join(', ')}`);
  }
  const token = mintToken(secret, what, options);
  const claims = JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString('utf8'));
  const payload = b64url(JSON.stringify({ ...claims, sc: [...new Set(scopes)] }));
  return `${payload}.${b64url(crypto.createHmac('sha256', secret).update(payload).digest())}`;
}

/** The scopes of a token the authorize hook has verified: null when it has none. */
function scopesOf(token) {
  try {
    const claims = JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString('utf8'));
    return Array.isArray(claims.sc) ? claims.sc : null;
  } catch (err) {
    return null;
  }
}

/**
 * Authorise a request for target: the gateway's hook (authorize), then,
 * with signed tokens (tokens: true), the token's scopes.  HttpError 401 or
 * 403 when refused.
 */
async function authorizeDurable({ authorize, tokens }, req, target) {
  await authorize(req, target);
  if (!tokens) return;
  const scopes = scopesOf(requestToken(req, target.url) || '');
  const need = target.access === 'write' ? 'append' : 'read';
  if (scopes === null ? need === 'read' : scopes.includes(need)) return;
  throw new HttpError(403, `the token does not grant "${need}" on this stream`);
}

module.exports = { durableToken, authorizeDurable, scopesOf, SCOPES };
