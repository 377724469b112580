'use strict';
// The README stays true to the code:
//   - its "Try it" comes first: within the README's first 60 lines, the
//     commands that build and install the extension, the SQL a reader
//     pastes into `psql -q` and what psql then prints; the test pastes that
//     SQL into psql, in a new database, and psql must print exactly that;
//   - its session example is docs/sessions.sql (the sessions table that the
//     demo, the benchmark and the reliability runs load) and then exactly
//     what test/sql/sessions.sql runs as a test;
//   - its row-level security recipe is what test/sql/security.sql tests;
//   - docs/agent_session.dot is what hx_machine_dot('agent_session') returns;
//   - every function of the extension has a reference row with its signature;
//   - every SQLSTATE the C code raises is in the SQLSTATE table.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { Client } = require('pg');
const { freshDatabase } = require('./helpers');

const top = path.resolve(__dirname, '../..');
const readme = fs.readFileSync(path.join(top, 'README.md'), 'utf8');

let db;
before(async () => { db = await freshDatabase('hx_docs'); });
after(async () => { await db.end(); });

/** The statements of test/sql/<file> between its \\i of docs/sessions.sql and end. */
function testedStatements(file, end) {
  const sql = fs.readFileSync(path.join(top, 'test/sql', file), 'utf8');
  const include = '\\i docs/sessions.sql\n';
  assert.ok(sql.includes(include), `test/sql/${file} includes docs/sessions.sql`);
  return sql.slice(sql.indexOf(include) + include.length, sql.indexOf(end));
}

/** The first SQL block of the README after the marker <!-- name. */
function readmeBlock(name) {
  const marker = readme.indexOf(`<!-- ${name}`);
  assert.ok(marker > 0, `README has the ${name} marker`);
  const start = readme.indexOf('```sql\n', marker) + '```sql\n'.length;
  return readme.slice(start, readme.indexOf('```', start));
}

/** The text of the fenced block of the README that opens at or after offset: {body, end, lang}. */
function fencedBlock(from) {
  const open = /^```(\w*)\n/m.exec(readme.slice(from));
  assert.ok(open, 'a fenced block follows');
  const start = from + open.index + open[0].length;
  const close = readme.indexOf('\n```\n', start - 1);
  return { lang: open[1], body: readme.slice(start, close + 1), end: close + '\n```\n'.length };
}

/** The 1-based line of the README at offset. */
const lineAt = (offset) => readme.slice(0, offset).split('\n').length;

test("the README's Try it, in its first 60 lines, prints in psql what it shows", async () => {
  const heading = readme.indexOf('\n## Try it\n');
  const marker = readme.indexOf('<!-- try-it');
  assert.ok(heading > 0 && marker > heading, 'README has "## Try it" and the try-it marker after it');
  // the commands: build and install, then psql -q on a database of its own
  const sh = fencedBlock(heading);
  assert.equal(sh.lang, 'sh');
  assert.ok(sh.end <= marker, 'the commands come before the SQL');
  const commands = sh.body.split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean);
  assert.deepEqual(commands, ['make', 'sudo make install', 'createdb hx_try && psql -q hx_try']);
  // the SQL, then what psql prints, both within the first 60 lines
  const sql = fencedBlock(marker);
  assert.equal(sql.lang, 'sql');
  const shown = fencedBlock(sql.end);
  assert.equal(shown.lang, '');
  assert.ok(lineAt(shown.end - 1) <= 60, `the Try it ends on line ${lineAt(shown.end - 1)}, after line 60`);
  assert.match(sql.body, /^CREATE EXTENSION hxstate;\n/, 'the SQL starts with CREATE EXTENSION');

  // pasted into psql -q in a new database (the reader's hx_try), as written
  const admin = new Client({ database: 'postgres' });
  await admin.connect();
  try {
    await admin.query('DROP DATABASE IF EXISTS hx_docs_try WITH (FORCE)');
    await admin.query('CREATE DATABASE hx_docs_try');
    const bindir = execFileSync(process.env.PG_CONFIG || 'pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
    // stdout and stderr as a terminal shows them: one stream, in order
    const printed = execFileSync('sh', ['-c', '"$0" -X -q -d hx_docs_try 2>&1', path.join(bindir, 'psql')], {
      input: sql.body,
      encoding: 'utf8',
      env: { ...process.env, PGOPTIONS: '-c lc_messages=C' },
    });
    const lines = (text) => text.split('\n').map((l) => l.trimEnd()).join('\n').trim();
    assert.equal(lines(printed), lines(shown.body));
  } finally {
    await admin.query('DROP DATABASE IF EXISTS hx_docs_try WITH (FORCE)');
    await admin.end();
  }
});

test('the README session example is docs/sessions.sql and then test/sql/sessions.sql', () => {
  // the README shows the table of docs/sessions.sql, then the statements
  // that test/sql/sessions.sql runs after including it
  const ddl = fs.readFileSync(path.join(top, 'docs/sessions.sql'), 'utf8');
  const table = ddl.slice(ddl.indexOf('CREATE TABLE sessions'));
  const body = testedStatements('sessions.sql', '\nDROP TABLE sessions');
  assert.equal(readmeBlock('session-example').trim(), `${table.trim()}\n\n${body.trim()}`);
});

test('the README security recipe is what test/sql/security.sql tests', () => {
  const body = testedStatements('security.sql', '\n-- the runtime writes every session');
  assert.equal(readmeBlock('security-example').trim(), body.trim());
});

test('docs/agent_session.dot is hx_machine_dot(agent_session)', async () => {
  const { rows } = await db.query("SELECT hx_machine_dot('agent_session') AS dot");
  const file = fs.readFileSync(path.join(top, 'docs/agent_session.dot'), 'utf8');
  assert.equal(file.trim(), rows[0].dot.trim());
});

test('every function of the extension has a README reference row', async () => {
  const { rows } = await db.query(`
    SELECT p.proname, pg_get_function_arguments(p.oid) AS args,
           pg_get_function_result(p.oid) AS result, p.prorettype = 'trigger'::regtype AS is_trigger
      FROM pg_proc p
      JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
      JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'hxstate'`);
  assert.ok(rows.length >= 14);
  const short = (t) => t.replace(/\bcharacter varying\b/g, 'varchar');
  for (const f of rows) {
    if (f.is_trigger) {
      assert.ok(readme.includes(`| \`${f.proname}()\``), `trigger function ${f.proname} has a row`);
      continue;
    }
    // "hx_diff(old jsonb, new jsonb, arrays text DEFAULT 'append') → jsonb"
    let sig = `${f.proname}(${short(f.args)})`;
    if (!f.result.startsWith('TABLE') && !/\bOUT\b/.test(f.args)) sig += ` → ${short(f.result)}`;
    // defaults as the README writes them: without core's casts
    sig = sig.replace(/('[^']*')::(text|name)/g, '$1').replace(/DEFAULT NULL::\w+/g, 'DEFAULT NULL');
    assert.ok(readme.includes(`\`${sig}`), `README has a row for ${sig}`);
  }
});

test('every SQLSTATE raised in src/ is in the README table', () => {
  // the server's own list of SQLSTATEs, wherever its headers are
  const includedir = execFileSync(process.env.PG_CONFIG || 'pg_config', ['--includedir-server'], { encoding: 'utf8' }).trim();
  const errcodesH = path.join(includedir, 'utils', 'errcodes.h');
  const codes = {};
  for (const m of fs.readFileSync(errcodesH, 'utf8').matchAll(
    /#define (ERRCODE_\w+) MAKE_SQLSTATE\('(.)','(.)','(.)','(.)','(.)'\)/g)) {
    codes[m[1]] = m.slice(2).join('');
  }
  const header = fs.readFileSync(path.join(top, 'src/hxstate.h'), 'utf8');
  for (const m of header.matchAll(/#define (ERRCODE_HX_\w+)\s+MAKE_SQLSTATE\('(.)','(.)','(.)','(.)','(.)'\)/g)) {
    codes[m[1]] = m.slice(2).join('');
  }
  for (const m of header.matchAll(/#define (ERRCODE_HX_\w+)\s+(ERRCODE_\w+)/g)) codes[m[1]] = codes[m[2]];

  const used = new Set();
  for (const file of fs.readdirSync(path.join(top, 'src')).filter((f) => f.endsWith('.c'))) {
    const src = fs.readFileSync(path.join(top, 'src', file), 'utf8');
    for (const m of src.matchAll(/errcode\((ERRCODE_\w+)\)/g)) used.add(m[1]);
  }
  assert.ok(used.size >= 15, `found ${used.size} error codes`);
  const table = readme.slice(readme.indexOf('### SQLSTATEs'), readme.indexOf('## Performance'));
  for (const name of used) {
    assert.ok(codes[name], `${name} is a known SQLSTATE`);
    assert.ok(table.includes(`| \`${codes[name]}\``), `${name} (${codes[name]}) is in the README's table`);
  }
});
