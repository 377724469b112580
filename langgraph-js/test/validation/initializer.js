'use strict';
// The CheckpointerTestInitializer of @langchain/langgraph-checkpoint-validation
// for HxSaver: one saver at a time, on a schema the Python package set up
// (validation.test.js does it before the suite runs), emptied before each.

const pg = require('pg');
const { HxSaver } = require('../..');

const schema = process.env.HX_VALIDATION_SCHEMA || 'lgjs_validation';
/** @type {pg.Pool | undefined} */
let pool;

module.exports = {
  checkpointerName: 'HxSaver',
  async afterAll() {
    await pool?.end();
    pool = undefined;
  },
  async createCheckpointer() {
    // (the suite's deltaChannelHistoryTests call no beforeAll)
    pool ??= new pg.Pool({ max: 4 });
    const p = pool;
    await p.query(`TRUNCATE "${schema}".checkpoints, "${schema}".writes, "${schema}".owners, "${schema}".runs`);
    const saver = new HxSaver(p, { schema });
    await saver.setup();
    return saver;
  },
};
