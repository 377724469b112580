--
-- compress: hx_compress, a value compressed in line for narrow rows
--
-- (err() is defined in setup.sql)
SET default_toast_compression = pglz;

-- A row under about 2 kB is stored as it is: a checkpoint's delta of one
-- message, 1.5 kB of text that compresses well, takes its whole size.
CREATE TABLE narrow (id int PRIMARY KEY, doc jsonb, note text);
INSERT INTO narrow VALUES
  (1, jsonb_build_object('content', repeat('the tool answered ', 80)), NULL),
  (2, hx_compress(jsonb_build_object('content', repeat('the tool answered ', 80))), NULL),
  (3, hx_compress(jsonb_build_object('content', repeat('the tool answered ', 80)), 'pglz'), NULL),
  (4, NULL, hx_compress(repeat('the tool answered ', 80), 'lz4'));
SELECT id, pg_column_size(doc) AS doc_bytes, pg_column_compression(doc) AS doc_method,
       pg_column_size(note) AS note_bytes, pg_column_compression(note) AS note_method
  FROM narrow ORDER BY id;
-- as a writer sends it, in a parameter, and rewritten by an UPDATE
PREPARE put(int, jsonb) AS INSERT INTO narrow (id, doc) VALUES ($1, hx_compress($2));
EXECUTE put(5, jsonb_build_object('content', repeat('the tool answered ', 80)));
UPDATE narrow SET doc = hx_compress(doc || '{"n": 0}') WHERE id = 5;
SELECT id, pg_column_size(doc) AS doc_bytes, pg_column_compression(doc) AS doc_method
  FROM narrow WHERE id = 5;
DEALLOCATE put;
UPDATE narrow SET doc = doc - 'n' WHERE id = 5;

-- the value is the same, whoever reads it
SELECT count(DISTINCT doc) AS distinct_docs, bool_and(doc->>'content' = repeat('the tool answered ', 80)) AS equal
  FROM narrow WHERE doc IS NOT NULL;
SELECT note = repeat('the tool answered ', 80) AS equal, length(note) FROM narrow WHERE id = 4;
SELECT hx_merge(doc, '[{"op": "replace", "path": "/n", "value": 1}]') - 'content' FROM narrow WHERE id = 2;

-- what does not compress, or is compressed already, comes back as it was
SELECT pg_column_compression(hx_compress('{"a": 1}'::jsonb)) AS small,
       pg_column_compression(hx_compress(decode(md5('x') || md5('y'), 'hex'))) AS random;
SELECT pg_column_size(hx_compress(doc)) = pg_column_size(doc) AS unchanged FROM narrow WHERE id = 2;
-- a toasted value (from a wide row) is read whole and compressed again
CREATE TABLE wide (doc jsonb);
INSERT INTO wide SELECT jsonb_build_object('content', repeat('x', 300000));
SELECT pg_column_compression(hx_compress(doc)) IS NOT NULL AS compressed,
       hx_compress(doc) = doc AS equal FROM wide;
SELECT hx_compress(NULL::jsonb) IS NULL AS null_in_null_out;

\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT hx_compress(42)$$);
SELECT err($$SELECT hx_compress('{}'::jsonb, 'zstd')$$);
-- types PostgreSQL never compresses (storage plain): their functions read
-- their argument's bytes raw, and took a compressed datum for their own
SELECT err($$SELECT numnode(hx_compress(string_agg('t' || g, ' & ')::tsquery, 'pglz')) FROM generate_series(1, 3000) g$$);
SELECT err($$SELECT hx_compress(string_agg('a' || g, ' & ')::tsquery, 'pglz')::text FROM generate_series(1, 3000) g$$);
SELECT err($$SELECT hx_compress(array_to_string(array_fill(7, ARRAY[50]), ' ')::int2vector)$$);
SELECT err($$SELECT hx_compress(array_to_string(array_fill(7, ARRAY[50]), ' ')::oidvector)$$);
CREATE DOMAIN plain_query AS tsquery;
SELECT err($$SELECT hx_compress('a & b'::plain_query)$$);
DROP DOMAIN plain_query;
\pset tuples_only off
\pset format aligned
-- storage "main" (numeric) and "extended" (arrays, text, composites) are taken
SELECT hx_compress(repeat('9', 5000)::numeric) = repeat('9', 5000)::numeric AS numeric_equal,
       pg_column_compression(hx_compress(repeat('9', 5000)::numeric, 'pglz')) AS numeric_method;
SELECT (hx_compress(ROW(repeat('ab', 2000), 1)::record)::text) = (ROW(repeat('ab', 2000), 1)::text) AS record_equal;
\pset tuples_only on
\pset format unaligned
\pset tuples_only off
\pset format aligned

-- The log's events are stored compressed in line as well (lz4 where the
-- server has it): an event row is narrower than the 2 kB from which
-- PostgreSQL compresses a row, but its event is most of its bytes.  One
-- under 1 kB (here a small delta, and one of 600 bytes) is stored as it is:
-- compressing it would cost more than it saves.  Every reader gets the
-- event as it was sent, and the state replays from it.
SELECT hx_stream_send('@compressed', jsonb_build_object('type', 'STATE_SNAPSHOT', 'snapshot',
         jsonb_build_object('messages', jsonb_build_array(jsonb_build_object('content', repeat('the tool answered ', 80))))));
SELECT hx_stream_send('@compressed', '{"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/step", "value": "act"}]}');
SELECT hx_stream_send('@compressed', jsonb_build_object('type', 'STATE_DELTA', 'delta',
         jsonb_build_array(jsonb_build_object('op', 'add', 'path', '/note', 'value', repeat('a note ', 80)))));
SELECT seq, pg_column_size(event) < octet_length(event::text) / 4 AS compressed_small,
       pg_column_compression(event) IS NOT NULL AS compressed,
       event->>'type' AS type
  FROM hx_event WHERE stream = '@compressed' ORDER BY seq;
SELECT event->'snapshot'->'messages'->0->>'content' = repeat('the tool answered ', 80) AS equal
  FROM hx_event WHERE stream = '@compressed' AND seq = 1;
SELECT hx_stream_state_at('@compressed', 3) = jsonb_build_object('step', 'act', 'note', repeat('a note ', 80),
         'messages', jsonb_build_array(jsonb_build_object('content', repeat('the tool answered ', 80)))) AS replays;
DELETE FROM hx_event WHERE stream = '@compressed';

DROP TABLE narrow, wide;
