'use strict';
// How the saver reaches the database: a pg Pool (a client per operation,
// so operations run side by side), or one pg Client (operations take
// turns on it).  An operation that writes more than one statement runs
// in a transaction (`transaction`); one statement runs alone (`query`).

/**
 * A database handle: what `query` and `transaction` pass to an operation.
 * @typedef {{ query(text: string, values?: unknown[]): Promise<{ rows: any[] }> }} Queryable
 * @typedef {import('pg').Pool | import('pg').Client} Connection
 */

class Database {
  /** @param {Connection} conn a pg Pool, or a connected pg Client */
  constructor(conn) {
    /** @type {Connection} */
    this.conn = conn;
    /** @type {Promise<unknown>} */
    this.turn = Promise.resolve();
  }

  /** @returns {boolean} */
  isPool() {
    return typeof (/** @type {any} */ (this.conn).totalCount) === 'number';
  }

  /**
   * Run `fn` with a client of its own (a Pool's), or the Client when it
   * is its turn.
   * @template T
   * @param {(client: Queryable) => Promise<T>} fn
   * @returns {Promise<T>}
   */
  async withClient(fn) {
    if (this.isPool()) {
      const client = await /** @type {import('pg').Pool} */ (this.conn).connect();
      try {
        return await fn(client);
      } finally {
        client.release();
      }
    }
    const run = this.turn.then(() => fn(/** @type {import('pg').Client} */ (this.conn)));
    this.turn = run.catch(() => undefined);
    return run;
  }

  /**
   * One statement.
   * @param {string} text
   * @param {unknown[]} [values]
   * @returns {Promise<any[]>} its rows
   */
  async query(text, values) {
    return this.withClient(async (client) => (await client.query(text, values)).rows);
  }

  /**
   * `fn` in a transaction: committed when it returns, rolled back when it
   * throws.
   * @template T
   * @param {(client: Queryable) => Promise<T>} fn
   * @param {string} [mode] e.g. "ISOLATION LEVEL REPEATABLE READ, READ ONLY"
   * @returns {Promise<T>}
   */
  async transaction(fn, mode = '') {
    return this.withClient(async (client) => {
      await client.query(mode ? `BEGIN ${mode}` : 'BEGIN');
      try {
        const result = await fn(client);
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
    });
  }
}

module.exports = { Database };
