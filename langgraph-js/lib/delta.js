'use strict';
// What changed between two states of a thread, as hx_merge ops, and
// their replay: the format of the Python package's delta.py, which a
// checkpoint's `delta` column holds.
//
// A thread's state is one JSON object, {channel: encoded value}.  A delta
// is an array of ops, each on one top-level channel (`path` "/<channel>",
// a JSON Pointer token):
//
//   add {path, value}       the channel's value is `value`
//   delete {path}           the channel went away
//   upsert {path, items}    in a list of objects with unique string ids:
//                           each item replaces the one of its id, or is appended
//   discard {path, keys}    removes the items of those ids
//   clear {path}            the list is emptied
//   append {path, items}    a list that is not of ids grew at its end
//   copy {from, path: "/<channel>/-"}
//                           appends the item at `from`, an object with an
//                           id in one of LangGraph's own channels ("/__...")
//
// The replay checks each op against that format: an op that is not one
// of them is DataCorrupted, never a TypeError or a change outside the
// state (a row is read as untrusted).

const { DataCorrupted } = require('./errors');
const { hasOwn, setOwn, isObject } = require('./storage');

/** @typedef {Record<string, any>} Op */
/** @typedef {Record<string, any>} State */

/** @param {string} channel */
function pointer(channel) {
  return '/' + channel.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** @param {string} token */
function unescapeToken(token) {
  return token.replace(/~1/g, '/').replace(/~0/g, '~');
}

/**
 * The channel an op's path names.
 * @param {string} path
 */
function channelOf(path) {
  return unescapeToken(path.slice(1).split('/')[0]);
}

/**
 * The items' ids, when every item is an object with a unique string id.
 * @param {unknown[]} items
 * @returns {string[] | null}
 */
function idsOf(items) {
  const ids = [];
  const seen = new Set();
  for (const it of items) {
    if (!isObject(it)) return null;
    const i = it.id;
    if (typeof i !== 'string' || seen.has(i)) return null;
    seen.add(i);
    ids.push(i);
  }
  return ids;
}

/**
 * Items with an id in LangGraph's own channels of a state (`__start__`
 * holds a run's input), by id, with their pointers: a new message that is
 * one of them is copied from there instead of stored again.
 * @param {State} state
 * @param {string} skip
 * @returns {Map<string, [string, unknown]>}
 */
function sourcesOf(state, skip) {
  /** @type {Map<string, [string, unknown]>} */
  const out = new Map();
  for (const [ch, v] of Object.entries(state)) {
    if (ch === skip || !ch.startsWith('__')) continue;
    /** @type {[string, unknown][]} */
    let lists = Array.isArray(v) ? [[pointer(ch), v]] : [];
    if (isObject(v)) lists = Object.entries(v).filter(([, x]) => Array.isArray(x)).map(([k, x]) => [pointer(ch) + pointer(k), x]);
    for (const [base, items] of lists) {
      /** @type {unknown[]} */ (items).forEach((it, i) => {
        if (isObject(it) && typeof it.id === 'string' && !out.has(it.id)) out.set(it.id, [`${base}/${i}`, it]);
      });
    }
  }
  return out;
}

/**
 * Equal as JSON text: the same values of the same types, an object's
 * keys in the same order.
 * @param {unknown} a
 * @param {unknown} b
 * @returns {boolean}
 */
function same(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]));
  }
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return (
    ka.length === kb.length &&
    ka.every((k, i) => k === kb[i] && same(/** @type {any} */ (a)[k], /** @type {any} */ (b)[k]))
  );
}

/**
 * Ops from list `old` to list `next`, or null when only a whole set says it.
 * @param {string} path
 * @param {unknown[]} old
 * @param {unknown[]} next
 * @param {Map<string, [string, unknown]> | null} sources
 * @returns {Op[] | null}
 */
function listOps(path, old, next, sources) {
  if (next.length === 0) return old.length === 0 ? [] : [{ op: 'clear', path }];
  const n = old.length;
  const oldIds = idsOf(old);
  const newIds = oldIds !== null ? idsOf(next) : null;
  if (oldIds === null || newIds === null) {
    if (next.length >= n && old.every((a, i) => same(a, next[i]))) {
      return next.length === n ? [] : [{ op: 'append', path, items: next.slice(n) }];
    }
    return null;
  }
  const newSet = new Set(newIds);
  const removed = oldIds.filter((i) => !newSet.has(i));
  const kept = oldIds.filter((i) => newSet.has(i));
  // upsert replaces kept items in place and appends the others in order:
  // the result has the kept ids first, in their old order
  if (!kept.every((id, k) => newIds[k] === id)) return null;
  const oldById = new Map(oldIds.map((id, k) => [id, old[k]]));
  const changed = next.slice(0, kept.length).filter((it, k) => !same(oldById.get(newIds[k]), it));
  /** @type {Op[]} */
  const ops = [];
  if (removed.length) ops.push({ op: 'discard', path, keys: removed });
  if (changed.length) ops.push({ op: 'upsert', path, items: changed });
  ops.push(...newItemOps(path, next.slice(kept.length), sources));
  return ops;
}

/**
 * Ops that add new items (with new ids) at the end of a list: each item
 * the parent state holds in LangGraph's own channels by a copy from
 * there, the others by upsert.
 * @param {string} path
 * @param {unknown[]} items
 * @param {Map<string, [string, unknown]> | null} sources
 * @returns {Op[]}
 */
function newItemOps(path, items, sources) {
  /** @type {Op[]} */
  const ops = [];
  /** @type {unknown[]} */
  let run = [];
  for (const it of items) {
    const src = sources && isObject(it) ? sources.get(it.id) : undefined;
    if (src !== undefined && same(src[1], it)) {
      if (run.length) ops.push({ op: 'upsert', path, items: run });
      run = [];
      ops.push({ op: 'copy', from: src[0], path: path + '/-' });
    } else {
      run.push(it);
    }
  }
  if (run.length) ops.push({ op: 'upsert', path, items: run });
  return ops;
}

/**
 * Ops that add `tail` at the end of the channel's list (the parent's list).
 * @param {string} channel
 * @param {unknown[]} tail
 * @param {{ keyed: boolean, sources: Map<string, [string, unknown]> | null }} options
 * @returns {Op[]}
 */
function appendedOps(channel, tail, { keyed, sources }) {
  if (!tail.length) return [];
  const path = pointer(channel);
  if (!keyed) return [{ op: 'append', path, items: tail }];
  return newItemOps(path, tail, sources);
}

/**
 * Ops that turn the channel's `old` value (`had`: it had one) into `next`.
 * @param {string} channel
 * @param {unknown} old
 * @param {unknown} next
 * @param {{ had: boolean, sources: Map<string, [string, unknown]> | null }} options
 * @returns {Op[]}
 */
function valueOps(channel, old, next, { had, sources }) {
  const path = pointer(channel);
  if (had) {
    if (old === next) return [];
    if (Array.isArray(old) && Array.isArray(next)) {
      const ops = listOps(path, old, next, sources);
      if (ops !== null) return ops;
    } else if (same(old, next)) {
      return [];
    }
  }
  return [{ op: 'add', path, value: next }];
}

const KINDS = new Set(['add', 'delete', 'upsert', 'discard', 'clear', 'append', 'copy']);

/**
 * @param {string} message
 * @returns {never}
 */
function corrupt(message) {
  throw new DataCorrupted(`a stored delta ${message}`, {
    detail: 'A delta is an array of the ops HxSaver writes; a role that can write the table may have planted it.',
  });
}

/**
 * The channel of op `op`, checked against the format; and for a copy its
 * source's pointer.
 * @param {unknown} op
 * @returns {string}
 */
function checkOp(op) {
  if (!isObject(op)) corrupt('holds an op that is not an object');
  const kind = op.op;
  if (typeof kind !== 'string' || !KINDS.has(kind)) corrupt(`holds an unknown op ${JSON.stringify(String(kind)).slice(0, 40)}`);
  const path = op.path;
  if (typeof path !== 'string' || !path.startsWith('/')) corrupt(`holds a ${kind} without a path`);
  const ch = channelOf(path);
  const want = pointer(ch) + (kind === 'copy' ? '/-' : '');
  if (path !== want) corrupt(`holds a ${kind} at ${JSON.stringify(path.slice(0, 80))}, not a channel's path`);
  if (kind === 'add' && !hasOwn(op, 'value')) corrupt('holds an add without a value');
  if ((kind === 'upsert' || kind === 'append') && !Array.isArray(op.items)) corrupt(`holds a ${kind} without items`);
  if (kind === 'discard' && !Array.isArray(op.keys)) corrupt('holds a discard without keys');
  if (kind === 'copy') {
    const from = op.from;
    if (typeof from !== 'string' || !from.startsWith('/__') || channelOf(from) === ch) {
      corrupt("holds a copy that is not from one of LangGraph's own channels");
    }
  }
  return ch;
}

/**
 * The value at a JSON Pointer of a state, own properties only; undefined
 * when the state does not hold it.
 * @param {State} state
 * @param {string} ptr
 * @returns {unknown}
 */
function resolve(state, ptr) {
  /** @type {any} */
  let at = state;
  for (const raw of ptr.slice(1).split('/')) {
    const t = unescapeToken(raw);
    if (Array.isArray(at)) {
      if (!/^(0|[1-9][0-9]{0,8})$/.test(t) || Number(t) >= at.length) return undefined;
      at = at[Number(t)];
    } else if (isObject(at) && hasOwn(at, t)) {
      at = at[t];
    } else {
      return undefined;
    }
  }
  return at;
}

/**
 * Deltas applied one after another to a state of its own, in place:
 * lists are changed where they are and each list's ids are indexed once,
 * so a long chain costs the state plus its ops.  `copy()` takes the state
 * as it is now (its lists copied, their items shared: no op changes an
 * item in place).
 */
class Replayer {
  /** @param {State} state */
  constructor(state) {
    /** @type {State} */
    this.state = state;
    /** @type {Map<string, Map<unknown, number>>} */
    this.indexes = new Map();
  }

  /** @returns {State} */
  copy() {
    /** @type {State} */
    const out = {};
    for (const [ch, v] of Object.entries(this.state)) setOwn(out, ch, Array.isArray(v) ? v.slice() : v);
    return out;
  }

  /** @param {unknown} ops */
  apply(ops) {
    if (!Array.isArray(ops)) corrupt('is not an array');
    for (const op of ops) this.applyOp(op, checkOp(op));
  }

  /**
   * @param {Op} op
   * @param {string} ch
   */
  applyOp(op, ch) {
    const state = this.state;
    const kind = op.op;
    if (kind === 'add') {
      // a list of its own: it is changed in place later
      setOwn(state, ch, Array.isArray(op.value) ? op.value.slice() : op.value);
      this.indexes.delete(ch);
      return;
    }
    if (kind === 'delete') {
      delete state[ch];
      this.indexes.delete(ch);
      return;
    }
    let cur = hasOwn(state, ch) ? state[ch] : undefined;
    if (!Array.isArray(cur)) {
      // a list op on what is not a list starts a list, as hx_merge does
      cur = [];
      setOwn(state, ch, cur);
      this.indexes.delete(ch);
    }
    if (kind === 'clear') {
      cur.length = 0;
      this.indexes.delete(ch);
      return;
    }
    if (kind === 'append') {
      for (const it of op.items) cur.push(it);
      this.indexes.delete(ch);
      return;
    }
    if (kind === 'discard') {
      const keys = new Set(op.keys);
      const kept = cur.filter((/** @type {unknown} */ it) => !(isObject(it) && keys.has(it.id)));
      cur.length = 0;
      for (const it of kept) cur.push(it);
      this.indexes.delete(ch);
      return;
    }
    let index = this.indexes.get(ch);
    if (index === undefined) {
      index = new Map();
      for (let k = cur.length - 1; k >= 0; k--) if (isObject(cur[k])) index.set(cur[k].id, k);
      this.indexes.set(ch, index);
    }
    if (kind === 'copy') {
      const it = resolve(state, op.from);
      if (!isObject(it) || typeof it.id !== 'string') corrupt(`copies ${JSON.stringify(op.from.slice(0, 80))}, which its state does not hold`);
      if (!index.has(it.id)) index.set(it.id, cur.length);
      cur.push(it);
      return;
    }
    for (const it of op.items) {
      const key = isObject(it) ? it.id : undefined;
      const k = key !== undefined ? index.get(key) : undefined;
      if (k === undefined) {
        if (key !== undefined) index.set(key, cur.length);
        cur.push(it);
      } else {
        cur[k] = it;
      }
    }
  }
}

/**
 * Apply deltas to a state of one's own, in place.
 * @param {State} state
 * @param {unknown[]} deltas
 */
function replay(state, deltas) {
  const r = new Replayer(state);
  for (const ops of deltas) r.apply(ops);
  return r.state;
}

/**
 * The RFC 6902 patch of `ops` applied to `before` (not changed), for the
 * thread's stream.
 * @param {Op[]} ops
 * @param {State} before
 * @returns {Op[]}
 */
function toPatch(ops, before) {
  /** @type {Op[]} */
  const patch = [];
  const r = new Replayer({});
  for (const [ch, v] of Object.entries(before)) setOwn(r.state, ch, Array.isArray(v) ? v.slice() : v);
  const state = r.state;
  for (const op of ops) {
    const ch = checkOp(op);
    const path = pointer(ch);
    const cur = hasOwn(state, ch) ? state[ch] : undefined;
    const listed = Array.isArray(cur);
    switch (op.op) {
      case 'add':
        patch.push({ op: hasOwn(state, ch) ? 'replace' : 'add', path, value: op.value });
        break;
      case 'delete':
        if (hasOwn(state, ch)) patch.push({ op: 'remove', path });
        break;
      case 'append':
        if (!listed) patch.push({ op: 'add', path, value: [] });
        for (const it of op.items) patch.push({ op: 'add', path: path + '/-', value: it });
        break;
      case 'copy':
        if (!listed) patch.push({ op: 'add', path, value: [] });
        patch.push({ op: 'add', path: path + '/-', value: resolve(state, op.from) });
        break;
      case 'clear':
        patch.push({ op: 'add', path, value: [] });
        break;
      case 'discard': {
        const keys = new Set(op.keys);
        const items = listed ? cur : [];
        for (let k = items.length - 1; k >= 0; k--) {
          if (isObject(items[k]) && keys.has(items[k].id)) patch.push({ op: 'remove', path: `${path}/${k}` });
        }
        break;
      }
      case 'upsert': {
        const items = listed ? cur : [];
        if (!listed) patch.push({ op: 'add', path, value: [] });
        const index = new Map();
        items.forEach((/** @type {unknown} */ it, /** @type {number} */ k) => {
          if (isObject(it) && !index.has(it.id)) index.set(it.id, k);
        });
        let n = items.length;
        for (const it of op.items) {
          const at = isObject(it) ? index.get(it.id) : undefined;
          if (at === undefined) {
            if (isObject(it)) index.set(it.id, n);
            n += 1;
            patch.push({ op: 'add', path: path + '/-', value: it });
          } else {
            patch.push({ op: 'replace', path: `${path}/${at}`, value: it });
          }
        }
        break;
      }
    }
    r.applyOp(op, ch);
  }
  return patch;
}

/**
 * The length of a value's JSON text as the saver writes it.
 * @param {unknown} j
 */
function size(j) {
  return JSON.stringify(j).length;
}

module.exports = {
  pointer,
  channelOf,
  idsOf,
  sourcesOf,
  same,
  listOps,
  appendedOps,
  valueOps,
  resolve,
  Replayer,
  replay,
  toPatch,
  size,
};
