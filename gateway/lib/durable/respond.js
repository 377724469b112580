'use strict';
// The headers every Durable Streams response carries, and its error
// responses.
const EXPOSE = [
  'stream-next-offset', 'stream-cursor', 'stream-up-to-date', 'stream-closed', 'stream-ttl', 'stream-expires-at',
  'stream-sse-data-encoding', 'producer-epoch', 'producer-seq', 'producer-expected-seq', 'producer-received-seq',
  'etag', 'location', 'content-type', 'retry-after',
].join(', ');
const ALLOW_HEADERS = [
  'authorization', 'content-type', 'if-none-match', 'stream-seq', 'stream-ttl', 'stream-expires-at', 'stream-closed',
  'producer-id', 'producer-epoch', 'producer-seq', 'stream-forked-from', 'stream-fork-offset', 'stream-fork-sub-offset',
].join(', ');
const METHODS = 'GET, HEAD, PUT, POST, DELETE, OPTIONS';

/** Headers of every response: no MIME sniffing, readable cross-origin by fetch(), and CORS when configured. */
function baseHeaders(cors) {
  const h = { 'x-content-type-options': 'nosniff', 'cross-origin-resource-policy': 'cross-origin' };
  if (cors) {
    h['access-control-allow-origin'] = cors;
    h['access-control-expose-headers'] = EXPOSE;
    h.vary = 'origin';
  }
  return h;
}

function preflight(res, cors) {
  res.writeHead(204, {
    ...baseHeaders(cors),
    allow: METHODS,
    ...(cors ? {
      'access-control-allow-methods': METHODS,
      'access-control-allow-headers': ALLOW_HEADERS,
      'access-control-max-age': '600',
    } : {}),
  });
  res.end();
}

// How long a refused request's connection goes on being read (and what
// arrives dropped) after its response, before it is closed.
const LINGER_MS = 5000;

/**
 * After a refusal with Connection: close of a body still arriving (413,
 * 408, 503), half-close our side, go on reading and dropping what the
 * client sends, and close at its end or after LINGER_MS: a client still
 * sending then reads the status, instead of a reset.
 */
function lingeringClose(socket) {
  socket.destroySoon = function destroySoon() {
    this.end();
    this.resume();
    const timer = setTimeout(() => this.destroy(), LINGER_MS);
    timer.unref();
    this.once('close', () => clearTimeout(timer));
  };
}

/** An error response: JSON {error}, no caching; a HEAD gets the status and headers alone. */
function refuse(req, res, cors, status, message, extra) {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const headers = {
    ...baseHeaders(cors), 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...(extra || {}),
  };
  if (status === 401) headers['www-authenticate'] = 'Bearer realm="hxstate"';
  res.writeHead(status, headers);
  res.end(req.method === 'HEAD' ? undefined : JSON.stringify({ error: message || String(status) }));
  if (headers.connection === 'close' && res.socket) lingeringClose(res.socket);
}

module.exports = { baseHeaders, preflight, refuse, METHODS };
