'use strict';
// RunWriter and RunFollower called with hostile arguments from application
// code: each gets a clear TypeError (or 'error' with its code) before it
// costs a byte of a batch, never an internal TypeError later, never a run
// that cannot be closed, never events dropped without a word.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');
const { RunWriter, RunFollower, HxHub } = require('..');

const DB = 'hx_client_probe7b';
let db;

before(async () => {
  db = await h.freshDatabase(DB);
  await db.query(`CREATE TABLE sessions (session_id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}')`);
  await db.query(`CREATE TRIGGER hx AFTER INSERT OR UPDATE OR DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id')`);
  await db.query("INSERT INTO sessions (session_id) VALUES ('w')");
});
after(async () => { await db.end(); });

const pgc = { database: DB };
const events = async (stream) => (await db.query('SELECT event FROM hx_event WHERE stream = $1 ORDER BY seq', [stream])).rows.map((r) => r.event);
const writerError = (message) => (err) => err instanceof TypeError && err.message.startsWith('RunWriter: ') && message.test(err.message);

test('run.push() refuses what its checks would, at once: not an object, a role AG-UI has not, a parent that is no message of the run', async () => {
  const writer = new RunWriter({ pg: pgc, flushMs: 5 });
  try {
    const run = writer.open({ table: 'sessions', key: 'w' }, { runId: 'push' });
    assert.throws(() => run.push(null), writerError(/an event is an object/));
    assert.throws(() => run.push('TEXT_MESSAGE_START'), writerError(/an event is an object/));
    assert.throws(() => run.push([{ type: 'STEP_STARTED', stepName: 's' }]), writerError(/an event is an object/));
    assert.throws(() => run.push({ type: 'TEXT_MESSAGE_START', messageId: 'b', role: 'banana' }), writerError(/role is one of/));
    assert.throws(() => run.push({ type: 'REASONING_MESSAGE_START', messageId: 'r', role: 'user' }), writerError(/role is 'reasoning'/));
    assert.throws(() => run.push({ type: 'TOOL_CALL_START', toolCallId: 'c', toolCallName: 'x', parentMessageId: 7 }), writerError(/parentMessageId is a string/));
    // a tool call whose parent the run never had: its END would have nowhere to go
    assert.throws(() => run.push({ type: 'TOOL_CALL_START', toolCallId: 'c', toolCallName: 'x', parentMessageId: 'nope' }), writerError(/no message of this run/));
    // nothing of them was taken: the run goes on and closes
    const m = run.text({ messageId: 'ok' });
    m.append('fine');
    await m.end();
    await run.close();
    const logged = await events('sessions:w');
    assert.deepEqual(logged.filter((e) => e.type !== 'CUSTOM' && !e.type.startsWith('STATE_')).map((e) => e.type), ['TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END']);
    assert.equal(logged[logged.length - 1].value.status, 'finished', 'the run\'s end marker');
  } finally {
    await writer.close();
  }
});

test('a run\'s resumeAt.open must be a constructs state, and a runId runs once at a time in a stream of one writer', async () => {
  const writer = new RunWriter({ pg: pgc, flushMs: 5 });
  try {
    for (const open of [{ open: [{}], bytes: 0 }, { open: [{ key: 'text\u0000m', kind: 'text', id: 'm' }], bytes: 0 },
      { open: [{ key: 'x', kind: 'toString', id: 'm', text: '', opener: { type: 'x' } }], bytes: 0 }, { open: [], bytes: 'none' }]) {
      assert.throws(() => writer.open({ table: 'sessions', key: 'w' }, { runId: 'resumed', resumeAt: { seq: 1, open } }),
        writerError(/resumeAt\.open is a constructs state/), JSON.stringify(open));
    }
    // at most constructs.MAX_OPEN open at once, whatever they hold
    const many = writer.open({ table: 'sessions', key: 'w' }, { runId: 'many', messages: null });
    for (let i = 0; i < 4096; i++) many.startStep(`s${i}`);
    assert.throws(() => many.startStep('one more'), (err) => err.code === 'HX_STATE_TOO_LARGE' && /more than 4096 constructs would be open \(constructs\.MAX_OPEN\)/.test(err.message));
    await many.close();
    const a = writer.open({ table: 'sessions', key: 'w' }, { runId: 'twice' });
    assert.throws(() => writer.open({ table: 'sessions', key: 'w' }, { runId: 'twice' }), writerError(/open already/));
    a.text({ messageId: 't1' }).append('a');
    await a.close();
    // once it has closed, the id may be given again (a process that resumes it)
    const again = writer.open({ table: 'sessions', key: 'w' }, { runId: 'twice', resumeAt: { seq: a.lastSeq, open: a.open } });
    await again.close();
  } finally {
    await writer.close();
  }
});

test('RunFollower: an event past maxBytes is dropped and \'error\' says so (HX_STATE_TOO_LARGE)', async () => {
  const writer = new RunWriter({ pg: pgc, flushMs: 5 });
  const hub = new HxHub({ pg: pgc, transport: 'listen' });
  hub.on('error', () => {});
  await hub.start();
  const f = new RunFollower(hub, { stream: '@p7-big' }, { maxBytes: 4096 });
  const errors = [];
  const seen = [];
  f.on('error', (err) => errors.push(err));
  f.on('event', (e) => seen.push(e));
  try {
    await f.ready;
    const run = writer.open({ stream: '@p7-big' }, { runId: 'big' });
    const m = run.text({ messageId: 'big' });
    m.append('x'.repeat(1000));
    await run.flush();
    m.append('y'.repeat(8000));
    await run.flush();
    await m.end();
    await run.close();
    await h.waitFor(() => seen.some((e) => e.type === 'CUSTOM' && e.value && e.value.status === 'finished'), 'the run\'s end');
    assert.equal(seen.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.delta).join(''), 'x'.repeat(1000), 'the fragment past maxBytes is not handed out');
    assert.equal(errors.length, 1, 'the follower says it dropped it');
    assert.equal(errors[0].code, 'HX_STATE_TOO_LARGE');
  } finally {
    await f.stop();
    await hub.stop();
    await writer.close();
  }
});

test('RunWriter: a flushMs past what a Node timer holds (2^31 - 1 ms, which Node fires after 1 ms) is refused', () => {
  assert.throws(() => new RunWriter({ pg: pgc, flushMs: 2 ** 31 }), writerError(/flushMs is at most 2147483647/));
});
