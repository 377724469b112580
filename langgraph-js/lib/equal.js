'use strict';
// Equality of JSON values, an object's keys in any order: a retry's
// values against the ones stored (Python's == of dicts).

const { hasOwn } = require('./storage');

/**
 * @param {unknown} a
 * @param {unknown} b
 * @returns {boolean}
 */
function equalJson(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => equalJson(x, b[i]));
  }
  const ka = Object.keys(a);
  return (
    ka.length === Object.keys(b).length &&
    ka.every((k) => hasOwn(b, k) && equalJson(/** @type {any} */ (a)[k], /** @type {any} */ (b)[k]))
  );
}

module.exports = { equalJson };
