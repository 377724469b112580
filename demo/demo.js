'use strict';
// The hxstate demo: one agent session, told as it happens.  A frontend
// patches the state, the user picks a project (then it is locked), the
// build starts, a step runs three tools in parallel whose writes compose,
// two tabs race to publish and cancel, and all the while a LISTEN client
// prints every AG-UI event it receives and finally shows that the state it
// rebuilt equals the row.  Run it with `bash demo/run`.
const fs = require('node:fs');
const path = require('node:path');
const pg = require('pg');
const { HxStream } = require('../client');
const { canonical } = require('../test/js/helpers');

const SESSION = 's-42';
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function say(text) {
  console.log(`\n${text}`);
}

function sql(text) {
  console.log(`  sql> ${text.replace(/\s+/g, ' ').trim()}`);
}

function brief(value, max = 90) {
  const s = JSON.stringify(value);
  return s.length > max ? `${s.slice(0, max - 3)}...` : s;
}

function describe(event) {
  switch (event.type) {
    case 'STATE_SNAPSHOT':
      return `snapshot ${brief(event.snapshot)}`;
    case 'STATE_DELTA':
      return event.delta.map((op) => `${op.op} ${op.path}${'value' in op ? ` ${brief(op.value, 50)}` : ''}`).join('; ');
    default:
      return `${event.name} ${brief(event.value)}`;
  }
}

// Run a statement that is meant to fail, and show the error a client gets
async function refused(client, text, params) {
  sql(text);
  try {
    await client.query(text, params);
    throw new Error('expected an error');
  } catch (err) {
    if (!err.code) throw err;
    console.log(`  ✗ ${err.code} ${err.message}`);
    if (err.detail) console.log(`    ${err.detail}`);
  }
}

async function run(client, text, params) {
  sql(text);
  return client.query(text, params);
}

async function main() {
  const db = new pg.Client();
  await db.connect();

  say('Setting up: CREATE EXTENSION hxstate, and a sessions table with its guards and stream');
  await db.query('CREATE EXTENSION IF NOT EXISTS hxstate');
  // the README's sessions table, with its guards and its stream
  await db.query('DROP TABLE IF EXISTS sessions');
  await db.query(fs.readFileSync(path.join(__dirname, '..', 'docs', 'sessions.sql'), 'utf8'));
  console.log('  (docs/sessions.sql, the table of the README\'s "Getting started")');

  say(`A browser's gateway follows stream sessions:${SESSION} (LISTEN, snapshot, then events in seq order)`);
  const viewer = new HxStream({ table: 'sessions', key: SESSION, pollInterval: 500 });
  viewer.on('event', (event) => {
    const what = event.metadata.synthetic ? 'initial snapshot' : event.type;
    console.log(`  ◀ live seq ${event.metadata.seq} ${what}: ${describe(event)}`);
  });
  viewer.on('error', (err) => console.log(`  viewer error: ${err.message}`));
  await viewer.start();
  const settle = () => sleep(150);

  say('The user opens a chat');
  await run(db, `INSERT INTO sessions (session_id, user_id, state)
                 VALUES ($1, 'u-7', '{"messages": [], "todos": []}')`, [SESSION]);
  await settle();

  say('The frontend sends an RFC 6902 patch (hx_patch: strict, all or nothing)');
  await run(db, `UPDATE sessions SET state = hx_patch(state, $1) WHERE session_id = $2`,
    [JSON.stringify([{ op: 'add', path: '/messages/-', value: { role: 'user', text: 'build me a site' } },
      { op: 'add', path: '/ui', value: { theme: 'dark' } }]), SESSION]);
  await settle();
  say('A bad patch is refused whole, with an error that names the operation and its pointer');
  await refused(db, `UPDATE sessions SET state = hx_patch(state, $1) WHERE session_id = $2`,
    [JSON.stringify([{ op: 'replace', path: '/ui/theme', value: 'light' },
      { op: 'remove', path: '/ui/font' }]), SESSION]);

  say('The user picks a project: project_id is written once, then locked');
  await run(db, `UPDATE sessions SET project_id = 'prj_8821' WHERE session_id = $1`, [SESSION]);
  await refused(db, `UPDATE sessions SET project_id = 'prj_0000' WHERE session_id = $1`, [SESSION]);

  say('The build starts: the phase moves only along the agent_session machine');
  await run(db, `UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'start_build')
                 WHERE session_id = $1`, [SESSION]);
  await refused(db, `UPDATE sessions SET phase = 'done' WHERE session_id = $1`, [SESSION]);

  say('A step runs three tools in parallel; the runtime holds the slot while they run');
  await run(db, `UPDATE sessions SET pending_tool = '{"id": "step_1", "tools": 3}' WHERE session_id = $1`, [SESSION]);
  await refused(db, `UPDATE sessions SET pending_tool = '{"id": "step_2"}' WHERE session_id = $1`, [SESSION]);
  const tools = [
    [{ op: 'append', path: '/todos', items: [{ id: 't1', text: 'scaffold the site', done: false }] },
      { op: 'increment', path: '/stats/tool_calls', by: 1 }],
    [{ op: 'append', path: '/todos', items: [{ id: 't2', text: 'write the copy', done: false }] },
      { op: 'increment', path: '/stats/tool_calls', by: 1 },
      { op: 'union', path: '/tags', items: ['web', 'landing'] }],
    [{ op: 'append', path: '/todos', items: [{ id: 't3', text: 'deploy', done: false }] },
      { op: 'increment', path: '/stats/tool_calls', by: 1 },
      { op: 'union', path: '/tags', items: ['web', 'deploy'] }],
  ];
  const workers = await Promise.all(tools.map(async () => {
    const c = new pg.Client();
    await c.connect();
    return c;
  }));
  console.log('  three connections, at once:');
  await Promise.all(tools.map((writes, i) => {
    console.log(`  tool ${i + 1}> UPDATE sessions SET state = hx_merge(state, '${JSON.stringify(writes)}')`);
    return workers[i].query('UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2',
      [JSON.stringify(writes), SESSION]);
  }));
  await Promise.all(workers.map((c) => c.end()));
  await run(db, `UPDATE sessions SET pending_tool = NULL WHERE session_id = $1`, [SESSION]);
  const { rows: [merged] } = await db.query('SELECT state FROM sessions WHERE session_id = $1', [SESSION]);
  console.log(`  todos: ${merged.state.todos.map((t) => t.id).join(', ')}; tool_calls: ${merged.state.stats.tool_calls}; tags: ${merged.state.tags.join(', ')}`);
  await settle();

  say('The build is done; two tabs race: one publishes, the other cancels');
  await run(db, `UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'todo_done_build')
                 WHERE session_id = $1`, [SESSION]);
  const tabA = new pg.Client();
  const tabB = new pg.Client();
  await tabA.connect();
  await tabB.connect();
  await tabA.query('BEGIN');
  console.log("  tab A> UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'publish')");
  await tabA.query(`UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'publish')
                    WHERE session_id = $1`, [SESSION]);
  console.log("  tab B> UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'cancel')  (waits for tab A)");
  const cancel = tabB.query(`UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'cancel')
                             WHERE session_id = $1`, [SESSION]).then(() => null, (err) => err);
  await sleep(200);
  await tabA.query('COMMIT');
  console.log('  tab A: committed');
  const err = await cancel;
  console.log(err ? `  tab B: ✗ ${err.code} ${err.message}` : '  tab B: committed (unexpected)');
  await tabA.end();
  await tabB.end();

  say('The viewer caught every change; its rebuilt state equals the row');
  const { rows: [row] } = await db.query(
    `SELECT s.phase, s.project_id, s.state, (SELECT max(seq) FROM hx_event WHERE stream = 'sessions:' || s.session_id) AS seq
       FROM sessions s WHERE session_id = $1`, [SESSION]);
  for (let i = 0; i < 40 && viewer.seq < Number(row.seq); i++) await sleep(100);
  const same = canonical(viewer.state) === canonical(row.state);
  console.log(`  row: phase ${row.phase}, project ${row.project_id}, last seq ${row.seq}`);
  console.log(`  viewer: seq ${viewer.seq}, state ${same ? 'equals' : 'DIFFERS FROM'} the row`);
  await viewer.stop();
  await db.end();
  if (!same || viewer.seq !== Number(row.seq) || !err) process.exitCode = 1;
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
