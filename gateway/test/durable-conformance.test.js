'use strict';
// The Durable Streams conformance suite (@durable-streams/server-conformance-tests,
// run by vitest, as its own command does) against the gateway's durable
// endpoint on a real server: a gateway in this process, its streams in
// PostgreSQL.  Every test of the suite must pass but those listed in
// NOT_RUN, each with its reason (gateway/README.md, "Durable Streams",
// lists them too); a listed test that starts passing, or any other that
// fails, fails this test.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const fs = require('node:fs');
const { spawn } = require('node:child_process');
const t = require('./helpers');
const { setupDurable } = require('..');

const DB = 'hx_gateway_durable_conformance';
const ROOT = path.join(__dirname, '..', '..');

// The suite's "Reserved subscription APIs" (webhooks and pull-wake
// subscriptions under __ds/) run only when a server asks for them
// (runConformanceTests({subscriptions: true})); its runner does not, and
// the endpoint has no subscriptions: webhooks make the server call URLs
// its clients name, which a gateway in front of a database should not.
const NOT_RUN = [
  'Reserved subscription APIs creates and idempotently re-confirms a webhook subscription',
  'Reserved subscription APIs rejects unsafe webhook URLs',
  'Reserved subscription APIs webhook synchronous done auto-acks the wake snapshot',
  'Reserved subscription APIs webhook callback acks and fences stale wake generations',
  'Reserved subscription APIs adds and removes explicit subscription streams',
  'Reserved subscription APIs pull-wake claim, ack, and release use subscription-scoped leases',
];

let db;
let g;

before(async () => {
  db = await t.gatewayDatabase(DB);
  await setupDurable(db);
  g = await t.startGateway(DB, {
    secret: undefined,
    authorize: () => true,
    cors: '*',
    durable: { longPollMs: 5000, sseMs: 30000 },
  });
});

after(async () => {
  if (g) await g.close();
  if (db) await db.end();
});

function runSuite(base, out) {
  const vitest = path.join(ROOT, 'node_modules', '.bin', 'vitest');
  return new Promise((resolve, reject) => {
    const child = spawn(vitest, ['run', '--config', path.join(__dirname, 'conformance.vitest.mjs'), '--reporter=json', `--outputFile=${out}`], {
      cwd: ROOT, env: { ...process.env, CONFORMANCE_TEST_URL: base, FORCE_COLOR: '0' }, stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d) => { err = (err + d).slice(-4000); });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, err }));
  });
}

test('the Durable Streams conformance suite passes against the endpoint, on PostgreSQL', { timeout: 600000 }, async () => {
  const out = path.join(fs.mkdtempSync(path.join(process.env.TMPDIR || '/tmp', 'hx-ds-')), 'conformance.json');
  const { err } = await runSuite(`${g.base}/ds`, out);
  assert.ok(fs.existsSync(out), `vitest wrote no report: ${err}`);
  const report = JSON.parse(fs.readFileSync(out, 'utf8'));
  const results = report.testResults.flatMap((f) => f.assertionResults);
  const failed = results.filter((a) => a.status === 'failed').map((a) => `${a.fullName}: ${(a.failureMessages[0] || '').split('\n')[0]}`);
  const notRun = results.filter((a) => a.status !== 'passed' && a.status !== 'failed').map((a) => a.fullName);
  assert.deepEqual(failed, [], 'every test of the suite passes');
  assert.deepEqual(notRun.sort(), [...NOT_RUN].sort(), 'the tests not run are the subscription APIs, and only those');
  const passed = results.filter((a) => a.status === 'passed').length;
  assert.ok(passed >= 332, `the suite ran its tests (${passed} passed)`);
  // the suite's streams went into the endpoint's tables
  const { rows: [n] } = await db.query('SELECT count(*)::int AS n FROM hx_durable.stream');
  assert.ok(n.n > 100, `the suite's streams are rows of hx_durable.stream (${n.n})`);
});
