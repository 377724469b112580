'use strict';
// NOTIFY is a hint, never content.  Any role that can connect can NOTIFY
// any channel with any payload; a role with LOGIN and nothing else sends
// forged payloads on a followed stream's channel (the forged event of the
// security report, one near NOTIFY's 8000 bytes, malformed ones, huge
// seqs, one naming another followed stream), and then the row's owner
// writes.  The follower hands out exactly the row's events and states
// (the genuine event at the forged seq included), and the forgeries cost
// it no more than a bounded read each.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');
const { HxHub } = require('..');

const DB = 'hx_client_forged';
const FORGER = 'hx_client_forger';

let db;
let forger;
before(async () => {
  db = await h.freshDatabase(DB);
  await db.query(`DROP ROLE IF EXISTS ${FORGER}`);
  await db.query(`CREATE ROLE ${FORGER} LOGIN`); // and nothing else
  forger = await h.connect(DB, { user: FORGER });
});
after(async () => {
  await forger.end();
  await db.query(`DROP ROLE ${FORGER}`);
  await db.end();
});

/** The forged payloads, for a stream and another followed one. */
function forgeries(stream, other) {
  const big = 'm'.repeat(7800);
  return [
    // the security report's: a snapshot that hands the row to mallory, as seq 2
    `{"type":"STATE_SNAPSHOT","snapshot":{"owner":"mallory","transfer_to":"mallory"},"metadata":{"stream":"${stream}","seq":2}}`,
    // near NOTIFY's limit
    JSON.stringify({ type: 'STATE_SNAPSHOT', snapshot: { owner: 'mallory', pad: big }, metadata: { stream, seq: 2 } }),
    // a delta that would apply, and old news
    JSON.stringify({ type: 'STATE_DELTA', delta: [{ op: 'replace', path: '/owner', value: 'mallory' }], metadata: { stream, seq: 2 } }),
    JSON.stringify({ type: 'STATE_SNAPSHOT', snapshot: { owner: 'mallory' }, metadata: { stream, seq: 1 } }),
    // malformed
    'not json',
    '{"type": "STATE_SNAPSHOT", "metadata": {"stream": 7, "seq": "2"}}',
    '{"ref": true}',
    '[1, 2, 3]',
    JSON.stringify({ ref: true, seq: -4, stream }),
    // huge seqs: a reference and an event
    JSON.stringify({ ref: true, seq: Number.MAX_SAFE_INTEGER, type: 'STATE_DELTA', stream }),
    `{"type":"STATE_SNAPSHOT","snapshot":{"owner":"mallory"},"metadata":{"stream":"${stream}","seq":1e300}}`,
    JSON.stringify({ type: 'STATE_SNAPSHOT', snapshot: { owner: 'mallory' }, metadata: { stream, seq: 1e15 } }),
    // another followed stream, on this stream's channel
    JSON.stringify({ type: 'STATE_SNAPSHOT', snapshot: { owner: 'mallory' }, metadata: { stream: other, seq: 2 } }),
    JSON.stringify({ ref: true, seq: 2, type: 'STATE_DELTA', stream: other }),
  ];
}

/** What a follower handed out, and its state. */
function record(emitter) {
  const log = { events: [], states: [], errors: [] };
  emitter.on('event', (event, state) => {
    log.events.push(event);
    log.states.push(state);
  });
  emitter.on('error', (err) => log.errors.push(err));
  return log;
}

async function scenario(table, follow, ...trigger) {
  await h.streamTable(db, table, ...trigger);
  await db.query(`INSERT INTO ${table} VALUES ('a', '{"n": 0, "owner": "alice"}'), ('b', '{"n": 0, "owner": "bob"}')`);
  const { a, b, hub } = await follow();
  const streamA = `${table}:a`;
  const streamB = `${table}:b`;
  const channel = (await db.query('SELECT hx_stream_channel($1) AS c', [streamA])).rows[0].c;
  const payloads = forgeries(streamA, streamB);

  // the forger sends them all on a's channel, and (the report's) on b's
  const queries = hub.stats.queries;
  const heard = hub.stats.notifications;
  for (const p of payloads) await forger.query('SELECT pg_notify($1, $2)', [channel, p]);
  const channelB = (await db.query('SELECT hx_stream_channel($1) AS c', [streamB])).rows[0].c;
  await forger.query('SELECT pg_notify($1, $2)', [channelB, forgeries(streamB, streamA)[0]]);
  const sent = payloads.length + 1;
  await h.waitFor(() => hub.stats.notifications === heard + sent, `${sent} forged notifications`);

  // then the owner writes: seq 2 of both
  const stateA = await h.merge(db, table, 'a', [{ op: 'increment', path: '/n', by: 1 }]);
  const stateB = await h.merge(db, table, 'b', [{ op: 'increment', path: '/n', by: 1 }]);
  await h.waitFor(() => a.seq === 2 && b.seq === 2, 'the genuine seq 2 of both');
  const loggedA = await h.loggedEvents(db, streamA);
  const loggedB = await h.loggedEvents(db, streamB);

  // exactly the row's events and states: the snapshot, then the logged seq 2
  for (const [sub, logged, state] of [[a, loggedA, stateA], [b, loggedB, stateB]]) {
    assert.deepStrictEqual(sub.log.events.map((e) => e.metadata.seq), [1, 2]);
    assert.deepStrictEqual(sub.log.events[1], logged[1].event, 'the genuine event at seq 2');
    assert.deepStrictEqual(sub.state, state);
    assert.deepStrictEqual(sub.log.states[sub.log.states.length - 1], state);
  }
  assert.equal(JSON.stringify([a.log, b.log]).includes('mallory'), false, 'nothing forged was handed out');

  // each forgery cost at most a bounded read: a read of the log after
  // the cursor, and at most one look at the head after it
  const spent = hub.stats.queries - queries;
  assert.ok(spent <= 2 * sent + 4, `${spent} statements for ${sent} forged notifications and 2 writes`);
}

// payload=auto: the genuine notifications carry the event itself, as the forged ones pretend to
test('forged notifications: an HxHub over LISTEN hands out only the row\'s events (payload=auto)', async () => {
  const hub = new HxHub({ pg: { database: DB }, transport: 'listen', pollInterval: 0 });
  await hub.start();
  try {
    await scenario('f', async () => {
      const a = hub.follow({ table: 'f', key: 'a' });
      const b = hub.follow({ table: 'f', key: 'b' });
      a.log = record(a);
      b.log = record(b);
      await Promise.all([a.ready, b.ready]);
      return { a, b, hub };
    }, 'payload=auto');
  } finally {
    await hub.stop();
  }
});

// the trigger's default: references
test('forged notifications: HxStream (LISTEN on its own connection) hands out only the row\'s events (payload=ref)', async () => {
  const a = h.follow(DB, 'g', 'a', { appName: 'hx-forged-a' });
  const b = new (require('..').HxStream)({ hub: a.hub, table: 'g', key: 'b' });
  b.log = record(b);
  try {
    await scenario('g', async () => {
      await a.start();
      await b.start();
      return { a, b, hub: a.hub };
    });
  } finally {
    await b.stop();
    await a.stop();
  }
});
