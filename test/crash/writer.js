'use strict';
// test/crash/writer.js: one writer process of the crash run, forked by
// test/crash/load.js (not run by hand):
//
//   node writer.js <writer id> <sessions> <seed>
//
// It sends write after write.  Write c (counting 1, 2, 3...; no write is
// ever sent twice) is one
//   UPDATE sessions SET state = hx_merge(state, <writeOps(w, c)>) WHERE session_id = <random>
// and the writes go out in these shapes:
//   76%  one write, an autocommit UPDATE;
//   10%  two writes in one transaction (BEGIN, UPDATE, UPDATE, COMMIT):
//        both land or neither, and the stream of a session written twice
//        gets two events;
//   10%  BEGIN, write c, SAVEPOINT, write c+1, ROLLBACK TO SAVEPOINT, write
//        c+2 (to the session of c+1), COMMIT: c+1 must never land, and its
//        event (and seq) rolls back with it.  With HX_CRASH_PG18_SAVEPOINT=
//        avoid (test/crash/run sets it on PostgreSQL 18 with the state as
//        hxdoc), c+1 goes to another session than c, and c+2 to c's: the
//        assert-enabled PostgreSQL 18.6 fails an assertion in heap_update
//        (HEAP_XMAX_IS_LOCKED_ONLY(infomask_lock_old_tuple)) when a row
//        with a BEFORE UPDATE trigger (hx_store), updated by a rolled-back
//        subtransaction, is updated again and its new version moves to
//        another page: a bug of that server, not of hxstate;
//    6%  a step of 2 to 4 tool calls (exactly-once steps): each call's
//        write staged by hx_stage in an autocommit statement of its own,
//        in random order, ord giving the order of the counters; then one
//        UPDATE ... hx_merge(state, hx_promote(stream, step)).  One action
//        per turn of the loop, so that a kill lands between stages and
//        between the stages and the promote.  A staged call that was
//        acknowledged is never staged again: after a kill the promote must
//        find it (no staged write lost); one in doubt is staged again (a
//        retry, a no-op if it landed); a promote in doubt is run again (a
//        second promote applies nothing).  The step's writes are reported
//        when the promote has settled, as one group;
//    4%  a churn session (ops.js) deleted and inserted again: BEGIN,
//        DELETE, INSERT, COMMIT, or a DELETE alone, or an INSERT alone; the
//        INSERT (ON CONFLICT DO NOTHING: the row may be there, or another
//        writer's insert may win) is write c, and inserts churnState(id);
//        its report says whether it inserted a row.
// The sessions of one transaction are written in key order, so that two
// writers never deadlock.  Each write's outcome goes to the parent over
// IPC, in order, once the transaction has settled:
//   ack      COMMIT (or the autocommit UPDATE) returned success: the write
//            must be in its row from then on, exactly once;
//   doubt    the connection died after COMMIT was sent and before its
//            answer: it may have landed or not, never twice; the writes of
//            one transaction carry the same group, and land together;
//   aborted  certainly not committed, and no error: rolled back to its
//            savepoint, or the connection died before COMMIT was sent;
//   failed   the server answered with an ERROR (or updated no row), the
//            connection still alive: not committed, and unexpected.
// When the server is down it reconnects with exponential backoff (jittered,
// 20 ms to 1 s).  Messages from the parent: pause (settle the transaction
// in flight, report "paused", send nothing until resume), resume, stop
// (close and exit).
const pg = require('pg');
const { writeOps, itemId, prng, sessionKey, CHURN_KEYS, churnState } = require('./ops');

const w = Number(process.argv[2]);
const sessions = Number(process.argv[3]);
const rand = prng(Number(process.argv[4]) + w * 7919);
// The sessions the followers watch (s-01, s-02) get 10% of the writes, so
// that their streams are long; the rest go to any session.
const HOT = 2;
// see the 10% shape with a savepoint above
const AVOID_PG18_SAVEPOINT = process.env.HX_CRASH_PG18_SAVEPOINT === 'avoid';
const SQL = 'UPDATE sessions SET state = hx_merge(state, $1::jsonb), updated_at = now() WHERE session_id = $2';
const INSERT = `INSERT INTO sessions (session_id, user_id, state) VALUES ($1, 'u-x', $2::jsonb)
                ON CONFLICT (session_id) DO NOTHING`;
const DELETE = 'DELETE FROM sessions WHERE session_id = $1';

let paused = false;
let stopping = false;
let wake = null;         // ends a backoff sleep early
let resumed = null;      // ends a pause
const stats = {
  connects: 0, connectFailures: 0, transactions: 0, rollbacks: 0, churns: 0,
  steps: 0, stepCalls: 0, stepsAcrossLoss: 0, stagesRetried: 0, promotesRetried: 0,
};
const STAGE = 'SELECT hx_stage($1, $2, $3, $4::jsonb, $5)';
const PROMOTE = `UPDATE sessions SET state = hx_merge(state, hx_promote($1, $2)), updated_at = now()
                  WHERE session_id = $3`;
// the step being staged or promoted: {session, step, calls: [{c, ord,
// status: 'new' | 'doubt' | 'staged'}], order (indexes, staging order),
// promoteDoubt, lostWithStaged}
let pendingStep = null;

process.on('message', (m) => {
  if (m.cmd === 'pause' || m.cmd === 'stop') {
    paused = true;
    if (m.cmd === 'stop') stopping = true;
    if (wake) wake();
    if (resumed) {
      if (stopping) resumed();                  // a paused writer stops too
      else send({ type: 'paused', stats });     // paused already
    }
  } else if (m.cmd === 'resume') {
    paused = false;
    if (resumed) resumed();
  }
});
// the parent is gone: nothing would record our outcomes
process.on('disconnect', () => process.exit(1));

function sleep(ms) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    wake = () => { clearTimeout(t); resolve(); };
  }).then(() => { wake = null; });
}

function send(msg) {
  return new Promise((resolve, reject) => process.send(msg, (err) => (err ? reject(err) : resolve())));
}

/**
 * Did err end the connection?  No SQLSTATE (the socket closed), FATAL or
 * PANIC, a connection (08) or operator intervention (57: crash or admin
 * shutdown) condition, or the client saw the connection fail.  Anything
 * else is an ERROR the server answered with on a live connection.
 */
function connectionLost(err, client) {
  if (!client.hxAlive) return true;
  if (typeof err.code !== 'string') return true;
  if (err.severity === 'FATAL' || err.severity === 'PANIC') return true;
  return /^(08|57)/.test(err.code);
}

async function connect() {
  const client = new pg.Client({
    application_name: `hx-crash-writer-${w}`,
    connectionTimeoutMillis: 30000, // a deadlock guard, not a timing assertion
  });
  client.hxAlive = true;
  client.on('error', () => { client.hxAlive = false; });
  client.on('end', () => { client.hxAlive = false; });
  try {
    await client.connect();
  } catch (err) {
    client.end().catch(() => {});
    throw err;
  }
  return client;
}

function pickSession() {
  if (rand() < 0.1) return sessionKey(1 + Math.floor(rand() * HOT));
  return sessionKey(1 + Math.floor(rand() * sessions));
}

/** The first line of an error, as the report shows it. */
function describe(err) {
  return `${err.code || ''} ${String(err.message).split('\n')[0]}`.trim().slice(0, 200);
}

/**
 * The statements of one transaction shape, from write c on.  Each step is
 * [sql, params, write or null]; a write is {c, session, rolledBack}.
 */
function plan(c) {
  const r = rand();
  const update = (n, session) => [SQL, [JSON.stringify(writeOps(w, n)), session], { c: n, session }];
  if (r < 0.04) {
    stats.churns++;
    const key = CHURN_KEYS[Math.floor(rand() * CHURN_KEYS.length)];
    const insert = [INSERT, [key, JSON.stringify(churnState(itemId(w, c)))], { c, session: key, churn: true }];
    const how = rand();
    if (how < 0.5) return { steps: [['BEGIN'], [DELETE, [key]], insert, ['COMMIT']] };
    if (how < 0.75) return { autocommit: true, steps: [[DELETE, [key]]] };
    return { autocommit: true, steps: [insert] };
  }
  if (r < 0.74) return { autocommit: true, steps: [update(c, pickSession())] };
  if (r < 0.8) {
    const k = 2 + Math.floor(rand() * 3);
    const calls = [];
    for (let i = 0; i < k; i++) calls.push({ c: c + i, ord: i, status: 'new' });
    const order = calls.map((_, i) => i);
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [order[i], order[j]] = [order[j], order[i]];
    }
    return { step: { session: pickSession(), step: `w${w}-${c}`, calls, order, promoteDoubt: false } };
  }
  const [a, b] = [pickSession(), pickSession()].sort();
  if (r < 0.9) {
    stats.transactions++;
    return { steps: [['BEGIN'], update(c, a), update(c + 1, b), ['COMMIT']] };
  }
  stats.transactions++;
  stats.rollbacks++;
  if (AVOID_PG18_SAVEPOINT) {
    // two sessions x < y (key order: no deadlock); the row the rolled-back
    // write updated (y) is not updated again
    let [x, y] = [a, b];
    while (x === y) [x, y] = [a, pickSession()].sort();
    const rolledAway = update(c + 1, y);
    rolledAway[2].rolledBack = true;
    return {
      steps: [['BEGIN'], update(c, x), ['SAVEPOINT sp'], rolledAway, ['ROLLBACK TO SAVEPOINT sp'],
        update(c + 2, x), ['COMMIT']],
    };
  }
  const rolled = update(c + 1, b);
  rolled[2].rolledBack = true;
  return {
    steps: [['BEGIN'], update(c, a), ['SAVEPOINT sp'], rolled, ['ROLLBACK TO SAVEPOINT sp'],
      update(c + 2, b), ['COMMIT']],
  };
}

/** Run one transaction shape; the outcome of each of its writes. */
async function run(client, { autocommit, steps }) {
  const writes = steps.filter((s) => s[2]).map((s) => s[2]);
  const group = writes.length > 1 ? `w${w}-${writes[0].c}` : undefined;
  let commitSent = false;
  let error = null;
  for (const [sql, params, write] of steps) {
    if (sql === 'COMMIT' || autocommit) commitSent = true;
    try {
      const r = await client.query(sql, params);
      if (write && write.churn) write.inserted = r.rowCount === 1;
      else if (write && r.rowCount !== 1) throw Object.assign(new Error(`UPDATE ${r.rowCount}`), { code: 'HXCRA' });
    } catch (err) {
      error = err;
      break;
    }
  }
  const lost = error !== null && connectionLost(error, client);
  if (lost) client.hxAlive = false;
  if (error && !lost && writes.length === 0) {
    await send({ type: 'rejected', detail: describe(error) }); // a DELETE alone
  }
  return writes.map((write) => {
    const msg = { type: 'write', w, c: write.c, id: itemId(w, write.c), session: write.session, group };
    if (write.churn) {
      msg.churn = true;
      msg.inserted = !!write.inserted;
    }
    if (!error) {
      msg.outcome = write.rolledBack ? 'aborted' : 'ack';
    } else if (lost) {
      msg.outcome = commitSent && !write.rolledBack ? 'doubt' : 'aborted';
      msg.detail = describe(error);
    } else {
      msg.outcome = 'failed';
      msg.detail = describe(error);
    }
    return msg;
  });
}

/**
 * One action of the pending step: stage its next call that is not staged
 * yet, or promote it.  Returns the writes' reports once the promote has
 * settled, else [].
 */
async function stepAction(client) {
  const st = pendingStep;
  const stream = `sessions:${st.session}`;
  const next = st.order.map((i) => st.calls[i]).find((call) => call.status !== 'staged');
  const report = (outcome, detail) => st.calls.map((call) => ({
    type: 'write', w, c: call.c, id: itemId(w, call.c), session: st.session,
    group: `step-${st.step}`, step: true, outcome, detail,
  }));
  try {
    if (next) {
      if (next.status === 'doubt') stats.stagesRetried++;
      await client.query(STAGE, [stream, st.step, `call-${next.c}`, JSON.stringify(writeOps(w, next.c)), next.ord]);
      next.status = 'staged';
      return [];
    }
    if (st.promoteDoubt) stats.promotesRetried++;
    const r = await client.query(PROMOTE, [stream, st.step, st.session]);
    if (r.rowCount !== 1) throw Object.assign(new Error(`UPDATE ${r.rowCount}`), { code: 'HXCRA' });
    pendingStep = null;
    stats.steps++;
    stats.stepCalls += st.calls.length;
    return report('ack');
  } catch (err) {
    if (!connectionLost(err, client)) {
      pendingStep = null;
      return report('failed', describe(err));
    }
    client.hxAlive = false;
    if (next) next.status = 'doubt';
    else st.promoteDoubt = true;
    if (!st.lostWithStaged && st.calls.some((call) => call.status === 'staged')) {
      st.lostWithStaged = true;
      stats.stepsAcrossLoss++;
    }
    return [];
  }
}

async function main() {
  let client = null;
  let attempt = 0;
  let c = 0;
  for (;;) {
    // a promote in doubt is settled first: until then the step's writes
    // may be in the row, unreported
    if (paused && !(pendingStep && pendingStep.promoteDoubt)) {
      if (stopping) {
        if (client) await client.end().catch(() => {});
        await send({ type: 'stopped', stats });
        process.disconnect();
        return;
      }
      const wait = new Promise((resolve) => { resumed = resolve; });
      await send({ type: 'paused', stats });
      await wait;
      resumed = null;
      continue;
    }
    if (client && !client.hxAlive) {
      client.end().catch(() => {});
      client = null;
    }
    if (!client) {
      try {
        client = await connect();
        stats.connects++;
        attempt = 0;
      } catch (err) {
        stats.connectFailures++;
        const base = Math.min(1000, 20 * 2 ** Math.min(attempt++, 10));
        await sleep(base / 2 + rand() * base / 2);
      }
      continue;
    }
    if (pendingStep) {
      for (const msg of await stepAction(client)) await send(msg);
      continue;
    }
    const shape = plan(c + 1);
    if (shape.step) {
      pendingStep = shape.step;
      c += shape.step.calls.length;
      continue;
    }
    const msgs = await run(client, shape);
    c += Math.max(1, msgs.length); // a DELETE alone uses its counter too
    if (msgs.some((m) => m.outcome === 'failed') && client.hxAlive) {
      // an ERROR inside a transaction leaves it open and aborted
      await client.query('ROLLBACK').catch(() => {});
    }
    for (const msg of msgs) await send(msg);
  }
}

main().catch((err) => {
  console.error(`writer ${w}:`, err);
  process.exit(1);
});
