// CopilotKit's runtime with its threads kept in hxstate: a turn through
// the runtime's fetch handler in one process, then a page reload served
// by another runner instance (as another process would serve it), which
// replays the thread from the database.
process.env.COPILOTKIT_TELEMETRY_DISABLED ??= 'true';
const { CopilotRuntime, createCopilotRuntimeHandler } = require('@copilotkit/runtime/v2');
const { AbstractAgent } = require('@ag-ui/client');
const { Observable } = require('rxjs');
const { HxAgentRunner } = require('hxstate-gateway/copilotkit');

// An agent that streams its answer a word at a time (a model goes here)
class EchoAgent extends AbstractAgent {
  run(input) {
    return new Observable((sub) => {
      const id = `${input.runId}-answer`;
      const said = input.messages[input.messages.length - 1].content;
      sub.next({ type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId });
      sub.next({ type: 'TEXT_MESSAGE_START', messageId: id, role: 'assistant' });
      for (const word of `You said: ${said}`.split(/(?= )/)) sub.next({ type: 'TEXT_MESSAGE_CONTENT', messageId: id, delta: word });
      sub.next({ type: 'TEXT_MESSAGE_END', messageId: id });
      sub.next({ type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId });
      sub.complete();
    });
  }
}

/** The runtime's endpoint (what a server mounts at /api/copilotkit), on runner. */
function endpoint(runner) {
  const runtime = new CopilotRuntime({ agents: { default: new EchoAgent() }, runner });
  return createCopilotRuntimeHandler({ runtime, basePath: '/api/copilotkit', activateChannels: false });
}

/** POST body to the endpoint; the events of its SSE response. */
async function post(handler, path, body) {
  const res = await handler(new Request(`http://localhost/api/copilotkit${path}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  }));
  const text = await res.text();
  return text.split('\n').filter((line) => line.startsWith('data: ')).map((line) => JSON.parse(line.slice(6)));
}

async function main() {
  const pg = process.env.DATABASE_URL;
  const first = new HxAgentRunner({ pg });   // one process's runner
  const second = new HxAgentRunner({ pg });  // another's
  const threadId = `readme-${process.pid}`;
  const input = {
    threadId, runId: 'run-1', messages: [{ id: 'u-1', role: 'user', content: 'hello hxstate' }],
    tools: [], context: [], state: {}, forwardedProps: {},
  };
  const ran = await post(endpoint(first), '/agent/default/run', input);
  console.log(`run: ${ran.length} events, ${ran.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').length} tokens`);
  const reload = await post(endpoint(second), '/agent/default/connect', { ...input, runId: 'reload' });
  console.log(`reload: ${reload.map((e) => e.type).join(' ')}`);
  console.log(`text: ${reload.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.delta).join('')}`);
  console.log(`running: ${await second.isRunning({ threadId })}`);
  await first.close();
  await second.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
