'use strict';
// gateway/README.md's Durable Streams example runs as written: the README
// shows examples/durable-streams.js as it is, and the file, run against a
// database with the README's sessions table (DATABASE_URL) and a secret
// (GATEWAY_SECRET), prints what the README says it prints.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const { spawn } = require('node:child_process');
const t = require('./helpers');

const DB = 'hx_gateway_durable_readme';
const TOP = path.join(__dirname, '..', '..');
const EXAMPLE = path.join(__dirname, '..', 'examples', 'durable-streams.js');
const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
const section = readme.slice(readme.indexOf('## Durable Streams'), readme.indexOf('\n## ', readme.indexOf('## Durable Streams') + 3));

let db;
before(async () => {
  db = await t.freshDatabase(DB);
  await t.sessionsTable(db);
  await db.query(`INSERT INTO sessions (session_id, user_id, state) VALUES ('s-42', 'u-7', '{"todos": ["a"]}')`);
});
after(async () => { await db.end(); });

test("the README's Durable Streams section shows examples/durable-streams.js as it is", () => {
  const blocks = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.ok(blocks.includes(fs.readFileSync(EXAMPLE, 'utf8')));
});

test('the example runs as written and prints what the README says', async () => {
  const env = { ...process.env, DATABASE_URL: t.databaseUrl(DB), GATEWAY_SECRET: crypto.randomBytes(32).toString('hex') };
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
  assert.equal(r.code, 0, `exit status; stderr: ${r.err}`);
  const printed = /It prints[^\n]*\n\n```\n([\s\S]*?)```/.exec(section);
  assert.ok(printed, 'the README says what it prints');
  assert.equal(r.out, printed[1]);
  const { rows } = await db.query("SELECT seq, type FROM hx_event WHERE stream = '@agent:t-1' ORDER BY seq");
  assert.deepEqual(rows.map((x) => [Number(x.seq), x.type]), [[1, 'STATE_SNAPSHOT'], [2, 'CUSTOM']], 'the events are in the log');
});
