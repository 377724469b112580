'use strict';
// What a Durable Streams URL names.  The endpoint's URLs are
//
//   /<route>/<stream name, percent-encoded>
//
// and the name says the kind of stream:
//
//   "@<name>"          a log stream of hxstate (hx_stream_send's), read
//                      from hx_event; appended to through the endpoint
//                      only under one of the configured log prefixes
//   "<prefix>:<key>"   a table's stream, as the table's hx_stream trigger
//                      names it (the prefix of a table the gateway serves):
//                      read only, since only its row's trigger writes it
//   anything else      a byte stream of the endpoint's own tables, when
//                      byte streams are on ("v1/stream/x": a name may have
//                      slashes); a name with a ":" is never one, so no byte
//                      stream can take the name of an hxstate stream
//
// Each is authorised as {table, key} (the gateway's authorize hook and
// tokens): a log stream "@a:b" as table "@a", key "b" ("@a" alone: key
// ""); a table's stream as the table and its key; a byte stream as the
// table the bytes option names ("ds" by default) and its whole name.
const { HttpError } = require('../limits');

const MAX_NAME_BYTES = 1024;

/**
 * {kind, name, table, key, stream} of the rest of a URL path (after
 * "/<route>/"); HttpError 400 or 404.  prefixes: Map(table -> prefix) of
 * the served tables; bytes: the table name of byte streams, or null.
 */
function resolveName(rest, { prefixes, bytes }) {
  let name;
  try {
    name = decodeURIComponent(rest);
  } catch (err) {
    throw new HttpError(400, 'malformed stream name: not a percent-encoded UTF-8 string');
  }
  if (name === '') throw new HttpError(404, 'no stream named');
  if (name.includes('\u0000')) throw new HttpError(400, 'malformed stream name: it contains a NUL character');
  if (Buffer.byteLength(name) > MAX_NAME_BYTES) throw new HttpError(400, `malformed stream name: longer than ${MAX_NAME_BYTES} bytes`);
  if (name.startsWith('@')) {
    const colon = name.indexOf(':');
    return {
      kind: 'log', name, stream: name,
      table: colon < 0 ? name : name.slice(0, colon), key: colon < 0 ? '' : name.slice(colon + 1),
    };
  }
  if (name.includes(':')) {
    let best = null;
    for (const [table, prefix] of prefixes || []) {
      if (name.startsWith(`${prefix}:`) && (!best || prefix.length > best.prefix.length)) best = { table, prefix };
    }
    if (!best) throw new HttpError(404, 'no table the gateway serves names its streams so');
    return { kind: 'table', name, stream: name, table: best.table, key: name.slice(best.prefix.length + 1) };
  }
  if (!bytes) throw new HttpError(404, 'no such stream (byte streams are off)');
  return { kind: 'bytes', name, stream: name, table: bytes, key: name };
}

/** Is a log stream one the endpoint may create and append to (under one of prefixes)? */
function writableLog(name, prefixes) {
  return prefixes.some((p) => name.startsWith(p));
}

module.exports = { resolveName, writableLog, MAX_NAME_BYTES };
