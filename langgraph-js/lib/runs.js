'use strict';
// Admission records (table `runs`), as the Python package's runs.py keeps
// them: a run made durable on its thread, with its input, before it is
// dispatched; finish() records how it ended (the first end only);
// admissions() lists those not ended, each with how many checkpoints its
// id is on (metadata.run_id): none means it was lost before its first.

const { NonDeterministicRetry, InvalidParameterValue, TypeNotAllowed, DataCorrupted } = require('./errors');
const { MAX_DEPTH } = require('./codec');
const { parse } = require('./storage');
const { checkId, checkKey, checkText } = require('./limits');
const { readKeyOrNull, kindOf } = require('./keys');
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
 * A run's input as the table holds it (any role with UPDATE on it may
 * have written it): JSON nested at most as deep as a value the saver
 * stores, or DataCorrupted.
 * @param {string} text
 * @returns {unknown}
 */
function storedInput(text) {
  const input = parse(text, "a run's stored input");
  /** @type {[unknown, number][]} */
  const todo = [[input, 0]];
  while (todo.length) {
    const [v, depth] = /** @type {[unknown, number]} */ (todo.pop());
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= MAX_DEPTH) throw new DataCorrupted(`a run's stored input nested deeper than ${MAX_DEPTH} levels`);
    for (const x of Object.values(v)) todo.push([x, depth + 1]);
  }
  return input;
}

/**
 * @param {any} r
 * @param {boolean} isNew
 * @returns {Admission}
 */
function admissionOf(r, isNew) {
  return {
    threadId: r.thread_id,
    runId: r.run_id,
    input: storedInput(r.input),
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
  const text = inputText(input);
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
 * @param {unknown} threadId
 * @param {unknown} runId
 * @param {unknown} outcome
 * @param {unknown} detail
 */
async function finish(db, sql, threadId, runId, outcome, detail) {
  const thread = checkKey('thread id', threadId);
  const run = checkId('run id', runId);
  if (typeof outcome !== 'string' || !OUTCOMES.has(outcome)) {
    const given = typeof outcome === 'string' ? JSON.stringify(outcome.slice(0, 40)) : kindOf(outcome);
    throw new InvalidParameterValue(`a run ends in one of ${[...OUTCOMES].join(', ')}, not ${given}`);
  }
  const text = detail === undefined || detail === null ? null : checkText("run's detail", detail);
  return (await db.query(sql.FINISH_SQL, [thread, run, outcome, text])).length > 0;
}

/**
 * A run's input as JSON text: a value JSON.stringify writes (no BigInt,
 * no cycle, not a function or a symbol), without a lone surrogate.
 * @param {unknown} input
 * @returns {string}
 */
function inputText(input) {
  /** @type {string | undefined} */
  let text;
  try {
    text = JSON.stringify(input ?? null);
  } catch (err) {
    throw new TypeNotAllowed(`a run's input is JSON: ${/** @type {Error} */ (err).message}`, { cause: err });
  }
  if (text === undefined) throw new TypeNotAllowed(`a run's input is JSON, not ${kindOf(input)}`);
  return text;
}

/**
 * @param {import('./db').Database} db
 * @param {import('./sql').Statements} sql
 * @param {unknown} threadId
 * @param {boolean} unfinished
 * @returns {Promise<Admission[]>}
 */
async function admissions(db, sql, threadId, unfinished) {
  let thread = null;
  if (threadId !== undefined && threadId !== null) {
    thread = readKeyOrNull('thread id', threadId);
    if (thread === null) return []; // longer than any thread id stored
  }
  return (await db.query(sql.ADMISSIONS_SQL, [thread, Boolean(unfinished), null])).map((r) => admissionOf(r, false));
}

module.exports = { OUTCOMES, admit, finish, admissions };
