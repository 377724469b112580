'use strict';
// An existing Node server that serves hxstate streams to its users'
// browsers: hxstate-gateway mounted under /hx, with the application's own
// rule for who may read which session (the row's user_id).
//
//   DATABASE_URL=postgres:///app node gateway/examples/sse-gateway.js     (PORT=8080)
//   curl -N -H 'cookie: user=u-7' localhost:8080/hx/streams/sessions/s-42
//
// Browsers: new EventSource('/hx/streams/sessions/s-42') (the cookie goes
// along), or open /hx/view/sessions/s-42 for the live view.
const http = require('node:http');
const pg = require('pg');
const { createGateway } = require('hxstate-gateway');

async function main() {
  const db = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 2 });
  const gateway = createGateway({
    pg: { connectionString: process.env.DATABASE_URL }, // unset: the PG* variables
    tables: ['sessions'],
    // Who may read which stream: a user reads their own sessions.  (The
    // cookie stands in for the application's real session check.)
    authorize: async (req, { table, key }) => {
      const user = /(?:^|;\s*)user=([^;]+)/.exec(req.headers.cookie || '');
      if (!user) return { status: 401, message: 'log in first' };
      const { rows } = await db.query(`SELECT 1 FROM ${table} WHERE session_id = $1 AND user_id = $2`, [key, user[1]]);
      return rows.length === 1; // false: 403
    },
  });
  await gateway.ready;

  // a server's own bounds, as createServer(gateway) sets them: headers within
  // 10 s, a whole request within 30 s, at most 10,000 connections
  const server = http.createServer({ headersTimeout: 10000, requestTimeout: 30000 }, (req, res) => {
    if (req.url.startsWith('/hx/')) {
      req.url = req.url.slice('/hx'.length); // the gateway's paths are relative to where it is mounted
      gateway.handler(req, res);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end('the application\n');
  });
  server.maxConnections = 10000;
  server.listen(Number(process.env.PORT || 8080), () => {
    console.log(`listening on http://localhost:${server.address().port}/ (the gateway under /hx/)`);
  });
  const stop = async () => {
    server.close();
    await gateway.close(); // ends every stream; browsers reconnect to whatever serves next
    server.closeAllConnections();
    await db.end();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
