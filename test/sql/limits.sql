--
-- limits: results larger than jsonb can hold, op lists that take too long,
-- and memory
--
-- (err() is defined in setup.sql)

-- A copy of the whole document doubles it: 40 copies would need
-- terabytes.  The document's size is known as the copies add to it, and
-- the op list stops with 54000 once it is over jsonb's limit, in
-- operation 28, not terabytes later.
SELECT err($$SELECT hx_patch('{"a": "x"}',
  (SELECT jsonb_agg(jsonb_build_object('op', 'copy', 'from', '', 'path', '/a' || i)) FROM generate_series(1, 40) i))$$);
SELECT err($$SELECT hx_merge(jsonb_build_object('a', repeat('x', 1000)),
  (SELECT jsonb_agg(jsonb_build_object('op', 'copy', 'from', '', 'path', '/a' || i)) FROM generate_series(1, 40) i))$$);

-- Copies of an untouched member share its bytes in memory, but not in the
-- result: 100,000 copies of a 4 kB member stop at the limit too
SELECT err($$SELECT hx_merge(jsonb_build_object('big', repeat('x', 4000)),
  (SELECT jsonb_agg(jsonb_build_object('op', 'copy', 'from', '/big', 'path', '/c' || i)) FROM generate_series(1, 100000) i))$$);

-- Under the limit, doubling works
SELECT length(hx_patch('{"a": "x"}',
  (SELECT jsonb_agg(jsonb_build_object('op', 'copy', 'from', '', 'path', '/a' || i)) FROM generate_series(1, 10) i))::text);

-- A cancel or statement_timeout lands inside a long op list: 20,000
-- copies of a 400 kB object that an earlier op unpacked, each removed
-- again, encode 8 GB in all (and free them as they go).  Each copy is
-- preceded by an "add" into the object, so that it is unpacked again
-- after the tree's memory was rebuilt (a copy of an object still packed
-- would share its bytes and cost nothing).  Uncancelled, the list takes
-- seconds on the fastest build, fifty times the timeout.
CREATE TABLE long_ops AS
  SELECT jsonb_build_object('big', (SELECT jsonb_object_agg('k' || i, repeat('v', 20)) FROM generate_series(1, 16000) i)) AS doc,
         (SELECT jsonb_agg(o) FROM generate_series(1, 20000) i,
                 LATERAL (VALUES ('{"op": "add", "path": "/big/x", "value": 1}'::jsonb),
                                 (jsonb_build_object('op', 'copy', 'from', '/big', 'path', '/tmp')),
                                 ('{"op": "remove", "path": "/tmp"}'::jsonb)) v(o)) AS ops;
-- (terse: the context says which operation was running, which varies)
\set VERBOSITY terse
SET statement_timeout = '100ms';
SELECT hx_merge(doc, ops) IS NOT NULL FROM long_ops;
SELECT hx_patch(doc, ops) IS NOT NULL FROM long_ops;
RESET statement_timeout;
\set VERBOSITY default
DROP TABLE long_ops;

-- A stream's name is the first column of the log's key, and a btree entry
-- takes at most a third of a page (2,704 bytes).  A name longer than that
-- (here 3,008 bytes of hex, which does not compress) stops with 54000 and
-- says what it is, before anything is written; one that compresses into
-- an entry (4,000 bytes of one letter) is logged, as it always was; and so
-- is any name under 2,048 bytes.
CREATE TABLE long_names AS
  SELECT (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 94) i) AS hex;
SELECT err($$SELECT hx_stream_send('@' || hex, '{"type": "CUSTOM", "name": "x"}') FROM long_names$$);
SELECT hx_stream_send('@' || repeat('a', 4000), '{"type": "CUSTOM", "name": "x"}') AS seq;
SELECT hx_stream_send('@' || left(hex, 2046), '{"type": "CUSTOM", "name": "x"}') AS seq FROM long_names;
SELECT count(*) AS none_logged FROM hx_event WHERE stream = (SELECT '@' || hex FROM long_names);
-- a table's stream is named after the table and the row's key: a row
-- whose key fits the table's own index (2,690 bytes) but not, with the
-- table's name, the log's, cannot be streamed, and is not written
CREATE TABLE long_keys (id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON long_keys
  FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
SELECT err($$INSERT INTO long_keys (id) SELECT left(hex, 2690) FROM long_names$$);
SELECT count(*) AS rows FROM long_keys;
INSERT INTO long_keys (id) SELECT left(hex, 2000) FROM long_names;
SELECT count(*) AS rows, (SELECT count(*) FROM hx_event WHERE stream LIKE 'long_keys:%') AS events FROM long_keys;
DELETE FROM hx_event WHERE stream LIKE 'long_keys:%' OR stream LIKE '@%' AND length(stream) > 2000;
DROP TABLE long_keys, long_names;
