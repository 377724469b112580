'use strict';
// test/fuzz/ast.js: the fuzzer's inputs as trees, so that they can be
// written out exactly, rendered as compact SQL, and shrunk.
//
// A JSON value is a plain JavaScript value (null, boolean, number, string,
// array, object) or one of these nodes, for what plain values cannot say
// or would say too verbosely:
//
//   Raw(text)             a JSON fragment written as is: numbers such as
//                         1.0e-400, -0 or 1e308, and broken syntax
//   Pairs([[k, v], ...])  an object with its members in this order,
//                         duplicate keys allowed
//   Deep(n, open, close, leaf)
//                         open n times, the leaf, close n times: nesting
//                         thousands of levels deep without recursion
//   Rep(n, kind)          an array of n generated elements (kind: int,
//                         str, obj, null, dup: all "dup", sameid: objects
//                         that share "id": 1)
//   RepObj(n)             an object of n members "k0": 0, "k1": 1, ...
//   Long(n, unit)         a string of unit repeated n times
//
// Rules: encode() never recurses into Deep, Rep, RepObj or Long, so any
// size works; sqlText() turns the same tree into a SQL text expression
// whose size does not grow with those nodes (repeat(), generate_series());
// shrinks() lists smaller variants of a tree, simplest first, for the
// minimiser.  Texts never contain a NUL character: JSON's "\u0000" is six
// characters of text.

class Raw { constructor(text) { this.text = text; } }
class Pairs { constructor(pairs) { this.pairs = pairs; } }
class Deep {
  constructor(n, open, close, leaf) { this.n = n; this.open = open; this.close = close; this.leaf = leaf; }
}
class Rep { constructor(n, kind) { this.n = n; this.kind = kind; } }
class RepObj { constructor(n) { this.n = n; } }
class Long { constructor(n, unit) { this.n = n; this.unit = unit; } }

// JSON.stringify escapes control characters (U+0000 becomes \u0000) and,
// since Node 12, lone surrogates; the text never holds a raw NUL.
function str(s) {
  return JSON.stringify(s);
}

function repItem(kind, i) {
  switch (kind) {
    case 'int': return String(i);
    case 'str': return '"s' + i + '"';
    case 'obj': return '{"id": ' + i + ', "v": "x' + i + '"}';
    case 'null': return 'null';
    case 'sameid': return '{"id": 1, "v": ' + i + '}';
    default: return '"dup"';
  }
}

// The JSON text of a tree, appended to out (an array of strings)
function encodeTo(v, out) {
  if (v === null || typeof v === 'boolean') { out.push(String(v)); return; }
  if (typeof v === 'number') { out.push(Number.isFinite(v) ? JSON.stringify(v) : 'null'); return; }
  if (typeof v === 'string') { out.push(str(v)); return; }
  if (Array.isArray(v)) {
    out.push('[');
    v.forEach((x, i) => { if (i) out.push(', '); encodeTo(x, out); });
    out.push(']');
    return;
  }
  if (v instanceof Raw) { out.push(v.text); return; }
  if (v instanceof Pairs) {
    out.push('{');
    v.pairs.forEach(([k, x], i) => { if (i) out.push(', '); out.push(str(k), ': '); encodeTo(x, out); });
    out.push('}');
    return;
  }
  if (v instanceof Deep) {
    out.push(v.open.repeat(v.n));
    encodeTo(v.leaf, out);
    out.push(v.close.repeat(v.n));
    return;
  }
  if (v instanceof Rep) {
    const parts = new Array(v.n);
    for (let i = 0; i < v.n; i++) parts[i] = repItem(v.kind, i);
    out.push('[' + parts.join(', ') + ']');
    return;
  }
  if (v instanceof RepObj) {
    const parts = new Array(v.n);
    for (let i = 0; i < v.n; i++) parts[i] = '"k' + i + '": ' + i;
    out.push('{' + parts.join(', ') + '}');
    return;
  }
  if (v instanceof Long) {
    out.push('"' + str(v.unit).slice(1, -1).repeat(v.n) + '"');
    return;
  }
  // a plain object
  out.push('{');
  Object.keys(v).forEach((k, i) => { if (i) out.push(', '); out.push(str(k), ': '); encodeTo(v[k], out); });
  out.push('}');
}

function encode(v) {
  const out = [];
  encodeTo(v, out);
  return out.join('');
}

// A SQL string literal (standard_conforming_strings is on)
function quote(s) {
  return "'" + String(s).replace(/'/g, "''") + "'";
}

// The parts of a SQL text expression: {lit} texts and {sql} expressions
function sqlParts(v, out) {
  if (v instanceof Deep) {
    if (v.n > 8) {
      out.push({ sql: `repeat(${quote(v.open)}, ${v.n})` });
      sqlParts(v.leaf, out);
      out.push({ sql: `repeat(${quote(v.close)}, ${v.n})` });
    } else {
      out.push({ lit: v.open.repeat(v.n) });
      sqlParts(v.leaf, out);
      out.push({ lit: v.close.repeat(v.n) });
    }
    return;
  }
  if (v instanceof Rep && v.n > 8) {
    const item = {
      int: 'i::text', str: `'"s' || i || '"'`, obj: `'{"id": ' || i || ', "v": "x' || i || '"}'`,
      null: "'null'", dup: `'"dup"'`, sameid: `'{"id": 1, "v": ' || i || '}'`,
    }[v.kind] || `'"dup"'`;
    out.push({ lit: '[' }, { sql: `(SELECT string_agg(${item}, ', ') FROM generate_series(0, ${v.n - 1}) i)` }, { lit: ']' });
    return;
  }
  if (v instanceof RepObj && v.n > 8) {
    out.push({ lit: '{' }, { sql: `(SELECT string_agg('"k' || i || '": ' || i, ', ') FROM generate_series(0, ${v.n - 1}) i)` }, { lit: '}' });
    return;
  }
  if (v instanceof Long && v.n > 64) {
    out.push({ lit: '"' }, { sql: `repeat(${quote(str(v.unit).slice(1, -1))}, ${v.n})` }, { lit: '"' });
    return;
  }
  if (Array.isArray(v)) {
    out.push({ lit: '[' });
    v.forEach((x, i) => { if (i) out.push({ lit: ', ' }); sqlParts(x, out); });
    out.push({ lit: ']' });
    return;
  }
  if (v instanceof Pairs) {
    out.push({ lit: '{' });
    v.pairs.forEach(([k, x], i) => { if (i) out.push({ lit: ', ' }); out.push({ lit: str(k) + ': ' }); sqlParts(x, out); });
    out.push({ lit: '}' });
    return;
  }
  if (v !== null && typeof v === 'object' && !(v instanceof Raw) && !(v instanceof Rep) &&
      !(v instanceof RepObj) && !(v instanceof Long)) {
    out.push({ lit: '{' });
    Object.keys(v).forEach((k, i) => { if (i) out.push({ lit: ', ' }); out.push({ lit: str(k) + ': ' }); sqlParts(v[k], out); });
    out.push({ lit: '}' });
    return;
  }
  out.push({ lit: encode(v) });
}

// A SQL expression of type text whose value is encode(v)
function sqlText(v) {
  const parts = [];
  sqlParts(v, parts);
  const merged = [];
  for (const p of parts) {
    const last = merged[merged.length - 1];
    if (p.lit !== undefined && last && last.lit !== undefined) last.lit += p.lit;
    else merged.push({ ...p });
  }
  const exprs = merged.filter((p) => p.sql !== undefined || p.lit !== '').map((p) => (p.sql !== undefined ? p.sql : quote(p.lit)));
  if (exprs.length === 0) return "''";
  return exprs.length === 1 ? exprs[0] : '(' + exprs.join(' || ') + ')';
}

// ---------------------------------------------------------------------
// Shrinking
// ---------------------------------------------------------------------

// o[k] = x, also for k = "__proto__" (an own member, not the prototype)
function setOwn(o, k, x) {
  if (k === '__proto__') Object.defineProperty(o, k, { value: x, enumerable: true, writable: true, configurable: true });
  else o[k] = x;
}

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype;
}

// Smaller variants of an array's element list: halves and quarters
// removed, then single elements removed
function listShrinks(xs) {
  const out = [];
  const n = xs.length;
  for (let chunk = Math.max(1, n >> 1); chunk >= 1; chunk >>= 1) {
    for (let start = 0; start < n; start += chunk) {
      out.push(xs.slice(0, start).concat(xs.slice(start + chunk)));
      if (out.length > 64) return out;
    }
    if (chunk === 1) break;
  }
  return out;
}

// Smaller variants of a string
function stringShrinks(s) {
  const out = [];
  if (s.length === 0) return out;
  out.push('');
  if (s.length > 1) {
    out.push(s.slice(0, s.length >> 1), s.slice(s.length >> 1));
    for (let i = 0; i < Math.min(s.length, 16); i++) out.push(s.slice(0, i) + s.slice(i + 1));
  }
  return out;
}

// Smaller variants of a tree, simplest first (a generator, lazily)
function* shrinks(v) {
  if (v === null) return;
  if (typeof v !== 'object' || v instanceof Raw) {
    // a scalar: simpler scalars
    if (v !== 0 && v !== null) yield 0;
    if (typeof v === 'string') for (const s of stringShrinks(v)) yield s;
    if (v instanceof Raw) {
      for (const s of stringShrinks(v.text)) yield new Raw(s);
    }
    if (typeof v === 'number' && !Number.isInteger(v)) yield Math.trunc(v);
    return;
  }
  if (v instanceof Deep) {
    yield v.leaf;
    if (v.n > 1) {
      yield new Deep(v.n >> 1, v.open, v.close, v.leaf);
      yield new Deep(v.n - 1, v.open, v.close, v.leaf);
    }
    for (const l of shrinks(v.leaf)) yield new Deep(v.n, v.open, v.close, l);
    return;
  }
  if (v instanceof Rep || v instanceof RepObj) {
    yield v instanceof Rep ? [] : {};
    if (v.n > 1) {
      yield v instanceof Rep ? new Rep(v.n >> 1, v.kind) : new RepObj(v.n >> 1);
      yield v instanceof Rep ? new Rep(v.n - 1, v.kind) : new RepObj(v.n - 1);
    }
    if (v instanceof Rep && v.kind !== 'int') yield new Rep(v.n, 'int');
    return;
  }
  if (v instanceof Long) {
    yield '';
    if (v.n > 1) { yield new Long(v.n >> 1, v.unit); yield new Long(v.n - 1, v.unit); }
    if (v.unit !== 'x') yield new Long(v.n, 'x');
    return;
  }
  if (Array.isArray(v)) {
    if (v.length === 0) return;
    for (const xs of listShrinks(v)) yield xs;
    for (let i = 0; i < v.length; i++) {
      for (const x of shrinks(v[i])) {
        const c = v.slice();
        c[i] = x;
        yield c;
      }
    }
    return;
  }
  if (v instanceof Pairs) {
    if (v.pairs.length === 0) return;
    const keys = v.pairs.map((p) => p[0]);
    if (new Set(keys).size === keys.length) {
      const o = {};
      for (const [k, x] of v.pairs) setOwn(o, k, x);
      yield o;
    }
    for (const ps of listShrinks(v.pairs)) yield new Pairs(ps);
    for (let i = 0; i < v.pairs.length; i++) {
      for (const x of shrinks(v.pairs[i][1])) {
        const c = v.pairs.slice();
        c[i] = [c[i][0], x];
        yield new Pairs(c);
      }
      for (const k of stringShrinks(v.pairs[i][0])) {
        const c = v.pairs.slice();
        c[i] = [k, c[i][1]];
        yield new Pairs(c);
      }
    }
    return;
  }
  if (isPlainObject(v)) {
    const keys = Object.keys(v);
    if (keys.length === 0) return;
    for (const ks of listShrinks(keys)) {
      const o = {};
      for (const k of ks) setOwn(o, k, v[k]);
      yield o;
    }
    for (const k of keys) {
      for (const x of shrinks(v[k])) {
        const o = { ...v };
        setOwn(o, k, x);
        yield o;
      }
    }
  }
}

// The tree with f applied to every string value (not to keys)
function mapStrings(v, f) {
  if (typeof v === 'string') return f(v);
  if (v === null || typeof v !== 'object' || v instanceof Raw || v instanceof Rep || v instanceof RepObj || v instanceof Long) return v;
  if (v instanceof Deep) return new Deep(v.n, v.open, v.close, mapStrings(v.leaf, f));
  if (Array.isArray(v)) return v.map((x) => mapStrings(x, f));
  if (v instanceof Pairs) return new Pairs(v.pairs.map(([k, x]) => [k, mapStrings(x, f)]));
  const o = {};
  for (const k of Object.keys(v)) setOwn(o, k, mapStrings(v[k], f));
  return o;
}

// Smaller variants of every string that occurs more than once, replaced
// everywhere at once (two ops on one path shrink together)
function* sharedStringShrinks(trees) {
  const counts = new Map();
  for (const t of trees) mapStrings(t, (s) => { counts.set(s, (counts.get(s) || 0) + 1); return s; });
  const shared = [...counts.entries()].filter(([s, n]) => n > 1 && s.length > 0).map(([s]) => s).slice(0, 12);
  for (const s of shared) {
    for (const t of stringShrinks(s)) yield trees.map((tree) => mapStrings(tree, (x) => (x === s ? t : x)));
  }
}

// A measure of size, for "smaller" (the minimiser keeps only strict
// decreases, so it terminates)
function weight(v) {
  if (v === null || typeof v !== 'object') return 1 + (typeof v === 'string' ? v.length : 0);
  if (v instanceof Raw) return 1 + v.text.length;
  if (v instanceof Deep) return 2 + v.n * (v.open.length + v.close.length) + weight(v.leaf);
  if (v instanceof Rep) return 2 + v.n * 4 + (v.kind === 'int' ? 0 : 1);
  if (v instanceof RepObj) return 2 + v.n * 6;
  if (v instanceof Long) return 2 + v.n * v.unit.length + (v.unit === 'x' ? 0 : 1);
  if (Array.isArray(v)) return v.reduce((s, x) => s + weight(x), 2);
  if (v instanceof Pairs) return v.pairs.reduce((s, [k, x]) => s + 1 + k.length + weight(x), 3);
  return Object.keys(v).reduce((s, k) => s + 1 + k.length + weight(v[k]), 2);
}

module.exports = {
  Raw, Pairs, Deep, Rep, RepObj, Long,
  encode, sqlText, quote, shrinks, stringShrinks, listShrinks, weight, setOwn, mapStrings, sharedStringShrinks,
};
