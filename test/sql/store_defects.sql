--
-- store_defects: writes and misuses that lost, tore or refused an hxdoc
-- value, found by probing hx_store (each failed on hxstate's code of
-- 2026-11-27, before the fixes that followed); each case asserts what a
-- user depends on: the value stays whole and readable, or the statement
-- is refused with a documented error.
--
-- (err() is defined in setup.sql)
CREATE FUNCTION big(i int, n int DEFAULT 60) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('n', i, 'log',
    (SELECT jsonb_agg(repeat('x', 60) || g) FROM generate_series(1, n) g)) $$;

-- 1. Inserting at the front (or at one place in the middle) of a large
-- array, again and again, as a newest-first list does: the same segment
-- overflows each time, and each overflow takes a segment key halfway
-- between two others, so after about 32 such writes every further one
-- fails with "node N of document D has no room for another segment"
-- (54000), and its hint ("write the value whole again") does not help:
-- the same value written again changes nothing.  Each statement is a
-- transaction of its own (not echoed: 120 of them).
CREATE TABLE newest_first (id int PRIMARY KEY, state hxdoc NOT NULL, twin jsonb NOT NULL);
CREATE TRIGGER newest_first_store BEFORE INSERT OR UPDATE OR DELETE ON newest_first
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
INSERT INTO newest_first VALUES (1, big(1), big(1)), (2, big(2), big(2));
\set ECHO none
SELECT format($$UPDATE newest_first SET state = hx_patch(state, %1$L), twin = hx_patch(twin, %1$L) WHERE id = 1$$,
              jsonb_build_array(jsonb_build_object('op', 'add', 'path', '/log/0', 'value', repeat('y', 60) || g)))
  FROM generate_series(1, 60) g \gexec
SELECT format($$UPDATE newest_first SET state = hx_patch(state, %1$L), twin = hx_patch(twin, %1$L) WHERE id = 2$$,
              jsonb_build_array(jsonb_build_object('op', 'add', 'path', '/log/20', 'value', repeat('z', 60) || g)))
  FROM generate_series(1, 60) g \gexec
\set ECHO all
SELECT id, jsonb_array_length(state -> 'log') AS log, state::jsonb = twin AS equal FROM newest_first ORDER BY id;
DROP TABLE newest_first;

-- 2. hx_store_gc as a role under row-level security: the rows the policy
-- hides from it look as if they held no document, and their documents are
-- deleted (their states can no longer be read, by anyone).  Refused
-- (42501: row-level security applies to the caller), every state readable.
CREATE TABLE tenants (id int PRIMARY KEY, tenant text NOT NULL, state hxdoc NOT NULL);
CREATE TRIGGER tenants_store BEFORE INSERT OR UPDATE OR DELETE ON tenants
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
INSERT INTO tenants SELECT i, CASE WHEN i = 1 THEN 'regress_hx_tenant' ELSE 'other' END, big(i)
  FROM generate_series(1, 3) i;
CREATE ROLE regress_hx_tenant;
GRANT SELECT, INSERT, UPDATE, DELETE ON tenants TO regress_hx_tenant;
GRANT EXECUTE ON FUNCTION hx_store_gc(regclass) TO regress_hx_tenant;
ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
CREATE POLICY own ON tenants USING (tenant = current_user);
SET ROLE regress_hx_tenant;
SELECT count(*) AS rows_it_sees FROM tenants;
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT hx_store_gc('tenants')$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;
SELECT id, state -> 'n' AS n, jsonb_array_length(state -> 'log') AS log FROM tenants ORDER BY id;
DROP TABLE tenants;
REVOKE EXECUTE ON FUNCTION hx_store_gc(regclass) FROM regress_hx_tenant;
DROP ROLE regress_hx_tenant;

-- 3. A BEFORE DELETE trigger that fires after hx_store (triggers fire in
-- name order) and keeps the row (RETURN NULL, as a soft delete does):
-- hx_store has marked the row's document dropped already, and the next
-- write of the table deletes it, while the row still holds it.  Refused
-- (55000: a BEFORE trigger fires after hx_store), nothing changed; the
-- trigger renamed to fire first, the soft delete keeps the row whole
-- (hx_store does not fire for a row that a trigger before it skipped).
CREATE TABLE kept (id int PRIMARY KEY, archived boolean NOT NULL DEFAULT false, state hxdoc NOT NULL);
CREATE TRIGGER kept_store BEFORE INSERT OR UPDATE OR DELETE ON kept
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
CREATE FUNCTION soft_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE kept SET archived = true WHERE id = OLD.id;
  RETURN NULL;
END $$;
CREATE TRIGGER z_soft_delete BEFORE DELETE ON kept FOR EACH ROW EXECUTE FUNCTION soft_delete();
INSERT INTO kept SELECT i, false, big(i) FROM generate_series(1, 2) i;
DELETE FROM kept WHERE id = 1;
UPDATE kept SET state = hx_merge(state, '[{"op": "increment", "path": "/n", "by": 10}]') WHERE id = 2;
SELECT id, archived, state -> 'n' AS n, jsonb_array_length(state -> 'log') AS log FROM kept ORDER BY id;
ALTER TRIGGER z_soft_delete ON kept RENAME TO a_soft_delete;
DELETE FROM kept WHERE id = 1;
UPDATE kept SET state = hx_merge(state, '[{"op": "increment", "path": "/n", "by": 10}]') WHERE id = 2;
SELECT id, archived, state -> 'n' AS n, jsonb_array_length(state -> 'log') AS log,
       (SELECT NOT d.dropped FROM hx_doc d WHERE d.doc = (hx_doc_info(state)).doc) AS document_held
  FROM kept ORDER BY id;
DROP TABLE kept;
DROP FUNCTION soft_delete();

-- 4. A BEFORE trigger that fires after hx_store and gives the row another
-- row's stored value (a template): two rows then hold one document, and
-- the writes of one make the other's value unreadable.  Refused (55000:
-- a BEFORE trigger fires after hx_store), nothing inserted, the first row
-- written on.
CREATE TABLE templated (id int PRIMARY KEY, state hxdoc NOT NULL DEFAULT '{}');
CREATE TRIGGER templated_store BEFORE INSERT OR UPDATE OR DELETE ON templated
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
CREATE FUNCTION from_template() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.state::jsonb = '{}' THEN
    NEW.state := (SELECT state FROM templated WHERE id = 1);
  END IF;
  RETURN NEW;
END $$;
INSERT INTO templated VALUES (1, big(1));
CREATE TRIGGER z_template BEFORE INSERT ON templated FOR EACH ROW EXECUTE FUNCTION from_template();
\pset tuples_only on
\pset format unaligned
SELECT err($$INSERT INTO templated VALUES (2, '{}')$$);
\pset tuples_only off
\pset format aligned
UPDATE templated SET state = hx_merge(state, '[{"op": "increment", "path": "/n", "by": 10}]') WHERE id = 1;
UPDATE templated SET state = hx_merge(state, '[{"op": "increment", "path": "/n", "by": 10}]') WHERE id = 1;
SELECT (SELECT state -> 'n' FROM templated WHERE id = 1) AS first_n,
       (SELECT count(*) FROM templated WHERE id = 2) AS second_rows,
       (SELECT count(*) FROM hx_doc WHERE rel = 'templated'::regclass) AS documents;
DROP TABLE templated;
DROP FUNCTION from_template();

-- 5. A column named twice in hx_store's arguments: the INSERT stores it
-- (twice), then every UPDATE fails with a duplicate key of hx_chunk's
-- primary key (23505) and a DELETE with "tuple already updated by self"
-- (XX000).  Refused when a row fires (42701), nothing stored.
CREATE TABLE named_twice (id int PRIMARY KEY, state hxdoc NOT NULL);
CREATE TRIGGER named_twice_store BEFORE INSERT OR UPDATE OR DELETE ON named_twice
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'state', 'threshold=256', 'segment=1024');
\pset tuples_only on
\pset format unaligned
SELECT err('INSERT INTO named_twice VALUES (1, big(1))');
\pset tuples_only off
\pset format aligned
SELECT count(*) AS rows, (SELECT count(*) FROM hx_doc WHERE rel = 'named_twice'::regclass) AS documents FROM named_twice;
DROP TABLE named_twice;

-- 6. jsonb's binary format with a version byte other than 1 (COPY
-- BINARY, a driver's binary parameter): "unsupported jsonb version
-- number" as an internal error (XX000, from jsonb's own recv) rather than
-- a documented SQLSTATE.  Refused with 22P03 (invalid_binary_representation).
CREATE TABLE recv_raw (b bytea);
CREATE TABLE recv_doc (v hxdoc);
INSERT INTO recv_raw VALUES ('\x027b2261223a317d');
CREATE FUNCTION recv_state() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  f text := current_setting('data_directory') || '/store_defects_recv.bin';
BEGIN
  EXECUTE format('COPY recv_raw TO %L (FORMAT binary)', f);
  EXECUTE format('COPY recv_doc FROM %L (FORMAT binary)', f);
  RETURN 'accepted';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT recv_state() AS refused;
DROP TABLE recv_raw, recv_doc;
DROP FUNCTION recv_state();

-- 7. Logical decoding of a table with an hxdoc column reads each value
-- in pieces as of its change: hx_doc and hx_chunk are user catalog
-- tables, whose old rows PostgreSQL keeps for a replication slot.  But
-- hx_chunk's TOAST table is not one: a segment stored out of line (a
-- large string, a run that does not compress below about 2 kB) that a
-- later write replaced and deleted loses its TOAST rows to pruning or
-- VACUUM while a slot still needs them.  Decoding the change that wrote it
-- then fails ("missing chunk number 0 for toast value ... in pg_toast_..."),
-- at every retry: the subscription is stuck for good.  VACUUM FULL of
-- hx_chunk fails the same way while the slot lags.
CREATE TABLE replicated (id int PRIMARY KEY, state hxdoc NOT NULL);
CREATE TRIGGER replicated_store BEFORE INSERT OR UPDATE OR DELETE ON replicated
  FOR EACH ROW EXECUTE FUNCTION hx_store('state');
CREATE PUBLICATION replicated_pub FOR TABLE replicated;
SELECT 'created' AS slot FROM pg_create_logical_replication_slot('regress_hx_replicated', 'pgoutput');
INSERT INTO replicated VALUES (1, jsonb_build_object('blob', (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 300) g)));
UPDATE replicated SET state = jsonb_build_object('blob', (SELECT string_agg(md5((g + 1)::text), '') FROM generate_series(1, 300) g));
UPDATE replicated SET state = hx_merge(state, '[{"op": "replace", "path": "/x", "value": 1}]');
UPDATE replicated SET state = hx_merge(state, '[{"op": "replace", "path": "/x", "value": 2}]');
VACUUM hx_chunk;
\set VERBOSITY sqlstate
VACUUM FULL hx_chunk;
-- the four transactions decoded: four commit messages ('C')
SELECT count(*) FILTER (WHERE get_byte(data, 0) = ascii('C')) AS commits
  FROM pg_logical_slot_get_binary_changes('regress_hx_replicated', NULL, NULL,
                                          'proto_version', '1', 'publication_names', 'replicated_pub');
\set VERBOSITY default
SELECT pg_drop_replication_slot('regress_hx_replicated');
-- 8. The same decoding after REINDEX (or VACUUM FULL, CLUSTER) of
-- hx_chunk: the walsender reads the side tables through their primary
-- keys, but PostgreSQL gives the historic snapshot the current storage
-- only of a catalog table itself, not of its indexes (nor its TOAST
-- table): decoding a change written before the rebuild reads the index's
-- old file, which is gone ("could not read block 0 in file ...").  Here
-- every segment is stored in line (a large string that compresses well).
SELECT 'created' AS slot FROM pg_create_logical_replication_slot('regress_hx_replicated', 'pgoutput');
UPDATE replicated SET state = jsonb_build_object('blob', repeat('a', 9600));
UPDATE replicated SET state = jsonb_build_object('blob', repeat('b', 9600));
REINDEX INDEX hx_chunk_pkey;
\set VERBOSITY sqlstate
SELECT count(*) FILTER (WHERE get_byte(data, 0) = ascii('C')) AS commits
  FROM pg_logical_slot_get_binary_changes('regress_hx_replicated', NULL, NULL,
                                          'proto_version', '1', 'publication_names', 'replicated_pub');
\set VERBOSITY default
SELECT pg_drop_replication_slot('regress_hx_replicated');
DROP PUBLICATION replicated_pub;
DROP TABLE replicated;

-- 9. FETCH from a cursor WITH HOLD once its transaction has committed:
-- the cursor keeps the values it read (a value in pieces names its
-- document and generation), and hxdoc's output reads the document with
-- the transaction's snapshot, which it neither registers nor pushes as
-- active: the assert-enabled PostgreSQL 18 fails an assertion in
-- HeapTupleSatisfiesVisibility (snapshot->regd_count > 0 ||
-- snapshot->active_count > 0), and the server restarts.  (Last in the
-- pg_regress schedule, so that no other test runs into the restart.)
-- The value must read whole while its segments are there, and be
-- refused (XH401) once two writes replaced them.
CREATE TABLE cursor_held (id int PRIMARY KEY, state hxdoc NOT NULL);
CREATE TRIGGER cursor_held_store BEFORE INSERT OR UPDATE OR DELETE ON cursor_held
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
INSERT INTO cursor_held VALUES (1, jsonb_build_object('n', 1, 'log', (SELECT jsonb_agg(repeat('x', 60) || g) FROM generate_series(1, 5) g)));
SELECT (hx_doc_info(state)).format FROM cursor_held;
BEGIN;
DECLARE held_now CURSOR WITH HOLD FOR SELECT state FROM cursor_held;
DECLARE held_later CURSOR WITH HOLD FOR SELECT state FROM cursor_held;
COMMIT;
FETCH held_now;
UPDATE cursor_held SET state = hx_merge(state, '[{"op": "replace", "path": "/log/0", "value": "edited once"}]');
UPDATE cursor_held SET state = hx_merge(state, '[{"op": "replace", "path": "/log/0", "value": "edited twice"}]');
\set VERBOSITY sqlstate
FETCH held_later;
\set VERBOSITY default
CLOSE held_now;
CLOSE held_later;
DROP TABLE cursor_held;

DROP FUNCTION big(int, int);
SELECT hx_store_gc() >= 0 AS collected;
SELECT count(*) AS documents_left FROM hx_doc;
DELETE FROM hx_event;
