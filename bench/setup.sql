--
-- bench/setup.sql: the documents and the timing function of bench/run.
--
-- Four agent-state documents of about 2 kB, 30 kB, 450 kB and 7 MB (jsonb
-- size), which differ only in the number of messages, each stored in four
-- versions in bench_docs:
--   a      the document;
--   a2     a after one step: one message appended to /messages and
--          /meta/status changed from "idle" to "running", made by core
--          (jsonb_insert + jsonb_set), so hx_* play no part in the inputs;
--   acopy  a built a second time: equal to a, but a separate datum, so that
--          a = acopy really walks both documents;
--   ascaled  a with every "tokens" number written as N.0: equal to a (jsonb
--          compares numbers by value) but different in the bytes of every
--          message, so that no shortcut on byte-identical subtrees applies.
-- bench_stored holds a once more, alone in its row, with the default
-- storage (EXTENDED), as an agent's state would be: compressed
-- (default_toast_compression), inline for the 2 kB document (it fits once
-- compressed), in the TOAST table for the others.
--
-- bench_sample(contender, label, n) calls one contender n times in a
-- plpgsql loop and returns the mean microseconds per call, measured with
-- clock_timestamp() around the loop: no client round trip, no result
-- transfer (each result is reduced to pg_column_size, which reads only its
-- header).  Its inputs are read before the clock starts, in two forms:
--   in memory  the plain datum: detoasted and decompressed once, before
--              timing, so the contenders do no TOAST fetch and no
--              decompression (as Node works on objects already parsed);
--   as stored  bench_stored.a as a plpgsql variable holds it in a function:
--              still compressed, and for a TOASTed value the TOAST pointer
--              itself (an atomic context does not detoast on assignment),
--              so every call fetches the chunks from the TOAST table
--              (through shared buffers) and decompresses them, as an
--              UPDATE ... SET state = f(state, ...) would.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS hxstate;

-- Message i of a conversation: user, assistant (with a tool call) or tool
-- turns; content of 70 to about 600 characters of plain words
CREATE FUNCTION bench_message(i int) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $f$
	SELECT jsonb_build_object(
		'id', 'msg_' || lpad(i::text, 6, '0'),
		'role', (ARRAY['user', 'assistant', 'tool'])[i % 3 + 1],
		'content', (SELECT string_agg((ARRAY['the', 'agent', 'reads', 'file', 'src/main.c',
				'and', 'finds', 'a', 'bug', 'in', 'parser', 'which', 'fails', 'on', 'empty',
				'input', 'so', 'it', 'writes', 'test', 'first', 'then', 'fixes', 'code',
				'tokens', 'plan', 'step', 'result', 'ok', 'error:', 'retrying', 'with',
				'smaller', 'batch'])[(i * 7 + j * 13 + (i * j) % 11) % 34 + 1], ' ')
			FROM generate_series(1, 12 + (i * 37) % 90) j),
		'created_at', to_char(timestamptz '2025-01-01 00:00:00+00' + i * interval '7 seconds',
			'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
		'tokens', 20 + (i * 53) % 900,
		'tools', CASE WHEN i % 3 = 1 THEN jsonb_build_array(jsonb_build_object(
				'id', 'call_' || i,
				'name', (ARRAY['read_file', 'search', 'run_tests', 'edit'])[i % 4 + 1],
				'args', jsonb_build_object('path', 'src/file' || (i % 17) || '.c',
					'query', 'symbol_' || (i % 101), 'limit', 10 + i % 5),
				'status', 'done'))
			ELSE '[]'::jsonb END)
$f$;

-- An agent state with n messages
CREATE FUNCTION bench_state(n int) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $f$
	SELECT jsonb_build_object(
		'phase', 'executing',
		'project_id', 'proj_0042',
		'thread_id', 'thr_7f3a9c',
		'meta', jsonb_build_object('status', 'idle', 'model', 'claude-sonnet',
			'created_at', '2025-01-01T00:00:00Z', 'updated_at', '2025-01-02T08:30:00Z',
			'tags', jsonb_build_array('bench', 'agent', 'state'),
			'owner', jsonb_build_object('id', 'u_17', 'name', 'Ada')),
		'counters', jsonb_build_object('steps', n, 'tool_calls', n / 3,
			'tokens_in', n * 410, 'tokens_out', n * 120),
		'messages', coalesce((SELECT jsonb_agg(bench_message(i) ORDER BY i)
			FROM generate_series(1, n) i), '[]'::jsonb))
$f$;

-- The item one step appends
CREATE FUNCTION bench_item() RETURNS jsonb LANGUAGE sql IMMUTABLE AS $f$
	SELECT jsonb_build_object('id', 'msg_new', 'role', 'assistant',
		'content', 'the fix is in; all tests pass', 'created_at', '2025-06-01T12:00:00Z',
		'tokens', 42, 'tools', '[]'::jsonb)
$f$;

CREATE TABLE bench_docs (
	label text PRIMARY KEY,
	ord int NOT NULL,
	nmsg int NOT NULL,
	bytes int NOT NULL,			-- size of a in memory (VARSIZE of the plain datum)
	a jsonb NOT NULL,
	a2 jsonb NOT NULL,
	acopy jsonb NOT NULL,
	ascaled jsonb NOT NULL
);

-- Message counts for the target sizes, from the mean size of a message
DO $do$
DECLARE
	base int := pg_column_size(bench_state(0));
	per float8 := (pg_column_size(bench_state(3000)) - pg_column_size(bench_state(0))) / 3000.0;
	t record;
	n int;
BEGIN
	FOR t IN SELECT * FROM (VALUES ('2 kB', 1, 2048), ('30 kB', 2, 30 * 1024),
			('450 kB', 3, 450 * 1024), ('7 MB', 4, 7 * 1024 * 1024)) v(label, ord, bytes)
	LOOP
		n := greatest(1, round((t.bytes - base) / per));
		INSERT INTO bench_docs
			SELECT t.label, t.ord, n, pg_column_size(s), s,
				jsonb_set(jsonb_insert(s, '{messages,-1}', bench_item(), true),
					'{meta,status}', '"running"'),
				bench_state(n),
				regexp_replace(s::text, '"tokens": (\d+)', '"tokens": \1.0', 'g')::jsonb
			FROM bench_state(n) s;
	END LOOP;
END
$do$;
CREATE TABLE bench_stored AS SELECT label, a FROM bench_docs;
ALTER TABLE bench_stored ADD PRIMARY KEY (label);
ANALYZE bench_docs, bench_stored;

-- bench_stored is what it claims: four compressed values, three of them
-- in the TOAST table
DO $do$
DECLARE
	chunks int;
BEGIN
	EXECUTE format('SELECT count(DISTINCT chunk_id) FROM %s',
		(SELECT reltoastrelid::regclass FROM pg_class WHERE oid = 'bench_stored'::regclass))
		INTO chunks;
	IF chunks <> 3 OR EXISTS (SELECT FROM bench_stored WHERE pg_column_compression(a) IS NULL) THEN
		RAISE EXCEPTION 'bench_stored: % values in the TOAST table, not 3, or one is not compressed', chunks;
	END IF;
END
$do$;

-- Before timing anything: both contenders of every case compute the same
-- thing, and the inputs are what they claim to be.  Any failure stops the
-- benchmark.
DO $do$
DECLARE
	d record;
	w jsonb;
BEGIN
	FOR d IN SELECT * FROM bench_docs ORDER BY ord LOOP
		w := jsonb_build_array(
			jsonb_build_object('op', 'append', 'path', '/messages', 'items', jsonb_build_array(bench_item())),
			jsonb_build_object('op', 'replace', 'path', '/meta/status', 'value', 'running'));
		IF hx_patch(d.a, '[{"op": "replace", "path": "/meta/status", "value": "running"}]')
				IS DISTINCT FROM jsonb_set(d.a, '{meta,status}', '"running"') THEN
			RAISE EXCEPTION '%: hx_patch and jsonb_set disagree', d.label;
		END IF;
		IF hx_merge(d.a, w) IS DISTINCT FROM d.a2 THEN
			RAISE EXCEPTION '%: hx_merge and jsonb_insert + jsonb_set disagree', d.label;
		END IF;
		IF jsonb_array_length(hx_diff(d.a, d.a2)) <> 2
				OR hx_patch(d.a, hx_diff(d.a, d.a2)) IS DISTINCT FROM d.a2 THEN
			RAISE EXCEPTION '%: hx_diff(a, a2) is not the 2-op patch: %', d.label, hx_diff(d.a, d.a2);
		END IF;
		IF hx_diff(d.a, d.acopy) <> '[]' OR d.a <> d.acopy THEN
			RAISE EXCEPTION '%: acopy is not equal to a', d.label;
		END IF;
		IF hx_diff(d.a, d.ascaled) <> '[]' OR d.a <> d.ascaled OR d.a::text = d.ascaled::text THEN
			RAISE EXCEPTION '%: ascaled is not equal to a, or not written differently', d.label;
		END IF;
	END LOOP;
END
$do$;

CREATE FUNCTION bench_sample(contender text, lbl text, n int) RETURNS float8
LANGUAGE plpgsql AS $f$
DECLARE
	a jsonb;					-- in memory
	a2 jsonb;
	ac jsonb;
	a3 jsonb;					-- ascaled
	sa jsonb;					-- as stored: the TOAST pointer
	bytes int;
	item jsonb := bench_item();
	w jsonb;
	r int;
	eq bool;
	t0 timestamptz;
	t1 timestamptz;
BEGIN
	-- ARRAY[x] detoasts and decompresses x (construct_md_array never keeps
	-- a TOAST pointer), so a, a2, ac and a3 hold plain datums, byte for
	-- byte the stored ones.  Check both forms, since everything below
	-- relies on them: a plain datum has its full size and no compression;
	-- sa, still compressed (inline or TOASTed), reports the compressed size.
	SELECT (ARRAY[d.a])[1], d.bytes INTO a, bytes FROM bench_docs d WHERE d.label = lbl;
	SELECT s.a INTO sa FROM bench_stored s WHERE s.label = lbl;
	IF a IS NULL THEN
		RAISE EXCEPTION 'no document %', lbl;
	END IF;
	IF pg_column_size(a) <> bytes OR pg_column_compression(a) IS NOT NULL THEN
		RAISE EXCEPTION 'document % is not held plain (% of % bytes, compression %)',
			lbl, pg_column_size(a), bytes, pg_column_compression(a);
	END IF;
	IF contender LIKE 'st\_%' AND pg_column_size(sa) >= bytes THEN
		RAISE EXCEPTION 'document % is not held compressed (% of % bytes)', lbl, pg_column_size(sa), bytes;
	END IF;
	IF contender = 'hx_diff_edit' THEN
		SELECT (ARRAY[d.a2])[1] INTO a2 FROM bench_docs d WHERE d.label = lbl;
	ELSIF contender IN ('hx_diff_same', 'walk') THEN
		SELECT (ARRAY[d.acopy])[1] INTO ac FROM bench_docs d WHERE d.label = lbl;
	ELSIF contender IN ('hx_diff_scaled', 'walk_scaled') THEN
		SELECT (ARRAY[d.ascaled])[1] INTO a3 FROM bench_docs d WHERE d.label = lbl;
	END IF;
	w := jsonb_build_array(
		jsonb_build_object('op', 'append', 'path', '/messages', 'items', jsonb_build_array(item)),
		jsonb_build_object('op', 'replace', 'path', '/meta/status', 'value', 'running'));

	t0 := clock_timestamp();
	CASE contender
		-- in memory
		WHEN 'loop' THEN
			FOR i IN 1..n LOOP
				r := pg_column_size(a);
			END LOOP;
		WHEN 'hx_patch' THEN
			FOR i IN 1..n LOOP
				r := pg_column_size(hx_patch(a, '[{"op": "replace", "path": "/meta/status", "value": "running"}]'));
			END LOOP;
		WHEN 'jsonb_set' THEN
			FOR i IN 1..n LOOP
				r := pg_column_size(jsonb_set(a, '{meta,status}', '"running"'));
			END LOOP;
		WHEN 'hx_merge' THEN
			FOR i IN 1..n LOOP
				r := pg_column_size(hx_merge(a, w));
			END LOOP;
		WHEN 'core_merge' THEN
			FOR i IN 1..n LOOP
				r := pg_column_size(jsonb_set(jsonb_insert(a, '{messages,-1}', item, true),
					'{meta,status}', '"running"'));
			END LOOP;
		WHEN 'hx_diff_edit' THEN
			FOR i IN 1..n LOOP
				r := pg_column_size(hx_diff(a, a2));
			END LOOP;
		WHEN 'hx_diff_same' THEN
			FOR i IN 1..n LOOP
				r := pg_column_size(hx_diff(a, ac));
			END LOOP;
		WHEN 'walk' THEN
			FOR i IN 1..n LOOP
				eq := (a = ac);
			END LOOP;
		WHEN 'hx_diff_scaled' THEN
			FOR i IN 1..n LOOP
				r := pg_column_size(hx_diff(a, a3));
			END LOOP;
		WHEN 'walk_scaled' THEN
			FOR i IN 1..n LOOP
				eq := (a = a3);
			END LOOP;
		-- as stored: every call detoasts sa
		WHEN 'st_detoast' THEN
			-- jsonb_typeof detoasts its argument whole, then looks at one byte
			FOR i IN 1..n LOOP
				r := length(jsonb_typeof(sa));
			END LOOP;
		WHEN 'st_hx_patch' THEN
			FOR i IN 1..n LOOP
				r := pg_column_size(hx_patch(sa, '[{"op": "replace", "path": "/meta/status", "value": "running"}]'));
			END LOOP;
		WHEN 'st_jsonb_set' THEN
			FOR i IN 1..n LOOP
				r := pg_column_size(jsonb_set(sa, '{meta,status}', '"running"'));
			END LOOP;
		WHEN 'st_hx_merge' THEN
			FOR i IN 1..n LOOP
				r := pg_column_size(hx_merge(sa, w));
			END LOOP;
		WHEN 'st_core_merge' THEN
			FOR i IN 1..n LOOP
				r := pg_column_size(jsonb_set(jsonb_insert(sa, '{messages,-1}', item, true),
					'{meta,status}', '"running"'));
			END LOOP;
	END CASE;
	t1 := clock_timestamp();
	RETURN extract(epoch FROM t1 - t0) * 1e6 / n;
END
$f$;
