'use strict';
// What the gateway follows of a stream (its conversation and interrupts)
// is bounded in bytes, maxStateBytes: a log's "copy" deltas that copy the
// conversation into itself double it at each event (1,118 bytes of them
// took a gateway from 73 MB to out of heap in 13 events).  Past the bound,
// the responses that follow that stream end with RUN_ERROR code
// hxstate_state_too_large, before the projection they would make exists;
// the gateway's other streams go on.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const t = require('./helpers');
const { mintToken } = require('..');

const DB = 'hx_gateway_state_bytes';
const KB = 1024;
let db;

before(async () => {
  db = await t.gatewayDatabase(DB);
  // a source over log streams, as a checkpointer keeps them: its snapshot
  // is the log's first event here, its events the log's
  await db.query(`CREATE TABLE conv_log (key text PRIMARY KEY, seq bigint NOT NULL, state jsonb NOT NULL);
    CREATE FUNCTION conv_snapshots(keys text[]) RETURNS TABLE (key text, stream text, seq bigint, state jsonb)
      LANGUAGE sql STABLE AS $$ SELECT l.key, '@conv:' || l.key, l.seq, l.state FROM conv_log l WHERE l.key = ANY (keys) $$`);
});
after(async () => { await db.end(); });

const send = (stream, event) => db.query('SELECT hx_stream_send($1, $2)', [stream, JSON.stringify(event)]);
const DOUBLE = { type: 'STATE_DELTA', delta: [{ op: 'copy', from: '/messages', path: '/messages/-' }] };

async function conversation(key, state) {
  await send(`@conv:${key}`, { type: 'STATE_SNAPSHOT', snapshot: state });
  await db.query('INSERT INTO conv_log VALUES ($1, 1, $2)', [key, JSON.stringify(state)]);
}

test('deltas that double a followed conversation end its responses at maxStateBytes; the other streams go on', async () => {
  const message = { type: 'human', id: 'm', content: 'x'.repeat(1000) };
  await conversation('dbl', { messages: [message] });
  await conversation('calm', { messages: [message], n: 0 });
  const g = await t.startGateway(DB, {
    appName: 'hx-gateway-state-bytes', maxStateBytes: 256 * KB, tables: [{ name: 'conv', source: 'public.conv_snapshots', interrupt: null }],
  });
  try {
    const token = (key) => ({ authorization: `Bearer ${mintToken(t.SECRET, `conv:${key}`)}`, 'content-type': 'application/json' });
    const reader = t.sse(`${g.base}/streams/conv/dbl`, { headers: token('dbl') });
    const run = t.sse(`${g.base}/agents/conv/dbl`, { method: 'POST', headers: token('dbl'), body: JSON.stringify({ threadId: 't', runId: 'r', messages: [] }) });
    const calm = t.sse(`${g.base}/streams/conv/calm`, { headers: token('calm') });
    for (const c of [reader, run, calm]) await t.waitFor(() => c.types().includes('MESSAGES_SNAPSHOT'), 'the prelude');
    for (let i = 0; i < 12; i++) await send('@conv:dbl', DOUBLE);
    for (const c of [reader, run]) {
      await t.ended(c);
      const last = c.events().at(-1);
      assert.equal(last.type, 'RUN_ERROR', c.types().join());
      assert.equal(last.code, 'hxstate_state_too_large');
      assert.match(last.message, /the conversation and interrupts of @conv:dbl would be \d+ bytes or more at seq \d+, past the gateway's maxStateBytes \(262144\)/);
      // no conversation past the bound went out
      for (const e of c.events().filter((x) => x.type === 'MESSAGES_SNAPSHOT')) assert.ok(JSON.stringify(e.messages).length <= 256 * KB);
    }
    // another stream of the gateway goes on
    await send('@conv:calm', { type: 'STATE_DELTA', delta: [{ op: 'replace', path: '/n', value: 1 }] });
    await t.waitFor(() => calm.seqEvents().some((e) => e.type === 'STATE_DELTA'), 'the other stream\'s event');
    assert.equal(calm.done, false);
    calm.close();
    // a new reader of the doubled stream: its snapshot (here, the first
    // event's state) is small, its log is read from there: the same error
    const again = t.sse(`${g.base}/streams/conv/dbl`, { headers: token('dbl') });
    await t.ended(again);
    assert.equal(again.events().at(-1).code, 'hxstate_state_too_large');
  } finally {
    await g.close();
  }
});

test('a snapshot whose conversation is larger than maxStateBytes: RUN_STARTED, then RUN_ERROR', async () => {
  await conversation('huge', { messages: [{ type: 'human', id: 'm', content: 'y'.repeat(300 * KB) }] });
  const g = await t.startGateway(DB, {
    appName: 'hx-gateway-state-huge', maxStateBytes: 256 * KB, tables: [{ name: 'conv', source: 'public.conv_snapshots' }],
  });
  try {
    const c = t.sse(`${g.base}/streams/conv/huge`, { headers: { authorization: `Bearer ${mintToken(t.SECRET, 'conv:huge')}` } });
    await t.ended(c);
    assert.equal(c.status, 200);
    assert.deepEqual(c.types(), ['RUN_STARTED', 'STATE_SNAPSHOT', 'RUN_ERROR']);
    assert.equal(c.events().at(-1).code, 'hxstate_state_too_large');
  } finally {
    await g.close();
  }
});
