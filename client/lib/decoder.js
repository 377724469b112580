'use strict';
// Which output plugin decodes the WAL for the hub: hxstate's own (the
// library's src/decode.c: one message per transaction that logged events)
// or pgoutput (BEGIN, an INSERT per event, COMMIT; through a publication
// of hx_event).
//
// Since PostgreSQL 15.20 and 18.6 a server loads as an output plugin only
// a library its output_plugin_libraries names (pgoutput and test_decoding
// by default); an older server has no such setting and loads any.  Only a
// superuser or a member of pg_read_all_settings may read the setting:
// for other roles it is unknown, and the hub tries.  The hub's decoder
// option:
//   'auto'     hxstate's plugin where the server would load it, else
//              pgoutput; and pgoutput too when creating the slot with
//              hxstate's is refused after all (a library older than
//              0.7.0 has no plugin);
//   'hxstate'  hxstate's plugin, or no WAL transport;
//   'pgoutput' pgoutput (its publication must exist).

const DECODERS = ['auto', 'hxstate', 'pgoutput'];

/** Is hxstate named in output_plugin_libraries's text (null: unknown, or no such setting: try)? */
function pluginAllowed(setting) {
  if (setting === null || setting === undefined) return true;
  return String(setting).split(',').some((name) => name.trim().replace(/^"(.*)"$/, '$1') === 'hxstate');
}

/**
 * The decoder for an option and the server's output_plugin_libraries:
 * {decoder, reason (why not hxstate's, or null), blocker (why the WAL
 * cannot be used, or null)}.
 */
function chooseDecoder(option, setting) {
  if (option === 'pgoutput') return { decoder: 'pgoutput', reason: null, blocker: null };
  if (pluginAllowed(setting)) return { decoder: 'hxstate', reason: null, blocker: null };
  const why = `output_plugin_libraries (${setting}) does not name hxstate`;
  if (option === 'hxstate') return { decoder: 'hxstate', reason: why, blocker: why };
  return { decoder: 'pgoutput', reason: `${why}: decoding with pgoutput`, blocker: null };
}

/** Why pgoutput cannot decode the log (null: it can), from walPrerequisites's row. */
function publicationBlocker(r, publication) {
  if (!r.publication) return `publication "${publication}" does not exist (SELECT hx_stream_publication() creates it)`;
  if (!r.publishes) return `publication "${publication}" does not publish hx_event`;
  return null;
}

/**
 * Did the server refuse to load hxstate's plugin: not in
 * output_plugin_libraries (42501), or a library without
 * _PG_output_plugin_init (42883) or none at all (58P01)?
 */
function pluginRefused(err) {
  return !!err && (err.code === '42501' || err.code === '42883' || err.code === '58P01');
}

module.exports = { DECODERS, chooseDecoder, publicationBlocker, pluginRefused, pluginAllowed };
