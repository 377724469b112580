'use strict';
// A streamed chat in a page: examples/chat.html, served next to
// hxstate-gateway (mounted under /hx), whose run hook writes the user's
// message and the agent's answer into the row with hxstate-client's
// RunWriter, token by token, as the page watches.
//
//   DATABASE_URL=postgres:///app HX_SECRET=<32+ bytes> node gateway/examples/chat.js   (PORT=8080)
//
// It prints the page's URL for one session, with a token (scopes read and
// run) in the fragment.  The agent here is a stand-in that answers with a
// tool call and the words it was sent; a real one calls a model and writes
// what the model streams the same way (run.text(), run.toolCall(),
// run.toolResult()).
//
// chatServer() is what the test (gateway/test/chat-page.test.js) runs,
// with an agent of its own.
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const crypto = require('node:crypto');
const { createGateway, mintToken } = require('hxstate-gateway');
const { RunWriter } = require('hxstate-client');

const PAGE = fs.readFileSync(path.join(__dirname, 'chat.html'), 'utf8');
const MAX_MESSAGE = 4000; // characters of a user's message

// The page runs only its own inline script and style: the policy names them by hash.
const hash = (re) => `'sha256-${crypto.createHash('sha256').update(re.exec(PAGE)[1]).digest('base64')}'`;
const POLICY = `default-src 'none'; script-src ${hash(/<script>([\s\S]*?)<\/script>/)}; style-src ${hash(/<style>([\s\S]*?)<\/style>/)}; `
  + "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

function refused(message) {
  return Object.assign(new Error(message), { code: 'chat_bad_message', expose: true }); // RUN_ERROR, shown on the page
}

/**
 * An http.Server that serves the page at /chat/<table>/<key> and the
 * gateway under /hx/.  options: gateway (createGateway's options, without
 * run), writer (a RunWriter), agent (async (run, said, signal): writes the
 * answer to the user's message `said` with run, a RunWriter run;
 * signal aborts when the run must stop).
 */
function chatServer({ gateway: gatewayOptions, writer, agent }) {
  // The run hook: the user's message into the row, then the agent's answer.
  // A reload of the page ends the POST that started the run (signal
  // 'client_closed'), not the answer: the work goes on and the reloaded
  // page follows it on /hx/streams (the run keeps its thread, one run at a
  // time, until this promise settles).  Any other end of the run (its
  // longest duration, the gateway closing) stops the work.
  async function run(input, target, { signal }) {
    const said = input.messages[input.messages.length - 1];
    if (!said || said.role !== 'user') throw refused('the last message is the user\'s');
    if (typeof said.content !== 'string' || said.content.trim() === '') throw refused('the message is text');
    if (said.content.length > MAX_MESSAGE) throw refused(`a message is at most ${MAX_MESSAGE} characters`);
    // what a jsonb cannot hold, refused before anything is written
    if (/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(said.content)) {
      throw refused('the message holds a NUL character or a lone surrogate');
    }
    const stop = new AbortController();
    const onAbort = () => { if (signal.reason !== 'client_closed') stop.abort(signal.reason); };
    signal.addEventListener('abort', onAbort);
    const r = writer.open({ table: target.table, key: target.key });
    try {
      // the id is the server's: a client's id could name a message already in the row
      const mine = r.text({ messageId: `u-${crypto.randomUUID()}`, role: 'user' });
      mine.append(said.content);
      await mine.end();
      await agent(r, said.content, stop.signal);
      await r.close();
    } catch (err) {
      try {
        // what the answer had so far is closed (its END) and kept in the row
        await r.close({ status: stop.signal.aborted ? 'stopped' : 'failed', error: String(err.message) });
      } catch {
        // the run had failed itself (its connection): err says more
      }
      if (!stop.signal.aborted) throw err;
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  const gateway = createGateway({ ...gatewayOptions, run });
  const server = http.createServer({ headersTimeout: 10000, requestTimeout: 30000 }, (req, res) => {
    if (req.url.startsWith('/hx/')) {
      req.url = req.url.slice('/hx'.length); // the gateway's paths are relative to where it is mounted
      gateway.handler(req, res);
      return;
    }
    if (req.method === 'GET' && /^\/chat\/[^/?#]+\/[^/?#]+(\?|$)/.test(req.url)) {
      res.writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-store',
        'content-security-policy': POLICY,
        'x-content-type-options': 'nosniff',
        'x-frame-options': 'DENY',
        'referrer-policy': 'no-referrer',
      }).end(PAGE);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });
  server.maxConnections = 10000;
  server.gateway = gateway;
  return server;
}

/** The stand-in agent: a tool call, then the user's words back, a word at a time. */
async function echoAgent(run, said, signal) {
  const pause = () => new Promise((resolve, reject) => {
    const t = setTimeout(resolve, 120);
    signal.addEventListener('abort', () => { clearTimeout(t); reject(new Error('stopped')); }, { once: true });
  });
  const id = crypto.randomUUID();
  const text = run.text({ messageId: `a-${id}` });
  for (const w of 'Let me count your words. '.split(/(?<= )/)) { text.append(w); await pause(); }
  const call = run.toolCall({ toolCallId: `call-${id}`, toolCallName: 'count_words', parentMessageId: `a-${id}` });
  for (const piece of ['{"text": ', JSON.stringify(said), '}']) { call.append(piece); await pause(); }
  await call.end();
  await text.end();
  const words = said.split(/\s+/).filter(Boolean);
  await run.toolResult({ messageId: `t-${id}`, toolCallId: `call-${id}`, content: String(words.length) });
  const answer = run.text({ messageId: `b-${id}` });
  for (const w of `${words.length} word${words.length === 1 ? '' : 's'}: ${said}`.split(/(?<= )/)) { answer.append(w); await pause(); }
  await answer.end();
}

async function main() {
  const secret = process.env.HX_SECRET;
  const pg = { connectionString: process.env.DATABASE_URL }; // unset: the PG* variables
  const writer = new RunWriter({ pg });
  const server = chatServer({ gateway: { pg, tables: ['sessions'], secret }, writer, agent: echoAgent });
  await server.gateway.ready;
  const key = process.env.SESSION || 's-chat';
  const token = mintToken(secret, `sessions:${key}`, { scopes: ['read', 'run'], ttl: 3600 });
  server.listen(Number(process.env.PORT || 8080), () => {
    console.log(`http://localhost:${server.address().port}/chat/sessions/${key}#token=${token}`);
  });
  const stop = async () => {
    server.close();
    await server.gateway.close(); // ends every stream and run (its agent stopped)
    server.closeAllConnections();
    await writer.close();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}

module.exports = { chatServer, echoAgent };
