'use strict';
// The rules of a run's streamed events without I/O: what is open at a seq
// (constructs.js), the prelude that reopens it and the events that close
// it, checked with @ag-ui/client's own verifier; and when a writer's batch
// is due (batch.js), its fragments joined.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { from, lastValueFrom, toArray } = require('rxjs');
const { verifyEvents } = require('@ag-ui/client');
const C = require('../lib/constructs');
const { Batch } = require('../lib/batch');
const { splitCarry } = require('../lib/agentrun');

const run = [
  { type: 'STEP_STARTED', stepName: 'model' },
  { type: 'REASONING_START', messageId: 'r1' },
  { type: 'REASONING_MESSAGE_START', messageId: 'r1', role: 'reasoning' },
  { type: 'REASONING_MESSAGE_CONTENT', messageId: 'r1', delta: 'hmm ' },
  { type: 'REASONING_MESSAGE_CONTENT', messageId: 'r1', delta: 'ok' },
  { type: 'REASONING_MESSAGE_END', messageId: 'r1' },
  { type: 'REASONING_END', messageId: 'r1' },
  { type: 'TEXT_MESSAGE_START', messageId: 'a1', role: 'assistant' },
  { type: 'TEXT_MESSAGE_CONTENT', messageId: 'a1', delta: 'Hel' },
  { type: 'TOOL_CALL_START', toolCallId: 't1', toolCallName: 'lookup', parentMessageId: 'a1' },
  { type: 'TOOL_CALL_ARGS', toolCallId: 't1', delta: '{"q":' },
  { type: 'TEXT_MESSAGE_CONTENT', messageId: 'a1', delta: 'lo' },
  { type: 'TOOL_CALL_ARGS', toolCallId: 't1', delta: '1}' },
  { type: 'TOOL_CALL_END', toolCallId: 't1' },
  { type: 'TEXT_MESSAGE_END', messageId: 'a1' },
  { type: 'TOOL_CALL_RESULT', messageId: 'tr1', toolCallId: 't1', content: 'x' },
  { type: 'STEP_FINISHED', stepName: 'model' },
];

const verify = (events) => lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
const RUN = (events) => [{ type: 'RUN_STARTED', threadId: 't', runId: 'r' }, ...events, { type: 'RUN_FINISHED', threadId: 't', runId: 'r' }];

test('constructs: the prelude at every cut, then the rest, is a run the verifier takes; so are the closers at every cut', async () => {
  for (let cut = 0; cut <= run.length; cut++) {
    let state = C.emptyConstructs();
    for (const e of run.slice(0, cut)) {
      const r = C.applyConstruct(state, e);
      assert.ok(r.ok, `${e.type} at ${cut}`);
      state = r.state;
    }
    const prelude = C.reopen(state);
    await verify(RUN([...prelude, ...run.slice(cut)]));
    await verify(RUN([...run.slice(0, cut), ...C.closers(state)]));
    // what the prelude says so far is what was written so far, each construct's text whole
    const text = (id, kind) => run.slice(0, cut).filter((e) => (e.messageId || e.toolCallId) === id && /CONTENT|ARGS/.test(e.type)).map((e) => e.delta).join('');
    for (const c of state.open) if (c.kind !== 'step' && c.kind !== 'reasoning') assert.equal(c.text, text(c.id, c.kind));
  }
});

test('constructs: what a run does not have open is refused, and the state is unchanged', () => {
  const s0 = C.emptyConstructs();
  for (const e of [
    { type: 'TEXT_MESSAGE_CONTENT', messageId: 'x', delta: 'a' },
    { type: 'TEXT_MESSAGE_END', messageId: 'x' },
    { type: 'TOOL_CALL_ARGS', toolCallId: 'x', delta: 'a' },
    { type: 'REASONING_END', messageId: 'x' },
    { type: 'STEP_FINISHED', stepName: 'x' },
    { type: 'TEXT_MESSAGE_START' },
    { type: 'TEXT_MESSAGE_START', messageId: 7 },
  ]) {
    const r = C.applyConstruct(s0, e);
    assert.equal(r.ok, false, e.type);
    assert.equal(r.state, s0);
  }
  const s1 = C.applyConstruct(s0, { type: 'TEXT_MESSAGE_START', messageId: 'm' }).state;
  assert.equal(C.applyConstruct(s1, { type: 'TEXT_MESSAGE_START', messageId: 'm' }).ok, false, 'a second START of an open message');
  assert.equal(C.applyConstruct(s1, { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 5 }).ok, false, 'a delta that is no string');
  // standalone events and state events change nothing
  for (const e of [{ type: 'TOOL_CALL_RESULT', messageId: 'r', toolCallId: 'nope', content: '' }, { type: 'STATE_DELTA', delta: [] }, { type: 'CUSTOM', name: 'x' }]) {
    const r = C.applyConstruct(s1, e);
    assert.ok(r.ok);
    assert.equal(r.state, s1);
  }
  // a state is never changed by what comes after it (shared by readers at one seq)
  const s2 = C.applyConstruct(s1, { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'abc' }).state;
  assert.equal(s1.open[0].text, '');
  assert.equal(s2.open[0].text, 'abc');
  assert.ok(Object.isFrozen(s2) && Object.isFrozen(s2.open) && Object.isFrozen(s2.open[0]));
});

test('constructs: a run that starts abandons what an earlier one left open; the text held is bounded', () => {
  let s = C.emptyConstructs();
  for (const e of run.slice(0, 10)) s = C.applyConstruct(s, e).state;
  assert.equal(s.open.length, 3);
  const r = C.applyConstruct(s, { type: 'CUSTOM', name: C.RUN_MARKER, value: { runId: 'r2', status: 'started' } });
  assert.ok(r.ok);
  assert.deepEqual(r.abandoned.map((e) => e.type), ['TOOL_CALL_END', 'TEXT_MESSAGE_END', 'STEP_FINISHED']);
  assert.equal(r.state.open.length, 0);
  assert.deepEqual(r.state.run, { runId: 'r2', status: 'started' });
  const end = C.applyConstruct(s, { type: 'CUSTOM', name: 'hx.stream_end', value: { reason: 'deleted' } });
  assert.equal(end.state.open.length, 0);
  assert.equal(end.abandoned.length, 3);
  // bytes
  // bytes: the opener's JSON text and the text so far (what a prelude resends)
  const opener = Buffer.byteLength(JSON.stringify({ type: 'TEXT_MESSAGE_START', messageId: 'm' }));
  let b = C.applyConstruct(C.emptyConstructs(), { type: 'TEXT_MESSAGE_START', messageId: 'm' }).state;
  assert.equal(b.bytes, opener);
  b = C.applyConstruct(b, { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'é'.repeat(10) }, { maxBytes: opener + 20 }).state;
  assert.equal(b.bytes, opener + 20);
  const over = C.applyConstruct(b, { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'x' }, { maxBytes: opener + 20 });
  assert.equal(over.ok, false);
  assert.equal(over.tooLarge, true);
  assert.equal(C.applyConstruct(b, { type: 'TEXT_MESSAGE_END', messageId: 'm' }).state.bytes, 0);
});

test('batch: fragments of one construct join; due after flushMs, at once for an end or maxBatchBytes', () => {
  const rule = { flushMs: 50, maxBatchBytes: 400 };
  const b = new Batch();
  assert.equal(b.dueAt(rule), null);
  b.push({ type: 'TEXT_MESSAGE_START', messageId: 'm' }, 1000);
  b.push({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'a' }, 1010);
  b.push({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'b"c' }, 1020);
  b.push({ type: 'TOOL_CALL_ARGS', toolCallId: 't', delta: 'x' }, 1030);
  b.push({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'd' }, 1040);
  assert.equal(b.dueAt(rule), 1050, 'flushMs after its first event');
  assert.equal(b.pushes, 5);
  const exact = Buffer.byteLength(JSON.stringify([
    { type: 'TEXT_MESSAGE_START', messageId: 'm' }, { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'ab"c' },
    { type: 'TOOL_CALL_ARGS', toolCallId: 't', delta: 'x' }, { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'd' }])) - 5;
  assert.equal(b.bytes, exact, 'bytes are the events\' JSON text, joined fragments counted once');
  b.push({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'x'.repeat(400) }, 1045);
  assert.equal(b.dueAt(rule), 1000, 'at maxBatchBytes: at once');
  const events = b.take();
  assert.deepEqual(events.map((e) => e.delta), [undefined, 'ab"c', 'x', `d${'x'.repeat(400)}`]);
  assert.equal(b.dueAt(rule), null);
  b.push({ type: 'TEXT_MESSAGE_END', messageId: 'm' }, 2000);
  assert.equal(b.dueAt(rule), 2000, 'an end: at once');
  b.take();
  b.push({ type: 'STEP_STARTED', stepName: 's' }, 3000);
  b.hurry();
  assert.equal(b.dueAt(rule), 3000, 'its run asked');
});

test('a surrogate pair split between two fragments is held back, not written as two halves', () => {
  const pair = '🌥';
  const a = splitCarry('', `x${pair[0]}`, 'f');
  assert.deepEqual(a, { text: 'x', carry: pair[0] });
  assert.deepEqual(splitCarry(a.carry, `${pair[1]}y`, 'f'), { text: `${pair}y`, carry: '' });
  assert.throws(() => splitCarry('', `a${pair[1]}`, 'f'), /lone surrogate/);
  assert.throws(() => splitCarry('', 'a\u0000', 'f'), /NUL/);
});
