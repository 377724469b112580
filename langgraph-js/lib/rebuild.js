'use strict';
// A checkpoint's state, rebuilt from the rows of its chain: its nearest
// snapshot, then the deltas on the way to it, replayed by the saver
// (opened first, for an encrypting saver: sealing.js).

const { DataCorrupted } = require('./errors');
const { Replayer } = require('./delta');
const { openPart } = require('./sealing');
const { parse, isObject } = require('./storage');

/** The longest chain a rebuild walks by parents: ten times the Python saver's default max_chain (a cycle of planted parents ends there). */
const MAX_WALK = 100000;

/**
 * @typedef {{ id: string, parent?: string | null, part: string | null }} ChainRow
 * @typedef {[string, string]} Part (checkpoint id, its snapshot's or delta's JSON text)
 */

/**
 * The parts a checkpoint is rebuilt from, its snapshot's then its deltas
 * from the oldest, found among `rows` (the rows from its snapshot to it)
 * by following parents from it back to its snapshot; null when the rows
 * do not hold that whole way.
 * @param {ChainRow[]} rows
 * @param {string} cid
 * @param {string} baseId
 * @returns {Part[] | null}
 */
function walk(rows, cid, baseId) {
  const byId = new Map(rows.map((r) => [r.id, r]));
  /** @type {Part[]} */
  const parts = [];
  /** @type {string | null | undefined} */
  let at = cid;
  for (;;) {
    /** @type {ChainRow | undefined} */
    const r = at == null ? undefined : byId.get(at);
    if (r === undefined || r.part === null || parts.length >= rows.length) return null;
    parts.push([r.id, r.part]);
    if (at === baseId) return parts.reverse();
    at = r.parent;
  }
}

/**
 * A state from its snapshot's and its deltas' JSON text, replayed here.
 * @param {Part[]} parts
 * @param {import('./sealing').Sealer | null} sealer
 * @param {string} threadId
 * @param {string} ns
 * @returns {Record<string, any>}
 */
function rebuild(parts, sealer, threadId, ns) {
  if (!parts.length) return {};
  const opened = parts.map(([cid, text], i) =>
    openPart(sealer, [threadId, ns, cid], i === 0 ? 'snapshot' : 'delta', parse(text, i === 0 ? 'a stored snapshot' : 'a stored delta')),
  );
  const snapshot = opened[0];
  if (!isObject(snapshot)) {
    throw new DataCorrupted(`the snapshot of checkpoint ${parts[0][0]} of thread ${JSON.stringify(threadId)} is not an object`);
  }
  const r = new Replayer(snapshot);
  for (const ops of opened.slice(1)) r.apply(ops);
  return r.state;
}

/**
 * A checkpoint's state from the rows of its range, or from its parents
 * one by one when they do not hold its whole chain.
 * @param {import('./db').Queryable} client
 * @param {{ sql: import('./sql').Statements, sealer: import('./sealing').Sealer | null }} ctx
 * @param {string} threadId
 * @param {string} ns
 * @param {string} cid
 * @param {string} baseId
 * @param {ChainRow[]} rows
 */
async function rebuildFrom(client, ctx, threadId, ns, cid, baseId, rows) {
  let parts = walk(rows, cid, baseId);
  if (parts === null) {
    const found = (await client.query(ctx.sql.CHAIN_WALK_SQL, [threadId, ns, cid, MAX_WALK])).rows;
    if (!found.length || !found[0].is_snapshot || found.some((/** @type {any} */ r) => r.part === null)) {
      throw new DataCorrupted(
        `checkpoint ${cid} of thread ${JSON.stringify(threadId)} cannot be rebuilt: its chain lacks a snapshot`,
        { detail: 'A checkpoint on its way to its snapshot is missing.' },
      );
    }
    parts = found.map((/** @type {any} */ r) => /** @type {Part} */ ([r.id, r.part]));
  }
  return rebuild(parts, ctx.sealer, threadId, ns);
}

module.exports = { walk, rebuild, rebuildFrom };
