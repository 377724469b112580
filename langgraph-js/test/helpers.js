'use strict';
// What the package's tests share: a database of their own, hxstate_lgjs
// with hxstate, on the cluster the environment names (PGHOST, PGPORT,
// PGUSER, as test/lib/cluster.sh sets them; PGDATABASE is set to it
// here, for the pools, Python and the processes the tests start), and
// the Python package, run from the venv of
// python/requirements-test.txt (HX_PYTHON: its python; test/suite's node
// suite builds it) with python/src on its path, which sets the saver's
// schema up and writes and reads threads for the cross-language tests.

const path = require('node:path');
const { execFile } = require('node:child_process');
const pg = require('pg');

const TOP = path.resolve(__dirname, '..', '..');
const DATABASE = 'hxstate_lgjs';
const ADMIN_DATABASE = process.env.PGDATABASE || 'postgres';
process.env.PGDATABASE = DATABASE;

/** @type {Promise<void> | null} */
let made = null;

/**
 * The tests' database, with hxstate, made once (test files run side by
 * side: one may make it while another does).
 */
function database() {
  made ??= (async () => {
    const admin = new pg.Client({ database: ADMIN_DATABASE === DATABASE ? 'postgres' : ADMIN_DATABASE });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${DATABASE}`).catch((err) => {
        if (err.code !== '42P04' && err.code !== '23505') throw err; // made already
      });
    } finally {
      await admin.end();
    }
    const client = new pg.Client();
    await client.connect();
    try {
      await client.query('CREATE EXTENSION IF NOT EXISTS hxstate').catch((err) => {
        if (err.code !== '23505' && err.code !== '42710') throw err; // made already
      });
    } finally {
      await client.end();
    }
  })();
  return made;
}

/** The python of the venv with LangGraph and psycopg (HX_PYTHON). */
function python() {
  const py = process.env.HX_PYTHON;
  if (!py) {
    throw new Error(
      'HX_PYTHON names no python: run the tests through test/suite (node), or set HX_PYTHON to ' +
        'the venv of python/requirements-test.txt (. test/lib/python.sh; hx_python_venv python/requirements-test.txt; ' +
        'HX_PYTHON=$HX_VENV/python)',
    );
  }
  return py;
}

/**
 * Run Python code with the package on its path; resolves with its
 * standard output (what it printed), rejects with its standard error.
 * @param {string} code
 * @param {{ input?: string, env?: Record<string, string> }} [options]
 * @returns {Promise<string>}
 */
function runPython(code, { input, env = {} } = {}) {
  return new Promise((resolve, reject) => {
    const child = execFile(
      python(),
      ['-c', code],
      {
        cwd: path.join(TOP, 'python'),
        env: { ...process.env, PYTHONPATH: path.join(TOP, 'python', 'src'), PYTHONDONTWRITEBYTECODE: '1', ...env },
        maxBuffer: 64 * 1024 * 1024,
      },
      (err, stdout, stderr) => {
        if (err) reject(Object.assign(new Error(`python failed: ${stderr || err.message}`), { stderr, stdout }));
        else resolve(stdout);
      },
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}

/**
 * The saver's schema set up by the Python package's setup() (the JS saver
 * makes nothing).
 * @param {string} schema
 */
async function setupSchema(schema) {
  await database();
  await runPython(
    `import sys\nfrom hxstate.langgraph import HxSaver\nwith HxSaver.from_conn_string("", schema=sys.argv[1] if len(sys.argv) > 1 else ${JSON.stringify(schema)}) as s:\n    s.setup()\n`,
  );
}

/** A pool on the test cluster. */
function pool() {
  return new pg.Pool({ max: 4 });
}

module.exports = { TOP, DATABASE, database, python, runPython, setupSchema, pool };
