--
-- store: hxdoc, a state stored so that a write writes what it changed
-- (the hx_store trigger), and read as jsonb
--
-- (err() is defined in setup.sql)
CREATE FUNCTION msg(i int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('id', 'm' || i, 'role', CASE WHEN i % 2 = 0 THEN 'user' ELSE 'assistant' END,
    'content', repeat('word ', 30) || i) $$;
CREATE TABLE chat (id text PRIMARY KEY, project text, state hxdoc NOT NULL DEFAULT '{}');
CREATE TRIGGER chat_store BEFORE INSERT OR UPDATE OR DELETE ON chat
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
CREATE CONSTRAINT TRIGGER chat_project AFTER INSERT OR UPDATE ON chat
  FOR EACH ROW EXECUTE FUNCTION hx_lock_once('state:/project');
CREATE TRIGGER chat_stream AFTER INSERT OR UPDATE OR DELETE ON chat
  FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');

-- a small state is stored in line, as a jsonb column stores it
INSERT INTO chat (id, state) VALUES ('c-1', '{"phase": "chatting"}');
SELECT id, state, (hx_doc_info(state)).format FROM chat;

-- writes are jsonb's: hx_merge takes the value through the implicit cast
UPDATE chat SET state = hx_merge(state, jsonb_build_array(jsonb_build_object(
  'op', 'append', 'path', '/messages', 'items', (SELECT jsonb_agg(msg(i)) FROM generate_series(1, 40) i))));
-- past the threshold (2 kB by default) it is stored in pieces: the
-- messages are a node of segments, the rest stays in the row
SELECT format, nodes, segments, json_bytes FROM chat, hx_doc_info(state);
-- it reads as jsonb, however it is stored
SELECT jsonb_array_length(state -> 'messages') AS messages, state ->> 'phase' AS phase,
       state @> '{"phase": "chatting"}' AS contains, state -> 'messages' -> 39 ->> 'id' AS last
  FROM chat;
SELECT left(state::text, 60) AS text, pg_typeof(state::jsonb) AS cast FROM chat;
SELECT left(to_json(state)::text, 30) AS to_json, left(row_to_json(chat)::text, 40) AS row_to_json FROM chat;
SELECT jsonb_typeof(jsonb_agg(state)) FROM chat;

-- an append writes a generation that adds a segment; a replace rewrites
-- the row's skeleton; neither rewrites the other segments
SELECT gen AS gen_before, segments AS segments_before FROM chat, hx_doc_info(state) \gset
UPDATE chat SET state = hx_merge(state, jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/messages', 'items', jsonb_build_array(msg(41)))));
UPDATE chat SET state = hx_merge(state, '[{"op": "replace", "path": "/phase", "value": "building"}, {"op": "increment", "path": "/turns", "by": 1}]');
SELECT gen - :gen_before AS generations, segments - :segments_before AS new_segments,
       (SELECT count(*) FROM hx_chunk WHERE hx_chunk.doc = i.doc AND hx_chunk.gen = :gen_before) AS untouched_first_segments
  FROM chat, hx_doc_info(state) i;
-- the stream has each change as a delta, as it would for jsonb
SELECT seq, type, event -> 'delta' -> 0 ->> 'op' AS op, event -> 'delta' -> 0 ->> 'path' AS path
  FROM hx_event WHERE stream = 'chat:c-1' ORDER BY seq;

-- an UPDATE that leaves the state alone stores nothing and logs nothing
UPDATE chat SET project = 'p';
UPDATE chat SET state = hx_merge(state, '[]');
SELECT gen - :gen_before AS generations, (SELECT max(seq) FROM hx_event WHERE stream = 'chat:c-1') AS last_seq
  FROM chat, hx_doc_info(state);

-- the guards read members of an hxdoc column as of a jsonb one
UPDATE chat SET state = hx_merge(state, '[{"op": "replace", "path": "/project", "value": "p-1"}]');
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE chat SET state = hx_merge(state, '[{"op": "replace", "path": "/project", "value": "p-2"}]')$$);
\pset tuples_only off
\pset format aligned

-- the value before a write is read by AFTER triggers (OLD), and by a
-- reader one generation behind; one two generations behind is gone when
-- those writes replaced its pieces (a value reads while its pieces are
-- stored: writes that left them alone leave it readable)
CREATE TABLE audit (old jsonb, new jsonb);
CREATE FUNCTION audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit VALUES (OLD.state::jsonb, NEW.state::jsonb);
  RETURN NULL;
END $$;
CREATE TRIGGER chat_audit AFTER UPDATE ON chat FOR EACH ROW EXECUTE FUNCTION audit();
UPDATE chat SET state = hx_merge(state, jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/messages', 'items', jsonb_build_array(msg(42)))));
SELECT jsonb_array_length(old -> 'messages') AS old_messages, jsonb_array_length(new -> 'messages') AS new_messages FROM audit;
DROP TRIGGER chat_audit ON chat;
CREATE FUNCTION held_value(twice bool, edit bool) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  v hxdoc;
  change jsonb;
BEGIN
  SELECT state INTO v FROM chat WHERE id = 'c-1';
  FOR i IN 1 .. CASE WHEN twice THEN 2 ELSE 1 END LOOP
    change := '[{"op": "increment", "path": "/turns", "by": 1}]';
    IF edit THEN
      change := change || jsonb_build_object('op', 'replace', 'path', '/messages/0/content', 'value', 'edit ' || md5(random()::text));
    END IF;
    UPDATE chat SET state = hx_merge(state, change);
  END LOOP;
  RETURN (v ->> 'turns') || ' ' || left(v -> 'messages' -> 0 ->> 'content', 4);
END $$;
SELECT held_value(false, true) AS one_behind;
SELECT held_value(true, false) AS two_behind_untouched;
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT held_value(true, true)$$);
\pset tuples_only off
\pset format aligned

-- a write that rolls back leaves the stored document as it was, whole
BEGIN;
UPDATE chat SET state = hx_merge(state, '[{"op": "delete", "path": "/messages"}]');
SELECT state ? 'messages' AS has_messages FROM chat;
ROLLBACK;
BEGIN;
SAVEPOINT s;
UPDATE chat SET state = hx_merge(state, jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/messages', 'items', jsonb_build_array(msg(43)))));
ROLLBACK TO SAVEPOINT s;
UPDATE chat SET state = hx_merge(state, jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/messages', 'items', jsonb_build_array(msg(44)))));
COMMIT;
SELECT jsonb_array_length(state -> 'messages') AS messages, state -> 'messages' -> -1 ->> 'id' AS last FROM chat;
SELECT hx_stream_state_at('chat:c-1', max(seq)) = (SELECT state::jsonb FROM chat) AS replays
  FROM hx_event WHERE stream = 'chat:c-1';

-- a value copied to another row or table: a table with hx_store gives it
-- a document of its own; one without keeps it as it is, readable until
-- two writes of the original replaced its pieces
INSERT INTO chat (id, state) SELECT 'c-2', state FROM chat WHERE id = 'c-1';
SELECT count(DISTINCT i.doc) AS documents, bool_and(c.state::jsonb = (SELECT state::jsonb FROM chat WHERE id = 'c-1')) AS equal
  FROM chat c, hx_doc_info(c.state) i;
CREATE TABLE copied (state hxdoc);
INSERT INTO copied SELECT state FROM chat WHERE id = 'c-1';
SELECT jsonb_array_length(state -> 'messages') AS copy_reads FROM copied;
UPDATE chat SET state = hx_merge(state, '[{"op": "replace", "path": "/messages/1/content", "value": "edit 1"}]') WHERE id = 'c-1';
UPDATE chat SET state = hx_merge(state, '[{"op": "replace", "path": "/messages/1/content", "value": "edit 2"}]') WHERE id = 'c-1';
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT state::text FROM copied$$);
\pset tuples_only off
\pset format aligned
-- kept as jsonb, a copy is a value of its own
DELETE FROM copied;
INSERT INTO copied SELECT state::jsonb FROM chat WHERE id = 'c-1';
SELECT (hx_doc_info(state)).format, jsonb_array_length(state -> 'messages') AS messages FROM copied;
DROP TABLE copied;

-- only hx_store may put a value in pieces into a row it stores: a copy
-- made while it did not fire shares the other row's document, which
-- hx_store_gc() reports; the second of the two rows written is refused
ALTER TABLE chat DISABLE TRIGGER chat_store;
INSERT INTO chat (id, state) SELECT 'c-3', state FROM chat WHERE id = 'c-1';
ALTER TABLE chat ENABLE TRIGGER chat_store;
SELECT hx_store_gc('chat') AS collected;
UPDATE chat SET state = hx_merge(state, '[{"op": "replace", "path": "/messages/2/content", "value": "fork"}]') WHERE id = 'c-3';
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE chat SET state = hx_merge(state, '[{"op": "replace", "path": "/messages/2/content", "value": "other"}]') WHERE id = 'c-1'$$);
\pset tuples_only off
\pset format aligned
-- the way out the warning gives: both in line, then the shared document goes
ALTER TABLE chat DISABLE TRIGGER chat_store;
UPDATE chat SET state = state::jsonb WHERE id IN ('c-1', 'c-3');
ALTER TABLE chat ENABLE TRIGGER chat_store;
SELECT hx_store_gc('chat') AS collected;
SELECT id, (hx_doc_info(state)).format, state -> 'messages' -> 2 ->> 'content' AS third FROM chat WHERE id IN ('c-1', 'c-3') ORDER BY id;
UPDATE chat SET state = hx_merge(state, '[{"op": "replace", "path": "/messages/2/content", "value": "own"}]') WHERE id IN ('c-1', 'c-3');
SELECT count(DISTINCT (hx_doc_info(state)).doc) AS documents FROM chat WHERE id IN ('c-1', 'c-3');
DELETE FROM chat WHERE id = 'c-3';

-- a state that shrinks below half the threshold goes back in line; its
-- document is deleted by a later write of the table, or hx_store_gc()
UPDATE chat SET state = '{"phase": "done", "project": "p-1"}' WHERE id = 'c-2';
SELECT id, (hx_doc_info(state)).format FROM chat ORDER BY id;
SELECT count(*) AS dropped FROM hx_doc WHERE dropped;
UPDATE chat SET state = hx_merge(state, '[{"op": "increment", "path": "/turns", "by": 1}]') WHERE id = 'c-1';
SELECT count(*) AS dropped FROM hx_doc WHERE dropped;

-- rows deleted, a table emptied or dropped: their documents go
DELETE FROM chat WHERE id = 'c-1';
SELECT count(*) AS dropped FROM hx_doc WHERE dropped;
SELECT hx_store_gc('chat') AS collected;
SELECT count(*) AS documents, (SELECT count(*) FROM hx_chunk) AS segments FROM hx_doc;
INSERT INTO chat (id, state) SELECT 't-' || g, jsonb_build_object('messages', (SELECT jsonb_agg(msg(i)) FROM generate_series(1, 30) i)) FROM generate_series(1, 3) g;
TRUNCATE chat;
SELECT hx_store_gc() AS collected_after_truncate;
SELECT count(*) AS documents, (SELECT count(*) FROM hx_chunk) AS segments FROM hx_doc;
INSERT INTO chat (id, state) SELECT 'd-' || g, jsonb_build_object('messages', (SELECT jsonb_agg(msg(i)) FROM generate_series(1, 30) i)) FROM generate_series(1, 3) g;
CREATE TABLE other (id int PRIMARY KEY, a hxdoc, b hxdoc);
CREATE TRIGGER other_store BEFORE INSERT OR UPDATE OR DELETE ON other
  FOR EACH ROW EXECUTE FUNCTION hx_store('a', 'b', 'threshold=512', 'segment=2048');
INSERT INTO other VALUES (1, (SELECT jsonb_agg(msg(i)) FROM generate_series(1, 10) i), (SELECT jsonb_agg(msg(i)) FROM generate_series(1, 10) i)),
                         (2, NULL, '[1]');
SELECT id, (hx_doc_info(a)).format AS a, (hx_doc_info(b)).format AS b FROM other ORDER BY id;
ALTER TABLE other DROP COLUMN b;
SELECT count(*) AS documents_of_other FROM hx_doc WHERE rel = 'other'::regclass;
DROP TABLE other;
SELECT count(*) AS documents_of_dropped FROM hx_doc WHERE NOT EXISTS (SELECT 1 FROM pg_class WHERE oid = hx_doc.rel);
SELECT count(*) AS documents_of_chat FROM hx_doc WHERE rel = 'chat'::regclass;

-- a role that may write the table writes its state, and one that may read
-- it reads it; neither has any privilege on the side tables
CREATE ROLE regress_hx_writer;
CREATE ROLE regress_hx_reader;
GRANT SELECT, INSERT, UPDATE, DELETE ON chat TO regress_hx_writer;
GRANT SELECT ON chat TO regress_hx_reader;

SET ROLE regress_hx_writer;
UPDATE chat SET state = hx_merge(state, '[{"op": "replace", "path": "/by", "value": "writer"}]') WHERE id = 'd-1';
INSERT INTO chat (id, state) SELECT 'w-1', state FROM chat WHERE id = 'd-2';
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT count(*) FROM hx_chunk$$);
SELECT err($$SELECT hx_store_gc()$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;
SET ROLE regress_hx_reader;
SELECT id, state ->> 'by' AS by, jsonb_array_length(state -> 'messages') AS messages FROM chat ORDER BY id;
RESET ROLE;

-- misuse, and input that is not JSON
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT hx_store()$$);
CREATE TABLE wrong (id int, j jsonb, d hxdoc);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store(); INSERT INTO wrong VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('j'); INSERT INTO wrong VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('nope'); INSERT INTO wrong VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('d', 'threshold=12'); INSERT INTO wrong VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('d', 'threshold=lots'); INSERT INTO wrong VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('d', 'pages=2'); INSERT INTO wrong VALUES (1)$$);
SELECT err($$CREATE TRIGGER w AFTER INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('d'); INSERT INTO wrong VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH STATEMENT EXECUTE FUNCTION hx_store('d'); INSERT INTO wrong VALUES (1)$$);
SELECT err($$SELECT '{"a": '::hxdoc$$);
SELECT err($$SELECT E'{"a": "\\u0000"}'::hxdoc$$);
SELECT err($$SELECT hx_store_dropped()$$);
\pset tuples_only off
\pset format aligned
DROP TABLE wrong;
SELECT hx_doc_info(NULL) IS NULL AS null_in_null_out, '"s"'::hxdoc::jsonb AS scalar, 'null'::hxdoc::text AS json_null;

-- a segment is read in whichever form it is stored: lz4 or pglz (as
-- hx_store compresses it, by the server's build), or not compressed; a
-- segment that is not what its row of hx_chunk says is an error, not a
-- wrong value
CREATE TABLE forms (id int PRIMARY KEY, state hxdoc NOT NULL);
CREATE TRIGGER forms_store BEFORE INSERT OR UPDATE OR DELETE ON forms
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
INSERT INTO forms SELECT 1, jsonb_build_object('messages', (SELECT jsonb_agg(msg(i)) FROM generate_series(1, 120) i));
CREATE TABLE forms_before AS SELECT state::jsonb AS s FROM forms;
SELECT (SELECT (hx_doc_info(state)).doc FROM forms) AS forms_doc \gset
UPDATE hx_chunk SET body = CASE seg % 3 WHEN 0 THEN hx_compress(body::text::jsonb, 'pglz') WHEN 1 THEN body::text::jsonb ELSE body END
 WHERE doc = :forms_doc;
SELECT array_agg(DISTINCT coalesce(pg_column_compression(body), 'none') ORDER BY coalesce(pg_column_compression(body), 'none')) AS forms, count(*) > 3 AS segments
  FROM hx_chunk WHERE doc = :forms_doc;
SELECT state::jsonb = (SELECT s FROM forms_before) AS same_value, jsonb_array_length(state -> 'messages') AS messages FROM forms;
\pset tuples_only on
\pset format unaligned
BEGIN;
UPDATE hx_chunk SET n = n + 1 WHERE doc = :forms_doc AND (node, seg) = (SELECT node, max(seg) FROM hx_chunk WHERE doc = :forms_doc GROUP BY node);
SELECT regexp_replace(err($$SELECT state::text FROM forms$$), '([ (]|, )\d+', '\1N', 'g');
ROLLBACK;
BEGIN;
UPDATE hx_chunk SET len = len + 4 WHERE doc = :forms_doc AND (node, seg) = (SELECT node, max(seg) FROM hx_chunk WHERE doc = :forms_doc GROUP BY node);
SELECT regexp_replace(err($$SELECT state::text FROM forms$$), '([ (]|, )\d+', '\1N', 'g');
ROLLBACK;
\pset tuples_only off
\pset format aligned
DROP TABLE forms, forms_before;

-- nothing of a document goes out of line into hx_chunk's TOAST table
-- (logical decoding could not read it): a large string, even one that does
-- not compress, is stored in pieces cut between characters, and a member
-- over 3,840 bytes is a node whatever the threshold
CREATE TABLE big_strings (id int PRIMARY KEY, state hxdoc NOT NULL);
CREATE TRIGGER big_strings_store BEFORE INSERT OR UPDATE OR DELETE ON big_strings
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=65536');
INSERT INTO big_strings VALUES
  (1, jsonb_build_object('output', (SELECT string_agg(md5(i::text) || 'é€', '') FROM generate_series(1, 4000) i))),
  (2, jsonb_build_object('tools', (SELECT jsonb_agg(jsonb_build_object('out', repeat(md5(i::text), 200))) FROM generate_series(1, 30) i)));
CREATE TABLE big_before AS SELECT id, state::jsonb AS s FROM big_strings;
SELECT id, (hx_doc_info(state)).format, (hx_doc_info(state)).segments > 10 AS many_segments,
       state::jsonb = (SELECT s FROM big_before b WHERE b.id = t.id) AS same
  FROM big_strings t ORDER BY id;
UPDATE big_strings SET state = hx_merge(state, jsonb_build_array(jsonb_build_object('op', 'replace', 'path', '/output',
  'value', (SELECT string_agg('€' || md5(i::text), '') FROM generate_series(1, 3000) i)))) WHERE id = 1;
SELECT length(state ->> 'output') AS chars, state ->> 'output' = (SELECT string_agg('€' || md5(i::text), '') FROM generate_series(1, 3000) i) AS same
  FROM big_strings WHERE id = 1;
SELECT max(pg_column_size(body)) <= 7680 AS segments_in_rows,
       (SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE oid = 'hx_chunk'::regclass) AS toast_bytes
  FROM hx_chunk;
DROP TABLE big_strings, big_before;

-- Arrays read whole from their segments: a segment's elements are copied
-- as one block where that keeps each element's alignment, else one by
-- one; either way the value is byte for byte what jsonb would hold.
-- Elements of every type first in a segment (strings, numbers, booleans,
-- nulls, objects, arrays), with segments that also hold nodes (a large
-- member of an element) and segments that hold none
CREATE TABLE arrays (id int PRIMARY KEY, state hxdoc NOT NULL);
CREATE TRIGGER arrays_store BEFORE INSERT OR UPDATE OR DELETE ON arrays
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
CREATE TABLE arrays_twin (id int PRIMARY KEY, state jsonb NOT NULL);
INSERT INTO arrays_twin
SELECT k, jsonb_build_object('items', (SELECT jsonb_agg(CASE (i + k) % 7
      WHEN 0 THEN to_jsonb('s' || repeat('x', i % 5))
      WHEN 1 THEN to_jsonb(i * 1.5)
      WHEN 2 THEN to_jsonb(i % 2 = 0)
      WHEN 3 THEN 'null'::jsonb
      WHEN 4 THEN jsonb_build_object('n', i, 't', repeat('y', i % 3))
      WHEN 5 THEN jsonb_build_array(i, 'z', jsonb_build_array(i))
      ELSE CASE WHEN k = 3 AND i % 50 = 6 THEN jsonb_build_object('big', repeat(md5(i::text), 40)) ELSE to_jsonb(i) END END
    ORDER BY i) FROM generate_series(1, 400) i))
  FROM generate_series(0, 6) k;
INSERT INTO arrays SELECT id, state FROM arrays_twin;
UPDATE arrays SET state = hx_merge(state, jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/items', 'items', jsonb_build_array('tail', 1, true))));
UPDATE arrays_twin SET state = hx_merge(state, jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/items', 'items', jsonb_build_array('tail', 1, true))));
SELECT a.id, (hx_doc_info(a.state)).format, (hx_doc_info(a.state)).segments > 5 AS many_segments,
       (hx_doc_info(a.state)).nodes > 1 AS nested_nodes,
       a.state::jsonb = t.state AS same, a.state::jsonb::text = t.state::text AS same_text,
       pg_column_size(a.state::jsonb) = pg_column_size(t.state::text::jsonb) AS same_size,
       jsonb_array_length(a.state -> 'items') AS n
  FROM arrays a JOIN arrays_twin t USING (id) ORDER BY a.id;
DROP TABLE arrays, arrays_twin;

DROP TABLE chat, audit;
DROP FUNCTION audit(), held_value(bool, bool), msg(int);

DROP ROLE regress_hx_writer, regress_hx_reader;
SELECT count(*) AS documents_left FROM hx_doc;
DELETE FROM hx_event;
