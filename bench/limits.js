'use strict';
// bench/limits.js: memory and cancellation, the part of bench/run that
// measures what an op list costs at its worst, in the throwaway cluster
// bench/run starts (PGHOST etc. set; run as root or the server's user, to
// read the backends' /proc/<pid>/status).
//
// Memory: each workload runs in a fresh backend, whose peak resident
// memory (VmHWM) less its resident memory before the query (VmRSS) is the
// peak the query added.  Cancellation: each workload runs with
// statement_timeout = 100 ms, and the time until its "canceling statement"
// error arrives is what a user waits; a landing within 200 ms (2x the
// timeout) is what hxstate aims for, and core's operators on the same data
// are measured beside it.  Figures only: nothing here is asserted.
const fs = require('node:fs');
const { Client } = require('pg');

const DATABASE = process.env.HX_BENCH_DB || 'hxstate_bench';

function kb(pid, field) {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
  return m ? Number(m[1]) : NaN;
}

function mb(bytes) {
  return `${(bytes / 1048576).toFixed(1)} MB`;
}

async function fresh() {
  const c = new Client({ database: DATABASE });
  await c.connect();
  const { rows } = await c.query('SELECT pg_backend_pid() AS pid');
  c.pid = rows[0].pid;
  return c;
}

/** Run sql in a fresh backend: its time, error and added peak memory. */
async function measure(setup, sql, timeout) {
  const c = await fresh();
  try {
    if (setup) await c.query(setup);
    if (timeout) await c.query(`SET statement_timeout = '${timeout}'`);
    const before = kb(c.pid, 'VmRSS');
    const t0 = process.hrtime.bigint();
    let error = null;
    let rows = null;
    try {
      rows = (await c.query(sql)).rows;
    } catch (err) {
      error = err;
    }
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    const peak = kb(c.pid, 'VmHWM');
    return { ms, error, rows, addedKb: peak - before };
  } finally {
    await c.end();
  }
}

function row(cells, widths) {
  return cells.map((c, i) => String(c).padEnd(widths[i])).join(' | ');
}

async function main() {
  const db = new Client({ database: DATABASE });
  await db.connect();
  console.log('building the documents: a 10 MB state whose list has 90,000 messages, and op lists');
  await db.query(`
    DROP TABLE IF EXISTS lim;
    CREATE TABLE lim AS
      SELECT jsonb_build_object(
               'messages', (SELECT jsonb_agg(jsonb_build_object('id', i, 'role', 'user', 'text', md5(i::text) || md5((i * 7)::text) || md5((i * 13)::text) || md5((i * 31)::text)))
                              FROM generate_series(1, 90000) i),
               'count', 0, 'meta', jsonb_build_object('status', 'idle'),
               'plan', (SELECT jsonb_object_agg('task' || i, repeat('p', 20)) FROM generate_series(1, 4000) i)) AS doc;
    -- 10^5 ops of every composing kind over the whole document
    DROP TABLE IF EXISTS lim_ops;
    CREATE TABLE lim_ops AS
      SELECT (SELECT jsonb_agg(CASE i % 6
                WHEN 0 THEN jsonb_build_object('op', 'append', 'path', '/log', 'items', jsonb_build_array(i))
                WHEN 1 THEN jsonb_build_object('op', 'increment', 'path', '/count', 'by', 1)
                WHEN 2 THEN jsonb_build_object('op', 'upsert', 'path', '/messages', 'items', jsonb_build_array(jsonb_build_object('id', i % 90000, 'text', 'edited')))
                WHEN 3 THEN jsonb_build_object('op', 'union', 'path', '/tags', 'items', jsonb_build_array(i % 1000))
                WHEN 4 THEN jsonb_build_object('op', 'replace', 'path', '/meta/status', 'value', 'step ' || i)
                ELSE jsonb_build_object('op', 'merge', 'path', '/meta', 'value', jsonb_build_object('k' || (i % 50), i)) END)
                FROM generate_series(1, 100000) i) AS ops,
             -- upserts into the big list, each after another kind of op
             (SELECT jsonb_agg(o ORDER BY i, k) FROM generate_series(1, 200) i,
                LATERAL (VALUES (1, jsonb_build_object('op', (ARRAY['increment', 'append', 'union'])[1 + i % 3],
                                                        'path', (ARRAY['/count', '/log', '/tags'])[1 + i % 3]) ||
                                     CASE i % 3 WHEN 0 THEN '{"by": 1}'::jsonb ELSE jsonb_build_object('items', jsonb_build_array(i)) END),
                                (2, jsonb_build_object('op', 'upsert', 'path', '/messages', 'items',
                                                       jsonb_build_array(jsonb_build_object('id', i * 17, 'text', 'upserted'))))) v(k, o)) AS pairs200,
             (SELECT jsonb_agg(o ORDER BY i, k) FROM generate_series(1, 1000) i,
                LATERAL (VALUES (1, jsonb_build_object('op', 'increment', 'path', '/count', 'by', 1)),
                                (2, jsonb_build_object('op', 'upsert', 'path', '/messages', 'items',
                                                       jsonb_build_array(jsonb_build_object('id', i * 17, 'text', 'upserted'))))) v(k, o)) AS pairs1000,
             (SELECT jsonb_agg(jsonb_build_object('op', 'copy', 'from', '', 'path', '/a' || i)) FROM generate_series(1, 40) i) AS doubling,
             '[{"op": "add", "path": "/plan/x", "value": 1}]'::jsonb ||
             (SELECT jsonb_agg(o) FROM generate_series(1, 20000) i,
                LATERAL (VALUES (jsonb_build_object('op', 'copy', 'from', '/plan', 'path', '/tmp')),
                                ('{"op": "remove", "path": "/tmp"}'::jsonb)) v(o)) AS copy_loop;
    -- the same document stored three ways, for detoasting
    DROP TABLE IF EXISTS lim_ext, lim_lz4, lim_pglz;
    CREATE TABLE lim_ext (d jsonb); ALTER TABLE lim_ext ALTER d SET STORAGE EXTERNAL;
    CREATE TABLE lim_lz4 (d jsonb COMPRESSION lz4);
    CREATE TABLE lim_pglz (d jsonb COMPRESSION pglz);
    INSERT INTO lim_ext SELECT doc || '{}' FROM lim;
    INSERT INTO lim_lz4 SELECT doc || '{}' FROM lim;
    INSERT INTO lim_pglz SELECT doc || '{}' FROM lim;
    DROP TABLE IF EXISTS lim_mod;
    CREATE TABLE lim_mod (d jsonb); ALTER TABLE lim_mod ALTER d SET STORAGE EXTERNAL;
    INSERT INTO lim_mod SELECT jsonb_set(doc, '{messages,45000,text}', '"x"') FROM lim;
    ANALYZE;`);
  const { rows: [sizes] } = await db.query(`
    SELECT pg_column_size(doc) AS doc, (SELECT pg_column_size(ops) FROM lim_ops) AS ops,
           (SELECT pg_column_size(d) FROM lim_lz4) AS lz4, (SELECT pg_column_size(d) FROM lim_pglz) AS pglz
      FROM lim`);
  await db.end();
  console.log(`  state ${mb(sizes.doc)} in memory (lz4 ${mb(sizes.lz4)}, pglz ${mb(sizes.pglz)} stored); ` +
              `the 10^5-op list ${mb(sizes.ops)}`);

  console.log('\nMemory: peak resident memory a query adds to its backend (VmHWM after less VmRSS before)');
  const memCases = [
    ['10^5 ops of six kinds on the 10 MB state', 'SELECT pg_column_size(hx_merge(doc, ops)) AS out FROM lim, lim_ops'],
    ['200 (increment|append|union, upsert) pairs', 'SELECT pg_column_size(hx_merge(doc, pairs200)) AS out FROM lim, lim_ops'],
    ['1,000 (increment, upsert) pairs', 'SELECT pg_column_size(hx_merge(doc, pairs1000)) AS out FROM lim, lim_ops'],
    ['40 copies of the whole state (doubling)', 'SELECT pg_column_size(hx_patch(\'{"a": "x"}\', doubling)) AS out FROM lim_ops'],
    ['20,000 copies of an unpacked 100 kB member, each removed', 'SELECT pg_column_size(hx_merge(doc, copy_loop)) AS out FROM lim, lim_ops'],
  ];
  const widths = [52, 10, 12, 14, 28];
  console.log(row(['workload', 'time', 'added peak', 'result', 'outcome'], widths));
  console.log(widths.map((w) => '-'.repeat(w)).join('-+-'));
  for (const [what, sql] of memCases) {
    const r = await measure(null, sql, null);
    const out = r.rows ? mb(r.rows[0].out) : '-';
    console.log(row([what, `${(r.ms / 1000).toFixed(2)} s`, mb(r.addedKb * 1024), out,
      r.error ? `${r.error.code} ${r.error.message.slice(0, 20)}` : 'ok'], widths));
  }

  console.log('\nCancellation: statement_timeout = 100 ms; how long until the statement is cancelled');
  const cancelCases = [
    ['hx_merge: 20,000 copies of an unpacked 100 kB member', 'SELECT hx_merge(doc, copy_loop) IS NULL FROM lim, lim_ops'],
    ['hx_patch: the same', 'SELECT hx_patch(doc, copy_loop) IS NULL FROM lim, lim_ops'],
    ['hx_merge: 10^5 ops of six kinds', 'SELECT hx_merge(doc, ops) IS NULL FROM lim, lim_ops'],
    // both documents stored beforehand: making the second one in the query
    // (jsonb_set of 10 MB) would time core's code, which checks for no
    // interrupt, not hx_diff's
    ['hx_diff of two 10 MB states one message apart, index mode', `SELECT hx_diff(a.doc, b.d, 'index') IS NULL FROM lim a, lim_mod b`],
    ['  core: a = b on the same', 'SELECT a.doc = b.d FROM lim a, lim_mod b'],
    ['hx_diff of the stored state, uncompressed', 'SELECT hx_diff(d, d) IS NULL FROM lim_ext'],
    ['  core: d = d on the same', 'SELECT d = d FROM lim_ext'],
    ['hx_diff of the stored state, lz4', 'SELECT hx_diff(d, d) IS NULL FROM lim_lz4'],
    ['  core: d = d on the same', 'SELECT d = d FROM lim_lz4'],
    ['hx_diff of the stored state, pglz', 'SELECT hx_diff(d, d) IS NULL FROM lim_pglz'],
    ['  core: d = d on the same', 'SELECT d = d FROM lim_pglz'],
  ];
  const w2 = [52, 16, 10];
  console.log(row(['workload', 'cancelled after', 'within 2x'], w2));
  console.log(w2.map((w) => '-'.repeat(w)).join('-+-'));
  for (const [what, sql] of cancelCases) {
    const times = [];
    for (let i = 0; i < 3; i++) {
      const r = await measure(null, sql, '100ms');
      times.push(r.error && r.error.code === '57014' ? r.ms : NaN);
    }
    const worst = Math.max(...times);
    console.log(row([what, Number.isNaN(worst) ? 'finished first' : `${worst.toFixed(0)} ms (max of 3)`,
      Number.isNaN(worst) ? '-' : (worst <= 200 ? 'yes' : 'no')], w2));
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
