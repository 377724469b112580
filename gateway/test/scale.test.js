'use strict';
// 1,000 SSE clients on one gateway (the command, in a process of its own),
// over 200 streams, while writers run: every client gets its stream's
// snapshot, then every event up to the stream's head with its seq as id,
// and ends with its row's state; the gateway holds at most three
// connections to the database whatever the number of clients.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
const t = require('./helpers');
const { mintToken } = require('..');

const DB = 'hx_gateway_scale';
const CLIENTS = 1000;
const STREAMS = 200;
const BIN = path.join(__dirname, '..', 'bin', 'hxstate-gateway.js');
const keys = Array.from({ length: STREAMS }, (_, i) => `k-${i}`);

let db;
before(async () => {
  db = await t.gatewayDatabase(DB);
  await db.query(`INSERT INTO sessions (session_id, user_id, state)
                  SELECT 'k-' || g, 'u', '{"n": 0}' FROM generate_series(0, ${STREAMS - 1}) g`);
});
after(async () => { await db.end(); });

test(`${CLIENTS} SSE clients over ${STREAMS} streams each end with their row's state`, async () => {
  const child = spawn(process.execPath, [BIN, '--port', '0', '--max-per-client', String(CLIENTS + 10), '--quiet'], {
    env: { ...process.env, PGDATABASE: DB, PGAPPNAME: 'hx-gateway-scale', HX_GATEWAY_SECRET: t.SECRET },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const clients = [];
  try {
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    await t.waitFor(() => /listening on (http:\S+)/.test(out), 'the gateway to listen');
    const base = /listening on (http:\S+)/.exec(out)[1];
    const headers = { authorization: `Bearer ${mintToken(t.SECRET, { table: 'sessions', all: true })}` };
    for (let i = 0; i < CLIENTS; i++) {
      const key = keys[i % STREAMS];
      const c = t.sse(`${base}/streams/sessions/${key}`, { headers });
      c.key = key;
      clients.push(c);
      if (i % 100 === 99) await t.waitFor(() => clients.every((x) => x.seqEvents().length > 0), 'the snapshots so far');
    }

    // writers: 4 connections, 400 random writes
    await Promise.all(Array.from({ length: 4 }, async (_, w) => {
      const c = await t.connect(DB);
      const r = t.rng(w + 1);
      try {
        for (let i = 0; i < 100; i++) {
          const ops = [{ op: 'increment', path: '/n', by: 1 }, { op: 'append', path: '/l', items: [`${w}-${i}`] }];
          await c.query('UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2', [JSON.stringify(ops), r.pick(keys)]);
        }
      } finally {
        await c.end();
      }
    }));

    const heads = new Map((await db.query('SELECT stream, seq::int FROM hx_stream_heads($1)', [keys.map((k) => `sessions:${k}`)]))
      .rows.map((r) => [r.stream.slice('sessions:'.length), r.seq]));
    await t.waitFor(() => clients.every((c) => Number(c.lastId()) === heads.get(c.key)), 'every client at its stream\'s head', 60000);
    const rows = new Map((await db.query('SELECT session_id, state::jsonb AS state FROM sessions')).rows.map((r) => [r.session_id, r.state]));
    const bad = [];
    for (const c of clients) {
      const msgs = c.messages.filter((m) => m.data && m.id !== undefined);
      const ids = msgs.map((m) => Number(m.id));
      if (msgs[0].data.type !== 'STATE_SNAPSHOT') bad.push(`${c.key}: starts with ${msgs[0].data.type}`);
      else if (ids.some((id, i) => i > 0 && id !== ids[i - 1] + 1)) bad.push(`${c.key}: ids ${ids}`);
      else if (t.canonical(t.stateOf(msgs.map((m) => m.data))) !== t.canonical(rows.get(c.key))) bad.push(`${c.key}: state`);
      if (bad.length > 10) break;
    }
    assert.deepEqual(bad, []);
    const { rows: [conns] } = await db.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'hx-gateway-scale'");
    assert.ok(conns.n <= 3, `the gateway holds ${conns.n} connections`);
  } finally {
    for (const c of clients) c.close();
    child.kill('SIGTERM');
    await new Promise((resolve) => (child.exitCode === null ? child.on('exit', resolve) : resolve()));
  }
});

test('--workers 2: two gateway processes on one port, each with at most three connections, every client exact', async () => {
  const child = spawn(process.execPath, [BIN, '--port', '0', '--workers', '2', '--max-per-client', '1000', '--quiet'], {
    env: { ...process.env, PGDATABASE: DB, PGAPPNAME: 'hx-gateway-workers', HX_GATEWAY_SECRET: t.SECRET },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const clients = [];
  try {
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    await t.waitFor(() => /listening on (http:\S+) .*2 workers/.test(out), 'the workers to listen');
    const base = /listening on (http:\S+)/.exec(out)[1];
    const headers = { authorization: `Bearer ${mintToken(t.SECRET, { table: 'sessions', all: true })}` };
    for (let i = 0; i < 200; i++) {
      const c = t.sse(`${base}/streams/sessions/${keys[i % 50]}`, { headers });
      c.key = keys[i % 50];
      clients.push(c);
    }
    await t.waitFor(() => clients.every((x) => x.seqEvents().length > 0), 'every snapshot');
    const c = await t.connect(DB);
    try {
      for (let i = 0; i < 100; i++) {
        await c.query('UPDATE sessions SET state = hx_merge(state, $1) WHERE session_id = $2',
          [JSON.stringify([{ op: 'increment', path: '/w', by: 1 }]), keys[i % 50]]);
      }
    } finally {
      await c.end();
    }
    const heads = new Map((await db.query('SELECT stream, seq::int FROM hx_stream_heads($1)', [keys.map((k) => `sessions:${k}`)]))
      .rows.map((r) => [r.stream.slice('sessions:'.length), r.seq]));
    await t.waitFor(() => clients.every((x) => Number(x.lastId()) === heads.get(x.key)), 'every client at its stream\'s head');
    const rows = new Map((await db.query('SELECT session_id, state::jsonb AS state FROM sessions')).rows.map((r) => [r.session_id, r.state]));
    for (const x of clients) assert.equal(t.canonical(t.stateOf(x.seqEvents())), t.canonical(rows.get(x.key)), x.key);
    const { rows: conns } = await db.query(
      "SELECT count(*)::int AS n, count(DISTINCT client_port)::int AS ports FROM pg_stat_activity WHERE application_name = 'hx-gateway-workers'");
    assert.ok(conns[0].n <= 6, `two workers hold ${conns[0].n} connections (at most 3 each)`);
    assert.ok(conns[0].n >= 4, `both workers follow (${conns[0].n} connections)`);
  } finally {
    for (const x of clients) x.close();
    child.kill('SIGTERM');
    const code = await new Promise((resolve) => (child.exitCode === null ? child.on('exit', resolve) : resolve(child.exitCode)));
    assert.equal(code, 0, 'the workers stop cleanly on SIGTERM');
  }
});
