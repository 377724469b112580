'use strict';
// The Durable Streams endpoint as a gateway runs it in production: as a
// role that is no superuser, with only what gateway/README.md says it
// needs (SELECT on the served tables and hx_event, INSERT on hx_event for
// the log streams it writes, EXECUTE on hx_stream_tables(), and what
// setupDurable's grantTo grants on the endpoint's tables).  It reads a
// table's stream, writes a log stream once per producer seq, and keeps a
// stream of its own; a role without INSERT on hx_event gets 403 for a log
// append, and nothing is kept.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const t = require('./helpers');
const { setupDurable } = require('..');

const DB = 'hx_gateway_durable_role';
let db;

before(async () => {
  db = await t.gatewayDatabase(DB);
  await db.query(`DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hx_ds_gateway') THEN CREATE ROLE hx_ds_gateway LOGIN; END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hx_ds_reader') THEN CREATE ROLE hx_ds_reader LOGIN; END IF;
  END $$`);
  await db.query('GRANT SELECT ON sessions, hx_event TO hx_ds_gateway, hx_ds_reader');
  await db.query('GRANT INSERT ON hx_event TO hx_ds_gateway');
  await db.query('GRANT EXECUTE ON FUNCTION hx_stream_tables() TO hx_ds_gateway, hx_ds_reader');
  await setupDurable(db, { grantTo: 'hx_ds_gateway' });
  await setupDurable(db, { grantTo: 'hx_ds_reader' });
  await db.query("INSERT INTO sessions (session_id, user_id, state) VALUES ('s-1', 'u', '{\"n\": 0}')");
});

after(async () => { await db.end(); });

const options = (user) => ({
  pg: { database: DB, user, application_name: 'hx-ds-role' }, transport: 'listen', authorize: () => true, secret: undefined,
  durable: { logPrefixes: ['@agent:'] },
});

test('a gateway role with what the README grants reads, appends exactly once, and keeps its own streams', async () => {
  const { rows: [su] } = await db.query("SELECT rolsuper FROM pg_roles WHERE rolname = 'hx_ds_gateway'");
  assert.equal(su.rolsuper, false);
  const g = await t.startGateway(DB, options('hx_ds_gateway'));
  try {
    const json = { 'content-type': 'application/json' };
    const read = await fetch(`${g.base}/ds/sessions:s-1?offset=-1`);
    assert.equal(read.status, 200);
    assert.deepEqual((await read.json()).map((e) => e.type), ['STATE_SNAPSHOT']);
    assert.equal((await fetch(`${g.base}/ds/@agent:r-1`, { method: 'PUT', headers: json })).status, 201);
    const p = { ...json, 'producer-id': 'w', 'producer-epoch': '0', 'producer-seq': '0' };
    const body = JSON.stringify({ type: 'CUSTOM', name: 'x', value: 1 });
    assert.equal((await fetch(`${g.base}/ds/@agent:r-1`, { method: 'POST', headers: p, body })).status, 200);
    assert.equal((await fetch(`${g.base}/ds/@agent:r-1`, { method: 'POST', headers: p, body })).status, 204);
    assert.equal((await fetch(`${g.base}/ds/own/one`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'hello' })).status, 201);
    assert.equal(await (await fetch(`${g.base}/ds/own/one`)).text(), 'hello');
    assert.equal((await fetch(`${g.base}/ds/own/one`, { method: 'DELETE' })).status, 204);
    const { rows } = await db.query("SELECT count(*)::int AS n FROM hx_event WHERE stream = '@agent:r-1'");
    assert.equal(rows[0].n, 1);
  } finally {
    await g.close();
  }
});

test('a role without INSERT on hx_event gets 403 for a log append, and nothing is kept', async () => {
  const g = await t.startGateway(DB, options('hx_ds_reader'));
  try {
    const json = { 'content-type': 'application/json' };
    assert.equal((await fetch(`${g.base}/ds/@agent:r-2`, { method: 'PUT', headers: json })).status, 201);
    const p = { ...json, 'producer-id': 'w', 'producer-epoch': '0', 'producer-seq': '0' };
    const r = await fetch(`${g.base}/ds/@agent:r-2`, { method: 'POST', headers: p, body: JSON.stringify({ type: 'CUSTOM', name: 'x', value: 1 }) });
    assert.equal(r.status, 403);
    assert.match((await r.json()).error, /permission denied/);
    const { rows } = await db.query("SELECT count(*)::int AS n FROM hx_durable.producer WHERE stream = '@agent:r-2'");
    assert.equal(rows[0].n, 0, "the producer's state was not kept");
  } finally {
    await g.close();
  }
});
