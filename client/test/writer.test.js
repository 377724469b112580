'use strict';
// RunWriter against a real server: a run in its stream (fragments joined,
// each message in the row's state in the transaction of its END), batches
// that share commits, one run's failure kept to itself, connections lost
// before and during COMMIT (every event once), bounded memory, the abuse
// probe's inputs; and RunFollower, which joins in the middle of a message
// or resumes after a seq with a prelude that reopens what is open.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const path = require('node:path');
const { from, lastValueFrom, toArray } = require('rxjs');
const { verifyEvents } = require('@ag-ui/client');
const h = require('../../test/js/helpers');
const { RunWriter, RunFollower, HxHub } = require('..');

const DB = 'hx_client_writer';
let db;

before(async () => {
  db = await h.freshDatabase(DB);
  await db.query(`CREATE TABLE sessions (session_id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}')`);
  await db.query(`CREATE TRIGGER hx AFTER INSERT OR UPDATE OR DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id')`);
});
after(async () => { await db.end(); });

const pgc = { database: DB };
const events = async (stream) => (await db.query(`SELECT seq::int, type, xmin::text AS tx, event FROM hx_event WHERE stream = $1 ORDER BY seq`, [stream])).rows;
const row = async (key) => { await db.query('INSERT INTO sessions (session_id) VALUES ($1) ON CONFLICT DO NOTHING', [key]); };
const verify = (list) => lastValueFrom(from(list).pipe(verifyEvents(false), toArray()));
const asRun = (list) => [{ type: 'RUN_STARTED', threadId: 't', runId: 'r' }, ...list, { type: 'RUN_FINISHED', threadId: 't', runId: 'r' }];
const strip = (e) => { const o = { ...e }; delete o.metadata; delete o.timestamp; return o; };

test('a run in its stream: fragments joined, a message in the state in the transaction of its END, a token no commit of its own', async () => {
  await row('w1');
  const writer = new RunWriter({ pg: pgc, flushMs: 200 });
  const run = writer.open({ table: 'sessions', key: 'w1' }, { runId: 'r-w1' });
  const m = run.text({ messageId: 'm1' });
  const tokens = Array.from({ length: 40 }, (_, i) => `t${i} `);
  for (const tok of tokens) assert.equal(m.append(tok), true);
  await m.end();
  const tc = run.toolCall({ toolCallId: 'c1', toolCallName: 'f' });
  tc.append('{"a":');
  tc.append('1}');
  await tc.end();
  await run.toolResult({ messageId: 'r1', toolCallId: 'c1', content: [{ type: 'text', text: 'done' }] });
  await run.close();
  await writer.close();
  const log = await events('sessions:w1');
  const types = log.map((e) => e.type);
  assert.deepEqual(types, ['STATE_SNAPSHOT', 'CUSTOM', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END', 'STATE_DELTA',
    'TOOL_CALL_START', 'TOOL_CALL_ARGS', 'TOOL_CALL_END', 'STATE_DELTA', 'TOOL_CALL_RESULT', 'STATE_DELTA', 'CUSTOM']);
  assert.equal(log[3].event.delta, tokens.join(''), '40 tokens written within flushMs: one event, one commit');
  // the END and the message in the state: one transaction, the state's message is the streamed text
  const end = log.findIndex((e) => e.type === 'TEXT_MESSAGE_END');
  assert.equal(log[end].tx, log[end + 1].tx);
  assert.deepEqual(log[end + 1].event.delta, [{ op: 'add', path: '/messages', value: [{ id: 'm1', role: 'assistant', content: tokens.join('') }] }]);
  assert.equal(log[8].tx, log[9].tx);
  assert.deepEqual(strip(log[1].event), { type: 'CUSTOM', name: 'hxstate.run', value: { runId: 'r-w1', status: 'started' } });
  assert.deepEqual(log[12].event.value, { runId: 'r-w1', status: 'finished' });
  const { rows: [{ state }] } = await db.query(`SELECT state FROM sessions WHERE session_id = 'w1'`);
  assert.deepEqual(state.messages, [
    { id: 'm1', role: 'assistant', content: tokens.join('') },
    { id: 'c1', role: 'assistant', toolCalls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] },
    { id: 'r1', role: 'tool', toolCallId: 'c1', content: [{ type: 'text', text: 'done' }] },
  ]);
  await verify(asRun(log.slice(1).filter((e) => e.type !== 'STATE_DELTA').map((e) => e.event)));
  assert.ok(writer.stats.commits <= 6, `${writer.stats.commits} commits for 47 writes`);
});

test('runs due at once share a transaction; one run\'s failure is its own', async () => {
  const keys = Array.from({ length: 20 }, (_, i) => `s${i}`);
  for (const k of keys) await row(k);
  const writer = new RunWriter({ pg: pgc, flushMs: 100, connections: 1 });
  const failures = [];
  writer.on('error', (err) => failures.push(err));
  const runs = keys.map((k) => writer.open({ table: 'sessions', key: k }));
  const gone = writer.open({ table: 'sessions', key: 'no-such-row' });
  const handles = runs.map((r, i) => r.text({ messageId: `m${i}` }));
  const goneMsg = gone.text({ messageId: 'x' });
  goneMsg.append('lost '); // in the first transaction, with every run's start
  for (let round = 0; round < 5; round++) {
    handles.forEach((m, i) => m.append(`r${round}-${i} `));
    await new Promise((resolve) => setTimeout(resolve, 30));
  }
  const before = writer.stats.transactions;
  await Promise.all(handles.map((m) => m.end()));
  const shared = writer.stats.transactions - before;
  await assert.rejects(gone.flush(), (err) => err.code === 'P0002');
  assert.equal(gone.error.code, 'P0002');
  assert.throws(() => goneMsg.append('more'), (err) => err.code === 'P0002', 'a failed run refuses what comes after');
  assert.ok(failures.some((e) => e.code === 'P0002' && e.runId === gone.id), 'the writer tells of it');
  await Promise.all(runs.map((r) => r.close()));
  for (const [i, k] of keys.entries()) {
    const { rows: [{ state }] } = await db.query('SELECT state FROM sessions WHERE session_id = $1', [k]);
    assert.equal(state.messages[0].content, [0, 1, 2, 3, 4].map((r) => `r${r}-${i} `).join(''));
  }
  assert.ok(shared <= 3, `20 runs' ends in ${shared} transaction(s)`);
  assert.ok(writer.stats.transactions < 20 * 4, `${writer.stats.transactions} transactions for 20 runs of 8 batches each`);
  await writer.close();
});

/**
 * A TCP proxy to the server's Unix socket that, at the nth COMMIT a client
 * sends, drops the connection: before forwarding it (nothing committed)
 * or just after (committed, and the client never hears of it).
 */
function commitCutter(nth, when) {
  const socket = path.join(process.env.PGHOST, `.s.PGSQL.${process.env.PGPORT || 5432}`);
  let commits = 0;
  const server = net.createServer((client) => {
    const upstream = net.connect(socket);
    let started = false;
    let buf = Buffer.alloc(0);
    upstream.on('data', (d) => client.write(d));
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
    client.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        if (!started) {
          if (buf.length < 4) return;
          const n = buf.readInt32BE(0);
          if (buf.length < n) return;
          upstream.write(buf.subarray(0, n));
          buf = buf.subarray(n);
          started = true;
          continue;
        }
        if (buf.length < 5) return;
        const n = buf.readInt32BE(1) + 1;
        if (buf.length < n) return;
        const msg = buf.subarray(0, n);
        buf = buf.subarray(n);
        if (msg[0] === 0x51 && /^COMMIT\0/.test(msg.subarray(5).toString()) && ++commits === nth) {
          if (when === 'after') {
            upstream.write(msg);
            upstream.end(); // the server reads the COMMIT, then the end of the connection
            client.destroy();
          } else {
            upstream.destroy();
            client.destroy();
          }
          return;
        }
        upstream.write(msg);
      }
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

for (const when of ['before', 'after']) {
  test(`a connection lost ${when} COMMIT reached the server: every event once, the run goes on`, async () => {
    const key = `cut-${when}`;
    await row(key);
    for (const nth of [1, 2, 4]) {
      const proxy = await commitCutter(nth, when);
      const writer = new RunWriter({ pg: { host: '127.0.0.1', port: proxy.address().port, database: DB, user: process.env.PGUSER || 'postgres' }, flushMs: 5, connections: 1, reconnect: { min: 10, max: 50 } });
      writer.on('error', () => {});
      const run = writer.open({ table: 'sessions', key }, { runId: `r-${when}-${nth}` });
      const m = run.text({ messageId: `m-${when}-${nth}` });
      const parts = [];
      for (let i = 0; i < 6; i++) {
        const p = `p${i} `;
        parts.push(p);
        m.append(p);
        await run.flush();
      }
      await m.end();
      await run.close();
      if (when === 'after') assert.ok(writer.stats.inDoubt >= 1, 'a commit was in doubt');
      await writer.close();
      proxy.close();
      const log = (await events(`sessions:${key}`)).filter((e) => e.event.messageId === `m-${when}-${nth}` || (e.event.value && e.event.value.runId === `r-${when}-${nth}`));
      assert.equal(log.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.event.delta).join(''), parts.join(''), `nth ${nth}: the text once`);
      assert.equal(log.filter((e) => e.type === 'TEXT_MESSAGE_START').length, 1);
      assert.equal(log.filter((e) => e.type === 'TEXT_MESSAGE_END').length, 1);
      assert.equal(log.filter((e) => e.type === 'CUSTOM').length, 2, 'one start marker, one end');
      const { rows: [{ state }] } = await db.query('SELECT state FROM sessions WHERE session_id = $1', [key]);
      assert.equal(state.messages.filter((x) => x.id === `m-${when}-${nth}`).length, 1);
    }
  });
}

test('bounded: a run that holds past maxPendingBytes fails (HX_RUN_BACKLOG); past maxBatchBytes append says wait; maxRuns', async () => {
  await row('big');
  const writer = new RunWriter({ pg: { database: DB, host: '/nonexistent-socket-dir' }, flushMs: 10, maxBatchBytes: 1000, maxPendingBytes: 5000, maxRuns: 2, reconnect: { min: 50, max: 100 } });
  writer.on('error', () => {});
  const run = writer.open({ table: 'sessions', key: 'big' });
  const m = run.text({ messageId: 'm' });
  assert.equal(m.append('x'.repeat(500)), true);
  assert.equal(m.append('x'.repeat(600)), false, 'past maxBatchBytes: the producer is told to wait (run.drain())');
  assert.throws(() => { for (let i = 0; i < 20; i++) m.append('x'.repeat(500)); }, (err) => err.code === 'HX_RUN_BACKLOG');
  assert.equal(run.error.code, 'HX_RUN_BACKLOG');
  await assert.rejects(run.drain(), (err) => err.code === 'HX_RUN_BACKLOG');
  const a = writer.open({ table: 'sessions', key: 'big' });
  const b = writer.open({ table: 'sessions', key: 'big' });
  assert.throws(() => writer.open({ table: 'sessions', key: 'big' }), (err) => err.code === 'HX_TOO_MANY_RUNS');
  // the database out of reach: close() would wait for it, destroy() does not
  const flushes = [a.flush(), b.flush()];
  await writer.destroy();
  for (const p of flushes) await assert.rejects(p, (err) => err.code === 'HX_WRITER_CLOSED');
  assert.throws(() => writer.open({ table: 'sessions', key: 'big' }), /closed/);
});

test('a token costs the same however many runs are open: an append looks at its own run, not at every open one', async () => {
  const { Run } = require('../lib/agentrun');
  const writer = new RunWriter({ pg: { database: DB, host: '/nonexistent-socket-dir' }, flushMs: 600000, reconnect: { min: 50, max: 100 } });
  writer.on('error', () => {});
  const runs = [];
  for (let i = 0; i < 1000; i++) runs.push(writer.open({ table: 'sessions', key: `k-${i}` }, { marker: false }));
  const texts = runs.map((r, i) => r.text({ messageId: `m-${i}` }));
  const dueAt = Run.prototype.dueAt;
  let calls = 0;
  Run.prototype.dueAt = function counted(...args) { calls++; return dueAt.apply(this, args); };
  try {
    for (let i = 0; i < 1000; i++) texts[i % 10].append(`${i} `);
  } finally {
    Run.prototype.dueAt = dueAt;
  }
  // before: every append looked at all 1,000 runs (a million calls)
  assert.ok(calls <= 2000, `${calls} looks at a run for 1,000 appends to 10 of 1,000 open runs`);
  await writer.destroy();
});

test('abuse probe: every input a caller can give is checked before it costs a byte of the batch', async () => {
  await row('probe');
  const writer = new RunWriter({ pg: pgc, flushMs: 5 });
  writer.on('error', () => {});
  const bad = (fn, re, what) => assert.throws(fn, re, what);
  bad(() => writer.open(null), /target/);
  bad(() => writer.open({ table: 'sessions' }), /target.key/);
  bad(() => writer.open({ table: '', key: 'x' }), /target.table/);
  bad(() => writer.open({ table: 'sessions', key: 'a\u0000b' }), /NUL/);
  bad(() => writer.open({ table: 'sessions', key: 'x'.repeat(1025) }), /1024 bytes/);
  bad(() => writer.open({ stream: 'no-at' }), /begins with @/);
  bad(() => writer.open({ stream: '@x' }, { messages: '/messages' }), /log stream's state/);
  bad(() => writer.open({ table: 'sessions', key: 'probe' }, { messages: 'messages' }), /JSON pointer/);
  bad(() => writer.open({ table: 'sessions', key: 'probe' }, { runId: '\ud800' }), /lone surrogate/);
  bad(() => writer.open({ table: 'sessions', key: 'probe' }, { inTransaction: 'SELECT 1' }), /function/);
  const run = writer.open({ table: 'sessions', key: 'probe' });
  bad(() => run.text({}), /messageId/);
  bad(() => run.text({ messageId: 7 }), /messageId/);
  bad(() => run.text({ messageId: 'm', role: 'tool' }), /role/);
  bad(() => run.text({ messageId: 'm', name: '\udc00' }), /lone surrogate/);
  const m = run.text({ messageId: 'm' });
  bad(() => run.text({ messageId: 'm' }), /already open/, 'a second START of an open message');
  bad(() => m.append(42), /string/);
  bad(() => m.append('\u0000'), /NUL/);
  bad(() => m.append('a\udc00'), /lone surrogate/);
  m.append('half \ud83c'); // the first half of a pair, held back
  m.append('\udf25 whole');
  bad(() => run.toolCall({ toolCallId: 'c', toolCallName: 'f', parentMessageId: 'someone-elses' }), /no message of this run/);
  bad(() => run.toolCall({ toolCallId: 'c' }), /toolCallName/);
  bad(() => run.toolResult({ messageId: 'r', toolCallId: 'c', content: { not: 'a list' } }), /content/);
  bad(() => run.toolResult({ messageId: 'r', toolCallId: 'c', content: 'x', role: 'user' }), /role/);
  bad(() => run.custom('hx.stream_end'), /hxstate's own/);
  bad(() => run.custom('hxstate.run'), /hxstate's own/);
  const cyclic = {};
  cyclic.self = cyclic;
  bad(() => run.custom('c', cyclic), /not JSON/);
  bad(() => run.custom('c', 10n), /not JSON/);
  bad(() => run.custom('c', { s: 'a\u0000' }), /NUL/);
  bad(() => run.custom('c', { s: '\ud800' }), /lone surrogate/);
  bad(() => run.push({ type: 'TEXT_MESSAGE_END', messageId: 'nope' }), /not open/);
  bad(() => run.close({ status: 'whatever' }), /status/);
  await m.end();
  bad(() => m.append('late'), /has ended/);
  assert.equal(run.error, null, 'a refused input fails nothing');
  await run.close();
  bad(() => run.text({ messageId: 'n' }), /closed/);
  const { rows: [{ state }] } = await db.query(`SELECT state FROM sessions WHERE session_id = 'probe'`);
  assert.equal(state.messages[0].content, 'half 🌥 whole');
  // what the database refuses fails the run, not the writer
  const noTrigger = writer.open({ table: 'pg_class', key: 'x' });
  noTrigger.text({ messageId: 'x' });
  await assert.rejects(noTrigger.flush());
  await db.query('CREATE ROLE hx_writer_nobody LOGIN');
  const other = new RunWriter({ pg: { database: DB, user: 'hx_writer_nobody' }, flushMs: 5 });
  other.on('error', () => {});
  const denied = other.open({ table: 'sessions', key: 'probe' });
  await assert.rejects(denied.flush(), (err) => err.code === '42501');
  await other.close();
  await db.query('DROP ROLE hx_writer_nobody');
  await writer.close();
});

test('RunFollower: a follower that joins mid-message, or resumes after a seq, gets a prelude that reopens what is open; the whole is a run the verifier takes', async () => {
  await row('fol');
  const writer = new RunWriter({ pg: pgc, flushMs: 5 });
  const run = writer.open({ table: 'sessions', key: 'fol' }, { runId: 'r-fol' });
  run.startStep('s');
  const m = run.text({ messageId: 'fm' });
  m.append('one ');
  await run.flush();
  const hub = new HxHub({ pg: pgc, transport: 'listen' });
  await hub.start();
  const seen = [];
  const f = new RunFollower(hub, { table: 'sessions', key: 'fol' }, { pg: pgc });
  f.on('event', (e) => seen.push(e));
  await f.ready;
  const mid = (await events('sessions:fol')).slice(-1)[0].seq;
  m.append('two ');
  await run.flush();
  const seenAfter = [];
  const g = new RunFollower(hub, { table: 'sessions', key: 'fol' }, { after: mid }); // the log read on the hub's reader
  g.on('event', (e) => seenAfter.push(e));
  await g.ready;
  m.append('three');
  await m.end();
  await run.finishStep('s');
  await run.close();
  const last = (await events('sessions:fol')).slice(-1)[0].seq;
  await h.waitFor(() => f.seq === last && g.seq === last, 'both at the end');
  for (const list of [seen, seenAfter]) {
    const run2 = list.filter((e) => e.type !== 'STATE_SNAPSHOT' && e.type !== 'STATE_DELTA');
    await verify(asRun(run2));
    assert.equal(list.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.delta).join(''), 'one two three');
  }
  assert.deepEqual(seen.slice(0, 4).map((e) => e.type), ['STATE_SNAPSHOT', 'STEP_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT']);
  assert.equal(seen[3].delta, 'one ');
  assert.equal(seen[3].metadata.synthetic, true);
  assert.deepEqual(seenAfter.slice(0, 3).map((e) => [e.type, e.delta]), [['STEP_STARTED', undefined], ['TEXT_MESSAGE_START', undefined], ['TEXT_MESSAGE_CONTENT', 'one ']]);
  assert.equal(seenAfter[3].delta, 'two ', 'then the next fragment');
  await f.stop();
  await g.stop();
  await hub.stop();
  await writer.close();
});

test('HxHub.read: a read on the hub\'s reader connection (no connection of its own); a failed statement its own; none after stop', async () => {
  const hub = new HxHub({ pg: { ...pgc, application_name: 'hx-read-test' }, transport: 'listen' });
  const early = hub.read((query) => query('SELECT 41 + $1::int AS n', [1])); // before start: waits for the connection
  await hub.start();
  assert.deepEqual(await early, [{ n: 42 }]);
  const { rows: [{ n: before }] } = await db.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'hx-read-test'");
  const rows = await hub.read(async (query) => {
    const a = await query('SELECT $1::text AS s', ['x']);
    const b = await query("SELECT '{\"a\":[1]}'::jsonb AS j");
    return [...a, ...b];
  });
  assert.deepEqual(rows, [{ s: 'x' }, { j: { a: [1] } }]);
  await assert.rejects(hub.read((query) => query('SELECT 1/0')), (err) => err.code === '22012');
  assert.deepEqual(await hub.read((query) => query('SELECT 1 AS one')), [{ one: 1 }], 'the connection goes on after a statement error');
  const { rows: [{ n: after }] } = await db.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'hx-read-test'");
  assert.equal(after, before, 'no connection of its own');
  assert.throws(() => hub.read('SELECT 1'), TypeError);
  await hub.stop();
  await assert.rejects(hub.read((query) => query('SELECT 1')), /stopped/);
});
