'use strict';
// The gateway's rules that need no server: what a client may hold
// (sse.js, on a fake response), the parts of a state it follows
// (projection.js), and what AG-UI 1.0 makes of a state: messages in
// LangChain's shape, LangGraph's interrupts, capabilities (agui.js), and
// the tables' configuration (config.js).
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { EventEmitter } = require('node:events');
const { MessagesSnapshotEventSchema, RunFinishedEventSchema, AgentCapabilitiesSchema } = require('@ag-ui/core/schemas');
const { SseResponse, SLICE } = require('../lib/sse');
const { project, applyDelta } = require('../lib/projection');
const { messagesOf, interruptsOf, capabilitiesOf } = require('../lib/agui');
const { normaliseTables, prefixClash, parseTablesFlag } = require('../lib/config');
const { createContext } = require('../lib/context');

/** A response whose socket takes `room` bytes, then waits for 'drain'. */
function fakeResponse(room) {
  const res = new EventEmitter();
  res.written = [];
  res.writableLength = 0;
  res.room = room;
  res.writeHead = () => {};
  res.write = (chunk) => {
    res.written.push(chunk);
    res.writableLength += chunk.length;
    return res.writableLength < res.room;
  };
  res.flush = () => { res.writableLength = 0; res.emit('drain'); };
  res.end = () => {};
  res.destroy = () => { res.destroyed = true; res.emit('close'); };
  return res;
}

/** The context a response is given (context.js), with the options it reads. */
function fakeContext(o) {
  return createContext({ config: { retry: 2000, heartbeat: 15000, maxClientBytes: 1000, stallTimeout: 100, cors: null, ...o } });
}

const frame = (n, seq) => ({ frame: Buffer.alloc(n, 0x61), seq });

test('sse: a client holds at most maxClientBytes, or one frame alone; it is cut off when stalled over its bound', () => {
  const ctx = fakeContext({ maxClientBytes: 1000 });
  const res = fakeResponse(300);
  const c = new SseResponse(ctx, {}, res, { kind: 'stream', clientId: 'x', release: () => {} });
  assert.equal(c.push(frame(200, 1)), true);
  assert.equal(c.push(frame(200, 2)), true, 'queued within the bound');
  assert.ok(c.held <= 1000);
  assert.equal(c.push(frame(900, 3)), false, 'past the bound: refused');
  res.flush();
  res.flush();
  assert.equal(c.held, 0);
  // alone, a frame larger than the bound goes, a slice at a time, shared (no copy)
  const big = frame(3 * SLICE, 4);
  assert.equal(c.push(big), true);
  assert.equal(c.seq, 4);
  assert.ok(res.written.at(-1).length <= SLICE);
  assert.equal(res.written.at(-1).buffer, big.frame.buffer, 'a slice of the shared frame');
  assert.equal(c.push(frame(10, 5)), false, 'nothing more while it holds past its bound');
  // stalled past its bound for stallTimeout: cut off
  c.tick(Date.now() + 50);
  assert.ok(!res.destroyed);
  c.tick(Date.now() + 500);
  assert.ok(res.destroyed);
  assert.equal(ctx.counters.values.stalled, 1);
});

test('sse: clear() drops what is not begun, but what must stay (the run\'s own events)', () => {
  const ctx = fakeContext({ maxClientBytes: 1 << 20 });
  const res = fakeResponse(1);
  const c = new SseResponse(ctx, {}, res, { kind: 'stream', clientId: 'x', release: () => {} });
  c.push(frame(10, 1));             // begun (written, waiting for drain)
  const mark = c.mark();
  c.hold();
  c.push({ ...frame(10), keep: true });
  c.push(frame(10, 2));
  c.clear(mark);
  c.release();
  res.flush();
  res.flush();
  assert.deepEqual(res.written.map((b) => b.length), [Buffer.from('retry: 2000\n\n').length, 10, 10]);
  assert.equal(c.seq, 1);
});

test('projection: only deltas that touch the conversation or the interrupts change it', () => {
  const paths = ['/messages', '/__interrupt__'];
  const p0 = project({ n: 1, messages: [{ id: 'a' }], other: { big: 'x' } }, paths);
  assert.deepEqual(p0, { messages: [{ id: 'a' }] });
  const same = applyDelta(p0, [{ op: 'replace', path: '/n', value: 2 }, { op: 'add', path: '/messagesX', value: 1 }], paths);
  assert.equal(same.projection, p0, 'untouched: the same object');
  assert.deepEqual(same.changed, []);
  const added = applyDelta(p0, [{ op: 'add', path: '/messages/-', value: { id: 'b' } }], paths);
  assert.deepEqual(added.projection, { messages: [{ id: 'a' }, { id: 'b' }] });
  assert.deepEqual(added.changed, ['/messages']);
  assert.deepEqual(p0, { messages: [{ id: 'a' }] }, 'never mutated');
  const root = applyDelta(p0, [{ op: 'replace', path: '', value: { messages: [], __interrupt__: [{ id: 'i', value: 1 }], z: 1 } }], paths);
  assert.deepEqual(root.projection, { messages: [], __interrupt__: [{ id: 'i', value: 1 }] });
  assert.deepEqual(root.changed.sort(), ['/__interrupt__', '/messages']);
  const gone = applyDelta(root.projection, [{ op: 'remove', path: '/__interrupt__' }], paths);
  assert.deepEqual(gone.projection, { messages: [] });
  assert.deepEqual(applyDelta(p0, [{ op: 'copy', from: '/other', path: '/messages/0' }], paths), { unknown: true });
  const nested = ['/a/messages'];
  assert.deepEqual(applyDelta(project({ a: { messages: [1], b: 2 } }, nested), [{ op: 'remove', path: '/a' }], nested).projection, {});
});

test('messages: LangChain message dicts and AG-UI messages as AG-UI messages', () => {
  const { messages, dropped } = messagesOf([
    { type: 'system', id: 's', content: 'be brief' },
    { type: 'human', id: 'h', content: [{ type: 'text', text: 'look: ' }, { type: 'image_url', image_url: { url: 'https://x/y.png' } }], name: 'ann', additional_kwargs: {} },
    { type: 'ai', id: 'a', content: [{ type: 'text', text: 'calling' }], tool_calls: [{ name: 'search', args: { q: 'pg' }, id: 'c1', type: 'tool_call' }], response_metadata: {} },
    { type: 'tool', id: 't', content: 'found', tool_call_id: 'c1', name: 'search' },
    { type: 'tool', id: 't2', content: 'boom', tool_call_id: 'c2', status: 'error' },
    { lc: 1, type: 'constructor', id: ['langchain', 'schema', 'messages', 'HumanMessage'], kwargs: { content: 'hi', id: 'k' } },
    { id: 'u', role: 'user', content: 'AG-UI shaped' },
    { type: 'human', content: 'no id' },
    { type: 'remove', id: 'r' },
    { role: 'user', content: 'no id, AG-UI shaped' },
    'not a message',
  ]);
  assert.deepEqual(messages, [
    { id: 's', role: 'system', content: 'be brief' },
    { id: 'h', role: 'user', name: 'ann', content: [{ type: 'text', text: 'look: ' }, { type: 'image', source: { type: 'url', value: 'https://x/y.png' } }] },
    { id: 'a', role: 'assistant', content: 'calling', toolCalls: [{ id: 'c1', type: 'function', function: { name: 'search', arguments: '{"q":"pg"}' } }] },
    { id: 't', role: 'tool', content: 'found', toolCallId: 'c1' },
    { id: 't2', role: 'tool', content: 'boom', toolCallId: 'c2', error: 'boom' },
    { id: 'k', role: 'user', content: 'hi' },
    { id: 'u', role: 'user', content: 'AG-UI shaped' },
    { id: 'hx-7', role: 'user', content: 'no id' },
  ]);
  assert.equal(dropped, 3);
  assert.ok(MessagesSnapshotEventSchema.safeParse({ type: 'MESSAGES_SNAPSHOT', messages }).success);
  assert.deepEqual(messagesOf(undefined), { messages: [], dropped: 0 });
});

test('interrupts: LangGraph\'s {id, value} and AG-UI\'s own, as AG-UI interrupts', () => {
  const list = interruptsOf([
    { id: 'i1', value: 'approve the refund?' },
    { id: 'i2', value: { reason: 'tool_call', message: 'send it?', toolCallId: 'c1', responseSchema: { type: 'object' }, extra: 1 } },
    { id: 'i3', reason: 'confirmation', message: 'sure?' },
    { value: 42 },
    'junk',
  ]);
  assert.deepEqual(list, [
    { id: 'i1', reason: 'input_required', message: 'approve the refund?', metadata: { value: 'approve the refund?' } },
    { id: 'i2', reason: 'tool_call', message: 'send it?', toolCallId: 'c1', responseSchema: { type: 'object' },
      metadata: { value: { reason: 'tool_call', message: 'send it?', toolCallId: 'c1', responseSchema: { type: 'object' }, extra: 1 } } },
    { id: 'i3', reason: 'confirmation', message: 'sure?' },
    { id: 'interrupt-3', reason: 'input_required', metadata: { value: 42 } },
  ]);
  assert.ok(RunFinishedEventSchema.safeParse({ type: 'RUN_FINISHED', threadId: 't', runId: 'r', outcome: { type: 'interrupt', interrupts: list } }).success);
  assert.deepEqual(interruptsOf(null), []);
  assert.deepEqual(interruptsOf([]), []);
});

test('capabilities: AG-UI 1.0\'s AgentCapabilities, true to each table\'s configuration', () => {
  const [plain, threads] = normaliseTables(['sessions', { name: 'threads', messages: null }], {});
  const a = capabilitiesOf(plain, { hook: false, maxRunMs: 0, version: '0.1.0' });
  assert.ok(AgentCapabilitiesSchema.safeParse(a).success);
  assert.equal(a.transport.resumable, true);
  assert.equal(a.transport.streaming, true);
  assert.deepEqual(a.state, { snapshots: true, deltas: true, memory: false, persistentState: true });
  assert.equal(a.humanInTheLoop.interrupts, false, 'no run hook: a resume cannot be answered');
  assert.equal(a.custom.hxstate.messages, '/messages');
  const b = capabilitiesOf(threads, { hook: true, maxRunMs: 60000, version: '0.1.0' });
  assert.equal(b.humanInTheLoop.interrupts, true);
  assert.equal(b.custom.hxstate.messages, null);
  assert.equal(b.execution.maxExecutionTime, 60000);
  const c = capabilitiesOf(normaliseTables([{ name: 'x', interrupt: null }])[0], { hook: true, maxRunMs: 0, version: '0.1.0' });
  assert.equal(c.humanInTheLoop.interrupts, false, 'no interrupt path');
});

test('config: tables, paths, sources, and two tables on one stream prefix refused', () => {
  assert.deepEqual(normaliseTables(['sessions'], {}), [{ name: 'sessions', messages: '/messages', interrupt: '/__interrupt__', source: null }]);
  assert.deepEqual(normaliseTables(['s'], { messages: 'none', interrupt: '/a~1b' })[0], { name: 's', messages: null, interrupt: '/a~1b', source: null });
  assert.throws(() => normaliseTables(['s'], { messages: 'messages' }), /JSON pointer/);
  assert.throws(() => normaliseTables(['s', 's']), /twice/);
  assert.throws(() => normaliseTables([{ name: 't', source: 'nodot' }]), /schema/);
  assert.deepEqual(parseTablesFlag('sessions, app.sessions,threads=lg.thread_snapshots'),
    ['sessions', 'app.sessions', { name: 'threads', source: 'lg.thread_snapshots' }]);
  assert.equal(prefixClash(new Map([['sessions', 'sessions'], ['tenant_b.sessions', 'tenant_b.sessions']])), null);
  assert.match(prefixClash(new Map([['sessions', 'sessions'], ['tenant_b.sessions', 'sessions']])), /both name their streams "sessions:<key>"/);
});

test('projection within maxStateBytes: a copy past the bound is tooLarge; an op above a path brings only what is projected; events are never changed', () => {
  const { applyDelta: apply, measure } = require('../lib/projection');
  const paths = ['/messages', '/__interrupt__'];
  let p = { messages: ['x'.repeat(1000)] };
  let n = 0;
  for (;;) {
    const r = apply(p, [{ op: 'copy', from: '/messages', path: '/messages/-' }], paths, { max: 64 * 1024 });
    if (r.tooLarge) {
      assert.ok(r.bytes > 64 * 1024);
      break;
    }
    p = r.projection;
    assert.ok(measure(p) <= 64 * 1024);
    n++;
  }
  assert.equal(n, 6);
  // a replace of the root with a large state whose conversation is small: within the bound
  const root = apply({ messages: [] }, [{ op: 'replace', path: '', value: { messages: [1], big: 'y'.repeat(100000) } }], paths, { max: 1000 });
  assert.deepEqual(root.projection, { messages: [1] });
  // what an op added, a later op of the delta changes: the event's value stays as logged
  const delta = [{ op: 'add', path: '/messages', value: [{ id: 'a' }] }, { op: 'add', path: '/messages/0/x', value: 1 }];
  const r = apply({}, delta, paths);
  assert.deepEqual(r.projection, { messages: [{ id: 'a', x: 1 }] });
  assert.deepEqual(delta[0].value, [{ id: 'a' }]);
});
