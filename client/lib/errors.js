'use strict';
// What an error from pg means for the client, by its SQLSTATE (err.code).

function sqlstate(err) {
  const code = err && err.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : null;
}

/**
 * Errors that mean the connection is gone (or about to be): a socket error
 * (no SQLSTATE), or SQLSTATE class 08 (connection exception), 57P01-57P03
 * (administrator command, crash shutdown, cannot connect now), 53300 (too
 * many connections).  Anything else is an error of the statement on a
 * connection that still works.
 */
function isConnectionError(err) {
  const code = sqlstate(err);
  if (code === null) return true;
  return code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || code === '53300';
}

/** SQLSTATE class 22 (data exception): a value that its type rejects, e.g. a key. */
function isDataError(err) {
  const code = sqlstate(err);
  return code !== null && code.startsWith('22');
}

module.exports = { isConnectionError, isDataError };
