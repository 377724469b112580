'use strict';
// The WAL transport on pg's public API only.  WalStream gets a replication
// connection whose undocumented `connection` property (pg's internal
// Connection) is out of reach: reading it throws.  It still creates its
// slot, streams hx_event's inserts (events of every size, across a
// standby status update), answers keepalives, and ends politely; and the
// frontend messages it frames are CopyData and CopyDone, byte by byte.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('pg');
const h = require('../../test/js/helpers');
const { WalStream } = require('../lib/wal');
const { copyDataMessage, copyDoneMessage } = require('../lib/pgoutput');

const DB = 'hx_client_wal';

let db;
before(async () => {
  db = await h.freshDatabase(DB);
  await db.query('SELECT hx_stream_publication()');
  await h.streamTable(db, 'w');
  await db.query(`INSERT INTO w VALUES ('k', '{"n": 0}')`);
});
after(async () => { await db.end(); });

/** client, with its undocumented `connection` hidden: reading it throws. */
function publicOnly(client) {
  return new Proxy(client, {
    get(target, name) {
      if (name === 'connection') throw new Error('pg\'s client.connection is not public API');
      const v = target[name];
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

test('CopyData and CopyDone, framed', () => {
  assert.deepStrictEqual([...copyDataMessage(Buffer.from('xy'))], [0x64, 0, 0, 0, 6, 0x78, 0x79]);
  assert.deepStrictEqual([...copyDoneMessage()], [0x63, 0, 0, 0, 4]);
});

for (const decoder of ['hxstate', 'pgoutput']) test(`WalStream (${decoder}) streams the log's inserts with no access to pg's private connection`, async () => {
  const app = `hx-wal-public-${decoder}`;
  await db.query('UPDATE w SET state = \'{"n": 0}\' WHERE session_id = \'k\'');
  const first = await h.lastSeq(db, 'w:k');
  const client = new Client({ database: DB, replication: 'database', application_name: app });
  client.on('error', () => {});
  await client.connect();
  const inserts = [];
  const errors = [];
  const wal = new WalStream(publicOnly(client), {
    publication: 'hxstate_events',
    schema: 'public',
    statusInterval: 50,
    onInsert: (stream, seq, event) => inserts.push({ stream: stream.toString(), seq: Number(seq.toString()), event: JSON.parse(event.toString()) }),
    onError: (err) => errors.push(err),
    decoder,
  });
  try {
    const slot = await wal.createSlot(10000);
    const { rows: [created] } = await db.query(
      'SELECT confirmed_flush_lsn AS lsn FROM pg_replication_slots WHERE slot_name = $1', [slot]);
    wal.start();
    const sizes = [10, 9000, 100000];
    for (const size of sizes) await h.merge(db, 'w', 'k', [{ op: 'replace', path: '/x', value: 'x'.repeat(size) }]);
    await h.waitFor(() => inserts.length === sizes.length, 'the three inserts');
    assert.deepStrictEqual(inserts.map((i) => [i.stream, i.seq]), [['w:k', first + 1], ['w:k', first + 2], ['w:k', first + 3]]);
    const logged = await h.loggedEvents(db, 'w:k');
    assert.deepStrictEqual(inserts.map((i) => i.event), logged.slice(first).map((r) => r.event));
    // standby status updates went out, and the server took them: the slot
    // confirms what was streamed, past where it was created
    await h.waitFor(async () => {
      const { rows } = await db.query(
        `SELECT confirmed_flush_lsn > $2::pg_lsn AS ok, active FROM pg_replication_slots WHERE slot_name = $1`,
        [slot, created.lsn]);
      return rows.length === 1 && rows[0].active && rows[0].ok;
    }, 'the slot to confirm what was streamed');
    assert.deepStrictEqual(errors, []);
    // the polite end: CopyDone, the server's answer, and the connection can close
    await wal.finish(5000);
    assert.deepStrictEqual(errors, [], 'a finished stream is not an error');
  } finally {
    await client.end().catch(() => {});
  }
  await h.waitFor(async () => (await db.query(
    'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [app])).rows[0].n === 0,
  'the walsender to exit');
});
