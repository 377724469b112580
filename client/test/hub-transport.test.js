'use strict';
// Choosing the transport: 'auto' follows over the WAL when it can (wal_level
// logical, a role that may replicate, the publication of hx_event) and
// otherwise over LISTEN, saying why (the 'transport' event and
// hub.transportReason); 'wal' refuses to start, saying why, where 'auto'
// would fall back.  Either way the streams are exact.  And options.pg as a
// function: the config of every new connection, asked for by role.
// (wal_level = replica is in hub-server.test.js, on a cluster of its own.)
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');
const { HxHub } = require('..');
const { Recorder, waitForHeads, mismatches, runWriters, terminate } = require('./hub-helpers');

const DB = 'hx_hub_transport';
const ROLE = 'hx_hub_norepl';
const keys = Array.from({ length: 20 }, (_, k) => `t-${k + 1}`);

let db;
before(async () => {
  db = await h.freshDatabase(DB);
  await h.streamTable(db, 'sessions');
  await db.query(`INSERT INTO sessions SELECT 't-' || g, '{"n": 0}' FROM generate_series(1, ${keys.length}) g`);
  await db.query(`DROP ROLE IF EXISTS ${ROLE}`);
  await db.query(`CREATE ROLE ${ROLE} LOGIN NOREPLICATION`);
  await db.query(`GRANT SELECT ON sessions, hx_event TO ${ROLE}`);
});
after(async () => {
  await db.query(`DROP OWNED BY ${ROLE}`);
  await db.query(`DROP ROLE ${ROLE}`);
  await db.end();
});

/** Follow every key, write, and check that each stream is exact. */
async function exact(hub, seed) {
  const rec = new Recorder();
  const subs = keys.map((key) => {
    const sub = hub.follow({ table: 'sessions', key });
    rec.attach(sub, key);
    return sub;
  });
  await Promise.all(subs.map((s) => s.ready));
  await runWriters({ connect: () => h.connect(DB), n: 4, writes: 25, table: 'sessions', keys, seed, bigChance: 0.05 });
  const truth = await waitForHeads(db, 'sessions', rec.records, 'every stream at its head');
  assert.deepStrictEqual(rec.violations, []);
  assert.deepStrictEqual(mismatches(truth, rec.records), []);
  for (const s of subs) s.stop();
}

function hubOf(options) {
  const hub = new HxHub({ pollInterval: 0, reconnect: { min: 20, max: 200 }, ...options });
  hub.said = [];
  hub.on('transport', (info) => hub.said.push(info));
  return hub;
}

test('no publication, decoder auto: the WAL through hxstate\'s plugin, which needs none', async () => {
  const hub = hubOf({ pg: { database: DB } });
  try {
    await hub.start();
    assert.equal(hub.transport, 'wal');
    assert.equal(hub.decoder, 'hxstate');
    assert.equal(hub.decoderReason, null);
    await exact(hub, 7);
  } finally {
    await hub.stop();
  }
});

test('no publication, decoder pgoutput: auto follows over LISTEN and says why', async () => {
  const hub = hubOf({ pg: { database: DB }, decoder: 'pgoutput' });
  try {
    await hub.start();
    const reason = 'publication "hxstate_events" does not exist (SELECT hx_stream_publication() creates it): ' +
      'following over LISTEN';
    assert.equal(hub.transport, 'listen');
    assert.equal(hub.transportReason, reason);
    assert.deepStrictEqual(hub.said, [{ transport: 'listen', reason }]);
    await exact(hub, 1);
  } finally {
    await hub.stop();
  }
  const wal = hubOf({ pg: { database: DB }, transport: 'wal', decoder: 'pgoutput' });
  await assert.rejects(wal.start(), /^Error: HxHub: cannot follow over the WAL: publication "hxstate_events" does not exist/);
});

test('a publication that does not publish hx_event: LISTEN, saying why', async () => {
  await db.query('CREATE PUBLICATION hx_hub_other FOR TABLE sessions');
  const hub = hubOf({ pg: { database: DB }, publication: 'hx_hub_other', decoder: 'pgoutput' });
  try {
    await hub.start();
    assert.equal(hub.transport, 'listen');
    assert.equal(hub.transportReason, 'publication "hx_hub_other" does not publish hx_event: following over LISTEN');
  } finally {
    await hub.stop();
    await db.query('DROP PUBLICATION hx_hub_other');
  }
});

test('with the publication, auto follows over the WAL', async () => {
  assert.equal((await db.query('SELECT hx_stream_publication() AS p')).rows[0].p, 'hxstate_events');
  const hub = hubOf({ pg: { database: DB } });
  try {
    await hub.start();
    assert.equal(hub.transport, 'wal');
    assert.equal(hub.transportReason, null);
    assert.deepStrictEqual(hub.said, [{ transport: 'wal', reason: null }]);
    assert.match(hub.slot, /^hx_\d+_[0-9a-f]{12}$/);
    const { rows } = await db.query('SELECT temporary, active FROM pg_replication_slots WHERE slot_name = $1', [hub.slot]);
    assert.deepStrictEqual(rows, [{ temporary: true, active: true }], 'a temporary slot, in use');
    await exact(hub, 2);
  } finally {
    await hub.stop();
  }
});

test('a role without REPLICATION: auto follows over LISTEN and says why; wal refuses', async () => {
  const hub = hubOf({ pg: { database: DB, user: ROLE } });
  try {
    await hub.start();
    assert.equal(hub.transport, 'listen');
    assert.equal(hub.transportReason, `role "${ROLE}" has no REPLICATION attribute: following over LISTEN`);
    await exact(hub, 3);
  } finally {
    await hub.stop();
  }
  const wal = hubOf({ pg: { database: DB, user: ROLE }, transport: 'wal' });
  await assert.rejects(wal.start(), new RegExp(`cannot follow over the WAL: role "${ROLE}" has no REPLICATION attribute`));
});

test('options.pg as a function: asked for the config of every new connection, by role', async () => {
  for (const transport of ['wal', 'listen']) {
    const app = `hx-hub-hook-${transport}`;
    const asked = [];
    const hub = hubOf({
      transport,
      pg: async (role) => {
        asked.push(role);
        return { database: DB, application_name: app };
      },
    });
    try {
      await hub.start();
      assert.deepStrictEqual(asked, ['reader', transport === 'wal' ? 'replication' : 'listen']);
      assert.equal((await h.backendPids(db, app)).length, 2);
      // a reconnect asks again (in one or two rounds: the hub may notice
      // one lost connection before the other is terminated)
      assert.equal(await terminate(db, app), 2);
      await h.waitFor(() => asked.length === 4 && hub.connected, 'the reconnect');
      assert.deepStrictEqual(asked.slice(2).sort(), ['reader', transport === 'wal' ? 'replication' : 'listen'].sort());
      await exact(hub, 4);
    } finally {
      await hub.stop();
    }
  }
});

test('an extension older than 0.5.0 is refused with a clear message', async () => {
  const old = 'hx_hub_transport_old';
  const c = await h.freshDatabase(old);
  await c.query(`DROP EXTENSION hxstate; CREATE EXTENSION hxstate VERSION '0.4.0'`);
  await c.end();
  const hub = hubOf({ pg: { database: old } });
  await assert.rejects(hub.start(), /hxstate 0\.4\.0 is too old: 0\.5\.0 or later is needed/);
});

test('a long transaction holds the slot back: auto follows over LISTEN until the next reconnect', async () => {
  // creating a logical slot waits for every transaction that holds an xid
  const long = await h.connect(DB);
  await long.query('BEGIN');
  await long.query('SELECT txid_current()');
  const hub = hubOf({ pg: { database: DB, application_name: 'hx-hub-slow-slot' }, slotTimeout: 300 });
  try {
    await hub.start();
    assert.equal(hub.transport, 'listen');
    assert.match(hub.transportReason,
      /^the WAL transport failed \(the replication slot was not ready within 300 ms \(a long transaction holds it back\)\): following over LISTEN$/);
    await long.query('COMMIT');
    await exact(hub, 5);
    // the abandoned attempt left no slot behind
    await h.waitFor(async () => (await db.query(
      `SELECT count(*)::int AS n FROM pg_replication_slots WHERE slot_name LIKE 'hx\\_${process.pid}\\_%'`)).rows[0].n === 0,
    'no slot of this process');
    // the next reconnect tries the WAL again
    await terminate(db, 'hx-hub-slow-slot');
    await h.waitFor(() => hub.transport === 'wal' && hub.connected, 'the WAL after the reconnect');
    assert.deepStrictEqual(hub.said.map((x) => x.transport), ['listen', 'wal']);
    await exact(hub, 6);
  } finally {
    await long.query('ROLLBACK').catch(() => {});
    await long.end();
    await hub.stop();
  }
});
