'use strict';
// ag-ui-validate, the AG-UI protocol's conformance validator (PyPI, written
// by others), over every path a client can take:
//   - live, against POST /agents: a first join, a reconnect behind and one
//     up to date (Last-Event-ID), a stream that has ended, and a run of the
//     run hook that ends with outcome interrupt;
//   - recorded, GET /streams (what an EventSource gets), each capture
//     ending as the gateway ends it: a first join ended by a restart, the
//     reconnects after it (behind, up to date) ended by the next close, a
//     trimmed log then the stream's end, a join of an ended stream.
// Every report must have no error and no warning.  Paths that begin with
// the state (a STATE_SNAPSHOT) declare the feature shared-state, which
// asks the validator to check that they do; a reconnect continues a state
// the client has (AG-UI: a delta's base is the client's), so it does not
// declare it, and the validator notes (info AGUI301) that the base of its
// first delta is not on that stream.  The reports are kept
// under test/artifacts/ag-ui-validate/, and a line per path is printed.
//
// The validator comes from gateway/test/requirements.txt (pinned, with
// hashes), in the venv whose bin directory HX_AGUI_VENV names (test/suite
// builds it with test/lib/python.sh); without it the test fails.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFile } = require('node:child_process');
const t = require('./helpers');
const { mintToken } = require('..');

const DB = 'hx_gateway_validate';
const VENV = process.env.HX_AGUI_VENV;
const BIN = VENV && fs.existsSync(path.join(VENV, 'ag-ui-validate')) ? path.join(VENV, 'ag-ui-validate') : null;
const OUT = path.join(__dirname, '..', '..', 'test', 'artifacts', 'ag-ui-validate');
let db;

before(async () => {
  db = await t.gatewayDatabase(DB);
});
after(async () => { await db.end(); });

// one of the paths runs the run hook: tokens that may
const bearer = (key) => `Bearer ${mintToken(t.SECRET, `sessions:${key}`, { scopes: ['read', 'run'] })}`;
const figures = [];

/** Run ag-ui-validate on args; its JSON report. */
function validate(name, args) {
  assert.ok(BIN, `no ag-ui-validate in HX_AGUI_VENV (${VENV || 'unset'}): pip install --require-hashes -r gateway/test/requirements.txt`);
  fs.mkdirSync(OUT, { recursive: true });
  return new Promise((resolve, reject) => {
    execFile(BIN, ['--json', '--no-color', ...args], { maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      let report;
      try {
        report = JSON.parse(stdout);
      } catch (e) {
        reject(new Error(`${name}: ag-ui-validate gave no report (${err && err.code}): ${stderr}`));
        return;
      }
      fs.writeFileSync(path.join(OUT, `${name}.json`), JSON.stringify(report, null, 2));
      const rules = [...new Set(report.diagnostics.map((d) => `${d.rule}:${d.severity}`))].join(' ') || '-';
      const s = report.summary;
      figures.push(`${name}: ${report.eventCount} events, ${s.errors} errors, ${s.warnings} warnings, ${s.info} info (${rules})`);
      resolve(report);
    });
  });
}

function clean(name, report) {
  const bad = report.diagnostics.filter((d) => d.severity === 'error' || d.severity === 'warning');
  assert.deepEqual(bad.map((d) => `${d.rule} ${d.message}`), [], `${name}: no error, no warning`);
  assert.ok(report.eventCount >= 2, `${name}: it saw the events`);
}

const features = (name) => (/reconnect|ended/.test(name) ? [] : ['--features', 'shared-state']);

/** Validate a recorded GET /streams response (its raw text, as captured). */
async function recorded(name, c) {
  fs.mkdirSync(OUT, { recursive: true });
  const file = path.join(OUT, `${name}.sse`);
  fs.writeFileSync(file, c.text);
  clean(name, await validate(name, [...features(name), file]));
}

/** Validate POST /agents/sessions/<key> live, with extra headers. */
async function live(name, base, key, headers = []) {
  const args = [...features(name), '--timeout', '20', '--header', `Authorization: ${bearer(key)}`];
  for (const h of headers) args.push('--header', h);
  const report = await validate(name, [...args, `${base}/agents/sessions/${encodeURIComponent(key)}`]);
  clean(name, report);
  return report;
}

test('ag-ui-validate: every path, live against POST /agents and recorded from GET /streams', async () => {
  let g = await t.startGateway(DB, { appName: 'hx-gateway-validate', maxRunMs: 1000 });
  const port = g.port;
  const key = 's-valid';
  const url = () => `${g.base}/streams/sessions/${key}`;
  const merge = (i) => t.merge(db, 'sessions', key, [
    { op: 'append', path: '/messages', items: [{ type: i % 2 ? 'ai' : 'human', id: `v${i}`, content: `m${i}` }] },
    { op: 'increment', path: '/n', by: 1 }]);
  try {
    await db.query('INSERT INTO sessions (session_id, user_id, state) VALUES ($1, $2, $3)', [key, 'u', '{"messages": [], "n": 0}']);
    await merge(0);
    // live: a first join; a reconnect behind and one up to date
    await live('live-first-join', g.base, key);
    const head = await t.lastSeq(db, `sessions:${key}`);
    await merge(1);
    await merge(2);
    await live('live-reconnect-behind', g.base, key, [`Last-Event-ID: ${head}`]);
    await live('live-reconnect-up-to-date', g.base, key, [`Last-Event-ID: ${await t.lastSeq(db, `sessions:${key}`)}`]);

    // recorded: a first join, ended by a restart
    const join = t.sse(url(), { headers: { authorization: bearer(key) } });
    await t.waitFor(() => join.events().length === 3, 'the prelude');
    await merge(3);
    await t.waitFor(() => join.seqEvents().length === 2, 'a delta');
    await g.close();
    await t.ended(join);
    await merge(4);
    g = await t.startGateway(DB, { appName: 'hx-gateway-validate', maxRunMs: 1000 }, port);
    // the reconnects after the restart, behind and up to date, ended by the next close
    const behind = t.sse(url(), { headers: { authorization: bearer(key), 'last-event-id': join.lastId() } });
    await t.waitFor(() => behind.events().length === 3, 'the events after Last-Event-ID');
    const upToDate = t.sse(url(), { headers: { authorization: bearer(key), 'last-event-id': behind.lastId() } });
    await t.waitFor(() => upToDate.events().length === 2, 'the prelude of an up-to-date reconnect');
    await g.close();
    await t.ended(behind);
    await t.ended(upToDate);
    g = await t.startGateway(DB, { appName: 'hx-gateway-validate', maxRunMs: 1000 }, port);
    // a trimmed log, then the stream's end
    await merge(5);
    await merge(6);
    await db.query("SELECT hx_stream_trim('0 seconds')");
    const trimmed = t.sse(url(), { headers: { authorization: bearer(key), 'last-event-id': upToDate.lastId() || behind.lastId() } });
    await t.waitFor(() => trimmed.events().length === 3, 'a fresh snapshot');
    await db.query('DELETE FROM sessions WHERE session_id = $1', [key]);
    await t.ended(trimmed);
    const late = t.sse(url(), { headers: { authorization: bearer(key) } });
    await t.ended(late);
    for (const [name, c] of [['recorded-first-join-then-restart', join], ['recorded-reconnect-behind', behind],
      ['recorded-reconnect-up-to-date', upToDate], ['recorded-trimmed-then-stream-end', trimmed], ['recorded-ended-stream', late]]) {
      await recorded(name, c);
    }
    // live: a stream that has ended
    await live('live-ended-stream', g.base, key);
  } finally {
    await g.close();
  }
});

test('ag-ui-validate: a run of the run hook that ends with outcome interrupt', async () => {
  const run = async (input, target) => {
    const c = await t.connect(DB);
    try {
      await c.query('UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2', [JSON.stringify([
        { op: 'append', path: '/messages', items: [{ type: 'ai', id: 'a1', content: 'May I?' }] },
        { op: 'replace', path: '/__interrupt__', value: [{ id: 'int-v', value: { reason: 'confirmation', message: 'May I?' } }] },
      ]), target.key]);
    } finally {
      await c.end();
    }
  };
  const g = await t.startGateway(DB, { appName: 'hx-gateway-validate-hook', run });
  try {
    await db.query("INSERT INTO sessions (session_id, user_id, state) VALUES ('s-hook', 'u', '{\"messages\": []}')");
    const report = await live('live-run-hook-interrupt', g.base, 's-hook');
    assert.equal(report.features['human-in-the-loop'], 'exercised');
  } finally {
    await g.close();
    console.log(`ag-ui-validate ${figures.length} paths:\n  ${figures.join('\n  ')}`);
  }
});
