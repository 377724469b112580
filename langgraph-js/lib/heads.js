'use strict';
// What the saver remembers of the last checkpoint it read or wrote on a
// thread's namespace (its head), so that the next put finds the parent's
// state without rebuilding it, and a list's items that did not change are
// not encoded again.  Every entry is keyed by checkpoint id, whose
// content never changes.

const { encode } = require('./codec');
const { idsOf } = require('./delta');

/**
 * A list channel's objects as put (or decoded), aligned with their
 * encoded items, and each object's own property values when it was put:
 * an item that is the same object with the same values is not encoded
 * again.
 * @typedef {{ objs: unknown[], fields: (unknown[] | null)[], encs: unknown[], ids: Set<string> | null }} Items
 */

/**
 * A checkpoint's state as the saver stored it, with its chain's sizes.
 * @typedef {{
 *   checkpointId: string,
 *   versions: Record<string, number | string>,
 *   state: Record<string, any>,
 *   objects: Map<string, Items>,
 *   chainBytes: number,
 *   chainLen: number,
 *   snapshotBytes: number,
 *   stateBytes: number,
 *   sizes: Map<string, number>,
 *   baseId: string,
 * }} Head
 */

class HeadCache {
  /** @param {number} size the threads' namespaces remembered, the last used */
  constructor(size) {
    this.size = size;
    /** @type {Map<string, Head>} */
    this.heads = new Map();
  }

  /**
   * @param {string} threadId
   * @param {string} ns
   * @returns {Head | undefined}
   */
  get(threadId, ns) {
    return this.heads.get(JSON.stringify([threadId, ns]));
  }

  /**
   * @param {string} threadId
   * @param {string} ns
   * @param {Head} head
   */
  remember(threadId, ns, head) {
    if (this.size <= 0) return;
    const key = JSON.stringify([threadId, ns]);
    this.heads.delete(key);
    this.heads.set(key, head);
    while (this.heads.size > this.size) this.heads.delete(/** @type {string} */ (this.heads.keys().next().value));
  }

  /** @param {string[]} [threadIds] all when not given */
  forget(threadIds) {
    if (threadIds === undefined) {
      this.heads.clear();
      return;
    }
    const drop = new Set(threadIds);
    for (const key of [...this.heads.keys()]) if (drop.has(JSON.parse(key)[0])) this.heads.delete(key);
  }
}

/**
 * An object's own property values, to tell later whether it changed in
 * place; null for a value that is not an object (immutable).
 * @param {unknown} x
 * @returns {unknown[] | null}
 */
function fieldsOf(x) {
  return typeof x === 'object' && x !== null && !Array.isArray(x) ? Object.values(x) : null;
}

/**
 * @param {unknown} x
 * @param {unknown[] | null} fields
 */
function unchangedItem(x, fields) {
  if (fields === null) return typeof x !== 'object' || x === null;
  const now = Object.values(/** @type {object} */ (x));
  return now.length === fields.length && now.every((v, i) => v === fields[i]);
}

/**
 * A channel's value encoded; for a list its Items, and `tail`, the
 * encoded items it added at the end of the parent's list when that is
 * all it did (for a list of ids, with new ids), else null.
 * @param {unknown} value
 * @param {unknown} old the parent's encoded value
 * @param {Items | undefined} oldItems
 * @returns {{ value: unknown, items: Items | null, tail: unknown[] | null }}
 */
function encodeChannel(value, old, oldItems) {
  if (!Array.isArray(value)) return { value: encode(value), items: null, tail: null };
  const n = oldItems !== undefined && Array.isArray(old) && old.length === oldItems.objs.length ? old.length : 0;
  /** @type {unknown[]} */
  const encs = [];
  let prefix = n > 0 && value.length >= n;
  for (let i = 0; i < value.length; i++) {
    const x = value[i];
    const items = /** @type {Items} */ (oldItems);
    if (i < n && x === items.objs[i] && typeof x === 'object' && x !== null && unchangedItem(x, items.fields[i])) {
      encs.push(items.encs[i]);
    } else {
      if (i < n) prefix = false;
      encs.push(encode(x));
    }
  }
  const objs = value.slice();
  const items = { objs, fields: objs.map(fieldsOf), encs, ids: idsSet(encs) };
  let tail = prefix ? encs.slice(n) : null;
  if (tail !== null && oldItems?.ids) {
    const fresh = idsOf(tail);
    if (fresh === null || fresh.some((id) => oldItems.ids?.has(id))) tail = tail.length ? null : tail;
  }
  return { value: encs, items, tail };
}

/** @param {unknown[]} encs */
function idsSet(encs) {
  const ids = idsOf(encs);
  return ids === null ? null : new Set(ids);
}

/**
 * A list value's Items, as a head read back keeps them.
 * @param {unknown[]} values
 * @param {unknown[]} encoded
 * @returns {Items}
 */
function itemsOf(values, encoded) {
  const objs = values.slice();
  return { objs, fields: objs.map(fieldsOf), encs: encoded.slice(), ids: idsSet(encoded) };
}

module.exports = { HeadCache, encodeChannel, itemsOf };
