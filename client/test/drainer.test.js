'use strict';
// drainer.js: one microtask drains every subscription that asked, in the
// order they asked, those that ask meanwhile included; one whose drain()
// throws leaves none of the others undrained.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const { Drainer } = require('../lib/drainer');

const turn = () => new Promise((resolve) => setImmediate(resolve));

test('Drainer: later than the caller, once per item, in order, those added meanwhile in the same turn', async () => {
  const d = new Drainer();
  const log = [];
  const c = { drain: () => log.push('c') };
  const a = { drain: () => { log.push('a'); d.add(c); } };
  const b = { drain: () => log.push('b') };
  d.add(a);
  d.add(b);
  assert.deepEqual(log, [], 'not in the caller\'s turn');
  await Promise.resolve(); // the one microtask
  assert.deepEqual(log, ['a', 'b', 'c']);
  await turn();
  assert.deepEqual(log, ['a', 'b', 'c'], 'each once');
  d.add(b);
  await turn();
  assert.deepEqual(log, ['a', 'b', 'c', 'b'], 'and again when asked again');
});

test('Drainer: a drain() that throws does not strand the items after it', () => {
  // in a process of its own: the error propagates from the microtask, as
  // an uncaught exception (the test runner would take it for its own)
  const script = `
    const { Drainer } = require(${JSON.stringify(require.resolve('../lib/drainer'))});
    const d = new Drainer();
    const log = [];
    process.on('uncaughtException', (err) => log.push('error: ' + err.message));
    d.add({ drain: () => log.push('a') });
    d.add({ drain: () => { throw new Error('boom'); } });
    d.add({ drain: () => log.push('c') });
    setImmediate(() => {
      d.add({ drain: () => log.push('d') });
      setImmediate(() => console.log(JSON.stringify(log)));
    });`;
  const out = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' });
  assert.deepEqual(JSON.parse(out), ['a', 'error: boom', 'c', 'd']);
});
