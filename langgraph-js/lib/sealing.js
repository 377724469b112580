'use strict';
// What an encrypting saver stores, sealed where it belongs, and opened
// back, as the Python package's sealing.py does it.
//
// A checkpoint's delta and snapshot are one envelope each: the JSON of
// the ops (or of the state) compressed by zlib with the dictionary, then
// sealed bound to the thread, namespace, checkpoint, kind ("delta" or
// "snapshot") and {channel: version} of what it holds, which the envelope
// carries in clear (`c`, in the associated data as JSON with sorted keys).
// A pending write's value is an envelope bound to its thread, namespace,
// checkpoint, "write", task, index (decimal) and channel.  A saver
// without a sealer refuses an envelope (it cannot open it), and one with
// a sealer refuses anything else (plaintext where ciphertext is expected).

const { Tampered } = require('./errors');
const { channelOf } = require('./delta');
const { dumps, pack, unpack, parse, isObject } = require('./storage');

/**
 * @typedef {{ seal(plaintext: Uint8Array, where: string[]): Record<string, unknown>,
 *             unseal(envelope: unknown, where: string[]): Uint8Array }} Sealer
 * @typedef {[string, string, string]} Where thread, namespace, checkpoint
 */

/** @param {unknown} j */
function isSealed(j) {
  return isObject(j) && j.$hx === 'sealed';
}

/**
 * Compare strings by code point (Python's order of str), not UTF-16 unit.
 * @param {string} a
 * @param {string} b
 */
function byCodePoint(a, b) {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = /** @type {number} */ (x[i].codePointAt(0)) - /** @type {number} */ (y[i].codePointAt(0));
    if (d) return d;
  }
  return x.length - y.length;
}

/**
 * `c` as the associated data holds it: JSON with sorted keys, no spaces.
 * @param {Record<string, string>} c
 */
function channelsText(c) {
  return '{' + Object.keys(c).sort(byCodePoint).map((k) => JSON.stringify(k) + ':' + JSON.stringify(c[k])).join(',') + '}';
}

/**
 * A delta's ops or a snapshot's state, sealed: its JSON text.
 * @param {Sealer} sealer
 * @param {Where} where
 * @param {'delta' | 'snapshot'} kind
 * @param {unknown} value
 * @param {Record<string, string>} channels
 */
function sealPart(sealer, where, kind, value, channels) {
  const envelope = sealer.seal(/** @type {Buffer} */ (pack(dumps(value), { always: true })), [...where, kind, channelsText(channels)]);
  return dumps({ ...envelope, c: channels });
}

/**
 * A delta's ops or a snapshot's state from what a row holds (parsed).
 * @param {Sealer | null} sealer
 * @param {Where} where
 * @param {'delta' | 'snapshot'} kind
 * @param {unknown} j
 * @returns {any}
 */
function openPart(sealer, where, kind, j) {
  if (sealer === null) {
    if (isSealed(j)) {
      throw new Tampered(`an encrypted ${kind}, and this saver has no key`, {
        hint: 'Open the thread with the EncryptedSerializer it was written with.',
      });
    }
    return j;
  }
  const c = isObject(j) ? j.c : undefined;
  if (!isSealed(j) || !isObject(c) || !Object.values(c).every((v) => typeof v === 'string')) {
    throw new Tampered(`a plaintext ${kind} where ciphertext is expected`, {
      detail: `Checkpoint ${where[2]} of thread ${JSON.stringify(where[0])}.`,
    });
  }
  const text = unpack(Buffer.from(sealer.unseal(j, [...where, kind, channelsText(c)])));
  const value = parse(text, `a sealed ${kind}`);
  const touched =
    kind === 'delta'
      ? (Array.isArray(value) ? value : []).map((op) => (isObject(op) && typeof op.path === 'string' ? channelOf(op.path) : ''))
      : Object.keys(isObject(value) ? value : {});
  if (!touched.every((ch) => Object.prototype.hasOwnProperty.call(c, ch))) {
    throw new Tampered(`a ${kind} that changes channels its envelope does not name`);
  }
  return value;
}

/**
 * @param {Sealer} sealer
 * @param {Where} where
 * @param {string} taskId
 * @param {number} idx
 * @param {string} channel
 * @param {unknown} value encoded
 */
function sealWrite(sealer, where, taskId, idx, channel, value) {
  const envelope = sealer.seal(/** @type {Buffer} */ (pack(dumps(value), { always: true })), [
    ...where,
    'write',
    taskId,
    String(idx),
    channel,
  ]);
  return dumps(envelope);
}

/**
 * @param {Sealer | null} sealer
 * @param {Where} where
 * @param {string} taskId
 * @param {number} idx
 * @param {string} channel
 * @param {unknown} j
 */
function openWrite(sealer, where, taskId, idx, channel, j) {
  if (sealer === null) {
    if (isSealed(j)) throw new Tampered('an encrypted write, and this saver has no key');
    return j;
  }
  if (!isSealed(j)) {
    throw new Tampered('a plaintext write where ciphertext is expected', {
      detail: `Checkpoint ${where[2]} of thread ${JSON.stringify(where[0])}.`,
    });
  }
  const text = unpack(Buffer.from(sealer.unseal(j, [...where, 'write', taskId, String(idx), channel])));
  return parse(text, 'a sealed write');
}

module.exports = { isSealed, channelsText, sealPart, openPart, sealWrite, openWrite };
