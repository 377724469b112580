'use strict';
// test/crash/ops.js: the writes of the crash run (test/crash/run) and what
// a row must look like given the writes that landed in it.  Shared by the
// writers (writer.js), which send the writes, and the checker (load.js),
// which holds every row to these rules after each restart.
//
// Write c of writer w is one hx_merge UPDATE of one session with the op list
// writeOps(w, c).  Its item id "w<w>-<c>" is unique in the whole run (no
// write is ever sent twice), so a row's items name exactly the writes that
// landed in it, in commit order (the row lock serialises its writers).  A
// row's state, after the writes whose ids are its items, must be:
//
//   items    the ids, each once                        (append)
//   n        the number of items                       (increment by 1)
//   writers  "w<w>" of each writer with an item, in the order of each
//            writer's first item                       (union)
//   latest   one {w, c} per such writer, in the same order, c the highest
//            counter of that writer's items            (upsert, key "w")
//   by       {byKey("w<w>"): the same highest counter} (merge; the key
//            has a "/", a "~" and a non-ASCII letter, so that deltas
//            carry escaped JSON Pointers)
//   last     the last item                             (replace)
//   even     the items with an even counter, in order  (RFC 6902 add .../-)
//   blob     decided by the last item whose counter is a blob counter:
//            c % 50 == 0 sets it to blobOf(id), a value of over 8000
//            bytes (the event goes out as a NOTIFY reference, and the
//            state is toasted); otherwise c % 4 == 1 deletes it; absent
//            when no such item                         (replace, delete)
// A write whose ops do not all land together breaks one of these.
//
// The churn sessions x-01 .. x-04 get no merges: their rows are deleted and
// inserted again (hx_stream ends their stream with hx.stream_end and starts
// it again with a STATE_SNAPSHOT, the seq going on).  Churn write c of
// writer w inserts the state churnState(id) = {"gen": id, "notes": [...]},
// so each snapshot in their logs names the insert that made it; its notes
// (40 strings derived from the id, about 3.5 kB) put it past hx_store's
// threshold (2 kB), so that with the state as hxdoc (docs/sessions.sql)
// the row is stored in pieces and its delete leaves a document to drop.
const crypto = require('node:crypto');

const BLOB_EVERY = 50;
const BLOB_CHARS = 9000;

/** The member of /by for writer tag: needs ~1 and ~0 in a JSON Pointer. */
function byKey(tag) {
  return `${tag} a/b~c é`;
}

function itemId(w, c) {
  return `w${w}-${c}`;
}

/** {w, c} of an item id, or null when it is not one. */
function parseItem(item) {
  const m = typeof item === 'string' ? /^w(\d+)-(\d+)$/.exec(item) : null;
  return m ? { w: Number(m[1]), c: Number(m[2]) } : null;
}

/** 9,024 hex digits derived from the id: deterministic, hardly compressible. */
function blobOf(id) {
  let out = '';
  let h = id;
  while (out.length < BLOB_CHARS) {
    h = crypto.createHash('sha256').update(h).digest('hex');
    out += h;
  }
  return out;
}

/** What write c does to the blob: 'set', 'delete' or null (nothing). */
function blobAction(c) {
  if (c % BLOB_EVERY === 0) return 'set';
  if (c % 4 === 1) return 'delete';
  return null;
}

function writeOps(w, c) {
  const id = itemId(w, c);
  const tag = `w${w}`;
  const ops = [
    { op: 'append', path: '/items', items: [id] },
    { op: 'increment', path: '/n', by: 1 },
    { op: 'union', path: '/writers', items: [tag] },
    { op: 'upsert', path: '/latest', key: 'w', items: [{ w: tag, c }] },
    { op: 'merge', path: '/by', value: { [byKey(tag)]: c } },
    { op: 'replace', path: '/last', value: id },
  ];
  if (c % 2 === 0) ops.push({ op: 'add', path: '/even/-', value: id });
  const blob = blobAction(c);
  if (blob === 'set') ops.push({ op: 'replace', path: '/blob', value: blobOf(id) });
  if (blob === 'delete') ops.push({ op: 'delete', path: '/blob' });
  return ops;
}

/** JSON with object keys sorted: equal text iff deep-equal JSON values. */
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

function digest(state) {
  return crypto.createHash('sha1').update(canonical(state)).digest('hex');
}

/**
 * The state a row must have, given its items (as parsed by parseItem, in
 * the row's order): the rules above, as a value to compare with.
 */
function expectedState(parsed) {
  if (parsed.length === 0) return {}; // as inserted: never written
  const state = { items: [] };
  const latest = new Map(); // tag -> highest c, in first-appearance order
  let blob;
  const even = [];
  for (const { w, c } of parsed) {
    const id = itemId(w, c);
    state.items.push(id);
    const tag = `w${w}`;
    latest.set(tag, Math.max(latest.has(tag) ? latest.get(tag) : -1, c));
    if (c % 2 === 0) even.push(id);
    const action = blobAction(c);
    if (action === 'set') blob = blobOf(id);
    if (action === 'delete') blob = undefined;
  }
  state.n = parsed.length;
  state.writers = [...latest.keys()];
  state.latest = [...latest].map(([w, c]) => ({ w, c }));
  state.by = Object.fromEntries([...latest].map(([w, c]) => [byKey(w), c]));
  state.last = state.items[state.items.length - 1];
  if (even.length > 0) state.even = even;
  if (blob !== undefined) state.blob = blob;
  return state;
}

// mulberry32: a small seeded PRNG, so that a run's choices can be replayed
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function sessionKey(i) {
  return `s-${String(i).padStart(2, '0')}`;
}

const CHURN_KEYS = ['x-01', 'x-02', 'x-03', 'x-04'];

function isChurn(key) {
  return CHURN_KEYS.includes(key);
}

const CHURN_NOTES = 40;

function churnState(id) {
  const notes = [];
  for (let i = 0; i < CHURN_NOTES; i++) {
    notes.push(`${id}:${i}:${crypto.createHash('sha256').update(`${id}/${i}`).digest('hex')}`);
  }
  return { gen: id, notes };
}

module.exports = {
  itemId, parseItem, blobOf, blobAction, writeOps, canonical, digest, expectedState, prng, sessionKey,
  CHURN_KEYS, isChurn, churnState,
};
