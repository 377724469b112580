'use strict';
// The HTTP server for a gateway, with the bounds a server needs beside the
// gateway's own (which start once a request's headers have arrived):
//
//   headersTimeout   a request's headers must arrive within it (10 s), or
//                    the client gets 408 and the connection closes: a client
//                    that sends its headers a byte at a time holds no
//                    socket for node:http's default 60 s;
//   requestTimeout   the whole request, headers and body, within it (30 s;
//                    the gateway's bodyTimeout, 10 s, answers a slow body
//                    first).  A response (an SSE stream) is not bounded by
//                    it: a request is complete once its body has arrived;
//   maxConnections   connections open at once (10,000): more are closed
//                    unanswered.  What one may hold of the gateway's memory
//                    is bounded (maxClientBytes), so this bounds the sum.
//
// createServer(gateway) is what the command serves with; an application
// that makes its own server sets the same three (see README.md).
const http = require('node:http');

const SERVER_DEFAULTS = {
  headersTimeout: 10000,
  requestTimeout: 30000,
  maxConnections: 10000,
};

function positive(options, name) {
  const v = options[name];
  if (!Number.isSafeInteger(v) || v < 1) throw new TypeError(`hxstate-gateway: createServer's ${name} is an integer >= 1`);
  return v;
}

/**
 * An http.Server that serves gateway (its handler), with headersTimeout,
 * requestTimeout and maxConnections (options, or SERVER_DEFAULTS).  Listen
 * on it as on any server.
 */
function createServer(gateway, options = {}) {
  const o = { ...SERVER_DEFAULTS, ...options };
  const server = http.createServer({ headersTimeout: positive(o, 'headersTimeout'), requestTimeout: positive(o, 'requestTimeout') },
    gateway.handler);
  server.maxConnections = positive(o, 'maxConnections');
  return server;
}

module.exports = { createServer, SERVER_DEFAULTS };
