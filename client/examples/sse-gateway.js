'use strict';
// An AG-UI gateway: browsers GET /streams/<key> and receive the row's
// AG-UI events as server-sent events, the current state first.  One
// HxStream per key is shared by all browsers following that key and stopped
// when the last one leaves.  Given a hub (an HxHub the caller started), all
// the keys' streams share its connections, however many keys are followed.
//
//   PGDATABASE=app node client/examples/sse-gateway.js      (port 8080, table sessions)
//   curl -N localhost:8080/streams/s-42
//
// In a browser:
//   new EventSource('/streams/s-42').onmessage = (m) => apply(JSON.parse(m.data));
const http = require('node:http');
const { HxStream } = require('..');

function createGateway({ table = 'sessions', pg, hub } = {}) {
  const follows = new Map(); // key -> { stream, ready, browsers: Set<res> }

  function follow(key) {
    let f = follows.get(key);
    if (!f) {
      const stream = new HxStream({ pg, table, key, hub });
      f = { stream, browsers: new Set() };
      stream.on('event', (event) => {
        for (const res of f.browsers) res.write(sse(event));
      });
      stream.on('error', (err) => console.error(`hx ${table}:${key}: ${err.message}`));
      f.ready = stream.start();
      f.ready.catch(() => {
        if (follows.get(key) === f) follows.delete(key);
      });
      follows.set(key, f);
    }
    return f;
  }

  function leave(key, f, res) {
    f.browsers.delete(res);
    if (f.browsers.size === 0 && follows.get(key) === f) {
      follows.delete(key);
      f.stream.stop();
    }
  }

  const server = http.createServer((req, res) => {
    const m = /^\/streams\/([^/?]+)$/.exec(req.url);
    if (req.method !== 'GET' || !m) {
      res.writeHead(404).end();
      return;
    }
    const key = decodeURIComponent(m[1]);
    const f = follow(key);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let gone = false;
    req.on('close', () => { gone = true; leave(key, f, res); });
    f.ready.then(() => {
      if (gone) return;
      // the state now, then every event after it: nothing missed, nothing twice
      res.write(sse(f.stream.snapshotEvent()));
      f.browsers.add(res);
    }, (err) => {
      res.end(`event: error\ndata: ${JSON.stringify({ message: err.message })}\n\n`);
    });
  });
  // stop every stream when the server closes
  server.on('close', () => {
    for (const f of follows.values()) f.stream.stop();
    follows.clear();
  });
  return server;
}

// one SSE message; the seq is the id, the AG-UI event the data
function sse(event) {
  return `id: ${event.metadata.seq}\ndata: ${JSON.stringify(event)}\n\n`;
}

module.exports = { createGateway };

if (require.main === module) {
  const { HxHub } = require('..');
  const port = Number(process.env.PORT || 8080);
  const hub = new HxHub(); // PG* variables; the WAL when the server allows it, else LISTEN
  hub.on('transport', ({ transport, reason }) => console.log(`following over ${transport}${reason ? `: ${reason}` : ''}`));
  hub.start().then(() => {
    createGateway({ table: process.env.HX_TABLE || 'sessions', hub })
      .listen(port, () => console.log(`AG-UI gateway on http://localhost:${port}/streams/<key>`));
  });
}
