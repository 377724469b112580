'use strict';
// What the sharding tests share (not a test file): a router and its shards
// as databases of the test cluster (PL/Proxy connects to each shard's
// database over the cluster's socket, as it would to a server of its
// own), built from the repository's SQL: hxstate and docs/sessions.sql
// and shard/shard.sql in each shard, shard/router.sql in the router.
const fs = require('node:fs');
const path = require('node:path');
const { Client } = require('pg');

const TOP = path.join(__dirname, '..', '..');
const SQL = {
  sessions: fs.readFileSync(path.join(TOP, 'docs', 'sessions.sql'), 'utf8'),
  shard: fs.readFileSync(path.join(TOP, 'shard', 'shard.sql'), 'utf8'),
  router: fs.readFileSync(path.join(TOP, 'shard', 'router.sql'), 'utf8'),
};

async function admin(fn) {
  const c = new Client({ database: 'postgres' });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

async function recreate(name) {
  await admin(async (c) => {
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.query(`CREATE DATABASE ${name}`);
  });
}

/** The conninfo of a database of the test cluster, as the router's PL/Proxy uses it. */
function conninfoOf(db) {
  const host = process.env.PGHOST || '/var/run/postgresql';
  const port = process.env.PGPORT || '5432';
  return `host=${host} port=${port} dbname=${db}`;
}

/** A shard database: hxstate, the sessions table, shard/shard.sql. */
async function makeShard(db) {
  await recreate(db);
  const c = new Client({ database: db });
  await c.connect();
  try {
    await c.query('CREATE EXTENSION hxstate');
    await c.query(SQL.sessions);
    await c.query(SQL.shard);
    await c.query('SELECT hx_stream_publication()');
  } finally {
    await c.end();
  }
}

/**
 * A router `${prefix}_router` with n shards `${prefix}_s0` ...; the
 * buckets dealt round them.  Returns {router: Client, shards: [name],
 * routerDb, connectShard(i)}.
 */
async function makeCluster(prefix, n) {
  const shards = [];
  for (let i = 0; i < n; i++) {
    const db = `${prefix}_s${i}`;
    await makeShard(db);
    shards.push(db);
  }
  const routerDb = `${prefix}_router`;
  await recreate(routerDb);
  const router = new Client({ database: routerDb });
  await router.connect();
  try {
    await router.query(SQL.router);
    for (let i = 0; i < n; i++) {
      await router.query('SELECT hxshard.add_shard($1, true)', [conninfoOf(shards[i])]);
    }
  } catch (err) {
    // a router that cannot be set up (PL/Proxy missing, say) fails the
    // test, and leaves no connection open that would keep the process
    // from exiting
    await router.end().catch(() => {});
    throw err;
  }
  return {
    router,
    routerDb,
    shards,
    async connectShard(i) {
      const c = new Client({ database: shards[i] });
      await c.connect();
      return c;
    },
  };
}

/** The shard a session lives on, by the router's routing function. */
async function shardOf(router, key) {
  const { rows } = await router.query('SELECT hxshard.shard_of($1) AS s', [key]);
  return rows[0].s;
}

/** The SQLSTATE a statement fails with (null: it did not fail). */
async function sqlstateOf(client, text, values) {
  try {
    await client.query(text, values);
    return null;
  } catch (err) {
    return err.code || String(err.message);
  }
}

module.exports = { makeCluster, makeShard, conninfoOf, shardOf, sqlstateOf, recreate, SQL };
