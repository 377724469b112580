'use strict';
// The gateway's plain HTTP answers: a refusal (a status and a JSON error,
// nothing of any state), a JSON value, the CORS headers, and the lingering
// close of a connection whose request body the gateway will not read.
//
// A refusal of a request whose body has not been read (a POST without a
// token, a body over a bound) goes out at once with Connection: close:
// node:http would otherwise read the whole body to keep the connection
// (300 MB in 0.7 s, or a body that trickles for minutes).  Then our side
// half-closes, goes on reading and dropping what the client still sends
// for at most LINGER_MS and LINGER_BYTES, and destroys the socket: a
// client still sending gets the status rather than a reset that would
// lose it (most clients, Node's among them, report a reset and drop the
// response they have not read yet), and a refused body costs neither the
// time nor the bytes it would take.

// How long, and how many bytes, a refused request's connection goes on
// being read (and what arrives dropped) after its response.
const LINGER_MS = 5000;
const LINGER_BYTES = 16 * 1024 * 1024;

/** The CORS headers every SSE and JSON response carries (config.cors). */
function corsHeaders(config) {
  return config.cors ? { 'access-control-allow-origin': config.cors, vary: 'origin' } : {};
}

/** Make socket close lingeringly once its response is written (see above). */
function lingeringClose(socket) {
  socket.destroySoon = function destroySoon() { // what node:http calls once the response is written
    this.end();
    let bytes = 0;
    this.on('data', (chunk) => {
      bytes += chunk.length;
      if (bytes > LINGER_BYTES) this.destroy();
    });
    this.resume();
    const timer = setTimeout(() => this.destroy(), LINGER_MS);
    timer.unref();
    this.once('close', () => clearTimeout(timer));
  };
}

/** Has req a body that has not been read (and so would be, to keep the connection)? */
function unreadBody(req) {
  if (!req || req.complete || req.readableEnded) return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Refuse: status, a JSON body {error: message, code} (no body for 204),
 * cache-control: no-store, the extra headers; counted in ctx.counters.
 * A response already begun is cut off instead.
 */
function refuse(ctx, res, status, message, extra, code) {
  ctx.counters.status(status);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const headers = {
    'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff',
    ...corsHeaders(ctx.config), ...(extra || {}),
  };
  if (status === 401) headers['www-authenticate'] = 'Bearer realm="hxstate"';
  // a body that will not be read: answer now, and close the connection
  // (lingeringly) rather than read it to keep the connection
  if (unreadBody(res.req)) headers.connection = 'close';
  res.writeHead(status, headers);
  const body = { error: message || String(status) };
  if (code !== undefined) body.code = code;
  res.end(status === 204 ? undefined : JSON.stringify(body));
  if (headers.connection === 'close' && res.socket) lingeringClose(res.socket);
}

/** A JSON value, status 200 (or status), not cached. */
function json(ctx, res, status, value) {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff',
    ...corsHeaders(ctx.config),
  });
  res.end(JSON.stringify(value));
}

module.exports = { refuse, json, corsHeaders, lingeringClose, unreadBody, LINGER_MS, LINGER_BYTES };
