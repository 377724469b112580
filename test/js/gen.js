'use strict';
// Seeded random JSON for the property tests: documents with unicode keys,
// "~" and "/" in keys, empty containers, numbers that survive the trip
// through jsonb and JavaScript exactly, and mutations of a document
// (changed leaves, new and removed members, arrays that grow, shrink and
// reorder, type changes, root changes).
const { rng } = require('./helpers');

const KEYS = ['a', 'b', 'id', 'name', 'items', '', '~', '/', 'a/b', 'm~n', '~1', '~0', '0', '-',
  'ключ', '键', 'é', 'emoji😀', 'with space', 'quote"d', 'back\\slash', 'tab\t', 'x'.repeat(40)];
const STRINGS = ['', 'a', 'hello', 'Ünïcödé', '日本語', '😀🎉', 'line\nbreak', '"q"', '~/~1', 'null', '0', ' '];

function scalar(r) {
  switch (r.int(6)) {
    case 0: return null;
    case 1: return r.chance(0.5);
    case 2: return r.int(2001) - 1000;
    case 3: return (r.int(4001) - 2000) / 4; // quarters are exact in binary
    case 4: return r.pick(STRINGS);
    default: return r.pick(STRINGS) + r.int(100);
  }
}

function key(r) {
  return r.chance(0.7) ? r.pick(KEYS) : 'k' + r.int(30);
}

function value(r, depth) {
  const roll = r.int(10);
  if (depth <= 0 || roll < 5) return scalar(r);
  if (roll < 7) {
    const n = r.chance(0.15) ? 0 : r.int(5);
    return Array.from({ length: n }, () => value(r, depth - 1));
  }
  const o = {};
  const n = r.chance(0.15) ? 0 : r.int(6);
  for (let i = 0; i < n; i++) o[key(r)] = value(r, depth - 1);
  return o;
}

function doc(r) {
  if (r.chance(0.05)) return value(r, 3); // any root, scalars included
  const o = {};
  const n = 1 + r.int(7);
  for (let i = 0; i < n; i++) o[key(r)] = value(r, 3);
  return o;
}

// A changed copy of v: each container is changed with probability p
function mutate(r, v, p) {
  if (Array.isArray(v)) {
    let a = v.map((x) => (r.chance(p) ? mutate(r, x, p) : x));
    if (r.chance(p)) {
      switch (r.int(5)) {
        case 0: a = a.concat(Array.from({ length: 1 + r.int(3) }, () => value(r, 2))); break; // grow
        case 1: a = a.slice(0, r.int(a.length + 1)); break; // shrink
        case 2: a = a.slice().reverse(); break; // reorder
        case 3: if (a.length) a[r.int(a.length)] = value(r, 2); break;
        default: a = a.slice(r.int(a.length + 1)); break; // drop from the front
      }
    }
    return a;
  }
  if (v !== null && typeof v === 'object') {
    const o = {};
    for (const [k, x] of Object.entries(v)) {
      if (r.chance(p / 2)) continue; // removed member
      o[k] = r.chance(p) ? mutate(r, x, p) : x;
    }
    if (r.chance(p)) o[key(r)] = value(r, 2); // new or replaced member
    return o;
  }
  return r.chance(0.5) ? scalar(r) : value(r, 2); // changed leaf or type
}

function pair(r) {
  const a = doc(r);
  if (r.chance(0.05)) return [a, doc(r)]; // unrelated documents
  if (r.chance(0.05)) return [a, a]; // equal documents
  return [a, mutate(r, a, 0.3 + r.next() * 0.5)];
}

module.exports = { rng, doc, value, pair, mutate, scalar, key };
