'use strict';
// A key of a read or a delete: its text, or null when no stored row can
// have it (none, or longer than any key the saver stores); a NUL or a lone
// surrogate is InvalidParameterValue (22023), as for a write.  And the
// arguments around the keys: a method's config is an object, its
// `configurable` one too, a checkpoint id asked for is a key, a list's
// filter an object of metadata and its limit a number; anything else is
// InvalidParameterValue, before the server is asked.

const { InvalidParameterValue } = require('./errors');
const { checkKey, MAX_KEY_BYTES, MAX_ID_BYTES } = require('./limits');

/**
 * @param {string} what
 * @param {unknown} value
 * @param {number} [limit] the longest such key stored, in bytes
 * @returns {string | null}
 */
function readKeyOrNull(what, value, limit = MAX_KEY_BYTES) {
  if (value === undefined || value === null) return null;
  try {
    return checkKey(what, value, limit);
  } catch (err) {
    if (err instanceof InvalidParameterValue) throw err;
    return null;
  }
}

/** @param {unknown} value */
function kindOf(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}

/**
 * `config.configurable` (an empty object when there is none).
 * @param {string} method
 * @param {unknown} config
 * @returns {Record<string, unknown>}
 */
function configurableOf(method, config) {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) {
    throw new InvalidParameterValue(`${method} takes a config object, not ${kindOf(config)}`);
  }
  const conf = /** @type {{ configurable?: unknown }} */ (config).configurable;
  if (conf === undefined || conf === null) return {};
  if (typeof conf !== 'object' || Array.isArray(conf)) {
    throw new InvalidParameterValue(`${method}'s config.configurable is an object, not ${kindOf(conf)}`);
  }
  return /** @type {Record<string, unknown>} */ (conf);
}

/**
 * The checkpoint id a read asks for (`checkpoint_id`, or LangGraph's old
 * `thread_ts`): undefined when it asks for none (the newest), null when no
 * stored row can have it.
 * @param {Record<string, unknown>} conf
 * @returns {string | null | undefined}
 */
function askedCheckpointId(conf) {
  const asked = given(conf.checkpoint_id) ? conf.checkpoint_id : conf.thread_ts;
  if (!given(asked)) return undefined;
  return readKeyOrNull('checkpoint id', asked, MAX_ID_BYTES);
}

/**
 * Whether a config names a key: anything but undefined, null and ''
 * (which name none); what it names is then checked as a key.
 * @param {unknown} value
 */
function given(value) {
  return value !== undefined && value !== null && value !== '';
}

/**
 * list()'s filter: metadata's keys and values (none: every checkpoint).
 * @param {unknown} filter
 * @returns {Record<string, unknown> | null}
 */
function filterOf(filter) {
  if (filter === undefined || filter === null) return null;
  const proto = typeof filter === 'object' ? Object.getPrototypeOf(filter) : undefined;
  if (proto !== Object.prototype && proto !== null) {
    const what = typeof filter === 'object' && !Array.isArray(filter) ? `a ${proto?.constructor?.name ?? 'object'}` : kindOf(filter);
    throw new InvalidParameterValue(`list()'s filter is an object of metadata, not ${what}`);
  }
  return Object.keys(/** @type {object} */ (filter)).length ? /** @type {Record<string, unknown>} */ (filter) : null;
}

/**
 * list()'s limit: how many checkpoints at most (none: all).
 * @param {unknown} limit
 * @returns {number}
 */
function limitOf(limit) {
  if (limit === undefined || limit === null) return Infinity;
  if (typeof limit !== 'number' || Number.isNaN(limit)) {
    throw new InvalidParameterValue(`list()'s limit is a number, not ${typeof limit === 'number' ? 'NaN' : kindOf(limit)}`);
  }
  return Math.max(0, Math.floor(limit));
}

module.exports = { readKeyOrNull, given, kindOf, configurableOf, askedCheckpointId, filterOf, limitOf };
