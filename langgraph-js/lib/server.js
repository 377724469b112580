'use strict';
// What the saver asks of the server once, before it writes: whether the
// schema was set up (by the Python package's setup(), which makes the
// saver's tables and functions), hxstate's schema, whether it has
// hx_compress and the server lz4, and whether publish() sends.

const { NotSetUp } = require('./errors');
const { quoteIdent } = require('./storage');

/**
 * The number of the last migration of the Python package's setup() that
 * this saver knows: a schema set up by it has `migrations` up to it.
 */
const MIGRATION = 13;

/** The functions the saver calls, with their arguments' types. */
const FUNCTIONS = [
  'put_checkpoint(text,text,text,text,bytea,jsonb,json,json,bigint,integer,bigint,bigint,text,boolean,text,boolean,jsonb,jsonb,text)',
  'put_writes(text,text,text,text,text,integer[],text[],text[],bytea[],text)',
  'head_states(text[])',
];

const HINT =
  "Set the schema up with the Python package, once: HxSaver.setup() (hxstate.langgraph), or `hxstate-agui --setup`; " +
  'then connect this saver to it.';

/**
 * Checks the schema, then asks the server what the saver's writes depend
 * on; throws NotSetUp (42P01) when hxstate or the schema is missing.
 * @param {import('./db').Queryable} client
 * @param {import('./sql').Statements} sql
 * @returns {Promise<import('./sql').Server>}
 */
async function askServer(client, sql) {
  const s = sql.s;
  const [found] = (
    await client.query(sql.SCHEMA_SQL, [`${s}.migrations`, ...FUNCTIONS.map((f) => `${s}.${f}`)])
  ).rows;
  if (found.hx === null) {
    throw new NotSetUp('extension "hxstate" is not installed in this database', {
      hint: 'CREATE EXTENSION hxstate, as a role that may.',
    });
  }
  const missing = FUNCTIONS.filter((_, i) => !found.functions[i]);
  if (!found.migrations || missing.length) {
    throw new NotSetUp(`schema ${JSON.stringify(sql.schema)} has not been set up for HxSaver`, {
      detail: found.migrations ? `It lacks ${missing.join(', ')}.` : 'It has no table "migrations".',
      hint: HINT,
    });
  }
  const [{ v }] = (await client.query(sql.MIGRATION_SQL)).rows;
  if (v < MIGRATION) {
    throw new NotSetUp(`schema ${JSON.stringify(sql.schema)} is at migration ${v}, and this saver needs ${MIGRATION}`, {
      hint: HINT,
    });
  }
  const rows = (await client.query(sql.SERVER_SQL, [`${s}.publish(text,jsonb)`])).rows;
  const r = rows[0];
  return { publishing: Boolean(r.publishing), hx: quoteIdent(r.hx), compress: Boolean(r.compress), lz4: Boolean(r.lz4) };
}

module.exports = { MIGRATION, FUNCTIONS, askServer };
