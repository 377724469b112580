--
-- store_abuse: hxdoc and hx_store under hostile input and misuse, as an
-- untrusted role would try them: every bad input gets a clear error, and
-- no misuse gives a wrong value or loses a stored one.  (The misuses that
-- do lose or tear a value are in store_defects.sql.)
--
-- (err() is defined in setup.sql)
CREATE FUNCTION big(i int, n int DEFAULT 60) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('n', i, 'log',
    (SELECT jsonb_agg(repeat('x', 60) || g) FROM generate_series(1, n) g)) $$;
CREATE FUNCTION append(v jsonb, item text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT hx_merge(v, jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/log', 'items', jsonb_build_array(item)))) $$;
CREATE FUNCTION fmt(v hxdoc) RETURNS text LANGUAGE sql AS $$ SELECT (hx_doc_info(v)).format $$;

-- ---------------------------------------------------------------------
-- Input: JSON text and jsonb's binary format, hostile
-- ---------------------------------------------------------------------
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT (repeat('[', 100000) || repeat(']', 100000))::hxdoc$$);
SELECT err($$SELECT '{"a": "\u0000"}'::hxdoc$$);
SELECT err($$SELECT '{"\u0000": 1}'::hxdoc$$);
SELECT err($$SELECT '{"a": "\ud800"}'::hxdoc$$);
SELECT err($$SELECT '{"a": 1} x'::hxdoc$$);
SELECT err($$SELECT ''::hxdoc$$);
SELECT err($$SELECT convert_from('\xc0af', 'UTF8')::hxdoc$$);
-- no text spells a value in pieces: an object whose only key is the
-- placeholder's (NUL) cannot be written, in text or in jsonb
SELECT err($$SELECT jsonb_build_object(chr(0), 1)::hxdoc$$);
SELECT err($$SELECT '{"\u0000": 1}'::json::jsonb::hxdoc$$);
\pset tuples_only off
\pset format aligned
-- what looks like a placeholder, but is not one, is an ordinary value
SELECT v::text, fmt(v) FROM (SELECT '{"\\u0000": 1, "": {"": 2}}'::hxdoc AS v) s;

-- jsonb's binary format (COPY BINARY, a driver's binary parameters): a
-- version byte, then JSON text; the same checks
CREATE TABLE recv_raw (b bytea);
CREATE TABLE recv_doc (v hxdoc);
CREATE FUNCTION recv(raw bytea) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  f text := current_setting('data_directory') || '/store_abuse_recv.bin';
  r text;
BEGIN
  DELETE FROM recv_raw;
  DELETE FROM recv_doc;
  INSERT INTO recv_raw VALUES (raw);
  -- the binary COPY of a bytea column frames its bytes as it would frame
  -- an hxdoc value's: read back into an hxdoc column, they reach its recv
  EXECUTE format('COPY recv_raw TO %L (FORMAT binary)', f);
  EXECUTE format('COPY recv_doc FROM %L (FORMAT binary)', f);
  SELECT v::text || ' (' || fmt(v) || ')' INTO r FROM recv_doc;
  RETURN r;
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT label, recv(raw) FROM (VALUES
  ('valid', '\x017b2261223a317d'::bytea),
  ('version byte only', '\x01'),
  ('NUL inside a string', '\x017b2261223a2200227d'),
  ('\u0000 escape', '\x017b2261223a225c7530303030227d'),
  ('invalid UTF-8', '\x017b2261223a22ff227d'),
  ('overlong UTF-8', '\x01c0af'),
  ('lone surrogate escape', '\x017b2261223a225c7564383030227d')) AS t(label, raw);
SELECT recv('\x01' || convert_to(repeat('[', 100000) || repeat(']', 100000), 'UTF8')) AS deep;
-- a large value comes in whole, and is in line until hx_store stores it
SELECT recv('\x01' || convert_to(big(1, 2000)::text, 'UTF8')) = big(1, 2000)::text || ' (inline)' AS large;
-- and goes out whole, in pieces or not: COPY BINARY of a stored value
CREATE TABLE copied_out (id int PRIMARY KEY, state hxdoc NOT NULL);
CREATE TRIGGER copied_out_store BEFORE INSERT OR UPDATE OR DELETE ON copied_out
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
INSERT INTO copied_out VALUES (1, big(1)), (2, '{"small": true}');
DO $$
DECLARE
  f text := current_setting('data_directory') || '/store_abuse_copy.bin';
BEGIN
  EXECUTE format('COPY copied_out TO %L (FORMAT binary)', f);
  CREATE TEMP TABLE copied_in (id int, state hxdoc);
  EXECUTE format('COPY copied_in FROM %L (FORMAT binary)', f);
END $$;
SELECT o.id, fmt(o.state) AS stored, fmt(i.state) AS copied, o.state::jsonb = i.state::jsonb AS equal
  FROM copied_out o JOIN copied_in i USING (id) ORDER BY id;
DROP TABLE recv_raw, recv_doc, copied_in;
DROP FUNCTION recv(bytea);

-- ---------------------------------------------------------------------
-- Casts, in line and in pieces
-- ---------------------------------------------------------------------
SELECT id, pg_typeof(state::jsonb) AS jsonb, pg_typeof(state::json) AS json,
       state::json::jsonb = state::jsonb AS json_equal, state::text::jsonb = state::jsonb AS text_equal,
       state::text::hxdoc::jsonb = state::jsonb AS text_round_trip,
       (state::jsonb)::hxdoc::jsonb = state::jsonb AS jsonb_round_trip,
       to_jsonb(state) = state::jsonb AS to_jsonb, to_json(state)::jsonb = state::jsonb AS to_json,
       state = state AS equal_itself, state @> '{}' AS contains
  FROM copied_out ORDER BY id;
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT '{}'::json::hxdoc$$);
SELECT err($$SELECT '{}'::hxdoc::int$$);
SELECT err($$SELECT '{}'::hxdoc::bytea$$);
SELECT err($$SELECT DISTINCT state FROM copied_out$$);
SELECT err($$SELECT state FROM copied_out GROUP BY state$$);
SELECT err($$SELECT state FROM copied_out ORDER BY state$$);
-- the implicit cast reads the pieces: not IMMUTABLE, so no index on it
SELECT err($$CREATE INDEX ON copied_out ((state ->> 'n'))$$);
SELECT err($$CREATE INDEX ON copied_out USING gin ((state::jsonb))$$);
\pset tuples_only off
\pset format aligned
-- a stored value in an array, a composite, a record: read whole
SELECT (array_agg(state ORDER BY id))[1] -> 'n' AS array_element,
       (array_agg(c ORDER BY id))[1].state -> 'n' AS composite_field,
       (SELECT row_to_json(r) -> 'state' -> 'n' FROM copied_out r WHERE id = 1) AS record
  FROM copied_out c;

-- ---------------------------------------------------------------------
-- hx_doc_info on every kind of value
-- ---------------------------------------------------------------------
SELECT label, i.format, i.doc IS NOT NULL AS has_doc, i.nodes, i.segments, i.json_bytes
  FROM (VALUES ('object', '{"a": 1}'::hxdoc), ('array', '[1, [2]]'), ('string', '"s"'),
               ('number', '1.5e300'), ('json null', 'null'), ('empty', '{}'),
               ('large, not stored', big(1)::hxdoc)) AS v(label, value),
       hx_doc_info(value) i;
SELECT hx_doc_info(NULL::hxdoc) IS NULL AS sql_null;
-- a stored value: its document, and the segments of its generation
SELECT id, i.format, i.gen, i.nodes, i.segments > 1 AS segments, i.json_bytes > 0 AS bytes
  FROM copied_out, hx_doc_info(state) i ORDER BY id;
-- a root of many small members is a node of its own
INSERT INTO copied_out SELECT 3, (SELECT jsonb_object_agg('k' || g, g) FROM generate_series(1, 200) g);
SELECT i.format, i.nodes, i.segments, state -> 'k200' AS last FROM copied_out, hx_doc_info(state) i WHERE id = 3;
-- a large string at the root is a node too
INSERT INTO copied_out SELECT 4, to_jsonb(repeat('s', 5000));
SELECT i.format, i.nodes, i.segments, length(state #>> '{}') AS length FROM copied_out, hx_doc_info(state) i WHERE id = 4;
-- a held copy reads as long as its segments are there: after appends,
-- which replace none, and one generation behind (an AFTER trigger's OLD);
-- once two writes replaced its segments, or its document is gone: XH401
CREATE TABLE held (label text, state hxdoc);
INSERT INTO held SELECT 'held', state FROM copied_out WHERE id = 1;
UPDATE copied_out SET state = append(state, 'one') WHERE id = 1;
UPDATE copied_out SET state = append(state, 'two') WHERE id = 1;
SELECT label, (hx_doc_info(state)).gen, state -> 'log' -> -1 AS last FROM held;
UPDATE copied_out SET state = hx_merge(state, '[{"op": "replace", "path": "/log/0", "value": "edited once"}]') WHERE id = 1;
SELECT label, state -> 'log' -> 0 AS first FROM held;
UPDATE copied_out SET state = hx_merge(state, '[{"op": "replace", "path": "/log/0", "value": "edited twice"}]') WHERE id = 1;
\pset tuples_only on
\pset format unaligned
SELECT regexp_replace(err($$SELECT hx_doc_info(state) FROM held$$), '(document|generation) \d+', '\1 N', 'g');
SELECT regexp_replace(err($$SELECT state::text FROM held$$), '(document|generation) \d+', '\1 N', 'g');
\pset tuples_only off
\pset format aligned
DELETE FROM held;
INSERT INTO held SELECT 'of a deleted row', state FROM copied_out WHERE id = 3;
DELETE FROM copied_out WHERE id = 3;
-- the deleted row's document stays readable until a later write of the
-- table deletes it
SELECT label, (hx_doc_info(state)).format, state -> 'k1' AS k1 FROM held;
UPDATE copied_out SET state = append(state, 'three') WHERE id = 1;
\pset tuples_only on
\pset format unaligned
SELECT regexp_replace(err($$SELECT hx_doc_info(state) FROM held$$), '(document|generation) \d+', '\1 N', 'g');
\pset tuples_only off
\pset format aligned
-- a held value kept as jsonb is a value of its own
DELETE FROM held;
INSERT INTO held SELECT 'as jsonb', state::jsonb FROM copied_out WHERE id = 1;
UPDATE copied_out SET state = append(state, 'four') WHERE id = 1;
UPDATE copied_out SET state = append(state, 'five') WHERE id = 1;
SELECT label, fmt(state), state -> 'log' -> -1 AS last FROM held;
DROP TABLE held;

-- ---------------------------------------------------------------------
-- hx_store attached in every wrong way
-- ---------------------------------------------------------------------
CREATE TABLE wrong (id int PRIMARY KEY, j jsonb, d hxdoc, t text);
CREATE VIEW wrong_view AS SELECT * FROM wrong;
\pset tuples_only on
\pset format unaligned
SELECT err($$CREATE TRIGGER w INSTEAD OF INSERT ON wrong_view FOR EACH ROW EXECUTE FUNCTION hx_store('d'); INSERT INTO wrong_view (id) VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE UPDATE ON wrong FOR EACH STATEMENT EXECUTE FUNCTION hx_store('d'); UPDATE wrong SET t = 'x'$$);
SELECT err($$CREATE TRIGGER w BEFORE TRUNCATE ON wrong FOR EACH STATEMENT EXECUTE FUNCTION hx_store('d'); TRUNCATE wrong$$);
SELECT err($$CREATE TRIGGER w AFTER DELETE ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('d'); INSERT INTO wrong (id) VALUES (1); DELETE FROM wrong$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('t'); INSERT INTO wrong (id) VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('ctid'); INSERT INTO wrong (id) VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('D'); INSERT INTO wrong (id) VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store(''); INSERT INTO wrong (id) VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('d', 'threshold=2000000'); INSERT INTO wrong (id) VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('d', 'threshold=-1'); INSERT INTO wrong (id) VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('d', 'threshold=99999999999999999999'); INSERT INTO wrong (id) VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('d', 'segment='); INSERT INTO wrong (id) VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('d', 'segment=512'); INSERT INTO wrong (id) VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('d', '=1'); INSERT INTO wrong (id) VALUES (1)$$);
SELECT err($$CREATE TRIGGER w BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('d', 'thresholdthresholdthresholdthresholdthresholdthresholdthresholdthreshold=1'); INSERT INTO wrong (id) VALUES (1)$$);
SELECT err($$SELECT hx_store()$$);
SELECT err($$SELECT hx_store_dropped()$$);
\pset tuples_only off
\pset format aligned
-- the column added to a table whose trigger names it later, or dropped
CREATE TRIGGER w BEFORE INSERT OR UPDATE OR DELETE ON wrong FOR EACH ROW EXECUTE FUNCTION hx_store('e');
\pset tuples_only on
\pset format unaligned
SELECT err($$INSERT INTO wrong (id) VALUES (1)$$);
\pset tuples_only off
\pset format aligned
ALTER TABLE wrong ADD COLUMN e hxdoc;
INSERT INTO wrong (id, e) VALUES (1, big(1));
SELECT fmt(e), e -> 'n' AS n FROM wrong;
\pset tuples_only on
\pset format unaligned
SELECT err($$ALTER TABLE wrong DROP COLUMN e; UPDATE wrong SET t = 'x'$$);
\pset tuples_only off
\pset format aligned
DROP TABLE wrong CASCADE;

-- a domain over hxdoc is stored as hxdoc; its check reads the value whole
CREATE DOMAIN small_n AS hxdoc CHECK ((VALUE ->> 'n')::int < 5);
CREATE TABLE on_domain (id int PRIMARY KEY, state small_n NOT NULL);
CREATE TRIGGER on_domain_store BEFORE INSERT OR UPDATE OR DELETE ON on_domain
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
INSERT INTO on_domain VALUES (1, big(1));
UPDATE on_domain SET state = append(state, 'a');
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE on_domain SET state = hx_merge(state, '[{"op": "replace", "path": "/n", "value": 7}]')$$);
\pset tuples_only off
\pset format aligned
SELECT fmt(state), state -> 'n' AS n, jsonb_array_length(state -> 'log') AS log FROM on_domain;
DROP TABLE on_domain;
DROP DOMAIN small_n;

-- a generated column: PostgreSQL computes it after the BEFORE triggers,
-- so it stays in line whatever hx_store does
CREATE TABLE generated (id int PRIMARY KEY, j jsonb, g hxdoc GENERATED ALWAYS AS (j) STORED);
CREATE TRIGGER generated_store BEFORE INSERT OR UPDATE OR DELETE ON generated
  FOR EACH ROW EXECUTE FUNCTION hx_store('g', 'threshold=256', 'segment=1024');
INSERT INTO generated (id, j) VALUES (1, big(1));
UPDATE generated SET j = big(2);
SELECT fmt(g), g -> 'n' AS n, g::jsonb = j AS equal FROM generated;
DROP TABLE generated;

-- a partitioned table: the trigger is cloned to each partition, whose
-- rows keep documents of their own; a row that moves to another
-- partition takes its state along
CREATE TABLE parted (id int, part int, state hxdoc NOT NULL DEFAULT '{}', PRIMARY KEY (id, part))
  PARTITION BY LIST (part);
CREATE TABLE parted_1 PARTITION OF parted FOR VALUES IN (1);
CREATE TABLE parted_2 PARTITION OF parted FOR VALUES IN (2);
CREATE TRIGGER parted_store BEFORE INSERT OR UPDATE OR DELETE ON parted
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
INSERT INTO parted SELECT i, 1, big(i) FROM generate_series(1, 3) i;
UPDATE parted SET part = 2, state = append(state, 'moved') WHERE id = 1;
UPDATE parted SET part = 2 WHERE id = 2;
UPDATE parted SET state = append(state, 'after') WHERE id IN (1, 2);
-- a partition attached with an hx_store trigger of its own keeps the
-- parent's too: two triggers storing one column, refused when a row fires
-- (42701); with its own dropped, rows move into it
CREATE TABLE parted_3 (id int NOT NULL, part int NOT NULL, state hxdoc NOT NULL DEFAULT '{}');
CREATE TRIGGER parted_3_store BEFORE INSERT OR UPDATE OR DELETE ON parted_3
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=300');
ALTER TABLE parted ATTACH PARTITION parted_3 FOR VALUES IN (3);
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE parted SET part = 3, state = append(state, 'to 3') WHERE id = 3$$);
\pset tuples_only off
\pset format aligned
DROP TRIGGER parted_3_store ON parted_3;
UPDATE parted SET part = 3, state = append(state, 'to 3') WHERE id = 3;
SELECT tableoid::regclass AS partition, id, fmt(state), state -> 'n' AS n, state -> 'log' -> -1 AS last,
       jsonb_array_length(state -> 'log') AS log
  FROM parted ORDER BY id;
-- what the moves left (the documents of rows that moved out, which no
-- later write of their partition deleted), and nothing a row holds
SELECT hx_store_gc('parted_1') AS collected_1, hx_store_gc('parted_2') AS collected_2, hx_store_gc('parted_3') AS collected_3;
SELECT id, state -> 'log' -> -1 AS still_read FROM parted ORDER BY id;
DELETE FROM parted;
SELECT hx_store_gc('parted_1') AS collected_1, hx_store_gc('parted_2') AS collected_2, hx_store_gc('parted_3') AS collected_3;
SELECT count(*) AS documents_left FROM hx_doc WHERE rel IN ('parted_1'::regclass, 'parted_2'::regclass, 'parted_3'::regclass);
DROP TABLE parted;

-- two hx_store triggers on one column: refused when a row fires (42701),
-- nothing stored
CREATE TABLE twice (id int PRIMARY KEY, state hxdoc NOT NULL);
CREATE TRIGGER twice_a BEFORE INSERT OR UPDATE OR DELETE ON twice
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
CREATE TRIGGER twice_b BEFORE INSERT OR UPDATE OR DELETE ON twice
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
\pset tuples_only on
\pset format unaligned
SELECT err($$INSERT INTO twice VALUES (1, big(1, 100))$$);
\pset tuples_only off
\pset format aligned
SELECT count(*) AS rows, (SELECT count(*) FROM hx_doc WHERE rel = 'twice'::regclass) AS documents FROM twice;
DROP TABLE twice;

-- other BEFORE triggers that rewrite the column, before hx_store and
-- after it (triggers fire in name order)
CREATE TABLE rewritten (id int PRIMARY KEY, state hxdoc NOT NULL DEFAULT '{}');
CREATE TRIGGER m_store BEFORE INSERT OR UPDATE OR DELETE ON rewritten
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.state := NEW.state::jsonb || jsonb_build_object(TG_NAME, coalesce((NEW.state ->> TG_NAME)::int, 0) + 1);
  RETURN NEW;
END $$;
CREATE TRIGGER a_before BEFORE INSERT OR UPDATE ON rewritten FOR EACH ROW EXECUTE FUNCTION stamp();
INSERT INTO rewritten VALUES (1, big(1));
UPDATE rewritten SET state = append(state, 'a');
SELECT fmt(state), state -> 'a_before' AS a_before, state -> 'log' -> -1 AS last FROM rewritten;
-- a BEFORE trigger that fires after hx_store could change the value it
-- stored or skip the row: refused when a row fires (55000), nothing
-- written
CREATE TRIGGER z_after BEFORE INSERT OR UPDATE ON rewritten FOR EACH ROW EXECUTE FUNCTION stamp();
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE rewritten SET state = append(state, 'b')$$);
SELECT err($$INSERT INTO rewritten VALUES (2, big(2))$$);
\pset tuples_only off
\pset format aligned
SELECT fmt(state), state -> 'a_before' AS a_before, state -> 'z_after' AS z_after,
       state -> 'log' -> -1 AS last, jsonb_array_length(state -> 'log') AS log FROM rewritten;
DROP TRIGGER z_after ON rewritten;
UPDATE rewritten SET state = append(state, 'd');
SELECT fmt(state), state -> 'a_before' AS a_before, state -> 'log' -> -1 AS last, jsonb_array_length(state -> 'log') AS log FROM rewritten;
SELECT count(*) AS documents FROM hx_doc WHERE rel = 'rewritten'::regclass;
DROP TABLE rewritten;

-- which other triggers that rule counts: a BEFORE row trigger of the
-- event that fires after hx_store, whatever its WHEN or UPDATE OF (it
-- could fire), also one of a partition alone; not a disabled one, one of
-- another event, a statement trigger, nor an hx_store of another column
-- (two columns stored by two triggers, each its own document).  Names
-- compare bytewise, as PostgreSQL orders them: "Z_upper" fires before
-- "m_store".
CREATE TABLE ordered (id int PRIMARY KEY, flag int NOT NULL DEFAULT 0, state hxdoc NOT NULL);
CREATE TRIGGER m_store BEFORE INSERT OR UPDATE OR DELETE ON ordered
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
CREATE TRIGGER "Z_upper" BEFORE INSERT ON ordered FOR EACH ROW EXECUTE FUNCTION stamp();
CREATE FUNCTION nothing() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER z_statement BEFORE INSERT OR UPDATE OR DELETE ON ordered FOR EACH STATEMENT EXECUTE FUNCTION nothing();
CREATE TRIGGER z_disabled BEFORE INSERT OR UPDATE OR DELETE ON ordered FOR EACH ROW EXECUTE FUNCTION stamp();
ALTER TABLE ordered DISABLE TRIGGER z_disabled;
CREATE TRIGGER z_insert BEFORE INSERT ON ordered FOR EACH ROW WHEN (NEW.id > 100) EXECUTE FUNCTION stamp();
\pset tuples_only on
\pset format unaligned
SELECT err($$INSERT INTO ordered (id, state) VALUES (1, big(1))$$);
DROP TRIGGER z_insert ON ordered;
SELECT err($$INSERT INTO ordered (id, state) VALUES (1, big(1)), (2, big(2))$$);
CREATE TRIGGER z_insert BEFORE INSERT ON ordered FOR EACH ROW EXECUTE FUNCTION stamp();
SELECT err($$UPDATE ordered SET state = append(state, 'a')$$);
SELECT err($$DELETE FROM ordered WHERE id = 2$$);
CREATE TRIGGER z_update_of BEFORE UPDATE OF flag ON ordered FOR EACH ROW EXECUTE FUNCTION stamp();
SELECT err($$UPDATE ordered SET state = append(state, 'b')$$);
\pset tuples_only off
\pset format aligned
SELECT fmt(state), state -> 'Z_upper' AS "Z_upper", state -> 'z_disabled' AS z_disabled,
       state -> 'log' -> -1 AS last, jsonb_array_length(state -> 'log') AS log FROM ordered;
DROP TABLE ordered;
DROP FUNCTION nothing();
CREATE TABLE ordered (id int, part int, state hxdoc NOT NULL, PRIMARY KEY (id, part)) PARTITION BY LIST (part);
CREATE TABLE ordered_1 PARTITION OF ordered FOR VALUES IN (1);
CREATE TRIGGER m_store BEFORE INSERT OR UPDATE OR DELETE ON ordered
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
CREATE TRIGGER z_partition BEFORE INSERT ON ordered_1 FOR EACH ROW EXECUTE FUNCTION stamp();
\pset tuples_only on
\pset format unaligned
SELECT err($$INSERT INTO ordered VALUES (1, 1, big(1))$$);
\pset tuples_only off
\pset format aligned
DROP TABLE ordered;
CREATE TABLE two_columns (id int PRIMARY KEY, a hxdoc, b hxdoc);
CREATE TRIGGER a_store BEFORE INSERT OR UPDATE OR DELETE ON two_columns
  FOR EACH ROW EXECUTE FUNCTION hx_store('a', 'threshold=256', 'segment=1024');
CREATE TRIGGER b_store BEFORE INSERT OR UPDATE OR DELETE ON two_columns
  FOR EACH ROW EXECUTE FUNCTION hx_store('b', 'threshold=256', 'segment=1024');
INSERT INTO two_columns VALUES (1, big(1), big(2));
UPDATE two_columns SET a = hx_merge(a, '[{"op": "increment", "path": "/n", "by": 10}]'), b = append(b, 'b');
SELECT fmt(a) AS a, fmt(b) AS b, a -> 'n' AS a_n, b -> 'log' -> -1 AS b_last,
       (hx_doc_info(a)).doc <> (hx_doc_info(b)).doc AS documents_of_their_own FROM two_columns;
DELETE FROM two_columns;
SELECT hx_store_gc('two_columns') AS collected;
SELECT count(*) AS documents FROM hx_doc WHERE rel = 'two_columns'::regclass;
DROP TABLE two_columns;
DROP FUNCTION stamp();

-- ---------------------------------------------------------------------
-- Values copied between rows and tables
-- ---------------------------------------------------------------------
CREATE TABLE src (id int PRIMARY KEY, state hxdoc NOT NULL DEFAULT '{}');
CREATE TRIGGER src_store BEFORE INSERT OR UPDATE OR DELETE ON src
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
CREATE TABLE dst (id int PRIMARY KEY, state hxdoc NOT NULL DEFAULT '{}');
CREATE TRIGGER dst_store BEFORE INSERT OR UPDATE OR DELETE ON dst
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
INSERT INTO src SELECT i, big(i) FROM generate_series(1, 3) i;
-- row to row (UPDATE ... FROM), table to table, a table with other options
UPDATE src SET state = o.state FROM src o WHERE src.id = 2 AND o.id = 1;
INSERT INTO dst SELECT id, state FROM src;
UPDATE dst SET state = append(state, 'dst') WHERE id = 1;
UPDATE src SET state = append(state, 'src') WHERE id = 1;
UPDATE src SET state = append(state, 'src again') WHERE id = 1;
SELECT 'src' AS t, id, fmt(state), state -> 'n' AS n, state -> 'log' -> -1 AS last FROM src
UNION ALL
SELECT 'dst', id, fmt(state), state -> 'n', state -> 'log' -> -1 FROM dst ORDER BY 1, 2;
-- every row has a document of its own
SELECT count(*) AS rows, count(DISTINCT (hx_doc_info(state)).doc) AS documents
  FROM (SELECT state FROM src UNION ALL SELECT state FROM dst) s;
-- swapping two rows' states
UPDATE src SET state = o.state FROM src o WHERE (src.id, o.id) IN ((1, 3), (3, 1));
SELECT id, state -> 'n' AS n, state -> 'log' -> -1 AS last FROM src ORDER BY id;
UPDATE src SET state = append(state, 'after swap');
SELECT id, state -> 'n' AS n, jsonb_array_length(state -> 'log') AS log FROM src ORDER BY id;
DROP TABLE dst;

-- ---------------------------------------------------------------------
-- A role without privileges, and one that writes its own table
-- ---------------------------------------------------------------------
CREATE ROLE regress_hx_abuser;
CREATE SCHEMA abuse AUTHORIZATION regress_hx_abuser;
SET ROLE regress_hx_abuser;
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT state FROM src$$);
SELECT err($$SELECT count(*) FROM hx_chunk$$);
SELECT err($$SELECT count(*) FROM hx_doc$$);
SELECT err($$SELECT nextval('hx_doc_seq')$$);
SELECT err($$SELECT setval('hx_doc_seq', 1)$$);
SELECT err($$UPDATE hx_doc SET dropped = true$$);
SELECT err($$DELETE FROM hx_chunk$$);
SELECT err($$SELECT hx_store_gc()$$);
SELECT err($$SELECT hx_store_gc('src')$$);
SELECT err($$SELECT hx_store_dropped()$$);
SELECT err($$ALTER TABLE src DISABLE TRIGGER src_store$$);
SELECT err($$TRUNCATE src$$);
\pset tuples_only off
\pset format aligned
-- its own table: documents numbered without privileges on the sequence
CREATE TABLE abuse.mine (id int PRIMARY KEY, state hxdoc NOT NULL DEFAULT '{}');
CREATE TRIGGER mine_store BEFORE INSERT OR UPDATE OR DELETE ON abuse.mine
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
INSERT INTO abuse.mine VALUES (1, big(1));
UPDATE abuse.mine SET state = append(state, 'mine');
SELECT fmt(state), state -> 'log' -> -1 AS last FROM abuse.mine;
-- the values it holds it may read whole, and inspect
SELECT format, gen, nodes, segments FROM abuse.mine, hx_doc_info(state);
RESET ROLE;
-- given a value of another table to read, it stores a copy of its own and
-- never writes the other table's document
GRANT SELECT ON src TO regress_hx_abuser;
SELECT (hx_doc_info(state)).gen AS src_gen FROM src WHERE id = 1 \gset
SET ROLE regress_hx_abuser;
INSERT INTO abuse.mine SELECT 2, state FROM src WHERE id = 1;
UPDATE abuse.mine SET state = src.state FROM src WHERE mine.id = 1 AND src.id = 1;
UPDATE abuse.mine SET state = append(state, 'mine again');
SELECT id, state -> 'log' -> -1 AS last FROM abuse.mine ORDER BY id;
RESET ROLE;
SELECT (hx_doc_info(state)).gen = :src_gen AS src_unchanged, state -> 'log' -> -1 AS src_last FROM src WHERE id = 1;
SELECT count(*) AS documents_of_mine FROM hx_doc WHERE rel = 'abuse.mine'::regclass;
-- its table dropped: its documents go with it (the event trigger runs for
-- any role)
SET ROLE regress_hx_abuser;
DROP TABLE abuse.mine;
RESET ROLE;
SELECT count(*) AS documents_of_dropped FROM hx_doc WHERE NOT EXISTS (SELECT 1 FROM pg_class WHERE oid = hx_doc.rel);
REVOKE SELECT ON src FROM regress_hx_abuser;
DROP SCHEMA abuse;
DROP ROLE regress_hx_abuser;

-- ---------------------------------------------------------------------
-- TRUNCATE, ALTER COLUMN TYPE, DROP COLUMN, table rewrites
-- ---------------------------------------------------------------------
CREATE TABLE before_rewrite AS SELECT id, state::jsonb AS state FROM src;
VACUUM FULL src;
CLUSTER src USING src_pkey;
VACUUM FULL hx_chunk;
VACUUM FULL hx_doc;
CLUSTER hx_chunk USING hx_chunk_pkey;
REINDEX TABLE hx_chunk;
SELECT count(*) AS rows, count(*) FILTER (WHERE b.state = s.state::jsonb) AS equal
  FROM src s JOIN before_rewrite b USING (id);
UPDATE src SET state = append(state, 'after rewrite');
SELECT count(*) FILTER (WHERE s.state::jsonb = append(b.state, 'after rewrite')) AS equal
  FROM src s JOIN before_rewrite b USING (id);
-- to jsonb and back: the values go over whole; the documents left are
-- collected; hx_store refuses a column that is no longer hxdoc
ALTER TABLE src ALTER COLUMN state TYPE jsonb;
SELECT count(*) FILTER (WHERE s.state = append(b.state, 'after rewrite')) AS equal_as_jsonb
  FROM src s JOIN before_rewrite b USING (id);
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE src SET state = state || '{"x": 1}'$$);
\pset tuples_only off
\pset format aligned
SELECT hx_store_gc('src') AS collected;
ALTER TABLE src ALTER COLUMN state TYPE hxdoc;
SELECT fmt(state), count(*) FROM src GROUP BY 1;
UPDATE src SET state = append(state, 'hxdoc again');
SELECT fmt(state), count(*), bool_and(state -> 'log' ->> -1 = 'hxdoc again') AS last FROM src GROUP BY 1;
-- TRUNCATE fires no row trigger: hx_store_gc collects what it leaves
TRUNCATE src;
SELECT hx_store_gc('src') AS collected;
-- DROP COLUMN: the event trigger deletes the column's documents
INSERT INTO src SELECT i, big(i) FROM generate_series(1, 2) i;
ALTER TABLE src ADD COLUMN other hxdoc;
DROP TRIGGER src_store ON src;
CREATE TRIGGER src_store BEFORE INSERT OR UPDATE OR DELETE ON src
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'other', 'threshold=256', 'segment=1024');
UPDATE src SET other = big(-id);
SELECT count(*) AS documents FROM hx_doc WHERE rel = 'src'::regclass;
ALTER TABLE src DROP COLUMN other;
SELECT count(*) AS documents_after_drop FROM hx_doc WHERE rel = 'src'::regclass;
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE src SET state = append(state, 'x')$$);
\pset tuples_only off
\pset format aligned
-- ---------------------------------------------------------------------
-- The last-trigger rule counts the triggers that fire as the session's
-- session_replication_role says: on a subscriber's apply worker
-- (replica), a trigger enabled for the origin only does not fire, so it
-- does not block hx_store ENABLE ALWAYS; one enabled for replicas only
-- does not block writes at the origin, and does block them as a replica
-- ---------------------------------------------------------------------
CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TABLE roles_t (id int PRIMARY KEY, s hxdoc);
CREATE TRIGGER m_store BEFORE INSERT OR UPDATE OR DELETE ON roles_t
  FOR EACH ROW EXECUTE FUNCTION hx_store('s', 'threshold=256');
CREATE TRIGGER z_origin BEFORE INSERT ON roles_t FOR EACH ROW EXECUTE FUNCTION stamp();
ALTER TABLE roles_t ENABLE ALWAYS TRIGGER m_store;
\pset tuples_only on
\pset format unaligned
SET session_replication_role = replica;
SELECT err($$INSERT INTO roles_t VALUES (1, big(1))$$) AS replica_insert;
RESET session_replication_role;
SELECT err($$INSERT INTO roles_t VALUES (2, big(2))$$) AS origin_insert;
ALTER TABLE roles_t ENABLE REPLICA TRIGGER z_origin;
SELECT err($$INSERT INTO roles_t VALUES (3, big(3))$$) AS origin_insert_replica_trigger;
SET session_replication_role = replica;
SELECT err($$INSERT INTO roles_t VALUES (4, big(4))$$) AS replica_insert_replica_trigger;
RESET session_replication_role;
\pset tuples_only off
\pset format aligned
SELECT id, fmt(s), s::jsonb = big(id) AS same FROM roles_t ORDER BY id;
DROP TABLE roles_t;
DROP FUNCTION stamp();
DROP TABLE src, before_rewrite, copied_out;
DROP FUNCTION big(int, int), append(jsonb, text), fmt(hxdoc);
SELECT count(*) AS documents_left FROM hx_doc;
DELETE FROM hx_event;
