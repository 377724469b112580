'use strict';
// A thread written by the Python HxSaver reads the same from the JS
// HxSaver, and the other way round: the script of cross/script.js
// (messages of every kind, pending writes with a reference, a packed
// value and an interrupt, a subgraph namespace, a refused second writer,
// a fork, snapshots between chains of deltas, keys in their order) is
// written once by each language; each thread is read by both, and every
// reading prints the same JSON text.  Then the rows: both writers chose
// snapshots and deltas, stored the run's input once, packed the big
// write, published the same events, and SQL's state_at reads each
// checkpoint the same; with encryption too.

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const path = require('node:path');
const { runPython, setupSchema, pool } = require('./helpers');
const { script } = require('./cross/script');
const driver = require('./cross/driver');

const SCHEMA = 'lgjs_cross';
const DRIVER = path.join(__dirname, 'cross', 'driver.py');

/**
 * @param {'write' | 'read'} command
 * @param {object} job
 */
async function py(command, job) {
  const out = await runPython(`import runpy, sys; sys.argv = ["driver.py", ${JSON.stringify(command)}]; runpy.run_path(${JSON.stringify(DRIVER)}, run_name="__main__")`, {
    input: JSON.stringify(job),
  });
  return JSON.parse(out);
}

/**
 * A reading as text, the thread's id made neutral (two threads compare).
 * @param {unknown} reading
 * @param {string} thread
 */
function text(reading, thread) {
  return JSON.stringify(reading).split(JSON.stringify(thread).slice(1, -1)).join('<thread>');
}

/**
 * @param {import('pg').Pool} p
 * @param {string} thread
 */
async function events(p, thread) {
  const { rows } = await p.query(
    `SELECT event->>'type' AS type, coalesce(event->'delta', event->'snapshot', event->'value') AS body
       FROM hx_event WHERE stream = $1 ORDER BY seq`,
    [`@${SCHEMA}:${thread}`],
  );
  return rows;
}

for (const sealed of [false, true]) {
  test(`a thread reads the same in both languages${sealed ? ', encrypted' : ''}`, { timeout: 120000 }, async (t) => {
    await setupSchema(SCHEMA);
    const p = pool();
    t.after(() => p.end());
    const s = script();
    const suffix = crypto.randomBytes(4).toString('hex');
    const key = sealed ? crypto.randomBytes(32).toString('base64') : undefined;
    const pyThread = `py-${suffix}`;
    const jsThread = `js-${suffix}`;
    const common = { schema: SCHEMA, key, namespaces: s.namespaces, forks: s.forks, steps: s.steps };
    const pyResults = await py('write', { ...common, thread: pyThread, options: { snapshot_min_bytes: 300, rebuild_factor: 1.5 } });
    const jsResults = await driver.write(p, { ...common, thread: jsThread, options: { snapshotMinBytes: 300, rebuildFactor: 1.5 } });
    await t.test('both writers refuse the same second writer, and only it', () => {
      assert.deepEqual(jsResults, pyResults);
      assert.deepEqual(
        pyResults.filter((/** @type {string} */ r) => r !== 'ok'),
        ['conflict 40001'],
      );
    });
    const readings = {
      pyByPy: await py('read', { ...common, thread: pyThread }),
      pyByJs: await driver.read(p, { ...common, thread: pyThread }),
      jsByPy: await py('read', { ...common, thread: jsThread }),
      jsByJs: await driver.read(p, { ...common, thread: jsThread }),
    };
    await t.test('Python writes, JavaScript reads: the same JSON text as Python reads', () => {
      assert.equal(text(readings.pyByJs, pyThread), text(readings.pyByPy, pyThread));
    });
    await t.test('JavaScript writes, Python reads: the same JSON text as JavaScript reads', () => {
      assert.equal(text(readings.jsByPy, jsThread), text(readings.jsByJs, jsThread));
    });
    await t.test('each writer stored what the other did', () => {
      assert.equal(text(readings.jsByJs, jsThread), text(readings.pyByPy, pyThread));
    });
    await t.test('what was read is what the script wrote', () => {
      const r = readings.pyByJs;
      const ids = s.ids;
      assert.deepEqual(
        r[''].list.map((/** @type {any} */ e) => e.config.checkpoint_id),
        [ids.c10, ids.c9, ids.c8, ids.c7, ids.c6, ids.c4, ids.c3, ids.c2, ids.c1],
      );
      assert.equal(r[''].head.config.checkpoint_id, ids.c10);
      assert.equal(r[''].list[2].parent, ids.c2, 'the fork continues c2');
      // keys in the order they were written
      assert.equal(
        JSON.stringify(r.forks[ids.c2].values.plan),
        '{"zeta":1,"alpha":{"zz":[1,2,{"y":"x","b":null}],"aa":true},"é":"ü","mid":1.5}',
      );
      // (the metadata is jsonb, for list()'s filter, in both languages: its keys in jsonb's order)
      assert.equal(JSON.stringify(r.forks[ids.c2].metadata.user), '{"a":"y","b":"x"}');
      // an older checkpoint asked for by id names itself as a fork's base
      assert.equal(r.forks[ids.c3].config.hx_fork_of, ids.c3);
      assert.equal(r[''].head.config.hx_fork_of, undefined);
      // its pending writes: the tool's message and the interrupt, in order
      assert.deepEqual(
        r.forks[ids.c3].writes.map((/** @type {any[]} */ w) => [w[0], w[1]]),
        [['approve-task', '__interrupt__'], ['tools-task', 'messages']],
      );
      assert.deepEqual(r.forks[ids.c3].writes[0][2], [{ id: 'i-1', value: { question: 'go?', order: { z: 1, a: 2 } } }]);
      assert.equal(r.forks[ids.c2].writes.find((/** @type {any[]} */ w) => w[1] === 'big')[2], 'y'.repeat(1200));
      const c1 = r[''].list[8];
      assert.equal(c1.writes[0][2][0].content, 'what is 2 + 3? é ✓ 🚀');
      const c3 = r.forks[ids.c3];
      assert.deepEqual(c3.values.messages[1].tool_calls, [{ name: 'add', args: { b: 3, a: 2 }, id: 'call-1', type: 'tool_call' }]);
      assert.deepEqual(
        r[''].list.find((/** @type {any} */ e) => e.config.checkpoint_id === ids.c7).values.messages.map((/** @type {any} */ m) => [m.type, m.id, m.content]),
        [['ai', 'a-1', ''], ['tool', 't-1', '5'], ['ai', 'a-2', 'it is five']],
      );
      assert.deepEqual(r['child:1'].head.values.inner, [1, 2, 3]);
      assert.deepEqual(r['child:1'].head.writes, [['inner-task', 'inner', [4]]]);
    });
    await t.test('both writers kept snapshots between chains of deltas, the input once, the big write packed', async () => {
      for (const thread of [pyThread, jsThread]) {
        const { rows } = await p.query(
          `SELECT count(*) FILTER (WHERE snapshot IS NOT NULL)::int AS snapshots,
                  count(*) FILTER (WHERE snapshot IS NULL AND delta IS NOT NULL)::int AS deltas,
                  (SELECT count(*)::int FROM ${SCHEMA}.writes w WHERE w.thread_id = $1 AND w.value::jsonb ->> '$hx' = $2) AS refs,
                  (SELECT count(*)::int FROM ${SCHEMA}.writes w WHERE w.thread_id = $1 AND w.packed IS NOT NULL) AS packed,
                  (SELECT count(*)::int FROM ${SCHEMA}.writes w WHERE w.thread_id = $1) AS writes,
                  (SELECT count(*)::int FROM ${SCHEMA}.checkpoints c WHERE c.thread_id = $1 AND c.delta::jsonb ->> '$hx' = 'sealed') AS sealed
             FROM ${SCHEMA}.checkpoints WHERE thread_id = $1 AND checkpoint_ns = ''`,
          [thread, sealed ? 'sealed' : 'state'],
        );
        const [row] = rows;
        assert.ok(row.snapshots >= 3, `${thread}: ${row.snapshots} snapshots`);
        assert.ok(row.deltas >= 3, `${thread}: ${row.deltas} deltas`);
        if (sealed) {
          assert.equal(row.refs, row.writes, `${thread}: every write sealed`);
          assert.equal(row.writes, 7);
          assert.ok(row.sealed >= 3, `${thread}: deltas sealed`);
        } else {
          assert.equal(row.refs, 1, `${thread}: the run's input stored once, as a reference`);
          assert.equal(row.packed, 1, `${thread}: the big write packed`);
        }
      }
    });
    await t.test('both writers chose the same checkpoints for snapshots, by the same rule', async () => {
      const { rows } = await p.query(
        `SELECT thread_id, string_agg(CASE WHEN snapshot IS NOT NULL THEN 'S' ELSE 'd' END, '' ORDER BY checkpoint_ns, checkpoint_id) AS kinds,
                string_agg(chain_len::text, ',' ORDER BY checkpoint_ns, checkpoint_id) AS chains
           FROM ${SCHEMA}.checkpoints WHERE thread_id = ANY($1) GROUP BY thread_id ORDER BY thread_id`,
        [[jsThread, pyThread]],
      );
      assert.equal(rows.length, 2);
      assert.equal(rows[0].kinds, rows[1].kinds);
      assert.equal(rows[0].chains, rows[1].chains);
    });
    if (!sealed) {
      await t.test("SQL's state_at and the threads' streams agree between the writers", async () => {
        const states = await p.query(
          `SELECT c.checkpoint_ns, c.checkpoint_id, ${SCHEMA}.state_at(c.thread_id, c.checkpoint_ns, c.checkpoint_id) AS state, c.thread_id
             FROM ${SCHEMA}.checkpoints c WHERE c.thread_id = ANY($1) ORDER BY 1, 2, 4`,
          [[pyThread, jsThread]],
        );
        for (let i = 0; i < states.rows.length; i += 2) {
          assert.deepEqual(states.rows[i].state, states.rows[i + 1].state, `state_at of ${states.rows[i].checkpoint_id}`);
        }
        assert.deepEqual(await events(p, jsThread), await events(p, pyThread));
        const heads = await p.query(`SELECT key, state FROM ${SCHEMA}.head_states($1)`, [[pyThread, jsThread]]);
        assert.deepEqual(heads.rows[1].state, heads.rows[0].state);
      });
    }
  });
}
