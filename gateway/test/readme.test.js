'use strict';
// client/README.md works as written: every ```js block runs, unchanged,
// against a database with the README's sessions table (DATABASE_URL set,
// as the examples read it); and gateway/README.md's application example is
// gateway/examples/sse-gateway.js itself, which serves its application
// and, under /hx/, the session to its own user only.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const t = require('./helpers');

const DB = 'hx_gateway_readme';
const TOP = path.join(__dirname, '..', '..');
const readme = fs.readFileSync(path.join(TOP, 'client', 'README.md'), 'utf8');
const blocks = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
const gatewayReadme = fs.readFileSync(path.join(TOP, 'gateway', 'README.md'), 'utf8');
const gatewayBlocks = [...gatewayReadme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
const EXAMPLE = path.join(TOP, 'gateway', 'examples', 'sse-gateway.js');

let db;
let env;
before(async () => {
  db = await t.freshDatabase(DB);
  await t.sessionsTable(db);
  await db.query(`INSERT INTO sessions (session_id, user_id, state) VALUES ('s-42', 'u-7', '{"todos": ["a"]}')`);
  env = { ...process.env, DATABASE_URL: t.databaseUrl(DB) };
});
after(async () => { await db.end(); });

/** Run a program (node's standard input), in the repository; {code, out, err}. */
function run(args, input, extraEnv = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: TOP, env: { ...env, ...extraEnv } });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30000);
    // 'close', not 'exit': the output may still be in the pipes at 'exit'
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
    if (input !== undefined) child.stdin.end(input);
  });
}

test('the READMEs have their examples, and the gateway example is examples/sse-gateway.js', () => {
  assert.ok(blocks.length >= 2, `${blocks.length} js blocks`);
  assert.ok(gatewayBlocks.includes(fs.readFileSync(EXAMPLE, 'utf8')), 'gateway/README.md shows examples/sse-gateway.js as it is');
  for (const b of [...blocks, ...gatewayBlocks]) assert.doesNotMatch(b, /^await /m, 'no top-level await in CommonJS');
});

test('each hub, stream and run example runs to its end as written', async () => {
  const runnable = blocks.filter((b) => !b.includes('createGateway'));
  assert.equal(runnable.length, 3);
  for (const code of runnable) {
    const r = await run(['-'], code);
    assert.equal(r.code, 0, `exit status; stderr: ${r.err}`);
    if (code.includes('RunWriter')) {
      // the run's tokens, followed as they were written, in fewer commits than tokens
      const m = /followed: Hello, world \((\d+) commits\)/.exec(r.out);
      assert.ok(m, `the followed text is printed:\n${r.out}`);
      assert.ok(Number(m[1]) < 4, `${m[1]} commits`);
    } else {
      assert.match(r.out, /STATE_SNAPSHOT \{ todos: \[ 'a' \] \}/, `the snapshot is printed:\n${r.out}`);
    }
  }
});

test('the gateway example serves its application, and each session to its own user', async () => {
  const child = spawn(process.execPath, [EXAMPLE], { cwd: TOP, env: { ...env, PORT: '0' } });
  try {
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    await t.waitFor(() => /localhost:(\d+)/.test(out), `the example to listen: ${out}`);
    const base = `http://127.0.0.1:${/localhost:(\d+)/.exec(out)[1]}`;
    const app = t.sse(`${base}/`);
    await t.ended(app);
    assert.equal(app.text, 'the application\n');
    const own = t.sse(`${base}/hx/streams/sessions/s-42`, { headers: { cookie: 'user=u-7' } });
    await t.waitFor(() => own.seqEvents().length === 1, 'the snapshot');
    assert.deepEqual(own.seqEvents()[0].snapshot, { todos: ['a'] });
    await t.merge(db, 'sessions', 's-42', [{ op: 'append', path: '/todos', items: ['b'] }]);
    await t.waitFor(() => own.seqEvents().length === 2, 'the delta');
    assert.deepEqual(t.stateOf(own.seqEvents()), { todos: ['a', 'b'] });
    own.close();
    for (const [headers, status] of [[{ cookie: 'user=u-8' }, 403], [{}, 401]]) {
      const c = t.sse(`${base}/hx/streams/sessions/s-42`, { headers });
      await t.ended(c);
      assert.equal(c.status, status);
      assert.ok(!c.text.includes('todos'));
    }
  } finally {
    child.kill('SIGTERM');
    const code = await new Promise((resolve) => (child.exitCode === null ? child.on('exit', resolve) : resolve(child.exitCode)));
    assert.equal(code, 0, 'the example stops cleanly on SIGTERM');
  }
});
