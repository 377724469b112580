--
-- probe7a: hxdoc, hx_store, hx_store_gc and the log's stream-name limit
-- under an abuse probe of 0.7.0's surfaces.  Sections 3 to 7 failed on
-- hxstate's code of 2026-11-28 (each says what it did); sections 1 and 2
-- hold what docs/storage.md documents of copies and upserts.  Each
-- asserts what a user depends on: a value is read whole or refused with a
-- clear error, never wrong, storage that no row holds is reclaimed, a
-- damaged side table gives an error and never a wrong value, and a limit
-- is named in its message.  Section 8 holds guards of cases the probe
-- found right.
--
-- (err() is defined in setup.sql)
--
SET client_min_messages = warning;
-- what a query of one boolean returns, or the SQLSTATE it fails with
CREATE FUNCTION probe7a_check(stmt text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE b boolean;
BEGIN
	EXECUTE stmt INTO b;
	RETURN b::text;
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END
$f$;
CREATE FUNCTION probe7a_doc(n int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('messages', (SELECT jsonb_agg(jsonb_build_object('i', i, 't', md5(i::text)))
                                           FROM generate_series(1, n) i)) $$;
CREATE TABLE p7_src (id int PRIMARY KEY, state hxdoc NOT NULL);
CREATE TRIGGER p7_src_store BEFORE INSERT OR UPDATE OR DELETE ON p7_src
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
INSERT INTO p7_src VALUES (1, probe7a_doc(300));
SELECT (hx_doc_info(state)).format AS stored FROM p7_src;

-- 1. A value in pieces copied into a table that has no hx_store trigger
-- (INSERT ... SELECT, CREATE TABLE AS, an hxdoc[] element, a materialized
-- view) is a reference to the source row's document: nothing of
-- PostgreSQL's runs on such a copy.  Once the source row has been written
-- twice, a read of the copy is refused with XH401 and its hint names the
-- way (never a wrong or torn value); the copy made as jsonb, as
-- docs/storage.md says to make it, reads whole, before and after the
-- source row is deleted and its documents collected.
CREATE TABLE p7_want AS SELECT state::jsonb AS s FROM p7_src;
CREATE TABLE p7_plain (state hxdoc);
INSERT INTO p7_plain SELECT state FROM p7_src;
CREATE TABLE p7_ctas AS SELECT state FROM p7_src;
CREATE TABLE p7_arr (states hxdoc[]);
INSERT INTO p7_arr SELECT ARRAY[state] FROM p7_src;
CREATE MATERIALIZED VIEW p7_mv AS SELECT state FROM p7_src;
CREATE TABLE p7_copy AS SELECT state::jsonb AS state FROM p7_src;
-- one write: the copies still read as what was copied
UPDATE p7_src SET state = jsonb_set(state, '{messages,0,t}', '"one"');
SELECT probe7a_check($$SELECT (SELECT state::jsonb FROM p7_plain) = (SELECT s FROM p7_want)$$) AS insert_select,
       probe7a_check($$SELECT (SELECT state::jsonb FROM p7_mv) = (SELECT s FROM p7_want)$$) AS materialized_view;
UPDATE p7_src SET state = jsonb_set(state, '{messages,1,t}', '"two"');
UPDATE p7_src SET state = jsonb_set(state, '{messages,2,t}', '"three"');
SELECT probe7a_check($$SELECT (SELECT state::jsonb FROM p7_plain) = (SELECT s FROM p7_want)$$) AS insert_select,
       probe7a_check($$SELECT (SELECT state::jsonb FROM p7_ctas) = (SELECT s FROM p7_want)$$) AS create_table_as,
       probe7a_check($$SELECT (SELECT states[1]::jsonb FROM p7_arr) = (SELECT s FROM p7_want)$$) AS array_element,
       probe7a_check($$SELECT (SELECT state::jsonb FROM p7_mv) = (SELECT s FROM p7_want)$$) AS materialized_view,
       probe7a_check($$SELECT (SELECT state FROM p7_copy) = (SELECT s FROM p7_want)$$) AS copied_as_jsonb;
SELECT regexp_replace(err($$SELECT state::text FROM p7_plain$$), '\d+', 'N', 'g') AS refused;
-- the source row deleted, its documents collected: the jsonb copy stays
DELETE FROM p7_src;
SELECT hx_store_gc('p7_src') >= 0 AS collected;
SELECT probe7a_check($$SELECT (SELECT state FROM p7_copy) = (SELECT s FROM p7_want)$$) AS copied_as_jsonb_after_gc;
DROP MATERIALIZED VIEW p7_mv;
DROP TABLE p7_plain, p7_ctas, p7_arr, p7_want, p7_copy;

-- 2. INSERT ... ON CONFLICT of a large state: hx_store stores the
-- proposed row's value as a new document before the conflict is known
-- (BEFORE INSERT triggers fire first); DO UPDATE then writes the existing
-- row's document, DO NOTHING writes nothing, and the proposed document is
-- held by no row.  The row reads as upserted, later writes work, and
-- hx_store_gc() deletes exactly the proposed documents (docs/storage.md:
-- a table written by upserts needs it now and then), leaving the row's.
INSERT INTO p7_src VALUES (1, probe7a_doc(300));
INSERT INTO p7_src VALUES (1, probe7a_doc(301)) ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state;
INSERT INTO p7_src VALUES (1, probe7a_doc(302)) ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state;
INSERT INTO p7_src VALUES (1, probe7a_doc(303)) ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state;
INSERT INTO p7_src VALUES (1, probe7a_doc(304)) ON CONFLICT (id) DO NOTHING;
INSERT INTO p7_src VALUES (1, probe7a_doc(305)) ON CONFLICT (id) DO NOTHING;
SELECT jsonb_array_length(state -> 'messages') AS upserted_messages FROM p7_src;
UPDATE p7_src SET state = hx_merge(state, '[{"op": "add", "path": "/n", "value": 1}]'::jsonb);
UPDATE p7_src SET state = hx_merge(state, '[{"op": "add", "path": "/n", "value": 2}]'::jsonb);
SELECT count(*) AS documents_before_gc FROM hx_doc WHERE rel = 'p7_src'::regclass;
SELECT hx_store_gc('p7_src') AS proposed_documents_collected;
SELECT count(*) AS documents_after_gc FROM hx_doc WHERE rel = 'p7_src'::regclass;
SELECT state::jsonb = jsonb_set(probe7a_doc(303), '{n}', '2') AS whole_after_gc FROM p7_src;

-- 3. Placeholders that make the nodes of a damaged document a cycle, or
-- name one node twice: the read recursed until the stack limit (54001),
-- or read the node twice (a wrong value; a chain of such nodes reads an
-- exponential amount, bounded only by statement_timeout).  Each node has
-- one parent: a second reference is damage (XX001).
CREATE TABLE p7_nest (id int PRIMARY KEY, state hxdoc NOT NULL);
CREATE TRIGGER p7_nest_store BEFORE INSERT OR UPDATE OR DELETE ON p7_nest
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
INSERT INTO p7_nest SELECT 1, jsonb_build_object('messages', (SELECT jsonb_agg(jsonb_build_object('i', i,
    'big', CASE WHEN i % 10 = 0 THEN (SELECT string_agg(md5(i::text || k), '') FROM generate_series(1, 150) k) END))
  FROM generate_series(1, 100) i));
SELECT (hx_doc_info(state)).doc AS p7_nest_doc, (hx_doc_info(state)).nodes AS nodes FROM p7_nest \gset
SELECT :nodes AS nodes;
-- node 1 is the array, node 2 its tenth element (an object whose "big"
-- is node 3, a string)
BEGIN;
UPDATE hx_chunk c SET body = o.body, n = o.n, len = o.len, refs = o.refs
  FROM hx_chunk o WHERE c.doc = :p7_nest_doc AND c.node = 3 AND o.doc = :p7_nest_doc AND o.node = 2;
SELECT left(err($$SELECT state::text FROM p7_nest$$), 5) AS cycle;
ROLLBACK;
BEGIN;
-- node 2 becomes an array of two placeholders of node 4 (the twentieth
-- element, which node 1 names too); len is the jsonb's size
UPDATE hx_chunk c SET body = jsonb_build_array(o.body -> 19, o.body -> 19), n = 2, refs = 2,
       len = pg_column_size(jsonb_build_array(o.body -> 19, o.body -> 19))
  FROM hx_chunk o WHERE c.doc = :p7_nest_doc AND c.node = 2 AND o.doc = :p7_nest_doc AND o.node = 1;
SELECT left(err($$SELECT state::text FROM p7_nest$$), 5) AS node_named_twice;
ROLLBACK;

-- 4. A segment that is not what its row of hx_chunk says: the array's
-- one segment replaced by a string (its n, len and refs unchanged) read
-- as that string, a wrong value ({"messages": "str"}), where a segment of
-- another length is an error (XX001, store.sql)
BEGIN;
UPDATE hx_chunk SET body = '"str"' WHERE doc = :p7_nest_doc AND node = 1;
SELECT left(err($$SELECT state::text FROM p7_nest$$), 5) AS segment_of_another_kind;
ROLLBACK;
DROP TABLE p7_nest;

-- 5. A stream name whose index entry does not fit even compressed: from
-- about 8 kB of text that does not compress, the error was the index's
-- own "index row requires N bytes, maximum size is 8191", which names
-- neither the stream nor the log.  Every name too long says what it is.
\set VERBOSITY terse
CREATE TABLE p7_names AS SELECT (SELECT string_agg(md5(i::text), '') FROM generate_series(1, n) i) AS hex, n
  FROM unnest(ARRAY[100, 300, 10000]) n;
SELECT n AS md5s, regexp_replace(split_part(err(format($$SELECT hx_stream_send(%L, '{"type": "CUSTOM", "name": "x"}')$$, '@' || hex)), E'\n', 1),
                      '"@[^"]*"', '"@..."') AS error
  FROM p7_names ORDER BY n;
SELECT regexp_replace(split_part(err($$SELECT hx_stream_send('@' || repeat('a', 100000000), '{"type": "CUSTOM", "name": "x"}')$$), E'\n', 1),
                      '"@[^"]*"', '"@..."') AS compressible_but_huge;
DROP TABLE p7_names;
\set VERBOSITY default

-- 6. hx_store checked how it fires (BEFORE, FOR EACH ROW) but not on
-- what: a trigger without DELETE left every deleted row's document
-- behind; one with UPDATE OF another column, or a WHEN that skips some
-- rows, let an UPDATE copy a value in pieces into another row without
-- firing (the two rows then shared one document, as with a disabled
-- trigger) or leave a large value in line.  Refused when a row fires
-- (39P01, as a trigger of the wrong timing is), nothing stored.
CREATE TABLE p7_events (id int PRIMARY KEY, state hxdoc NOT NULL, other int);
CREATE TRIGGER p7_events_store BEFORE INSERT OR UPDATE ON p7_events
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
SELECT left(err($$INSERT INTO p7_events VALUES (1, probe7a_doc(300))$$), 5) AS without_delete;
DROP TRIGGER p7_events_store ON p7_events;
CREATE TRIGGER p7_events_store BEFORE INSERT OR UPDATE OF other OR DELETE ON p7_events
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
SELECT left(err($$INSERT INTO p7_events VALUES (2, probe7a_doc(300))$$), 5) AS update_of_another_column;
DROP TRIGGER p7_events_store ON p7_events;
CREATE TRIGGER p7_events_store BEFORE INSERT OR UPDATE OR DELETE ON p7_events
  FOR EACH ROW WHEN (current_setting('probe7a.skip', true) IS NULL) EXECUTE FUNCTION hx_store('state');
SELECT left(err($$INSERT INTO p7_events VALUES (3, probe7a_doc(300))$$), 5) AS with_when;
-- an option given twice (which one was meant is not known): 22023
DROP TRIGGER p7_events_store ON p7_events;
CREATE TRIGGER p7_events_store BEFORE INSERT OR UPDATE OR DELETE ON p7_events
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=4096', 'threshold=256');
SELECT err($$INSERT INTO p7_events VALUES (4, probe7a_doc(300))$$) AS option_twice;
SELECT count(*) AS rows, (SELECT count(*) FROM hx_doc WHERE rel = 'p7_events'::regclass) AS documents FROM p7_events;
DROP TABLE p7_events;

-- 7. A deferred constraint trigger (hx_lock_once on a member of the
-- state, or one of the user's that reads OLD) of a row written three
-- times in a transaction: at COMMIT it reads the first write's OLD and
-- NEW, whose replaced segments the later writes of the same transaction
-- had deleted, and the COMMIT failed with XH401 (a jsonb column commits).
-- The segments a transaction replaced stay until a later transaction
-- writes the row, so that its deferred triggers read its values.
CREATE TABLE p7_deferred (id int PRIMARY KEY, state hxdoc NOT NULL);
CREATE TRIGGER p7_deferred_store BEFORE INSERT OR UPDATE OR DELETE ON p7_deferred
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
CREATE CONSTRAINT TRIGGER p7_deferred_lock AFTER INSERT OR UPDATE ON p7_deferred
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION hx_lock_once('state:/project');
CREATE TABLE p7_audit (old_first text, new_first text);
CREATE FUNCTION p7_audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO p7_audit VALUES (OLD.state -> 'messages' -> 0 ->> 't', NEW.state -> 'messages' -> 0 ->> 't');
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER p7_deferred_audit AFTER UPDATE ON p7_deferred
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION p7_audit_row();
INSERT INTO p7_deferred SELECT 1, probe7a_doc(300) || '{"project": "p1"}';
BEGIN;
UPDATE p7_deferred SET state = jsonb_set(state, '{messages,0,t}', '"a"');
UPDATE p7_deferred SET state = jsonb_set(state, '{messages,0,t}', '"b"');
UPDATE p7_deferred SET state = jsonb_set(state, '{messages,0,t}', '"c"');
COMMIT;
SELECT state -> 'messages' -> 0 ->> 't' AS first, state ->> 'project' AS project FROM p7_deferred;
SELECT * FROM p7_audit ORDER BY new_first;
-- the guard still refuses what it guards (XH101), when it runs
BEGIN;
UPDATE p7_deferred SET state = jsonb_set(state, '{messages,0,t}', '"d"');
UPDATE p7_deferred SET state = jsonb_set(state, '{project}', '"p2"');
SELECT left(err($$SET CONSTRAINTS ALL IMMEDIATE$$), 5) AS changed_project;
ROLLBACK;
DROP TABLE p7_deferred, p7_audit;
DROP FUNCTION p7_audit_row();

-- ---------------------------------------------------------------------
-- 8. Guards: what the probe found right
-- ---------------------------------------------------------------------

-- a role that may read a table copies its values into a table of its
-- own with the trigger disabled, enables it and writes and deletes them:
-- its writes store documents of its own (hx_doc says whose each is) and
-- never write over, or drop, the other table's
CREATE ROLE probe7a_reader;
GRANT SELECT ON p7_src TO probe7a_reader;
GRANT CREATE ON SCHEMA public TO probe7a_reader;
CREATE TABLE p7_want AS SELECT id, state::jsonb AS s FROM p7_src;
SET ROLE probe7a_reader;
CREATE TABLE p7_mine (id int PRIMARY KEY, state hxdoc NOT NULL);
CREATE TRIGGER p7_mine_store BEFORE INSERT OR UPDATE OR DELETE ON p7_mine
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
ALTER TABLE p7_mine DISABLE TRIGGER p7_mine_store;
INSERT INTO p7_mine SELECT id, state FROM p7_src;
INSERT INTO p7_mine SELECT id + 1, state FROM p7_src;
ALTER TABLE p7_mine ENABLE TRIGGER p7_mine_store;
UPDATE p7_mine SET state = jsonb_set(state, '{messages,0,t}', '"mine"') WHERE id = 1;
DELETE FROM p7_mine WHERE id = 2;
INSERT INTO p7_mine VALUES (3, '{}');
SELECT state -> 'messages' -> 0 ->> 't' AS mine FROM p7_mine WHERE id = 1;
RESET ROLE;
UPDATE p7_src SET state = hx_merge(state, '[{"op": "add", "path": "/n", "value": 6}]'::jsonb);
SELECT s.state::jsonb - 'n' = w.s - 'n' AS source_whole, s.state ->> 'n' AS n
  FROM p7_src s JOIN p7_want w USING (id);
SELECT count(*) AS documents_of_source FROM hx_doc WHERE rel = 'p7_src'::regclass;
DROP TABLE p7_mine, p7_want;
REVOKE ALL ON p7_src FROM probe7a_reader;
REVOKE CREATE ON SCHEMA public FROM probe7a_reader;
DROP ROLE probe7a_reader;

-- hx_store_backfill is an UPDATE as its caller: a role without UPDATE on
-- the table is refused before anything runs (42501), and wrong arguments
-- are named
CREATE TABLE p7_move (id int PRIMARY KEY, state jsonb, state_doc hxdoc);
CREATE TRIGGER p7_move_store BEFORE INSERT OR UPDATE OR DELETE ON p7_move
  FOR EACH ROW EXECUTE FUNCTION hx_store('state_doc', 'from=state');
CREATE ROLE probe7a_writer;
GRANT SELECT, INSERT ON p7_move TO probe7a_writer;
SET ROLE probe7a_writer;
SELECT err($$SELECT hx_store_backfill('p7_move', 'state_doc')$$) AS without_update;
RESET ROLE;
SELECT err($$SELECT hx_store_backfill('p7_move', 'state')$$) AS not_the_stored_column;
SELECT err($$SELECT hx_store_backfill('p7_move', 'state_doc', -1)$$) AS negative_start;
SELECT err($$SELECT hx_store_backfill('p7_move', 'state_doc', 0, 0)$$) AS empty_batch;
DROP TABLE p7_move;
DROP ROLE probe7a_writer;

-- DROP SCHEMA ... CASCADE (a table and a partitioned one) and DROP
-- DOMAIN ... CASCADE of the column's type: their documents go with them
CREATE SCHEMA p7_schema;
CREATE TABLE p7_schema.a (id int PRIMARY KEY, state hxdoc NOT NULL);
CREATE TRIGGER a_store BEFORE INSERT OR UPDATE OR DELETE ON p7_schema.a
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
CREATE TABLE p7_schema.p (id int, state hxdoc NOT NULL) PARTITION BY RANGE (id);
CREATE TABLE p7_schema.p1 PARTITION OF p7_schema.p FOR VALUES FROM (0) TO (100);
CREATE TRIGGER p_store BEFORE INSERT OR UPDATE OR DELETE ON p7_schema.p
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
INSERT INTO p7_schema.a VALUES (1, probe7a_doc(300));
INSERT INTO p7_schema.p VALUES (1, probe7a_doc(300));
CREATE DOMAIN p7_state AS hxdoc;
CREATE TABLE p7_dom (id int PRIMARY KEY, state p7_state);
CREATE TRIGGER p7_dom_store BEFORE INSERT OR UPDATE OR DELETE ON p7_dom
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
INSERT INTO p7_dom VALUES (1, probe7a_doc(300));
SELECT count(*) AS documents FROM hx_doc
 WHERE rel IN ('p7_schema.a'::regclass, 'p7_schema.p1'::regclass, 'p7_dom'::regclass);
SELECT oid AS p7_a, 'p7_schema.p1'::regclass::oid AS p7_p1, 'p7_dom'::regclass::oid AS p7_dom FROM pg_class
 WHERE oid = 'p7_schema.a'::regclass \gset
-- hx_store_gc() of a partitioned table collects its partitions' (the
-- row deleted with its trigger disabled: one document no row holds); a
-- relation that is not a table, or no relation, is an error, not 0
ALTER TABLE p7_schema.p DISABLE TRIGGER p_store;
DELETE FROM p7_schema.p;
ALTER TABLE p7_schema.p ENABLE TRIGGER p_store;
SELECT hx_store_gc('p7_schema.p') AS collected_of_partitions;
CREATE VIEW p7_schema.v AS SELECT * FROM p7_schema.a;
CREATE SEQUENCE p7_schema.s;
SELECT err($$SELECT hx_store_gc('p7_schema.v')$$) AS view,
       err($$SELECT hx_store_gc('p7_schema.s')$$) AS sequence,
       err($$SELECT hx_store_gc('p7_schema.a_pkey')$$) AS index,
       err($$SELECT hx_store_gc(0)$$) AS no_relation;
DROP SCHEMA p7_schema CASCADE;
DROP DOMAIN p7_state CASCADE;
SELECT count(*) AS documents_left FROM hx_doc WHERE rel IN (:p7_a, :p7_p1, :p7_dom);
DROP TABLE p7_dom;

-- a row of the stream trigger's table whose key makes a stream name too
-- long for the log: refused (54000), and no document of it is left
CREATE TABLE p7_keys (id text PRIMARY KEY, state hxdoc NOT NULL DEFAULT '{}');
CREATE TRIGGER p7_keys_store BEFORE INSERT OR UPDATE OR DELETE ON p7_keys
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
CREATE TRIGGER p7_keys_stream AFTER INSERT OR UPDATE OR DELETE ON p7_keys
  FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
SELECT left(err($$INSERT INTO p7_keys SELECT string_agg(md5(i::text), ''), probe7a_doc(300) FROM generate_series(1, 84) i$$), 5) AS long_key;
SELECT count(*) AS rows, (SELECT count(*) FROM hx_doc WHERE rel = 'p7_keys'::regclass) AS documents FROM p7_keys;
DROP TABLE p7_keys;

DROP TABLE p7_src;
DROP FUNCTION probe7a_doc(int);
DROP FUNCTION probe7a_check(text);
RESET client_min_messages;
