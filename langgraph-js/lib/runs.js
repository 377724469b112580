'use strict';
// Admission records (table `runs`), as the Python package's runs.py keeps
// them: a run made durable on its thread, with its input, before it is
// dispatched; finish() records how it ended (the first end only);
// admissions() lists those not ended, each with how many checkpoints its
// id is on (metadata.run_id): none means it was lost before its first.

const { NonDeterministicRetry } = require('./errors');
const { checkId, checkKey } = require('./limits');
const { equalJson } = require('./equal');

/** How a run ends. */
const OUTCOMES = new Set(['success', 'interrupt', 'error', 'cancelled']);

/**
 * @typedef {{
 *   threadId: string, runId: string, input: unknown, admittedAt: Date, outcome: string | null,
 *   detail: string | null, finishedAt: Date | null, checkpoints: number, isNew: boolean,
 *   lostBeforeFirstCheckpoint: boolean,
 * }} Admission
 */

/**
 * @param {any} r
 * @param {boolean} isNew
 * @returns {Admission}
 */
function admissionOf(r, isNew) {
  return {
    threadId: r.thread_id,
    runId: r.run_id,
    input: JSON.parse(r.input),
    admittedAt: r.admitted_at,
    outcome: r.outcome,
    detail: r.detail,
    finishedAt: r.finished_at,
    checkpoints: Number(r.checkpoints),
    isNew,
    lostBeforeFirstCheckpoint: r.outcome === null && Number(r.checkpoints) === 0,
  };
}

/**
 * @param {import('./db').Database} db
 * @param {import('./sql').Statements} sql
 * @param {unknown} threadId
 * @param {unknown} runId
 * @param {unknown} input JSON
 * @returns {Promise<Admission>}
 */
async function admit(db, sql, threadId, runId, input) {
  const thread = checkKey('thread id', threadId);
  const run = checkId('run id', runId);
  const text = JSON.stringify(input ?? null);
  let rows = await db.query(sql.ADMIT_SQL, [thread, run, text]);
  if (!rows.length) {
    // another admitted it meanwhile: read it
    rows = (await db.query(sql.ADMISSIONS_SQL, [thread, false, run])).map((r) => ({ ...r, new: false }));
  }
  const found = admissionOf(rows[0], Boolean(rows[0].new));
  if (!found.isNew && !equalJson(found.input, JSON.parse(text))) {
    throw new NonDeterministicRetry(`run ${run} of thread ${JSON.stringify(thread)} was admitted before with another input`, {
      hint: "A run's id names one input: give a new run a new id.",
    });
  }
  return found;
}

/**
 * @param {import('./db').Database} db
 * @param {import('./sql').Statements} sql
 * @param {string} threadId
 * @param {string} runId
 * @param {string} outcome
 * @param {string | null} detail
 */
async function finish(db, sql, threadId, runId, outcome, detail) {
  if (!OUTCOMES.has(outcome)) throw new TypeError(`a run ends in one of ${[...OUTCOMES].join(', ')}, not ${JSON.stringify(outcome)}`);
  return (await db.query(sql.FINISH_SQL, [String(threadId), String(runId), outcome, detail])).length > 0;
}

/**
 * @param {import('./db').Database} db
 * @param {import('./sql').Statements} sql
 * @param {string | null} threadId
 * @param {boolean} unfinished
 * @returns {Promise<Admission[]>}
 */
async function admissions(db, sql, threadId, unfinished) {
  return (await db.query(sql.ADMISSIONS_SQL, [threadId, unfinished, null])).map((r) => admissionOf(r, false));
}

module.exports = { OUTCOMES, admit, finish, admissions };
