'use strict';
// A listener that throws, or an async 'event' listener whose promise
// rejects, neither ends the process (an unhandled rejection would) nor
// stops the stream: its error goes to 'error' (the subscription's if
// someone listens there, else the hub's, else a process warning), and the
// next event is handed out.  Each case runs in a child process, so that
// an error the client let escape ends the child, not the test runner.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const h = require('../../test/js/helpers');

const DB = 'hx_client_listeners';
const CLIENT = path.join(__dirname, '..');

let db;
before(async () => {
  db = await h.freshDatabase(DB);
  await h.streamTable(db, 'sessions');
});
after(async () => { await db.end(); });

/**
 * Run body (the text of an async function of (client, say)) in a child
 * that follows sessions key over LISTEN; resolves to {code, signal, out}.
 * The child prints "ready" once following, the test writes, and the
 * child ends itself once it has handed out seq 3.
 */
async function child(key, body) {
  await db.query(`INSERT INTO sessions VALUES ($1, '{"n": 0}')`, [key]);
  const script = `
    const client = require(${JSON.stringify(CLIENT)});
    const say = (...x) => process.stdout.write(x.join(' ') + '\\n');
    process.on('warning', (w) => { if (w.name === 'HxStateWarning') say('warning', w.message.split('\\n')[0]); });
    (${body})(client, say, ${JSON.stringify({ database: DB, key })}).catch((err) => { say('failed', err.message); process.exit(2); });
  `;
  const proc = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  let done = null;
  exited.then((r) => { done = r; });
  try {
    await h.waitFor(() => out.includes('ready') || done !== null, 'the child to follow');
    for (let i = 0; i < 2; i++) await h.merge(db, 'sessions', key, [{ op: 'increment', path: '/n', by: 1 }]);
    await h.waitFor(() => done !== null, 'the child to hand out seq 3 and end');
  } finally {
    if (done === null) proc.kill('SIGKILL');
  }
  const r = await exited;
  return { ...r, out, err };
}

// what the children share: follow key, hand out seq 1..3, the listener
// failing at seq 2, and end once seq 3 is out
const FOLLOW = `
  async function follow(client, say, o, { hubErrors, subErrors, fail }) {
    const hub = new client.HxHub({ pg: { database: o.database }, transport: 'listen', pollInterval: 0 });
    if (hubErrors) hub.on('error', (err) => say('hub-error', err.message));
    await hub.start();
    const sub = hub.follow({ table: 'sessions', key: o.key });
    if (subErrors) sub.on('error', (err) => say('sub-error', err.message));
    sub.on('event', fail);
    sub.on('event', async (event) => {
      say('seq', event.metadata.seq);
      if (event.metadata.seq === 3) setImmediate(() => hub.stop().then(() => say('stopped')));
    });
    await sub.ready;
    say('ready');
  }
`;

/** A child following over a hub: follow()'s options, and the source of the listener that fails at seq 2. */
function hubChild(key, options, fail) {
  return child(key, `async (client, say, o) => {
    ${FOLLOW}
    await follow(client, say, o, { ...${JSON.stringify(options)}, fail: ${fail} });
  }`);
}

/** The child ended by itself, having stopped its hub: nothing ended it. */
function endedWell(r) {
  assert.deepStrictEqual({ code: r.code, signal: r.signal }, { code: 0, signal: null }, r.err);
}

test('an async listener that rejects: the subscription\'s \'error\', and the next event', async () => {
  const r = await hubChild('l-1', { subErrors: true, hubErrors: true },
    "async (event) => { if (event.metadata.seq === 2) throw new Error('the listener failed at seq 2'); }");
  endedWell(r);
  assert.equal(r.out, 'seq 1\nready\nseq 2\nsub-error the listener failed at seq 2\nseq 3\nstopped\n');
});

test('a listener that throws, with no \'error\' on the subscription: the hub\'s \'error\'', async () => {
  const r = await hubChild('l-2', { hubErrors: true },
    "(event) => { if (event.metadata.seq === 2) throw new Error('thrown at seq 2'); }");
  endedWell(r);
  assert.equal(r.out, 'seq 1\nready\nhub-error thrown at seq 2\nseq 2\nseq 3\nstopped\n');
});

test('a rejection with no \'error\' listener anywhere: a process warning, and the stream goes on', async () => {
  const r = await hubChild('l-3', {},
    "(event) => (event.metadata.seq === 2 ? Promise.reject(new Error('rejected at seq 2')) : null)");
  endedWell(r);
  // the warning is emitted on a later tick: where it falls among the events does not matter
  const lines = r.out.trim().split('\n');
  assert.deepStrictEqual(lines.filter((l) => !l.startsWith('warning')), ['seq 1', 'ready', 'seq 2', 'seq 3', 'stopped']);
  assert.deepStrictEqual(lines.filter((l) => l.startsWith('warning')),
    ["warning a listener failed and nothing listens for 'error': Error: rejected at seq 2"]);
});

test('HxStream: a rejecting listener goes to its \'error\', and the stream goes on', async () => {
  const r = await child('l-4', `async (client, say, o) => {
    const stream = new client.HxStream({ pg: { database: o.database }, table: 'sessions', key: o.key, pollInterval: 0 });
    stream.on('error', (err) => say('stream-error', err.message));
    stream.on('event', async (event) => {
      say('seq', event.metadata.seq);
      if (event.metadata.seq === 2) throw new Error('async failure at seq 2');
      if (event.metadata.seq === 3) setImmediate(() => stream.stop().then(() => say('stopped')));
    });
    await stream.start();
    say('ready');
  }`);
  endedWell(r);
  assert.equal(r.out, 'seq 1\nready\nseq 2\nstream-error async failure at seq 2\nseq 3\nstopped\n');
});
