'use strict';
// What a thread's followers see: the graph's own channels and the head's
// pending interrupts, published to the thread's log stream
// (`@<schema>:<thread_id>`) in the put's own transaction.

const { publicJson } = require('./codec');
const { isObject, setOwn } = require('./storage');

const INTERRUPT = '__interrupt__';

/**
 * LangGraph's own channels (`__start__`, `branch:to:...`), which a
 * thread's followers do not see.
 * @param {string} channel
 */
function internal(channel) {
  return channel.startsWith('__') || channel.startsWith('branch:');
}

/**
 * The state a thread's followers see.
 * @param {Record<string, unknown>} state
 * @param {unknown[]} [interrupts]
 */
function publicState(state, interrupts) {
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const [k, v] of Object.entries(state)) if (!internal(k)) setOwn(out, k, v);
  if (interrupts && interrupts.length) out[INTERRUPT] = interrupts;
  return out;
}

/**
 * A stored __interrupt__ write as [{id, value}].
 * @param {unknown} encoded
 * @returns {unknown[]}
 */
function interruptItems(encoded) {
  const items = isObject(encoded) && encoded.$hx === 'tuple' && Array.isArray(encoded.items) ? encoded.items : [encoded];
  return items.filter(isObject).map(publicJson);
}

/**
 * The event that tells a thread's stream of a checkpoint: a STATE_DELTA
 * when it extends the stream's head, a STATE_SNAPSHOT otherwise (a root,
 * a fork); null when nothing its followers see changed.
 * @param {Record<string, any>[] | null} patch
 * @param {Record<string, unknown>} state
 * @param {{ extendsHead: boolean, hadInterrupts: boolean, interrupts: unknown[] }} options
 */
function checkpointEvent(patch, state, { extendsHead, hadInterrupts, interrupts }) {
  if (patch !== null && extendsHead) {
    /** @type {Record<string, any>[]} */
    const delta = hadInterrupts ? [{ op: 'remove', path: '/' + INTERRUPT }] : [];
    delta.push(...patch);
    if (interrupts.length) delta.push({ op: 'add', path: '/' + INTERRUPT, value: interrupts });
    return delta.length ? { type: 'STATE_DELTA', delta } : null;
  }
  return { type: 'STATE_SNAPSHOT', snapshot: publicState(state, interrupts) };
}

module.exports = { INTERRUPT, internal, publicState, interruptItems, checkpointEvent };
