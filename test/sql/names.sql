--
-- names: every table's rows stream under names of their own
--
-- (err() is defined in setup.sql)

-- Two tables of one name in two schemas: each its own streams, each its
-- own seqs (they shared "sessions:s-99" and its seqs before 0.6.0)
CREATE SCHEMA tenant_b;
CREATE TABLE sessions (id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
CREATE TABLE tenant_b.sessions (id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON sessions
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON tenant_b.sessions
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
INSERT INTO sessions VALUES ('s-99', '{"owner": "alice"}');
INSERT INTO tenant_b.sessions VALUES ('s-99', '{"owner": "bob"}');
UPDATE tenant_b.sessions SET state = '{"owner": "bob", "n": 1}';
SELECT stream, seq, type, event->'metadata' AS metadata FROM hx_event ORDER BY stream, seq;
SELECT * FROM hx_stream_snapshot('sessions', 's-99');
SELECT * FROM hx_stream_snapshot('tenant_b.sessions', 's-99');
SELECT key, stream, seq FROM hx_stream_snapshots('tenant_b.sessions', ARRAY['s-99', 's-1']);
SELECT seq, event->'snapshot' AS snapshot FROM hx_stream_events('tenant_b.sessions:s-99');

-- Each part of a name is double-quoted unless it is a lower-case
-- identifier, so that a name reads back as one schema and one table:
-- "a.b" in public, and b in schema a, differ
CREATE SCHEMA a;
CREATE SCHEMA "Odd ""Schema""";
CREATE TABLE "a.b" (id int PRIMARY KEY, state jsonb);
CREATE TABLE a.b (id int PRIMARY KEY, state jsonb);
CREATE TABLE "Odd ""Schema"""."x:y" (id int PRIMARY KEY, state jsonb);
CREATE TABLE "Select" (id int PRIMARY KEY, state jsonb);
CREATE TABLE "select" (id int PRIMARY KEY, state jsonb);
CREATE TRIGGER s AFTER INSERT ON "a.b" FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'payload=none');
CREATE TRIGGER s AFTER INSERT ON a.b FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'payload=none');
CREATE TRIGGER s AFTER INSERT ON "Odd ""Schema"""."x:y" FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'payload=none');
CREATE TRIGGER s AFTER INSERT ON "Select" FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'payload=none');
CREATE TRIGGER s AFTER INSERT ON "select" FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'payload=none');
INSERT INTO "a.b" VALUES (1, '{}');
INSERT INTO a.b VALUES (1, '{}');
INSERT INTO "Odd ""Schema"""."x:y" VALUES (1, '{}');
INSERT INTO "Select" VALUES (1, '{}');
INSERT INTO "select" VALUES (1, '{}');
SELECT stream, seq FROM hx_event WHERE stream NOT LIKE '%sessions%' ORDER BY stream COLLATE "C";
-- which tables stream under which names
SELECT source, prefix, named, relation, trigger_name, conflicts_with
  FROM hx_stream_tables() ORDER BY prefix COLLATE "C";

-- The registry follows renames: of a table, and of a schema
ALTER TABLE a.b RENAME TO c;
INSERT INTO a.c VALUES (2, '{}');
ALTER SCHEMA a RENAME TO aa;
INSERT INTO aa.c VALUES (3, '{}');
ALTER TABLE aa.c SET SCHEMA public;
INSERT INTO c VALUES (4, '{}');
SELECT stream, seq FROM hx_event WHERE stream ~ '^(a|aa)?\.?c:' ORDER BY stream COLLATE "C";
DROP TABLE "a.b", c, "Odd ""Schema"""."x:y", "Select", "select";
DROP SCHEMA aa, "Odd ""Schema""";

-- stream=<name> names a table's streams freely, but not as another
-- table's: both tables are refused, with both named, until one gets
-- another name
CREATE TABLE runs (id int PRIMARY KEY, state jsonb);
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON runs
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'stream=sessions');
\pset tuples_only on
\pset format unaligned
SELECT err($$INSERT INTO runs VALUES (1, '{}')$$);
SELECT err($$UPDATE sessions SET state = '{}'$$);
SELECT err($$SELECT * FROM hx_stream_snapshot('sessions', 's-99')$$);
\pset tuples_only off
\pset format aligned
SELECT source, prefix, conflicts_with FROM hx_stream_tables()
 WHERE conflicts_with IS NOT NULL ORDER BY source::text;
-- a name that, followed by ':', begins another table's: a key of one
-- could name a stream of the other ("run" with key "x:1", "run:x" with 1)
DROP TRIGGER stream ON runs;
CREATE TABLE runs_x (id int PRIMARY KEY, state jsonb);
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON runs
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'stream=run');
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON runs_x
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'stream=run:x');
\pset tuples_only on
\pset format unaligned
SELECT err($$INSERT INTO runs_x VALUES (1, '{}')$$);
\pset tuples_only off
\pset format aligned
-- renaming one of them ends it: in the same transaction, and for others
BEGIN;
DROP TRIGGER stream ON runs_x;
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON runs_x
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'stream=runx');
INSERT INTO runs_x VALUES (1, '{}');
COMMIT;
INSERT INTO runs VALUES (1, '{}');
UPDATE sessions SET state = '{"n": 2}';
SELECT stream, seq FROM hx_event WHERE stream ~ '^(run|runx|sessions):' ORDER BY stream COLLATE "C", seq;
-- one table may stream twice under names of its own
CREATE TRIGGER again AFTER INSERT ON runs
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'stream=run2', 'payload=none');
INSERT INTO runs VALUES (2, '{}');
SELECT stream, seq FROM hx_event WHERE stream ~ '^run2?:2' ORDER BY stream COLLATE "C";
-- a table renamed onto another's stream name collides
CREATE TABLE run (id int PRIMARY KEY, state jsonb);
CREATE TRIGGER stream AFTER INSERT ON run FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
ALTER TABLE run RENAME TO runx;
\pset tuples_only on
\pset format unaligned
SELECT err($$INSERT INTO runx VALUES (1, '{}')$$);
\pset tuples_only off
\pset format aligned
DROP TABLE runx, runs, runs_x;

-- names that begin with "@" are log streams' (hx_stream_send)
CREATE TABLE at (id int PRIMARY KEY, state jsonb);
CREATE TRIGGER stream AFTER INSERT ON at FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'stream=@at');
\pset tuples_only on
\pset format unaligned
SELECT err($$INSERT INTO at VALUES (1, '{}')$$);
\pset tuples_only off
\pset format aligned
DROP TABLE at;

-- A partitioned table's trigger, cloned onto its partitions, names one
-- table's streams: with stream=<name> too; its key must be unique on the
-- partitioned table
CREATE TABLE pt (id int PRIMARY KEY, state jsonb) PARTITION BY RANGE (id);
CREATE TABLE pt_1 PARTITION OF pt FOR VALUES FROM (0) TO (100);
CREATE TABLE pt_2 PARTITION OF pt FOR VALUES FROM (100) TO (200);
CREATE TRIGGER stream AFTER INSERT ON pt FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'stream=p');
INSERT INTO pt VALUES (1, '{}'), (150, '{}');
SELECT stream, seq FROM hx_event WHERE stream LIKE 'p:%' ORDER BY stream COLLATE "C";
SELECT source, prefix, named, relation FROM hx_stream_tables() WHERE prefix = 'p';
CREATE TABLE lt (id int, state jsonb) PARTITION BY LIST (id);
CREATE TABLE lt_a PARTITION OF lt FOR VALUES IN (1, 2);
CREATE UNIQUE INDEX ON lt_a (id);
CREATE TRIGGER stream AFTER INSERT ON lt FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'stream=l');
\pset tuples_only on
\pset format unaligned
SELECT err($$INSERT INTO lt VALUES (1, '{}')$$);
\pset tuples_only off
\pset format aligned
DROP TABLE pt, lt;

-- A partition's own trigger streams its rows under the name of the root
-- of its tree, wherever the tree is attached or detached (each registry
-- follows: the ATTACH and DETACH below invalidate tree_a and tree_b only,
-- not tree_c); VACUUM and ANALYZE of it change nothing
CREATE TABLE tree_a (id int PRIMARY KEY, state jsonb) PARTITION BY RANGE (id);
CREATE TABLE tree_b (id int PRIMARY KEY, state jsonb) PARTITION BY RANGE (id);
CREATE TABLE tree_c (id int PRIMARY KEY, state jsonb);
CREATE TRIGGER stream AFTER INSERT ON tree_c FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
CREATE VIEW tree_c_prefix AS
	SELECT source, prefix FROM hx_stream_tables() WHERE relation = 'tree_c'::regclass;
SELECT * FROM tree_c_prefix;
ALTER TABLE tree_b ATTACH PARTITION tree_c FOR VALUES FROM (0) TO (100);
SELECT * FROM tree_c_prefix;
VACUUM ANALYZE tree_c;
SELECT * FROM tree_c_prefix;
ALTER TABLE tree_a ATTACH PARTITION tree_b FOR VALUES FROM (0) TO (100);
SELECT * FROM tree_c_prefix;
ALTER TABLE tree_a RENAME TO tree_r;
SELECT * FROM tree_c_prefix;
ALTER TABLE tree_r DETACH PARTITION tree_b;
SELECT * FROM tree_c_prefix;
INSERT INTO tree_b VALUES (1, '{}');
SELECT stream, seq FROM hx_event WHERE stream LIKE 'tree%' ORDER BY stream COLLATE "C";
DROP VIEW tree_c_prefix;
DROP TABLE tree_r, tree_b;

DROP TABLE sessions, tenant_b.sessions;
DROP SCHEMA tenant_b;
DELETE FROM hx_event;
