'use strict';
// How the saver's columns are encoded: JSON text as the saver writes it,
// identifiers and literals quoted for the SQL it composes, and `packed`,
// LangGraph's bookkeeping of a checkpoint (and pending writes over 256
// characters) as zlib-compressed JSON with a preset dictionary.

const zlib = require('node:zlib');
const { DataCorrupted } = require('./errors');

// zlib's preset dictionary: the bytes of ZDICT in the Python package's
// hxstate/langgraph/storage.py.  A packed value names its dictionary by
// its Adler-32 (zlib's FDICT header), so these bytes never change; the
// tests check that values Python packed open here, and the other way.
const ZDICT = Buffer.from(
  '{"v":4,"ts":"2026-01-01T00:00:00.000000+00:00","channel_versions":{"__start__":1,"messages":1,"branch:to:"},' +
    '"versions_seen":{"__input__":{},"__start__":{"__start__":1}},"pending_sends":[],' +
    '"updated_channels":["__start__","messages"]}' +
    '[{"content":"","additional_kwargs":{},"response_metadata":{},"type":"tool","name":null,"id":"",' +
    '"tool_call_id":"","artifact":null,"status":"success"},' +
    '{"content":"","additional_kwargs":{},"response_metadata":{},"type":"human","name":null,"id":""},' +
    '{"content":"","additional_kwargs":{},"response_metadata":{},"type":"ai","name":null,"id":"",' +
    '"tool_calls":[{"name":"","args":{},"id":"","type":"tool_call"}],"invalid_tool_calls":[],"usage_metadata":null}]',
  'utf8',
);

/** @param {Buffer} buf */
function adler32(buf) {
  let a = 1;
  let b = 0;
  for (let i = 0; i < buf.length; i++) {
    a = (a + buf[i]) % 65521;
    b = (b + a) % 65521;
  }
  return ((b << 16) | a) >>> 0;
}

const ZDICTS = new Map([[adler32(ZDICT), ZDICT]]);
/** The largest value unpack() inflates: a packed column is at most 1 GB, as a value of PostgreSQL. */
const MAX_UNPACKED = 1 << 30;

/**
 * JSON text compressed by zlib (level 6) with ZDICT: a pending write's
 * when that saves a quarter or more, a checkpoint's bookkeeping always.
 * @param {string} text
 * @param {{ always?: boolean }} [options]
 * @returns {Buffer | null}
 */
function pack(text, { always = false } = {}) {
  if (!always && text.length < 256) return null;
  const raw = Buffer.from(text, 'utf8');
  const packed = zlib.deflateSync(raw, { level: 6, dictionary: ZDICT });
  return always || packed.length * 4 <= raw.length * 3 ? packed : null;
}

/**
 * The JSON text of a packed value; plain zlib is read too.  A value that
 * is not zlib, names a dictionary this version does not have, or is not
 * UTF-8 is DataCorrupted.
 * @param {Buffer} packed
 * @returns {string}
 */
function unpack(packed) {
  /** @type {zlib.ZlibOptions} */
  let options = { maxOutputLength: MAX_UNPACKED };
  if (packed.length >= 6 && packed[1] & 0x20) {
    const zdict = ZDICTS.get(packed.readUInt32BE(2));
    if (zdict === undefined) {
      throw new DataCorrupted('a packed value names a zlib dictionary this version of hxstate does not have');
    }
    options = { ...options, dictionary: zdict };
  }
  let raw;
  try {
    raw = zlib.inflateSync(packed, options);
  } catch (err) {
    throw new DataCorrupted(`a packed value that does not inflate (${/** @type {Error} */ (err).message})`);
  }
  return utf8(raw, 'a packed value');
}

/**
 * Bytes as UTF-8 text, refusing what is not UTF-8 (DataCorrupted).
 * @param {Uint8Array} raw
 * @param {string} what
 */
function utf8(raw, what) {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(raw);
  } catch {
    throw new DataCorrupted(`${what} that is not UTF-8`);
  }
}

/**
 * Parse JSON text the saver read; what does not parse is DataCorrupted.
 * @param {string} text
 * @param {string} what
 * @returns {any}
 */
function parse(text, what) {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new DataCorrupted(`${what} that is not JSON (${/** @type {Error} */ (err).message})`);
  }
}

/**
 * JSON text as the saver writes it (no spaces); the value is already
 * encoded (codec.js), so it holds only JSON.
 * @param {unknown} value
 * @returns {string}
 */
function dumps(value) {
  return JSON.stringify(value);
}

/** @param {string} name */
function quoteIdent(name) {
  return '"' + name.replace(/"/g, '""') + '"';
}

/** @param {string} value */
function quoteLiteral(value) {
  return "'" + value.replace(/'/g, "''") + "'";
}

/**
 * Set an own property, whatever its name ("__proto__" included: a key
 * read from a row never reaches a prototype).
 * @param {Record<string, unknown>} obj
 * @param {string} key
 * @param {unknown} value
 */
function setOwn(obj, key, value) {
  if (key === '__proto__') {
    Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    obj[key] = value;
  }
}

/**
 * Whether `obj` has `key` as an own property (never an inherited one).
 * @param {object} obj
 * @param {string} key
 */
function hasOwn(obj, key) {
  return Object.prototype.hasOwnProperty.call(obj, key);
}

/**
 * Whether `v` is a JSON object as JSON.parse makes them (not an array, not null).
 * @param {unknown} v
 * @returns {v is Record<string, any>}
 */
function isObject(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

module.exports = {
  ZDICT,
  adler32,
  pack,
  unpack,
  utf8,
  parse,
  dumps,
  quoteIdent,
  quoteLiteral,
  setOwn,
  hasOwn,
  isObject,
};
