--
-- argcache: a trigger's arguments, read once per backend and kept
-- (src/trigger.c), follow what this session does to the trigger and its
-- table, rolled back or not.  (isolation/trigger-cache: what another
-- session does.)
--
CREATE TABLE argcache (id text PRIMARY KEY, state jsonb, alt jsonb);
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON argcache
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
INSERT INTO argcache VALUES ('k', '{"n": 1}', '{"a": 1}');

-- CREATE OR REPLACE TRIGGER keeps the trigger's OID and changes its
-- arguments: the rows after it stream the other column; rolled back, the
-- first one again
BEGIN;
CREATE OR REPLACE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON argcache
	FOR EACH ROW EXECUTE FUNCTION hx_stream('alt', 'id');
UPDATE argcache SET state = '{"n": 2}', alt = '{"a": 2}';
ROLLBACK;
UPDATE argcache SET state = '{"n": 3}', alt = '{"a": 3}';
-- the same in a subtransaction rolled back
BEGIN;
SAVEPOINT s;
CREATE OR REPLACE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON argcache
	FOR EACH ROW EXECUTE FUNCTION hx_stream('alt', 'id');
UPDATE argcache SET state = '{"n": 4}', alt = '{"a": 4}';
ROLLBACK TO SAVEPOINT s;
UPDATE argcache SET state = '{"n": 5}', alt = '{"a": 5}';
COMMIT;
-- committed, it holds
CREATE OR REPLACE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON argcache
	FOR EACH ROW EXECUTE FUNCTION hx_stream('alt', 'id');
UPDATE argcache SET state = '{"n": 6}', alt = '{"a": 6}';
-- the events of the rolled-back trigger (a: 2, a: 4) went with their
-- (sub)transactions; after each, the rows streamed state again (n: 3, 5)
SELECT seq, type, event->'snapshot' AS snapshot, event->'delta' AS delta
  FROM hx_event WHERE stream = 'argcache:k' ORDER BY seq;

-- arguments that failed to parse are not kept: a trigger naming a column
-- that does not exist fails until the column is added
CREATE OR REPLACE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON argcache
	FOR EACH ROW EXECUTE FUNCTION hx_stream('later', 'id');
UPDATE argcache SET state = '{"n": 7}';
UPDATE argcache SET state = '{"n": 7}';
ALTER TABLE argcache ADD COLUMN later jsonb;
UPDATE argcache SET later = '{"l": 1}';
-- columns renamed in a transaction rolled back: while it lasts, "later"
-- is the column that was "alt"; after it, "later" again
BEGIN;
ALTER TABLE argcache RENAME COLUMN later TO renamed;
ALTER TABLE argcache RENAME COLUMN alt TO later;
UPDATE argcache SET later = '{"a": 7}';
ROLLBACK;
UPDATE argcache SET later = '{"l": 2}', alt = '{"a": 8}';
SELECT seq, type, event->'snapshot' AS snapshot, event->'delta' AS delta
  FROM hx_event WHERE stream = 'argcache:k' AND seq >= 5 ORDER BY seq;

DROP TABLE argcache;
DELETE FROM hx_event WHERE stream = 'argcache:k';
