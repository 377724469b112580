'use strict';
// What an error from pg means for the client, by its SQLSTATE (err.code).

function sqlstate(err) {
  const code = err && err.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : null;
}

/**
 * Errors that mean the connection is gone (or about to be): a socket error
 * (no SQLSTATE), or SQLSTATE class 08 (connection exception), 57P01-57P05
 * (administrator command, crash shutdown, cannot connect now, database
 * dropped, idle session timeout), 53300 (too many connections).  Anything
 * else is an error of the statement on a connection that still works.
 */
function isConnectionError(err) {
  const code = sqlstate(err);
  if (code === null) return true;
  return code.startsWith('08') || /^57P0[1-5]$/.test(code) || code === '53300';
}

/** SQLSTATE class 22 (data exception): a value that its type rejects, e.g. a key. */
function isDataError(err) {
  const code = sqlstate(err);
  return code !== null && code.startsWith('22');
}

/**
 * A statement error that may well not happen again: class 40 (transaction
 * rollback: serialization failure, deadlock), class 53 (insufficient
 * resources), 55P03 (lock not available), 57014 (query canceled: a
 * statement_timeout, pg_cancel_backend).  Worth retrying even for a
 * subscription that has not started.
 */
function isTransient(err) {
  const code = sqlstate(err);
  if (code === null) return false;
  return code.startsWith('40') || code.startsWith('53') || code === '55P03' || code === '57014';
}

module.exports = { isConnectionError, isDataError, isTransient };
