'use strict';
// hxstate-gateway serving HxSaver's threads, with a run hook that runs a
// LangGraph graph for each POST (python -m hxstate.langgraph.agui), and
// @ag-ui/client's HttpAgent as its client, for test_agui.py.
//
//   node agui_hitl.js GRAPH      (GRAPH: the graph the hook runs, module:attribute)
//
// The environment names the database (PG*), the Python to run (HX_PYTHON)
// and its PYTHONPATH.  Prints {"port"} once listening, then answers each
// line of standard input, a JSON command, with one line of JSON:
//
//   {"thread", "message"?, "resume"?, "fresh"?}
//       runs the thread's HttpAgent (one per thread, kept across commands,
//       as a client keeps its agent; "fresh": a new one, which knows no
//       pending interrupt) with the message added and resume[]:
//       {types, finished (RUN_FINISHED), error (RUN_ERROR), state, messages,
//        pendingInterrupts, verified (@ag-ui/client's verifyEvents over the
//        run's events: true, or its message), calls (the hook's calls on
//        the thread so far), reports (what those calls' processes printed)}
//
// The hook runs keys that begin with "fail-" on FAIL_GRAPH (a graph whose
// tool raises).  Stops when standard input closes.
const http = require('node:http');
const readline = require('node:readline');
const { execFile } = require('node:child_process');
const { from, lastValueFrom, toArray } = require('rxjs');
const { HttpAgent, verifyEvents } = require('@ag-ui/client');
const { createGateway } = require('hxstate-gateway');

const [graph, failGraph] = process.argv.slice(2);
const calls = new Map();   // thread -> [{resume, messages}]
const reports = new Map(); // thread -> [what each run's process printed]
const running = new Set(); // processes not yet exited

function runGraph(input, target, { signal }) {
  const list = calls.get(target.key) || [];
  calls.set(target.key, list);
  list.push({ resume: input.resume || null, messages: input.messages.map((m) => m.id) });
  const spec = target.key.startsWith('fail-') ? failGraph : graph;
  let settle;
  const done = new Promise((r) => { settle = r; });
  running.add(done);
  return new Promise((resolve, reject) => {
    const child = execFile(process.env.HX_PYTHON, ['-m', 'hxstate.langgraph.agui', spec, `--thread=${target.key}`, '--live'],
      { signal }, (err, stdout, stderr) => {
        // execFile calls back once the process's output is read, which may
        // be later than its 'exit': the run counts as done only here, after
        // its report is recorded, so that no command answers without it
        try {
          if (stderr) process.stderr.write(stderr);
          let report;
          try {
            report = JSON.parse(stdout);
          } catch {
            reject(err || new Error('the graph printed no report'));
            return;
          }
          const out = reports.get(target.key) || [];
          reports.set(target.key, out);
          out.push(report);
          if (report.error) reject(Object.assign(new Error(report.error.message), report.error));
          else resolve(report);
        } finally {
          running.delete(done);
          settle();
        }
      });
    child.stdin.end(JSON.stringify(input));
  });
}

async function main() {
  const gateway = createGateway({
    tables: [{ name: 'threads', source: 'langgraph.threads' }],
    authorize: () => true, // the test's own rule: everyone may read
    run: runGraph,
  });
  await gateway.ready;
  const server = http.createServer(gateway.handler);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${server.address().port}`;
  const agents = new Map();

  async function command({ thread, message, resume, fresh }) {
    let agent = agents.get(thread);
    if (!agent || fresh) {
      agent = new HttpAgent({ url: `${base}/agents/threads/${encodeURIComponent(thread)}`, threadId: `client-${thread}` });
      if (agents.has(thread)) agent.messages = agents.get(thread).messages;
      agents.set(thread, agent);
    }
    if (message) agent.addMessage(message);
    const events = [];
    let finished = null;
    let error = null;
    await agent.runAgent(resume ? { resume } : {}, {
      onEvent: ({ event }) => { events.push(event); },
      onRunFinishedEvent: ({ event }) => { finished = event; },
      onRunErrorEvent: ({ event }) => { error = event; },
    });
    // the processes of this run have exited (an interrupted run finishes
    // before its process does)
    await Promise.all([...running]);
    let verified = true;
    await lastValueFrom(from(events).pipe(verifyEvents(false), toArray())).catch((err) => { verified = err.message; });
    return {
      types: events.map((e) => e.type),
      finished,
      error,
      state: agent.state,
      messages: agent.messages,
      pendingInterrupts: agent.pendingInterrupts,
      verified,
      calls: calls.get(thread) || [],
      reports: reports.get(thread) || [],
    };
  }

  console.log(JSON.stringify({ port: server.address().port }));
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    let answer;
    try {
      answer = await command(JSON.parse(line));
    } catch (err) {
      answer = { failed: err.stack || String(err) };
    }
    console.log(JSON.stringify(answer));
  }
  server.close();
  await gateway.close();
  server.closeAllConnections();
  await Promise.all([...running]);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
