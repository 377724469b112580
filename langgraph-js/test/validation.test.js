'use strict';
// @langchain/langgraph-checkpoint-validation on HxSaver, in its own
// runner (vitest, test/validation): its validate() suite (put, putWrites,
// getTuple, list, deleteThread, each in the root and a child namespace)
// and its getDeltaChannelHistory tests.  Each of its tests is a subtest
// here, failing with the suite's own message; none may be skipped.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { setupSchema } = require('./helpers');

const SCHEMA = 'lgjs_validation';

test('LangGraph.js checkpointer validation suite', { timeout: 600000 }, async (t) => {
  await setupSchema(SCHEMA);
  const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'hx-validation-'));
  const out = path.join(dir, 'report.json');
  const vitest = path.join(path.dirname(require.resolve('vitest/package.json')), 'vitest.mjs');
  const log = await new Promise((resolve) => {
    execFile(
      process.execPath,
      [vitest, 'run', '--config', path.join(__dirname, 'validation', 'vitest.config.mjs'), '--reporter=json', `--outputFile=${out}`],
      { env: { ...process.env, HX_VALIDATION_SCHEMA: SCHEMA }, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => resolve(`${stdout}${stderr}${err ? `\n(exit ${err.code})` : ''}`),
    );
  });
  assert.ok(fs.existsSync(out), `vitest wrote no report:\n${log}`);
  const report = JSON.parse(fs.readFileSync(out, 'utf8'));
  fs.rmSync(dir, { recursive: true, force: true });
  const results = report.testResults.flatMap((/** @type {any} */ f) => f.assertionResults);
  // the suite as released: 718 tests in validate(), 8 of getDeltaChannelHistory
  assert.equal(results.length, 726, `the suite ran ${results.length} tests:\n${log.slice(-4000)}`);
  for (const r of results) {
    await t.test(r.fullName, () => {
      assert.equal(r.status, 'passed', (r.failureMessages || []).join('\n') || `status ${r.status}`);
    });
  }
  assert.equal(report.numFailedTestSuites, 0, log.slice(-4000));
});
