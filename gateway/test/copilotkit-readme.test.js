'use strict';
// gateway/README.md's CopilotKit example runs as written: the README shows
// examples/copilotkit.js as it is, and the file, run against a database
// (DATABASE_URL), prints what the README says it prints.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const t = require('./helpers');

const DB = 'hx_gateway_copilotkit_readme';
const TOP = path.join(__dirname, '..', '..');
const EXAMPLE = path.join(__dirname, '..', 'examples', 'copilotkit.js');
const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
const start = readme.indexOf('## CopilotKit');
const section = readme.slice(start, readme.indexOf('\n## ', start + 3));

let db;
before(async () => { db = await t.freshDatabase(DB); });
after(async () => { await db.end(); });

test("the README's CopilotKit section shows examples/copilotkit.js as it is", () => {
  assert.ok(start >= 0);
  const blocks = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.ok(blocks.includes(fs.readFileSync(EXAMPLE, 'utf8')));
});

test('the example runs as written and prints what the README says', async () => {
  const env = { ...process.env, DATABASE_URL: t.databaseUrl(DB) };
  const r = await new Promise((resolve) => {
    const child = spawn(process.execPath, [EXAMPLE], { cwd: TOP, env });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
  });
  assert.equal(r.code, 0, r.err);
  const printed = /It prints:\n\n```\n([\s\S]*?)```/.exec(section);
  assert.ok(printed, 'the README shows what it prints');
  assert.equal(r.out, printed[1]);
});
