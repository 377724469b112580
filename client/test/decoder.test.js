'use strict';
// The hub's decoder: hxstate's own output plugin (one message per
// transaction that logged events) where the server names it in
// output_plugin_libraries (test/lib/cluster.sh does), else pgoutput.
// Every event once, in order, with its text or read from the log; the
// same with pgoutput; the choice when the server refuses the plugin; and
// WalStream against messages that are not what the plugin sends.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('pg');
const h = require('../../test/js/helpers');
const { HxHub } = require('..');
const { WalStream } = require('../lib/wal');
const { chooseDecoder, pluginAllowed, pluginRefused } = require('../lib/decoder');

const DB = 'hx_client_decoder';

let db;
let admin;
before(async () => {
  db = await h.freshDatabase(DB);
  admin = await h.connect('postgres');
  await h.streamTable(db, 'd');
  await db.query('SELECT hx_stream_publication()');
});
after(async () => {
  await allowPlugin(true);
  await admin.end();
  await db.end();
});

/** The server's output_plugin_libraries with hxstate (as the test cluster has it) or without, in force for new connections. */
async function allowPlugin(on) {
  const { rows: [r] } = await admin.query("SELECT current_setting('output_plugin_libraries', true) AS v");
  if (r.v === null) return false; // a server without the setting loads any library
  if (on) await admin.query('ALTER SYSTEM RESET output_plugin_libraries');
  else await admin.query("ALTER SYSTEM SET output_plugin_libraries = 'pgoutput', 'test_decoding'");
  await admin.query('SELECT pg_reload_conf()');
  await h.waitFor(async () => {
    const c = await h.connect('postgres');
    try {
      const { rows: [s] } = await c.query("SELECT current_setting('output_plugin_libraries') AS v");
      return pluginAllowed(s.v) === on;
    } finally {
      await c.end();
    }
  }, 'the server to reload its configuration');
  return true;
}

/** Follow keys on a hub of these options; what each subscription handed out. */
async function followAll(options, keys) {
  const hub = new HxHub({ pg: { database: DB }, transport: 'wal', pollInterval: 0, ...options });
  const errors = [];
  hub.on('error', (err) => errors.push(err));
  const got = new Map();
  for (const key of keys) {
    const list = [];
    got.set(key, list);
    const sub = hub.follow({ table: 'd', key });
    sub.on('event', (event, state) => list.push({ seq: event.metadata.seq, type: event.type, state }));
    sub.on('error', (err) => errors.push(err));
  }
  await hub.start();
  return { hub, got, errors };
}

async function rowStates(keys) {
  const out = new Map();
  for (const key of keys) out.set(key, { seq: await h.lastSeq(db, `d:${key}`), state: await h.rowState(db, 'd', key) });
  return out;
}

async function caughtUp(got, keys) {
  const want = await rowStates(keys);
  await h.waitFor(() => keys.every((k) => {
    const l = got.get(k);
    return l.length > 0 && l[l.length - 1].seq === want.get(k).seq;
  }), 'every follower at its row');
  for (const k of keys) {
    const l = got.get(k);
    const seqs = l.map((e) => e.seq);
    // after the snapshot, every seq once and in order
    for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1] + 1, `${k}: ${seqs}`);
    assert.deepStrictEqual(l[l.length - 1].state, want.get(k).state);
  }
}

test('the decoder option is checked; pluginAllowed reads output_plugin_libraries as the server does', () => {
  assert.throws(() => new HxHub({ decoder: 'wal2json' }), /options.decoder is 'auto', 'hxstate' or 'pgoutput'/);
  assert.equal(pluginAllowed(null), true);
  assert.equal(pluginAllowed('pgoutput, test_decoding'), false);
  assert.equal(pluginAllowed('pgoutput,hxstate'), true);
  assert.equal(pluginAllowed('pgoutput, "hxstate"'), true);
  assert.equal(pluginAllowed('hxstate_x, xhxstate'), false);
  assert.deepEqual(chooseDecoder('auto', 'pgoutput'), { decoder: 'pgoutput', reason: 'output_plugin_libraries (pgoutput) does not name hxstate: decoding with pgoutput', blocker: null });
  assert.equal(chooseDecoder('hxstate', 'pgoutput').blocker, 'output_plugin_libraries (pgoutput) does not name hxstate');
  assert.equal(chooseDecoder('pgoutput', 'hxstate').decoder, 'pgoutput');
  assert.ok(pluginRefused({ code: '42501' }) && pluginRefused({ code: '42883' }) && !pluginRefused({ code: '57P01' }));
});

for (const decoder of ['auto', 'pgoutput']) {
  test(`decoder ${decoder}: every event once and in order, transactions of one event, of many streams, of more than a part`, async () => {
    const keys = [`${decoder}-a`, `${decoder}-b`, `${decoder}-c`];
    for (const k of keys) await db.query('INSERT INTO d VALUES ($1, \'{"l": [], "n": 0}\')', [k]);
    const { hub, got, errors } = await followAll({ decoder }, keys);
    try {
      await h.waitFor(() => keys.every((k) => got.get(k).length > 0), 'the snapshots');
      assert.equal(hub.transport, 'wal');
      const allowed = pluginAllowed((await db.query("SELECT current_setting('output_plugin_libraries', true) AS v")).rows[0].v);
      assert.equal(hub.decoder, decoder === 'auto' && allowed ? 'hxstate' : 'pgoutput');
      // one event a transaction
      for (let i = 0; i < 20; i++) await h.merge(db, 'd', keys[i % 3], [{ op: 'increment', path: '/n', by: 1 }]);
      // one transaction, three streams, several events each
      await db.query('BEGIN');
      for (let i = 0; i < 9; i++) {
        await db.query("UPDATE d SET state = hx_merge(state, $1::jsonb) WHERE session_id = $2",
          [JSON.stringify([{ op: 'append', path: '/l', items: [`t-${i}`] }]), keys[i % 3]]);
      }
      await db.query('COMMIT');
      // one transaction of 3 MB of events: hxstate's plugin sends it in parts
      await db.query('BEGIN');
      for (let i = 0; i < 30; i++) {
        await db.query("UPDATE d SET state = hx_merge(state, $1::jsonb) WHERE session_id = $2",
          [JSON.stringify({ big: `${i}-${'x'.repeat(100000)}` }), keys[i % 3]]);
      }
      await db.query('COMMIT');
      // a rolled back transaction: nothing
      await db.query('BEGIN');
      await db.query("UPDATE d SET state = hx_merge(state, '{\"gone\": 1}') WHERE session_id = $1", [keys[0]]);
      await db.query('ROLLBACK');
      await caughtUp(got, keys);
      assert.equal(hub.stats.walEvents > 0, true);
      assert.deepEqual(errors, []);
      for (const k of keys) assert.equal(got.get(k)[got.get(k).length - 1].state.gone, undefined);
    } finally {
      await hub.stop();
    }
  });
}

test('WalStream with hxstate\'s plugin and maxTxBytes: a transaction\'s texts past it come without (the log has them), every insert once', async () => {
  await db.query('INSERT INTO d VALUES (\'small\', \'{"n": 0}\')');
  const client = new Client({ database: DB, replication: 'database', application_name: 'hx-decoder-small' });
  client.on('error', () => {});
  await client.connect();
  const inserts = [];
  const errors = [];
  const wal = new WalStream(client, {
    publication: 'hxstate_events', schema: 'public', statusInterval: 1000, decoder: 'hxstate', maxTxBytes: 300,
    onInsert: (stream, seq, text, bytes) => inserts.push({ stream, seq, text, bytes }),
    onError: (err) => errors.push(err),
  });
  try {
    await wal.createSlot(10000);
    wal.start();
    const first = await h.lastSeq(db, 'd:small');
    await db.query('BEGIN');
    for (let i = 0; i < 6; i++) await h.merge(db, 'd', 'small', [{ op: 'replace', path: '/n', value: `${i}-${'y'.repeat(100)}` }]);
    await db.query('COMMIT');
    await h.waitFor(() => inserts.length === 6, 'the six inserts');
    const logged = (await h.loggedEvents(db, 'd:small')).slice(first);
    assert.deepStrictEqual(inserts.map((i) => i.seq), logged.map((r) => r.seq));
    let sum = 0;
    for (let k = 0; k < 6; k++) {
      const text = JSON.stringify(logged[k].event);
      assert.equal(inserts[k].bytes, Buffer.byteLength((await db.query('SELECT event::text AS t FROM hx_event WHERE stream = $1 AND seq = $2', ['d:small', logged[k].seq])).rows[0].t));
      if (sum + inserts[k].bytes <= 300) {
        sum += inserts[k].bytes;
        assert.deepStrictEqual(JSON.parse(inserts[k].text), JSON.parse(text), `insert ${k} has its text`);
      } else {
        assert.equal(inserts[k].text, null, `insert ${k} past 300 bytes`);
      }
    }
    assert.ok(inserts.some((i) => i.text === null) && inserts.some((i) => i.text !== null));
    assert.deepStrictEqual(errors, []);
    await wal.finish(5000);
  } finally {
    await client.end().catch(() => {});
  }
});

test('decoder auto on a server that does not name hxstate in output_plugin_libraries: pgoutput, and why', async (t) => {
  if (!(await allowPlugin(false))) {
    t.skip('this server has no output_plugin_libraries: it loads any plugin');
    return;
  }
  const keys = ['refused-a'];
  await db.query('INSERT INTO d VALUES ($1, \'{"n": 0}\')', keys);
  try {
    const { hub, got, errors } = await followAll({}, keys);
    try {
      await h.waitFor(() => got.get(keys[0]).length > 0, 'the snapshot');
      assert.equal(hub.transport, 'wal');
      assert.equal(hub.decoder, 'pgoutput');
      assert.match(hub.decoderReason, /output_plugin_libraries \(pgoutput, test_decoding\) does not name hxstate: decoding with pgoutput/);
      await h.merge(db, 'd', keys[0], [{ op: 'increment', path: '/n', by: 5 }]);
      await caughtUp(got, keys);
      assert.deepEqual(errors, []);
    } finally {
      await hub.stop();
    }
    // decoder 'hxstate' over the WAL only: it cannot start
    const strict = new HxHub({ pg: { database: DB }, transport: 'wal', decoder: 'hxstate' });
    strict.on('error', () => {});
    await assert.rejects(strict.start(), /cannot follow over the WAL: output_plugin_libraries \(pgoutput, test_decoding\) does not name hxstate/);
    await strict.stop();
    // and with transport 'auto' it follows over LISTEN, saying why
    const listening = new HxHub({ pg: { database: DB }, decoder: 'hxstate' });
    listening.on('error', () => {});
    try {
      await listening.start();
      assert.equal(listening.transport, 'listen');
      assert.match(listening.transportReason, /does not name hxstate: following over LISTEN/);
      assert.equal(listening.decoder, null);
    } finally {
      await listening.stop();
    }
  } finally {
    await allowPlugin(true);
  }
});

test('decoder auto: a server that refuses the plugin when the slot is made (after the hub read that it would not): pgoutput', async (t) => {
  const { rows: [r] } = await admin.query("SELECT current_setting('output_plugin_libraries', true) AS v");
  if (r.v === null) {
    t.skip('this server has no output_plugin_libraries: it loads any plugin');
    return;
  }
  const keys = ['late-a'];
  await db.query('INSERT INTO d VALUES ($1, \'{"n": 0}\')', keys);
  // the reader reads output_plugin_libraries with hxstate in it; the
  // replication connection comes after the server dropped it
  const pg = async (role) => {
    if (role === 'replication') await allowPlugin(false);
    return { database: DB };
  };
  try {
    const hub = new HxHub({ pg, transport: 'wal', pollInterval: 0 });
    const errors = [];
    hub.on('error', (err) => errors.push(err));
    const events = [];
    const sub = hub.follow({ table: 'd', key: keys[0] });
    sub.on('event', (event, state) => events.push({ seq: event.metadata.seq, state }));
    try {
      await hub.start();
      await h.waitFor(() => events.length > 0, 'the snapshot');
      assert.equal(hub.decoder, 'pgoutput');
      assert.match(hub.decoderReason, /hxstate's output plugin was refused \(library "hxstate" may not be used as an output plugin\): decoding with pgoutput/);
      const next = await h.merge(db, 'd', keys[0], [{ op: 'increment', path: '/n', by: 2 }]);
      await h.waitFor(() => events[events.length - 1].state.n === 2, 'the event');
      assert.deepStrictEqual(events[events.length - 1].state, next);
      assert.deepEqual(errors, []);
    } finally {
      await hub.stop();
    }
  } finally {
    await allowPlugin(true);
  }
});

test('WalStream with hxstate\'s plugin refuses a message that is not one of its own, or that its events overrun', async () => {
  const cases = [
    ['an unknown kind', Buffer.from([0x58, 0, 0, 0, 0]), /unknown kind 88/],
    ['a count past the message', Buffer.from([0x50, 0, 0, 0, 1]), /shorter than its events/],
    ['a stream length past the message', Buffer.from([0x50, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]), /shorter than its events/],
    ['a text past the message', Buffer.concat([Buffer.from([0x50, 0, 0, 0, 1, 0, 0, 0, 1, 0x61]), Buffer.alloc(8, 0), Buffer.from([0, 0, 0, 9, 1, 0x7b])]), /shorter than its events/],
    ['bytes after its events', Buffer.from([0x50, 0, 0, 0, 0, 0]), /longer than its events/],
    ['a seq that is not a safe integer', Buffer.concat([Buffer.from([0x50, 0, 0, 0, 1, 0, 0, 0, 1, 0x61]), Buffer.from([0xff, 0, 0, 0, 0, 0, 0, 1]), Buffer.from([0, 0, 0, 0, 0])]), /not a safe integer/],
  ];
  for (const [what, payload, message] of cases) {
    const errors = [];
    const inserts = [];
    const wal = new WalStream({}, {
      publication: 'p', schema: 'public', statusInterval: 1000, decoder: 'hxstate',
      onInsert: (...a) => inserts.push(a), onError: (err) => errors.push(err),
    });
    wal._receive(Buffer.concat([Buffer.from([0x77]), Buffer.alloc(24, 0), payload]));
    assert.equal(errors.length, 1, what);
    assert.match(errors[0].message, message, what);
    assert.deepEqual(inserts, [], what);
  }
});

test('WalStream with hxstate\'s plugin: parts are held until the commit, and the commit\'s end LSN is what it confirms', () => {
  const inserts = [];
  const wal = new WalStream({}, {
    publication: 'p', schema: 'public', statusInterval: 1000, decoder: 'hxstate',
    onInsert: (...a) => inserts.push(a), onError: (err) => { throw err; },
  });
  const event = (stream, seq, text) => {
    const s = Buffer.from(stream);
    const t = text === null ? Buffer.alloc(0) : Buffer.from(text);
    const head = Buffer.alloc(4);
    head.writeUInt32BE(s.length);
    const mid = Buffer.alloc(13);
    mid.writeBigInt64BE(BigInt(seq));
    mid.writeUInt32BE(text === null ? 42 : t.length, 8);
    mid[12] = text === null ? 0 : 1;
    return Buffer.concat([head, s, mid, t]);
  };
  const count = (n) => { const b = Buffer.alloc(4); b.writeUInt32BE(n); return b; };
  const w = (payload) => Buffer.concat([Buffer.from([0x77]), Buffer.alloc(24, 0), payload]);
  wal._receive(w(Buffer.concat([Buffer.from('P'), count(2), event('s:1', 7, '{"a":1}'), event('s:é', 2 ** 40, null)])));
  assert.deepEqual(inserts, []);
  assert.equal(wal.lsn, 0n);
  const commit = Buffer.alloc(17);
  commit[0] = 0x43;
  commit.writeBigUInt64BE(0x1234n, 1);
  wal._receive(w(Buffer.concat([commit, count(1), event('s:1', 8, '{"b":2}')])));
  assert.deepEqual(inserts, [['s:1', 7, '{"a":1}', 7], ['s:é', 2 ** 40, null, 42], ['s:1', 8, '{"b":2}', 7]]);
  assert.equal(wal.lsn, 0x1234n);
  assert.equal(wal.inTransaction, false);
});

test('coalesceMs: after a CopyData the socket is left unread that long, once per read; the end of the copy reads again at once', async () => {
  const { StreamingQuery } = require('../lib/wal');
  const calls = [];
  const stream = { writable: true, pause: () => calls.push('pause'), resume: () => calls.push('resume'), write: () => calls.push('write') };
  const got = [];
  const q = new StreamingQuery('START_REPLICATION ...', (chunk) => got.push(chunk.toString()), 30);
  q.submit({ stream, query: () => calls.push('query') });
  q.handleCopyData({ chunk: Buffer.from('a') });
  q.handleCopyData({ chunk: Buffer.from('b') }); // the same read: no second pause
  assert.deepEqual(got, ['a', 'b']);
  assert.deepEqual(calls, ['query', 'pause']);
  await h.waitFor(() => calls.includes('resume'), 'the socket read again');
  q.handleCopyData({ chunk: Buffer.from('c') });
  assert.deepEqual(calls, ['query', 'pause', 'resume', 'pause']);
  q.end(); // CopyDone: the server's answer is read at once
  assert.deepEqual(calls, ['query', 'pause', 'resume', 'pause', 'resume', 'write']);
  await h.sleep(60);
  assert.equal(calls.filter((c) => c === 'resume').length, 2, 'the timer was cleared');
  // coalesceMs 0: never paused
  const plain = [];
  const q0 = new StreamingQuery('x', () => {}, 0);
  q0.submit({ stream: { ...stream, pause: () => plain.push('pause') }, query: () => {} });
  q0.handleCopyData({ chunk: Buffer.from('a') });
  assert.deepEqual(plain, []);
  assert.throws(() => new HxHub({ coalesceMs: 1001 }), /coalesceMs is a number of milliseconds from 0 to 1000/);
  assert.throws(() => new HxHub({ coalesceMs: Number.NaN }), /coalesceMs/);
});

test('coalesceMs 50: a burst of transactions is handed out whole and in order', async () => {
  const key = 'burst';
  await db.query('INSERT INTO d VALUES ($1, \'{"n": 0}\')', [key]);
  const { hub, got, errors } = await followAll({ coalesceMs: 50 }, [key]);
  try {
    await h.waitFor(() => got.get(key).length > 0, 'the snapshot');
    const writers = [];
    for (let w = 0; w < 4; w++) {
      writers.push((async () => {
        const c = await h.connect(DB);
        try {
          for (let i = 0; i < 50; i++) await c.query("UPDATE d SET state = hx_merge(state, '[{\"op\": \"increment\", \"path\": \"/n\", \"by\": 1}]') WHERE session_id = $1", [key]);
        } finally {
          await c.end();
        }
      })());
    }
    await Promise.all(writers);
    await caughtUp(got, [key]);
    assert.equal(got.get(key)[got.get(key).length - 1].state.n, 200);
    assert.deepEqual(errors, []);
  } finally {
    await hub.stop();
  }
});
