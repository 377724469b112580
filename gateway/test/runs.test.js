'use strict';
// What a run of the run hook may cost, and how it ends:
//   - the RunAgentInput is checked (its depth, its size, its shape) and
//     serialised before the hook is called, and the hook gets that JSON
//     text too: a body the hook could not serialise never reaches it;
//   - the hook's signal aborts whenever its run ends, however it ends
//     (RUN_ERROR, RUN_FINISHED of every outcome, the client gone, the
//     gateway closed), so that a process the hook started ends with it:
//     the pattern of the README's hook (execFile with the signal) leaves
//     no process behind;
//   - runs that call the hook are bounded per thread (one at a time: the
//     second gets 409 hxstate_thread_busy), per token (maxRunsPerToken:
//     429) and in all (maxRuns: 503), before the hook is called.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const t = require('./helpers');
const { mintToken } = require('..');

const DB = 'hx_gateway_runs';
let db;

before(async () => {
  db = await t.gatewayDatabase(DB);
});
after(async () => { await db.end(); });

const token = (key, scopes = ['read', 'run', 'resume']) => mintToken(t.SECRET, `sessions:${key}`, { scopes });
const bearer = (tok) => ({ authorization: `Bearer ${tok}`, 'content-type': 'application/json' });

function post(base, key, input, tok = token(key)) {
  return t.sse(`${base}/agents/sessions/${key}`, {
    method: 'POST', headers: bearer(tok),
    body: typeof input === 'string' ? input : JSON.stringify({ threadId: 't', runId: 'r', messages: [], ...input }),
  });
}

/** A value nested n arrays deep. */
function nested(n) {
  return `${'['.repeat(n)}${']'.repeat(n)}`;
}

async function insert(key, state = {}) {
  await db.query('INSERT INTO sessions (session_id, user_id, state) VALUES ($1, $2, $3)', [key, 'u', JSON.stringify(state)]);
}

test('the input is checked and serialised before the hook: too deep is 400, and the hook gets the JSON text', async () => {
  const calls = [];
  const g = await t.startGateway(DB, {
    appName: 'hx-gateway-runs-input',
    run: (input, target, options) => { calls.push({ input, target, options }); },
  });
  try {
    await insert('s-deep');
    // 10 kB that nest 5,000 arrays deep, as state, forwardedProps, a tool's parameters
    for (const at of ['state', 'forwardedProps']) {
      const body = `{"threadId": "t", "runId": "r", "messages": [], "${at}": ${nested(5000)}}`;
      const c = post(g.base, 's-deep', body);
      await t.ended(c);
      assert.equal(c.status, 400, `${at}: ${c.text}`);
      assert.match(JSON.parse(c.text).error, /nests deeper than 64/);
    }
    // at the bound, and a string that only looks deep: served
    for (const state of [JSON.parse(nested(62)), { s: '['.repeat(5000) }]) {
      const c = post(g.base, 's-deep', { state });
      await t.ended(c);
      assert.equal(c.status, 200, c.text);
      assert.equal(c.events().at(-1).type, 'RUN_FINISHED');
    }
    assert.equal(calls.length, 2, 'the hook was called for the two served, and only them');
    for (const call of calls) {
      assert.equal(typeof call.options.json, 'string');
      assert.deepEqual(JSON.parse(call.options.json), call.input);
      assert.ok(call.options.signal instanceof AbortSignal);
    }
    // deeper than maxInputDepth when it is set lower
    const low = await t.startGateway(DB, { appName: 'hx-gateway-runs-depth', maxInputDepth: 4, run: () => {} });
    try {
      const c = post(low.base, 's-deep', { state: { a: { b: { c: [1] } } } });
      await t.ended(c);
      assert.equal(c.status, 400);
      assert.match(JSON.parse(c.text).error, /nests deeper than 4/);
    } finally {
      await low.close();
    }
  } finally {
    await g.close();
  }
});

/**
 * A hook in the README's pattern: it starts a process with the run's
 * signal (which kills it when the signal aborts), hands it the input, and
 * settles as the test says: {children, signals} record what it started.
 */
function spawningHook(how) {
  const children = [];
  const signals = [];
  const run = (input, target, { signal, json }) => {
    signals.push(signal);
    const child = execFile(process.execPath, ['-e', 'process.stdin.resume(); setInterval(() => {}, 1000)'], { signal }, () => {});
    child.stdin.on('error', () => {});
    children.push(child);
    child.stdin.write(json);
    return how(input, target, signal);
  };
  return { run, children, signals };
}

const exited = (child) => t.waitFor(() => child.exitCode !== null || child.signalCode !== null, `process ${child.pid} to end`);

test('the hook\'s signal aborts whenever its run ends, and the process it started ends with it', async () => {
  const write = (key, ops) => db.query('UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2', [JSON.stringify(ops), key]);
  const hook = spawningHook(async (input, target, signal) => {
    const what = input.forwardedProps.what;
    if (what === 'fail') throw Object.assign(new Error('it failed after it started its process'), { expose: true });
    if (what === 'complete') {
      await write(target.key, [{ op: 'increment', path: '/n', by: 1 }]);
      return { ok: true };
    }
    if (what === 'interrupt') await write(target.key, [{ op: 'replace', path: '/__interrupt__', value: [{ id: 'i-1', value: 'ok?' }] }]);
    if (what === 'end') await db.query('DELETE FROM sessions WHERE session_id = $1', [target.key]);
    // the process goes on until the run ends
    await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    return undefined;
  });
  const g = await t.startGateway(DB, { appName: 'hx-gateway-runs-abort', run: hook.run });
  try {
    const cases = [
      ['fail', 'RUN_ERROR', 'error'],
      ['complete', 'RUN_FINISHED', 'completed'],
      ['interrupt', 'RUN_FINISHED', 'interrupt'],
      ['end', 'RUN_FINISHED', 'stream_end'],
    ];
    for (const [i, [what, last, reason]] of cases.entries()) {
      const key = `s-abort-${what}`;
      await insert(key, { n: 0 });
      const c = post(g.base, key, { forwardedProps: { what } });
      await t.ended(c);
      assert.equal(c.events().at(-1).type, last, `${what}: ${c.types()}`);
      await exited(hook.children[i]);
      assert.equal(hook.signals[i].aborted, true, what);
      assert.equal(hook.signals[i].reason, reason, what);
    }
  } finally {
    await g.close();
  }
  for (const child of hook.children) await exited(child);
});

test('one run at a time per thread (409), maxRunsPerToken per token (429), maxRuns in all (503)', async () => {
  const release = [];
  const calls = [];
  const run = (input, target, { signal }) => {
    calls.push(target.key);
    return new Promise((resolve) => {
      release.push(resolve);
      signal.addEventListener('abort', resolve, { once: true });
    });
  };
  const g = await t.startGateway(DB, { appName: 'hx-gateway-runs-bounds', run, maxRunsPerToken: 2, maxRuns: 3 });
  try {
    for (const k of ['b-1', 'b-2', 'b-3', 'b-4']) await insert(k);
    const first = post(g.base, 'b-1', {});
    await t.waitFor(() => calls.length === 1, 'the first run\'s hook');
    // a second run on the thread, with the same token and with another one
    for (const tok of [token('b-1'), mintToken(t.SECRET, 'sessions:b-1', { ttl: 120, scopes: ['read', 'run'] })]) {
      const c = post(g.base, 'b-1', {}, tok);
      await t.ended(c);
      assert.equal(c.status, 409, c.text);
      const body = JSON.parse(c.text);
      assert.equal(body.code, 'hxstate_thread_busy');
      assert.match(body.error, /a run of sessions:b-1 is in progress/);
    }
    // a reconnect to the run's stream (Last-Event-ID) calls no hook: served
    const again = t.sse(`${g.base}/agents/sessions/b-1`, {
      method: 'POST', headers: { ...bearer(token('b-1')), 'last-event-id': '1' },
      body: JSON.stringify({ threadId: 't', runId: 'r2', messages: [] }),
    });
    await t.waitFor(() => again.status !== null, 'the reconnect\'s status');
    assert.equal(again.status, 200);
    again.close();
    // one token for the whole table: two runs, then 429
    const all = mintToken(t.SECRET, { table: 'sessions', all: true }, { scopes: ['read', 'run'] });
    const a2 = post(g.base, 'b-2', {}, all);
    const a3 = post(g.base, 'b-3', {}, all);
    await t.waitFor(() => calls.length === 3, 'two runs of one token');
    const a4 = post(g.base, 'b-4', {}, all);
    await t.ended(a4);
    assert.equal(a4.status, 429, a4.text);
    assert.match(JSON.parse(a4.text).error, /runs of this token/);
    // three runs in all: another token's run gets 503
    const other = post(g.base, 'b-4', {});
    await t.ended(other);
    assert.equal(other.status, 503, other.text);
    assert.ok(other.headers['retry-after']);
    assert.equal(calls.length, 3, 'no hook was called for a refused run');
    // once a run ends, its thread and its token's place are free again
    first.close();
    await t.waitFor(() => g.gw.stats.runs === 2, 'the first run to end');
    const later = post(g.base, 'b-1', {});
    await t.waitFor(() => calls.length === 4 && later.status !== null, 'a run on the thread once the first has ended');
    assert.equal(later.status, 200);
    later.close();
    for (const r of release) r();
    for (const c of [a2, a3]) await t.ended(c);
  } finally {
    await g.close();
  }
});

test('gateway/README.md\'s run hook runs as written: its process gets the input, and dies with its run', async () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const doc = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
  const at = doc.indexOf('<!-- run-hook:');
  assert.ok(at > 0, 'the README marks its run hook');
  const code = /```js\n([\s\S]*?)```/.exec(doc.slice(at))[1];
  // a stand-in for the console script hxstate-agui (and only it: a hook
  // that runs python3 -m hxstate.langgraph.agui imports the extension's
  // hxstate.so in a built source tree): it reads its input, then
  // reports, fails, or waits until it is killed (its pid in a file)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hx-run-hook-'));
  const fake = path.join(dir, 'hxstate-agui');
  fs.writeFileSync(fake, `#!${process.execPath}
let text = '';
process.stdin.on('data', (c) => { text += c; });
process.stdin.on('end', () => {
  const input = JSON.parse(text);
  const what = input.forwardedProps.what;
  require('node:fs').writeFileSync(${JSON.stringify(dir)} + '/' + input.runId, String(process.pid));
  if (what === 'hang') { setInterval(() => {}, 1000); return; }
  if (what === 'fail') { console.log(JSON.stringify({ error: { message: 'no such tool', code: 'tool_missing', expose: true } })); return; }
  console.log(JSON.stringify({ args: process.argv.slice(2), messages: input.messages.length }));
});
`, { mode: 0o755 });
  process.env.PATH = `${dir}:${process.env.PATH}`;
  // eslint-disable-next-line no-new-func
  const run = new Function('require', 'process', `${code}\nreturn run;`)(require, process);
  const g = await t.startGateway(DB, { appName: 'hx-gateway-runs-readme', run });
  try {
    await insert('s-readme');
    const ok = post(g.base, 's-readme', { runId: 'r-ok', messages: [{ id: 'm', role: 'user', content: 'hi' }], forwardedProps: { what: 'report' } });
    await t.ended(ok);
    const done = ok.events().at(-1);
    assert.equal(done.type, 'RUN_FINISHED', ok.text);
    assert.deepEqual(done.result.output, { args: ['approval:builder', '--thread=s-readme'], messages: 1 });
    // a key that begins with a dash reaches the command as the thread, in one argument
    await insert('-s-dash');
    const dash = post(g.base, '-s-dash', { runId: 'r-dash', forwardedProps: { what: 'report' } });
    await t.ended(dash);
    assert.deepEqual(dash.events().at(-1).result?.output?.args, ['approval:builder', '--thread=-s-dash'], dash.text);
    const failed = post(g.base, 's-readme', { runId: 'r-fail', forwardedProps: { what: 'fail' } });
    await t.ended(failed);
    assert.deepEqual([failed.events().at(-1).type, failed.events().at(-1).code], ['RUN_ERROR', 'tool_missing']);
    // the client goes away: the process is killed
    const gone = post(g.base, 's-readme', { runId: 'r-hang', forwardedProps: { what: 'hang' } });
    await t.waitFor(() => fs.existsSync(path.join(dir, 'r-hang')), 'the process to read its input');
    const pid = Number(fs.readFileSync(path.join(dir, 'r-hang'), 'utf8'));
    gone.close();
    await t.waitFor(() => {
      try {
        process.kill(pid, 0);
        return false;
      } catch (err) {
        return err.code === 'ESRCH';
      }
    }, 'the process to be killed');
  } finally {
    await g.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
