'use strict';
// setupDurable(pg, {schema, grantTo}): create the endpoint's tables (the
// SQL of gateway/sql/durable.sql, which psql runs as it is), and grant a
// role what the gateway does with them.  Idempotent.
const fs = require('node:fs');
const path = require('node:path');
const { quoteIdent } = require('../ident');

const FILE = path.join(__dirname, '..', '..', 'sql', 'durable.sql');

/** The script of durable.sql for schema, without psql's meta-commands. */
function setupSql(schema = 'hx_durable') {
  const text = fs.readFileSync(FILE, 'utf8');
  return text
    .replace(/^\\if[\s\S]*?^\\endif\n/m, '')
    .replace(/:"schema"/g, quoteIdent(schema));
}

/**
 * Run the setup on pg (a connected pg.Client or a pg.Pool, or a
 * connection string or config: a client of its own is opened and closed).
 */
async function setupDurable(pg, { schema = 'hx_durable', grantTo = null } = {}) {
  let client = pg;
  let own = false;
  if (typeof pg === 'string' || (pg && typeof pg.query !== 'function')) {
    const { Client } = require('pg');
    client = new Client(typeof pg === 'string' ? { connectionString: pg } : pg);
    await client.connect();
    own = true;
  }
  try {
    await client.query(setupSql(schema));
    if (grantTo) {
      const s = quoteIdent(schema);
      const r = quoteIdent(grantTo);
      await client.query(`GRANT USAGE ON SCHEMA ${s} TO ${r}; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${s} TO ${r}`);
    }
  } finally {
    if (own) await client.end();
  }
}

module.exports = { setupDurable, setupSql };
