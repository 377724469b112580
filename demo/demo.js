'use strict';
// The hxstate demo: one agent session, told as it happens.  A frontend
// patches the state, the user picks a project (then it is locked), the
// build starts, a step runs three tools in parallel whose writes compose,
// the next step stages its tools and one is retried (its items land once),
// two tabs race to publish and cancel, and all the while a live client
// follows the session through hxstate-gateway (server-sent events, as a
// browser would), prints every AG-UI event it receives and finally shows
// that the state it rebuilt equals the row.  The gateway also serves the
// live view, whose URL the demo prints.  Run it with `bash demo/run`.
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const pg = require('pg');
const { applyEvent } = require('hxstate-client');
const { createGateway, mintToken } = require('hxstate-gateway');
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

/** The gateway on HX_DEMO_PORT (default 8080; any free port if that one is taken). */
async function startGateway() {
  const secret = crypto.randomBytes(32).toString('hex');
  const gateway = createGateway({ tables: ['sessions'], secret, log: () => {} });
  await gateway.ready;
  const server = http.createServer(gateway.handler);
  const listen = (port) => new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  await listen(Number(process.env.HX_DEMO_PORT || 8080)).catch(() => listen(0));
  const base = `http://localhost:${server.address().port}`;
  const close = async () => {
    server.close();
    await gateway.close();
    server.closeAllConnections();
  };
  return { gateway, base, secret, close };
}

/**
 * A live client of the gateway, as a browser's EventSource is: GET the
 * stream, apply each event (a snapshot replaces, a delta patches).
 */
function followOverSse(url, onEvent) {
  const viewer = { state: null, seq: 0, events: 0 };
  viewer.req = http.get(url, (res) => {
    let buf = '';
    res.setEncoding('utf8');
    res.on('data', (chunk) => {
      buf += chunk;
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        const data = block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
        buf = buf.slice(i + 2);
        if (!data) continue; // the retry field, or a heartbeat comment
        // the stream's own events carry their seq as the SSE id; the run's
        // (RUN_STARTED, RUN_FINISHED) and the conversation (MESSAGES_SNAPSHOT) do not
        if (!block.split('\n').some((l) => l.startsWith('id: '))) continue;
        const event = JSON.parse(data);
        viewer.state = applyEvent(viewer.state, event);
        viewer.seq = event.metadata.seq;
        viewer.events++;
        onEvent(event);
      }
    });
  });
  viewer.req.on('error', () => {});
  viewer.stop = () => viewer.req.destroy();
  return viewer;
}

async function main() {
  const db = new pg.Client();
  await db.connect();

  say('Setting up: CREATE EXTENSION hxstate, and a sessions table with its guards and stream');
  await db.query('CREATE EXTENSION IF NOT EXISTS hxstate');
  // the README's sessions table, with its guards and its stream
  await db.query('DROP TABLE IF EXISTS sessions');
  await db.query(fs.readFileSync(path.join(__dirname, '..', 'docs', 'sessions.sql'), 'utf8'));
  console.log('  (docs/sessions.sql, the table of the README\'s "A session")');

  await db.query('SELECT hx_stream_publication()'); // the gateway follows the log over the WAL

  const gw = await startGateway();
  const token = mintToken(gw.secret, `sessions:${SESSION}`, { ttl: 3600 });
  say(`hxstate-gateway serves the session (following over ${gw.gateway.hub.transport}); the live view, in a browser:`);
  console.log(`  ${gw.base}/view/sessions/${SESSION}?token=${token}`);
  say(`A live client follows sessions:${SESSION} through the gateway (server-sent events, as a browser does)`);
  const viewer = followOverSse(`${gw.base}/streams/sessions/${SESSION}?token=${token}`, (event) => {
    const what = event.metadata.synthetic ? 'current state' : event.type;
    console.log(`  ◀ live seq ${event.metadata.seq} ${what}: ${describe(event)}`);
  });
  for (let i = 0; i < 100 && viewer.events === 0; i++) await sleep(50); // the current state first
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

  say('The next step stages its tools; the runtime retries one, and the step still lands once');
  const step = [
    ['toolu_a', 1, [{ op: 'append', path: '/todos', items: [{ id: 't4', text: 'add a contact form', done: false }] },
      { op: 'increment', path: '/stats/tool_calls', by: 1 }]],
    ['toolu_b', 2, [{ op: 'append', path: '/todos', items: [{ id: 't5', text: 'check the links', done: false }] },
      { op: 'increment', path: '/stats/tool_calls', by: 1 }]],
  ];
  const stage = async ([call, ord, writes], note) => {
    const text = `SELECT hx_stage('sessions:${SESSION}', 'step_2', '${call}', '${JSON.stringify(writes)}', ${ord})`;
    console.log(`  ${call}> ${text}${note}`);
    const { rows: [r] } = await db.query('SELECT hx_stage($1, $2, $3, $4, $5) AS staged',
      [`sessions:${SESSION}`, 'step_2', call, JSON.stringify(writes), ord]);
    console.log(`    staged: ${r.staged}`);
  };
  await stage(step[1], '');
  await stage(step[0], '');
  await stage(step[1], '  (the runtime timed out and delivers it again)');
  console.log('  a retry that brings other writes is not a retry, and is refused:');
  await refused(db, `SELECT hx_stage('sessions:${SESSION}', 'step_2', 'toolu_b', '[{"op":"increment","path":"/stats/tool_calls","by":5}]', 2)`);
  const promote = `UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:${SESSION}', 'step_2')) WHERE session_id = $1`;
  await run(db, promote, [SESSION]);
  const seqOf = async () => (await db.query("SELECT seq FROM hx_stream_snapshot('sessions', $1)", [SESSION])).rows[0].seq;
  const before = await seqOf();
  console.log('  the runtime retries the promote too:');
  await run(db, promote, [SESSION]);
  console.log(`    the stream's seq stays at ${await seqOf()} (it was ${before}): the second promote applied nothing`);
  const { rows: [promoted] } = await db.query('SELECT state FROM sessions WHERE session_id = $1', [SESSION]);
  const ids = promoted.state.todos.map((t) => t.id);
  console.log(`  todos: ${ids.join(', ')} (t5 once); tool_calls: ${promoted.state.stats.tool_calls}`);
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
  if (process.stdin.isTTY) {
    say(`The live view stays up at ${gw.base}/view/sessions/${SESSION}?token=${token}`);
    console.log('  press Enter to stop');
    await new Promise((resolve) => process.stdin.once('data', resolve));
    process.stdin.pause();
  }
  viewer.stop();
  await gw.close();
  await db.end();
  if (!same || viewer.seq !== Number(row.seq) || !err) process.exitCode = 1;
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
