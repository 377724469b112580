'use strict';
// What NOTIFY does not bring, the log does: payload=none streams followed by
// polling alone, a gap (a notification ahead of the client's seq) filled
// from the log page by page, and reference payloads (events of 8000 bytes
// or more) resolved from the log.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('../../test/js/helpers');

const DB = 'hx_client_gaps';

let db;
before(async () => {
  db = await h.freshDatabase(DB);
});
after(async () => { await db.end(); });

test('payload=none: polling the log brings every event', async () => {
  await h.streamTable(db, 'quiet', 'payload=none');
  await db.query(`INSERT INTO quiet VALUES ('q-1', '{"n": 0, "l": []}')`);
  const stream = h.follow(DB, 'quiet', 'q-1', { pollInterval: 50 });
  await stream.start();
  try {
    for (let i = 1; i <= 20; i++) {
      await h.merge(db, 'quiet', 'q-1', [{ op: 'increment', path: '/n', by: i }, { op: 'append', path: '/l', items: [i] }]);
    }
    await h.waitFor(() => stream.seq === 21, 'seq 21');
    assert.deepStrictEqual(h.seqs(stream), h.range(1, 21));
    assert.deepStrictEqual(stream.state, await h.rowState(db, 'quiet', 'q-1'));
    assert.equal(stream.stats.notifications, 0);
    assert.ok(stream.stats.polls > 0);
  } finally {
    await stream.stop();
  }
});

test('a notification ahead of the client fills the gap from the log, page by page', async () => {
  await h.streamTable(db, 'gappy', 'payload=none');
  await db.query(`INSERT INTO gappy VALUES ('g-1', '{"items": []}')`);
  // no polling: only the one notification below can bring the events
  const stream = h.follow(DB, 'gappy', 'g-1', { pageSize: 3 });
  await stream.start();
  try {
    const truth = new Map();
    for (let i = 1; i <= 10; i++) {
      truth.set(i + 1, await h.merge(db, 'gappy', 'g-1', [{ op: 'append', path: '/items', items: [`i${i}`] }]));
    }
    // seqs 2..11 were never notified; now the trigger notifies again
    await h.setTrigger(db, 'gappy', 'payload=auto');
    truth.set(12, await h.merge(db, 'gappy', 'g-1', [{ op: 'replace', path: '/done', value: true }]));
    await h.waitFor(() => stream.seq === 12, 'seq 12');

    assert.deepStrictEqual(h.seqs(stream), h.range(1, 12));
    for (let i = 1; i < stream.log.events.length; i++) {
      const seq = stream.log.events[i].metadata.seq;
      assert.deepStrictEqual(stream.log.states[i], truth.get(seq), `state at seq ${seq}`);
    }
    assert.equal(stream.stats.notifications, 1);
    assert.equal(stream.stats.polls, 0);
    assert.ok(stream.stats.pages >= 4, `11 events in pages of 3: ${stream.stats.pages} pages`);
    assert.equal(stream.log.resyncs.length, 0);
  } finally {
    await stream.stop();
  }
});

test('events out of order: a notification behind the client is ignored, one ahead fills the gap', async () => {
  await h.streamTable(db, 'mixed', 'payload=auto');
  await db.query(`INSERT INTO mixed VALUES ('m-1', '{"n": 0}')`);
  const stream = h.follow(DB, 'mixed', 'm-1');
  await stream.start();
  const watcher = await h.connect(DB);
  try {
    for (let i = 0; i < 5; i++) await h.merge(db, 'mixed', 'm-1', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => stream.seq === 6, 'seq 6');
    const logged = await h.loggedEvents(db, 'mixed:m-1');
    // Replay notifications on the stream's channel out of order: seq 3
    // and seq 6 again, both old news.
    const channel = stream.channel;
    const pages = stream.stats.pages;
    for (const seq of [3, 6]) {
      await watcher.query('SELECT pg_notify($1, $2)', [channel, JSON.stringify(logged[seq - 1].event)]);
    }
    await h.waitFor(() => stream.stats.notifications === 7, 'the two replays');
    await h.merge(db, 'mixed', 'm-1', [{ op: 'increment', path: '/n', by: 1 }]); // seq 7, notified
    await h.waitFor(() => stream.seq === 7, 'seq 7');
    assert.deepStrictEqual(h.seqs(stream), h.range(1, 7));
    assert.deepStrictEqual(stream.state, { n: 6 });
    assert.equal(stream.stats.pages, pages + 1, 'old news needs no log read (seq 7 needs one)');

    // seq 8 is logged but never notified; seq 9 is: a gap of one
    await h.setTrigger(db, 'mixed', 'payload=none');
    await h.merge(db, 'mixed', 'm-1', [{ op: 'increment', path: '/n', by: 10 }]); // seq 8, silent
    await h.setTrigger(db, 'mixed', 'payload=auto');
    await h.merge(db, 'mixed', 'm-1', [{ op: 'increment', path: '/n', by: 100 }]); // seq 9, notified
    await h.waitFor(() => stream.seq === 9, 'seq 9');
    assert.deepStrictEqual(h.seqs(stream), h.range(1, 9));
    assert.deepStrictEqual(stream.state, { n: 116 });
    assert.ok(stream.stats.pages >= 1, 'the gap was filled from the log');
  } finally {
    await watcher.end();
    await stream.stop();
  }
});

test('reference payloads: deltas of 8000 bytes and more come from the log', async () => {
  await h.streamTable(db, 'big', 'payload=auto');
  await db.query(`INSERT INTO big VALUES ('b-1', '{"blobs": [], "n": 0}')`);
  const watcher = await h.connect(DB);
  const payloads = [];
  watcher.on('notification', (msg) => payloads.push(JSON.parse(msg.payload)));
  await watcher.query(`LISTEN ${watcher.escapeIdentifier('hx:big:b-1')}`);
  const stream = h.follow(DB, 'big', 'b-1');
  await stream.start();
  try {
    const truth = new Map();
    // the last event is a reference too: only resolving it brings the client there
    const sizes = [10, 9000, 20, 7990, 8100, 30, 40000];
    for (const [i, size] of sizes.entries()) {
      const ops = [{ op: 'append', path: '/blobs', items: ['x'.repeat(size)] }, { op: 'increment', path: '/n', by: 1 }];
      truth.set(i + 2, await h.merge(db, 'big', 'b-1', ops));
    }
    const last = 1 + sizes.length;
    await h.waitFor(() => stream.seq === last && payloads.length === sizes.length, `seq ${last}`);

    // the watcher saw references exactly for the events of 8000 bytes or more
    const logged = await h.loggedEvents(db, 'big:b-1');
    const { rows: sizeRows } = await db.query(
      `SELECT seq::int, octet_length(event::text) AS bytes FROM hx_event WHERE stream = 'big:b-1'`);
    const bytes = new Map(sizeRows.map((r) => [r.seq, r.bytes]));
    for (const p of payloads) {
      const seq = p.ref ? p.seq : p.metadata.seq;
      if (bytes.get(seq) >= 8000) {
        assert.deepStrictEqual(p, { ref: true, seq, type: 'STATE_DELTA', stream: 'big:b-1' });
      } else {
        assert.deepStrictEqual(p, logged[seq - 1].event, `seq ${seq} (${bytes.get(seq)} bytes) is sent whole`);
      }
    }
    const refs = payloads.filter((p) => p.ref).length;
    assert.ok(refs >= 3, `${refs} references`);
    assert.equal(stream.stats.references, refs);

    assert.deepStrictEqual(h.seqs(stream), h.range(1, last));
    for (let i = 1; i < stream.log.events.length; i++) {
      const seq = stream.log.events[i].metadata.seq;
      assert.deepStrictEqual(stream.log.events[i], logged[seq - 1].event);
      assert.deepStrictEqual(stream.log.states[i], truth.get(seq), `state at seq ${seq}`);
    }
  } finally {
    await watcher.end();
    await stream.stop();
  }
});
