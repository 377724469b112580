'use strict';
// gateway/README.md's "Try it" section works as written.
// Its sh block runs as it is, all but its first line (`npm ci`: the
// packages are installed already, and reinstalling them would pull them
// from under the tests running beside this one): it reads DATABASE_URL and
// PORT from the environment, which the test sets to its own database and a
// free port, starts the command in the background, mints a token and prints
// the live view's URL, whose page loads.  Then its js block runs as it is,
// with the token the sh block minted, while the test writes to the row:
// the states it prints end with the row's state, and the run finishes
// (after its maximum duration).
//
// And gateway/README.md, the gateway's reference, names every flag and
// variable of the command and every option createGateway reads.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { spawn } = require('node:child_process');
const t = require('./helpers');
const { USAGE } = require('../lib/cli');

const DB = 'hx_gateway_frontend_readme';
const TOP = path.join(__dirname, '..', '..');
const HEADING = '## Try it';

/** The section of markdown under heading, up to the next heading of its level. */
function section(text, heading) {
  const start = text.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `gateway/README.md has "${heading}"`);
  const end = text.indexOf('\n## ', start + heading.length + 2);
  return text.slice(start, end < 0 ? undefined : end);
}

/** The one ```lang block of text. */
function block(text, lang) {
  const found = [...text.matchAll(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``, 'g'))].map((m) => m[1]);
  assert.equal(found.length, 1, `one ${lang} block in the section`);
  return found[0];
}

const frontends = section(fs.readFileSync(path.join(TOP, 'gateway', 'README.md'), 'utf8'), HEADING);
const shBlock = block(frontends, 'sh');
const jsBlock = block(frontends, 'js');

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

let db;
let env;
before(async () => {
  db = await t.freshDatabase(DB);
  await t.sessionsTable(db);
  await db.query(`INSERT INTO sessions (session_id, user_id, state) VALUES ('s-42', 'u-7', '{"todos": ["a"]}')`);
  env = { ...process.env, DATABASE_URL: t.databaseUrl(DB) };
  // what the blocks set themselves, or would read instead of their defaults
  for (const v of ['HX_GATEWAY_SECRET', 'HX_TOKEN', 'HX_GATEWAY_TABLES', 'HX_GATEWAY_HOST', 'HX_GATEWAY_TRANSPORT']) delete env[v];
});
after(async () => { await db.end(); });

test('the frontend section runs as written: the command, a token, the live view, HttpAgent', async () => {
  const lines = shBlock.split('\n');
  assert.match(lines[0], /^npm ci\b/, 'the block starts with npm ci');
  const script = lines.slice(1).join('\n');
  assert.match(script, /\$\{DATABASE_URL:-/, 'the block reads DATABASE_URL');
  assert.match(script, /\$\{PORT:-/, 'the block reads PORT');
  assert.doesNotMatch(jsBlock, /^await /m, 'no top-level await in CommonJS');

  const port = await freePort();
  // a process group of its own: the gateway it starts in the background is in it
  const sh = spawn('sh', ['-c', script], { cwd: TOP, env: { ...env, PORT: String(port) }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let open = 2;
  sh.stdout.on('data', (d) => { out += d; });
  sh.stderr.on('data', (d) => { err += d; });
  for (const s of [sh.stdout, sh.stderr]) s.on('close', () => { open--; });
  try {
    await t.waitFor(() => out.includes(`listening on http://127.0.0.1:${port} `), `the gateway to listen:\n${out}\n${err}`);
    await t.waitFor(() => /\/view\/sessions\/s-42\?token=\S+/.test(out), `the live view's URL:\n${out}\n${err}`);
    const viewUrl = /(http:\S+\/view\/sessions\/s-42\?token=(\S+))/.exec(out);
    const token = viewUrl[2];

    const page = t.sse(viewUrl[1]);
    await t.ended(page);
    assert.equal(page.status, 200, `the live view: ${page.text}`);
    assert.match(page.headers['content-type'], /^text\/html/);
    assert.match(page.text, /<title>sessions:s-42 /);

    // the js block, with the token the sh block minted and exported
    const agent = spawn(process.execPath, ['-'], { cwd: TOP, env: { ...env, PORT: String(port), HX_TOKEN: token } });
    let printed = '';
    let agentErr = '';
    agent.stdout.on('data', (d) => { printed += d; });
    agent.stderr.on('data', (d) => { agentErr += d; });
    const exited = new Promise((resolve) => agent.on('exit', resolve));
    agent.stdin.end(jsBlock);
    const states = () => printed.split('\n').filter((l) => /^\s*state: /.test(l)).map((l) => JSON.parse(l.replace(/^\s*state: /, '')));
    await t.waitFor(() => states().length === 1, `the agent's first state:\n${printed}\n${agentErr}`);
    assert.deepEqual(states()[0], { todos: ['a'] });
    await t.merge(db, 'sessions', 's-42', [{ op: 'append', path: '/todos', items: ['b'] }]);
    await t.merge(db, 'sessions', 's-42', [{ op: 'increment', path: '/n', by: 1 }]);
    await t.merge(db, 'sessions', 's-42', [{ op: 'increment', path: '/n', by: 1 }, { op: 'replace', path: '/last', value: 'c' }]);
    const code = await exited;
    assert.equal(code, 0, `the agent's exit status:\n${printed}\n${agentErr}`);
    const row = await t.rowState(db, 'sessions', 's-42');
    assert.deepEqual(row, { todos: ['a', 'b'], n: 2, last: 'c' });
    assert.equal(states().length, 4, `a state after the snapshot and each delta:\n${printed}`);
    assert.equal(t.canonical(states().at(-1)), t.canonical(row), `the printed states end with the row's:\n${printed}`);
    assert.match(printed, /^STATE_DELTA .*seq \d+$/m, 'each event is printed');
    const finished = /^run finished: (.*)$/m.exec(printed);
    assert.ok(finished, `the run finishes:\n${printed}`);
    assert.deepEqual(JSON.parse(finished[1]), { stream: 'sessions:s-42', seq: await t.lastSeq(db, 'sessions:s-42'), reason: 'max_duration' });
  } finally {
    try {
      process.kill(-sh.pid, 'SIGTERM');
    } catch (e) {
      if (e.code !== 'ESRCH') throw e;
    }
    // every process of the group has gone once nothing holds the pipes
    await t.waitFor(() => open === 0, 'the command to stop');
  }
});

test("gateway/README.md names every flag and variable of the command and every option of createGateway", () => {
  const doc = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
  const flags = new Set(USAGE.match(/--[a-z][a-z-]*/g));
  const vars = new Set([...USAGE.matchAll(/\[([A-Z_]+)\]/g)].map((m) => m[1]));
  assert.ok(flags.size >= 15 && vars.size >= 6, `${flags.size} flags, ${vars.size} variables`);
  for (const f of flags) assert.ok(doc.includes(`\`${f}`), `gateway/README.md names ${f}`);
  for (const v of vars) assert.ok(doc.includes(`\`${v}\``), `gateway/README.md names ${v}`);
  // the options the gateway reads: its DEFAULTS and config.<name> in gateway.js, and
  // ctx.config.<name> (the context every module is given) anywhere in lib/
  const lib = path.join(__dirname, '..', 'lib');
  const src = fs.readFileSync(path.join(lib, 'gateway.js'), 'utf8');
  const all = fs.readdirSync(lib).filter((f) => f.endsWith('.js')).map((f) => fs.readFileSync(path.join(lib, f), 'utf8')).join('\n');
  const defaults = /const DEFAULTS = \{([\s\S]*?)\};/.exec(src)[1];
  const options = new Set([
    ...[...defaults.matchAll(/^\s*(\w+):/gm)].map((m) => m[1]),
    ...[...src.matchAll(/\b(?:o|config)\.(\w+)/g)].map((m) => m[1]),
    ...[...all.matchAll(/\bctx\.config\.(\w+)/g)].map((m) => m[1]),
  ]);
  assert.ok(options.size >= 15, `${options.size} options`);
  for (const o of options) assert.ok(doc.includes(`| \`${o}\` |`), `gateway/README.md has a row for the option ${o}`);
});
