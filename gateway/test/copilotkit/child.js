'use strict';
// A CopilotKit runtime's process for the runner's kill test: an
// HxAgentRunner on the database argv[2], running the fake agent
// (agent.js) for each {id, threadId, runId, messages} the parent sends;
// it answers {id, ok, last (the type of the run's last event), events,
// stats} or {id, ok: false, code, message}.
const { lastValueFrom, toArray } = require('rxjs');
const { HxAgentRunner } = require('../../lib/copilotkit');
const { FakeAgent } = require('./agent');

const runner = new HxAgentRunner({ pg: { database: process.argv[2] } });

process.on('message', async (m) => {
  if (m === 'stop') {
    await runner.close();
    process.exit(0);
  }
  try {
    const agent = new FakeAgent({ threadId: m.threadId, initialMessages: m.messages, delayMs: m.delayMs, tokens: m.tokens });
    const input = { threadId: m.threadId, runId: m.runId, messages: m.messages, tools: [], context: [], state: {}, forwardedProps: {} };
    const events = await lastValueFrom(runner.run({ threadId: m.threadId, agent, input }).pipe(toArray()));
    process.send({ id: m.id, ok: true, last: events[events.length - 1].type, events: events.length, stats: runner.stats });
  } catch (err) {
    process.send({ id: m.id, ok: false, code: err.code, message: err.message, stats: runner.stats });
  }
});
process.send({ ready: true });
