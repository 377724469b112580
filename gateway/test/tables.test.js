'use strict';
// Which tables a gateway may serve together: two tables whose streams
// would be one (the same stream prefix: same-named tables of two schemas
// before hxstate 0.6.0 named streams by schema, or two triggers with the
// same stream=<name>) are refused at start, since a token for one table's
// key would read the other's events.  Where the extension names them
// apart, a token for one table's key reads that table's row only.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const t = require('./helpers');
const { mintToken } = require('..');

const DB = 'hx_gateway_tables';
const MARK = 'public-secret-marker';
let db;

before(async () => {
  db = await t.freshDatabase(DB);
  await t.sessionsTable(db);
  await db.query('CREATE SCHEMA tenant_b');
  await db.query('CREATE TABLE tenant_b.sessions (session_id text PRIMARY KEY, state jsonb NOT NULL DEFAULT \'{}\')');
  await db.query("CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON tenant_b.sessions FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id')");
  await db.query('CREATE TABLE a (k text PRIMARY KEY, state jsonb)');
  await db.query('CREATE TABLE b (k text PRIMARY KEY, state jsonb)');
  await db.query("CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON a FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'k', 'stream=shared')");
  await db.query("CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON b FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'k', 'stream=shared')");
  await db.query(`INSERT INTO sessions (session_id, user_id, state) VALUES ('s-99', 'alice', '{"m": "${MARK}"}')`);
  await db.query('CREATE TABLE c (k text PRIMARY KEY, state jsonb)');
  await db.query("CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON c FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'k', 'stream=cee')");
  await db.query(`INSERT INTO c VALUES ('k1', '{"n": 1}')`);
});
after(async () => { await db.end(); });

test('two tables with one stream prefix (stream=shared): the gateway refuses to start', async () => {
  await assert.rejects(t.startGateway(DB, { tables: ['a', 'b'], appName: 'hx-gateway-tables' }),
    /the tables a and b both name their streams "shared:<key>"/);
});

test('same-named tables of two schemas: refused where their streams would be one, kept apart where not', async () => {
  const { rows: [probe] } = await db.query("SELECT stream FROM hx_stream_snapshot('tenant_b.sessions', 's-99')");
  const apart = probe.stream !== 'sessions:s-99';
  if (!apart) {
    await assert.rejects(t.startGateway(DB, { tables: ['sessions', 'tenant_b.sessions'], appName: 'hx-gateway-tables' }),
      /the tables sessions and tenant_b.sessions both name their streams "sessions:<key>"/);
    return;
  }
  // hxstate names streams by schema: a token for tenant_b's s-99 reads nothing of public's
  const g = await t.startGateway(DB, { tables: ['sessions', 'tenant_b.sessions'], appName: 'hx-gateway-tables' });
  try {
    await db.query("INSERT INTO tenant_b.sessions VALUES ('s-99', '{\"tenant\": \"b\"}')");
    const c = t.sse(`${g.base}/streams/tenant_b.sessions/s-99`, {
      headers: { authorization: `Bearer ${mintToken(t.SECRET, 'tenant_b.sessions:s-99')}`, 'last-event-id': '0' },
    });
    await t.waitFor(() => c.seqEvents().length >= 1, 'tenant_b\'s row');
    await t.sleep(200);
    assert.ok(!c.text.includes(MARK), 'nothing of public.sessions');
    assert.deepEqual(t.stateOf(c.seqEvents()), { tenant: 'b' });
    // the run is named after the stream as the database names it
    const started = c.messages.map((m) => m.data).find((d) => d && d.type === 'RUN_STARTED');
    assert.equal(started.threadId, 'tenant_b.sessions:s-99');
    assert.equal(c.seqEvents()[0].metadata.stream, 'tenant_b.sessions:s-99');
    c.close();
  } finally {
    await g.close();
  }
});

test('a table whose trigger names its streams (stream=cee): runs and results carry the stream\'s own name', async () => {
  const g = await t.startGateway(DB, { tables: ['c'], appName: 'hx-gateway-tables', maxRunMs: 300 });
  try {
    const c = t.sse(`${g.base}/streams/c/k1`, { headers: { authorization: `Bearer ${mintToken(t.SECRET, 'c:k1')}` } });
    await t.waitFor(() => c.seqEvents().length >= 1, 'the row of c');
    const started = c.messages.map((m) => m.data).find((d) => d && d.type === 'RUN_STARTED');
    assert.equal(c.seqEvents()[0].metadata.stream, 'cee:k1');
    assert.equal(started.threadId, 'cee:k1');
    c.close();
  } finally {
    await g.close();
  }
});
