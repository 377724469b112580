'use strict';
// The runner's table of threads: which thread has a run, whose it is, and
// a stop asked of it.  So isRunning, stop and listThreads hold across
// processes, and a run whose process died is found and taken over.
//
//   thread_id    the CopilotKit thread (its log stream is STREAM_PREFIX || thread_id)
//   agent_id     the agent of its last run
//   run_id       the run under way (NULL: none)
//   owner        the runner instance that runs it (a uuid)
//   stop_requested
//   created_at, updated_at
//
// A runner instance holds, on a connection of its own, the session-level
// advisory lock (LOCK_CLASS, hashtext(owner)) for as long as it lives
// (owner.js).  A run's owner is alive while that lock is held: a process
// that dies (SIGKILL included) loses its connection, and the server frees
// the lock.  Claiming a thread (claim) locks its row (FOR UPDATE), and
// every batch a run commits first locks its row FOR SHARE and checks that
// the run is still its owner's (fence): a run that another process has
// taken over writes nothing more.

const { quoteIdent } = require('../ident');

const TABLE = 'hxstate_copilotkit_threads';
const STREAM_PREFIX = '@copilotkit:';
const LOCK_CLASS = 0x68786b63; // 'hxkc'
const STOP_CHANNEL = 'hxstate_copilotkit_stop';

function statements(schema) {
  const t = `${quoteIdent(schema)}.${quoteIdent(TABLE)}`;
  const alive = `NOT pg_catalog.pg_try_advisory_xact_lock(${LOCK_CLASS}, pg_catalog.hashtext(owner::text))`;
  return {
    table: t,
    setup: `CREATE TABLE IF NOT EXISTS ${t} (
      thread_id text COLLATE "C" PRIMARY KEY,
      agent_id text,
      run_id text,
      owner uuid,
      stop_requested boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
      updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
      CHECK ((run_id IS NULL) = (owner IS NULL)))`,
    insert: `INSERT INTO ${t} (thread_id, agent_id) VALUES ($1, $2) ON CONFLICT (thread_id) DO NOTHING`,
    // the thread's row, locked, with whether its run's owner is alive
    // (alive: the try of its lock failed; a free lock is taken for the
    // transaction only, and freed at its end)
    lock: `SELECT run_id, owner, stop_requested,
                  CASE WHEN run_id IS NULL THEN false ELSE ${alive} END AS alive
             FROM ${t} WHERE thread_id = $1 FOR UPDATE`,
    take: `UPDATE ${t} SET run_id = $2, owner = $3, agent_id = $4, stop_requested = false, updated_at = pg_catalog.now()
            WHERE thread_id = $1`,
    release: `UPDATE ${t} SET run_id = NULL, owner = NULL, stop_requested = false, updated_at = pg_catalog.now()
               WHERE thread_id = $1 AND run_id = $2 AND owner = $3`,
    fence: `SELECT 1 FROM ${t} WHERE thread_id = $1 AND run_id = $2 AND owner = $3 FOR SHARE`,
    status: `SELECT run_id, owner, stop_requested,
                    CASE WHEN run_id IS NULL THEN false ELSE ${alive} END AS alive
               FROM ${t} WHERE thread_id = $1`,
    requestStop: `UPDATE ${t} SET stop_requested = true WHERE thread_id = $1 AND run_id IS NOT NULL
                    AND ($2::text IS NULL OR run_id = $2) AND NOT stop_requested RETURNING run_id, owner`,
    stopAsked: `SELECT thread_id, run_id FROM ${t} WHERE owner = $1 AND stop_requested`,
    list: `SELECT thread_id, agent_id, run_id, created_at, updated_at FROM ${t}
            ORDER BY updated_at DESC, thread_id LIMIT $1`,
  };
}

module.exports = { statements, TABLE, STREAM_PREFIX, LOCK_CLASS, STOP_CHANNEL };
