'use strict';
// The JSON Patch conformance suite (github.com/json-patch/json-patch-tests)
// run through hx_patch: the npm package json-patch-test-suite always, and the
// newer upstream copy when there is one: the directory HX_JSON_PATCH_TESTS
// names (it must hold tests.json), or else ../shared/json-patch-tests beside
// the repository, where this project's development machines keep it.  Every
// active case must pass: an "expected" case must give exactly that document
// (compared as jsonb), an "error" case must raise, with a SQLSTATE that is a
// user error, never an internal one (XX000) or a lost connection, and a case
// with neither must apply without error.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { freshDatabase } = require('./helpers');

const sources = [
  ['npm json-patch-test-suite', path.dirname(require.resolve('json-patch-test-suite/package.json'))],
];
const named = process.env.HX_JSON_PATCH_TESTS;
const upstream = named || path.resolve(__dirname, '../../../shared/json-patch-tests');
// a directory named must be there: a wrong path fails rather than passing on less
if (named) assert.ok(fs.existsSync(path.join(upstream, 'tests.json')), `HX_JSON_PATCH_TESTS=${upstream} holds tests.json`);
if (fs.existsSync(path.join(upstream, 'tests.json'))) sources.push(['upstream json-patch-tests', upstream]);

// SQLSTATEs hx_patch raises for a bad patch, by class (README: SQLSTATEs)
const USER_ERRORS = new Set(['22023', '22P02', '22033', '2203A', 'XH001']);

let db;
before(async () => { db = await freshDatabase('hx_conformance'); });
after(async () => { await db.end(); });

for (const [label, dir] of sources) {
  for (const file of ['tests.json', 'spec_tests.json']) {
    const cases = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
    const active = cases.filter((c) => 'doc' in c && !c.disabled);
    test(`${label}/${file}: ${active.length} active cases`, async (t) => {
      assert.ok(active.length > 0);
      for (const [i, c] of active.entries()) {
        await t.test(`#${i} ${c.comment || JSON.stringify(c.patch)}`, async () => {
          const doc = JSON.stringify(c.doc);
          const patch = JSON.stringify(c.patch);
          if ('error' in c) {
            await assert.rejects(
              db.query('SELECT hx_patch($1::jsonb, $2::jsonb) AS r', [doc, patch]),
              (err) => {
                assert.ok(USER_ERRORS.has(err.code), `SQLSTATE ${err.code}: ${err.message}`);
                // the error names the failing operation in its context, or
                // says that the patch itself is not an op list
                assert.ok(/^JSON Patch operation \d+/.test(err.where || '') ||
                  /^JSON Patch document/.test(err.message), `${err.message} (${err.where})`);
                return true;
              },
              `expected an error: ${c.error}`);
          } else if (!('expected' in c)) {
            // no expectation but success: these cases are all tests, which
            // leave the document as it was
            const { rows } = await db.query(
              'SELECT hx_patch($1::jsonb, $2::jsonb) = $1::jsonb AS same', [doc, patch]);
            assert.ok(c.patch.every((op) => op.op === 'test'));
            assert.ok(rows[0].same);
          } else {
            const { rows } = await db.query(
              'SELECT hx_patch($1::jsonb, $2::jsonb) AS r, hx_patch($1::jsonb, $2::jsonb) = $3::jsonb AS same',
              [doc, patch, JSON.stringify(c.expected)]);
            assert.ok(rows[0].same, `got ${JSON.stringify(rows[0].r)}, expected ${JSON.stringify(c.expected)}`);
          }
        });
      }
    });
  }
}
