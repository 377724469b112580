--
-- test/pgtap/encoding.sql: hxstate's encoder writes exactly the bytes core
-- PostgreSQL's jsonb encoder writes
--
-- hx_patch, hx_merge and hx_diff build their results with their own
-- encoder (src/encode.c), which writes unpacked containers in jsonb's
-- on-disk format and copies untouched ones byte for byte.  jsonb equality
-- would not notice a wrong offset stride, a missing alignment pad or a
-- misplaced JEntry flag that core's own reader happens to tolerate, so
-- these tests compare bytes: a binary-coercible cast from jsonb to bytea
-- (created in this transaction, gone at ROLLBACK) shows the datum as it
-- is stored, and r::text::jsonb is core's encoding of the same value.
--
\ir include/preamble.sql

BEGIN;
SELECT plan(9);

CREATE CAST (jsonb AS bytea) WITHOUT FUNCTION;

\ir include/gen.sql

-- the bytes of r are the bytes core writes for r
CREATE FUNCTION pg_temp.core_bytes(r jsonb) RETURNS bool LANGUAGE sql AS
  $$ SELECT r::bytea = (r::text::jsonb)::bytea $$;

CREATE FUNCTION pg_temp.bytes_failure(what text, r jsonb) RETURNS text LANGUAGE sql AS $$
  SELECT CASE WHEN pg_temp.core_bytes(r) THEN NULL
    ELSE format('%s: %s is %s, core writes %s', what, r, r::bytea, (r::text::jsonb)::bytea) END
$$;

SELECT setseed(0.20261123);

CREATE TEMP TABLE pairs (i int PRIMARY KEY, a jsonb NOT NULL, b jsonb NOT NULL);
DO $$
DECLARE
  a jsonb;
BEGIN
  FOR i IN 1 .. 300 LOOP
    a := pg_temp.gen_doc();
    INSERT INTO pairs VALUES (i, a, pg_temp.mutate(a, 0.3 + random() * 0.5));
  END LOOP;
END $$;

CREATE TEMP TABLE modes (m text);
INSERT INTO modes VALUES ('append'), ('replace'), ('index');

-- Containers of every size from 0 to 70 elements (the offset stride is 32
-- JEntries, so this crosses it twice), of values that need no alignment,
-- values that need it (numbers, containers) and mixes, built by hx_merge
-- from op lists so that the encoder writes every JEntry itself.
CREATE FUNCTION pg_temp.elem(i int, kind int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT CASE kind
    WHEN 0 THEN to_jsonb(repeat('s', i % 7))
    WHEN 1 THEN to_jsonb(i * 1.5)
    WHEN 2 THEN jsonb_build_object('k', i, 'v', repeat('x', i % 5))
    ELSE (ARRAY['null', 'true', '"é"', '12345678901234567890.5', '[]', '{}', '[1, "a"]', '-0.000'])[1 + i % 8]::jsonb
  END
$$;

CREATE TEMP TABLE sized (n int, kind int, arr jsonb, obj jsonb, nested jsonb);
INSERT INTO sized
SELECT n, kind,
       hx_merge('{}', coalesce((SELECT jsonb_agg(jsonb_build_object('op', 'add', 'path', '/a/-', 'value', pg_temp.elem(i, kind)) ORDER BY i)
                                  FROM generate_series(1, n) i), '[]') || '[{"op": "add", "path": "/z", "value": 0}]') -> 'a',
       hx_merge('{}', coalesce((SELECT jsonb_agg(jsonb_build_object('op', 'add', 'path', '/' || repeat('k', 1 + i % 9) || i, 'value', pg_temp.elem(i, kind)) ORDER BY i)
                                  FROM generate_series(1, n) i), '[]') || '[{"op": "add", "path": "/z", "value": 0}]'),
       hx_merge(jsonb_build_object('deep', jsonb_build_object('list', '[]'::jsonb, 'n', 1)),
                coalesce((SELECT jsonb_agg(jsonb_build_object('op', 'append', 'path', '/deep/list', 'items', jsonb_build_array(pg_temp.elem(i, kind))) ORDER BY i)
                            FROM generate_series(1, n) i), '[]') || '[{"op": "increment", "path": "/deep/n", "by": 1}]')
  FROM generate_series(0, 70) n, generate_series(0, 3) kind;

SELECT is((SELECT count(*)::int FROM sized WHERE jsonb_array_length(coalesce(arr, '[]')) = n), 284,
  'hx_merge built arrays of 0 to 70 elements of four kinds');

SELECT pg_temp.holds('arrays of 0 to 70 elements that hxstate encoded have core''s bytes',
  (SELECT f FROM sized, LATERAL pg_temp.bytes_failure(format('array of %s, kind %s', n, kind), coalesce(arr, '[]')) f
    WHERE f IS NOT NULL ORDER BY n, kind LIMIT 1));

SELECT pg_temp.holds('objects of 1 to 71 members that hxstate encoded have core''s bytes',
  (SELECT f FROM sized, LATERAL pg_temp.bytes_failure(format('object of %s, kind %s', n, kind), obj) f
    WHERE f IS NOT NULL ORDER BY n, kind LIMIT 1));

SELECT pg_temp.holds('nested containers edited in place have core''s bytes',
  (SELECT f FROM sized, LATERAL pg_temp.bytes_failure(format('nested %s, kind %s', n, kind), nested) f
    WHERE f IS NOT NULL ORDER BY n, kind LIMIT 1));

-- Results of the property generator's documents
SELECT pg_temp.holds('hx_patch(a, hx_diff(a, b, m)) has core''s bytes, for 300 pairs in every mode',
  (SELECT f FROM pairs, modes, LATERAL pg_temp.bytes_failure(format('pair %s mode %s', i, m), hx_patch(a, hx_diff(a, b, m))) f
    WHERE f IS NOT NULL ORDER BY i, m LIMIT 1));

SELECT pg_temp.holds('hx_diff(a, b, m) itself has core''s bytes, for 300 pairs in every mode',
  (SELECT f FROM pairs, modes, LATERAL pg_temp.bytes_failure(format('diff %s mode %s', i, m), hx_diff(a, b, m)) f
    WHERE f IS NOT NULL ORDER BY i, m LIMIT 1));

SELECT pg_temp.holds('hx_merge(a, b) (an RFC 7386 patch when b is an object) has core''s bytes, for 300 pairs',
  (SELECT f FROM pairs, LATERAL pg_temp.bytes_failure(format('merge %s', i), hx_merge(a, b)) f
    WHERE f IS NOT NULL AND jsonb_typeof(b) = 'object' ORDER BY i LIMIT 1));

-- a step's writes of every composing kind into every generated document
SELECT pg_temp.holds('hx_merge of appends, unions, upserts, increments, merges and deletes has core''s bytes',
  (SELECT f FROM pairs, LATERAL pg_temp.bytes_failure(format('step %s', i),
      hx_merge(CASE WHEN jsonb_typeof(a) = 'object' THEN a ELSE '{}' END, jsonb_build_array(
        jsonb_build_object('op', 'append', 'path', '/log', 'items', jsonb_build_array(b, i)),
        jsonb_build_object('op', 'union', 'path', '/set', 'items', jsonb_build_array(i % 3, i % 5, b)),
        jsonb_build_object('op', 'upsert', 'path', '/msgs', 'items', jsonb_build_array(jsonb_build_object('id', i % 4, 'v', b))),
        jsonb_build_object('op', 'increment', 'path', '/n', 'by', i * 0.25),
        jsonb_build_object('op', 'merge', 'path', '/m', 'value', jsonb_build_object('k' || (i % 3), b, 'gone', NULL)),
        jsonb_build_object('op', 'delete', 'path', '/' || pg_temp.esc(coalesce((SELECT min(k) FROM jsonb_object_keys(CASE WHEN jsonb_typeof(a) = 'object' THEN a ELSE '{}' END) k), 'none')))))) f
    WHERE f IS NOT NULL ORDER BY i LIMIT 1));

-- a delete inside a document whose untouched members are copied as bytes
SELECT pg_temp.holds('an edit deep inside a document keeps every untouched container''s bytes and core''s layout',
  (SELECT f FROM pairs, LATERAL pg_temp.bytes_failure(format('deep %s', i),
      hx_patch(jsonb_build_object('keep', a, 'edit', jsonb_build_object('x', b, 'y', a)),
               '[{"op": "remove", "path": "/edit/x"}, {"op": "add", "path": "/edit/z", "value": 1.50}]')) f
    WHERE f IS NOT NULL ORDER BY i LIMIT 1));

ROLLBACK;
