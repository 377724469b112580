'use strict';
// README.md's Usage example runs as written, against the schema
// "langgraph" the Python package set up, and prints what the README says.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { setupSchema } = require('./helpers');

const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');

test("README.md's example runs as written", { timeout: 60000 }, async () => {
  const m = /<!-- langgraph-js-example: [^>]* -->\n```js\n([\s\S]*?)```/.exec(readme);
  assert.ok(m, 'the example is marked');
  await setupSchema('langgraph');
  // in the package's folder, where require('@hxstate/langgraph') resolves (the workspace)
  const file = path.join(__dirname, '..', '.readme-example.js');
  fs.writeFileSync(file, /** @type {string} */ (m[1]));
  try {
    const out = await new Promise((resolve, reject) => {
      execFile(process.execPath, [file], { timeout: 50000 }, (err, stdout, stderr) => (err ? reject(new Error(stderr || err.message)) : resolve(stdout)));
    });
    assert.equal(out, "[ 'hi', 'hello!' ]\n");
    assert.match(readme, /It prints `\[ 'hi', 'hello!' \]`/);
  } finally {
    fs.rmSync(file, { force: true });
  }
});
