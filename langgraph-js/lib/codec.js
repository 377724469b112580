'use strict';
// Channel values as JSON, in the encoding the Python package writes and
// reads, so that a thread written in one language reads in the other, and
// SQL (state_at) reads either.
//
// A value is stored as the JSON it is: null, booleans, strings, finite
// numbers, arrays and objects (an object's own enumerable properties, or
// what its toJSON() returns: a Date is its ISO string, as LangGraph.js's
// own serializer stores it).  LangChain messages are the Python
// package's message dumps (messages.js).  Tagged objects, `{"$hx": ...}`:
//
//   - {"$hx": "interrupt", "id", "value"}: an interrupt, read as {id, value}
//   - {"$hx": "tuple", "items"}: Python's tuple, read as an array
//   - {"$hx": "serde", "type": "bytes" | "bytearray", "data": base64}: bytes,
//     read and written as a Uint8Array
//   - {"$hx": "serde", "type": "msgpack", ...}: a Python object in
//     LangGraph's msgpack encoding: refused (TypeNotAllowed), since this
//     saver rebuilds no Python type
//
// Decoding is strict: a stored value becomes JSON, a message of the
// closed list of messages.js, bytes or an interrupt, and nothing else; no
// class or function a row names is looked up.  Encoding refuses what it
// could not read back as it was (TypeNotAllowed, 22023): a Map, a Set, a
// BigInt, NaN or an infinity, a string with NUL or a lone surrogate, a
// cycle, a plain object that would read as a message or a tag.

const { TypeNotAllowed, DataCorrupted } = require('./errors');
const { isMessage, looksLikeMessage, pythonType, dumpFields, makeMessage } = require('./messages');
const { setOwn, hasOwn, isObject } = require('./storage');

const TAG = '$hx';
/** The deepest value encoded or decoded, in levels of arrays and objects (as Python's json module). */
const MAX_DEPTH = 1000;

/**
 * A value's JSON form (see the header); throws TypeNotAllowed for what
 * the saver does not store.
 * @param {unknown} v
 * @returns {unknown}
 */
function encode(v) {
  const out = encodeAt(v, 0, []);
  return out === undefined ? null : out;
}

/**
 * @param {unknown} v
 * @param {number} depth
 * @param {object[]} path the objects being encoded, for cycles
 * @returns {unknown} undefined: leave the property out (JSON's rule)
 */
function encodeAt(v, depth, path) {
  switch (typeof v) {
    case 'string':
      return checkString(v);
    case 'number':
      if (!Number.isFinite(v)) refuse(`the number ${v}`, 'JSON has no NaN or infinities.');
      return v;
    case 'boolean':
      return v;
    case 'undefined':
      return undefined;
    case 'bigint':
      refuse('a BigInt', 'Store it as a string.');
      break;
    case 'function':
    case 'symbol':
      refuse(`a ${typeof v}`);
  }
  if (v === null) return null;
  const obj = /** @type {object} */ (v);
  if (depth >= MAX_DEPTH) refuse(`a value nested deeper than ${MAX_DEPTH} levels`);
  if (path.includes(obj)) refuse('a value that holds itself (a cycle)');
  path.push(obj);
  try {
    return encodeObject(obj, depth + 1, path);
  } finally {
    path.pop();
  }
}

/**
 * @param {object} v
 * @param {number} depth
 * @param {object[]} path
 */
function encodeObject(v, depth, path) {
  if (Array.isArray(v)) return v.map((x) => nullIfUndefined(encodeAt(x, depth, path)));
  if (isMessage(v)) return encodeMessage(v, depth, path);
  if (v instanceof Uint8Array) {
    return { [TAG]: 'serde', type: 'bytes', data: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') };
  }
  if (v instanceof Map || v instanceof Set || v instanceof WeakMap || v instanceof WeakSet) {
    refuse(`a ${v.constructor.name}`, 'Store an array or an object.');
  }
  if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer) refuse(`a ${v.constructor.name}`, 'Store a Uint8Array.');
  if (v instanceof Promise) refuse('a Promise');
  const any = /** @type {any} */ (v);
  if (any.lg_name === 'Send' && typeof any.node === 'string') {
    // LangGraph.js's Send, as its own serializer stores it: {node, args}
    const send = { node: any.node, args: nullIfUndefined(encodeAt(any.args, depth, path)) };
    if (any.timeout !== undefined) setOwn(send, 'timeout', encodeAt(any.timeout, depth, path));
    return send;
  }
  if (typeof any.toJSON === 'function') return encodeAt(any.toJSON(), depth, path);
  if (hasOwn(v, TAG) || looksLikeMessage(/** @type {Record<string, unknown>} */ (v))) {
    refuse(
      'a plain object that would read back as a message or a tagged value',
      `Its key "${TAG}", or its message keys (type, content, additional_kwargs, response_metadata), make it one.`,
    );
  }
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const [k, x] of Object.entries(v)) {
    const e = encodeAt(x, depth, path);
    if (e !== undefined) setOwn(out, checkString(k), e);
  }
  return out;
}

/**
 * @param {import('@langchain/core/messages').BaseMessage} m
 * @param {number} depth
 * @param {object[]} path
 */
function encodeMessage(m, depth, path) {
  const type = pythonType(m);
  if (type === undefined) refuse(`a message of type ${m._getType()}`, 'The Python package has no such message.');
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const [k, x] of dumpFields(m, /** @type {string} */ (type))) {
    setOwn(out, k, nullIfUndefined(encodeAt(x, depth, path)));
  }
  return out;
}

/** @param {unknown} v */
function nullIfUndefined(v) {
  return v === undefined ? null : v;
}

/** @param {string} s */
function checkString(s) {
  if (s.includes('\u0000')) refuse('a string with a NUL character', "PostgreSQL's json cannot hold it as text.");
  if (!s.isWellFormed()) refuse('a string with a lone surrogate', 'UTF-8 cannot encode it.');
  return s;
}

/**
 * @param {string} what
 * @param {string} [hint]
 * @returns {never}
 */
function refuse(what, hint) {
  throw new TypeNotAllowed(`HxSaver does not store ${what}`, {
    detail: 'What it stores it reads back as it was: JSON, LangChain messages, interrupts and bytes.',
    hint,
  });
}

/**
 * A stored value (parsed JSON) as a JS value; throws TypeNotAllowed for a
 * Python object it does not rebuild, DataCorrupted for what the saver
 * never writes.
 * @param {unknown} j
 * @returns {unknown}
 */
function decode(j) {
  return decodeAt(j, 0);
}

/**
 * @param {unknown} j
 * @param {number} depth
 * @returns {unknown}
 */
function decodeAt(j, depth) {
  if (typeof j !== 'object' || j === null) return j;
  if (depth >= MAX_DEPTH) throw new DataCorrupted(`a stored value nested deeper than ${MAX_DEPTH} levels`);
  if (Array.isArray(j)) return j.map((x) => decodeAt(x, depth + 1));
  const d = /** @type {Record<string, unknown>} */ (j);
  if (hasOwn(d, TAG)) return decodeTagged(d, depth + 1);
  if (looksLikeMessage(d)) return decodeMessage(d, depth + 1);
  return Object.fromEntries(Object.entries(d).map(([k, x]) => [k, decodeAt(x, depth + 1)]));
}

/**
 * @param {Record<string, any>} d
 * @param {number} depth
 */
function decodeMessage(d, depth) {
  /** @type {Record<string, unknown>} */
  const fields = {};
  for (const [k, x] of Object.entries(d)) setOwn(fields, k, decodeAt(x, depth));
  if (typeof fields.content !== 'string' && !Array.isArray(fields.content)) {
    throw new DataCorrupted(`a stored ${d.type} message whose content is neither text nor a list`);
  }
  for (const k of ['additional_kwargs', 'response_metadata']) {
    if (!isObject(fields[k])) throw new DataCorrupted(`a stored ${d.type} message whose ${k} is not an object`);
  }
  for (const k of ['id', 'name']) {
    if (fields[k] !== null && fields[k] !== undefined && typeof fields[k] !== 'string') {
      throw new DataCorrupted(`a stored ${d.type} message whose ${k} is not text`);
    }
  }
  try {
    return makeMessage(fields);
  } catch (err) {
    throw new DataCorrupted(`a stored ${d.type} message that does not make one (${/** @type {Error} */ (err).message})`);
  }
}

/**
 * @param {Record<string, any>} d
 * @param {number} depth
 */
function decodeTagged(d, depth) {
  const tag = d[TAG];
  if (tag === 'tuple') {
    if (!Array.isArray(d.items)) throw new DataCorrupted('a stored tuple without items');
    return d.items.map((x) => decodeAt(x, depth));
  }
  if (tag === 'interrupt') {
    if (typeof d.id !== 'string') throw new DataCorrupted('a stored interrupt without an id');
    return { id: d.id, value: decodeAt(d.value, depth) };
  }
  if (tag === 'serde') {
    if (d.type === 'bytes' || d.type === 'bytearray') return bytesOf(d.data);
    if (d.type === 'null') return null;
    throw new TypeNotAllowed(
      `a stored value is a Python object (LangGraph's ${typeof d.type === 'string' ? d.type : 'unknown'} encoding), which HxSaver for JavaScript does not rebuild`,
      {
        detail: 'It rebuilds JSON, LangChain messages, interrupts and bytes; nothing a row names is imported or called.',
        hint: 'Keep the state JSON (an ISO string for a datetime, a list for a set) when both languages read the thread.',
      },
    );
  }
  if (tag === 'sealed') throw new DataCorrupted('an encrypted value inside a value, where the saver never writes one');
  throw new DataCorrupted(`a stored value with an unknown ${TAG} tag ${JSON.stringify(String(tag)).slice(0, 60)}`);
}

/** @param {unknown} data */
function bytesOf(data) {
  if (typeof data !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(data) || data.length % 4 !== 0) {
    throw new DataCorrupted('stored bytes that are not base64');
  }
  return new Uint8Array(Buffer.from(data, 'base64'));
}

/**
 * What a reader outside Python sees of an encoded value: interrupts as
 * {id, value} and tuples as arrays (other tags stay tagged), as the
 * thread's stream publishes it.
 * @param {unknown} j
 * @returns {unknown}
 */
function publicJson(j) {
  if (Array.isArray(j)) return j.map(publicJson);
  if (!isObject(j)) return j;
  const tag = j[TAG];
  if (tag === 'tuple' && Array.isArray(j.items)) return j.items.map(publicJson);
  if (tag === 'interrupt') return { id: j.id, value: publicJson(j.value) };
  if (tag !== undefined) return j;
  return Object.fromEntries(Object.entries(j).map(([k, x]) => [k, publicJson(x)]));
}

module.exports = { TAG, MAX_DEPTH, encode, decode, publicJson };
