'use strict';
// test/upgrade/follow.js: a follower that resumes by seq after pg_upgrade.
//
//   node test/upgrade/follow.js <positions.json>
//
// positions.json holds, for some sessions, where a follower had got to on
// the old cluster: {"s-2": {"seq": 13, "state": {...}}, ...}.  On the
// upgraded cluster (PGHOST etc.), this resumes each one with HxHub from
// that seq and that state, writes a few more changes to each row, and
// checks that every follower hands out each seq after its position exactly
// once, in order, up to the stream's head, and ends with the row's state.
// It prints one line per session and a last line "follow <passed> <failed>".
const fs = require('node:fs');
const { Client } = require('pg');
const { HxHub } = require('hxstate-client');

const WRITES = 5;

function equal(a, b) {
  return JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  }
  return v;
}

async function waitFor(cond, what, ms = 30000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function main() {
  const positions = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const db = new Client();
  await db.connect();
  const hub = new HxHub({ pg: {} });
  await hub.start();
  const followers = [];
  for (const [key, pos] of Object.entries(positions)) {
    const f = { key, from: pos.seq, seqs: [], state: undefined };
    f.sub = hub.follow({ table: 'sessions', key }, { after: pos.seq, base: pos.state });
    f.sub.on('event', (event, state) => {
      f.seqs.push(event.metadata.seq);
      f.state = state;
    });
    f.sub.on('error', (err) => { f.error = err; });
    followers.push(f);
  }
  await Promise.all(followers.map((f) => f.sub.ready));
  for (let i = 0; i < WRITES; i++) {
    for (const f of followers) {
      await db.query(
        `UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2`,
        [JSON.stringify([{ op: 'append', path: '/after_upgrade', items: [i] },
          { op: 'increment', path: '/stats/tool_calls', by: 1 }]), f.key]);
    }
  }
  let passed = 0;
  let failed = 0;
  for (const f of followers) {
    const { rows: [row] } = await db.query(
      `SELECT s.state, (SELECT seq FROM hx_stream_heads(ARRAY['sessions:' || s.session_id]))::int AS head
         FROM sessions s WHERE s.session_id = $1`, [f.key]);
    let problem = null;
    try {
      await waitFor(() => f.error || f.seqs[f.seqs.length - 1] === row.head, `${f.key} to reach seq ${row.head}`);
      const want = Array.from({ length: row.head - f.from }, (_, i) => f.from + 1 + i);
      if (f.error) problem = `error: ${f.error.message}`;
      else if (f.seqs.join(',') !== want.join(',')) problem = `seqs ${f.seqs.join(',')}, expected ${want.join(',')}`;
      else if (!equal(f.state, row.state)) problem = 'its state differs from the row';
    } catch (err) {
      problem = err.message;
    }
    if (problem) {
      failed++;
      console.log(`not ok: ${f.key} from seq ${f.from}: ${problem}`);
    } else {
      passed++;
      console.log(`ok: ${f.key} resumed after seq ${f.from}, got ${f.seqs.length} events once each ` +
        `(to seq ${row.head}), state equals the row`);
    }
  }
  await hub.stop();
  await db.end();
  console.log(`follow ${passed} ${failed}`);
  process.exitCode = failed ? 1 : 0;
}

main().catch((err) => {
  console.error(err);
  console.log('follow 0 1');
  process.exitCode = 1;
});
