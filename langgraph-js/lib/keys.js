'use strict';
// A key of a read or a delete: its text, or null when no stored row can
// have it (none, or longer than any key the saver stores); a NUL or a lone
// surrogate is InvalidParameterValue (22023), as for a write.

const { InvalidParameterValue } = require('./errors');
const { checkKey } = require('./limits');

/**
 * @param {string} what
 * @param {unknown} value
 * @returns {string | null}
 */
function readKeyOrNull(what, value) {
  if (value === undefined || value === null) return null;
  try {
    return checkKey(what, value);
  } catch (err) {
    if (err instanceof InvalidParameterValue) throw err;
    return null;
  }
}

module.exports = { readKeyOrNull };
