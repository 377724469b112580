'use strict';
// The tables a gateway serves, and what each one's rows hold.
//
//   tables: ['sessions', {name: 'threads', source: 'lg.thread_snapshots',
//                         messages: '/messages', interrupt: '/__interrupt__'}]
//
// name       how URLs and tokens name the table (regclass syntax: app.sessions)
// messages   the JSON pointer of the conversation in a row's state, sent as
//            MESSAGES_SNAPSHOT; null for none (default '/messages')
// interrupt  the JSON pointer of the pending interrupts, which end a run
//            with outcome "interrupt"; null for none (default '/__interrupt__')
// source     a function "<schema>.<function>" that gives the snapshots of
//            streams with no row (an HxHub source), instead of a table
//
// Two served tables must not share a stream prefix: their streams would
// be one, and a token for one table's key would read the other's events.
// streamPrefixes() asks the database for each table's prefix, and the
// gateway refuses to start when two are equal.
const DEFAULT_MESSAGES = '/messages';
const DEFAULT_INTERRUPT = '/__interrupt__';

/** Is p an RFC 6901 JSON pointer ("" or "/..." with ~ escaped as ~0 or ~1)? */
function isPointer(p) {
  return typeof p === 'string' && /^(\/([^/~]|~[01])*)*$/.test(p);
}

function pathOption(value, fallback, what) {
  if (value === undefined) return fallback;
  if (value === null || value === false || value === 'none') return null;
  if (!isPointer(value) || value === '') {
    throw new TypeError(`hxstate-gateway: ${what} is a JSON pointer to a member of the state ("/messages"), or null`);
  }
  return value;
}

/**
 * The gateway's tables, normalised: [{name, messages, interrupt, source}].
 * defaults: {messages, interrupt} for entries that do not say.
 */
function normaliseTables(tables, defaults = {}) {
  if (!Array.isArray(tables) || tables.length === 0) throw new TypeError('hxstate-gateway: options.tables lists the tables served');
  const messages = pathOption(defaults.messages, DEFAULT_MESSAGES, 'options.messages');
  const interrupt = pathOption(defaults.interrupt, DEFAULT_INTERRUPT, 'options.interrupt');
  const seen = new Set();
  return tables.map((t) => {
    const entry = typeof t === 'string' ? { name: t } : t;
    if (!entry || typeof entry.name !== 'string' || entry.name.trim() === '' || entry.name.includes('/')) {
      throw new TypeError('hxstate-gateway: each of options.tables is a table name, or {name, messages, interrupt, source}');
    }
    const name = entry.name.trim();
    if (seen.has(name)) throw new TypeError(`hxstate-gateway: the table ${name} is listed twice`);
    seen.add(name);
    if (entry.source !== undefined && !/^[^.\s]+\.[^.\s]+$/.test(String(entry.source))) {
      throw new TypeError(`hxstate-gateway: the source of ${name} is "<schema>.<function>"`);
    }
    return {
      name,
      messages: pathOption(entry.messages, messages, `the messages path of ${name}`),
      interrupt: pathOption(entry.interrupt, interrupt, `the interrupt path of ${name}`),
      source: entry.source === undefined ? null : String(entry.source),
    };
  });
}

/**
 * The command's --tables: "sessions,app.sessions,threads=lg.thread_snapshots"
 * (a table served at a name, with a source function after "=").
 */
function parseTablesFlag(text) {
  return String(text).split(',').map((s) => s.trim()).filter(Boolean).map((s) => {
    const eq = s.indexOf('=');
    return eq < 0 ? s : { name: s.slice(0, eq).trim(), source: s.slice(eq + 1).trim() };
  });
}

/**
 * Each table's stream prefix, as its hx_stream trigger names streams:
 * hxstate 0.6.0 and later say it (hx_stream_tables()); before, the
 * trigger's stream=<name> option, else the table's name as the installed
 * hxstate writes it (asked of the database with one of the table's keys
 * when it has a row; else the bare name).  client is a connected
 * pg.Client.  Returns Map(name -> prefix); a table with no hx_stream
 * trigger (or that does not exist) is left out (its requests get 404).
 */
async function streamPrefixes(client, tables) {
  const out = new Map();
  const { rows: [ext] } = await client.query(
    "SELECT e.extversion, n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'hxstate'");
  if (!ext) return out;
  const schema = `"${ext.nspname.replace(/"/g, '""')}"`;
  const newRule = versionAtLeast(ext.extversion, '0.6.0');
  for (const t of tables) {
    if (t.source) continue;
    if (newRule) {
      // 0.6.0 and later say it themselves
      const { rows: named } = await client.query(
        `SELECT prefix FROM ${schema}.hx_stream_tables() WHERE source = pg_catalog.to_regclass($1)`, [t.name]);
      if (named.length > 0) out.set(t.name, named[0].prefix);
      continue;
    }
    const { rows } = await client.query(
      `SELECT c.oid::pg_catalog.regclass::text AS rel, n.nspname, c.relname, tg.tgargs
         FROM pg_catalog.pg_trigger tg
         JOIN pg_catalog.pg_class c ON c.oid = tg.tgrelid
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         JOIN pg_catalog.pg_proc p ON p.oid = tg.tgfoid
         JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace
        WHERE tg.tgrelid = pg_catalog.to_regclass($1) AND p.proname = 'hx_stream' AND pn.nspname = $2`,
      [t.name, ext.nspname]);
    if (rows.length === 0) continue;
    const args = triggerArgs(rows[0].tgargs);
    const option = args.slice(2).find((a) => a.startsWith('stream=') && a.length > 'stream='.length);
    if (option) {
      out.set(t.name, option.slice('stream='.length));
      continue;
    }
    let prefix = null;
    try {
      // one key of the table, and the stream the extension names for it
      const { rows: [one] } = await client.query(
        `SELECT s.stream, k.key FROM (SELECT t.${quoteKey(args[1])}::text AS key FROM ${rows[0].rel} t LIMIT 1) k,
                LATERAL ${schema}.hx_stream_snapshots($1::regclass, ARRAY[k.key]) s`, [t.name]);
      if (one && one.stream.endsWith(`:${one.key}`)) prefix = one.stream.slice(0, one.stream.length - one.key.length - 1);
    } catch (err) {
      prefix = null; // the role may not read the table yet: the rule below
    }
    if (prefix === null) prefix = rows[0].relname;
    out.set(t.name, prefix);
  }
  return out;
}

function quoteKey(name) {
  return `"${String(name).replace(/"/g, '""')}"`;
}

function versionAtLeast(v, min) {
  const a = String(v).split('.').map(Number);
  const b = min.split('.').map(Number);
  for (let i = 0; i < b.length; i++) {
    if ((a[i] || 0) !== b[i]) return (a[i] || 0) > b[i];
  }
  return true;
}

/** pg_trigger.tgargs: each argument followed by a NUL byte. */
function triggerArgs(buf) {
  const text = Buffer.isBuffer(buf) ? buf.toString('utf8') : String(buf || '');
  const parts = text.split('\u0000');
  parts.pop();
  return parts;
}

/** Two tables that share a prefix, as an error message; null when every prefix is its own. */
function prefixClash(prefixes) {
  const by = new Map();
  for (const [table, prefix] of prefixes) {
    if (by.has(prefix)) {
      return `the tables ${by.get(prefix)} and ${table} both name their streams "${prefix}:<key>": ` +
        'a token for one would read the other\'s events. Serve one of them, or give one a trigger ' +
        `option stream=<name> of its own (hxstate 0.6.0 names streams by schema and table)`;
    }
    by.set(prefix, table);
  }
  return null;
}

/**
 * The tables a gateway serves: normalised entries by name, and each one's
 * stream prefix once the database has said it (learn()).
 */
class Tables {
  constructor(list) {
    this.list = list;
    this._byName = new Map(list.map((t) => [t.name, t]));
    this._prefixes = new Map();
  }

  /** The entry of the table served as name, or undefined. */
  get(name) {
    return this._byName.get(name);
  }

  /** A table's streams are <prefix>:<key> as the database names them: its prefix, else its name. */
  prefixOf(name) {
    return this._prefixes.get(name) || name;
  }

  /** Map(table -> prefix) of the tables whose prefix the database gave. */
  prefixes() {
    return new Map(this._prefixes);
  }

  /** The prefixes the database gives (streamPrefixes). */
  learn(prefixes) {
    this._prefixes = new Map(prefixes);
  }
}

module.exports = {
  Tables, normaliseTables, parseTablesFlag, streamPrefixes, prefixClash, isPointer, triggerArgs,
  DEFAULT_MESSAGES, DEFAULT_INTERRUPT,
};
