'use strict';
// test/shard/privileges.js: the roles of docs/sharding.md ("Roles and
// privileges") on a router and its shards set up by test/shard/common.js:
// no function of the sharding layer runs with its owner's rights; the
// application's role (app) cannot move a session, forge or lift a fence,
// import events, turn the triggers off, or write the router's tables,
// each refused with 42501, even where EXECUTE was granted to it by
// mistake; a fence holds against its plain SQL; the mover's role (mover)
// runs the move's functions on a shard, only with SET on
// session_replication_role, and they call no function planted in public.
// moves.js calls it before its load; the moves it then runs as mover show
// that the documented grants make moves work.
const pg = require('pg');

/** Run sql as user on a server's database; {rows} or {code, message}. */
async function as(server, database, user, sql, values) {
  const c = new pg.Client(server.config(database, { user }));
  c.on('error', () => {});
  await c.connect();
  try {
    return { rows: (await c.query(sql, values)).rows };
  } catch (err) {
    return { code: err.code, message: err.message };
  } finally {
    await c.end().catch(() => {});
  }
}

const denied = (r) => r.code === '42501';
const shown = (r) => (r.code ? `${r.code} ${r.message}` : `no error: ${JSON.stringify(r.rows)}`);

/** No SECURITY DEFINER function in hxshard or hxshard_proxy (and some functions there). */
async function checkNoDefiner(checks, server, database, what) {
  const { rows } = await as(server, database, 'postgres', `SELECT count(*)::int AS n,
      count(*) FILTER (WHERE p.prosecdef)::int AS definers,
      coalesce(string_agg(p.oid::regprocedure::text, ', ') FILTER (WHERE p.prosecdef), '') AS which
    FROM pg_proc p JOIN pg_namespace s ON s.oid = p.pronamespace
   WHERE s.nspname IN ('hxshard', 'hxshard_proxy')`);
  checks.ok(rows[0].n > 10 && rows[0].definers === 0,
    `${what}: none of its ${rows[0].n} functions is SECURITY DEFINER`, rows[0].which);
}

/**
 * @param {Checks} checks
 * @param {object} o
 * @param {Server} o.router the router's server (database "router")
 * @param {Server} o.shard the shard (database "app") where key lives
 * @param {number} o.other another shard's number
 * @param {string} o.key a session that lives on o.shard
 * @param {string[]} o.keys every session of the run
 * @param {number} o.shards how many shards
 */
async function checkPrivileges(checks, { router, shard, other, key, keys, shards }) {
  await checkNoDefiner(checks, shard, 'app', 'a shard');
  await checkNoDefiner(checks, router, 'router', 'the router');

  // the application's role on the shard: the move's functions, the fence,
  // the triggers, the log
  const page = `'${key}', ${other}, '{1}', '{STATE_SNAPSHOT}', ARRAY['{"type": "STATE_SNAPSHOT", "snapshot": {}}'::jsonb], ARRAY[now()]`;
  const shardCalls = [
    `SELECT hxshard.fence('${key}', ${other})`,
    `SELECT hxshard.unfence('${key}')`,
    `SELECT hxshard.retire('${key}')`,
    `SELECT hxshard.adopt('${key}')`,
    `SELECT * FROM hxshard.export_events('${key}', 0, 10, 1000000)`,
    `SELECT hxshard.export_row('${key}')`,
    `SELECT hxshard.export_steps('${key}')`,
    `SELECT hxshard.prepare_import('${key}', ${other})`,
    `SELECT hxshard.incoming('${key}')`,
    `SELECT hxshard.import_events(${page})`,
    `SELECT hxshard.import_row('${key}', ${other}, '{}', '{}', 0)`,
    "SELECT hxshard.sweep('0 seconds')",
    'SELECT * FROM hxshard.sessions_in(NULL, 10)',
    'SELECT hxshard.session_count()',
    `INSERT INTO hxshard.fence (session_id, state, shard, head) VALUES ('${key}', 'moving', ${other}, 0)`,
    `UPDATE hxshard.fence SET state = 'moved' WHERE session_id = '${key}'`,
    'DELETE FROM hxshard.fence',
    'SET session_replication_role = replica',
    'ALTER TABLE public.sessions DISABLE TRIGGER hxshard_fence',
    "INSERT INTO public.hx_event (stream, seq, type, event) VALUES ('sessions:x', 1, 'STATE_SNAPSHOT', '{}')",
  ];
  for (const sql of shardCalls) {
    const r = await as(shard, 'app', 'app', sql);
    checks.ok(denied(r), `app on a shard: ${sql.slice(0, 60)} is refused (42501)`, shown(r));
  }

  // EXECUTE granted to app by mistake: the functions run as app, which
  // may neither SET session_replication_role nor write the log and fence
  await as(shard, 'app', 'postgres', `GRANT EXECUTE ON FUNCTION hxshard.fence(text, integer),
      hxshard.import_events(text, integer, bigint[], text[], jsonb[], timestamptz[]), hxshard.adopt(text) TO app`);
  try {
    for (const sql of [`SELECT hxshard.fence('${key}', ${other})`, `SELECT hxshard.import_events(${page})`,
      `SELECT hxshard.adopt('${key}')`]) {
      const r = await as(shard, 'app', 'app', sql);
      checks.ok(denied(r), `app granted EXECUTE by mistake: ${sql.slice(0, 50)} is still refused (42501)`, shown(r));
    }
  } finally {
    await as(shard, 'app', 'postgres', `REVOKE EXECUTE ON FUNCTION hxshard.fence(text, integer),
        hxshard.import_events(text, integer, bigint[], text[], jsonb[], timestamptz[]), hxshard.adopt(text) FROM app`);
  }

  // the mover fences; the application's plain SQL meets the fence
  const fenced = await as(shard, 'app', 'mover', 'SELECT hxshard.fence($1, $2) AS head', [key, other]);
  checks.ok(fenced.rows && Number(fenced.rows[0].head) > 0, 'mover on a shard: hxshard.fence runs (session_replication_role set by its SET clause)', shown(fenced));
  try {
    for (const sql of [
      `SELECT hxshard.merge('${key}', '[]')`,
      `UPDATE public.sessions SET state = '{}' WHERE session_id = '${key}'`,
      `DELETE FROM public.sessions WHERE session_id = '${key}'`,
      `SELECT hxshard.stage('${key}', 'st', 'c', '[]')`,
    ]) {
      const r = await as(shard, 'app', 'app', sql);
      checks.ok(r.code === 'XH501', `app on a fenced session: ${sql.slice(0, 50)} is refused (XH501)`, shown(r));
    }
    // a function planted in public by a role that may create there (not
    // PUBLIC's right since PostgreSQL 15, but a database may grant it) is
    // not what the mover's functions call: they name pg_catalog's and the
    // extension's objects with their schema
    await as(shard, 'app', 'postgres', 'GRANT CREATE ON SCHEMA public TO app');
    const planted = await as(shard, 'app', 'app', `CREATE FUNCTION public.to_jsonb(public.sessions) RETURNS jsonb
      LANGUAGE sql AS $$ SELECT '{"session_id": "planted"}'::jsonb $$`);
    try {
      const exported = await as(shard, 'app', 'mover', 'SELECT hxshard.export_row($1) ->> $2 AS k', [key, 'session_id']);
      checks.ok(!planted.code && exported.rows && exported.rows[0].k === key,
        'mover on a shard: hxshard.export_row runs, and calls pg_catalog.to_jsonb, not one planted in public', shown(planted.code ? planted : exported));
    } finally {
      await as(shard, 'app', 'app', 'DROP FUNCTION IF EXISTS public.to_jsonb(public.sessions)');
      await as(shard, 'app', 'postgres', 'REVOKE CREATE ON SCHEMA public FROM app');
    }
  } finally {
    const r = await as(shard, 'app', 'mover', 'SELECT hxshard.unfence($1) AS u', [key]);
    checks.ok(r.rows && r.rows[0].u === true, 'mover on a shard: hxshard.unfence lifts the fence', shown(r));
  }
  const after = await as(shard, 'app', 'app', `SELECT hxshard.merge($1, '[]') AS m`, [key]);
  checks.ok(after.rows && after.rows[0].m === true, 'app writes the session again once unfenced', shown(after));

  // without SET on session_replication_role, the mover cannot fence
  await as(shard, 'app', 'postgres', 'REVOKE SET ON PARAMETER session_replication_role FROM mover');
  try {
    const r = await as(shard, 'app', 'mover', 'SELECT hxshard.fence($1, $2)', [key, other]);
    checks.ok(denied(r), 'mover without SET ON PARAMETER session_replication_role: hxshard.fence is refused (42501)', shown(r));
  } finally {
    await as(shard, 'app', 'postgres', 'GRANT SET ON PARAMETER session_replication_role TO mover');
  }

  // the application's role on the router: the mover's procedures and
  // functions, the proxies of the shards' move functions, the route tables
  const routerCalls = [
    `CALL hxshard.move('${key}', ${other})`,
    `CALL hxshard.move_bucket(0, ${other})`,
    'CALL hxshard.rebalance()',
    `SELECT hxshard.abort_move('${key}')`,
    "SELECT hxshard.sweep('0 seconds')",
    "SELECT hxshard.add_shard('host=127.0.0.1 dbname=x')",
    `SELECT hxshard_proxy.fence(0, '${key}', ${other})`,
    `SELECT hxshard_proxy.import_row(0, '${key}', ${other}, '{}', '{}', 0)`,
    `SELECT hxshard_proxy.unfence(0, '${key}')`,
    `INSERT INTO hxshard.pin (session_id, shard) VALUES ('${key}', ${other})`,
    `UPDATE hxshard.bucket SET shard = ${other}`,
    `INSERT INTO hxshard.move (session_id, from_shard, to_shard, state) VALUES ('${key}', 0, ${other}, 'switched')`,
  ];
  for (const sql of routerCalls) {
    const r = await as(router, 'router', 'app', sql);
    checks.ok(denied(r), `app on the router: ${sql.slice(0, 60)} is refused (42501)`, shown(r));
  }
  const routed = await as(router, 'router', 'app', 'SELECT hxshard.get($1) ->> $2 AS k', [key, 'session_id']);
  checks.ok(routed.rows && routed.rows[0].k === key, 'app on the router: hxshard.get reaches the shard as app', shown(routed));

  // the mover's other procedures and functions on the router, with its
  // grants: a bucket that holds none of the run's sessions moved to
  // another shard and back (its lock, its row, every shard's
  // sessions_in), rebalance (even already), abort_move of no move
  const empty = await as(router, 'router', 'mover', `SELECT b, (SELECT x.shard FROM hxshard.bucket x WHERE x.bucket = b) AS shard
      FROM generate_series(0, 1023) b
     WHERE b <> ALL (SELECT hxshard.bucket_of(k) FROM unnest($1::text[]) k) LIMIT 1`, [keys]);
  if (checks.ok(empty.rows && empty.rows.length === 1, 'a bucket without sessions of the run', shown(empty))) {
    const { b, shard: home } = empty.rows[0];
    const to = (home + 1) % shards;
    const there = await as(router, 'router', 'mover', 'CALL hxshard.move_bucket($1, $2)', [b, to]);
    const back = await as(router, 'router', 'mover', 'CALL hxshard.move_bucket($1, $2)', [b, home]);
    checks.ok(!there.code && !back.code, `mover on the router: CALL hxshard.move_bucket(${b}, ${to}) and back run`, shown(there.code ? there : back));
  }
  const even = await as(router, 'router', 'mover', 'CALL hxshard.rebalance()');
  checks.ok(even.rows && even.rows[0].buckets === 0, 'mover on the router: CALL hxshard.rebalance() runs (0 buckets: even already)', shown(even));
  const none = await as(router, 'router', 'mover', "SELECT hxshard.abort_move('no-such-session') AS a");
  checks.ok(none.rows && none.rows[0].a === 'none', 'mover on the router: hxshard.abort_move runs', shown(none));
}

module.exports = { checkPrivileges };
