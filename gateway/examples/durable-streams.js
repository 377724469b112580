// A gateway with its Durable Streams endpoint: an agent appends AG-UI
// events to its log stream with @durable-streams/client's
// IdempotentProducer (exactly once per producer, epoch and seq), a reader
// catches up on it and on a session's stream, and keeps the offsets to
// resume from.  DATABASE_URL names a database with hxstate and the
// sessions table; GATEWAY_SECRET is a random secret (openssl rand -hex 32).
const http = require('node:http');
const { createGateway, setupDurable, durableToken } = require('hxstate-gateway');
const { DurableStream, IdempotentProducer, stream } = require('@durable-streams/client');

const secret = process.env.GATEWAY_SECRET;

async function main() {
  await setupDurable(process.env.DATABASE_URL); // once per database: the endpoint's own tables
  const gateway = createGateway({
    pg: process.env.DATABASE_URL,
    tables: ['sessions'],
    secret,
    durable: { logPrefixes: ['@agent:'] }, // the log streams the endpoint may write
  });
  await gateway.ready;
  const server = http.createServer(gateway.handler);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${server.address().port}/ds`;

  // the agent: a token with the append scope for its stream
  const agent = { Authorization: `Bearer ${durableToken(secret, '@agent:t-1', { scopes: ['append'] })}` };
  const log = await DurableStream.create({ url: `${base}/@agent:t-1`, contentType: 'application/json', headers: agent });
  const producer = new IdempotentProducer(log, 'agent-1', { autoClaim: true });
  producer.append(JSON.stringify({ type: 'STATE_SNAPSHOT', snapshot: { step: 1 } }));
  producer.append(JSON.stringify({ type: 'CUSTOM', name: 'tool_done', value: { tool: 'search' } }));
  await producer.flush();
  await producer.detach(); // the stream stays open (close() would close it: a log stream is not closed)

  // a reader: a token to read it (the same token format, scope read)
  const reader = { Authorization: `Bearer ${durableToken(secret, '@agent:t-1', { scopes: ['read'] })}` };
  const events = await stream({ url: `${base}/@agent:t-1`, offset: '-1', live: false, headers: reader });
  for (const event of await events.json()) console.log('@agent:t-1', event.metadata.seq, event.type);
  console.log('resume @agent:t-1 from', events.offset);

  // a session's stream, written by its row's trigger: read only
  const session = { Authorization: `Bearer ${durableToken(secret, 'sessions:s-42', { scopes: ['read'] })}` };
  const changes = await stream({ url: `${base}/sessions:s-42`, offset: '-1', live: false, headers: session });
  for (const event of await changes.json()) console.log('sessions:s-42', event.metadata.seq, event.type);
  console.log('resume sessions:s-42 from', changes.offset);

  server.close();
  await gateway.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
