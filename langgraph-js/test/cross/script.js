'use strict';
// The script both languages run in the cross-language tests: a thread
// with a run's input stored once (a __start__ write kept as a reference),
// messages of every kind the graph writes (human, ai with a tool call,
// tool, one edited and one removed), a channel rewritten at every step
// (so that, with a small snapshotMinBytes, snapshots come between chains
// of deltas), pending writes (a small one, a packed one, an interrupt,
// with task paths), a second writer refused on a continued parent, a
// fork asked for (hx_fork_of) and its run, a subgraph's namespace, and
// objects whose keys are not in sorted order (none of them integer-like:
// a JavaScript object puts those first, see README.md).

const { uuid6 } = require('@langchain/langgraph-checkpoint');

/** @param {string} type @param {Record<string, unknown>} fields */
const msg = (type, fields) => ({ $msg: { type, ...fields } });

/** The script's steps, with fresh checkpoint ids in order. */
function script() {
  const id = () => uuid6(-1);
  const [c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, k1, k2] = Array.from({ length: 12 }, id);
  const h1 = msg('human', { content: 'what is 2 + 3? é ✓ 🚀', id: 'h-1' });
  const a1 = msg('ai', {
    content: '',
    id: 'a-1',
    tool_calls: [{ name: 'add', args: { b: 3, a: 2 }, id: 'call-1', type: 'tool_call' }],
  });
  const t1 = msg('tool', { content: '5', tool_call_id: 'call-1', id: 't-1' });
  const a2 = msg('ai', { content: 'it is 5', id: 'a-2' });
  const a2edited = msg('ai', { content: 'it is five', id: 'a-2' });
  const plan = { zeta: 1, alpha: { zz: [1, 2, { y: 'x', b: null }], aa: true }, 'é': 'ü', mid: 1.5 };
  /** @param {number} step @param {Record<string, number>} versions */
  const cp = (step, versions) => ({
    v: 4,
    ts: `2026-11-27T12:00:${String(10 + step).padStart(2, '0')}.000000+00:00`,
    channel_versions: versions,
    versions_seen: { agent: { messages: Math.max(1, step) } },
  });
  /** @param {string} source @param {number} step */
  const md = (source, step) => ({ source, step, parents: {}, user: { b: 'x', a: 'y' } });
  const counter = (/** @type {string} */ c) => c.repeat(220);
  return {
    steps: [
      { op: 'put', id: c1, values: { __start__: { messages: [h1] } }, checkpoint: cp(0, { __start__: 1 }), metadata: md('input', -1), new_versions: { __start__: 1 } },
      { op: 'writes', checkpoint: c1, task: 'start-task', writes: [['messages', [h1]]] },
      {
        op: 'put', id: c2, parent: c1,
        values: { messages: [h1], plan, counter: counter('a') },
        checkpoint: cp(1, { __start__: 2, messages: 2, plan: 2, counter: 2 }), metadata: md('loop', 0),
        new_versions: { __start__: 2, messages: 2, plan: 2, counter: 2 },
      },
      { op: 'writes', checkpoint: c2, task: 'agent-task', task_path: '~agent', writes: [['messages', [a1]], ['big', 'y'.repeat(1200)]] },
      {
        op: 'put', id: c3, parent: c2,
        values: { messages: [h1, a1], plan, counter: counter('b') },
        checkpoint: cp(2, { __start__: 2, messages: 3, plan: 2, counter: 3 }), metadata: md('loop', 1),
        new_versions: { messages: 3, counter: 3 },
      },
      { op: 'writes', checkpoint: c3, task: 'tools-task', task_path: '~tools', writes: [['messages', [t1]]] },
      { op: 'writes', checkpoint: c3, task: 'approve-task', writes: [['__interrupt__', { $interrupts: [{ id: 'i-1', value: { question: 'go?', order: { z: 1, a: 2 } } }] }]] },
      {
        op: 'put', id: c4, parent: c3,
        values: { messages: [h1, a1, t1], plan, counter: counter('c') },
        checkpoint: cp(3, { __start__: 2, messages: 4, plan: 2, counter: 4 }), metadata: md('loop', 2),
        new_versions: { messages: 4, counter: 4 },
      },
      // a second writer on c3, which c4 continues: refused
      {
        op: 'put', id: c5, parent: c3,
        values: { messages: [h1, a1], plan, counter: counter('x') },
        checkpoint: cp(3, { __start__: 2, messages: 3, plan: 2, counter: 4 }), metadata: md('loop', 2),
        new_versions: { counter: 4 },
      },
      {
        op: 'put', id: c6, parent: c4,
        values: { messages: [h1, a1, t1, a2], plan: { ...plan, zeta: 2 }, counter: counter('d') },
        checkpoint: cp(4, { __start__: 2, messages: 5, plan: 3, counter: 5 }), metadata: md('loop', 3),
        new_versions: { messages: 5, plan: 3, counter: 5 },
      },
      {
        op: 'put', id: c7, parent: c6,
        values: { messages: [a1, t1, a2edited], plan: { ...plan, zeta: 2 }, counter: counter('e') },
        checkpoint: cp(5, { __start__: 2, messages: 6, plan: 3, counter: 6 }), metadata: md('loop', 4),
        new_versions: { messages: 6, counter: 6 },
      },
      // time travel: a branch from c2, asked for
      {
        op: 'put', id: c8, parent: c2, fork_of: c2,
        values: { messages: [h1, a2], plan, counter: counter('f') },
        checkpoint: cp(2, { __start__: 2, messages: 7, plan: 2, counter: 7 }), metadata: md('loop', 1),
        new_versions: { messages: 7, counter: 7 },
      },
      {
        op: 'put', id: c9, parent: c8,
        values: { messages: [h1, a2], plan, counter: counter('g'), done: true },
        checkpoint: cp(3, { __start__: 2, messages: 7, plan: 2, counter: 8, done: 8 }), metadata: md('loop', 2),
        new_versions: { counter: 8, done: 8 },
      },
      { op: 'writes', checkpoint: c9, task: 'after', writes: [['notes', { b: 1, a: [{ z: 0, c: 'd' }] }]] },
      {
        op: 'put', id: c10, parent: c9,
        values: { messages: [], plan, counter: counter('h') },
        checkpoint: cp(4, { __start__: 2, messages: 9, plan: 2, counter: 9 }), metadata: md('update', 3),
        new_versions: { messages: 9, counter: 9 },
      },
      // a subgraph's namespace
      {
        op: 'put', ns: 'child:1', id: k1, values: { inner: [1, 2], note: 'sub' },
        checkpoint: cp(0, { inner: 1, note: 1 }), metadata: md('input', -1), new_versions: { inner: 1, note: 1 },
      },
      {
        op: 'put', ns: 'child:1', id: k2, parent: k1, values: { inner: [1, 2, 3], note: 'sub' },
        checkpoint: cp(1, { inner: 2, note: 1 }), metadata: md('loop', 0), new_versions: { inner: 2 },
      },
      { op: 'writes', ns: 'child:1', checkpoint: k2, task: 'inner-task', writes: [['inner', [4]]] },
    ],
    namespaces: ['', 'child:1'],
    forks: [['', c2], ['', c3], ['child:1', k1]],
    ids: { c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, k1, k2 },
  };
}

module.exports = { script };
