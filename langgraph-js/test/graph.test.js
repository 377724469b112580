'use strict';
// A real LangGraph.js graph on HxSaver: a StateGraph on MessagesAnnotation
// whose agent calls a tool after a human's approval by interrupt(): the
// run stops at the interrupt, the resume with Command finishes it, the
// history lists every checkpoint with its state, a run from an older
// checkpoint branches (the old branch stays); every state and history is
// MemorySaver's.  The thread's stream ends at the graph's state, and the
// Python HxSaver reads the thread's messages as the graph left them.

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { StateGraph, MessagesAnnotation, MemorySaver, START, END, interrupt, Command } = require('@langchain/langgraph');
const { AIMessage, HumanMessage, ToolMessage } = require('@langchain/core/messages');
const { HxSaver } = require('..');
const { setupSchema, pool, runPython } = require('./helpers');

const SCHEMA = 'lgjs_graph';

function graph() {
  const builder = new StateGraph(MessagesAnnotation)
    .addNode('agent', (state) => {
      const last = state.messages[state.messages.length - 1];
      if (last instanceof ToolMessage || last._getType() === 'tool') {
        return { messages: [new AIMessage({ content: `add(2, 3): ${last.content}`, id: `ai-${state.messages.length}` })] };
      }
      return {
        messages: [
          new AIMessage({
            content: '',
            id: `ai-${state.messages.length}`,
            tool_calls: [{ name: 'add', args: { a: 2, b: 3 }, id: `call-${state.messages.length}`, type: 'tool_call' }],
          }),
        ],
      };
    })
    .addNode('approve', (state) => {
      const call = /** @type {any} */ (state.messages[state.messages.length - 1]).tool_calls[0];
      const answer = interrupt({ question: `call ${call.name}?`, toolCallId: call.id });
      if (answer && answer.approved === true) return new Command({ goto: 'tools' });
      return new Command({ goto: 'agent', update: { messages: [new ToolMessage({ content: 'declined', tool_call_id: call.id, id: `t-${call.id}` })] } });
    }, { ends: ['tools', 'agent'] })
    .addNode('tools', (state) => {
      const call = /** @type {any} */ (state.messages[state.messages.length - 1]).tool_calls[0];
      return { messages: [new ToolMessage({ content: String(call.args.a + call.args.b), tool_call_id: call.id, id: `t-${call.id}` })] };
    })
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', (state) => {
      const last = /** @type {any} */ (state.messages[state.messages.length - 1]);
      return last.tool_calls && last.tool_calls.length ? 'approve' : END;
    }, ['approve', END])
    .addEdge('tools', 'agent');
  return builder;
}

/** @param {any[]} messages */
const summary = (messages) => messages.map((m) => [m._getType(), m.id, m.content]);

/**
 * The scenario, on a checkpointer: a run to the interrupt, its resume
 * (approved), the history, a run from the checkpoint that waited for the
 * approval (declined this time); what each step left.
 * @param {import('@langchain/langgraph-checkpoint').BaseCheckpointSaver} checkpointer
 * @param {string} thread
 */
async function scenario(checkpointer, thread) {
  const app = graph().compile({ checkpointer });
  const config = { configurable: { thread_id: thread } };
  await app.invoke({ messages: [new HumanMessage({ content: 'what is 2 + 3?', id: 'h-1' })] }, config);
  const stopped = await app.getState(config);
  await app.invoke(new Command({ resume: { approved: true } }), config);
  const done = await app.getState(config);
  const history = [];
  for await (const s of app.getStateHistory(config)) history.push(s);
  const waiting = history.find((s) => s.next.length === 1 && s.next[0] === 'approve');
  await app.invoke(new Command({ resume: { approved: false } }), /** @type {any} */ (waiting).config);
  const forked = await app.getState(config);
  const after = [];
  for await (const s of app.getStateHistory(config)) after.push(s);
  return {
    stopped: { next: stopped.next, interrupts: stopped.tasks.flatMap((task) => task.interrupts.map((i) => i.value)) },
    done: summary(done.values.messages),
    history: history.map((s) => [s.metadata?.source, s.next, summary(s.values.messages ?? [])]),
    forked: summary(forked.values.messages),
    after: after.map((s) => [s.metadata?.source, s.next, summary(s.values.messages ?? [])]),
    ids: { head: history[0].config.configurable?.checkpoint_id, after: after.map((s) => s.config.configurable?.checkpoint_id) },
    values: forked.values,
  };
}

test('a graph with an interrupt on HxSaver runs as on MemorySaver, and Python reads its thread', { timeout: 120000 }, async (t) => {
  await setupSchema(SCHEMA);
  const p = pool();
  t.after(() => p.end());
  const saver = new HxSaver(p, { schema: SCHEMA });
  await saver.setup();
  const thread = `graph-${crypto.randomBytes(4).toString('hex')}`;
  const mine = await scenario(saver, thread);
  const theirs = await scenario(new MemorySaver(), thread);

  await t.test('the run stops at the interrupt, the resume finishes it', () => {
    assert.deepEqual(mine.stopped, { next: ['approve'], interrupts: [{ question: 'call add?', toolCallId: 'call-1' }] });
    assert.deepEqual(mine.done, [
      ['human', 'h-1', 'what is 2 + 3?'],
      ['ai', 'ai-1', ''],
      ['tool', 't-call-1', '5'],
      ['ai', 'ai-3', 'add(2, 3): 5'],
    ]);
  });
  await t.test('states, histories and the fork are those of MemorySaver', () => {
    assert.deepEqual(mine.stopped, theirs.stopped);
    assert.deepEqual(mine.done, theirs.done);
    assert.deepEqual(mine.history, theirs.history);
    assert.deepEqual(mine.forked, theirs.forked);
    assert.deepEqual(mine.after, theirs.after);
    assert.ok(mine.ids.after.includes(mine.ids.head), 'the old branch stays in the history');
  });
  await t.test("the thread's stream ends at the graph's state", async () => {
    const heads = await p.query(`SELECT state FROM ${SCHEMA}.head_states($1)`, [[thread]]);
    assert.deepEqual(
      heads.rows[0].state.messages.map((/** @type {any} */ m) => [m.type, m.id, m.content]),
      mine.forked,
    );
  });
  await t.test('the Python HxSaver reads the messages the graph left', async () => {
    const out = await runPython(
      `import json\nfrom hxstate.langgraph import HxSaver\nwith HxSaver.from_conn_string("", schema=${JSON.stringify(SCHEMA)}) as s:\n` +
        `    t = s.get_tuple({"configurable": {"thread_id": ${JSON.stringify(thread)}}})\n` +
        `    print(json.dumps([[m.type, m.id, m.content, getattr(m, "tool_calls", None)] for m in t.checkpoint["channel_values"]["messages"]]))\n`,
    );
    assert.deepEqual(
      JSON.parse(out),
      mine.values.messages.map((/** @type {any} */ m) => [m._getType(), m.id, m.content, m._getType() === 'ai' ? m.tool_calls : null]),
    );
  });
});
