'use strict';
// A deterministic streaming agent for the CopilotKit runner's tests (no
// network, no model): what it emits is a function of its thread, its run
// and the number of messages it was given, so that a run driven again
// emits the same events.  Each event goes out delayMs after the one before.
const { AbstractAgent } = require('@ag-ui/client');
const { Observable } = require('rxjs');
const crypto = require('node:crypto');

function words(seed, n) {
  const h = crypto.createHash('sha256').update(seed).digest('hex');
  const out = [];
  for (let i = 0; i < n; i++) out.push(`${h.slice((i * 3) % 60, (i * 3) % 60 + 4)} `);
  return out;
}

/** The events of run runId of threadId, given n messages. */
function script(threadId, runId, n, tokens = 20) {
  const seed = `${threadId}/${runId}/${n}`;
  const m = `${runId}-a`;
  const t = `${runId}-t`;
  const r = `${runId}-r`;
  const ev = [{ type: 'RUN_STARTED', threadId, runId }];
  ev.push({ type: 'STATE_SNAPSHOT', snapshot: { thread: threadId, turns: n } });
  ev.push({ type: 'STEP_STARTED', stepName: 'think' });
  ev.push({ type: 'REASONING_START', messageId: r });
  ev.push({ type: 'REASONING_MESSAGE_START', messageId: r, role: 'reasoning' });
  for (const w of words(`${seed}/r`, 5)) ev.push({ type: 'REASONING_MESSAGE_CONTENT', messageId: r, delta: w });
  ev.push({ type: 'REASONING_MESSAGE_END', messageId: r });
  ev.push({ type: 'REASONING_END', messageId: r });
  ev.push({ type: 'STEP_FINISHED', stepName: 'think' });
  ev.push({ type: 'TEXT_MESSAGE_START', messageId: m, role: 'assistant' });
  for (const w of words(`${seed}/m`, tokens)) ev.push({ type: 'TEXT_MESSAGE_CONTENT', messageId: m, delta: w });
  ev.push({ type: 'TEXT_MESSAGE_END', messageId: m });
  ev.push({ type: 'TOOL_CALL_START', toolCallId: t, toolCallName: 'lookup', parentMessageId: m });
  for (const w of ['{"q":', `"${words(seed, 1)[0].trim()}"`, '}']) ev.push({ type: 'TOOL_CALL_ARGS', toolCallId: t, delta: w });
  ev.push({ type: 'TOOL_CALL_END', toolCallId: t });
  ev.push({ type: 'TOOL_CALL_RESULT', messageId: `${runId}-res`, toolCallId: t, content: `result of ${runId}`, role: 'tool' });
  ev.push({ type: 'STATE_DELTA', delta: [{ op: 'add', path: '/last', value: { runId, words: words(seed, 3) } }] });
  ev.push({ type: 'CUSTOM', name: 'progress', value: { runId, n } });
  ev.push({ type: 'RUN_FINISHED', threadId, runId, result: { n } });
  return ev;
}

class FakeAgent extends AbstractAgent {
  constructor({ delayMs = 1, tokens = 20, failAt = null, ...config } = {}) {
    super(config);
    this.delayMs = delayMs;
    this.tokens = tokens;
    this.failAt = failAt;
  }

  run(input) {
    const events = script(input.threadId, input.runId, (input.messages || []).length, this.tokens);
    return new Observable((sub) => {
      let i = 0;
      let timer = null;
      const next = () => {
        if (this.failAt !== null && i === this.failAt) {
          sub.error(new Error('the fake agent failed'));
          return;
        }
        if (i >= events.length) {
          sub.complete();
          return;
        }
        sub.next(events[i++]);
        timer = setTimeout(next, this.delayMs);
      };
      timer = setTimeout(next, this.delayMs);
      return () => clearTimeout(timer);
    });
  }

  clone() {
    const c = new FakeAgent({ delayMs: this.delayMs, tokens: this.tokens, failAt: this.failAt, threadId: this.threadId });
    return c;
  }
}

module.exports = { FakeAgent, script };
