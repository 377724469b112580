'use strict';
// Connections to the throwaway cluster that test/run starts (test/lib/cluster.sh
// sets PGHOST, PGPORT, PGUSER and PGDATABASE).  Each test file works in a
// database of its own, so files can run in parallel.
const { Client } = require('pg');

async function freshDatabase(name) {
  const admin = new Client({ database: 'postgres' });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const client = await connect(name);
  await client.query('CREATE EXTENSION hxstate');
  return client;
}

async function connect(name) {
  const client = new Client({ database: name });
  await client.connect();
  return client;
}

module.exports = { freshDatabase, connect };
