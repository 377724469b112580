'use strict';
// Write ownership of a thread, as the Python package's ownership.py has
// it: while a thread has an owner (table `owners`), every write to it
// (put, putWrites, in any namespace) must carry the owner's token in
// `configurable.hx_owner`, or it is refused with OwnerSuperseded (55000)
// and nothing of it is written.  The check is in the write's own
// transaction, under an advisory lock that acquire() takes exclusively
// and each write shares.

const crypto = require('node:crypto');
const { OwnerSuperseded } = require('./errors');
const { checkText } = require('./limits');

/** The config key of a write's ownership token. */
const OWNER_KEY = 'hx_owner';

/**
 * @param {import('@langchain/core/runnables').RunnableConfig} config
 * @returns {string | null}
 */
function ownerOf(config) {
  const token = config.configurable?.[OWNER_KEY];
  return token === undefined || token === null ? null : checkText('owner token', token);
}

/**
 * The error of a write `token` may not make, the thread's owner of
 * `epoch` (null: it has none).
 * @param {string} threadId
 * @param {string | null} token
 * @param {string | number | null} epoch
 */
function refused(threadId, token, epoch) {
  let message;
  if (epoch === null || epoch === undefined || epoch === '') {
    message = `thread ${JSON.stringify(threadId)} has no owner: this writer's ownership was released`;
  } else if (token === null) {
    message = `thread ${JSON.stringify(threadId)} is owned (epoch ${epoch}): a write must carry its owner's token`;
  } else {
    message = `thread ${JSON.stringify(threadId)} is owned by another writer (epoch ${epoch}): this writer's ownership was superseded`;
  }
  return new OwnerSuperseded(message, {
    detail: 'Nothing was written.',
    hint: 'Another writer took the thread over: stop, or acquire it again.',
  });
}

/**
 * In a write's transaction: the thread's owner waits for it to end;
 * throws OwnerSuperseded unless `token` is the owner's (or the thread has
 * none and no token is given).
 * @param {import('./db').Queryable} client
 * @param {import('./sql').Statements} sql
 * @param {string} threadId
 * @param {string | null} token
 */
async function checkOwner(client, sql, threadId, token) {
  const [row] = (await client.query(sql.OWNER_SQL, [sql.ownerLockKey, threadId])).rows;
  if ((row.token ?? null) !== token) throw refused(threadId, token, row.epoch);
}

/**
 * @param {import('./db').Queryable} client
 * @param {import('./sql').Statements} sql
 * @param {string} threadId
 * @returns {Promise<string>}
 */
async function acquire(client, sql, threadId) {
  await client.query(sql.OWNER_LOCK_SQL, [sql.ownerLockKey, threadId]);
  const [row] = (await client.query(sql.ACQUIRE_SQL, [threadId, crypto.randomBytes(16).toString('hex')])).rows;
  return row.token;
}

/**
 * @param {import('./db').Queryable} client
 * @param {import('./sql').Statements} sql
 * @param {string} threadId
 * @param {string} token
 * @returns {Promise<boolean>}
 */
async function release(client, sql, threadId, token) {
  await client.query(sql.OWNER_LOCK_SQL, [sql.ownerLockKey, threadId]);
  return (await client.query(sql.RELEASE_SQL, [threadId, token])).rows.length > 0;
}

module.exports = { OWNER_KEY, ownerOf, refused, checkOwner, acquire, release };
