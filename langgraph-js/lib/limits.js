'use strict';
// The sizes of the keys the saver stores, checked before anything is
// written, as the Python HxSaver checks them: a thread's id names its log
// stream (`@<schema>:<thread_id>`), which every notification of the
// thread carries, and leads the primary keys of `checkpoints` and
// `writes`, whose B-tree entries hold at most 2,704 bytes.

const { InvalidParameterValue, ProgramLimitExceeded } = require('./errors');

/** The longest thread id and namespace, in bytes of UTF-8. */
const MAX_KEY_BYTES = 1024;
/** The longest checkpoint id, task id and run id, in bytes of UTF-8. */
const MAX_ID_BYTES = 256;

/**
 * `value` (a thread id, a namespace, ...) as text, if the saver can store
 * it; throws ProgramLimitExceeded (54000) when it is longer than `limit`
 * bytes of UTF-8, InvalidParameterValue (22023) when it holds a NUL or a
 * lone surrogate (PostgreSQL's text holds neither) or is not a string or
 * a number.
 * @param {string} what
 * @param {unknown} value
 * @param {number} [limit]
 * @returns {string}
 */
function checkKey(what, value, limit = MAX_KEY_BYTES) {
  if (typeof value === 'number' && Number.isFinite(value)) value = String(value);
  if (typeof value !== 'string') {
    throw new InvalidParameterValue(`a ${what} must be a string, not ${value === null ? 'null' : typeof value}`);
  }
  if (value.includes('\u0000')) {
    throw new InvalidParameterValue(`a ${what} cannot contain a NUL character`, {
      hint: "PostgreSQL's text holds no NUL: choose another.",
    });
  }
  if (!value.isWellFormed()) {
    throw new InvalidParameterValue(`a ${what} must be Unicode text`, {
      detail: 'It holds a lone surrogate, which UTF-8 cannot encode.',
    });
  }
  const n = Buffer.byteLength(value, 'utf8');
  if (n > limit) {
    throw new ProgramLimitExceeded(`a ${what} of ${n} bytes is longer than the ${limit} bytes HxSaver stores`, {
      detail: `The ${what} begins ${JSON.stringify(value.slice(0, 40))}.`,
      hint:
        "Keys name the thread's log stream, whose notifications carry them, and index entries: " +
        'use a shorter one (a UUID, or a hash of the long one).',
    });
  }
  return value;
}

/**
 * Text the saver passes to the server but does not key rows by (an
 * owner's token, a run's detail, a bound of list()): a string (or a
 * number), without a NUL or a lone surrogate, of any length.
 * @param {string} what
 * @param {unknown} value
 * @returns {string}
 */
function checkText(what, value) {
  return checkKey(what, value, Infinity);
}

/**
 * A checkpoint, task or run id, at most 256 bytes.
 * @param {string} what
 * @param {unknown} value
 * @returns {string}
 */
function checkId(what, value) {
  return checkKey(what, value, MAX_ID_BYTES);
}

module.exports = { MAX_KEY_BYTES, MAX_ID_BYTES, checkKey, checkId, checkText };
