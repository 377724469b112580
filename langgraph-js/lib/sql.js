'use strict';
// The SQL of one schema's saver, over the tables and functions that the
// Python package's setup() makes (the JS saver does not make them:
// schema.js checks they are there).  The statements that write depend on
// what the server has (hxstate's schema, hx_compress, lz4, whether
// publish() sends), asked once (server()).

const { quoteIdent, quoteLiteral } = require('./storage');

// how hx_compress compresses what the saver writes, as the Python saver
// does: deltas and metadata lz4, snapshots pglz (lz4: pglz where the
// server has no lz4)
const DELTA_COMPRESSION = 'lz4';
const SNAPSHOT_COMPRESSION = 'pglz';
const METADATA_COMPRESSION = 'lz4';

/** What ends a thread's log stream when the thread is deleted, as a deleted row's stream ends. */
const STREAM_END = { type: 'CUSTOM', name: 'hx.stream_end', value: { reason: 'deleted' } };

/**
 * @typedef {{ publishing: boolean, hx: string, compress: boolean, lz4: boolean }} Server
 */

/**
 * SQL of `expr` compressed in line by hx_compress with `method`; `expr`
 * itself on an hxstate without hx_compress.
 * @param {Server} server
 * @param {string} expr
 * @param {string} method
 */
function compressed(server, expr, method) {
  if (!server.compress) return expr;
  const m = method === 'lz4' && !server.lz4 ? 'pglz' : method;
  return `${server.hx}.hx_compress(${expr}, ${quoteLiteral(m)})`;
}

/**
 * The columns of a checkpoint `c` that read.js turns into a tuple, its
 * pending writes last.
 * @param {string} s the schema, quoted
 * @param {string} c
 */
function columns(s, c) {
  return `${c}.thread_id, ${c}.checkpoint_ns, ${c}.checkpoint_id, ${c}.parent_checkpoint_id,
       pg_catalog.encode(${c}.packed, 'base64') AS packed, ${c}.metadata::text AS metadata,
       ${c}.chain_bytes, ${c}.chain_len, ${c}.snapshot_bytes, ${c}.state_bytes, ${c}.base_id,
       (SELECT json_agg(json_build_array(w.task_id, w.channel, w.value, w.task_path, w.idx, pg_catalog.encode(w.packed, 'base64'))
                        ORDER BY w.task_path, w.task_id, w.idx)::text
          FROM ${s}.writes w
         WHERE w.thread_id = ${c}.thread_id AND w.checkpoint_ns = ${c}.checkpoint_ns
           AND w.checkpoint_id = ${c}.checkpoint_id) AS writes`;
}

class Statements {
  /** @param {string} schema */
  constructor(schema) {
    this.schema = schema;
    const s = (this.s = quoteIdent(schema));
    /** the advisory lock's first key: puts on one thread's namespace take turns */
    this.lockKey = `hxstate.langgraph:${schema}`;
    /** the first key of a thread's ownership lock: writes hold it shared, acquire and release exclusive */
    this.ownerLockKey = `hxstate.langgraph.owner:${schema}`;
    this.streamPrefix = `@${schema}:`;
    /** @type {Server | null} */
    this.server = null;

    // what setup() made: the saver's migrations, and its functions
    this.SCHEMA_SQL = `SELECT (SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
         WHERE e.extname = 'hxstate') AS hx,
       pg_catalog.to_regclass($1) IS NOT NULL AS migrations,
       ARRAY[pg_catalog.to_regprocedure($2) IS NOT NULL, pg_catalog.to_regprocedure($3) IS NOT NULL,
             pg_catalog.to_regprocedure($4) IS NOT NULL] AS functions`;
    this.MIGRATION_SQL = `SELECT coalesce(max(v), -1) AS v FROM ${s}.migrations`;
    // whether setup() made publish() call hx_stream_send, hxstate's
    // schema, whether it has hx_compress, and whether the server has lz4
    this.SERVER_SQL = `SELECT coalesce(pg_catalog.strpos(pg_catalog.pg_get_functiondef(pg_catalog.to_regprocedure($1)),
                                  'hx_stream_send') > 0, false) AS publishing,
       n.nspname AS hx,
       pg_catalog.to_regprocedure(pg_catalog.quote_ident(n.nspname) || '.hx_compress(anyelement,text)') IS NOT NULL AS compress,
       'lz4' = ANY ((SELECT enumvals FROM pg_catalog.pg_settings WHERE name = 'default_toast_compression')::text[]) AS lz4
  FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
 WHERE e.extname = 'hxstate'`;

    // a checkpoint ($3; the namespace's newest when NULL) and what its
    // state is rebuilt from, in one range scan: the rows from its snapshot
    // (base_id) to it, each with its part as JSON text, the checkpoint
    // itself last with its columns; only its own row when the saver has
    // its state ($4).  `superseded`: a newer checkpoint is in its
    // namespace (a run from it forks the thread).
    this.GET_SQL = `WITH h AS (
    SELECT c.checkpoint_id, c.base_id,
           CASE WHEN c.checkpoint_id = $4 OR c.base_id > c.checkpoint_id THEN c.checkpoint_id ELSE c.base_id END AS first,
           CASE WHEN $3::text IS NULL THEN false
                ELSE EXISTS (SELECT FROM ${s}.checkpoints n WHERE n.thread_id = c.thread_id
                              AND n.checkpoint_ns = c.checkpoint_ns AND n.checkpoint_id > c.checkpoint_id) END AS superseded
      FROM ${s}.checkpoints c
     WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND ($3::text IS NULL OR c.checkpoint_id = $3)
     ORDER BY c.checkpoint_id DESC LIMIT 1)
SELECT k.checkpoint_id AS id, k.parent_checkpoint_id AS parent,
       CASE WHEN k.checkpoint_id = $4 THEN NULL
            WHEN k.checkpoint_id = (SELECT h.base_id FROM h) THEN k.snapshot::text ELSE k.delta::text END AS part,
       CASE WHEN k.checkpoint_id = (SELECT h.checkpoint_id FROM h) THEN (SELECT h.superseded FROM h) END AS superseded,
       CASE WHEN k.checkpoint_id = (SELECT h.checkpoint_id FROM h)
            THEN (SELECT pg_catalog.row_to_json(r)::text FROM (SELECT ${columns(s, 'k')}) r) END AS row
  FROM ${s}.checkpoints k
 WHERE k.thread_id = $1 AND k.checkpoint_ns = $2
   AND k.checkpoint_id >= (SELECT h.first FROM h) AND k.checkpoint_id <= (SELECT h.checkpoint_id FROM h)
 ORDER BY k.checkpoint_id`;
    // the rows of a range for list(): each row's parent, its snapshot
    // when it has one, its delta
    this.RANGE_SQL = `SELECT k.checkpoint_id AS id, k.parent_checkpoint_id AS parent, k.snapshot::text AS snapshot,
       k.delta::text AS delta
  FROM ${s}.checkpoints k
 WHERE k.thread_id = $1 AND k.checkpoint_ns = $2 AND k.checkpoint_id >= $3 AND k.checkpoint_id <= $4
 ORDER BY k.checkpoint_id`;
    // the rows of a range, each with its snapshot when it has one (a
    // chain ends at its first snapshot), its delta otherwise
    this.CHAIN_SQL = `SELECT k.checkpoint_id AS id, k.parent_checkpoint_id AS parent,
       CASE WHEN k.snapshot IS NOT NULL THEN k.snapshot::text ELSE k.delta::text END AS part
  FROM ${s}.checkpoints k
 WHERE k.thread_id = $1 AND k.checkpoint_ns = $2 AND k.checkpoint_id >= least($3, $4) AND k.checkpoint_id <= $4
 ORDER BY k.checkpoint_id`;
    // a checkpoint's chain walked by its parents, when a range does not
    // hold it (a parent not older than its child): its snapshot first
    this.CHAIN_WALK_SQL = `WITH RECURSIVE w AS (
    SELECT c.checkpoint_id, c.parent_checkpoint_id, c.snapshot, c.delta, 1 AS depth
      FROM ${s}.checkpoints c
     WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = $3
    UNION ALL
    SELECT c.checkpoint_id, c.parent_checkpoint_id, c.snapshot, c.delta, w.depth + 1
      FROM ${s}.checkpoints c JOIN w ON c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = w.parent_checkpoint_id
     WHERE w.snapshot IS NULL AND w.depth < $4)
SELECT w.checkpoint_id AS id, CASE WHEN w.snapshot IS NOT NULL THEN w.snapshot::text ELSE w.delta::text END AS part,
       w.snapshot IS NOT NULL AS is_snapshot
  FROM w ORDER BY w.depth DESC`;
    // a page of list(): the checkpoints of a filter, newest first, after
    // the last row handed out ($1..$3), at most $4
    this.listSql = (/** @type {string[]} */ wheres) => `SELECT ${columns(s, 'c')} FROM ${s}.checkpoints c
 WHERE ($1::text IS NULL OR c.checkpoint_id < $1 OR (c.checkpoint_id = $1 AND (c.thread_id, c.checkpoint_ns) > ($2, $3)))
   ${wheres.map((w) => 'AND ' + w).join(' ')}
 ORDER BY c.checkpoint_id DESC, c.thread_id, c.checkpoint_ns LIMIT $4`;
    // a put's parent ($3): its bookkeeping and chain, the namespace's
    // newest checkpoint after it (none: the checkpoint extends the head),
    // a checkpoint that already continued it (another writer's), whether
    // it has interrupts, whether this checkpoint ($4) exists (a retry),
    // and the interrupts written at this checkpoint already
    this.PARENT_SQL = `SELECT pg_catalog.encode(p.packed, 'base64') AS packed, p.chain_bytes, p.chain_len, p.snapshot_bytes,
       p.state_bytes, p.base_id,
    (SELECT c.checkpoint_id FROM ${s}.checkpoints c
      WHERE c.thread_id = p.thread_id AND c.checkpoint_ns = p.checkpoint_ns
        AND c.checkpoint_id > p.checkpoint_id AND c.checkpoint_id <> $4
      ORDER BY c.checkpoint_id DESC LIMIT 1) AS newer,
    (SELECT c.checkpoint_id FROM ${s}.checkpoints c
      WHERE c.thread_id = p.thread_id AND c.checkpoint_ns = p.checkpoint_ns
        AND c.checkpoint_id > p.checkpoint_id AND c.checkpoint_id <> $4
        AND c.parent_checkpoint_id = p.checkpoint_id
      LIMIT 1) AS continued,
    EXISTS (SELECT FROM ${s}.writes w
             WHERE w.thread_id = p.thread_id AND w.checkpoint_ns = p.checkpoint_ns
               AND w.checkpoint_id = p.checkpoint_id AND w.channel = '__interrupt__') AS interrupted
  FROM ${s}.checkpoints p
 WHERE p.thread_id = $1 AND p.checkpoint_ns = $2 AND p.checkpoint_id = $3`;
    // whether checkpoint $3 exists (a retry), and the interrupts written
    // at it already (a task's writes can come before its checkpoint)
    this.EXISTS_SQL = `SELECT EXISTS (SELECT FROM ${s}.checkpoints
         WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3) AS exists,
       (SELECT jsonb_agg(w.value::jsonb ORDER BY w.task_path, w.task_id, w.idx) FROM ${s}.writes w
         WHERE w.thread_id = $1 AND w.checkpoint_ns = $2 AND w.checkpoint_id = $3
           AND w.channel = '__interrupt__')::text AS own`;
    // puts on one thread's namespace take turns (a lock in memory, not a
    // row lock, which would write WAL)
    this.LOCK_SQL =
      'SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1), pg_catalog.hashtext($2 || chr(1) || $3))';
    // a write's ownership: the thread's owner waits for the write's
    // transaction to end; the owner's token and epoch (none: no owner)
    this.OWNER_SQL = `SELECT pg_catalog.pg_advisory_xact_lock_shared(pg_catalog.hashtext($1), pg_catalog.hashtext($2)),
       (SELECT o.token FROM ${s}.owners o WHERE o.thread_id = $2) AS token,
       (SELECT o.epoch FROM ${s}.owners o WHERE o.thread_id = $2) AS epoch`;
    this.OWNER_LOCK_SQL = 'SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1), pg_catalog.hashtext($2))';
    this.ACQUIRE_SQL = `INSERT INTO ${s}.owners AS o (thread_id, epoch, token) VALUES ($1, 1, '1-' || $2)
ON CONFLICT (thread_id) DO UPDATE SET epoch = o.epoch + 1, token = (o.epoch + 1)::text || '-' || $2, acquired_at = now()
RETURNING o.token`;
    this.RELEASE_SQL = `DELETE FROM ${s}.owners WHERE thread_id = $1 AND token = $2 RETURNING epoch`;
    this.EPOCH_SQL = `SELECT epoch FROM ${s}.owners WHERE thread_id = $1`;
    this.PUT_SQL = `SELECT status, seq FROM ${s}.put_checkpoint($1, $2, $3, $4, $5, $6::jsonb, $7::json, $8::json, $9, $10, $11,
    $12, $13, $14, $15, $16, $17::jsonb, $18::jsonb, $19)`;
    // a task's writes in one statement: the indexes it stored, NULL for
    // another owner's thread
    this.FAST_WRITES_SQL = `SELECT ${s}.put_writes($1, $2, $3, $4, $5, $6::int[], $7::text[], $8::text[], $9::bytea[], $10) AS stored`;
    const cols = '(thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, value, packed)';
    const vals =
      'SELECT $1, $2, $3, $4, $5, t.idx, t.channel, t.value::json, t.packed ' +
      'FROM unnest($6::int[], $7::text[], $8::text[], $9::bytea[]) AS t(idx, channel, value, packed)';
    this.UPSERT_WRITES_SQL =
      `INSERT INTO ${s}.writes ${cols} ${vals} ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) ` +
      'DO UPDATE SET channel = EXCLUDED.channel, value = EXCLUDED.value, packed = EXCLUDED.packed, task_path = EXCLUDED.task_path';
    this.STORED_WRITES_SQL = `SELECT idx, channel, value::text AS value, packed FROM ${s}.writes
 WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3 AND task_id = $4 AND idx = ANY($5::int[])`;
    // the sends a checkpoint of LangGraph's format before v4 inherits:
    // its parent's writes to __pregel_tasks, in the order of writes
    this.SENDS_SQL = `SELECT task_id, idx, channel, value::text AS value, packed FROM ${s}.writes
 WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3 AND channel = '__pregel_tasks'
 ORDER BY task_path, task_id, idx`;
    this.INTERRUPTS_SQL = `SELECT (SELECT max(c.checkpoint_id) FROM ${s}.checkpoints c
          WHERE c.thread_id = $1 AND c.checkpoint_ns = '') = $2 AS head,
       (SELECT jsonb_agg(w.value::jsonb ORDER BY w.task_path, w.task_id, w.idx) FROM ${s}.writes w
         WHERE w.thread_id = $1 AND w.checkpoint_ns = '' AND w.checkpoint_id = $2
           AND w.channel = '__interrupt__')::text AS interrupts`;
    this.PUBLISH_SQL = `SELECT ${s}.publish(${s}.stream_name($1), $2::jsonb) AS seq`;
    // a thread's stream told its head after a change that is not a step,
    // or, when the thread has no checkpoint left and this change deleted
    // some ($2), that it ended
    this.REPUBLISH_SQL = `SELECT ${s}.publish(${s}.stream_name(h.key),
           CASE WHEN h.state IS NOT NULL
                THEN pg_catalog.jsonb_build_object('type', 'STATE_SNAPSHOT', 'snapshot', h.state)
                ELSE ${quoteLiteral(JSON.stringify(STREAM_END))}::jsonb END)
  FROM ${s}.head_states($1::text[]) h
 WHERE h.state IS NOT NULL OR h.key = ANY ($2::text[])`;
    this.DELETE_WRITES_SQL = `DELETE FROM ${s}.writes WHERE thread_id = $1`;
    this.DELETE_CHECKPOINTS_SQL = `WITH d AS (DELETE FROM ${s}.checkpoints WHERE thread_id = $1 RETURNING thread_id)
SELECT DISTINCT thread_id FROM d`;
    // admissions of runs (runs.js)
    const admission = `r.thread_id, r.run_id, r.input::text AS input, r.admitted_at, r.outcome, r.detail, r.finished_at,
       (SELECT count(*) FROM ${s}.checkpoints c WHERE c.thread_id = r.thread_id AND c.metadata ->> 'run_id' = r.run_id)::int AS checkpoints`;
    this.ADMIT_SQL = `WITH ins AS (INSERT INTO ${s}.runs (thread_id, run_id, input)
                  VALUES ($1, $2, $3::json) ON CONFLICT DO NOTHING RETURNING *)
SELECT true AS new, ${admission} FROM ins r
UNION ALL
SELECT false, ${admission} FROM ${s}.runs r
 WHERE r.thread_id = $1 AND r.run_id = $2 AND NOT EXISTS (SELECT FROM ins)`;
    this.FINISH_SQL = `UPDATE ${s}.runs SET outcome = $3, detail = $4, finished_at = now()
 WHERE thread_id = $1 AND run_id = $2 AND outcome IS NULL RETURNING run_id`;
    this.ADMISSIONS_SQL = `SELECT ${admission} FROM ${s}.runs r
 WHERE ($1::text IS NULL OR r.thread_id = $1) AND (NOT $2 OR r.outcome IS NULL) AND ($3::text IS NULL OR r.run_id = $3)
 ORDER BY r.admitted_at, r.thread_id, r.run_id`;
  }

  /**
   * The INSERT of a checkpoint (the slow put), compressed as the server allows.
   * @param {Server} server
   */
  insertSql(server) {
    const s = this.s;
    return `INSERT INTO ${s}.checkpoints
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, packed, metadata,
     delta, snapshot, chain_bytes, chain_len, snapshot_bytes, state_bytes, base_id, seq)
VALUES ($1, $2, $3, $4, $5,
        ${compressed(server, '$6::jsonb', METADATA_COMPRESSION)},
        ${compressed(server, '$7::json', DELTA_COMPRESSION)},
        ${compressed(server, '$8::json', SNAPSHOT_COMPRESSION)},
        $9, $10, $11, $12, $13, $14)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING`;
  }
}

module.exports = { Statements, STREAM_END, compressed };
