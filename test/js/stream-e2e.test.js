'use strict';
// End to end: the stream of one busy row, followed by the client
// (client/index.js) through a subscription that starts late and a
// connection killed twice, is exactly the row's history.
//
// 8 writer connections run 250 random hx_merge writes each on ONE row
// (appends, increments, replaces, merges, keys that need JSON Pointer
// escaping, array resets, and now and then a value big enough that the
// event is over NOTIFY's 8000 bytes and goes out as a reference).  Each
// write is
//   BEGIN; UPDATE ... RETURNING state; SELECT max(seq) ...; COMMIT
// so the test knows the truth: the state at every seq (the row lock holds
// the other writers off until COMMIT).  The client subscribes after some
// writes have committed, and an admin connection kills its backend twice
// while the writes go on.  At the end:
//   - the client's state is the row's state;
//   - at every seq it reported, its state equals the truth at that seq;
//   - it reported every seq from its starting seq + 1 to the last exactly
//     once, in order.
// Set HX_SEED to replay a run (the seed is printed as a diagnostic).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { freshDatabase, connect, rng, canonical, waitFor: waitForOrFail } = require('./helpers');
const { HxStream } = require('../../client');

const DB = 'hx_stream_e2e';
const WRITERS = 8;
const WRITES = 250;
const SUBSCRIBE_AT = 300;       // commits before the client starts
const KILL_AT = [900, 1500];    // commits before each kill
const STREAM = 'sessions:s-1';
const APP = 'hx-e2e-client';
const PATIENCE_MS = 60000;      // deadlock guard for waits, not a timing assertion
const waitFor = (check, what) => waitForOrFail(check, what, PATIENCE_MS);

function digest(state) {
  return crypto.createHash('sha1').update(canonical(state)).digest('hex');
}

/** One random hx_merge op list, from writer w's generator. */
function randomWrite(rand, w, i) {
  const pick = (xs) => xs[Math.floor(rand() * xs.length)];
  const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
  const agent = () => `a${int(0, 3)}`;
  const scalar = () => pick([
    () => int(-1000, 1000), () => rand() * 100, () => `w${w}-${i}`, () => true, () => false,
    () => pick(['', 'ü', 'a/b', 'x~y', '"q"', '\\']),
  ])();
  const value = () => (rand() < 0.7 ? scalar() : { id: `${w}-${i}`, v: scalar(), tags: [scalar(), scalar()] });
  const big = () => crypto.randomBytes(int(4300, 9000)).toString('hex'); // 8,600 to 18,000 chars
  const ops = [];
  for (let n = int(1, 3); n > 0; n--) {
    const r = rand();
    if (r < 0.02) {
      ops.push(pick([
        { op: 'replace', path: '/blob', value: big() },
        { op: 'append', path: '/notes', items: [{ big: big() }] },
        { op: 'merge', path: `/agents/${agent()}/meta`, value: { big: big() } },
      ]));
    } else if (r < 0.05) {
      ops.push({ op: 'replace', path: '/notes', value: [`reset-${w}-${i}`] });
    } else if (r < 0.35) {
      ops.push({ op: 'append', path: pick(['/notes', `/agents/${agent()}/steps`, '/log']),
        items: Array.from({ length: int(1, 3) }, value) });
    } else if (r < 0.55) {
      ops.push({ op: 'increment', path: pick(['/count', `/agents/${agent()}/tokens`, '/stats/x']),
        by: pick([int(-5, 20), 0.5]) });
    } else if (r < 0.8) {
      ops.push({ op: 'replace', path: pick(['/title', '/status', `/agents/${agent()}/phase`, '/cfg/mode', '/blob']),
        value: rand() < 0.15 ? null : value() });
    } else {
      const patch = {};
      for (let k = int(1, 4); k > 0; k--) {
        patch[pick(['k0', 'k1', 'k2', 'a/b', 'c~d', 'e~1f'])] = rand() < 0.25 ? null : value();
      }
      ops.push({ op: 'merge', path: pick(['/cfg', `/agents/${agent()}/meta`]), value: patch });
    }
  }
  return ops;
}

let db;
before(async () => {
  db = await freshDatabase(DB);
  await db.query('CREATE TABLE sessions (session_id text PRIMARY KEY, state jsonb)');
  await db.query(`CREATE TRIGGER hx AFTER INSERT OR UPDATE OR DELETE ON sessions
                  FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id')`);
});
after(async () => { await db.end(); });


test(`${WRITERS} writers x ${WRITES} random writes, followed through a late start and two kills`, async (t) => {
  const seed = Number(process.env.HX_SEED || crypto.randomInt(2 ** 31));
  t.diagnostic(`HX_SEED=${seed}`);

  // the truth: the digest of the row's state at every seq
  const truth = new Map();
  const record = (seq, state) => {
    const d = digest(state);
    if (truth.has(seq)) {
      // a write that changed nothing logged no event: same seq, same state
      assert.equal(truth.get(seq), d, `two different states recorded for seq ${seq}`);
    }
    truth.set(seq, d);
  };
  const initial = { notes: [], count: 0, title: '', cfg: {}, agents: {} };
  await db.query('INSERT INTO sessions VALUES ($1, $2)', ['s-1', initial]);
  record(1, initial);

  // a watcher that counts the notifications that are references
  const watcher = await connect(DB);
  const payloads = { events: 0, refs: 0 };
  watcher.on('notification', (msg) => {
    if (JSON.parse(msg.payload).ref === true) payloads.refs++; else payloads.events++;
  });
  const { rows: ch } = await watcher.query('SELECT hx_stream_channel($1) AS c', [STREAM]);
  await watcher.query(`LISTEN ${watcher.escapeIdentifier(ch[0].c)}`);

  const writers = await Promise.all(Array.from({ length: WRITERS }, () => connect(DB)));
  let commits = 0;
  let stream = null;
  const seen = { seqs: [], digests: [], resyncs: 0, disconnects: 0, reconnects: 0, errors: [] };
  let kills = 0;
  try {
    const writing = Promise.all(writers.map(async (c, w) => {
      const rand = rng(seed * 31 + w).next;
      for (let i = 0; i < WRITES; i++) {
        const ops = randomWrite(rand, w, i);
        await c.query('BEGIN');
        const res = await c.query(
          'UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2 RETURNING state',
          [JSON.stringify(ops), 's-1']);
        const { rows } = await c.query('SELECT max(seq)::int AS seq FROM hx_event WHERE stream = $1', [STREAM]);
        await c.query('COMMIT');
        assert.equal(res.rowCount, 1);
        record(rows[0].seq, res.rows[0].state);
        commits++;
      }
    }));

    const following = (async () => {
      await waitFor(() => commits >= SUBSCRIBE_AT, `${SUBSCRIBE_AT} commits`);
      stream = new HxStream({
        pg: { database: DB, application_name: APP },
        table: 'sessions',
        key: 's-1',
        pollInterval: 500,
        reconnect: { min: 50, max: 500 },
        pageSize: 50,
      });
      stream.on('event', (event, state) => {
        seen.seqs.push(event.metadata.seq);
        seen.digests.push(digest(state));
      });
      stream.on('resync', () => { seen.resyncs++; });
      stream.on('disconnect', () => { seen.disconnects++; });
      stream.on('reconnect', () => { seen.reconnects++; });
      stream.on('error', (err) => seen.errors.push(err.message));
      await stream.start();
    })();

    const killing = (async () => {
      await following;
      for (const at of KILL_AT) {
        await waitFor(() => commits >= at && stream.connected, `${at} commits and a connection`);
        const { rows } = await db.query(
          `SELECT count(*)::int AS n FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                                            WHERE application_name = $1) k`, [APP]);
        assert.equal(rows[0].n, 1, 'one client backend to kill');
        kills++;
        await waitFor(() => seen.disconnects >= kills, `disconnect ${kills}`);
      }
    })();

    await Promise.all([writing, following, killing]);

    const { rows } = await db.query('SELECT max(seq)::int AS seq FROM hx_event WHERE stream = $1', [STREAM]);
    const last = rows[0].seq;
    await waitFor(() => stream.seq === last, `the client to reach seq ${last}`);

    t.diagnostic(`commits ${commits}, last seq ${last}, client started at seq ${seen.seqs[0]}, ` +
      `kills ${kills}, reconnects ${seen.reconnects}, notifications ${payloads.events} + ${payloads.refs} references, ` +
      `client stats ${JSON.stringify(stream.stats)}`);

    // the end state is the row's
    const { rows: row } = await db.query(`SELECT state FROM sessions WHERE session_id = 's-1'`);
    assert.deepStrictEqual(stream.state, row[0].state);

    // every seq from the start to the last, once each, in order
    const start = seen.seqs[0];
    assert.ok(start > 1, 'the client started after some writes');
    assert.deepStrictEqual(seen.seqs, Array.from({ length: last - start + 1 }, (_, i) => start + i));

    // at every seq, the truth
    const wrong = [];
    seen.seqs.forEach((seq, i) => {
      if (seen.digests[i] !== truth.get(seq)) wrong.push(seq);
    });
    assert.deepStrictEqual(wrong, [], `seqs where the client's state was not the row's: ${wrong.slice(0, 10)}`);

    // the run did what it set out to do
    assert.equal(commits, WRITERS * WRITES);
    assert.equal(kills, KILL_AT.length);
    assert.ok(seen.reconnects >= KILL_AT.length, `${seen.reconnects} reconnects`);
    assert.equal(seen.resyncs, 0);
    assert.ok(payloads.refs > 0, 'some events went out as references');
    assert.ok(stream.stats.references > 0, 'the client resolved references');
  } finally {
    if (stream) await stream.stop();
    await Promise.all(writers.map((c) => c.end()));
    await watcher.end();
  }
});
