'use strict';
// The README stays true to the code:
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
