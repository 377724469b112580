'use strict';
// bench/bench.js: the measurements of bench/run, in the throwaway cluster
// that bench/run starts (test/lib/cluster.sh sets PGHOST, PGPORT, PGUSER and
// PGPASSWORD) after bench/setup.sql has built the documents.
//
// For every document size, every contender is timed REPS times, the
// contenders taking turns (the order rotates, and reverses every other
// round, so that no contender always runs first or after the same one).
// A PostgreSQL sample is one call of bench_sample(), which times n calls
// in a plpgsql loop with clock_timestamp(); a Node sample times n calls of
// fast-json-patch's compare() with process.hrtime.  n is calibrated per
// contender so that a sample lasts about SAMPLE_MS.  Each reported time is
// the median of the REPS samples, in microseconds per call.
const os = require('node:os');
const { Client } = require('pg');
const jsonpatch = require('fast-json-patch');

const REPS = Number(process.env.HX_BENCH_REPS || 11);
const SAMPLE_MS = Number(process.env.HX_BENCH_SAMPLE_MS || 60);
const DATABASE = process.env.HX_BENCH_DB || 'hxstate_bench';

// Every contender, with what one call of it does
const CONTENDERS = {
  loop: 'plpgsql loop overhead alone: r := pg_column_size(a)',
  hx_patch: `hx_patch(a, '[{"op": "replace", "path": "/meta/status", "value": "running"}]')`,
  jsonb_set: `jsonb_set(a, '{meta,status}', '"running"')`,
  hx_merge: `hx_merge(a, '[{"op": "append", "path": "/messages", "items": [item]}, ` +
    `{"op": "replace", "path": "/meta/status", "value": "running"}]')`,
  core_merge: `jsonb_set(jsonb_insert(a, '{messages,-1}', item, true), '{meta,status}', '"running"')`,
  hx_diff_edit: 'hx_diff(a, a2)',
  hx_diff_same: 'hx_diff(a, acopy)',
  walk: 'a = acopy (jsonb_eq: compareJsonbContainers walks both documents)',
  hx_diff_scaled: 'hx_diff(a, ascaled)',
  walk_scaled: 'a = ascaled',
  fjp: 'Node: jsonpatch.compare(A, A2) on objects parsed once',
  st_detoast: 'jsonb_typeof(stored a): TOAST fetch + decompression alone',
  st_hx_patch: 'hx_patch(stored a, the same one-op patch)',
  st_jsonb_set: `jsonb_set(stored a, '{meta,status}', '"running"')`,
  st_hx_merge: 'hx_merge(stored a, the same writes)',
  st_core_merge: `jsonb_set(jsonb_insert(stored a, '{messages,-1}', item, true), '{meta,status}', '"running"')`,
};

const BIG = new Set(['450 kB', '7 MB']);

// The comparisons: ratio = A / B, compared with the target
const CASES = [
  {
    id: 'a', form: 'in memory', A: 'hx_patch', B: 'jsonb_set', op: '<=', target: 1.2,
    title: 'one-op replace of /meta/status: hx_patch vs jsonb_set',
  },
  {
    id: 'b', form: 'in memory', A: 'hx_merge', B: 'core_merge', op: '<=', target: 1.0,
    title: 'append one message + replace /meta/status: hx_merge vs jsonb_set(jsonb_insert(...))',
  },
  {
    id: 'c', form: 'in memory', A: 'hx_diff_edit', B: 'walk', op: '<=', target: 1.5,
    title: 'hx_diff(a, a2), a2 = a + one message + changed /meta/status, vs the walk a = acopy',
  },
  {
    id: 'd', form: 'in memory', A: 'hx_diff_same', B: 'walk', op: '<=', target: 1.5,
    title: 'hx_diff(a, acopy), equal documents, vs the walk a = acopy',
  },
  {
    id: 'd2', form: 'in memory', A: 'hx_diff_scaled', B: 'walk_scaled', op: '<=', target: 1.5,
    title: 'case d with no byte-identical subtree: ascaled = a with every "tokens" number written N.0',
  },
  {
    id: 'e', form: 'in memory', A: 'fjp', B: 'hx_diff_edit', op: '>=', target: 3, only: BIG,
    title: 'fast-json-patch compare(A, A2) in Node vs hx_diff(a, a2): ratio = fast-json-patch / hx_diff',
  },
  {
    id: 'a*', form: 'as stored', A: 'st_hx_patch', B: 'st_jsonb_set', op: '<=', target: 1.2,
    title: 'case a on the stored document (compressed; TOASTed above 2 kB)',
  },
  {
    id: 'b*', form: 'as stored', A: 'st_hx_merge', B: 'st_core_merge', op: '<=', target: 1.0,
    title: 'case b on the stored document (compressed; TOASTed above 2 kB)',
  },
];

function median(xs) {
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function fmtUs(us) {
  if (us >= 1000) return us.toFixed(0);
  if (us >= 10) return us.toFixed(1);
  return us.toFixed(2);
}

function fmtRatio(r) {
  return r >= 100 ? r.toFixed(0) : r >= 10 ? r.toFixed(1) : r.toFixed(3);
}

function fmtBytes(b) {
  if (b >= 1024 * 1024) return `${(b / 1024 / 1024).toFixed(2)} MiB`;
  if (b >= 1024) return `${(b / 1024).toFixed(1)} KiB`;
  return `${b} B`;
}

function table(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i])))
    .join(' | ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('-+-'));
  for (const r of rows) console.log(line(r));
}

async function main() {
  const db = new Client({ database: DATABASE });
  await db.connect();
  const q = async (sql, params) => (await db.query(sql, params)).rows;

  const [env] = await q(`SELECT version() AS pg,
      (SELECT extversion FROM pg_extension WHERE extname = 'hxstate') AS hx,
      current_setting('default_toast_compression') AS compression,
      current_setting('shared_buffers') AS shared_buffers, current_setting('fsync') AS fsync`);
  console.log(`PostgreSQL: ${env.pg}`);
  console.log(`hxstate ${env.hx}; fsync=${env.fsync}, shared_buffers=${env.shared_buffers}, ` +
    `default_toast_compression=${env.compression}`);
  console.log(`Node ${process.version}, fast-json-patch ${require('fast-json-patch/package.json').version}; ` +
    `CPU: ${os.cpus()[0].model} x ${os.cpus().length}`);
  console.log(`${REPS} samples per contender and size, about ${SAMPLE_MS} ms each, contenders alternating; ` +
    'times are medians, in µs per call');

  const docs = await q(`SELECT d.label, d.ord, d.nmsg, d.bytes, pg_column_size(s.a) AS stored,
      pg_column_compression(s.a) AS method, octet_length(d.a::text) AS text,
      pg_column_size(d.a2::text::jsonb) AS bytes2
      FROM bench_docs d JOIN bench_stored s USING (label) ORDER BY d.ord`);
  console.log('\nDocuments (a; a2 is a plus one message and a changed /meta/status):');
  table(['size', 'messages', 'jsonb in memory', 'JSON text', 'stored (bench_stored)', 'a2 in memory'],
    docs.map((d) => [d.label, d.nmsg, `${d.bytes} B (${fmtBytes(d.bytes)})`, `${d.text} B`,
      `${d.stored} B ${d.method || 'uncompressed'}${d.ord === 1 ? ', inline' : ', TOASTed'}`, `${d.bytes2} B`]));

  const results = {};			// label -> contender -> median µs
  const started = Date.now();
  for (const d of docs) {
    // Node's inputs: JSON text fetched and parsed outside any timing, A and
    // A2 parsed separately, so that they share no object
    const [texts] = await q('SELECT a::text AS a, a2::text AS a2 FROM bench_docs WHERE label = $1', [d.label]);
    const A = JSON.parse(texts.a);
    const A2 = JSON.parse(texts.a2);
    const check = jsonpatch.compare(A, A2);
    if (check.length !== 2)
      throw new Error(`${d.label}: fast-json-patch found ${check.length} ops, not 2: ${JSON.stringify(check).slice(0, 300)}`);

    const sample = async (c, n) => {
      if (c !== 'fjp') {
        const [r] = await q('SELECT bench_sample($1, $2, $3) AS us', [c, d.label, n]);
        return r.us;
      }
      let ops = 0;
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < n; i++) ops += jsonpatch.compare(A, A2).length;
      const t1 = process.hrtime.bigint();
      if (ops !== 2 * n) throw new Error('fast-json-patch gave a different patch');
      return Number(t1 - t0) / 1e3 / n;
    };

    // calibrate n: grow it until a sample takes a fifth of SAMPLE_MS, then
    // scale it to SAMPLE_MS (this also warms up caches and Node's JIT)
    const names = Object.keys(CONTENDERS);
    const ns = {};
    for (const c of names) {
      let n = 1;
      let us = await sample(c, n);
      while (us * n < SAMPLE_MS * 200) {
        n *= 10;
        us = await sample(c, n);
      }
      ns[c] = Math.max(1, Math.round((SAMPLE_MS * 1000) / us));
    }

    const samples = Object.fromEntries(names.map((c) => [c, []]));
    for (let rep = 0; rep < REPS; rep++) {
      const k = rep % names.length;
      let order = [...names.slice(k), ...names.slice(0, k)];
      if (rep % 2) order = order.reverse();
      for (const c of order) samples[c].push(await sample(c, ns[c]));
    }
    results[d.label] = {};
    for (const c of names) {
      const s = samples[c];
      results[d.label][c] = {
        us: median(s), min: Math.min(...s), n: ns[c], spread: (Math.max(...s) - Math.min(...s)) / median(s),
      };
    }
    console.log(`  measured ${d.label} (${((Date.now() - started) / 1000).toFixed(0)} s so far)`);
  }

  // ------------------------------------------------------------------
  console.log('\nWhat each contender does per call (a, a2, acopy, ascaled: documents; item: the appended message):');
  for (const [c, what] of Object.entries(CONTENDERS)) console.log(`  ${c.padEnd(15)} ${what}`);

  let met = 0;
  let total = 0;
  const missed = [];
  for (const cs of CASES) {
    console.log(`\nCase ${cs.id} [${cs.form}]: ${cs.title}`);
    const rows = docs.map((d) => {
      const ra = results[d.label][cs.A];
      const rb = results[d.label][cs.B];
      const ratio = ra.us / rb.us;
      const judged = !cs.only || cs.only.has(d.label);
      let ok = '-';
      if (judged) {
        const pass = cs.op === '<=' ? ratio <= cs.target : ratio >= cs.target;
        ok = pass ? 'yes' : 'NO';
        total++;
        if (pass) met++;
        else missed.push(`case ${cs.id} at ${d.label}: ${fmtRatio(ratio)} (target ${cs.op} ${cs.target})`);
      }
      return [d.label, fmtUs(ra.us), fmtUs(rb.us), fmtRatio(ratio),
        judged ? `${cs.op} ${cs.target}` : '(none)', ok];
    });
    table(['size', `A: ${cs.A} µs`, `B: ${cs.B} µs`, 'A/B', 'target', 'met?'], rows);
    if (cs.A === 'fjp') {
      // Node's samples vary most (its garbage collector): the ratio with
      // fast-json-patch's fastest sample, so that the median flatters nothing
      console.log('fast-json-patch\'s fastest sample instead of its median: ' + docs.map((d) => {
        const r = results[d.label];
        return `${d.label} ${fmtUs(r.fjp.min)} µs (A/B ${fmtRatio(r.fjp.min / r.hx_diff_edit.us)})`;
      }).join(', '));
    }
  }

  console.log('\nOverheads and the rest (medians, µs per call):');
  table(['size', 'plpgsql loop', 'detoast alone', 'st_hx_patch', 'st_hx_merge', 'worst PG spread', 'fjp spread'],
    docs.map((d) => {
      const r = results[d.label];
      const worst = Object.entries(r).filter(([c]) => c !== 'fjp')
        .reduce((m, [c, v]) => (v.spread > m[1] ? [c, v.spread] : m), ['', -1]);
      return [d.label, fmtUs(r.loop.us), fmtUs(r.st_detoast.us), fmtUs(r.st_hx_patch.us),
        fmtUs(r.st_hx_merge.us), `${(worst[1] * 100).toFixed(0)}% (${worst[0]})`,
        `${(r.fjp.spread * 100).toFixed(0)}%`];
    }));

  console.log(`
What the numbers include:
  - PostgreSQL times are measured inside the server, around a plpgsql loop of
    n calls (clock_timestamp), divided by n: each includes the loop and the
    assignment (the "plpgsql loop" column above), the function call, all of
    the function's work and the palloc'd result datum, whose size is read
    with pg_column_size.  No client round trip, no result transfer.
  - "in memory" (cases a to e and d2): the documents are plain jsonb datums in
    plpgsql variables, detoasted and decompressed once before the clock
    starts; neither contender pays for a TOAST fetch or for decompression.
    a2 and acopy are separate datums (a2 made by core, acopy built anew),
    so the walk a = acopy compares two different buffers all the way down
    (they are equal, so it never stops early), and hx_diff gets no
    same-pointer shortcut.  hx_diff does skip every subtree that is
    byte-identical in both documents with one memcmp (as everything a step
    did not touch is); case d2 shows the cost when no subtree below the
    top level is: every message of ascaled differs from a's in its bytes
    (not in value), so both contenders walk every message.
  - "as stored" (cases a*, b*): the argument is bench_stored.a as the column
    holds it, the TOAST pointer (for 2 kB: the compressed inline datum), so
    every call of either contender fetches the chunks (from shared buffers:
    no disk reads) and decompresses the document (${env.compression}), as
    UPDATE ... SET state = f(state) would; "detoast alone" is that cost by
    itself, and the rest of each time is the function's own work.
  - Case e: Node times compare(A, A2) on objects parsed once from the JSON
    text (the fetch and JSON.parse are outside the timing); A and A2 are
    separate objects, so compare walks all of A.  Its PostgreSQL
    counterpart is the in-memory hx_diff(a, a2) of case c: the same
    documents, already detoasted.  Node builds its patch as JS objects,
    hx_diff encodes it as a jsonb datum; both are included.  Node's samples
    vary with its garbage collector, hence the fastest-sample line.
  - A spread is (max - min) / median of a contender's samples; "worst PG
    spread" is that of the noisiest PostgreSQL contender at that size.`);

  console.log(`\nTargets met: ${met} of ${total}.`);
  if (missed.length) {
    console.log('Missed:');
    for (const m of missed) console.log(`  ${m}`);
  }
  await db.end();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
