'use strict';
// What the package's tests share: a pool on the cluster the environment
// names (PGHOST, PGPORT, PGUSER, PGDATABASE, as test/lib/cluster.sh sets
// them), and the Python package, run from the venv of
// python/requirements-test.txt (HX_PYTHON: its python; test/suite's node
// suite builds it) with python/src on its path, which sets the saver's
// schema up and writes and reads threads for the cross-language tests.

const path = require('node:path');
const { execFile } = require('node:child_process');
const pg = require('pg');

const TOP = path.resolve(__dirname, '..', '..');

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
  await runPython(
    `import sys\nfrom hxstate.langgraph import HxSaver\nwith HxSaver.from_conn_string("", schema=sys.argv[1] if len(sys.argv) > 1 else ${JSON.stringify(schema)}) as s:\n    s.setup()\n`,
  );
}

/** A pool on the test cluster. */
function pool() {
  return new pg.Pool({ max: 4 });
}

/**
 * Remove every thread of a schema's tables (and their log streams).
 * @param {pg.Pool} p
 * @param {string} schema
 */
async function clear(p, schema) {
  const s = '"' + schema.replace(/"/g, '""') + '"';
  await p.query(`TRUNCATE ${s}.checkpoints, ${s}.writes, ${s}.owners, ${s}.runs`);
}

module.exports = { TOP, python, runPython, setupSchema, pool, clear };
