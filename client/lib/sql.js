'use strict';
// Every statement the client sends, in one place.  Each function returns
// the text (and the parameters) of one statement; nothing here runs it.
//
// Values always travel as parameters ($1, $2, ...).  The only names written
// into a statement's text are the extension's schema (read from the
// catalog), LISTEN channels and replication slot names the client made,
// and source functions from the hub's configuration; each is quoted with
// quoteIdent, so no key, stream name or payload ever becomes SQL.

/** "name" as an SQL identifier: double quotes, embedded ones doubled. */
function quoteIdent(name) {
  return `"${String(name).replace(/"/g, '""')}"`;
}

// An identifier as PostgreSQL's scanner reads it, without the quotes: an
// unquoted one (a letter or underscore, then letters, digits, _ and $; any
// non-ASCII character counts as a letter) or a quoted one ("" is a quote).
const IDENT = /^(?:([A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*)|"((?:[^"]|"")+)")/;

/**
 * A schema-qualified name ('app.snapshots', 'app."My Fn"', '"A"."b"') as
 * the parts PostgreSQL reads from it: unquoted parts fold to lower case
 * (ASCII letters only, as in a UTF-8 database), quoted parts are taken as
 * written.  Throws a TypeError for anything else (one part, three parts,
 * spaces, an empty quoted part, trailing text): a configured name that the
 * client could not quote exactly is refused rather than guessed at.
 * @returns {{schema: string, name: string}}
 */
function parseQualifiedName(text) {
  const parts = [];
  let rest = String(text);
  for (;;) {
    const m = IDENT.exec(rest);
    if (!m) break;
    parts.push(m[1] !== undefined ? m[1].replace(/[A-Z]+/g, (s) => s.toLowerCase()) : m[2].replace(/""/g, '"'));
    rest = rest.slice(m[0].length);
    if (rest[0] !== '.') break;
    rest = rest.slice(1);
  }
  if (rest !== '' || parts.length !== 2) {
    throw new TypeError(`not a schema-qualified function name: ${JSON.stringify(String(text))} ` +
      '(write it as schema.function, quoting parts as SQL does)');
  }
  return { schema: parts[0], name: parts[1] };
}

/** The quoted, qualified name of a source function, for a statement's text. */
function functionName(text) {
  const { schema, name } = parseQualifiedName(text);
  return `${quoteIdent(schema)}.${quoteIdent(name)}`;
}

// -- connecting ---------------------------------------------------------------

/** The extension's version and schema. */
function extension() {
  return {
    text: `SELECT e.extversion, n.nspname FROM pg_catalog.pg_extension e
             JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'hxstate'`,
    values: [],
  };
}

/**
 * What the WAL transport needs of the server, the role and the
 * publication; and the output plugins the server loads (null where it has
 * no such setting, or where the role may not read it: superuser only, or
 * pg_read_all_settings).
 */
function walPrerequisites(publication, schema) {
  return {
    text: `SELECT current_setting('wal_level') AS wal_level,
                  current_setting('max_wal_senders')::int AS senders,
                  current_user AS role,
                  (SELECT r.rolreplication OR r.rolsuper FROM pg_catalog.pg_roles r
                    WHERE r.rolname = current_user) AS replication,
                  (SELECT s.setting FROM pg_catalog.pg_settings s
                    WHERE s.name = 'output_plugin_libraries') AS plugins,
                  EXISTS (SELECT 1 FROM pg_catalog.pg_publication p WHERE p.pubname = $1) AS publication,
                  EXISTS (SELECT 1 FROM pg_catalog.pg_publication_tables t
                           WHERE t.pubname = $1 AND t.schemaname = $2
                             AND (t.tablename = 'hx_event' OR t.tablename ~ '^hx_event_[0-9]+$')) AS publishes`,
    values: [publication, schema],
  };
}

// -- the batched reads ---------------------------------------------------------
//
// A "source" is where snapshots come from: a table with an hx_stream
// trigger (read by hx_stream_snapshots(table, keys)), or a function of the
// hub's configuration with the same result, (keys text[]) RETURNS TABLE
// (key text, stream text, seq bigint, state jsonb).  source is
// {table: '<regclass text>'} or {fn: '<quoted qualified name>'}.

function snapshotsOf(schema, source, keysParam) {
  return source.fn !== undefined
    ? `${source.fn}(${keysParam}::text[])`
    : `${schema}.hx_stream_snapshots($2::regclass, ${keysParam}::text[])`;
}

function sourceValues(source, keys) {
  return source.fn !== undefined ? [keys] : [keys, source.table];
}

/** The stream and the channel of each key. */
function names(schema, source, keys) {
  return {
    text: `SELECT s.key, s.stream, ${schema}.hx_stream_channel(s.stream) AS channel
             FROM ${snapshotsOf(schema, source, '$1')} s`,
    values: sourceValues(source, keys),
  };
}

/** The channel of each stream. */
function channels(schema, streams) {
  return {
    text: `SELECT s AS stream, ${schema}.hx_stream_channel(s) AS channel FROM unnest($1::text[]) s`,
    values: [streams],
  };
}

/**
 * The state and seq of each key, when the state is NULL the stream's last
 * event (is the row gone, after hx.stream_end?), and the mark of the event
 * at seq (its type, its timestamp and the bytes of its JSON text: what a
 * reconnect after a failover compares), in one statement and so one
 * snapshot.
 */
function snapshots(schema, source, keys) {
  return {
    text: `SELECT s.key, s.stream, s.seq, s.state,
                  (SELECT e.event FROM ${schema}.hx_event e
                    WHERE s.state IS NULL AND s.seq > 0 AND e.stream = s.stream AND e.seq = s.seq) AS last,
                  (SELECT pg_catalog.jsonb_build_array(pg_catalog.jsonb_extract_path(e.event, 'type'),
                                                       pg_catalog.jsonb_extract_path(e.event, 'timestamp'),
                                                       pg_catalog.octet_length(e.event::pg_catalog.text))
                     FROM ${schema}.hx_event e
                    WHERE s.seq > 0 AND e.stream = s.stream AND e.seq = s.seq) AS mark
             FROM ${snapshotsOf(schema, source, '$1')} s`,
    values: sourceValues(source, keys),
  };
}

/** The events after a seq of each stream, limit a stream. */
function eventsAfter(schema, streams, seqs, limit) {
  return {
    text: `SELECT stream, seq, event FROM ${schema}.hx_stream_events_after($1::text[], $2::int8[], $3)`,
    values: [streams, seqs.map(String), limit],
  };
}

/** The last seq of each stream. */
function heads(schema, streams) {
  return {
    text: `SELECT stream, seq FROM ${schema}.hx_stream_heads($1::text[])`,
    values: [streams],
  };
}

// -- the transports --------------------------------------------------------------

/** LISTEN (or UNLISTEN) on many channels: one simple-protocol query of many statements. */
function listen(verb, list) {
  return list.map((c) => `${verb} ${quoteIdent(c)}`).join(';');
}

/**
 * slot: lower case letters, digits and underscores (made by the client,
 * or checked by it).  A temporary slot by default; with failover (17 and
 * later), a persistent one that synchronized_standby_slots holds back
 * until the standbys have the WAL, and that standbys with
 * sync_replication_slots copy.
 */
function createSlot(slot, failover = false, plugin = 'pgoutput') {
  if (plugin !== 'pgoutput' && plugin !== 'hxstate') throw new TypeError(`not an output plugin of the hub: ${plugin}`);
  if (failover) return `CREATE_REPLICATION_SLOT ${slot} LOGICAL ${plugin} (SNAPSHOT 'nothing', FAILOVER true)`;
  return `CREATE_REPLICATION_SLOT ${slot} TEMPORARY LOGICAL ${plugin} NOEXPORT_SNAPSHOT`;
}

/**
 * Drop a persistent slot of this name that no one uses (a hub that
 * stopped without dropping it).  A replication connection takes the
 * simple protocol only: the name (lower case letters, digits,
 * underscores) is written into the text as a literal.
 */
function dropIdleSlot(slot) {
  if (!/^[a-z0-9_]{1,63}$/.test(slot)) throw new TypeError(`not a slot name: ${slot}`);
  return `SELECT pg_catalog.pg_drop_replication_slot(s.slot_name) FROM pg_catalog.pg_replication_slots s
           WHERE s.slot_name = '${slot}' AND NOT s.active AND s.slot_type = 'logical'`;
}

function dropSlot(slot) {
  return `DROP_REPLICATION_SLOT ${slot}`;
}

/** Is the server a standby (in recovery)?  (Simple protocol: a replication connection.) */
function inRecovery() {
  return 'SELECT pg_catalog.pg_is_in_recovery() AS standby';
}

/** A standby's slot waits for the primary's next running-transactions record: write one now. */
function logStandbySnapshot() {
  return { text: 'SELECT pg_catalog.pg_log_standby_snapshot()', values: [] };
}

/**
 * What holds the WAL of logical slots back until standbys have it:
 * synchronized_standby_slots (17 and later), pg_failover_slots's
 * standby_slot_names, and every slot (as JSON, whatever columns this
 * version's pg_replication_slots has).
 */
function holdback() {
  return {
    text: `SELECT current_setting('server_version_num')::int AS version,
                  pg_catalog.pg_is_in_recovery() AS standby,
                  current_setting('synchronized_standby_slots', true) AS synchronized,
                  current_setting('pg_failover_slots.standby_slot_names', true) AS failover_slots,
                  current_setting('synchronous_standby_names') AS sync_names,
                  coalesce((SELECT pg_catalog.jsonb_agg(pg_catalog.to_jsonb(s)) FROM pg_catalog.pg_replication_slots s), '[]') AS slots`,
    values: [],
  };
}

/**
 * Start decoding from the slot: with pgoutput, the publication's changes;
 * with hxstate's own plugin, the log's inserts, one message per
 * transaction, the event texts of a transaction past maxTxBytes left out.
 */
function startReplication(slot, publication, plugin = 'pgoutput', maxTxBytes = 16 * 1024 * 1024) {
  if (plugin === 'hxstate') {
    if (!Number.isSafeInteger(maxTxBytes) || maxTxBytes < 0) throw new TypeError(`not a number of bytes: ${maxTxBytes}`);
    return `START_REPLICATION SLOT ${slot} LOGICAL 0/0 (proto_version '1', max_tx_bytes '${maxTxBytes}')`;
  }
  // publication_names is a list of identifiers in a string literal
  const pub = `'${quoteIdent(publication).replace(/'/g, "''")}'`;
  return `START_REPLICATION SLOT ${slot} LOGICAL 0/0 (proto_version '1', publication_names ${pub})`;
}

module.exports = {
  quoteIdent, parseQualifiedName, functionName,
  extension, walPrerequisites, names, channels, snapshots, eventsAfter, heads,
  listen, createSlot, dropIdleSlot, dropSlot, inRecovery, logStandbySnapshot, holdback, startReplication,
};
