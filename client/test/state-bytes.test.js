'use strict';
// A subscription that keeps its state (state: true) keeps at most
// maxStateBytes of it: a log whose deltas "copy" a value into itself
// doubles the state at each event (1,118 bytes of deltas took a gateway
// from 73 MB to out of heap), and a snapshot can be as large as jsonb
// allows.  Past the bound, that subscription fails with HX_STATE_TOO_LARGE
// ('error', then stopped), before the state it would make exists; the
// hub's other subscriptions, of other streams and of the same stream
// without a state, go on.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');
const { HxHub, HxStream } = require('..');

const DB = 'hx_client_state_bytes';
const KB = 1024;
let db;

before(async () => {
  db = await h.freshDatabase(DB);
});
after(async () => { await db.end(); });

const send = (stream, event) => db.query('SELECT hx_stream_send($1, $2)', [stream, JSON.stringify(event)]);
const DOUBLE = { type: 'STATE_DELTA', delta: [{ op: 'copy', from: '/a', path: '/a/-' }] };

test('deltas that double a followed state fail its subscription at maxStateBytes; nothing else is touched', async () => {
  await send('@dbl', { type: 'STATE_SNAPSHOT', snapshot: { a: ['x'.repeat(1000)] } });
  await send('@calm', { type: 'STATE_SNAPSHOT', snapshot: { n: 0 } });
  const hub = new HxHub({ pg: { database: DB }, maxStateBytes: 256 * KB, pollInterval: 50 });
  await hub.start();
  try {
    const kept = hub.follow({ stream: '@dbl' });
    const errors = [];
    kept.on('error', (err) => errors.push(err));
    const states = [];
    kept.on('event', (event, state) => { states.push(state); });
    const plain = hub.follow({ stream: '@dbl' }, { state: false });
    const plainSeqs = [];
    plain.on('event', (event) => { plainSeqs.push(event.metadata.seq); });
    const calm = hub.follow({ stream: '@calm' });
    const calmStates = [];
    calm.on('event', (event, state) => { calmStates.push(state); });
    await kept.ready;
    for (let i = 1; i <= 12; i++) await send('@dbl', DOUBLE);
    await send('@calm', { type: 'STATE_DELTA', delta: [{ op: 'replace', path: '/n', value: 1 }] });
    await h.waitFor(() => kept.stopped, 'the doubled subscription to fail');
    assert.equal(errors.length, 1);
    assert.equal(errors[0].code, 'HX_STATE_TOO_LARGE');
    assert.match(errors[0].message, /the state of @dbl after event \d+: the state would be \d+ bytes or more, past maxStateBytes \(262144\)/);
    assert.ok(errors[0].bytes > 256 * KB);
    // it handed out no state past its bound
    assert.ok(states.every((s) => JSON.stringify(s).length <= 256 * KB));
    // the snapshot and at most eight doublings (those accepted before the
    // failure and not yet handed out are dropped with the subscription)
    assert.ok(states.length >= 1 && states.length <= 9, `${states.length} states`);
    // the same stream without a state, and another stream, go on
    await h.waitFor(() => plainSeqs.length === 13, 'every event to the subscription without a state');
    assert.deepEqual(plainSeqs, h.range(1, 13));
    await h.waitFor(() => calmStates.length === 2, 'the other stream');
    assert.deepEqual(calmStates.at(-1), { n: 1 });
    assert.equal(hub.stats.subscriptions, 2);
  } finally {
    await hub.stop();
  }
});

test('a snapshot larger than maxStateBytes fails its subscription (ready rejects); one follow() may set its own bound', async () => {
  await db.query('CREATE TABLE big (session_id text PRIMARY KEY, state jsonb)');
  await db.query("CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON big FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id')");
  await db.query('INSERT INTO big VALUES ($1, $2)', ['k', JSON.stringify({ s: 'y'.repeat(300 * KB) })]);
  const hub = new HxHub({ pg: { database: DB }, maxStateBytes: 256 * KB });
  await hub.start();
  try {
    const small = hub.follow({ table: 'big', key: 'k' });
    const err = await small.ready.then(() => null, (e) => e);
    assert.ok(err, 'ready rejects');
    assert.equal(err.code, 'HX_STATE_TOO_LARGE');
    const roomy = hub.follow({ table: 'big', key: 'k' }, { maxStateBytes: 1024 * KB });
    await roomy.ready;
    assert.equal(roomy.state.s.length, 300 * KB);
    assert.throws(() => hub.follow({ table: 'big', key: 'k' }, { maxStateBytes: 0 }), /maxStateBytes must be a positive integer/);
    // HxStream: start() rejects the same way
    const stream = new HxStream({ pg: { database: DB }, table: 'big', key: 'k', maxStateBytes: 256 * KB });
    await assert.rejects(stream.start(), (e) => e.code === 'HX_STATE_TOO_LARGE');
  } finally {
    await hub.stop();
  }
});
