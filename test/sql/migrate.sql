--
-- migrate: moving a table's jsonb states to hxdoc while its writers write
-- (the README's steps): a shadow hxdoc column that an hx_store trigger
-- takes from the jsonb one (from=), hx_store_backfill() batch by batch,
-- then a short swap
--
-- (err() is defined in setup.sql)
CREATE TABLE legacy (id text PRIMARY KEY, project text, state jsonb NOT NULL DEFAULT '{}');
CREATE TRIGGER legacy_stream AFTER INSERT OR UPDATE OR DELETE ON legacy
  FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
INSERT INTO legacy (id, state)
  SELECT 's-' || g, jsonb_build_object('phase', 'chatting', 'messages',
    (SELECT jsonb_agg(jsonb_build_object('id', 'm' || i, 'content', repeat('word ', 30) || i)) FROM generate_series(1, g * 3) i))
  FROM generate_series(1, 40) g;
-- rows spread over a few blocks, so that batches of one block are several
SELECT pg_relation_size('legacy') / current_setting('block_size')::int > 1 AS several_blocks;

-- 1. the shadow column and its trigger: from now on, every write of a row
-- sets it from the jsonb column
ALTER TABLE legacy ADD COLUMN state_doc hxdoc;
CREATE TRIGGER legacy_doc BEFORE INSERT OR UPDATE OR DELETE ON legacy
  FOR EACH ROW EXECUTE FUNCTION hx_store('state_doc', 'from=state');
UPDATE legacy SET state = hx_merge(state, '[{"op": "replace", "path": "/phase", "value": "building"}]') WHERE id = 's-40';
INSERT INTO legacy (id, state) VALUES ('s-41', '{"phase": "chatting"}');
UPDATE legacy SET project = 'p' WHERE id = 's-39';
SELECT id, state_doc IS NOT NULL AS has_doc, (hx_doc_info(state_doc)).format
  FROM legacy WHERE id IN ('s-1', 's-39', 's-40', 's-41') ORDER BY id;
SELECT count(*) AS events_before FROM hx_event WHERE stream LIKE 'legacy:%' \gset

-- 2. the rows no write has touched, a block at a time, each batch its own
-- transaction
DO $$
DECLARE
  b bigint := 0;
  batches int := 0;
BEGIN
  LOOP
    b := hx_store_backfill('legacy', 'state_doc', b, 1);
    batches := batches + 1;
    COMMIT;
    EXIT WHEN b IS NULL;
  END LOOP;
  RAISE NOTICE 'more than one batch: %', batches > 1;
END $$;
SELECT count(*) AS rows, count(*) FILTER (WHERE state_doc IS NULL) AS missing,
       count(*) FILTER (WHERE state_doc::jsonb IS DISTINCT FROM state) AS different,
       count(*) FILTER (WHERE (hx_doc_info(state_doc)).format = 'chunked') AS in_pieces
  FROM legacy;
-- the backfill logged nothing: a state set to itself is no change
SELECT count(*) - :events_before AS events_logged FROM hx_event WHERE stream LIKE 'legacy:%';
-- another pass finds nothing to do, and returns NULL past the table's end
SELECT hx_store_backfill('legacy', 'state_doc') IS NULL AS done_at_once_when_small,
       hx_store_backfill('legacy', 'state_doc', 1000000) IS NULL AS past_the_end;

-- 3. the swap: NOT NULL proven online first, then one short transaction
ALTER TABLE legacy ADD CONSTRAINT legacy_doc_set CHECK (state_doc IS NOT NULL) NOT VALID;
ALTER TABLE legacy VALIDATE CONSTRAINT legacy_doc_set;
BEGIN;
LOCK TABLE legacy IN ACCESS EXCLUSIVE MODE;
DROP TRIGGER legacy_doc ON legacy;
ALTER TABLE legacy RENAME COLUMN state TO state_jsonb;
ALTER TABLE legacy RENAME COLUMN state_doc TO state;
ALTER TABLE legacy ALTER COLUMN state SET NOT NULL, ALTER COLUMN state SET DEFAULT '{}';
ALTER TABLE legacy DROP CONSTRAINT legacy_doc_set, DROP COLUMN state_jsonb;
CREATE TRIGGER legacy_store BEFORE INSERT OR UPDATE OR DELETE ON legacy
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
COMMIT;
-- the application's SQL is the same, and the stream goes on from its seq
UPDATE legacy SET state = hx_merge(state, jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/messages',
  'items', jsonb_build_array(jsonb_build_object('id', 'new', 'content', 'after the swap')))));
SELECT pg_typeof(state) AS type, count(*) AS rows,
       count(*) FILTER (WHERE hx_stream_state_at('legacy:' || id, (SELECT max(seq) FROM hx_event e WHERE e.stream = 'legacy:' || id)) = state::jsonb) AS replay_equal,
       count(*) FILTER (WHERE state -> 'messages' -> -1 ->> 'id' = 'new') AS appended
  FROM legacy GROUP BY 1;

-- bad calls
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT hx_store_backfill('legacy', 'state')$$);
SELECT err($$SELECT hx_store_backfill('legacy', NULL)$$);
SELECT err($$SELECT hx_store_backfill('legacy', 'state', -1)$$);
SELECT err($$SELECT hx_store_backfill('legacy', 'state', 0, 0)$$);
CREATE VIEW legacy_view AS SELECT * FROM legacy;
SELECT err($$SELECT hx_store_backfill('legacy_view', 'state')$$);
CREATE TABLE wrong (a hxdoc, b hxdoc, t text, j jsonb);
CREATE TRIGGER wrong_from BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('a', 'from=t');
SELECT err($$INSERT INTO wrong (t) VALUES ('x')$$);
DROP TRIGGER wrong_from ON wrong;
CREATE TRIGGER wrong_from BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('a', 'b', 'from=j');
SELECT err($$INSERT INTO wrong (a) VALUES ('{}')$$);
DROP TRIGGER wrong_from ON wrong;
CREATE TRIGGER wrong_from BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('a', 'from=nosuch');
SELECT err($$INSERT INTO wrong (a) VALUES ('{}')$$);
-- a role without UPDATE on the table cannot backfill it
DROP TRIGGER wrong_from ON wrong;
CREATE TRIGGER wrong_from BEFORE INSERT OR UPDATE OR DELETE ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('a', 'from=j');
CREATE ROLE regress_hx_migrator;
GRANT SELECT ON wrong TO regress_hx_migrator;
SET ROLE regress_hx_migrator;
SELECT err($$SELECT hx_store_backfill('wrong', 'a')$$);
RESET ROLE;
\pset tuples_only off
\pset format aligned
-- the from column NULL makes the hxdoc column NULL
INSERT INTO wrong (j) VALUES ('{"a": 1}');
UPDATE wrong SET j = NULL;
SELECT a IS NULL AS follows_null FROM wrong;
DROP VIEW legacy_view;
DROP TABLE legacy, wrong;
DROP ROLE regress_hx_migrator;
SELECT hx_store_gc() >= 0 AS collected;
SELECT count(*) AS documents_left FROM hx_doc;
DELETE FROM hx_event;
