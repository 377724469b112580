'use strict';
// test/fuzz/inputs.js: the fuzzer's inputs, each made from the run's seed
// and its own number alone (input(seed, i)), so that any input can be made
// again without the ones before it.
//
// An input is one of:
//   {kind: 'patch'|'merge', args: [doc, writes]}   hx_patch / hx_merge
//   {kind: 'diff', args: [old, new], mode}          hx_diff (mode undefined: the
//                                                   two-argument form)
//   {kind: 'sql', table, stmts: [{flag, parts}]}    statements run in order in
//                                                   one rolled-back block
// where documents and writes are trees of ./ast.js.
//
// What they are made of:
//   - documents: test/js/gen.js's random JSON, agent-like states, odd
//     numbers (1e308, -0, 1.0e-400, 1e-400, 9e131071, ...), unicode
//     (astral, combining, RTL, BOM), "\u0000", lone surrogates, keys such
//     as "~1", "/", "__proto__", duplicate keys; rarely (big inputs) deep
//     nesting (thousands to 200,000 levels), arrays of 10^4 to 10^5
//     elements, objects of 10^4 members, strings up to 1 MB;
//   - op lists made against a model of the document, so that most of them
//     apply and reach the engine, then mutated: ops dropped, duplicated or
//     swapped, members dropped or retyped, unknown op names, duplicate
//     members, non-object ops, pointer syntax errors ("~2", no leading
//     "/"), leading-zero and huge indexes, "-" where an element must exist,
//     paths through scalars, moves into their own child; rarely the whole
//     text corrupted;
//   - hx_merge's ops (append, replace, delete, increment, union, upsert,
//     discard, clear, merge and the RFC 6902 ones), and RFC 7386 merge
//     patches; hx_diff in its three modes, the
//     default, and unknown modes;
//   - trigger scenarios on tables/tables.js's pool: hx_lock_once,
//     hx_slot_guard, hx_phase_guard and hx_stream created with valid and
//     invalid arguments (columns, column:/pointer, machines, options), at
//     valid and invalid timings, levels and events, then fired by INSERT,
//     UPDATE (hx_merge, hx_next_phase, key changes across partitions),
//     DELETE, MERGE, ON CONFLICT, SET CONSTRAINTS, as a non-owner, after
//     schema and machine changes;
//   - the other functions (hx_next_phase, hx_machine_dot, hx_stream_channel,
//     hx_stream_events, hx_stream_snapshot, hx_stream_trim) with odd
//     arguments;
//   - replays: a row of tables.js's fz_replay changed tens to hundreds of
//     times through hx_stream (op lists made against a model of the row,
//     large strings, a delete and insert in between), mostly with the op
//     engine's compaction threshold lowered so that replaying crosses it;
//     rarely (big inputs) eighty changes of a 1 MB member that cross the
//     real threshold; then hx_stream_state_at at sampled seqs must give
//     back the state the row had at each.
//
// Statement flags: 's' setup, must succeed (else the fuzzer is wrong and
// says so); 'f' fire, any error must be documented; 'c' core, a statement
// that may fail in core for its own reasons (schema and machine changes),
// where only internal errors and crashes count.

const gen = require('../js/gen.js');
const { Raw, Pairs, Deep, Rep, RepObj, Long, encode, quote, setOwn } = require('./ast');
const { TABLES, REPLAY, MACHINES, PHASES, EVENTS } = require('./tables');

// ---------------------------------------------------------------------
// Seeds
// ---------------------------------------------------------------------

function fmix32(h) {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

// The random stream of input i of a run
function inputRng(seed, i) {
  return gen.rng(fmix32(fmix32(seed >>> 0) ^ Math.imul(i + 1, 0x9e3779b1)));
}

// ---------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------

// Numbers as written: jsonb keeps them as numeric, exactly
const ODD_NUMBERS = ['1e308', '-0', '1.0e-400', '1e-400', '123456789012345678901234567890.5', '-1e-7', '0.0',
  '1E+2', '2e308', '5e-324', '9e131071', '1e131071', '1e-16383', '-123456789012345678901234567890123456789',
  '0.1', '1.000000000000000000001', '1e1000', '-1e-1000', '-0.0', '0e10'];
const ODD_STRINGS = ['😀', '\u{10FFFF}', '\u{1F468}\u200D\u{1F469}', 'é', 'e\u0301', '\u202Eabc', '\uFEFF', '日本語',
  '\u0001\u001f', '~0~1/', '__proto__', 'constructor', '\\', '"', '\t\n\r', ' ', '', '\u2028'];
// Escapes written by hand: pairs, reversed pairs
const RAW_STRINGS = ['"\\ud83d\\ude00"', '"\\u00e9"', '"\\/"', '"\\b\\f"', '"\\uFFFF"', '"\\uDBFF\\uDFFF"'];
// What jsonb's own input refuses: "\u0000", lone surrogates, numbers
// beyond numeric's range
const BAD_SCALARS = () => ['\u0000', 'a\u0000b', '\ud800', '\udfff', new Raw('"\\uD800"'), new Raw('"\\u0000"'),
  new Raw('"\\uDE00\\uD83D"'), new Raw('1e-16384'), new Raw('1e200000')];
const ODD_KEYS = ['__proto__', 'constructor', 'prototype', '😀', 'k'.repeat(300), '~', '/', '~1', '-',
  '0', '00', '01', '99999999999999999999', '', 'a/b~c'];

function oddScalar(r) {
  if (r.chance(0.03)) return r.pick(BAD_SCALARS());
  switch (r.int(4)) {
    case 0:
    case 1: return new Raw(r.pick(ODD_NUMBERS));
    case 2: return r.pick(ODD_STRINGS);
    default: return new Raw(r.pick(RAW_STRINGS));
  }
}

// r.odd (a third of the inputs) lets odd scalars and keys in
function scalar(r) {
  return r.odd && r.chance(0.15) ? oddScalar(r) : gen.scalar(r);
}

function key(r) {
  return r.odd && r.chance(0.1) ? (r.chance(0.03) ? '\u0000' : r.pick(ODD_KEYS)) : gen.key(r);
}

function value(r, depth) {
  const roll = r.int(10);
  if (depth <= 0 || roll < 5) return scalar(r);
  if (roll < 7) {
    const n = r.chance(0.15) ? 0 : r.int(5);
    return Array.from({ length: n }, () => value(r, depth - 1));
  }
  const n = r.chance(0.15) ? 0 : r.int(6);
  if (r.chance(0.04) && n > 0) {
    // duplicate keys: jsonb keeps the last
    const pairs = [];
    for (let i = 0; i < n; i++) pairs.push([key(r), value(r, depth - 1)]);
    pairs.push([pairs[0][0], value(r, depth - 1)]);
    return new Pairs(pairs);
  }
  const o = {};
  for (let i = 0; i < n; i++) setOwn(o, key(r), value(r, depth - 1));
  return o;
}

function agentState(r) {
  const todos = Array.from({ length: r.int(4) }, (_, i) => ({ id: 't' + i, text: r.pick(['scaffold', 'deploy', '😀']), done: r.chance(0.5) }));
  const s = {
    todos,
    stats: { tool_calls: r.int(10), tokens: r.chance(0.2) ? new Raw(r.pick(ODD_NUMBERS)) : r.int(1000) },
    messages: Array.from({ length: r.int(3) }, (_, i) => ({ id: 'm' + i, role: r.pick(['user', 'assistant']), content: scalar(r) })),
    plan: { version: r.int(5), steps: Array.from({ length: r.int(3) }, () => r.pick(['a', 'b', 'c'])) },
    tags: Array.from({ length: r.int(4) }, () => r.pick(['x', 'y', 1, 2, null])),
  };
  if (r.chance(0.3)) s.last_tool = 'search';
  return s;
}

function doc(r) {
  const roll = r.next();
  if (roll < 0.06) return value(r, 3); // any root, scalars included
  if (roll < 0.16) return agentState(r);
  const o = {};
  const n = 1 + r.int(7);
  for (let i = 0; i < n; i++) setOwn(o, key(r), value(r, 3));
  return o;
}

// ---------------------------------------------------------------------
// Big values (rare)
// ---------------------------------------------------------------------

const DEPTHS = [1000, 1023, 1024, 1025, 3000, 10000, 10000, 30000, 200000];

function deep(r, leaf) {
  const n = r.pick(DEPTHS);
  switch (r.int(3)) {
    case 0: return new Deep(n, '[', ']', leaf);
    case 1: return new Deep(n, '{"a": ', '}', leaf);
    default: return new Deep(n, '[{"a": ', '}]', leaf);
  }
}

// The pointer through n levels of a Deep node
function deepPath(d, n) {
  const step = d.open === '[' ? '/0' : d.open === '{"a": ' ? '/a' : '/0/a';
  return step.repeat(n);
}

function bigValue(r) {
  switch (r.int(6)) {
    case 0: return deep(r, scalar(r));
    case 1: return new Rep(r.pick([10000, 100000]), r.pick(['int', 'str', 'obj', 'null', 'dup', 'sameid']));
    case 2: return new RepObj(r.pick([10000, 50000]));
    case 3: return new Long(r.pick([100000, 1000000]), r.pick(['x', 'é', '😀', '\\', '"', '\n']));
    case 4: return { data: new Rep(10000, 'obj'), text: new Long(100000, 'ab') };
    default: return deep(r, { x: new Rep(1000, 'int') });
  }
}

// ---------------------------------------------------------------------
// A model of the document, to aim ops at paths that exist
// ---------------------------------------------------------------------

const OPAQUE = (v) => v instanceof Raw || v instanceof Deep || v instanceof Rep || v instanceof RepObj || v instanceof Long;

function clone(v) {
  if (v === null || typeof v !== 'object' || OPAQUE(v)) return v;
  if (Array.isArray(v)) return v.map(clone);
  const o = {};
  if (v instanceof Pairs) {
    for (const [k, x] of v.pairs) setOwn(o, k, clone(x));
    return o;
  }
  for (const k of Object.keys(v)) setOwn(o, k, clone(v[k]));
  return o;
}

function isObj(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !OPAQUE(v);
}

function ptr(tokens) {
  return tokens.map((t) => '/' + String(t).replace(/~/g, '~0').replace(/\//g, '~1')).join('');
}

// Paths of a model (the first ones, up to a limit), with their values
function paths(model, limit = 80) {
  const out = [];
  const walk = (v, tokens) => {
    if (out.length >= limit) return;
    out.push({ tokens, v });
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length && out.length < limit; i++) walk(v[i], tokens.concat(String(i)));
    } else if (v instanceof Pairs) {
      for (const [k, x] of v.pairs) if (out.length < limit) walk(x, tokens.concat(k));
    } else if (isObj(v)) {
      for (const k in v) if (out.length < limit) walk(v[k], tokens.concat(k));
    }
  };
  walk(model, []);
  return out;
}

function getAt(model, tokens) {
  let v = model;
  for (const t of tokens) {
    if (Array.isArray(v) && /^(0|[1-9][0-9]*)$/.test(t) && Number(t) < v.length) v = v[Number(t)];
    else if (isObj(v) && Object.prototype.hasOwnProperty.call(v, t)) v = v[t];
    else throw new Error('missing');
  }
  return v;
}

// Set (add semantics) at tokens in model; returns the new model
function setAt(model, tokens, x, insert) {
  if (tokens.length === 0) return x;
  const parent = getAt(model, tokens.slice(0, -1));
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) {
    if (last === '-') parent.push(x);
    else if (/^(0|[1-9][0-9]*)$/.test(last) && Number(last) <= parent.length) {
      if (insert) parent.splice(Number(last), 0, x);
      else if (Number(last) < parent.length) parent[Number(last)] = x;
      else throw new Error('range');
    } else throw new Error('index');
  } else if (isObj(parent)) setOwn(parent, last, x);
  else throw new Error('scalar');
  return model;
}

function removeAt(model, tokens) {
  if (tokens.length === 0) throw new Error('root');
  const parent = getAt(model, tokens.slice(0, -1));
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent) && /^(0|[1-9][0-9]*)$/.test(last) && Number(last) < parent.length) parent.splice(Number(last), 1);
  else if (isObj(parent) && Object.prototype.hasOwnProperty.call(parent, last)) delete parent[last];
  else throw new Error('missing');
  return model;
}

// ---------------------------------------------------------------------
// Pointers
// ---------------------------------------------------------------------

function pick(r, list, pred) {
  const xs = pred ? list.filter(pred) : list;
  return xs.length ? r.pick(xs) : null;
}

// A pointer to an existing value (not the root, when others exist)
function existing(r, ps) {
  const p = pick(r, ps, (x) => x.tokens.length > 0) || ps[0];
  return p.tokens;
}

// A pointer to a new location: a new member or an array's end
function fresh(r, ps) {
  const c = pick(r, ps, (x) => Array.isArray(x.v) || isObj(x.v));
  if (!c) return [key(r)];
  if (Array.isArray(c.v)) return c.tokens.concat(r.chance(0.5) ? '-' : String(r.int(c.v.length + 1)));
  return c.tokens.concat(r.chance(0.5) ? 'n' + r.int(20) : key(r));
}

const HUGE_INDEXES = ['99999999999999999999', '4294967296', '2147483647', '2147483648', '-1', '+1', '1e2', ' 1', '0x1',
  '1.0', '٣', '18446744073709551616', '9223372036854775807'];
const TILDES = ['~', '~2', '~~', '~01', '~1', '~0', '~a', '~/'];

// A pointer, often broken in one of the ways RFC 6901 forbids
function mutatePointer(r, p, ps) {
  switch (r.int(12)) {
    case 0: { // leading zeros
      const m = p.match(/^(.*\/)([0-9]+)$/);
      return m ? m[1] + '0' + m[2] : p + '/00';
    }
    case 1: { // a huge or malformed index into an array
      const a = pick(r, ps, (x) => Array.isArray(x.v));
      return (a ? ptr(a.tokens) : p) + '/' + r.pick(HUGE_INDEXES);
    }
    case 2: { // "-" where an element must exist
      const a = pick(r, ps, (x) => Array.isArray(x.v));
      return (a ? ptr(a.tokens) : p) + (r.chance(0.5) ? '/-' : '/-/x');
    }
    case 3: { // "~" escapes, valid and not
      const at = p.lastIndexOf('/');
      const t = r.pick(TILDES);
      return at < 0 ? '/' + t : p.slice(0, at + 1) + t + p.slice(at + 1);
    }
    case 4: return p.replace(/^\//, ''); // no leading "/"
    case 5: return ''; // the whole document
    case 6: return p + r.pick(['/', '//', '/ ']); // empty tokens
    case 7: { // through a scalar
      const s = pick(r, ps, (x) => !Array.isArray(x.v) && !isObj(x.v));
      return (s ? ptr(s.tokens) : p) + r.pick(['/x', '/0', '/-']);
    }
    case 8: return '/' + 'k'.repeat(r.pick([100, 10000]));
    case 9: return p + r.pick(['/😀', '/\u0000', '/\ud800', '/é']);
    case 10: return r.pick(['a', 'a/b', '#/a', '/a/../b', ' /a']);
    default: return p + '/' + key(r);
  }
}

function pointer(r, tokens, ps, pmut) {
  const p = ptr(tokens);
  return r.chance(pmut) ? mutatePointer(r, p, ps) : p;
}

// ---------------------------------------------------------------------
// Op lists
// ---------------------------------------------------------------------

const NUMBERS_BY = () => [1, -1, 0, 2.5, -0.25, 1000000];

// Increments: small numbers, and numbers at numeric's limits (131,072
// digits before the point, 16,383 after), whose sums may not fit
const BY_ODD = ['9e131071', '-9e131071', '1e131071', '5e131071', '1e-16383', '1.0e-400', '123456789012345678901234567890.5',
  '-0', '1e308', '0.5e-16382'];

function byValue(r) {
  if (r.chance(0.8)) return r.pick(NUMBERS_BY());
  return new Raw(r.pick(r.chance(0.7) ? BY_ODD : ODD_NUMBERS));
}

// One RFC 6902 op against the model; updates the model when it applies
function rfcOp(r, st, pmut) {
  const ps = paths(st.model);
  const name = r.pick(['add', 'add', 'remove', 'replace', 'replace', 'move', 'copy', 'test', 'test']);
  let op;
  let tokens;
  let from;
  try {
    switch (name) {
      case 'add': {
        tokens = r.chance(0.8) ? fresh(r, ps) : existing(r, ps);
        const v = value(r, 2);
        op = { op: 'add', path: pointer(r, tokens, ps, pmut), value: v };
        st.model = setAt(st.model, tokens, clone(v), true);
        break;
      }
      case 'remove':
        tokens = existing(r, ps);
        op = { op: 'remove', path: pointer(r, tokens, ps, pmut) };
        st.model = removeAt(st.model, tokens);
        break;
      case 'replace': {
        tokens = existing(r, ps);
        const v = value(r, 2);
        op = { op: 'replace', path: pointer(r, tokens, ps, pmut), value: v };
        st.model = setAt(st.model, tokens, clone(v), false);
        break;
      }
      case 'move':
      case 'copy': {
        from = existing(r, ps);
        const own = name === 'move' && r.chance(0.05);
        const under = ptr(from) + '/';
        tokens = own ? from.concat(key(r)) : fresh(r, ps.filter((x) => !(ptr(x.tokens) + '/').startsWith(under)));
        op = { op: name, from: pointer(r, from, ps, pmut), path: pointer(r, tokens, ps, pmut) };
        const v = clone(getAt(st.model, from));
        if (name === 'move') {
          if (ptr(tokens).startsWith(ptr(from) + '/')) throw new Error('own child');
          st.model = removeAt(st.model, from);
        }
        st.model = setAt(st.model, tokens, v, true);
        break;
      }
      default: { // test
        tokens = existing(r, ps);
        const v = r.chance(0.9) ? clone(getAt(st.model, tokens)) : value(r, 1);
        op = { op: 'test', path: pointer(r, tokens, ps, pmut), value: v };
      }
    }
  } catch (e) {
    // the model could not follow (the op may still be valid for hxstate)
  }
  return op || { op: name, path: pointer(r, tokens || [], ps, pmut), value: value(r, 1) };
}

// One hx_merge op against the model
function mergeOp(r, st, pmut) {
  if (st.lastInc && r.chance(0.15)) return { ...st.lastInc }; // counters add up
  const ps = paths(st.model);
  const name = r.pick(['append', 'append', 'replace', 'delete', 'increment', 'increment', 'union', 'upsert', 'merge',
    'discard', 'clear', 'add', 'remove', 'move', 'copy', 'test']);
  if (['add', 'remove', 'move', 'copy', 'test'].includes(name)) return rfcOp(r, st, pmut);
  const arrays = ps.filter((x) => Array.isArray(x.v));
  const arrayPath = () => (arrays.length && r.chance(0.8) ? r.pick(arrays).tokens : fresh(r, ps).filter((t) => t !== '-'));
  let op;
  try {
    switch (name) {
      case 'append': {
        const tokens = arrayPath();
        const items = Array.from({ length: r.int(4) }, () => value(r, 2));
        op = { op: 'append', path: pointer(r, tokens, ps, pmut), items };
        let a;
        try { a = getAt(st.model, tokens); } catch (e) { a = undefined; }
        if (a === undefined) st.model = setAt(st.model, tokens, clone(items), false);
        else if (Array.isArray(a)) a.push(...clone(items));
        break;
      }
      case 'replace': {
        const tokens = r.chance(0.7) ? existing(r, ps) : fresh(r, ps).filter((t) => t !== '-');
        const v = r.chance(0.1) ? null : value(r, 2);
        op = { op: 'replace', path: pointer(r, tokens, ps, pmut), value: v };
        if (v === null) st.model = removeAt(st.model, tokens);
        else st.model = setAt(st.model, tokens, clone(v), false);
        break;
      }
      case 'delete': {
        const tokens = r.chance(0.8) ? existing(r, ps) : [key(r)];
        op = { op: 'delete', path: pointer(r, tokens, ps, pmut) };
        st.model = removeAt(st.model, tokens);
        break;
      }
      case 'increment': {
        const nums = ps.filter((x) => typeof x.v === 'number' || x.v instanceof Raw);
        const tokens = nums.length && r.chance(0.7) ? r.pick(nums).tokens : fresh(r, ps).filter((t) => t !== '-');
        const by = byValue(r);
        op = { op: 'increment', path: pointer(r, tokens, ps, pmut), by };
        st.lastInc = op;
        let cur;
        try { cur = getAt(st.model, tokens); } catch (e) { cur = 0; }
        if (typeof cur === 'number' && typeof by === 'number') st.model = setAt(st.model, tokens, cur + by, false);
        break;
      }
      case 'union': {
        const tokens = arrayPath();
        let have = [];
        try { have = getAt(st.model, tokens); } catch (e) { have = []; }
        const pool = Array.isArray(have) ? have : [];
        const items = Array.from({ length: r.int(5) }, () => (pool.length && r.chance(0.5) ? clone(r.pick(pool)) : r.pick([1, 2, 'a', null, { x: 1 }, [1], value(r, 1)])));
        op = { op: 'union', path: pointer(r, tokens, ps, pmut), items };
        break;
      }
      case 'upsert': {
        const tokens = arrayPath();
        const k = r.chance(0.6) ? undefined : r.pick(['id', 'name', 'k', '', '/', '😀']);
        const kk = k === undefined ? 'id' : k;
        const items = Array.from({ length: r.int(4) }, () => {
          const o = { v: scalar(r) };
          if (r.chance(0.85)) setOwn(o, kk, r.pick(['t0', 't1', 'm0', 'x', 1, null, { a: 1 }]));
          return o;
        });
        op = { op: 'upsert', path: pointer(r, tokens, ps, pmut), items };
        if (k !== undefined) op.key = k;
        break;
      }
      case 'discard': {
        // elements equal to items, or whose key member is one of keys
        const tokens = arrayPath();
        let have = [];
        try { have = getAt(st.model, tokens); } catch (e) { have = []; }
        const pool = Array.isArray(have) ? have : [];
        const pickOne = () => (pool.length && r.chance(0.6) ? clone(r.pick(pool)) : value(r, 1));
        if (r.chance(0.5)) {
          op = { op: 'discard', path: pointer(r, tokens, ps, pmut), items: Array.from({ length: r.int(4) }, pickOne) };
        } else {
          const k = r.chance(0.6) ? undefined : r.pick(['id', 'name', '', '😀']);
          const keys = Array.from({ length: r.int(4) }, () => {
            const e = pickOne();
            return isObj(e) && Object.prototype.hasOwnProperty.call(e, k || 'id') ? e[k || 'id'] : r.pick(['t0', 't1', 1, null, { a: 1 }]);
          });
          op = { op: 'discard', path: pointer(r, tokens, ps, pmut), keys };
          if (k !== undefined) op.key = k;
          if (r.chance(0.05)) op.items = []; // both: refused
        }
        break;
      }
      case 'clear': {
        const tokens = arrayPath();
        op = { op: 'clear', path: pointer(r, tokens, ps, pmut) };
        try { st.model = setAt(st.model, tokens, [], false); } catch (e) { /* created */ }
        break;
      }
      default: { // merge
        const objs = ps.filter((x) => isObj(x.v));
        const tokens = objs.length && r.chance(0.7) ? r.pick(objs).tokens : fresh(r, ps).filter((t) => t !== '-');
        let base;
        try { base = getAt(st.model, tokens); } catch (e) { base = {}; }
        op = { op: 'merge', path: pointer(r, tokens, ps, pmut), value: r.chance(0.85) ? mergePatch(r, base, 2) : value(r, 1) };
      }
    }
  } catch (e) {
    // the model could not follow
  }
  return op || { op: name, path: pointer(r, [key(r)], ps, pmut) };
}

// An RFC 7386 merge patch aimed at base: nulls remove, objects recurse
function mergePatch(r, base, depth) {
  const o = {};
  const keys = isObj(base) ? Object.keys(base) : [];
  const n = r.int(4);
  for (let i = 0; i < n; i++) {
    const k = keys.length && r.chance(0.6) ? r.pick(keys) : key(r);
    const b = isObj(base) && Object.prototype.hasOwnProperty.call(base, k) ? base[k] : undefined;
    const roll = r.int(10);
    if (roll < 3) setOwn(o, k, null);
    else if (roll < 6 && depth > 0) setOwn(o, k, mergePatch(r, b, depth - 1));
    else setOwn(o, k, value(r, 2));
  }
  return o;
}

const UNKNOWN_OPS = ['Add', 'ADD', 'addd', '', 'inc', 'merge_patch', 'remove ', ' add', 'add\u0000', '😀', 'appendx', 'incr',
  'delete_all', 'test\n'];
const MEMBERS = ['op', 'path', 'from', 'value', 'items', 'by', 'key', 'keys'];
const WRONG = () => [null, true, 1, -1.5, 'x', '', '/a', [], ['/a'], {}, { a: 1 }, new Raw('1e400')];

// Break an op list in the ways the engine must reject or tolerate
function mutateOps(r, ops, ps) {
  const n = 1 + r.int(3);
  let out = ops.slice();
  for (let i = 0; i < n; i++) {
    const at = out.length ? r.int(out.length) : 0;
    const o = out[at];
    const isOp = o && typeof o === 'object' && !Array.isArray(o) && !(o instanceof Pairs) && !OPAQUE(o);
    switch (r.int(11)) {
      case 0: out.splice(at, 1); break; // drop an op
      case 1: if (o !== undefined) out.splice(at, 0, o); break; // duplicate it
      case 2: if (out.length > 1) { const j = r.int(out.length); [out[at], out[j]] = [out[j], out[at]]; } break;
      case 3: if (isOp) { const c = { ...o }; delete c[r.pick(MEMBERS)]; out[at] = c; } break; // drop a member
      case 4: if (isOp) { const c = { ...o }; c[r.pick(MEMBERS)] = r.pick(WRONG()); out[at] = c; } break; // retype one
      case 5: if (isOp) out[at] = { ...o, op: r.pick(UNKNOWN_OPS) }; break;
      case 6: if (isOp && typeof o.path === 'string') out[at] = { ...o, path: mutatePointer(r, o.path, ps) }; break;
      case 7: if (isOp) out[at] = { ...o, extra: value(r, 1), op2: 'remove' }; break; // members RFC 6902 ignores
      case 8: if (isOp) out[at] = new Pairs([...Object.entries(o), ['op', r.pick(['remove', 'add', 'test', 'bogus'])]]); break;
      case 9: out.splice(at, 0, r.pick([1, 'add', null, [], [{ op: 'add', path: '/a', value: 1 }], true])); break;
      default: if (isOp && typeof o.path === 'string') out.splice(at, 0, { op: 'move', from: o.path, path: o.path + '/x' }); // own child
    }
  }
  return out;
}

// Corrupt the JSON text itself
function corrupt(r, text) {
  const at = r.int(text.length + 1);
  switch (r.int(7)) {
    case 0: return text.slice(0, at);
    case 1: return text.slice(0, at) + text.slice(at + 1);
    case 2: return text.slice(0, at) + r.pick(['"', '{', ']', ',', ':', '\\', '\\u', 'nul', '\u0001', '\n', "'"]) + text.slice(at);
    case 3: return text.replace(/\]$/, ',]');
    case 4: return text + r.pick([' x', '}', ' ', '\n']);
    case 5: return text.replace(/"/g, "'");
    default: return text.slice(0, at) + '\\ud800' + text.slice(at);
  }
}

// A list of n ops made by make(r, st, pmut), against doc
function opList(r, d, make) {
  const st = { model: clone(d) };
  const n = r.chance(0.05) ? 0 : r.chance(0.1) ? 10 + r.int(30) : 1 + r.int(6);
  const pmut = r.chance(0.65) ? 0 : 0.1;
  const ops = [];
  for (let i = 0; i < n; i++) ops.push(make(r, st, pmut));
  return ops;
}

function finishWrites(r, d, ops, inStatement) {
  let w = ops;
  if (r.chance(0.25)) w = mutateOps(r, w, paths(d));
  if (r.chance(0.02)) w = r.pick([{}, { op: 'add', path: '/a', value: 1 }, 1, 'ops', null, true, [w], new Pairs([])]);
  if (!inStatement && r.chance(0.02)) w = new Raw(corrupt(r, encode(w)));
  return w;
}

// ---------------------------------------------------------------------
// Function inputs
// ---------------------------------------------------------------------

function patchInput(r) {
  const d = r.chance(0.03) ? new Raw(corrupt(r, encode(doc(r)))) : doc(r);
  return { kind: 'patch', label: 'hx_patch', args: [d, finishWrites(r, d, opList(r, d, rfcOp))] };
}

function mergeInput(r) {
  const d = r.chance(0.03) ? new Raw(corrupt(r, encode(doc(r)))) : doc(r);
  if (r.chance(0.2)) {
    const w = r.chance(0.9) ? mergePatch(r, d, 3) : value(r, 3);
    return { kind: 'merge', label: 'hx_merge (merge patch)', args: [d, r.chance(0.02) ? new Raw(corrupt(r, encode(w))) : w] };
  }
  return { kind: 'merge', label: 'hx_merge (op list)', args: [d, finishWrites(r, d, opList(r, d, mergeOp))] };
}

const MODES = [undefined, undefined, 'append', 'replace', 'index', 'index'];
const BAD_MODES = ['', 'Append', 'INDEX', 'indexes', ' index', 'index ', 'ïndex', 'append\t', 'x'.repeat(300), 'null', '😀'];

function diffMode(r) {
  return r.chance(0.04) ? r.pick(BAD_MODES) : r.pick(MODES);
}

function diffInput(r) {
  let a;
  let b;
  const roll = r.next();
  if (roll < 0.6) [a, b] = gen.pair(r);
  else if (roll < 0.9) {
    // a document and the same edited by ops: near documents
    a = doc(r);
    const st = { model: clone(a) };
    const n = 1 + r.int(6);
    for (let i = 0; i < n; i++) rfcOp(r, st, 0);
    b = st.model;
  } else { a = doc(r); b = doc(r); }
  if (r.chance(0.02)) b = new Raw(corrupt(r, encode(b)));
  const mode = diffMode(r);
  return { kind: 'diff', label: 'hx_diff ' + (mode === undefined ? '(default)' : MODES.includes(mode) ? mode : '(bad mode)'), args: [a, b], mode };
}

// A big input: deep, long or wide documents, and the ops that reach into
// them; a long replay
function bigInput(r) {
  if (r.chance(0.05)) return replayInput(r, true);
  const kind = r.pick(['patch', 'merge', 'merge', 'diff', 'ops']);
  if (kind === 'ops') {
    // thousands of ops on a small document
    const n = r.pick([5000, 20000]);
    const ops = Array.from({ length: n }, (_, i) => (i % 3 === 0 ? { op: 'add', path: '/l/-', value: i }
      : i % 3 === 1 ? { op: 'replace', path: '/n', value: i } : { op: 'test', path: '/n', value: i - 1 }));
    const merge = r.chance(0.5);
    return {
      kind: merge ? 'merge' : 'patch', label: merge ? 'hx_merge (op list)' : 'hx_patch', big: true,
      args: [{ l: [], n: 0 }, merge ? ops.map((o) => (o.op === 'add' ? { op: 'append', path: '/l', items: [o.value] } : o)) : ops],
    };
  }
  const v = bigValue(r);
  if (kind === 'diff') {
    let b;
    if (v instanceof Deep) b = new Deep(v.n + r.int(3) - 1, v.open, v.close, scalar(r));
    else if (v instanceof Rep) b = new Rep(v.n + r.int(5), v.kind);
    else if (v instanceof RepObj) b = new RepObj(v.n - r.int(2));
    else b = { wrap: v };
    const mode = r.pick(MODES);
    return { kind: 'diff', label: 'hx_diff ' + (mode || '(default)'), big: true, args: r.chance(0.5) ? [v, b] : [b, v], mode };
  }
  const d = { big: v, n: 1 };
  let ops;
  if (v instanceof Deep) {
    const p = '/big' + deepPath(v, r.chance(0.5) ? v.n : r.int(v.n));
    ops = [r.pick([{ op: 'test', path: p, value: v.leaf }, { op: 'replace', path: p, value: 1 }, { op: 'add', path: p + '/x', value: 1 },
      { op: 'remove', path: p }, { op: 'copy', from: '/big', path: '/copy' }, { op: 'move', from: '/big', path: '/moved' }])];
    if (kind === 'merge' && r.chance(0.5)) return { kind: 'merge', label: 'hx_merge (merge patch)', big: true, args: [d, { big: new Deep(v.n, v.open, v.close, null) }] };
  } else if (v instanceof Rep) {
    const items = new Rep(r.pick([100, 10000, 100000]), v.kind);
    ops = kind === 'merge'
      ? [r.pick([{ op: 'append', path: '/big', items }, { op: 'union', path: '/big', items }, { op: 'upsert', path: '/big', items },
        { op: 'increment', path: '/big/99999', by: 1 }, { op: 'delete', path: '/big/0' }, { op: 'discard', path: '/big', items },
        { op: 'discard', path: '/big', keys: [1, 2, 'x'] }, { op: 'clear', path: '/big' }, { op: 'union', path: '/big', items: [1] }])]
      : [r.pick([{ op: 'remove', path: '/big/0' }, { op: 'add', path: '/big/0', value: 1 }, { op: 'test', path: '/big/9999', value: 9999 },
        { op: 'copy', from: '/big', path: '/big/-' }, { op: 'add', path: '/big/100000', value: 1 }])];
  } else {
    ops = [r.pick([{ op: 'replace', path: '/n', value: v }, { op: 'copy', from: '/big', path: '/c' }, { op: 'test', path: '/big', value: v },
      { op: 'add', path: '/' + 'k'.repeat(100000), value: 1 }])];
  }
  if (kind === 'merge' && r.chance(0.3)) return { kind: 'merge', label: 'hx_merge (merge patch)', big: true, args: [d, { big: v, x: null }] };
  return { kind, label: kind === 'merge' ? 'hx_merge (op list)' : 'hx_patch', big: true, args: [d, ops] };
}

// ---------------------------------------------------------------------
// Statements
// ---------------------------------------------------------------------

// A statement: flag and parts (SQL text, {lit}, {json}, {args}, {opt}: see
// renderParts in fuzz.js)
function S(flag, ...parts) {
  return { flag, parts };
}

function lit(s) { return { lit: s }; }
function json(v, cast = 'jsonb') { return { json: v, cast }; }

const SYSTEM_COLUMNS = ['ctid', 'xmin', 'xmax', 'cmin', 'cmax', 'tableoid', 'oid'];
const BAD_NAMES = ['nope', '', ' ', 'K', '"k"', 'x'.repeat(100), 'st ', 'phase\u0001', '😀', ':', ':/a', 'st:', 'st:a',
  'st:/~2', 'st:/a~', 'st:/a/0/-', 'st:/', 'st::/a', 'st:/' + 'a/'.repeat(500)];

function jsonbCols(t) {
  return Object.keys(t.cols).filter((c) => ['jsonb', 'jdom', 'jsonkey'].includes(t.cols[c]));
}

const POINTERS = ['', '/a', '/a/b', '/a/0', '/0', '/-', '/x', '/todos', '/todos/0/id', '/id', '/~0', '/~1', '/a~1b', '/😀', '/'];

function guardArg(r, t) {
  const cols = Object.keys(t.cols);
  const roll = r.next();
  if (roll < 0.55) return r.pick(cols);
  if (roll < 0.8) {
    const jc = jsonbCols(t);
    const c = jc.length && r.chance(0.85) ? r.pick(jc) : r.pick(cols);
    return c + ':' + (r.chance(0.8) ? r.pick(POINTERS) : mutatePointer(r, r.pick(POINTERS), []));
  }
  if (roll < 0.88) return r.pick(SYSTEM_COLUMNS);
  return r.pick(BAD_NAMES);
}

function phaseCol(r, t) {
  const cols = Object.keys(t.cols);
  if (r.chance(0.5)) return cols.includes('phase') ? 'phase' : r.pick(cols);
  return r.chance(0.9) ? r.pick(cols) : r.pick(BAD_NAMES.concat(SYSTEM_COLUMNS));
}

const STREAM_OPTIONS = ['arrays=append', 'arrays=replace', 'arrays=index', 'arrays=', 'arrays=bogus', 'payload=auto',
  'payload=ref', 'payload=none', 'payload=', 'payload=REF', 'stream=fz', 'stream=', 'stream=a:b', 'stream=' + 's'.repeat(100),
  'stream=😀', 'arrays', 'payload', 'stream', 'bogus=1', '=x', '', 'arrays=index=x', 'Arrays=index', 'stream=x y'];

function triggerArgs(r, fn, t) {
  const cols = Object.keys(t.cols);
  const args = [];
  if (fn === 'hx_lock_once' || fn === 'hx_slot_guard') {
    const n = r.chance(0.05) ? 0 : 1 + r.int(3);
    for (let i = 0; i < n; i++) args.push(guardArg(r, t));
  } else if (fn === 'hx_phase_guard') {
    const n = r.chance(0.05) ? 0 : r.chance(0.05) ? 3 : 1 + r.int(2);
    for (let i = 0; i < n; i++) {
      if (i === 0) args.push(r.chance(0.85) ? r.pick(MACHINES) : r.pick(['nope', '', 'FZ_M', 'x'.repeat(300), 'fz_m ']));
      else args.push(phaseCol(r, t));
    }
  } else {
    const n = r.chance(0.05) ? r.int(2) : 2 + (r.chance(0.5) ? r.int(3) : 0);
    const jc = jsonbCols(t);
    for (let i = 0; i < n; i++) {
      if (i === 0) args.push(jc.length && r.chance(0.85) ? r.pick(jc) : r.chance(0.7) ? r.pick(cols) : r.pick(BAD_NAMES));
      else if (i === 1) args.push(r.chance(0.75) ? t.key : r.chance(0.8) ? r.pick(cols) : r.pick(BAD_NAMES.concat(SYSTEM_COLUMNS)));
      else args.push(r.pick(STREAM_OPTIONS));
    }
  }
  return args;
}

// CREATE TRIGGER in a form core accepts (views: INSTEAD OF rows or
// statements; constraint triggers: AFTER rows; TRUNCATE: statements), with
// the timings and levels hxstate refuses among them
function createTrigger(r, t, name) {
  // hx_machine_changed is the extension's own statement trigger, not for
  // other tables: it must refuse them or do no harm
  const fn = r.chance(0.04) ? 'hx_machine_changed' : r.pick(['hx_lock_once', 'hx_slot_guard', 'hx_phase_guard', 'hx_stream', 'hx_stream']);
  const args = fn === 'hx_machine_changed' ? (r.chance(0.7) ? [] : [r.pick(Object.keys(t.cols))]) : triggerArgs(r, fn, t);
  let head;
  if (t.view) {
    head = r.chance(0.85)
      ? `CREATE TRIGGER ${name} INSTEAD OF ${r.pick(['INSERT', 'UPDATE', 'DELETE', 'INSERT OR UPDATE'])} ON ${t.name} FOR EACH ROW`
      : `CREATE TRIGGER ${name} AFTER UPDATE ON ${t.name} FOR EACH STATEMENT`;
  } else {
    const events = fn === 'hx_stream' ? r.pick(['INSERT OR UPDATE OR DELETE', 'INSERT OR UPDATE OR DELETE', 'UPDATE', 'DELETE', 'INSERT'])
      : r.pick(['INSERT OR UPDATE', 'INSERT OR UPDATE', 'UPDATE', 'INSERT', 'INSERT OR UPDATE OR DELETE', 'DELETE', 'UPDATE OF ' + quoteIdent(r.pick(Object.keys(t.cols).filter((c) => t.cols[c] !== 'generated')))]);
    const roll = r.next();
    if (roll < 0.45) head = `CREATE CONSTRAINT TRIGGER ${name} AFTER ${events} ON ${t.name}` + (r.chance(0.2) ? ' DEFERRABLE INITIALLY DEFERRED' : '') + ' FOR EACH ROW';
    else if (roll < 0.75) head = `CREATE TRIGGER ${name} AFTER ${events} ON ${t.name} FOR EACH ROW`;
    else if (roll < 0.9) head = `CREATE TRIGGER ${name} BEFORE ${events.replace(/^UPDATE OF .*/, 'UPDATE')} ON ${t.name} FOR EACH ROW`;
    else if (roll < 0.96) head = `CREATE TRIGGER ${name} AFTER ${events} ON ${t.name} FOR EACH STATEMENT`;
    else head = `CREATE TRIGGER ${name} AFTER TRUNCATE ON ${t.name} FOR EACH STATEMENT`;
  }
  return { fn, stmt: S('s', head + ` EXECUTE FUNCTION ${fn}(`, { args }, ')') };
}

function quoteIdent(c) {
  return /^[a-z_][a-z0-9_]*$/.test(c) ? c : '"' + c.replace(/"/g, '""') + '"';
}

const TEXT_KEYS = ['s-1', 's-2', 's-3', '', 'ключ', '😀', 'x'.repeat(70), 'a:b', "quote'd", 'é'.repeat(40), 'k\u0001'];
const INT_KEYS = [-3, -1, 0, 1, 2, 3, 4, 5, 50, 99, 100, 1000, -2147483648, 2147483647];
const SMALL_DOCS = () => [{}, { a: 1 }, { a: 2 }, { a: null }, { a: { b: 1 } }, { a: [1, 2] }, [], null, 1, 'x',
  { id: 'toolu_1' }, { id: 'toolu_2', name: 'plan' }, { todos: [{ id: 't1' }] }, { __proto__x: 1 }];

// A SQL value of a column's type
function colValue(r, t, c, st) {
  const type = t.cols[c];
  const nullable = !(t.notnull || []).includes(c);
  if (nullable && r.chance(0.15)) return 'NULL';
  switch (type) {
    case 'int': return String(r.pick(INT_KEYS));
    case 'text': return quote(r.pick(['x', 'y', '', 'prj_1', 'prj_2', 'u-1', '😀', 'é'.repeat(50)]));
    case 'textkey': return quote(r.pick(TEXT_KEYS).replace(/\u0001/g, ''));
    case 'numeric': return r.pick(['1', '1.0', '1.00', '-0', '1e100', "'NaN'"]);
    case 'jsonb':
    case 'jdom':
    case 'jsonkey':
      if (r.chance(0.02)) {
        // events over NOTIFY's 8,000 bytes (sent as references), deep states
        const [open, close] = r.pick([['[', ']'], ['{"a": ', '}']]);
        return json(r.chance(0.5) ? { big: new Long(r.pick([4000, 9000, 40000]), r.pick(['x', 'é'])) }
          : { deep: new Deep(r.pick([100, 1000, 2000]), open, close, 1) });
      }
      return r.chance(0.75) ? json(r.pick(SMALL_DOCS())) : json(stmtDoc(r));
    case 'json': return quote(r.pick(['{}', '{"a": 1}', '{"a":1}', '[]', '{"a": 1, "a": 2}'])) + '::json';
    case 'bytea': return r.pick(["'\\x00'::bytea", "'\\xdeadbeef'::bytea", "''::bytea"]);
    case 'text[]': return r.pick(["ARRAY['a']", "'{}'::text[]", "ARRAY['a', NULL]"]);
    case 'phase': return quote(r.pick(PHASES));
    case 'enum': return quote(r.pick(['a', 'b', 'c', 'chatting', 'building']));
    case 'region': return quote(r.pick(['eu', 'us', 'ap']));
    case 'bool': return r.pick(['true', 'false']);
    case 'tstz': return r.pick(["'epoch'", "'infinity'", 'now()']);
    case 'char4': return quote(r.pick(['a', 'ab  ', 'abcd']));
    default: return 'DEFAULT';
  }
}

// JSON for statements: nothing jsonb's input refuses ("\u0000", lone
// surrogates, numbers beyond numeric), which would fail the statement
// before any trigger fires
function inputSafe(v) {
  const text = encode(v);
  return !/\\u0000|\\ud[89a-f]/i.test(text) && !/1e200000|1e-16384/.test(text);
}

function safeJson(r, make) {
  for (let i = 0; i < 10; i++) {
    const v = make();
    if (inputSafe(v)) return json(v);
  }
  return json({});
}

function stmtDoc(r) {
  for (;;) {
    const d = r.chance(0.5) ? agentState(r) : doc(r);
    if (inputSafe(d)) return d;
  }
}

function keyValue(r, t, st) {
  const type = t.cols[t.key];
  if (type === 'int') return String(r.pick(INT_KEYS));
  if (type === 'jsonkey') return json(r.pick([1, { id: 'x' }, '😀', 2, [1]]));
  return quote(r.pick(TEXT_KEYS).replace(/\u0001/g, ''));
}

// A key no row has: key changes never collide with a unique index
function freshKey(t, st) {
  st.fresh++;
  const type = t.cols[t.key];
  if (type === 'int') return String((st.fresh % 2 ? -1 : 1) * (1000 + st.fresh * 97));
  if (type === 'jsonkey') return json({ fresh: st.fresh });
  return quote('fresh-' + st.fresh);
}

function writable(t) {
  return Object.keys(t.cols).filter((c) => t.cols[c] !== 'generated');
}

function insertStmt(r, t, st) {
  const cols = writable(t).filter((c) => c === t.key || (t.notnull || []).includes(c) || r.chance(0.5));
  if (t.cols.region && !cols.includes('region')) cols.push('region');
  if (!cols.includes(t.key)) cols.push(t.key);
  const rows = 1 + (r.chance(0.3) ? r.int(3) : 0);
  const parts = [`INSERT INTO ${t.name} (${cols.map(quoteIdent).join(', ')}) VALUES `];
  for (let i = 0; i < rows; i++) {
    if (i) parts.push(', ');
    parts.push('(');
    cols.forEach((c, j) => {
      if (j) parts.push(', ');
      parts.push(c === t.key ? (t.view || r.chance(0.3) ? freshKey(t, st) : keyValue(r, t, st)) : colValue(r, t, c, st));
    });
    parts.push(')');
  }
  if (!t.view) parts.push(' ON CONFLICT DO NOTHING');
  return S('f', ...parts);
}

function where(r, t, st) {
  const roll = r.next();
  if (roll < 0.7) return [` WHERE ${quoteIdent(t.key)} = `, keyValue(r, t, st)];
  if (roll < 0.85) return [''];
  return [` WHERE ${quoteIdent(t.key)} IS NOT NULL`];
}

function setClause(r, t, st, c) {
  const type = t.cols[c];
  const q = quoteIdent(c);
  if (c === t.key) return [`${q} = `, freshKey(t, st)];
  if (type === 'jsonb' || type === 'jdom') {
    const roll = r.next();
    const d = r.chance(0.5) ? { a: { b: 1 }, todos: [{ id: 't1' }], n: 1 } : stmtDoc(r);
    if (roll < 0.35) return [`${q} = hx_merge(coalesce(${q}, '{}'), `, safeJson(r, () => finishWrites(r, d, opList(r, d, mergeOp), true)), ')'];
    if (roll < 0.45) return [`${q} = hx_merge(coalesce(${q}, '{}'), `, safeJson(r, () => mergePatch(r, d, 2)), ')'];
    if (roll < 0.55) return [`${q} = hx_patch(coalesce(${q}, '{}'), `, safeJson(r, () => opList(r, d, rfcOp)), ')'];
  }
  if (type === 'phase' || type === 'enum') {
    if (r.chance(0.6)) {
      const m = r.chance(0.9) ? r.pick(MACHINES) : r.pick(['nope', '']);
      const e = r.pick(EVENTS);
      return type === 'enum'
        ? [`${q} = hx_next_phase(${quote(m)}, ${q}::text, ${quote(e)})::fz_phase`]
        : [`${q} = hx_next_phase(${quote(m)}, ${q}, ${quote(e)})`];
    }
  }
  if (t.cols.region && c === 'region') return [`${q} = `, colValue(r, t, c, st), `, k = `, freshKey({ cols: { k: 'int' }, key: 'k' }, st)];
  return [`${q} = `, colValue(r, t, c, st)];
}

function updateStmt(r, t, st) {
  const cols = writable(t);
  const n = 1 + (r.chance(0.3) ? 1 : 0);
  const parts = [`UPDATE ${t.name} SET `];
  const used = new Set();
  for (let i = 0; i < n; i++) {
    // mostly the columns the triggers guard or stream
    let c = st.hot.length && r.chance(0.6) ? r.pick(st.hot) : r.pick(cols);
    if (c === t.key && !r.chance(0.3)) c = r.pick(cols);
    if (used.has(c) || (c === 'region' && used.has('k')) || (c === 'k' && used.has('region'))) continue;
    used.add(c);
    // a second clause the minimiser may drop
    if (used.size > 1) parts.push({ opt: [', ', ...setClause(r, t, st, c)] });
    else parts.push(...setClause(r, t, st, c));
  }
  // a key change under a unique index hits one row at most, with a fresh key
  if ((used.has(t.key) || used.has('region')) && t.unique) {
    parts.push(` WHERE (tableoid, ctid) = (SELECT tableoid, ctid FROM ${t.name} WHERE ${quoteIdent(t.key)} = `, keyValue(r, t, st), ' ORDER BY 1, 2 LIMIT 1)');
  } else if ((used.has(t.key) || used.has('region')) && t.view) {
    parts.push(` WHERE ${quoteIdent(t.key)} = `, keyValue(r, t, st));
  } else parts.push({ opt: where(r, t, st) });
  return S('f', ...parts);
}

function mergeStmt(r, t, st) {
  // MERGE with one source row (a source row may match a target row once)
  const kv = keyValue(r, t, st);
  const cols = writable(t).filter((c) => c !== t.key && c !== 'region' && t.cols[c] !== 'generated');
  const c = r.pick(cols);
  const ins = [t.key].concat((t.notnull || []).filter((x) => x !== t.key));
  const parts = [`MERGE INTO ${t.name} t USING (VALUES (`, kv, `)) s(key) ON t.${quoteIdent(t.key)} = s.key`,
    ` WHEN MATCHED THEN UPDATE SET ${quoteIdent(c)} = `, colValue(r, t, c, st),
    ` WHEN NOT MATCHED THEN INSERT (${ins.map(quoteIdent).join(', ')}) VALUES (s.key`];
  for (const x of ins.slice(1)) parts.push(', ', colValue(r, t, x, st));
  parts.push(')');
  return S('f', ...parts);
}

function deleteStmt(r, t, st) {
  return S('f', `DELETE FROM ${t.name}`, ...where(r, t, st));
}

// Statements where core may fail for its own reasons ('c')
function coreStmt(r, t, st) {
  const cols = Object.keys(t.cols);
  switch (r.int(9)) {
    case 0: return S('c', `ALTER TABLE ${t.name} DROP COLUMN ${quoteIdent(r.pick(cols))}`);
    case 1: return S('c', `ALTER TABLE ${t.name} RENAME COLUMN ${quoteIdent(r.pick(cols))} TO renamed`);
    case 2: return S('c', `ALTER TABLE ${t.name} ALTER COLUMN ${quoteIdent(r.pick(jsonbCols(t).concat(cols)))} TYPE text`);
    case 3: return S('c', 'INSERT INTO hx_transition VALUES (', lit(r.pick(MACHINES)), ', ', lit(r.pick(PHASES)), ', ', lit(r.pick(EVENTS)), ', ', lit(r.pick(PHASES)), ')');
    case 4: return S('c', 'DELETE FROM hx_machine WHERE machine = ', lit(r.pick(MACHINES)));
    case 5: return S('c', 'UPDATE hx_machine SET initial_phase = ', lit(r.pick(PHASES)), ' WHERE machine = ', lit(r.pick(MACHINES)));
    case 6: return S('c', `SET LOCAL hxstate.notify_queue_threshold = ${r.pick(['0', '1', '0.5', '0.000001'])}`);
    case 7: return S('c', `ALTER TABLE ${t.name} DROP CONSTRAINT IF EXISTS ${t.name}_pkey`);
    default: return S('c', 'DELETE FROM hx_transition WHERE machine = ', lit(r.pick(MACHINES)), ' AND event = ', lit(r.pick(EVENTS)));
  }
}

function readStmt(r, t, st) {
  switch (r.int(3)) {
    case 0: return S('f', `SELECT * FROM hx_stream_snapshot(${quote(t.name)}, `, lit(String(r.pick(INT_KEYS.concat(TEXT_KEYS.slice(0, 4))))), ')');
    case 1: return S('f', 'SELECT count(*) FROM hx_stream_events(', lit(r.pick([t.name + ':1', 'fz:1', t.name + ':s-1'])), ')');
    default: return S('f', 'SET CONSTRAINTS ALL IMMEDIATE');
  }
}

// A scenario: triggers created on one table of the pool, then fired
function scenarioInput(r) {
  const t = r.pick(TABLES);
  const st = { fresh: 0, hot: [] };
  const stmts = [];
  const fns = [];
  const ntrig = 1 + (r.chance(0.3) ? r.int(3) : 0);
  const cols = writable(t);
  for (let i = 0; i < ntrig; i++) {
    const { fn, stmt } = createTrigger(r, t, 'fz_trg_' + i);
    fns.push(fn);
    stmts.push(stmt);
    for (const a of stmt.parts[1].args) {
      const c = a.split(':')[0];
      if (cols.includes(c) && !st.hot.includes(c)) st.hot.push(c);
    }
  }
  // TRUNCATE and schema changes fail in core while deferred events wait
  const deferred = stmts.some((s) => /DEFERRED/.test(s.parts[0]));
  const nfire = 2 + r.int(6);
  let role = false;
  for (let i = 0; i < nfire; i++) {
    if (t.role && !role && r.chance(0.2)) {
      stmts.push(S('s', 'SET LOCAL ROLE fz_user'));
      role = true;
    }
    const roll = r.next();
    if (t.view) {
      stmts.push(roll < 0.4 ? insertStmt(r, t, st) : roll < 0.8 ? updateStmt(r, t, st) : deleteStmt(r, t, st));
      continue;
    }
    if (roll < 0.3) stmts.push(insertStmt(r, t, st));
    else if (roll < 0.7) stmts.push(updateStmt(r, t, st));
    else if (roll < 0.78) stmts.push(deleteStmt(r, t, st));
    else if (roll < 0.84) stmts.push(mergeStmt(r, t, st));
    else if (roll < 0.92) stmts.push(readStmt(r, t, st));
    else if (!role) stmts.push(coreStmt(r, t, st));
    else stmts.push(updateStmt(r, t, st));
  }
  if (!t.view && r.chance(0.05)) stmts.push(S(deferred ? 'c' : 'f', `TRUNCATE ${t.name}`));
  return { kind: 'sql', label: 'triggers: ' + [...new Set(fns)].sort().join('+'), table: t.name, stmts };
}

// A replay: one or two rows of fz_replay (tables.js) changed many times,
// through hx_stream, by op lists made against a model of each row
// (hx_patch, hx_merge), large strings set and replaced, the row deleted
// and inserted again (a new snapshot in the middle of the log); then
// fz_replay_check rebuilds states with hx_stream_state_at and compares
// them with the states the row had at those seqs (HXFZ1 when one
// differs).  The op engine's compaction threshold is mostly lowered, so
// that the replays rebuild the tree in the middle of deltas.  A big one
// (rare) keeps the real threshold (64 MB, plus three times the state and
// the delta) and crosses it: eighty changes of a 1 MB member.
function replayInput(r, big) {
  const t = REPLAY;
  const stmts = [];
  const mode = r.pick(['arrays=append', 'arrays=replace', 'arrays=index']);
  stmts.push(S('s', `CREATE TRIGGER fz_stream AFTER INSERT OR UPDATE OR DELETE ON ${t.name} FOR EACH ROW EXECUTE FUNCTION hx_stream('st', 'k', 'payload=none', 'stream=fzr', ${quote(mode)})`));
  const threshold = big ? null : r.pick(['64kB', '64kB', '64kB', '256kB', '1MB', null]);
  if (threshold) stmts.push(S('s', `SET LOCAL hxstate.compaction_threshold = '${threshold}'`));
  const keys = !big && r.chance(0.3) ? [1, 2] : [1];
  const rows = {};
  const insert = (k) => {
    rows[k] = { model: r.chance(0.9) ? stmtDoc(r) : {} };
    if (Array.isArray(rows[k].model) || !isObj(rows[k].model)) rows[k].model = { root: rows[k].model };
    return S('s', `INSERT INTO ${t.name} VALUES (${k}, `, json(rows[k].model), ')');
  };
  for (const k of keys) stmts.push(insert(k));
  const units = ['ab', 'x', '😀', 'é~/', '0123456789'];
  const n = big ? 80 : r.pick([8, 20, 30, 40, 60, 100]);
  for (let i = 0; i < n; i++) {
    const k = r.pick(keys);
    const row = rows[k];
    const where = ` WHERE k = ${k}`;
    if (big) {
      const ops = [{ op: 'replace', path: '/a', value: new Long(500000, 'a' + (i % 10)) }, { op: 'increment', path: '/n', by: 1 }];
      stmts.push(S('f', `UPDATE ${t.name} SET st = hx_merge(st, `, json(ops), ')' + where));
      continue;
    }
    const roll = r.next();
    if (roll < 0.04) {
      stmts.push(S('f', `DELETE FROM ${t.name}` + where));
      stmts.push(insert(k));
    } else if (roll < 0.35) {
      // large strings among small edits: the deltas that fill the tree's memory
      const next = { model: clone(row.model) };
      const ops = [];
      for (let j = 1 + r.int(3); j > 0; j--) {
        const o = { op: 'replace', path: '/fz_big' + r.int(3), value: new Long(r.pick([100, 1000, 5000, 15000]), r.pick(units)) };
        ops.push(o);
        if (isObj(next.model)) setOwn(next.model, o.path.slice(1), o.value);
        if (r.chance(0.5)) ops.push(mergeOp(r, next, 0));
      }
      if (!inputSafe(ops)) continue;
      stmts.push(S('f', `UPDATE ${t.name} SET st = hx_merge(st, `, json(ops), ')' + where));
      row.model = next.model;
    } else {
      // an op list made against the row's model, kept when jsonb can read it
      const merge = r.chance(0.5);
      const next = { model: clone(row.model) };
      const ops = [];
      for (let j = 1 + r.int(5); j > 0; j--) ops.push(merge ? mergeOp(r, next, 0) : rfcOp(r, next, 0));
      if (!inputSafe(ops)) continue;
      stmts.push(S('f', `UPDATE ${t.name} SET st = ${merge ? 'hx_merge' : 'hx_patch'}(st, `, json(ops), ')' + where));
      row.model = next.model;
    }
  }
  const step = Math.max(1, Math.ceil(n / (big ? 2 : 12)));
  stmts.push(S('f', `SELECT fz_replay_check(${step})`));
  return { kind: 'sql', label: big ? 'hx_stream_state_at (long replay)' : 'hx_stream_state_at (replay)', table: t.name, big, stmts };
}

// The other functions, with odd arguments
function miscInput(r) {
  const text = () => r.pick(['', 'x', '😀', 'fz_m', 'agent_session', 'a'.repeat(62), 'a'.repeat(63), 'é'.repeat(40),
    'x'.repeat(10000), 'sessions:s-42', 'ü'.repeat(31) + 'x', 'fz_ünï', "q'uote"]);
  let stmt;
  switch (r.int(7)) {
    case 0: stmt = S('f', 'SELECT hx_next_phase(', lit(r.chance(0.7) ? r.pick(MACHINES) : text()), ', ', lit(r.pick(PHASES)), ', ', lit(r.pick(EVENTS)), ')'); break;
    case 1: stmt = S('f', 'SELECT hx_machine_dot(', lit(r.chance(0.7) ? r.pick(MACHINES) : text()), ')'); break;
    case 2: stmt = S('f', 'SELECT hx_stream_channel(', lit(text()), ')'); break;
    case 3: stmt = S('f', 'SELECT count(*) FROM hx_stream_events(', lit(text()), `, ${r.pick(['0', '-1', '9223372036854775807', '1'])}, ${r.pick(['1000', '0', '1', '2147483647', '-1'])})`); break;
    case 4: stmt = S('f', `SELECT * FROM hx_stream_snapshot(${quote(r.pick(TABLES).name)}, `, lit(text()), ')'); break;
    case 5: stmt = S('f', `SELECT hx_stream_trim(${r.pick(["'0 s'", "'7 days'", "'-1 day'", "'1000000 years'"])}, `, r.chance(0.5) ? 'NULL' : lit(text()), ')'); break;
    default: stmt = S('f', 'SELECT hx_next_phase(', lit(r.pick(MACHINES)), ', ', lit(text()), ', ', lit(text()), ')');
  }
  return { kind: 'sql', label: 'other functions', table: null, stmts: [stmt] };
}

// ---------------------------------------------------------------------
// Input i of a run
// ---------------------------------------------------------------------

// pbig: the chance of a big input (kept rare: they cost milliseconds each)
function input(seed, i, pbig) {
  const r = inputRng(seed, i);
  r.odd = r.chance(0.35);
  let x;
  if (r.chance(pbig)) x = bigInput(r);
  else {
    const roll = r.next();
    if (roll < 0.32) x = patchInput(r);
    else if (roll < 0.64) x = mergeInput(r);
    else if (roll < 0.86) x = diffInput(r);
    else if (roll < 0.96) x = scenarioInput(r);
    else if (roll < 0.9615) x = replayInput(r, false);
    else x = miscInput(r);
  }
  x.id = i;
  return x;
}

module.exports = { input, inputRng, S, json, lit, quoteIdent };
