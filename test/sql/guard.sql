--
-- hx_lock_once and hx_slot_guard: columns written once, a one-tool slot
--

CREATE TABLE guarded (
	id            int PRIMARY KEY,
	project_id    text,
	pending_tool  jsonb,
	state         jsonb NOT NULL DEFAULT '{}',
	n             numeric
);
-- the form the README teaches: constraint triggers, AFTER, for each row
CREATE CONSTRAINT TRIGGER project_locked AFTER INSERT OR UPDATE ON guarded
	FOR EACH ROW EXECUTE FUNCTION hx_lock_once('project_id', 'state:/owner', 'n');
CREATE CONSTRAINT TRIGGER one_tool AFTER INSERT OR UPDATE ON guarded
	FOR EACH ROW EXECUTE FUNCTION hx_slot_guard('pending_tool', 'state:/run/lease');

-- INSERT sets any value
INSERT INTO guarded (id, project_id) VALUES (1, 'prj_8821'), (2, NULL);

--
-- hx_lock_once
--
-- NULL to a value is the one assignment allowed
UPDATE guarded SET project_id = 'prj_1' WHERE id = 2;
-- writing the same value again is not a change
UPDATE guarded SET project_id = 'prj_8821' WHERE id = 1;
-- other columns stay free
UPDATE guarded SET state = '{"notes": []}' WHERE id = 1;
SELECT id, project_id FROM guarded ORDER BY id;

\pset tuples_only on
\pset format unaligned
-- a value never changes, not even back to NULL: XH101, with the table,
-- column and constraint a client can act on
SELECT err($$UPDATE guarded SET project_id = 'prj_9999' WHERE id = 1$$);
SELECT err($$UPDATE guarded SET project_id = NULL WHERE id = 1$$);
SELECT err($$UPDATE guarded SET project_id = upper(project_id)$$);
-- numbers: 1.0 and 1.00 are the same number but not the same value written
UPDATE guarded SET n = 1.0 WHERE id = 1;
SELECT err($$UPDATE guarded SET n = 1.0 WHERE id = 1$$);
SELECT err($$UPDATE guarded SET n = 1.00 WHERE id = 1$$);
\pset tuples_only off
\pset format aligned

-- a member of a jsonb column: missing or null counts as unset
UPDATE guarded SET state = hx_merge(state, '[{"op": "replace", "path": "/owner", "value": null}]') WHERE id = 1;
UPDATE guarded SET state = hx_merge(state, '[{"op": "add", "path": "/owner", "value": {"name": "alice", "id": 7}}]') WHERE id = 1;
-- the same JSON value in another key order or number format is no change
UPDATE guarded SET state = hx_merge(state, '[{"op": "add", "path": "/owner", "value": {"id": 7.0, "name": "alice"}}]') WHERE id = 1;
-- the rest of the document stays free
UPDATE guarded SET state = hx_merge(state, '[{"op": "append", "path": "/notes", "items": ["ok"]}]') WHERE id = 1;
SELECT state FROM guarded WHERE id = 1;
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE guarded SET state = hx_merge(state, '[{"op": "replace", "path": "/owner/name", "value": "bob"}]') WHERE id = 1$$);
SELECT err($$UPDATE guarded SET state = state - 'owner' WHERE id = 1$$);
SELECT err($$UPDATE guarded SET state = '[]' WHERE id = 1$$);
\pset tuples_only off
\pset format aligned

--
-- hx_slot_guard
--
UPDATE guarded SET pending_tool = '{"id": "toolu_1", "name": "search"}' WHERE id = 1;
-- the same value again is no change; clearing it is allowed
UPDATE guarded SET pending_tool = '{"name": "search", "id": "toolu_1"}' WHERE id = 1;
UPDATE guarded SET pending_tool = NULL WHERE id = 1;
UPDATE guarded SET pending_tool = '{"id": "toolu_2"}' WHERE id = 1;
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE guarded SET pending_tool = '{"id": "toolu_3"}' WHERE id = 1$$);
\pset tuples_only off
\pset format aligned
-- a member as a slot
UPDATE guarded SET state = jsonb_set(state, '{run}', '{"lease": "worker-1"}') WHERE id = 1;
UPDATE guarded SET state = jsonb_set(state, '{run,lease}', 'null') WHERE id = 1;
UPDATE guarded SET state = jsonb_set(state, '{run,lease}', '"worker-2"') WHERE id = 1;
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE guarded SET state = jsonb_set(state, '{run,lease}', '"worker-3"') WHERE id = 1$$);
\pset tuples_only off
\pset format aligned
SELECT id, project_id, pending_tool, state FROM guarded ORDER BY id;

--
-- Values in the detail only for those who may read them
--
CREATE ROLE regress_hx_writer;
GRANT UPDATE ON guarded TO regress_hx_writer;
SET ROLE regress_hx_writer;
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE guarded SET project_id = 'stolen'$$);
SELECT err($$UPDATE guarded SET pending_tool = '{"id": "x"}'$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;

--
-- No back doors through ordinary SQL
--
-- A BEFORE trigger that rewrites a guarded column: attached BEFORE, a guard
-- that fires first (triggers fire in name order) misses the rewrite; the
-- AFTER form sees the row as stored and catches it.
CREATE TABLE doors (id int PRIMARY KEY, project_id text);
INSERT INTO doors VALUES (1, 'prj_a');
CREATE FUNCTION rewrite_project() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.project_id := 'prj_evil';
	RETURN NEW;
END
$$;
CREATE TRIGGER a_lock_before BEFORE UPDATE ON doors
	FOR EACH ROW EXECUTE FUNCTION hx_lock_once('project_id');
CREATE TRIGGER z_rewrite BEFORE UPDATE ON doors
	FOR EACH ROW EXECUTE FUNCTION rewrite_project();
UPDATE doors SET id = id;
SELECT * FROM doors;
-- (put the row back, with the table owner's power to disable triggers)
ALTER TABLE doors DISABLE TRIGGER USER;
UPDATE doors SET project_id = 'prj_a';
ALTER TABLE doors ENABLE TRIGGER USER;
CREATE CONSTRAINT TRIGGER lock_after AFTER UPDATE ON doors
	FOR EACH ROW EXECUTE FUNCTION hx_lock_once('project_id');
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE doors SET id = id$$);
\pset tuples_only off
\pset format aligned
SELECT * FROM doors;
DROP TRIGGER z_rewrite ON doors;
DROP TRIGGER a_lock_before ON doors;

-- Documentation tests: what follows shows core PostgreSQL's own rules that
-- the guards rely on (no hxstate code decides them), so that the README's
-- claims about them stay true.
--
-- A role that does not own the table cannot turn the guards off
GRANT UPDATE, SELECT ON doors TO regress_hx_writer;
SET ROLE regress_hx_writer;
\pset tuples_only on
\pset format unaligned
SELECT err($$ALTER TABLE doors DISABLE TRIGGER lock_after$$);
SELECT err($$ALTER TABLE doors DISABLE TRIGGER ALL$$);
SELECT err($$DROP TRIGGER lock_after ON doors$$);
SELECT err($$SET session_replication_role = replica$$);
SELECT err($$UPDATE doors SET project_id = 'prj_b'$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;

-- Logical replication applies changes with session_replication_role =
-- replica, where ordinary triggers do not fire; ENABLE ALWAYS makes a
-- guard fire there too.
SET session_replication_role = replica;
UPDATE doors SET project_id = 'prj_replicated';
SELECT * FROM doors;
ALTER TABLE doors ENABLE ALWAYS TRIGGER lock_after;
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE doors SET project_id = 'prj_replicated_again'$$);
\pset tuples_only off
\pset format aligned
RESET session_replication_role;
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'doors'::regclass;

-- The owner (and a superuser) can still disable a trigger: the guard is
-- as strong as the table's ownership (a documentation test too).
ALTER TABLE doors DISABLE TRIGGER lock_after;
UPDATE doors SET project_id = 'prj_owner_decides';
ALTER TABLE doors ENABLE TRIGGER lock_after;
SELECT * FROM doors;

--
-- Misuse is reported, naming what is wrong
--
\pset tuples_only on
\pset format unaligned
CREATE TABLE misuse (id int, tag text, doc jsonb);
INSERT INTO misuse VALUES (1, 't', '{}');
SELECT err($$SELECT hx_lock_once()$$);
CREATE TRIGGER stmt_level AFTER UPDATE ON misuse FOR EACH STATEMENT EXECUTE FUNCTION hx_lock_once('tag');
SELECT err($$UPDATE misuse SET tag = 'x'$$);
DROP TRIGGER stmt_level ON misuse;
CREATE TRIGGER on_delete BEFORE DELETE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_slot_guard('tag');
SELECT err($$DELETE FROM misuse$$);
DROP TRIGGER on_delete ON misuse;
CREATE TRIGGER no_args BEFORE UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_lock_once();
SELECT err($$UPDATE misuse SET tag = 'x'$$);
DROP TRIGGER no_args ON misuse;
CREATE TRIGGER no_column BEFORE UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_lock_once('tag', 'nope');
SELECT err($$UPDATE misuse SET tag = 'x'$$);
DROP TRIGGER no_column ON misuse;
CREATE TRIGGER system_column BEFORE UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_lock_once('ctid');
SELECT err($$UPDATE misuse SET tag = 'x'$$);
DROP TRIGGER system_column ON misuse;
CREATE TRIGGER not_jsonb BEFORE UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_slot_guard('tag:/a');
SELECT err($$UPDATE misuse SET tag = 'x'$$);
DROP TRIGGER not_jsonb ON misuse;
CREATE TRIGGER bad_pointer BEFORE UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_lock_once('doc:a');
SELECT err($$UPDATE misuse SET tag = 'x'$$);
DROP TRIGGER bad_pointer ON misuse;
CREATE VIEW misuse_view AS SELECT * FROM misuse;
CREATE TRIGGER instead INSTEAD OF UPDATE ON misuse_view FOR EACH ROW EXECUTE FUNCTION hx_lock_once('tag');
SELECT err($$UPDATE misuse_view SET tag = 'x'$$);
\pset tuples_only off
\pset format aligned

-- partitioned tables: an UPDATE that moves a row to another partition
-- runs as a DELETE and an INSERT, and PostgreSQL fires no AFTER UPDATE
-- trigger for it, so an AFTER guard judges the moved row as a new one.
-- BEFORE UPDATE triggers do fire, on the partition the row leaves, with
-- the old and the new row: attached BEFORE UPDATE as well, the guards
-- refuse the move.
CREATE TABLE regions (region text, id int, project_id text, pending jsonb,
	PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE regions_eu PARTITION OF regions FOR VALUES IN ('eu');
CREATE TABLE regions_us PARTITION OF regions FOR VALUES IN ('us');
CREATE CONSTRAINT TRIGGER project_locked AFTER INSERT OR UPDATE ON regions
	FOR EACH ROW EXECUTE FUNCTION hx_lock_once('project_id');
INSERT INTO regions VALUES ('eu', 1, 'prj_1', NULL), ('eu', 2, 'prj_2', NULL);
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE regions SET project_id = 'prj_9' WHERE id = 1$$);
\pset tuples_only off
\pset format aligned
-- AFTER only: the move is a new row in regions_us
UPDATE regions SET region = 'us', project_id = 'prj_9' WHERE id = 1;
SELECT tableoid::regclass AS partition, * FROM regions ORDER BY id;
CREATE TRIGGER project_locked_moves BEFORE UPDATE ON regions
	FOR EACH ROW EXECUTE FUNCTION hx_lock_once('project_id');
CREATE TRIGGER one_pending_moves BEFORE UPDATE ON regions
	FOR EACH ROW EXECUTE FUNCTION hx_slot_guard('pending');
UPDATE regions SET pending = '{"tool": "a"}' WHERE id = 2;
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE regions SET region = 'us', project_id = 'prj_8' WHERE id = 2$$);
SELECT err($$UPDATE regions SET region = 'us', pending = '{"tool": "b"}' WHERE id = 2$$);
\pset tuples_only off
\pset format aligned
-- a move that keeps the guarded columns is no violation
UPDATE regions SET region = 'us' WHERE id = 2;
SELECT tableoid::regclass AS partition, * FROM regions ORDER BY id;
DROP TABLE regions;

-- DELETE then INSERT of a key sets a locked column anew: the guard judges
-- a row's updates, and the inserted row is a new row.  Attached for DELETE
-- as well, hx_lock_once keeps the rows whose locked columns are set.
CREATE TABLE projects (id int PRIMARY KEY, project_id text, note text);
CREATE CONSTRAINT TRIGGER project_locked AFTER INSERT OR UPDATE ON projects
	FOR EACH ROW EXECUTE FUNCTION hx_lock_once('project_id');
INSERT INTO projects VALUES (1, 'prj_a'), (2, NULL);
DELETE FROM projects WHERE id = 1;
INSERT INTO projects VALUES (1, 'prj_b');
CREATE CONSTRAINT TRIGGER project_kept AFTER DELETE ON projects
	FOR EACH ROW EXECUTE FUNCTION hx_lock_once('project_id');
\pset tuples_only on
\pset format unaligned
SELECT err($$DELETE FROM projects WHERE id = 1$$);
SELECT err($$WITH gone AS (DELETE FROM projects WHERE id = 1 RETURNING id) INSERT INTO projects SELECT id, 'prj_c' FROM gone$$);
\pset tuples_only off
\pset format aligned
-- a row whose locked column was never set goes
DELETE FROM projects WHERE id = 2;
SELECT * FROM projects ORDER BY id;
-- the value in the detail only for those who may read it
GRANT DELETE ON projects TO regress_hx_writer;
SET ROLE regress_hx_writer;
\pset tuples_only on
\pset format unaligned
SELECT err($$DELETE FROM projects$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;
DROP TABLE projects;

DROP VIEW misuse_view;
DROP TABLE misuse, doors, guarded;
DROP FUNCTION rewrite_project();
DROP ROLE regress_hx_writer;
