'use strict';
// The demo (demo/demo.js, which `bash demo/run` runs) tells what it shows
// truly: it runs to its end in a database of its own, its retried tool
// call stages nothing new and its items land once, the second promote
// applies nothing, and its live client, following through hxstate-gateway,
// ends with the row's state.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
const h = require('./helpers');

const DB = 'hx_demo_test';
let db;

before(async () => {
  db = await h.freshDatabase(DB);
});
after(async () => {
  await db.end();
});

test('the demo runs to its end, its retried tool lands once, its live client equals the row', async () => {
  const child = spawn(process.execPath, [path.join(__dirname, '..', '..', 'demo', 'demo.js')], {
    env: { ...process.env, PGDATABASE: DB, HX_DEMO_PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  // 'close', not 'exit': the output may still be in the pipes at 'exit'
  const code = await new Promise((resolve) => child.on('close', resolve));
  assert.equal(code, 0, out);

  // the live view's URL, on the gateway the demo started
  assert.match(out, /http:\/\/localhost:\d+\/view\/sessions\/s-42\?token=\S+/);
  // the retried call: staged once, the retry a no-op, other writes refused
  const staged = [...out.matchAll(/^ {4}staged: (true|false)$/gm)].map((m) => m[1]);
  assert.deepEqual(staged, ['true', 'true', 'false']);
  assert.match(out, /✗ XH201 call "toolu_b" of step "step_2"/);
  assert.match(out, /the stream's seq stays at (\d+) \(it was \1\)/);

  // the row: every todo once, five tool calls counted, in ord order after the parallel step's
  const state = await h.rowState(db, 'sessions', 's-42');
  const ids = state.todos.map((t) => t.id);
  assert.equal(new Set(ids).size, ids.length, `each todo once: ${ids}`);
  assert.deepEqual(ids.slice(3), ['t4', 't5']);
  assert.equal(state.stats.tool_calls, 5);
  const { rows: [row] } = await db.query("SELECT phase, seq FROM sessions, hx_stream_snapshot('sessions', 's-42') WHERE session_id = 's-42'");
  assert.equal(row.phase, 'done');
  assert.match(out, new RegExp(`viewer: seq ${row.seq}, state equals the row`));
});
