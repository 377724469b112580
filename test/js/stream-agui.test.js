'use strict';
// The events hx_stream sends are AG-UI events: every event in the log and
// every event sent as a NOTIFY payload validates with @ag-ui/core's schemas
// (snapshot, delta, end, key change), with an integer timestamp in
// milliseconds close to now and metadata {stream, seq}.  payload=ref sends
// only references, never state; and when the NOTIFY queue is fuller than
// hxstate.notify_queue_threshold the trigger sends nothing, yet a client
// polling the log loses no event.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const schemas = require('@ag-ui/core/schemas');
const { freshDatabase, connect, waitFor, streamTable: createStreamTable } = require('./helpers');
const { HxStream, applyEvent } = require('../../client');

const DB = 'hx_stream_agui';
const TYPE_SCHEMAS = {
  STATE_SNAPSHOT: schemas.StateSnapshotEventSchema,
  STATE_DELTA: schemas.StateDeltaEventSchema,
  CUSTOM: schemas.CustomEventSchema,
};
const REF_KEYS = ['ref', 'seq', 'stream', 'type'];

let db;
before(async () => {
  db = await freshDatabase(DB);
});
after(async () => { await db.end(); });

/** A connection LISTENing on the channels of streams; collects payloads. */
async function watch(streams) {
  const c = await connect(DB);
  c.payloads = [];
  c.on('notification', (msg) => c.payloads.push({ channel: msg.channel, text: msg.payload }));
  for (const s of streams) {
    const { rows } = await c.query('SELECT hx_stream_channel($1) AS channel', [s]);
    await c.query(`LISTEN ${c.escapeIdentifier(rows[0].channel)}`);
  }
  return c;
}

/** The log of streams: { stream, seq, type, event, bytes } by stream and seq. */
async function logOf(streams) {
  const { rows } = await db.query(
    `SELECT stream, seq::int, type, event, octet_length(event::text) AS bytes
       FROM hx_event WHERE stream = ANY($1) ORDER BY stream, seq`, [streams]);
  return rows;
}

/** Assert that event is a valid AG-UI event of stream at seq. */
function assertAgui(event, stream, seq, startedAt) {
  const where = `${stream} seq ${seq}`;
  const any = schemas.EventSchema.safeParse(event);
  assert.ok(any.success, `${where}: not an AG-UI event: ${any.error && any.error.message}`);
  const typed = TYPE_SCHEMAS[event.type];
  assert.ok(typed, `${where}: unexpected type ${event.type}`);
  const parsed = typed.safeParse(event);
  assert.ok(parsed.success, `${where}: not a valid ${event.type}: ${parsed.error && parsed.error.message}`);
  assert.deepStrictEqual(event.metadata, { stream, seq }, `${where}: metadata`);
  assert.ok(Number.isSafeInteger(event.timestamp), `${where}: timestamp ${event.timestamp} is not an integer`);
  // milliseconds since the epoch, from this run: between the test's start
  // and now, with a minute of slack for the two clocks (same machine)
  assert.ok(event.timestamp >= startedAt - 60000 && event.timestamp <= Date.now() + 60000,
    `${where}: timestamp ${event.timestamp} is not close to now (${Date.now()})`);
  if (event.type === 'STATE_DELTA') assert.ok(event.delta.length > 0, `${where}: empty delta`);
  if (event.type === 'CUSTOM') assert.equal(event.name, 'hx.stream_end', where);
}

test('every logged and every notified event is a valid AG-UI event', async () => {
  const startedAt = Date.now();
  await createStreamTable(db, 'sessions', 'payload=auto');
  const streams = ['sessions:v-1', 'sessions:v-2', 'sessions:v-3'];
  const watcher = await watch(streams);
  try {
    const merge = (key, ops) => db.query(
      'UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2', [JSON.stringify(ops), key]);
    await db.query(`INSERT INTO sessions VALUES ('v-1', '{"notes": [], "count": 0}')`);       // snapshot
    await merge('v-1', [{ op: 'append', path: '/notes', items: ['a', { b: [1, null] }] },
      { op: 'increment', path: '/count', by: 1 }]);                                          // delta
    await merge('v-1', [{ op: 'replace', path: '/title', value: 'x' },
      { op: 'merge', path: '/cfg', value: { 'a/b': 1, 'c~d': { e: true } } }]);              // escaped pointers
    await merge('v-1', [{ op: 'replace', path: '/title', value: 'x' }]);                     // no change, no event
    await merge('v-1', [{ op: 'merge', path: '/cfg', value: { 'a/b': null } },
      { op: 'replace', path: '/notes', value: [] }]);                                        // removals
    await merge('v-1', [{ op: 'replace', path: '/big', value: 'z'.repeat(9000) }]);          // over 8000: a reference
    await db.query(`UPDATE sessions SET state = NULL WHERE session_id = 'v-1'`);            // delta to null
    await db.query(`UPDATE sessions SET state = '[1, 2]' WHERE session_id = 'v-1'`);        // delta from null
    await db.query(`DELETE FROM sessions WHERE session_id = 'v-1'`);                        // end: deleted
    await db.query(`INSERT INTO sessions VALUES ('v-1', '{"again": true}')`);               // snapshot again
    await db.query(`UPDATE sessions SET session_id = 'v-2' WHERE session_id = 'v-1'`);      // end: key_changed + snapshot
    await db.query(`INSERT INTO sessions VALUES ('v-3', NULL)`);                            // snapshot of null

    const log = await logOf(streams);
    assert.deepStrictEqual(log.map((r) => `${r.stream} ${r.seq} ${r.type}`), [
      'sessions:v-1 1 STATE_SNAPSHOT',
      'sessions:v-1 2 STATE_DELTA',
      'sessions:v-1 3 STATE_DELTA',
      'sessions:v-1 4 STATE_DELTA',
      'sessions:v-1 5 STATE_DELTA',
      'sessions:v-1 6 STATE_DELTA',
      'sessions:v-1 7 STATE_DELTA',
      'sessions:v-1 8 CUSTOM',
      'sessions:v-1 9 STATE_SNAPSHOT',
      'sessions:v-1 10 CUSTOM',
      'sessions:v-2 1 STATE_SNAPSHOT',
      'sessions:v-3 1 STATE_SNAPSHOT',
    ]);
    for (const r of log) {
      assertAgui(r.event, r.stream, r.seq, startedAt);
      assert.equal(r.type, r.event.type, `${r.stream} ${r.seq}: the type column`);
    }
    const at = (stream, seq) => log.find((r) => r.stream === stream && r.seq === seq).event;
    assert.deepStrictEqual(at('sessions:v-1', 8).value, { reason: 'deleted' });
    assert.deepStrictEqual(at('sessions:v-1', 10).value, { reason: 'key_changed', next: 'sessions:v-2' });
    assert.deepStrictEqual(at('sessions:v-1', 1).snapshot, { notes: [], count: 0 });
    assert.deepStrictEqual(at('sessions:v-2', 1).snapshot, { again: true });
    assert.equal(at('sessions:v-3', 1).snapshot, null);
    assert.deepStrictEqual(at('sessions:v-1', 6).delta, [{ op: 'replace', path: '', value: null }]);

    // replaying a stream's events gives the row's state at each point
    const replay = (stream, upTo) => log.filter((r) => r.stream === stream && r.seq <= upTo)
      .reduce((state, r) => applyEvent(state, r.event), null);
    assert.deepStrictEqual(replay('sessions:v-1', 4),
      { notes: [], count: 1, title: 'x', cfg: { 'c~d': { e: true } } });
    assert.equal(replay('sessions:v-1', 5).big, 'z'.repeat(9000));
    assert.equal(replay('sessions:v-1', 6), null);
    assert.deepStrictEqual(replay('sessions:v-1', 7), [1, 2]);
    assert.equal(replay('sessions:v-1', 8), null);
    assert.deepStrictEqual(replay('sessions:v-2', 1), { again: true });

    // every event was notified once, in order: whole when under 8000 bytes, else a reference
    await waitFor(() => watcher.payloads.length >= log.length, `${log.length} notifications`);
    await watcher.query('SELECT 1'); // anything else pending arrives by now
    assert.equal(watcher.payloads.length, log.length);
    let refs = 0;
    for (const p of watcher.payloads) {
      const payload = JSON.parse(p.text);
      const isRef = payload.ref === true;
      const stream = isRef ? payload.stream : payload.metadata && payload.metadata.stream;
      const seq = isRef ? payload.seq : payload.metadata && payload.metadata.seq;
      const r = log.find((e) => e.stream === stream && e.seq === seq);
      assert.ok(r, `a notification of no logged event: ${p.text.slice(0, 200)}`);
      const { rows } = await db.query('SELECT hx_stream_channel($1) AS c', [stream]);
      assert.equal(p.channel, rows[0].c);
      if (isRef) {
        refs++;
        assert.deepStrictEqual(Object.keys(payload).sort(), REF_KEYS);
        assert.deepStrictEqual(payload, { ref: true, seq, type: r.type, stream });
        assert.ok(r.bytes >= 8000, `${stream} ${seq}: a reference for ${r.bytes} bytes`);
      } else {
        assertAgui(payload, stream, seq, startedAt);
        assert.deepStrictEqual(payload, r.event);
        assert.ok(Buffer.byteLength(p.text) < 8000);
      }
    }
    assert.equal(refs, 1, 'one event was over 8000 bytes');
    const order = watcher.payloads.map((p) => JSON.parse(p.text))
      .map((x) => (x.ref ? `${x.stream} ${x.seq}` : `${x.metadata.stream} ${x.metadata.seq}`));
    assert.deepStrictEqual(order.filter((s) => s.startsWith('sessions:v-1 ')),
      Array.from({ length: 10 }, (_, i) => `sessions:v-1 ${i + 1}`));
  } finally {
    await watcher.end();
  }
});

test('an event of 7999 bytes is sent whole, one of 8000 as a reference', async () => {
  await createStreamTable(db, 'edge', 'payload=auto');
  const watcher = await watch(['edge:e-1']);
  try {
    await db.query(`INSERT INTO edge VALUES ('e-1', '{"s": ""}')`); // seq 1
    const put = (len) => db.query(`UPDATE edge SET state = jsonb_build_object('s', repeat('x', $1::int))`, [len]);
    await put(100); // seq 2: measure; the event's text grows byte for byte with s
    const size = async (seq) => (await db.query(
      `SELECT octet_length(event::text) AS n FROM hx_event WHERE stream = 'edge:e-1' AND seq = $1`, [seq])).rows[0].n;
    const base = await size(2);
    await put(100 + 7999 - base); // seq 3
    await put(100 + 8000 - base); // seq 4: NOTIFY would refuse this payload
    assert.equal(await size(3), 7999);
    assert.equal(await size(4), 8000);
    await waitFor(() => watcher.payloads.length >= 4, '4 notifications');
    const [, , whole, ref] = watcher.payloads.map((p) => JSON.parse(p.text));
    assert.equal(whole.metadata.seq, 3);
    assertAgui(whole, 'edge:e-1', 3, 0);
    assert.equal(Buffer.byteLength(watcher.payloads[2].text), 7999);
    assert.deepStrictEqual(ref, { ref: true, seq: 4, type: 'STATE_DELTA', stream: 'edge:e-1' });
  } finally {
    await watcher.end();
  }
});

test('payload=ref never puts state in a payload', async () => {
  await createStreamTable(db, 'secrets', 'payload=ref', 'stream=vault');
  const streams = ['vault:k-1', 'vault:k-2'];
  const watcher = await watch(streams);
  try {
    await db.query(`INSERT INTO secrets VALUES ('k-1', '{"password": "TOPSECRET-0"}')`);
    for (let i = 1; i <= 5; i++) {
      await db.query(`UPDATE secrets SET state = hx_merge(state, $1) WHERE session_id = 'k-1'`,
        [JSON.stringify([{ op: 'replace', path: '/password', value: `TOPSECRET-${i}` },
          { op: 'append', path: '/notes', items: [i === 3 ? 'TOPSECRET'.repeat(1000) : 'TOPSECRET'] }])]);
    }
    await db.query(`UPDATE secrets SET session_id = 'k-2' WHERE session_id = 'k-1'`);
    await db.query(`DELETE FROM secrets`);

    const log = await logOf(streams);
    assert.equal(log.length, 1 + 5 + 1 + 2);
    await waitFor(() => watcher.payloads.length >= log.length, `${log.length} notifications`);
    await watcher.query('SELECT 1');
    assert.equal(watcher.payloads.length, log.length);
    watcher.payloads.forEach((p, i) => {
      assert.ok(!p.text.includes('TOPSECRET'), `payload ${i} carries state: ${p.text.slice(0, 200)}`);
      const payload = JSON.parse(p.text);
      assert.deepStrictEqual(Object.keys(payload).sort(), REF_KEYS, `payload ${i}: ${p.text}`);
      for (const k of ['snapshot', 'delta', 'value', 'name', 'metadata']) assert.ok(!(k in payload));
      const r = log.find((e) => e.stream === payload.stream && e.seq === payload.seq);
      assert.ok(r, `payload ${i} refers to no logged event: ${p.text}`);
      assert.deepStrictEqual(payload, { ref: true, seq: r.seq, type: r.type, stream: r.stream });
    });
    // and the log itself holds valid AG-UI events
    for (const r of log) assertAgui(r.event, r.stream, r.seq, 0);
  } finally {
    await watcher.end();
  }
});

test('above hxstate.notify_queue_threshold nothing is notified, and the polling client loses no event', async () => {
  await createStreamTable(db, 'busy', 'payload=auto');
  await db.query(`INSERT INTO busy VALUES ('q-1', '{"n": 0, "l": []}')`);
  const truth = new Map([[1, { n: 0, l: [] }]]);

  const stream = new HxStream({ pg: { database: DB }, table: 'busy', key: 'q-1', pollInterval: 100 });
  const seen = [];
  stream.on('event', (event, state) => seen.push({ seq: event.metadata.seq, state }));
  await stream.start();
  const watcher = await watch(['busy:q-1']);
  // a listener stuck in an open transaction holds the NOTIFY queue's tail
  const stuck = await connect(DB);
  stuck.on('notification', () => {});
  const writers = [];
  try {
    await stuck.query('LISTEN hx_agui_stuck');
    await stuck.query('BEGIN');
    await stuck.query('SELECT 1');
    await db.query(`SELECT pg_notify('hx_agui_stuck', repeat('x', 1000) || g) FROM generate_series(1, 3000) g`);
    const usage = await db.query('SELECT pg_notification_queue_usage() > 0 AS full');
    assert.equal(usage.rows[0].full, true, 'the NOTIFY queue is in use');

    for (let w = 0; w < 3; w++) {
      const c = await connect(DB);
      writers.push(c);
      await c.query('SET hxstate.notify_queue_threshold = 0');
    }
    await Promise.all(writers.map(async (c, w) => {
      for (let i = 0; i < 30; i++) {
        const ops = [{ op: 'increment', path: '/n', by: 1 },
          { op: 'append', path: '/l', items: [i === 7 ? 'y'.repeat(9000) : `${w}-${i}`] }];
        await c.query('BEGIN');
        const res = await c.query('UPDATE busy SET state = hx_merge(state, $1) WHERE session_id = $2 RETURNING state',
          [JSON.stringify(ops), 'q-1']);
        const { rows } = await c.query(`SELECT max(seq)::int AS seq FROM hx_event WHERE stream = 'busy:q-1'`);
        await c.query('COMMIT');
        truth.set(rows[0].seq, res.rows[0].state);
      }
    }));
    const last = 1 + 3 * 30;
    await waitFor(() => stream.seq === last, `the client to reach seq ${last} from the log`);
    const still = await db.query('SELECT pg_notification_queue_usage() > 0 AS full');
    assert.equal(still.rows[0].full, true, 'the queue stayed in use throughout');

    // not one notification, yet every event, each once, with the right state
    await watcher.query('SELECT 1');
    assert.equal(watcher.payloads.length, 0, 'notifications were sent above the threshold');
    assert.equal(stream.stats.notifications, 0);
    assert.deepStrictEqual(seen.map((s) => s.seq), Array.from({ length: last }, (_, i) => i + 1));
    for (const s of seen) assert.deepStrictEqual(s.state, truth.get(s.seq), `state at seq ${s.seq}`);
    const { rows } = await db.query(`SELECT state FROM busy WHERE session_id = 'q-1'`);
    assert.deepStrictEqual(stream.state, rows[0].state);

    // the control: below the (default) threshold the same write is notified
    await db.query(`UPDATE busy SET state = hx_merge(state, '[{"op": "increment", "path": "/n", "by": 1}]')`);
    await waitFor(() => watcher.payloads.length === 1 && stream.seq === last + 1, 'the notified write');
    assert.equal(JSON.parse(watcher.payloads[0].text).metadata.seq, last + 1);
    assert.equal(stream.stats.notifications, 1);
  } finally {
    await stuck.query('COMMIT').catch(() => {});
    await stuck.end();
    await Promise.all(writers.map((c) => c.end()));
    await watcher.end();
    await stream.stop();
  }
});
