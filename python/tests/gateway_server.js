'use strict';
// hxstate-gateway serving HxSaver's threads, for test_gateway.py: the
// threads are a source of the gateway's hub (the function setup() made),
// served as the "table" threads, with no code of the saver's in between.
// Prints the port it listens on; stops when its stdin closes.
const http = require('node:http');
const { createGateway } = require('hxstate-gateway');

async function main() {
  const gateway = createGateway({
    tables: ['threads'],
    hubOptions: { sources: { threads: process.argv[2] || 'langgraph.threads' } },
    authorize: () => true, // the test's own rule: everyone may read
  });
  await gateway.ready;
  const server = http.createServer(gateway.handler);
  server.listen(0, '127.0.0.1', () => console.log(server.address().port));
  process.stdin.resume();
  process.stdin.on('end', async () => {
    server.close();
    await gateway.close();
    server.closeAllConnections();
    process.exit(0);
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
