'use strict';
// EncryptedSerializer: AES-GCM (node:crypto) with associated data, in the
// format of the Python package's hxstate.langgraph.crypto, so that a
// thread sealed in one language opens in the other with the same keys.
//
// An envelope is {"$hx": "sealed", "k": key id, "d": base64(nonce[12] ‖
// ciphertext ‖ tag[16])}; its associated data is the length-prefixed (4
// bytes, big-endian) sequence "hxstate.langgraph/1", the key id, then
// where the value belongs (sealing.js says what).  The first key seals,
// any of them opens (`k` names it): keys rotate by putting the new one
// first.

const crypto = require('node:crypto');
const { Tampered } = require('./errors');

const PREFIX = Buffer.from('hxstate.langgraph/1', 'utf8');

/**
 * The associated data of a value sealed with key `keyId` at `where`.
 * @param {string} keyId
 * @param {string[]} where
 */
function aad(keyId, where) {
  const parts = [PREFIX, Buffer.from(keyId, 'utf8'), ...where.map((w) => Buffer.from(w, 'utf8'))];
  const out = [];
  for (const p of parts) {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(p.length);
    out.push(len, p);
  }
  return Buffer.concat(out);
}

/** @param {string[]} where */
function place(where) {
  return where.map((w) => JSON.stringify(w)).join(' ');
}

class EncryptedSerializer {
  /**
   * @param {Uint8Array | Record<string, Uint8Array>} keys one key (its id
   *   "k1"), or keys by id, the first sealing; each of 16, 24 or 32 bytes
   */
  constructor(keys) {
    /** @type {Record<string, Uint8Array>} */
    const named = keys instanceof Uint8Array ? { k1: keys } : { ...keys };
    const ids = Object.keys(named);
    if (!ids.length) throw new TypeError('EncryptedSerializer needs a key');
    /** @type {Map<string, Buffer>} */
    this.keys = new Map();
    for (const id of ids) {
      const key = named[id];
      if (!id || !(key instanceof Uint8Array) || ![16, 24, 32].includes(key.length)) {
        throw new TypeError('a key is 16, 24 or 32 bytes, named by a non-empty string');
      }
      this.keys.set(id, Buffer.from(key));
    }
    /** The id of the key new envelopes are sealed with (the first). */
    this.keyId = ids[0];
  }

  /**
   * @param {Uint8Array} plaintext
   * @param {string[]} where
   * @returns {{ $hx: 'sealed', k: string, d: string }}
   */
  seal(plaintext, where) {
    const key = /** @type {Buffer} */ (this.keys.get(this.keyId));
    const nonce = crypto.randomBytes(12);
    const cipher = crypto.createCipheriv(/** @type {crypto.CipherGCMTypes} */ (`aes-${key.length * 8}-gcm`), key, nonce);
    cipher.setAAD(aad(this.keyId, where));
    const sealed = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
    return { $hx: 'sealed', k: this.keyId, d: Buffer.concat([nonce, sealed]).toString('base64') };
  }

  /**
   * The plaintext of an envelope sealed at `where`; Tampered (XX001) for
   * anything else.
   * @param {unknown} envelope
   * @param {string[]} where
   * @returns {Buffer}
   */
  unseal(envelope, where) {
    const e = /** @type {Record<string, unknown>} */ (envelope);
    if (typeof e !== 'object' || e === null || Array.isArray(e) || e.$hx !== 'sealed') {
      throw new Tampered('a plaintext value where ciphertext is expected', { detail: `At ${place(where)}.` });
    }
    const key = typeof e.k === 'string' ? this.keys.get(e.k) : undefined;
    if (key === undefined || typeof e.d !== 'string') {
      throw new Tampered('a ciphertext under a key this saver does not have', { detail: `At ${place(where)}.` });
    }
    const raw = /^[A-Za-z0-9+/]*={0,2}$/.test(e.d) && e.d.length % 4 === 0 ? Buffer.from(e.d, 'base64') : null;
    try {
      if (raw === null || raw.length < 28) throw new Error('short');
      const decipher = crypto.createDecipheriv(/** @type {crypto.CipherGCMTypes} */ (`aes-${key.length * 8}-gcm`), key, raw.subarray(0, 12));
      decipher.setAAD(aad(/** @type {string} */ (e.k), where));
      decipher.setAuthTag(raw.subarray(raw.length - 16));
      return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]);
    } catch {
      throw new Tampered('a ciphertext that does not belong where it is', {
        detail: `At ${place(where)}: moved from elsewhere, replayed from an older row, or altered.`,
      });
    }
  }
}

module.exports = { EncryptedSerializer, aad };
