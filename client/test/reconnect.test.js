'use strict';
// A dropped connection (pg_terminate_backend) costs nothing: the client
// reconnects, LISTENs again and catches up from the log, missing and
// repeating no event.  stop() leaves no timer and no connection behind, so
// a process that stops its streams exits on its own.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const h = require('../../test/js/helpers');

const DB = 'hx_client_reconnect';

let db;
let admin; // on database postgres, to lock clients out of DB for a while
before(async () => {
  db = await h.freshDatabase(DB);
  admin = await h.connect('postgres');
  await h.streamTable(db, 'sessions');
});
after(async () => {
  await admin.query(`ALTER DATABASE ${DB} ALLOW_CONNECTIONS true`);
  await admin.end();
  await db.end();
});

async function lockOut(on) {
  await admin.query(`ALTER DATABASE ${DB} ALLOW_CONNECTIONS ${on ? 'false' : 'true'}`);
}

test('reconnect after pg_terminate_backend, catching up from the log', async () => {
  await db.query(`INSERT INTO sessions VALUES ('r-1', '{"l": [], "n": 0}')`);
  const stream = h.follow(DB, 'sessions', 'r-1'); // no polling: the reconnect must catch up
  await stream.start();
  try {
    const truth = new Map();
    const write = async (i) => {
      const state = await h.merge(db, 'sessions', 'r-1', [{ op: 'append', path: '/l', items: [i] }, { op: 'increment', path: '/n', by: i }]);
      truth.set(await h.lastSeq(db, 'sessions:r-1'), state);
    };
    for (let i = 1; i <= 3; i++) await write(i);
    await h.waitFor(() => stream.seq === 4, 'seq 4');
    const [pid] = await h.backendPids(db, stream.appName);

    await lockOut(true);
    try {
      assert.equal(await h.killBackends(db, stream.appName), 1);
      await h.waitFor(() => stream.log.disconnects === 1, 'the disconnect');
      assert.equal(stream.connected, false);
      for (let i = 4; i <= 8; i++) await write(i); // notified to nobody
    } finally {
      await lockOut(false);
    }
    await h.waitFor(() => stream.seq === 9, 'the catch-up to seq 9');
    assert.equal(stream.log.reconnects, 1);
    assert.equal(stream.connected, true);
    const pids = await h.backendPids(db, stream.appName);
    assert.equal(pids.length, 1);
    assert.notEqual(pids[0], pid);

    for (let i = 9; i <= 10; i++) await write(i); // and it listens again
    await h.waitFor(() => stream.seq === 11, 'seq 11');

    assert.deepStrictEqual(h.seqs(stream), h.range(1, 11));
    for (let i = 1; i < stream.log.events.length; i++) {
      const seq = stream.log.events[i].metadata.seq;
      assert.deepStrictEqual(stream.log.states[i], truth.get(seq), `state at seq ${seq}`);
    }
    assert.equal(stream.log.resyncs.length, 0);
    assert.ok(stream.stats.pages >= 1);
    assert.ok(stream.log.errors.length >= 1, 'the lost connection was reported');
    assert.equal(stream.stats.notifications, 5, 'seqs 2-4 and 10-11 were notified');
  } finally {
    await stream.stop();
  }
});

test('repeated kills, with writes racing the reconnects', async () => {
  await db.query(`INSERT INTO sessions VALUES ('r-2', '{"n": 0}')`);
  const stream = h.follow(DB, 'sessions', 'r-2', { pollInterval: 100 });
  await stream.start();
  try {
    const killed = new Set();
    for (let round = 1; round <= 5; round++) {
      // the current connection: a backend we have not killed yet, and in use
      let pids = [];
      await h.waitFor(async () => {
        pids = await h.backendPids(db, stream.appName);
        return pids.length === 1 && !killed.has(pids[0]) && stream.connected;
      }, `connection ${round}`);
      killed.add(pids[0]);
      assert.equal(await h.killBackends(db, stream.appName), 1);
      for (let i = 0; i < 10; i++) await h.merge(db, 'sessions', 'r-2', [{ op: 'increment', path: '/n', by: 1 }]);
      await h.waitFor(() => stream.log.disconnects === round, `disconnect ${round}`);
    }
    await h.waitFor(() => stream.seq === 51, 'seq 51');
    assert.deepStrictEqual(h.seqs(stream), h.range(1, 51));
    assert.deepStrictEqual(stream.log.states.map((s) => s.n), h.range(0, 50));
  } finally {
    await stream.stop();
  }
});

function resources() {
  const counts = {};
  for (const r of process.getActiveResourcesInfo()) counts[r] = (counts[r] || 0) + 1;
  return counts;
}

test('stop() leaves no timer and no connection', async (t) => {
  await db.query(`INSERT INTO sessions VALUES ('r-3', '{"n": 0}')`);
  await new Promise((resolve) => setImmediate(resolve));
  const before = resources();

  await t.test('after following with polling on', async () => {
    const stream = h.follow(DB, 'sessions', 'r-3', { pollInterval: 10, appName: 'hx-stop-1' });
    await stream.start();
    await h.merge(db, 'sessions', 'r-3', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => stream.seq === 2 && stream.stats.polls > 2, 'seq 2 and some polls');
    await stream.stop();
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepStrictEqual(resources(), before);
    assert.deepStrictEqual(await h.backendPids(db, 'hx-stop-1'), []);
  });

  await t.test('while waiting to reconnect', async () => {
    const stream = h.follow(DB, 'sessions', 'r-3', { pollInterval: 10, appName: 'hx-stop-2', reconnect: { min: 60000, max: 60000 } });
    await stream.start();
    await h.killBackends(db, 'hx-stop-2');
    await h.waitFor(() => stream.log.disconnects === 1, 'the disconnect');
    await stream.stop();
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepStrictEqual(resources(), before);
  });

  await t.test('while starting', async () => {
    const stream = h.follow(DB, 'sessions', 'r-3', { pollInterval: 10, appName: 'hx-stop-3' });
    const started = stream.start();
    await stream.stop();
    await assert.rejects(started, /stopped/);
    assert.equal(stream.log.events.length, 0, 'no event after stop()');
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepStrictEqual(resources(), before);
    await h.waitFor(async () => (await h.backendPids(db, 'hx-stop-3')).length === 0, 'the connection to close');
  });

  await t.test('no event is emitted after stop()', async () => {
    const stream = h.follow(DB, 'sessions', 'r-3', { pollInterval: 10, appName: 'hx-stop-4' });
    await stream.start();
    const seen = stream.log.events.length;
    const stopped = stream.stop();
    await h.merge(db, 'sessions', 'r-3', [{ op: 'increment', path: '/n', by: 1 }]);
    await stopped;
    await h.sleep(50);
    assert.equal(stream.log.events.length, seen);
  });
});

test('a process that stops its stream exits by itself', async () => {
  await db.query(`INSERT INTO sessions VALUES ('r-4', '{"n": 0}')`);
  const script = `
    const { HxStream } = require(${JSON.stringify(path.join(__dirname, '..'))});
    const s = new HxStream({ pg: { database: ${JSON.stringify(DB)} }, table: 'sessions', key: 'r-4',
                            pollInterval: 5 });
    s.on('event', (e) => {
      process.stdout.write(e.type + ' ' + e.metadata.seq + '\\n');
      if (e.metadata.seq === 2) s.stop().then(() => process.stdout.write('stopped\\n'));
    });
    s.start().then(() => process.stdout.write('started\\n'));
  `;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  try {
    await h.waitFor(() => out.includes('started'), 'the child to start');
    await h.merge(db, 'sessions', 'r-4', [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => out.includes('stopped'), 'the child to stop its stream');
    // it must now exit without help; a leftover timer or socket would keep it alive
    let done = null;
    exited.then((r) => { done = r; });
    await h.waitFor(() => done !== null, 'the child to exit by itself');
    assert.deepStrictEqual(done, { code: 0, signal: null });
    assert.equal(out, 'STATE_SNAPSHOT 1\nstarted\nSTATE_DELTA 2\nstopped\n');
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});
