'use strict';
// The CopilotKit runner (hxstate-gateway/copilotkit) when a runtime's
// process dies: two processes (copilotkit/child.js), each an
// HxAgentRunner with the deterministic streaming agent (copilotkit/agent.js),
// share HX_CK_RUNS runs (100: 10 threads of 10 runs, each run a turn
// that carries the thread's messages so far).  Every few hundred ms one of
// them is killed (SIGKILL, at random points of its runs) and started
// again; each run it had under way is sent, with the same runId, to the
// other process, which resumes it (runner.js: driven again from its input,
// the events its log holds not written again).  Then, for every thread,
// the transcript connect() replays and the stream's state are compared
// with those of the same runs made without a kill in a database of their
// own: equal, byte for byte; each run's RUN_STARTED and RUN_FINISHED are
// there once, no RUN_ERROR; and runs were resumed.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { fork } = require('node:child_process');
const { lastValueFrom, toArray } = require('rxjs');
const { verifyEvents } = require('@ag-ui/client');
const { from } = require('rxjs');
const h = require('../../test/js/helpers');
const { HxAgentRunner, STREAM_PREFIX } = require('../lib/copilotkit');
const { FakeAgent } = require('./copilotkit/agent');

const THREADS = 10;
const PER_THREAD = Math.max(1, Math.ceil(Number(process.env.HX_CK_RUNS || 100) / THREADS));
const RUNS = THREADS * PER_THREAD;
const SEED = Number(process.env.HX_CK_SEED || (Date.now() % 2147483647));
const AGENT = { delayMs: 2, tokens: 30 };
const REF = 'hx_gateway_ck_ref';
const KILL = 'hx_gateway_ck_kill';

let refDb;
let killDb;

before(async () => {
  refDb = await h.freshDatabase(REF);
  killDb = await h.freshDatabase(KILL);
});
after(async () => {
  await refDb.end();
  await killDb.end();
});

/** A PRNG (mulberry32) from the seed, so that a failure can be run again (HX_CK_SEED). */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const threadId = (t) => `ck-kill-${t}`;
const runId = (t, k) => `ck-kill-${t}-run-${k}`;
/** The messages run k of thread t is given: the user's turns so far. */
const messages = (t, k) => Array.from({ length: k + 1 }, (_, j) => ({ id: `u-${t}-${j}`, role: 'user', content: `turn ${j} of thread ${t}` }));

function input(t, k) {
  return { threadId: threadId(t), runId: runId(t, k), messages: messages(t, k), tools: [], context: [], state: {}, forwardedProps: {} };
}

/** Every thread's runs, in order, the threads at once, through run(t, k). */
async function allRuns(run) {
  await Promise.all(Array.from({ length: THREADS }, async (_, t) => {
    for (let k = 0; k < PER_THREAD; k++) await run(t, k);
  }));
}

/** The thread's transcript (connect()) and its stream's state, as JSON text. */
async function outcome(runner, db, t) {
  const events = await lastValueFrom(runner.connect({ threadId: threadId(t) }).pipe(toArray()));
  const stream = STREAM_PREFIX + threadId(t);
  const { rows } = await db.query('SELECT hx_stream_state_at($1, (SELECT max(seq) FROM hx_event WHERE stream = $1)) AS state', [stream]);
  return { events, transcript: JSON.stringify(events), state: JSON.stringify(rows[0].state) };
}

class Proc {
  constructor(name) {
    this.name = name;
    this.pending = new Map(); // id -> {resolve, msg}
    this.kills = 0;
    this.start();
  }

  start() {
    this.proc = fork(path.join(__dirname, 'copilotkit', 'child.js'), [KILL], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.proc.on('error', () => {}); // a send to a process that died: its pending runs go elsewhere (exit)
    this.alive = true;
    this.ready = new Promise((resolve) => {
      this.proc.on('message', (m) => {
        if (m.ready) return resolve();
        const p = this.pending.get(m.id);
        if (p) {
          this.pending.delete(m.id);
          p.resolve(m);
        }
      });
    });
    this.proc.on('exit', () => {
      this.alive = false;
      // what it had under way: the caller sends it elsewhere
      for (const p of this.pending.values()) p.resolve({ id: p.msg.id, ok: false, died: true });
      this.pending.clear();
    });
  }

  send(msg) {
    return new Promise((resolve) => {
      if (!this.alive) return resolve({ id: msg.id, ok: false, died: true });
      this.pending.set(msg.id, { resolve, msg });
      // a process that died before its exit was seen here: its channel is closed
      this.proc.send(msg, (err) => {
        if (err && this.pending.delete(msg.id)) resolve({ id: msg.id, ok: false, died: true });
      });
    });
  }

  kill() {
    this.kills++;
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.kill('SIGKILL');
    return exited;
  }

  async stop() {
    if (!this.alive) return;
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.send('stop', (err) => { if (err) this.proc.kill('SIGKILL'); });
    await exited;
  }
}

test(`${RUNS} runs through two processes, one killed (SIGKILL) at random points, equal the same runs without a kill (seed ${SEED})`, { timeout: 600000 }, async () => {
  const random = prng(SEED);

  // the reference: the same runs, in this process, nothing killed
  const ref = new HxAgentRunner({ pg: { database: REF } });
  await allRuns(async (t, k) => {
    const agent = new FakeAgent({ threadId: threadId(t), initialMessages: messages(t, k), ...AGENT });
    const events = await lastValueFrom(ref.run({ threadId: threadId(t), agent, input: input(t, k) }).pipe(toArray()));
    assert.equal(events[events.length - 1].type, 'RUN_FINISHED');
  });

  // the runs, through two processes, one of them killed again and again
  const procs = [new Proc('a'), new Proc('b')];
  await Promise.all(procs.map((p) => p.ready));
  let done = false;
  let kills = 0;
  let resent = 0;
  let nextId = 0;
  const killer = (async () => {
    while (!done) {
      await h.sleep(100 + Math.floor(random() * 300));
      if (done) break;
      const p = procs[Math.floor(random() * 2)];
      if (!p.alive) continue;
      await p.kill();
      kills++;
      p.start();
      await p.ready;
    }
  })();
  const stats = [];
  await allRuns(async (t, k) => {
    let which = Math.floor(random() * 2);
    for (let attempt = 0; ; attempt++) {
      assert.ok(attempt < 2000, `run ${runId(t, k)} never went through`);
      const p = procs[which];
      if (!p.alive) {
        await p.ready;
        continue;
      }
      const r = await p.send({ id: nextId++, threadId: threadId(t), runId: runId(t, k), messages: messages(t, k), ...AGENT });
      if (r.ok) {
        assert.equal(r.last, 'RUN_FINISHED', `${runId(t, k)} ended with ${r.last}`);
        stats.push(r.stats);
        return;
      }
      if (r.died) {
        // its process died under it: the other one goes on with it
        resent++;
        which = 1 - which;
        continue;
      }
      // the dead process's lock is not freed yet (its backend has not
      // seen its connection close): the thread is still running
      assert.equal(r.code, 'HX_COPILOTKIT_RUNNING', `${runId(t, k)}: ${r.code} ${r.message}`);
      await h.sleep(20);
    }
  });
  done = true;
  await killer;
  await Promise.all(procs.map((p) => p.stop()));
  assert.ok(kills > 0, 'a process was killed');
  assert.ok(resent > 0, 'runs were sent again after a kill');

  // the outcome, thread by thread
  const reader = new HxAgentRunner({ pg: { database: KILL } });
  let resumedEvents = 0;
  try {
    for (let t = 0; t < THREADS; t++) {
      const want = await outcome(ref, refDb, t);
      const got = await outcome(reader, killDb, t);
      if (got.transcript !== want.transcript) {
        let i = 0;
        while (i < got.events.length && JSON.stringify(got.events[i]) === JSON.stringify(want.events[i])) i++;
        assert.fail(`thread ${t}: the transcript differs at event ${i} of ${want.events.length} (got ${got.events.length}):\n  got  ${JSON.stringify(got.events[i])}\n  want ${JSON.stringify(want.events[i])}`);
      }
      assert.equal(got.state, want.state, `thread ${t}: the state`);
      const runs = got.events.filter((e) => e.type === 'RUN_STARTED').map((e) => e.runId);
      assert.equal(new Set(runs).size, runs.length, `thread ${t}: each run once`);
      assert.equal(got.events.filter((e) => e.type === 'RUN_FINISHED').length, runs.length);
      assert.equal(got.events.filter((e) => e.type === 'RUN_ERROR').length, 0);
      await lastValueFrom(from(got.events).pipe(verifyEvents(false), toArray()));
    }
    assert.equal(await reader.isRunning({ threadId: threadId(0) }), false);
  } finally {
    await reader.close();
    await ref.close();
  }
  // resumed runs: the processes that survived say how many (a process
  // killed later took its counts with it, so this is a lower bound)
  for (const s of stats) resumedEvents = Math.max(resumedEvents, s.replayed);
  const { rows } = await killDb.query(`SELECT count(*)::int AS n FROM hx_event WHERE type = 'CUSTOM'
    AND event->>'name' = 'hxstate.run' AND event->'value'->>'status' = 'started'`);
  assert.equal(rows[0].n, RUNS, 'one start marker a run: a resumed run goes on from its durable point');
  console.log(`# copilotkit kill test: ${RUNS} runs, ${kills} kills, ${resent} runs sent again, seed ${SEED}, events replayed by a resume (one process, at most) ${resumedEvents}`);
});
