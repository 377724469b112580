'use strict';
// The composition law of hx_merge, over 10,000 seeded
// random pairs of op lists W1, W2 made of composing ops on a random base B:
//
//   hx_merge(hx_merge(B, W1), W2) and hx_merge(hx_merge(B, W2), W1) hold the
//   same counters, the same sets and the same appended items (in either
//   order)
//
// and, stronger, each result is the one a simple model of the ops predicts:
// counters are the base plus every increment, lists are the base followed by
// each writer's items in the order applied, sets are the union, upserts of
// distinct keys all land, deletes and merges of distinct members all hold.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { freshDatabase, canonical } = require('./helpers');
const gen = require('./gen');

const PAIRS = 10000;
const BATCH = 500;
const SEED = 7386;

let db;
before(async () => { db = await freshDatabase('hx_merge_props'); });
after(async () => { await db.end(); });

const SET_DOMAIN = [0, 1, 2, 3, 4, 5, 'a', 'b', 'c', 'd', { x: 1 }, [1, 2], null, true];

function base(r) {
  const b = {
    counters: {},
    lists: {},
    sets: {},
    keyed: {},
    trash: {},
    cfg: { keep: gen.value(r, 1) },
    other: gen.value(r, 2),
  };
  for (let i = 0; i < 3; i++) if (r.chance(0.7)) b.counters['c' + i] = r.int(100) - 50;
  for (let i = 0; i < 3; i++) if (r.chance(0.7)) b.lists['l' + i] = Array.from({ length: r.int(3) }, () => gen.value(r, 1));
  for (let i = 0; i < 2; i++) {
    if (r.chance(0.7)) {
      const s = [];
      for (let j = 0; j < r.int(4); j++) {
        const v = r.pick(SET_DOMAIN);
        if (!s.some((x) => same(x, v))) s.push(v);
      }
      b.sets['s' + i] = s;
    }
  }
  for (let i = 0; i < 2; i++) {
    if (r.chance(0.7))
      b.keyed['k' + i] = Array.from({ length: r.int(4) }, (_, j) => ({ id: `base-${j}`, v: gen.scalar(r) }));
  }
  for (let i = 0; i < 4; i++) if (r.chance(0.6)) b.trash['t' + i] = gen.value(r, 1);
  return b;
}

// Writer w's op list: only composing ops, on keys that do not collide
// with the other writer where collisions would be last-write-wins.
function writes(r, w, b) {
  const ops = [];
  const n = 1 + r.int(8);
  for (let i = 0; i < n; i++) {
    switch (r.int(7)) {
      case 0:
        ops.push({ op: 'increment', path: `/counters/c${r.int(5)}`, by: r.chance(0.7) ? r.int(101) - 50 : (r.int(41) - 20) / 4 });
        break;
      case 1:
        ops.push({ op: 'append', path: `/lists/l${r.int(4)}`, items: Array.from({ length: 1 + r.int(3) }, () => gen.value(r, 1)) });
        break;
      case 2:
        ops.push({ op: 'union', path: `/sets/s${r.int(3)}`, items: Array.from({ length: 1 + r.int(3) }, () => r.pick(SET_DOMAIN)) });
        break;
      case 3: {
        // new ids of this writer, and updates of the base ids it owns (w1 even, w2 odd)
        const k = `k${r.int(3)}`;
        const items = [];
        for (let j = 0; j < 1 + r.int(3); j++) {
          if (r.chance(0.3) && b.keyed[k] && b.keyed[k].length) {
            const own = b.keyed[k].filter((_, idx) => idx % 2 === w - 1);
            if (own.length) items.push({ id: r.pick(own).id, v: `w${w}` });
          } else {
            items.push({ id: `w${w}-${i}-${j}`, v: gen.scalar(r) });
          }
        }
        ops.push({ op: 'upsert', path: `/keyed/${k}`, items });
        break;
      }
      case 4:
        ops.push({ op: 'delete', path: `/trash/t${r.int(5)}` });
        break;
      case 5:
        ops.push({ op: 'merge', path: '/cfg', value: { [`w${w}_${r.int(4)}`]: gen.value(r, 1) } });
        break;
      default:
        // RFC 6902 appends compose too
        ops.push({ op: 'add', path: `/lists/l${r.int(4)}/-`, value: gen.value(r, 1) });
        break;
    }
  }
  return ops;
}

function same(a, b) {
  return canonical(a) === canonical(b);
}

// RFC 7386, section 2
function mergePatch(target, patch) {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const t = target !== null && typeof target === 'object' && !Array.isArray(target) ? target : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete t[k];
    else t[k] = mergePatch(t[k], v);
  }
  return t;
}

// What hx_merge must give, computed independently of it
function model(b, lists) {
  const s = JSON.parse(JSON.stringify(b));
  for (const ops of lists) {
    for (const op of ops) {
      const [, area, name] = op.path.split('/');
      switch (op.op) {
        case 'increment': s[area][name] = (s[area][name] ?? 0) + op.by; break;
        case 'append': s[area][name] = (s[area][name] ?? []).concat(op.items); break;
        case 'add': s[area][name] = (s[area][name] ?? []).concat([op.value]); break;
        case 'union': {
          const a = s[area][name] ?? [];
          for (const item of op.items) if (!a.some((x) => same(x, item))) a.push(item);
          s[area][name] = a;
          break;
        }
        case 'upsert': {
          const a = s[area][name] ?? [];
          for (const item of op.items) {
            const at = a.findIndex((x) => x.id === item.id);
            if (at >= 0) a[at] = item; else a.push(item);
          }
          s[area][name] = a;
          break;
        }
        case 'delete': delete s[area][name]; break;
        case 'merge': s.cfg = mergePatch(s.cfg, op.value); break;
        default: throw new Error(op.op);
      }
    }
  }
  return s;
}

// Order-insensitive view: appended items and set members in any order
function unordered(s) {
  const u = JSON.parse(JSON.stringify(s));
  for (const area of ['lists', 'sets']) for (const k of Object.keys(u[area])) u[area][k] = u[area][k].map(canonical).sort();
  for (const k of Object.keys(u.keyed)) u.keyed[k] = u.keyed[k].map(canonical).sort();
  return canonical(u);
}

test(`composition law over ${PAIRS} random pairs of op lists`, async () => {
  const r = gen.rng(SEED);
  let checked = 0;
  for (let start = 0; start < PAIRS; start += BATCH) {
    const cases = [];
    for (let i = 0; i < BATCH; i++) {
      const b = base(r);
      cases.push({ i: start + i, b, w1: writes(r, 1, b), w2: writes(r, 2, b) });
    }
    const { rows } = await db.query(
      `SELECT x.i, hx_merge(hx_merge(x.b, x.w1), x.w2) AS r12, hx_merge(hx_merge(x.b, x.w2), x.w1) AS r21
         FROM jsonb_to_recordset($1::jsonb) AS x(i int, b jsonb, w1 jsonb, w2 jsonb)
        ORDER BY x.i`,
      [JSON.stringify(cases)]);
    for (const row of rows) {
      const { b, w1, w2 } = cases[row.i - start];
      const where = `case ${row.i}: B=${JSON.stringify(b)} W1=${JSON.stringify(w1)} W2=${JSON.stringify(w2)}`;
      // the law: the same counters, sets and appended items, in either order
      assert.equal(unordered(row.r12), unordered(row.r21), where);
      assert.deepStrictEqual(row.r12.counters, row.r21.counters, where);
      // and exactly what the ops mean, in the order applied
      assert.equal(canonical(row.r12), canonical(model(b, [w1, w2])), `W1 then W2, ${where}`);
      assert.equal(canonical(row.r21), canonical(model(b, [w2, w1])), `W2 then W1, ${where}`);
      checked++;
    }
  }
  assert.equal(checked, PAIRS);
});
