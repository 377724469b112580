'use strict';
// docs/langgraph.md's roles, as written ("Roles and the log"), with the
// JS saver: its role has a schema of its own (set up by the Python
// package as that role) and INSERT on the log confined by a policy to
// its own streams, and nothing else on the log.  The JS saver works with
// that alone (puts, writes with an interrupt, a fork, a delete, each
// published), a reader follows the thread through threads(), and no
// thread id takes the saver's events to another stream.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const pg = require('pg');
const { uuid6, emptyCheckpoint } = require('@langchain/langgraph-checkpoint');
const { HxSaver } = require('..');
const { TOP, runPython } = require('./helpers');

const DB = 'hxstate_js_roles';

function recipe() {
  const text = fs.readFileSync(path.join(TOP, 'docs', 'langgraph.md'), 'utf8');
  const found = [...text.matchAll(/<!-- langgraph-roles:[^>]*-->\n```sql\n([\s\S]*?)```/g)];
  assert.equal(found.length, 1);
  return found[0][1];
}

/** @param {Record<string, unknown>} values */
function checkpoint(values) {
  const versions = Object.fromEntries(Object.keys(values).map((k) => [k, 1]));
  return { ...emptyCheckpoint(), id: uuid6(-1), channel_values: values, channel_versions: versions };
}

test("the JS saver with the recipe's roles", { timeout: 120000 }, async (t) => {
  const admin = new pg.Client({ database: 'postgres' });
  await admin.connect();
  const drop = async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
    for (const r of ['lg_saver', 'lg_reader']) await admin.query(`DROP ROLE IF EXISTS ${r}`);
  };
  await drop();
  await admin.query(`CREATE DATABASE ${DB}`);
  const owner = new pg.Client({ database: DB });
  await owner.connect();
  await owner.query('CREATE EXTENSION hxstate');
  await owner.query(recipe());
  await owner.end();
  /** @type {pg.Pool[]} */
  const pools = [];
  t.after(async () => {
    await Promise.all(pools.map((x) => x.end()));
    await drop();
    await admin.end();
  });
  // the Python package sets the schema up, as the saver's role
  await runPython('from hxstate.langgraph import HxSaver\nwith HxSaver.from_conn_string("") as s: s.setup()', {
    env: { PGUSER: 'lg_saver', PGDATABASE: DB },
  });
  const pool = new pg.Pool({ database: DB, user: 'lg_saver', max: 2 });
  const reader = new pg.Pool({ database: DB, user: 'lg_reader', max: 1 });
  pools.push(pool, reader);
  // pg's Pool.end() resolves before its backends have gone, and the DROP
  // DATABASE ... WITH (FORCE) of the teardown may terminate one: its error
  // then, on a pool that has ended, is no failure of the test
  for (const x of pools) x.on('error', () => undefined);
  const saver = new HxSaver(pool);
  await saver.setup();
  const md = (/** @type {string} */ source) => ({ source, step: 0, parents: {} });
  const threads = ['roles-1', "x', '@other:t"];
  for (const thread of threads) {
    const c1 = await saver.put({ configurable: { thread_id: thread } }, checkpoint({ messages: [{ id: 'a' }] }), md('input'), { messages: 1 });
    await saver.putWrites(c1, [['__interrupt__', [{ id: 'i-1', value: 'ok?' }]]], 'approve');
    const c2 = await saver.put(c1, { ...checkpoint({ messages: [{ id: 'a' }, { id: 'b' }] }), channel_versions: { messages: 2 } }, md('loop'), { messages: 2 });
    await saver.put({ configurable: { ...c1.configurable, hx_fork_of: c1.configurable.checkpoint_id } }, { ...checkpoint({ messages: [{ id: 'c' }] }), channel_versions: { messages: 3 } }, md('loop'), { messages: 3 });
    const { rows } = await reader.query('SELECT stream, seq, state FROM langgraph.threads($1)', [[thread]]);
    assert.equal(rows[0].stream, `@langgraph:${thread}`);
    assert.deepEqual(rows[0].state, { messages: [{ id: 'c' }] });
    const events = await reader.query("SELECT event->>'type' AS type FROM hx_event WHERE stream = $1 ORDER BY seq", [`@langgraph:${thread}`]);
    assert.deepEqual(events.rows.map((r) => r.type), ['STATE_SNAPSHOT', 'STATE_DELTA', 'STATE_DELTA', 'STATE_SNAPSHOT']);
    assert.ok(c2);
    await saver.deleteThread(thread);
    const end = await reader.query("SELECT event->>'name' AS name FROM hx_event WHERE stream = $1 ORDER BY seq DESC LIMIT 1", [`@langgraph:${thread}`]);
    assert.equal(end.rows[0].name, 'hx.stream_end');
  }
  const other = await reader.query("SELECT count(*)::int AS n FROM hx_event WHERE NOT starts_with(stream, '@langgraph:')");
  assert.equal(other.rows[0].n, 0);
  await assert.rejects(pool.query('SELECT count(*) FROM hx_event'), { code: '42501' });
});
