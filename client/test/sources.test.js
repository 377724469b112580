'use strict';
// Sources whose snapshots come from a function: HxHub's sources option
// maps a name to a function (keys text[]) RETURNS TABLE (key text, stream
// text, seq bigint, state jsonb), and follow({table: name, key}) takes the
// stream's name and its snapshots from it (batched: one statement for many
// keys) while its events come from hx_event as for any stream.  Here the
// source is a table of threads of our own with no trigger, whose owner
// writes each change and its event to the thread's log stream
// (hx_stream_send, which notifies a hint too) in one transaction, as a
// library that keeps its own state would.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');
const { HxHub } = require('..');
const { Recorder } = require('./hub-helpers');

const DB = 'hx_client_sources';
const SOURCE = 'app."Thread Snapshots"'; // quoted, mixed case: quoted as configured
// keys the function is given as values, never as SQL
const KEYS = ['t-1', 't-2', "t-'3'; DROP TABLE app.threads; --", 't "4"', 'ü-5'];

let db;
before(async () => {
  db = await h.freshDatabase(DB);
  await db.query('SELECT hx_stream_publication()');
  await db.query(`CREATE SCHEMA app;
    CREATE TABLE app.threads (thread_id text PRIMARY KEY, state jsonb, seq bigint NOT NULL DEFAULT 0);
    CREATE FUNCTION ${SOURCE}(keys text[])
    RETURNS TABLE (key text, stream text, seq bigint, state jsonb)
    LANGUAGE sql STABLE AS $$
        SELECT t.thread_id, '@thread:' || t.thread_id, t.seq, t.state
          FROM app.threads t WHERE t.thread_id = ANY (keys)
    $$;`);
});
after(async () => { await db.end(); });

/** A thread written the way its owner writes: its event, and the state and seq, in one transaction. */
async function write(key, event) {
  await db.query('BEGIN');
  try {
    const sent = event.delta ? { type: 'STATE_DELTA', delta: event.delta } : { type: 'STATE_SNAPSHOT', snapshot: event.state };
    const { rows } = await db.query('SELECT hx_stream_send($1, $2)::int AS seq', [`@thread:${key}`, sent]);
    await db.query(
      `INSERT INTO app.threads AS t (thread_id, state, seq) VALUES ($1, $2, $3)
       ON CONFLICT (thread_id) DO UPDATE SET state = $2, seq = $3`, [key, event.state, rows[0].seq]);
    await db.query('COMMIT');
    return rows[0].seq;
  } catch (err) {
    await db.query('ROLLBACK');
    throw err;
  }
}

async function threadState(key) {
  const { rows } = await db.query('SELECT state, seq::int FROM app.threads WHERE thread_id = $1', [key]);
  return rows[0];
}

test('the sources option: a name with no schema, or three parts, is refused', () => {
  for (const bad of ['snapshots', 'a.b.c', 'app.', '.fn', 'app. fn', 'app."fn', 'app.""', 'app.fn()', 'app.fn; DROP']) {
    assert.throws(() => new HxHub({ sources: { threads: bad } }), /HxHub: options\.sources\.threads: not a schema-qualified function name/, bad);
  }
  assert.throws(() => new HxHub({ sources: { threads: 7 } }), /must be 'schema\.function'/);
  assert.doesNotThrow(() => new HxHub({ sources: { threads: SOURCE, other: 'App.Fn', x: '"a.b"."c""d"' } }));
});

for (const transport of ['wal', 'listen']) {
  test(`snapshots from a function, events from the log, over ${transport === 'wal' ? 'the WAL' : 'LISTEN'}`, async () => {
    const keys = KEYS.map((k) => `${transport}-${k}`);
    for (const key of keys) await write(key, { state: { n: 0, key } });
    await write(keys[0], { state: { n: 1, key: keys[0] }, delta: [{ op: 'replace', path: '/n', value: 1 }] });
    const hub = new HxHub({ pg: { database: DB }, transport, pollInterval: 0, sources: { threads: SOURCE } });
    await hub.start();
    try {
      assert.equal(hub.transport, transport);
      const rec = new Recorder();
      const subs = keys.map((key) => {
        const sub = hub.follow({ table: 'threads', key });
        rec.attach(sub, key);
        return sub;
      });
      const missing = hub.follow({ table: 'threads', key: `${transport}-no-such-thread` });
      await Promise.all(subs.map((s) => s.ready));
      await assert.rejects(missing.ready, /no stream for key/);
      // one statement for the names of all, one (or two) for their snapshots
      assert.equal(hub.stats.nameReads, 1);
      assert.ok(hub.stats.snapshotReads <= 2, `${hub.stats.snapshotReads} snapshot reads`);
      assert.deepStrictEqual(subs.map((s) => s.stream), keys.map((k) => `@thread:${k}`));
      assert.deepStrictEqual(subs.map((s) => s.seq), keys.map((k, i) => (i === 0 ? 2 : 1)));
      assert.deepStrictEqual(subs[0].state, { n: 1, key: keys[0] });

      // the owner writes; the WAL brings the inserts, LISTEN the hints
      for (let i = 2; i <= 6; i++) {
        for (const key of keys) {
          const before = (await threadState(key)).state;
          await write(key, { state: { ...before, n: before.n + 1 }, delta: [{ op: 'replace', path: '/n', value: before.n + 1 }] });
        }
      }
      for (const [i, key] of keys.entries()) {
        const t = await threadState(key);
        await h.waitFor(() => subs[i].seq === t.seq, `${key} at seq ${t.seq}`);
        assert.deepStrictEqual(subs[i].state, t.state);
      }
      assert.deepStrictEqual(rec.violations, []);
      assert.equal((await db.query('SELECT count(*)::int AS n FROM app.threads')).rows[0].n >= keys.length, true,
        'the keys stayed values');

      // a resume point the log no longer continues: a resync, from the function
      const key = keys[1];
      await db.query(`DELETE FROM hx_event WHERE stream = $1 AND seq <= 3`, [`@thread:${key}`]);
      const resumed = hub.follow({ table: 'threads', key }, { after: 1 });
      const resyncs = [];
      resumed.on('resync', (info) => resyncs.push(info));
      await resumed.ready;
      const t = await threadState(key);
      assert.deepStrictEqual(resyncs, [{ seq: t.seq, previousSeq: 1, state: t.state, reason: 'trimmed' }]);
      assert.equal(resumed.seq, t.seq);
    } finally {
      await hub.stop();
    }
  });
}
