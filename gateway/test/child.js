'use strict';
// A gateway in a process of its own, for tests that measure what clients
// make it spend (its memory is its own): forked by helpers.childGateway()
// with its options as JSON in argv[2].  Not a test file (node --test runs
// *.test.js).  It answers 'stats' with the gateway's counters and memory.
const { createGateway, createServer } = require('..');

async function main() {
  const options = JSON.parse(process.argv[2]);
  if (options.clientIdHeader) {
    const header = options.clientIdHeader;
    options.clientId = (req) => req.headers[header] || req.socket.remoteAddress;
    delete options.clientIdHeader;
  }
  const gateway = createGateway({ log: () => {}, ...options });
  await gateway.ready;
  const server = createServer(gateway);
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
  process.on('message', async (m) => {
    if (m === 'stats') {
      if (global.gc) global.gc();
      const conns = gateway.responses;
      process.send({
        stats: gateway.stats,
        clients: gateway.clients,
        bodyBytes: gateway.bodyBytes,
        held: conns.map((c) => c.held),
        maxHeld: conns.reduce((n, c) => Math.max(n, c.maxHeld), 0),
        memory: process.memoryUsage(),
      });
    } else if (m === 'stop') {
      server.close();
      await gateway.close();
      server.closeAllConnections();
      process.exit(0);
    }
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
