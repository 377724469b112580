'use strict';
// The saver's errors, each with the SQLSTATE its Python twin
// (hxstate.errors) carries, in `code`, as pg's errors have it: a caller
// tells them apart by class or by code.

/** An error of the saver: `code` is its SQLSTATE, `detail` and `hint` as PostgreSQL's. */
class HxSaverError extends Error {
  /**
   * @param {string} message
   * @param {{ detail?: string, hint?: string, cause?: unknown }} [options]
   */
  constructor(message, options = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    /** @type {string} */
    this.code = /** @type {typeof HxSaverError} */ (new.target).code;
    /** @type {string | undefined} */
    this.detail = options.detail;
    /** @type {string | undefined} */
    this.hint = options.hint;
  }
}
/** @type {string} */
HxSaverError.code = 'XX000';

/** 42P01: no hxstate in the database, or the saver's schema was not set up. */
class NotSetUp extends HxSaverError {}
NotSetUp.code = '42P01';

/** 40001: a run's checkpoint on a parent another writer continued since the run read it. */
class ThreadConflict extends HxSaverError {}
ThreadConflict.code = '40001';

/** 55000: a write to a thread another writer owns, or without its owner's token. */
class OwnerSuperseded extends HxSaverError {}
OwnerSuperseded.code = '55000';

/** 22023: a value of a type the saver does not store, or a stored value it does not rebuild. */
class TypeNotAllowed extends HxSaverError {}
TypeNotAllowed.code = '22023';

/** 22023: a key (thread id, namespace, ...) with a NUL or a lone surrogate, or an argument that is not what the method takes. */
class InvalidParameterValue extends HxSaverError {}
InvalidParameterValue.code = '22023';

/** 54000: a thread id or namespace over 1,024 bytes, a checkpoint, task or run id over 256. */
class ProgramLimitExceeded extends HxSaverError {}
ProgramLimitExceeded.code = '54000';

/** XX001: a stored row that is not what the saver writes (a missing chain, a malformed delta). */
class DataCorrupted extends HxSaverError {}
DataCorrupted.code = 'XX001';

/** XX001: an encrypting saver's row that does not open where it is, or plaintext where ciphertext is expected. */
class Tampered extends DataCorrupted {}
Tampered.code = 'XX001';

/** XH201: a task's writes, or a run's admission, retried with other values. */
class NonDeterministicRetry extends HxSaverError {}
NonDeterministicRetry.code = 'XH201';

module.exports = {
  HxSaverError,
  NotSetUp,
  ThreadConflict,
  OwnerSuperseded,
  TypeNotAllowed,
  InvalidParameterValue,
  ProgramLimitExceeded,
  DataCorrupted,
  Tampered,
  NonDeterministicRetry,
};
