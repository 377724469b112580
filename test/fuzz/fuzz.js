'use strict';
// test/fuzz/fuzz.js: the fuzzer's driver.  test/fuzz/run starts a throwaway
// cluster and runs it; by hand, against any cluster where hxstate is
// installed (PGHOST, PGPORT, PGUSER name it; it creates and drops database
// hxfuzz):
//
//   node test/fuzz/fuzz.js --seed N [--count N] [--batch N] [--timeout-ms N]
//                          [--readme README.md] [--server label]
//
// --inject crash:N|hang:N|warning:N|error:N checks the fuzzer itself: input
// N gets a statement that kills its own backend with SIGSEGV (through COPY
// TO PROGRAM), sleeps, raises a WARNING, or raises XX000; the run must then
// report that input, minimised, and fail.
//
// It makes inputs from the seed (./inputs.js), sends them in batches to
// hx_fuzz_batch (./harness.sql), which applies each in a block of its own,
// and checks every outcome against these rules:
//
//   1. no crash: the connection never drops under a batch;
//   2. no hang: no input alone outlasts --confirm-ms;
//   3. no internal error (XX000), and every error an hxstate function or a
//      fired trigger raises has a SQLSTATE of README.md's SQLSTATE table
//      (read from README.md at each run, so the docs and the fuzzer agree);
//   4. jsonb's own input errors (before hxstate is called) only among
//      INPUT_ERRORS below;
//   5. no NULL result from a STRICT function with non-NULL arguments;
//   6. hx_diff's patch applies: hx_patch(old, hx_diff(old, new, mode)) = new;
//   7. no server WARNING (resource leaks are reported as warnings);
//   8. the fuzzer's own setup statements succeed (else the fuzzer is wrong);
//   9. a stream's state rebuilt by hx_stream_state_at is the state its row
//      had at that seq (replay scenarios: fz_replay_check, in tables.js,
//      raises HXFZ1 when it is not, or when rebuilding fails).
//
// Time limits: statement_timeout (--timeout-ms, 10 s) limits each batch.
// PostgreSQL arms that timer when a top-level statement starts, so a SET
// inside the harness could not limit one input; instead a batch that
// times out is split until the input is alone, which must then finish
// within --confirm-ms (30 s) or it is a hang.  Big inputs go in batches of
// their own.
//
// On a violation it narrows a failing batch down to the input, shrinks the
// input while the violation persists (./ast.js), prints the minimised SQL,
// checks it with psql in a fresh database, and exits 1.  Figures at the
// end: inputs per function, outcomes per SQLSTATE, elapsed time, inputs/s,
// the slowest inputs, the seed.  Timings are figures, never criteria.
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { Client } = require('pg');
const { encode, sqlText, quote, shrinks, stringShrinks, listShrinks, weight, sharedStringShrinks } = require('./ast');
const inputs = require('./inputs');
const tables = require('./tables');

// jsonb's input function refuses these before any hxstate code runs; they
// are core's errors about the text, not hxstate's (README.md's table lists
// 22P02 for pointers only, and not the others):
const INPUT_ERRORS = {
  '22P02': 'invalid_text_representation: malformed JSON text, a lone surrogate escape',
  '22P05': 'untranslatable_character: "\\u0000" in a JSON string',
  '22003': 'numeric_value_out_of_range: a number beyond numeric, as 1e200000 or 1e-16384',
  '54001': 'statement_too_complex: nesting deeper than the stack allows',
  '54000': 'program_limit_exceeded: a document larger than jsonb can hold',
};

// ---------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------

function options(argv) {
  const o = {
    seed: null, count: 100000, batch: 500, batchBytes: 4 << 20, timeoutMs: 10000, confirmMs: 30000,
    readme: path.join(__dirname, '..', '..', 'README.md'), server: 'server', pbig: 0.0005,
    maxIncidents: 10, minimiseMs: 180000, database: 'hxfuzz', inject: null,
  };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    switch (a) {
      case '--seed': o.seed = Number(v()) >>> 0; break;
      case '--count': o.count = Number(v()); break;
      case '--batch': o.batch = Number(v()); break;
      case '--timeout-ms': o.timeoutMs = Number(v()); break;
      case '--confirm-ms': o.confirmMs = Number(v()); break;
      case '--readme': o.readme = v(); break;
      case '--server': o.server = v(); break;
      case '--pbig': o.pbig = Number(v()); break;
      case '--minimise-ms': o.minimiseMs = Number(v()); break;
      case '--database': o.database = v(); break;
      case '--inject': o.inject = v(); break;
      default: throw new Error('unknown option ' + a);
    }
  }
  if (o.seed === null) o.seed = (Date.now() ^ (process.pid << 16)) >>> 0;
  return o;
}

// The SQLSTATEs README.md documents: the rows of its "SQLSTATEs" table
function documentedStates(readme) {
  const text = fs.readFileSync(readme, 'utf8');
  const at = text.search(/^#+\s*SQLSTATEs\s*$/m);
  if (at < 0) throw new Error(`${readme} has no SQLSTATEs section`);
  const states = new Map();
  for (const line of text.slice(at).split('\n').slice(1)) {
    if (/^#/.test(line)) break;
    const m = line.match(/^\|\s*`([0-9A-Z]{5})`\s*\|\s*([^|]*?)\s*\|/);
    if (m) states.set(m[1], m[2].replace(/`/g, ''));
  }
  if (states.size === 0) throw new Error(`no SQLSTATE rows in ${readme}`);
  return states;
}

// ---------------------------------------------------------------------
// Inputs on the wire
// ---------------------------------------------------------------------

// SQL text cannot hold NUL, and UTF-8 no lone surrogate
function sqlSafe(s) {
  return String(s).replace(/\u0000/g, '\\u0000').replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
}

// A statement's parts: SQL text, {lit} a string literal, {json} a JSON
// tree as a jsonb expression, {args} trigger arguments, {opt} parts the
// minimiser may drop
function renderParts(parts) {
  return parts.map((p) => {
    if (typeof p === 'string') return sqlSafe(p);
    if (p.lit !== undefined) return quote(sqlSafe(p.lit));
    if (p.json !== undefined) return sqlText(p.json) + '::' + p.cast;
    if (p.opt !== undefined) return renderParts(p.opt);
    return p.args.map((x) => quote(sqlSafe(x))).join(', ');
  }).join('');
}

function render(stmt) {
  return renderParts(stmt.parts);
}

function wire(x) {
  if (x.kind === 'sql') return ['sql', JSON.stringify(x.stmts.map(render)), x.stmts.map((s) => s.flag).join(''), null];
  return [x.kind, encode(x.args[0]), encode(x.args[1]), x.kind === 'diff' && x.mode !== undefined ? sqlSafe(x.mode) : null];
}

function wireBytes(w) {
  return w[1].length + w[2].length;
}

// ---------------------------------------------------------------------
// The connection
// ---------------------------------------------------------------------

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

function lostConnection(e) {
  return /Connection terminated|ECONNRESET|EPIPE|ECONNREFUSED|not queryable|closed the connection|terminating connection/i.test(String(e && e.message)) ||
    ['57P01', '57P02', '57P03', 'ECONNRESET', 'EPIPE', 'ECONNREFUSED', '08006', '08003'].includes(e && e.code);
}

class Db {
  constructor(o) {
    this.o = o;
    this.client = null;
    this.warnings = [];
    this.timeoutMs = o.timeoutMs;
    this.restarts = 0;
    this.batches = 0;
    this.batchNs = 0n; // wall time of the batch statements, a figure
  }

  async connect(database) {
    const deadline = Date.now() + 180000;
    for (;;) {
      const c = new Client({ database });
      c.on('error', () => {}); // a dropped connection shows in the query
      c.on('notice', (n) => { if (n.severity === 'WARNING') this.warnings.push(n.message); });
      try {
        await c.connect();
        await c.query(`SET statement_timeout = ${this.timeoutMs}`);
        await c.query('SET client_min_messages = warning');
        return c;
      } catch (e) {
        c.end().catch(() => {});
        if (Date.now() > deadline) throw e;
        await sleep(250);
      }
    }
  }

  async open() {
    this.client = await this.connect(this.o.database);
  }

  async reopen() {
    if (this.client) this.client.end().catch(() => {});
    this.client = null;
    this.restarts++;
    await sleep(200);
    await this.open();
  }

  async setTimeout(ms) {
    this.timeoutMs = ms;
    await this.client.query(`SET statement_timeout = ${ms}`);
  }

  // Run wires: {rows} or {bad: 'crash'|'timeout'|'warning'|'escaped', code}
  async batch(wires) {
    const cols = [[], [], [], []];
    for (const w of wires) w.forEach((x, i) => cols[i].push(x));
    this.warnings = [];
    let res;
    const t0 = process.hrtime.bigint();
    try {
      this.batches++;
      res = await this.client.query('SELECT i, j, outcome, code, message, ms FROM hx_fuzz_batch($1::text[], $2::text[], $3::text[], $4::text[])', cols);
      this.batchNs += process.hrtime.bigint() - t0;
    } catch (e) {
      this.batchNs += process.hrtime.bigint() - t0;
      if (e.code === '57014') return { bad: 'timeout' };
      if (lostConnection(e) || !this.client) {
        await this.reopen();
        return { bad: 'crash', message: e.message };
      }
      return { bad: 'escaped', code: e.code, message: e.message };
    }
    const rows = res.rows;
    if (this.warnings.length) return { rows, bad: 'warning', message: this.warnings.join('; ') };
    return { rows };
  }
}

// ---------------------------------------------------------------------
// Judging outcomes
// ---------------------------------------------------------------------

class Judge {
  constructor(documented) {
    this.documented = documented;
  }

  // The violations of one input's rows: [{sig, detail, j}]
  violations(x, rows) {
    const out = [];
    for (const r of rows) {
      const v = this.rowViolation(x, r);
      if (v) out.push({ ...v, j: r.j });
    }
    return out;
  }

  rowViolation(x, r) {
    const what = `${r.code} ${r.message}`;
    if (r.outcome === 'ok') return null;
    if (r.outcome === 'null') return { sig: `${x.kind}:null`, detail: 'a STRICT function returned NULL' };
    if (r.outcome === 'roundtrip') return { sig: 'diff:roundtrip', detail: r.message };
    if (r.outcome === 'roundtrip-error') {
      return ['54001', '54000'].includes(r.code) ? null : { sig: `diff:roundtrip-error:${r.code}`, detail: 'hx_patch refused hx_diff\'s patch: ' + what };
    }
    if (r.outcome === 'input') {
      return INPUT_ERRORS[r.code] ? null : { sig: `input:${r.code}`, detail: 'jsonb input error not in INPUT_ERRORS: ' + what };
    }
    // an error
    if (r.code === 'XX000') return { sig: `${x.kind}:XX000`, detail: 'internal error: ' + what };
    if (r.code === 'HXFZ1') return { sig: 'replay', detail: 'a replayed state is not the recorded one: ' + r.message };
    if (x.kind !== 'sql') {
      return this.documented.has(r.code) ? null : { sig: `${x.kind}:${r.code}`, detail: 'SQLSTATE not in README.md: ' + what };
    }
    const flag = x.stmts[r.j - 1].flag;
    if (flag === 's') return { sig: `setup:${r.code}`, detail: 'a setup statement of the fuzzer failed (fix the fuzzer): ' + what };
    if (flag === 'c') return null;
    return this.documented.has(r.code) ? null : { sig: `sql:${r.code}`, detail: 'SQLSTATE not in README.md: ' + what };
  }
}

// ---------------------------------------------------------------------
// Shrinking
// ---------------------------------------------------------------------

function inputWeight(x) {
  if (x.kind !== 'sql') return weight(x.args[0]) + weight(x.args[1]) + (x.mode ? x.mode.length : 0);
  const partsWeight = (parts) => parts.reduce((w, p) => {
    if (typeof p === 'string') return w;
    if (p.lit !== undefined) return w + 1 + p.lit.length;
    if (p.json !== undefined) return w + weight(p.json);
    if (p.opt !== undefined) return w + 5 + partsWeight(p.opt);
    return w + p.args.reduce((a, b) => a + 2 + b.length, 0);
  }, 0);
  return x.stmts.reduce((w, s) => w + 10 + partsWeight(s.parts), 0);
}

// Smaller variants of a statement's parts
function* partsShrinks(parts) {
  for (let k = 0; k < parts.length; k++) {
    const p = parts[k];
    const alt = [];
    if (p && p.json !== undefined) for (const v of shrinks(p.json)) alt.push({ json: v, cast: p.cast });
    else if (p && p.lit !== undefined) for (const v of stringShrinks(p.lit)) alt.push({ lit: v });
    else if (p && p.opt !== undefined) {
      alt.push('');
      for (const q of partsShrinks(p.opt)) alt.push({ opt: q });
    } else if (p && p.args) {
      for (const as of listShrinks(p.args)) alt.push({ args: as });
      p.args.forEach((a, ai) => { for (const v of stringShrinks(a)) { const as = p.args.slice(); as[ai] = v; alt.push({ args: as }); } });
    }
    for (const q of alt) {
      const c = parts.slice();
      c[k] = q;
      yield c;
    }
  }
}

// Smaller variants of an input
function* candidates(x) {
  if (x.kind !== 'sql') {
    for (const args of sharedStringShrinks(x.args)) yield { ...x, args };
    for (const k of [1, 0]) {
      for (const v of shrinks(x.args[k])) {
        const args = x.args.slice();
        args[k] = v;
        yield { ...x, args };
      }
    }
    if (x.mode !== undefined) {
      yield { ...x, mode: undefined };
      for (const m of stringShrinks(x.mode)) yield { ...x, mode: m };
    }
    return;
  }
  for (const stmts of listShrinks(x.stmts)) if (stmts.length) yield { ...x, stmts };
  for (let i = 0; i < x.stmts.length; i++) {
    for (const parts of partsShrinks(x.stmts[i].parts)) {
      const stmts = x.stmts.slice();
      stmts[i] = { ...x.stmts[i], parts };
      yield { ...x, stmts };
    }
  }
}

// ---------------------------------------------------------------------
// Reproducers
// ---------------------------------------------------------------------

function tableDdl(name) {
  const t = tables.table(name);
  if (!t) return '';
  return (t.needs || []).map((n) => tables.table(n).ddl + '\n').join('') + t.ddl + '\n';
}

function reproducer(x, sig, o) {
  const head = `-- hxstate fuzz: seed ${o.seed}, input #${x.id} (${x.label}), minimised; violation ${sig}\n` +
    '-- run in an empty database: psql -X -f this.sql\n\\set VERBOSITY verbose\nCREATE EXTENSION IF NOT EXISTS hxstate;\n';
  if (x.kind !== 'sql') {
    const a = sqlText(x.args[0]) + '::jsonb';
    const b = sqlText(x.args[1]) + '::jsonb';
    if (x.kind === 'diff') {
      const m = x.mode !== undefined ? ', ' + quote(sqlSafe(x.mode)) : '';
      let s = `SELECT hx_diff(${a}, ${b}${m});\n`;
      if (/roundtrip/.test(sig)) s += `SELECT hx_patch(${a}, hx_diff(${a}, ${b}${m})) = ${b} AS round_trip;\n`;
      return head + s;
    }
    return head + `SELECT hx_${x.kind}(${a}, ${b});\n`;
  }
  const text = x.stmts.map(render).join('\n');
  let s = head + (/fz_/.test(text) ? tables.COMMON : '');
  const used = x.table ? [x.table] : tables.TABLES.map((t) => t.name).filter((n) => new RegExp(`\\b${n}\\b`).test(text));
  for (const n of used) s += tableDdl(n);
  s += '\\set ON_ERROR_ROLLBACK on\nBEGIN;\n';
  for (const st of x.stmts) s += render(st) + ';\n';
  s += 'ROLLBACK;\n';
  return s;
}

// Run a reproducer with psql in a fresh database; the tail of its output
function checkWithPsql(sql, file, timeoutMs) {
  fs.writeFileSync(file, sql);
  const env = { ...process.env, PGOPTIONS: `-c statement_timeout=${timeoutMs}` };
  spawnSync('psql', ['-X', '-q', '-d', 'postgres', '-c', 'DROP DATABASE IF EXISTS hxfuzz_repro WITH (FORCE)', '-c', 'CREATE DATABASE hxfuzz_repro'], { encoding: 'utf8' });
  const p = spawnSync('psql', ['-X', '-d', 'hxfuzz_repro', '-f', file], { encoding: 'utf8', env, timeout: 10 * timeoutMs, maxBuffer: 64 << 20 });
  const out = ((p.stdout || '') + (p.stderr || '')).split('\n').filter((l) => /ERROR|FATAL|PANIC|server closed|terminated|WARNING|round_trip|^ [tf]$/.test(l));
  return out.slice(-6).join('\n');
}

// ---------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------

class Run {
  constructor(o, db, judge) {
    this.o = o;
    this.db = db;
    this.judge = judge;
    this.perLabel = new Map();
    this.msPerLabel = new Map();
    this.fnOutcomes = new Map();
    this.stmtOutcomes = new Map();
    this.violations = []; // {x, sig, detail}: the first ones of each signature
    this.bySig = new Map();
    this.nviolations = 0;
    this.incidents = 0;
    this.slowest = [];
    this.inputs = 0;
    this.statements = 0;
    this.big = 0;
  }

  count(map, k) { map.set(k, (map.get(k) || 0) + 1); }

  tally(x, rows) {
    this.inputs++;
    if (x.big) this.big++;
    this.count(this.perLabel, x.label);
    let ms = 0;
    for (const r of rows) {
      ms += r.ms || 0;
      if (x.kind === 'sql') {
        this.statements++;
        this.count(this.stmtOutcomes, r.outcome === 'ok' ? 'ok' : `${r.code}${x.stmts[r.j - 1].flag === 'c' ? ' (core statement)' : ''}`);
      } else {
        this.count(this.fnOutcomes, r.outcome === 'ok' ? 'ok' : r.outcome === 'error' ? r.code : `${r.outcome}${r.code ? ' ' + r.code : ''}`);
      }
    }
    this.slow(x, ms);
    this.msPerLabel.set(x.label, (this.msPerLabel.get(x.label) || 0) + ms);
    for (const v of this.judge.violations(x, rows)) this.violation(x, v.sig, v.detail + (x.kind === 'sql' ? ` (statement ${v.j})` : ''));
  }

  slow(x, ms) {
    if (this.slowest.length < 5 || ms > this.slowest[this.slowest.length - 1].ms) {
      this.slowest.push({ id: x.id, label: x.label, ms, bytes: wireBytes(wire(x)) });
      this.slowest.sort((a, b) => b.ms - a.ms);
      this.slowest.length = Math.min(this.slowest.length, 5);
    }
  }

  // Every violation is counted; the first few of each kind are kept
  violation(x, sig, detail) {
    const n = (this.bySig.get(sig) || 0) + 1;
    this.bySig.set(sig, n);
    this.nviolations++;
    if (n <= 3) this.violations.push({ x, sig, detail });
    if (n <= 3 && this.violations.length <= 30) console.log(`VIOLATION ${sig}: input #${x.id} (${x.label}): ${detail}`);
  }

  // Run inputs, narrowing a batch that crashes, hangs, warns or escapes
  // the harness down to its inputs
  async run(xs, wires) {
    const res = await this.db.batch(wires);
    if (res.rows) {
      const by = new Map();
      for (const r of res.rows) {
        if (!by.has(r.i)) by.set(r.i, []);
        by.get(r.i).push(r);
      }
      xs.forEach((x, k) => this.tally(x, by.get(k + 1) || []));
      if (!res.bad) return;
    }
    // a crash, a timeout, a warning or an escaped error
    if (xs.length === 1) {
      if (res.bad === 'timeout') {
        // alone, with a longer limit: a hang or only a slow input?
        await this.db.setTimeout(this.o.confirmMs);
        const again = await this.db.batch(wires);
        await this.db.setTimeout(this.o.timeoutMs);
        if (again.rows && !again.bad) {
          this.tally(xs[0], again.rows);
          return;
        }
        if (again.bad !== 'timeout') return this.run(xs, wires); // it warned or crashed this time
      }
      this.incidents++;
      if (!res.rows) { this.inputs++; this.count(this.perLabel, xs[0].label); this.count(xs[0].kind === 'sql' ? this.stmtOutcomes : this.fnOutcomes, res.bad.toUpperCase()); }
      this.violation(xs[0], res.bad === 'escaped' ? `escaped:${res.code}` : res.bad,
        res.bad === 'timeout' ? `no result within ${this.o.confirmMs} ms` : (res.message || ''));
      return;
    }
    if (this.incidents >= this.o.maxIncidents) throw new Error('too many crashes or hangs; stopping');
    const half = xs.length >> 1;
    if (res.rows) {
      // the rows are counted; find the input that warned without counting again
      await this.probe(xs.slice(0, half), wires.slice(0, half), res.bad);
      await this.probe(xs.slice(half), wires.slice(half), res.bad);
      return;
    }
    await this.run(xs.slice(0, half), wires.slice(0, half));
    await this.run(xs.slice(half), wires.slice(half));
  }

  async probe(xs, wires, bad) {
    const res = await this.db.batch(wires);
    if (res.bad !== bad) return;
    if (xs.length === 1) {
      this.incidents++;
      this.violation(xs[0], bad, res.message || '');
      return;
    }
    const half = xs.length >> 1;
    await this.probe(xs.slice(0, half), wires.slice(0, half), bad);
    await this.probe(xs.slice(half), wires.slice(half), bad);
  }

  // The signatures input x violates, run alone
  async signatures(x) {
    const w = [wire(x)];
    let res = await this.db.batch(w);
    if (res.bad === 'timeout') {
      await this.db.setTimeout(this.o.confirmMs);
      res = await this.db.batch(w);
      await this.db.setTimeout(this.o.timeoutMs);
    }
    const sigs = new Set();
    if (res.bad) sigs.add(res.bad === 'escaped' ? `escaped:${res.code}` : res.bad);
    if (res.rows) for (const v of this.judge.violations(x, res.rows)) sigs.add(v.sig);
    return sigs;
  }

  async minimise(x, sig) {
    const deadline = Date.now() + this.o.minimiseMs;
    let best = x;
    let bestWeight = inputWeight(x);
    let tries = 0;
    let improved = true;
    while (improved && Date.now() < deadline) {
      improved = false;
      for (const c of candidates(best)) {
        if (Date.now() > deadline) break;
        const w = inputWeight(c);
        if (w >= bestWeight) continue;
        tries++;
        if ((await this.signatures(c)).has(sig)) {
          best = c;
          bestWeight = w;
          improved = true;
          break;
        }
      }
    }
    return { best, tries };
  }
}

// Input i of the run, or the statement --inject puts in its place
const INJECT = {
  crash: "DO $$ BEGIN EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', 'kill -SEGV ' || pg_backend_pid()); END $$",
  hang: 'SELECT pg_sleep(3600)',
  warning: "DO $$ BEGIN RAISE WARNING 'injected warning'; END $$",
  error: "DO $$ BEGIN RAISE SQLSTATE 'XX000' USING MESSAGE = 'injected internal error'; END $$",
};

function input(o, i) {
  const x = inputs.input(o.seed, i, o.pbig);
  const m = o.inject && o.inject.match(/^(\w+):(\d+)$/);
  if (m && Number(m[2]) === i && INJECT[m[1]]) {
    return {
      id: i, kind: 'sql', label: 'injected ' + m[1], table: null,
      stmts: [inputs.S('f', 'SELECT 1'), inputs.S('f', INJECT[m[1]]), inputs.S('f', 'SELECT ', inputs.json({ a: [1, 2, 3] }))],
    };
  }
  return x;
}

function fmt(n) {
  return n.toLocaleString('en-US');
}

async function main() {
  const o = options(process.argv);
  const documented = documentedStates(o.readme);
  console.log(`fuzz: seed ${o.seed}, ${fmt(o.count)} inputs, server ${o.server}; ${documented.size} SQLSTATEs documented in ${path.relative(process.cwd(), o.readme) || o.readme}`);

  // a fresh database with the extension, the harness and the table pool
  const admin = new Client({ database: 'postgres' });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${o.database} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${o.database}`);
  await admin.end();
  const db = new Db(o);
  await db.open();
  await db.client.query('CREATE EXTENSION hxstate');
  await db.client.query(fs.readFileSync(path.join(__dirname, 'harness.sql'), 'utf8'));
  await db.client.query(tables.setupSql());

  const run = new Run(o, db, new Judge(documented));
  const started = process.hrtime.bigint();
  let next = 0;
  let pending = null;
  let reported = 0;
  let stopped = null;
  const makeBatch = () => {
    const xs = [];
    const ws = [];
    let bytes = 0;
    while (next < o.count && xs.length < o.batch) {
      const x = input(o, next);
      const w = wire(x);
      if (xs.length && (x.big || bytes + wireBytes(w) > o.batchBytes)) break; // big inputs go alone
      next++;
      xs.push(x);
      ws.push(w);
      bytes += wireBytes(w);
      if (x.big) break;
    }
    return [xs, ws];
  };
  try {
    while (next < o.count) {
      const [xs, ws] = makeBatch();
      if (pending) await pending;
      pending = run.run(xs, ws);
      if (next - reported >= o.count / 10) {
        reported = next;
        const s = Number(process.hrtime.bigint() - started) / 1e9;
        console.log(`fuzz: ${fmt(next)} inputs made, ${s.toFixed(1)} s`);
      }
    }
    await pending;
  } catch (e) {
    stopped = e.message;
    console.log(`fuzz: stopped: ${e.message}`);
  }
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  const batches = db.batches;
  const batchSeconds = Number(db.batchNs) / 1e9;

  // minimise the first input of each kind of violation
  const reproducers = [];
  const seen = new Set();
  for (const v of run.violations) {
    if (seen.has(v.sig) || seen.size >= 6) continue;
    seen.add(v.sig);
    console.log(`\nfuzz: minimising input #${v.x.id} (${v.sig}) ...`);
    const t0 = Date.now();
    const { best, tries } = await run.minimise(v.x, v.sig);
    const sql = reproducer(best, v.sig, o);
    const file = path.join(process.env.TMPDIR || '/tmp', `hxstate-fuzz-${o.seed}-${v.x.id}.sql`);
    const psql = checkWithPsql(sql, file, o.confirmMs);
    reproducers.push({ v, sql, file, tries, ms: Date.now() - t0, psql });
  }

  // figures
  const label = (k) => (documented.has(k) ? `${k} ${documented.get(k)}` : INPUT_ERRORS[k] ? `${k} ${INPUT_ERRORS[k].split(':')[0]}` : k);
  const table = (title, map, name = (k) => k) => {
    console.log(title);
    [...map.entries()].sort((a, b) => b[1] - a[1]).forEach(([k, n]) => console.log(`  ${name(k).padEnd(58)} ${fmt(n).padStart(10)}`));
  };
  console.log(`\n== fuzz figures (seed ${o.seed}, server ${o.server})`);
  console.log('inputs per function (and their time in the server, a figure):');
  [...run.perLabel.entries()].sort((a, b) => b[1] - a[1]).forEach(([k, n]) =>
    console.log(`  ${k.padEnd(58)} ${fmt(n).padStart(10)} ${((run.msPerLabel.get(k) || 0) / 1000).toFixed(1).padStart(8)} s`));
  table('outcomes of hx_patch, hx_merge and hx_diff calls, per SQLSTATE ("input" = jsonb\'s own input function):', run.fnOutcomes,
    (k) => k.replace(/^input (\S+)/, (m, c) => `input ${label(c)}`).replace(/^([0-9A-Z]{5})$/, (m, c) => label(c)));
  table(`outcomes of the ${fmt(run.statements)} statements of trigger scenarios and other functions, per SQLSTATE:`, run.stmtOutcomes,
    (k) => k.replace(/^([0-9A-Z]{5})/, (m, c) => label(c)));
  console.log('slowest inputs (ms, figures only):');
  for (const s of run.slowest) console.log(`  #${s.id} ${s.label}, ${fmt(s.bytes)} bytes: ${s.ms.toFixed(1)} ms`);
  const inside = [...run.msPerLabel.values()].reduce((a, b) => a + b, 0) / 1000;
  console.log(`inputs: ${fmt(run.inputs)} (${fmt(run.big)} big), elapsed ${elapsed.toFixed(1)} s, ${fmt(Math.round(run.inputs / elapsed))} inputs/s, server restarts ${db.restarts}`);
  console.log(`batches: ${fmt(batches)}, ${batchSeconds.toFixed(1)} s waiting for them (${inside.toFixed(1)} s inside the inputs)`);
  console.log(`seed: ${o.seed}`);

  for (const r of reproducers) {
    console.log(`\n== violation ${r.v.sig}: ${r.v.detail}`);
    console.log(`-- minimised in ${r.tries} tries, ${(r.ms / 1000).toFixed(1)} s; written to ${r.file}`);
    console.log(r.sql.length > 6000 ? r.sql.slice(0, 6000) + `\n... (${fmt(r.sql.length)} characters, see the file)` : r.sql);
    console.log(`-- psql in a fresh database says:\n${r.psql || '(nothing)'}`);
  }
  if (run.bySig.size) table('\nviolations per kind:', run.bySig);
  const failed = run.nviolations > 0 || stopped !== null;
  console.log(`\nfuzz: ${failed ? 'FAILED' : 'passed'}: ${fmt(run.nviolations)} violations in ${fmt(run.inputs)} inputs (seed ${o.seed}; again: bash test/fuzz/run --seed ${o.seed} --count ${o.count}${o.server === 'cassert' ? ' --cassert' : ''})`);
  await db.client.end().catch(() => {});
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.error('fuzz: ' + (e.stack || e));
  process.exit(2);
});
