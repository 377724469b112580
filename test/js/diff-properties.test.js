'use strict';
// Property tests of hx_diff and hx_patch over 10,000 seeded random document
// pairs (test/js/gen.js), against PostgreSQL and against fast-json-patch:
//
//   1. for every arrays mode m: hx_patch(a, hx_diff(a, b, m)) = b;
//   2. fast-json-patch, validating strictly, applies hx_diff(a, b, m) to a
//      and reaches b (so the patches are valid RFC 6902 for another applier:
//      "add" for new members, escaped pointers, indexes in range);
//   3. hx_patch applies fast-json-patch's compare(a, b) to a and reaches b;
//   4. equal documents give [], and the same pair gives the same patch twice.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const jsonpatch = require('fast-json-patch');
const { freshDatabase } = require('./helpers');
const gen = require('./gen');

const PAIRS = 10000;
const BATCH = 500;
const MODES = ['append', 'replace', 'index'];
const SEED = 20261122;

let db;
before(async () => { db = await freshDatabase('hx_diff_props'); });
after(async () => { await db.end(); });

function clone(v) {
  return v === undefined ? v : JSON.parse(JSON.stringify(v));
}

// fast-json-patch's compare works on two objects or two arrays only
function comparable(a, b) {
  const kind = (v) => (Array.isArray(v) ? 'array' : v !== null && typeof v === 'object' ? 'object' : 'scalar');
  return kind(a) !== 'scalar' && kind(a) === kind(b);
}

test(`hx_diff round trips and agrees with fast-json-patch on ${PAIRS} random pairs`, async () => {
  const r = gen.rng(SEED);
  let checked = 0;
  let nonEmpty = 0;
  let compared = 0;
  for (let start = 0; start < PAIRS; start += BATCH) {
    const pairs = [];
    for (let i = 0; i < BATCH; i++) {
      const [a, b] = gen.pair(r);
      const c = comparable(a, b) ? jsonpatch.compare(clone(a), clone(b)) : null;
      pairs.push({ i: start + i, a, b, c });
    }
    const { rows } = await db.query(
      `SELECT x.i,
              hx_diff(x.a, x.b, 'append') AS append,
              hx_diff(x.a, x.b, 'replace') AS replace,
              hx_diff(x.a, x.b, 'index') AS index,
              hx_patch(x.a, hx_diff(x.a, x.b, 'append')) = x.b AS append_ok,
              hx_patch(x.a, hx_diff(x.a, x.b, 'replace')) = x.b AS replace_ok,
              hx_patch(x.a, hx_diff(x.a, x.b, 'index')) = x.b AS index_ok,
              x.c IS NULL OR hx_patch(x.a, x.c) = x.b AS compare_ok,
              hx_diff(x.a, x.b, 'index') = hx_diff(x.a, x.b, 'index') AS deterministic,
              (x.a = x.b) = (hx_diff(x.a, x.b) = '[]') AS empty_iff_equal
         FROM (SELECT i, a::jsonb AS a, b::jsonb AS b, c::jsonb AS c
                 FROM jsonb_to_recordset($1::jsonb) AS t(i int, a text, b text, c text)) x
        ORDER BY x.i`,
      // documents travel as JSON text, so that a JSON null root stays JSON null
      [JSON.stringify(pairs.map((p) => ({ i: p.i, a: JSON.stringify(p.a), b: JSON.stringify(p.b),
        c: p.c && JSON.stringify(p.c) })))]);
    assert.equal(rows.length, BATCH);
    for (const row of rows) {
      const { a, b, c } = pairs[row.i - start];
      const where = `pair ${row.i}: a=${JSON.stringify(a)} b=${JSON.stringify(b)}`;
      for (const m of MODES) {
        assert.ok(row[`${m}_ok`], `hx_patch(a, hx_diff(a, b, '${m}')) != b for ${where}: ${JSON.stringify(row[m])}`);
        let applied;
        try {
          applied = jsonpatch.applyPatch(clone(a), clone(row[m]), true, false).newDocument;
        } catch (e) {
          assert.fail(`fast-json-patch rejects hx_diff(a, b, '${m}') = ${JSON.stringify(row[m])} for ${where}: ${e.message}`);
        }
        assert.deepStrictEqual(applied, b, `fast-json-patch result differs, mode ${m}, ${where}`);
      }
      assert.ok(row.compare_ok, `hx_patch(a, compare(a, b)) != b for ${where}: ${JSON.stringify(c)}`);
      assert.ok(row.deterministic, where);
      assert.ok(row.empty_iff_equal, where);
      if (row.append.length > 0) nonEmpty++;
      if (c) compared++;
      checked++;
    }
  }
  assert.equal(checked, PAIRS);
  // the generator must produce real changes, not mostly equal pairs
  assert.ok(nonEmpty > PAIRS * 0.8, `only ${nonEmpty} pairs differ`);
  assert.ok(compared > PAIRS * 0.8, `only ${compared} pairs cross-checked with compare`);
});

test('append mode emits "add /-" per appended item, and nothing else', async () => {
  const r = gen.rng(SEED + 1);
  for (let n = 0; n < 200; n++) {
    const log = Array.from({ length: r.int(4) }, () => gen.value(r, 2));
    const items = Array.from({ length: 1 + r.int(4) }, () => gen.value(r, 2));
    const a = { other: gen.value(r, 2), log };
    const b = { other: a.other, log: log.concat(items) };
    const { rows } = await db.query('SELECT hx_diff($1::jsonb, $2::jsonb) AS p',
      [JSON.stringify(a), JSON.stringify(b)]);
    assert.deepStrictEqual(rows[0].p, items.map((value) => ({ op: 'add', path: '/log/-', value })));
  }
});
