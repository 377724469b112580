--
-- hx_stream: every committed change as an AG-UI event, logged and notified
--

CREATE TABLE sessions (session_id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}', note text);
CREATE TRIGGER sessions_stream AFTER INSERT OR UPDATE OR DELETE ON sessions
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id');

-- events without their timestamp, which changes from run to run
CREATE VIEW events AS
	SELECT stream, seq, type, event - 'timestamp' AS event FROM hx_event;

-- INSERT: a snapshot; UPDATE: a delta (hx_diff, arrays appended as "/-")
INSERT INTO sessions (session_id, state) VALUES ('s-1', '{"notes": [], "count": 0}');
UPDATE sessions SET state = hx_merge(state, '[{"op": "append", "path": "/notes", "items": ["a", "b"]},
	{"op": "increment", "path": "/count", "by": 2}]');
-- no change to the state, no event: the same value, or other columns
UPDATE sessions SET state = state;
UPDATE sessions SET state = '{"count": 2.0, "notes": ["a", "b"]}';
UPDATE sessions SET note = 'not state';
-- a DELETE ends the stream
DELETE FROM sessions;
SELECT * FROM events ORDER BY stream, seq;

-- a later row with the same key continues the stream's seq
INSERT INTO sessions (session_id) VALUES ('s-1');
-- changing the key ends one stream and starts another
UPDATE sessions SET session_id = 's-2';
SELECT * FROM events WHERE seq > 3 OR stream = 'sessions:s-2' ORDER BY stream, seq;
-- a row deleted and inserted again in one statement: the stream ends, then
-- starts again with the next seq
WITH gone AS (DELETE FROM sessions WHERE session_id = 's-2' RETURNING session_id)
INSERT INTO sessions (session_id, state) SELECT session_id, '{"again": true}' FROM gone;
SELECT * FROM events WHERE stream = 'sessions:s-2' ORDER BY seq;

-- the timestamp is AG-UI's: integer milliseconds since the epoch, now
SELECT count(*) AS events,
	   bool_and(jsonb_typeof(e.event->'timestamp') = 'number'
				AND (e.event->>'timestamp') !~ '[.eE]'
				AND abs((e.event->>'timestamp')::numeric - extract(epoch FROM clock_timestamp()) * 1000) < 600000) AS ms_now,
	   bool_and(e.event->'metadata' = jsonb_build_object('stream', e.stream, 'seq', e.seq)) AS metadata
  FROM hx_event e;

-- a NULL state is JSON null; a NULL key has no stream
CREATE TABLE loose (k int UNIQUE, state jsonb);
CREATE TRIGGER loose_stream AFTER INSERT OR UPDATE OR DELETE ON loose
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'k');
INSERT INTO loose VALUES (1, NULL), (NULL, '{"lost": true}');
UPDATE loose SET state = '{"a": 1}' WHERE k = 1;
UPDATE loose SET state = NULL WHERE k = 1;
SELECT * FROM events WHERE stream LIKE 'loose:%' ORDER BY seq;

-- options: arrays mode, another stream name
CREATE TABLE runs (id bigint PRIMARY KEY, state jsonb NOT NULL);
CREATE TRIGGER runs_stream AFTER INSERT OR UPDATE ON runs
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'arrays=index', 'stream=run', 'payload=ref');
INSERT INTO runs VALUES (42, '{"todo": [{"done": false}, {"done": false}]}');
UPDATE runs SET state = jsonb_set(state, '{todo,1,done}', 'true');
SELECT * FROM events WHERE stream LIKE 'run:%' ORDER BY seq;

-- seq stays gap-free through savepoints that roll back
BEGIN;
UPDATE runs SET state = hx_merge(state, '[{"op": "replace", "path": "/step", "value": 1}]');
SAVEPOINT before_two;
UPDATE runs SET state = hx_merge(state, '[{"op": "replace", "path": "/step", "value": 2}]');
ROLLBACK TO SAVEPOINT before_two;
UPDATE runs SET state = hx_merge(state, '[{"op": "replace", "path": "/step", "value": 3}]');
COMMIT;
SELECT seq, event->'delta' AS delta FROM hx_event WHERE stream = 'run:42' ORDER BY seq;

--
-- Reading a stream: (state, seq) in one snapshot, then the events after seq
--
SELECT * FROM hx_stream_snapshot('runs', '42');
-- the key as its type prints it names the stream, however it is spelled
SELECT * FROM hx_stream_snapshot('runs', ' 042');
SELECT * FROM hx_stream_snapshot('sessions', 's-2');
SELECT * FROM hx_stream_snapshot('sessions', 's-1');
SELECT * FROM hx_stream_snapshot('sessions', 'never');
-- replaying the log from 0 rebuilds the state exactly
WITH RECURSIVE replay AS (
	SELECT 0::bigint AS seq, NULL::jsonb AS state
	UNION ALL
	SELECT e.seq, CASE e.event->>'type'
	                  WHEN 'STATE_SNAPSHOT' THEN e.event->'snapshot'
	                  WHEN 'STATE_DELTA' THEN hx_patch(r.state, e.event->'delta') END
	  FROM replay r JOIN hx_event e ON e.stream = 'run:42' AND e.seq = r.seq + 1)
SELECT (SELECT state FROM replay ORDER BY seq DESC LIMIT 1) = (SELECT state FROM runs) AS replay_equals_row;
SELECT seq, event->>'type' AS type FROM hx_stream_events('sessions:s-1', 2);
SELECT seq FROM hx_stream_events('sessions:s-1', 0, 2);
SELECT count(*) FROM hx_stream_events('nobody', 0);
SELECT count(*) FROM hx_stream_events('sessions:s-1', 0, 0) AS none_asked;

-- batched reads, for a follower of many streams: the last seq of each
-- stream (0 before any event), the events after a seq of each, and the
-- snapshots of many keys read together
SELECT * FROM hx_stream_heads(ARRAY['sessions:s-1', 'run:42', 'nobody', NULL]);
SELECT stream, seq, event->>'type' AS type
  FROM hx_stream_events_after(ARRAY['sessions:s-1', 'run:42', 'nobody'], ARRAY[2, 0, 0]::int8[], 2);
SELECT count(*) FROM hx_stream_events_after('{}', '{}') AS nothing_asked;
SELECT key, stream, seq, state FROM hx_stream_snapshots('runs', ARRAY['42', '7']);

-- channels: one per stream, within the 63 bytes of an identifier
SELECT hx_stream_channel('sessions:s-42');
SELECT hx_stream_channel(s) AS channel, octet_length(hx_stream_channel(s)) AS bytes
  FROM (VALUES ('sessions:' || repeat('k', 60)), ('sessions:' || repeat('ключ', 20))) v(s);
SELECT hx_stream_channel('sessions:' || repeat('k', 60) || 'a') <> hx_stream_channel('sessions:' || repeat('k', 60) || 'b') AS distinct_channels;

-- trimming keeps the last event of every stream: a resuming client that
-- finds its next seq gone reads the snapshot again
SELECT hx_stream_trim('0 seconds', 'sessions:s-1') AS trimmed;
SELECT stream, seq FROM hx_event WHERE stream LIKE 'sessions:%' ORDER BY stream, seq;
SELECT hx_stream_trim('1 day') AS nothing_that_young;

--
-- Errors
--
\pset tuples_only on
\pset format unaligned
CREATE TABLE misuse (id int PRIMARY KEY, doc jsonb, tag text, dup int);
INSERT INTO misuse VALUES (1, '{}', 't', 1);
CREATE TRIGGER before_row BEFORE UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_stream('doc', 'id');
SELECT err($$UPDATE misuse SET doc = '[]'$$);
DROP TRIGGER before_row ON misuse;
CREATE TRIGGER per_statement AFTER UPDATE ON misuse FOR EACH STATEMENT EXECUTE FUNCTION hx_stream('doc', 'id');
SELECT err($$UPDATE misuse SET doc = '[]'$$);
DROP TRIGGER per_statement ON misuse;
CREATE TRIGGER one_arg AFTER UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_stream('doc');
SELECT err($$UPDATE misuse SET doc = '[]'$$);
DROP TRIGGER one_arg ON misuse;
CREATE TRIGGER not_jsonb AFTER UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_stream('tag', 'id');
SELECT err($$UPDATE misuse SET doc = '[]'$$);
DROP TRIGGER not_jsonb ON misuse;
CREATE TRIGGER no_column AFTER UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_stream('doc', 'nope');
SELECT err($$UPDATE misuse SET doc = '[]'$$);
DROP TRIGGER no_column ON misuse;
CREATE TRIGGER not_unique AFTER UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_stream('doc', 'dup');
SELECT err($$UPDATE misuse SET doc = '[]'$$);
DROP TRIGGER not_unique ON misuse;
CREATE TRIGGER bad_option AFTER UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_stream('doc', 'id', 'arrays=index', 'color=red');
SELECT err($$UPDATE misuse SET doc = '[]'$$);
DROP TRIGGER bad_option ON misuse;
CREATE TRIGGER bad_payload AFTER UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_stream('doc', 'id', 'payload=all');
SELECT err($$UPDATE misuse SET doc = '[]'$$);
DROP TRIGGER bad_payload ON misuse;
CREATE TRIGGER bad_arrays AFTER UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_stream('doc', 'id', 'arrays=diff');
SELECT err($$UPDATE misuse SET doc = '[]'$$);
DROP TRIGGER bad_arrays ON misuse;
SELECT err($$SELECT * FROM hx_stream_snapshot('misuse', '1')$$);
CREATE TRIGGER s1 AFTER UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_stream('doc', 'id');
CREATE TRIGGER s2 AFTER UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_stream('doc', 'id', 'stream=other');
SELECT err($$SELECT * FROM hx_stream_snapshot('misuse', '1')$$);
SELECT err($$SELECT * FROM hx_stream_snapshot('runs', 'not a number')$$);
SELECT err($$SELECT * FROM hx_stream_snapshots('runs', ARRAY['42', 'not a number'])$$);
SELECT err($$SELECT * FROM hx_stream_events('sessions:s-1', 0, -1)$$);
SELECT err($$SELECT * FROM hx_stream_events_after(ARRAY['sessions:s-1'], ARRAY[0]::int8[], -1)$$);
SELECT err($$SELECT * FROM hx_stream_events_after(ARRAY['sessions:s-1', 'run:42'], ARRAY[0]::int8[])$$);
\pset tuples_only off
\pset format aligned

--
-- Privileges: the log is written as the table's owner
--
CREATE ROLE regress_hx_owner;
CREATE ROLE regress_hx_app;
CREATE ROLE regress_hx_reader;
GRANT CREATE ON SCHEMA public TO regress_hx_owner;
GRANT USAGE ON SCHEMA public TO regress_hx_app, regress_hx_reader;
SET ROLE regress_hx_owner;
CREATE TABLE owned (id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
CREATE TRIGGER owned_stream AFTER INSERT OR UPDATE OR DELETE ON owned
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
GRANT SELECT, INSERT, UPDATE ON owned TO regress_hx_app;
GRANT SELECT ON owned TO regress_hx_reader;
\pset tuples_only on
\pset format unaligned
-- an owner without privileges on the log cannot stream
SELECT err($$INSERT INTO owned VALUES ('a')$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;
GRANT INSERT ON hx_event TO regress_hx_owner;
-- an application role that writes the table needs nothing on the log,
-- and cannot write the log itself
SET ROLE regress_hx_app;
INSERT INTO owned VALUES ('a'), ('b');
UPDATE owned SET state = hx_merge(state, '[{"op": "replace", "path": "/secret", "value": "only a"}]') WHERE id = 'a';
\pset tuples_only on
\pset format unaligned
SELECT err($$INSERT INTO hx_event VALUES ('owned:a', 99, 'STATE_DELTA', '{}')$$);
SELECT err($$SELECT * FROM hx_event$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;
SELECT stream, seq, type FROM hx_event WHERE stream LIKE 'owned:%' ORDER BY stream, seq;

-- row-level security on the log: a reader sees the streams a policy allows
GRANT SELECT ON hx_event TO regress_hx_reader;
ALTER TABLE hx_event ENABLE ROW LEVEL SECURITY;
CREATE POLICY reader_sees_b ON hx_event FOR SELECT TO regress_hx_reader
	USING (stream = 'owned:b');
CREATE POLICY owner_writes ON hx_event FOR INSERT TO regress_hx_owner WITH CHECK (true);
SET ROLE regress_hx_reader;
SELECT seq, event->>'type' AS type FROM hx_stream_events('owned:a');
SELECT seq, event->>'type' AS type FROM hx_stream_events('owned:b');
RESET ROLE;
-- the owner still writes under row-level security, through its INSERT
-- policy; no SELECT policy can hide the stream's last seq from the trigger
SET ROLE regress_hx_app;
UPDATE owned SET state = '{"b": 1}' WHERE id = 'b';
RESET ROLE;
SET ROLE regress_hx_reader;
SELECT seq, event->'delta' AS delta FROM hx_stream_events('owned:b');
RESET ROLE;
-- every policy the owner puts on the log applies to every event: a
-- restrictive one refuses the change that would log a stream it does not
-- allow, and the change with it; the other streams go on
CREATE POLICY owner_not_c ON hx_event AS RESTRICTIVE FOR INSERT TO regress_hx_owner
	WITH CHECK (stream <> 'owned:c');
SET ROLE regress_hx_app;
\pset tuples_only on
\pset format unaligned
SELECT err($$INSERT INTO owned VALUES ('c')$$);
\pset tuples_only off
\pset format aligned
INSERT INTO owned VALUES ('d');
RESET ROLE;
SELECT id FROM owned WHERE id IN ('c', 'd');
SELECT stream, seq, type FROM hx_event WHERE stream IN ('owned:c', 'owned:d');
DROP POLICY owner_not_c ON hx_event;

ALTER TABLE hx_event DISABLE ROW LEVEL SECURITY;
DROP POLICY reader_sees_b ON hx_event;
DROP POLICY owner_writes ON hx_event;
DROP TABLE owned;
REVOKE ALL ON hx_event FROM regress_hx_owner, regress_hx_reader;
REVOKE ALL ON SCHEMA public FROM regress_hx_owner, regress_hx_app, regress_hx_reader;
DROP ROLE regress_hx_owner, regress_hx_app, regress_hx_reader;
DROP VIEW events;
DROP TABLE sessions, loose, runs, misuse;
DELETE FROM hx_event;

-- Triggers the owner puts on the log fire for every event: a row trigger
-- (which PostgreSQL clones onto every partition) and a statement trigger
-- on the log itself
CREATE TABLE log_seen (stream text, seq bigint, on_partition boolean);
CREATE FUNCTION log_seen() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	INSERT INTO log_seen VALUES (NEW.stream, NEW.seq, TG_TABLE_NAME LIKE 'hx\_event\__');
	RETURN NULL;
END
$f$;
CREATE FUNCTION log_statement() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	RAISE NOTICE 'statement on %', TG_TABLE_NAME;
	RETURN NULL;
END
$f$;
CREATE TRIGGER seen AFTER INSERT ON hx_event FOR EACH ROW EXECUTE FUNCTION log_seen();
CREATE TRIGGER stmt AFTER INSERT ON hx_event FOR EACH STATEMENT EXECUTE FUNCTION log_statement();
CREATE TABLE watched (id int PRIMARY KEY, state jsonb);
CREATE TRIGGER hx AFTER INSERT OR UPDATE OR DELETE ON watched
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'payload=none');
INSERT INTO watched VALUES (1, '{"n": 1}'), (2, '{"n": 1}');
UPDATE watched SET state = '{"n": 2}' WHERE id = 1;
SELECT s.stream, s.seq, s.on_partition, e.type
  FROM log_seen s JOIN hx_event e USING (stream, seq) ORDER BY 1, 2;
SELECT count(*) AS events FROM hx_event WHERE stream LIKE 'watched:%';
DROP TRIGGER seen ON hx_event;
DROP TRIGGER stmt ON hx_event;
-- without them, events go on where they left off
UPDATE watched SET state = '{"n": 3}';
SELECT stream, seq, type, event->'delta' AS delta FROM hx_event
 WHERE stream LIKE 'watched:%' AND seq > 1 ORDER BY 1, 2;
-- a partition detached from the ring: the other days' events are still
-- routed as the log's partitioning says, and each stream's seq goes on
SELECT b AS away_bucket, format('hx_event_%s', b) AS away
  FROM (SELECT ((floor(EXTRACT(epoch FROM clock_timestamp() - '1970-01-01 00:00:00+00'::timestamptz)
                       / 86400)::bigint + 4) % 8 + 8) % 8 AS b) d \gset
ALTER TABLE hx_event DETACH PARTITION :away;
UPDATE watched SET state = '{"n": 4}' WHERE id = 2;
ALTER TABLE hx_event ATTACH PARTITION :away FOR VALUES IN (:away_bucket);
SELECT stream, seq, type FROM hx_event WHERE stream = 'watched:2' ORDER BY seq;
-- CHECK constraints the owner adds to the log hold for every event, from
-- the next event on, and stop holding once dropped: a change whose event
-- one refuses is refused with it
ALTER TABLE hx_event ADD CONSTRAINT watched_2_short CHECK (stream <> 'watched:2' OR seq <= 3);
SELECT regexp_replace(split_part(err($$UPDATE watched SET state = '{"n": 5}' WHERE id = 2$$), E'\n', 1),
                      'hx_event_[0-7]', 'hx_event_<day>') AS refused;
UPDATE watched SET state = '{"n": 5}' WHERE id = 1;
-- one constraint put in another's place (as many as before) holds instead
ALTER TABLE hx_event DROP CONSTRAINT watched_2_short,
	ADD CONSTRAINT watched_1_short CHECK (stream <> 'watched:1' OR seq <= 4);
SELECT regexp_replace(split_part(err($$UPDATE watched SET state = '{"n": 6}' WHERE id = 1$$), E'\n', 1),
                      'hx_event_[0-7]', 'hx_event_<day>') AS refused;
UPDATE watched SET state = '{"n": 5}' WHERE id = 2;
ALTER TABLE hx_event DROP CONSTRAINT watched_1_short;
SELECT stream, seq, type, event->'delta' AS delta FROM hx_event
 WHERE stream LIKE 'watched:%' AND seq > 3 ORDER BY 1, 2;
-- the log's own CHECK (seq > 0) is one of them
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
 WHERE conrelid = 'hx_event'::regclass AND contype = 'c' ORDER BY 1;
DROP TABLE watched, log_seen;
DROP FUNCTION log_seen(), log_statement();
DELETE FROM hx_event;

-- A partitioned table streams under its root's name, wherever a row is
-- stored, so that hx_stream_snapshot() on the partitioned table and the
-- events name the same stream; the key must be unique on the root
CREATE TABLE pt (id int PRIMARY KEY, state jsonb) PARTITION BY RANGE (id);
CREATE TABLE pt_1 PARTITION OF pt FOR VALUES FROM (0) TO (100);
CREATE TABLE pt_2 PARTITION OF pt FOR VALUES FROM (100) TO (200);
CREATE TRIGGER hx AFTER INSERT OR UPDATE OR DELETE ON pt
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
INSERT INTO pt VALUES (1, '{"n": 1}'), (150, '{"n": 150}');
UPDATE pt SET state = '{"n": 2}' WHERE id = 1;
SELECT stream, seq, type FROM hx_event WHERE stream LIKE 'pt%' ORDER BY stream, seq;
SELECT * FROM hx_stream_snapshot('pt', '1');
SELECT * FROM hx_stream_snapshot('pt_2', '150');
-- moving a row to another partition changes its key: one stream ends, another starts
UPDATE pt SET id = 120 WHERE id = 1;
SELECT stream, seq, type, event->'value' AS value FROM hx_event WHERE stream IN ('pt:1', 'pt:120') ORDER BY stream, seq;
-- stream=<name> on a partition's own trigger names the streams as asked,
-- and a key unique only in that partition is enough for it
CREATE TABLE lt (id int, state jsonb) PARTITION BY LIST (id);
CREATE TABLE lt_a PARTITION OF lt FOR VALUES IN (1, 2);
CREATE UNIQUE INDEX ON lt_a (id);
CREATE TRIGGER hx AFTER INSERT OR UPDATE OR DELETE ON lt_a
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'stream=lta');
INSERT INTO lt VALUES (1, '{}');
SELECT stream, seq, type FROM hx_event WHERE stream LIKE 'lt%' ORDER BY stream, seq;
-- without stream=, a partition's trigger names the root's streams, so the
-- key must be unique there
CREATE TRIGGER hx_root AFTER INSERT OR UPDATE OR DELETE ON lt_a
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
SELECT err($$INSERT INTO lt VALUES (2, '{}')$$);
DROP TABLE pt, lt;
DELETE FROM hx_event;

-- The log is a ring of eight daily partitions: an event goes to the one of
-- its day.  Trimming whole days empties their partitions with TRUNCATE,
-- after copying into today's the last event of each stream that has none
-- later, so every stream keeps its last event and its seq goes on.
CREATE TABLE ring (id int PRIMARY KEY, state jsonb);
CREATE TRIGGER hx AFTER INSERT OR UPDATE OR DELETE ON ring
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
INSERT INTO ring VALUES (1, '{"n": 0}'), (2, '{"n": 0}'), (3, '{"n": 0}');
UPDATE ring SET state = '{"n": 1}';
UPDATE ring SET state = '{"n": 2}' WHERE id IN (1, 3);
-- age the events: ring:1 six days old, ring:2 three, ring:3 ten (the ring
-- has wrapped: its partition is also the one of two days ago)
UPDATE hx_event SET created_at = created_at - interval '6 days' WHERE stream = 'ring:1';
UPDATE hx_event SET created_at = created_at - interval '3 days' WHERE stream = 'ring:2';
UPDATE hx_event SET created_at = created_at - interval '10 days' WHERE stream = 'ring:3';
SELECT hx_stream_trim('5 days') AS trimmed;
-- ring:1's partition was emptied, its last event (seq 3) copied into
-- today's; ring:3's old events went by DELETE, its last one stayed in
-- place; ring:2 is untouched
SELECT stream, seq, type, created_at > now() - interval '1 hour' AS carried
  FROM hx_event WHERE stream LIKE 'ring:%' ORDER BY stream, seq;
UPDATE ring SET state = '{"n": 3}' WHERE id IN (1, 3);
SELECT stream, seq, type FROM hx_event WHERE stream IN ('ring:1', 'ring:3') ORDER BY stream, seq;
SELECT * FROM hx_stream_snapshot('ring', '1');
-- whatever the cutoff, each stream keeps its last event
SELECT hx_stream_trim('0 seconds') AS trimmed;
SELECT stream, seq FROM hx_event WHERE stream LIKE 'ring:%' ORDER BY stream, seq;
-- intervals past the range of timestamps: nothing is that old, or
-- everything is (and each stream still keeps its last event)
UPDATE ring SET state = '{"n": 4}' WHERE id = 1;
SELECT hx_stream_trim('100000000 days') AS nothing_that_old;
SELECT hx_stream_trim('-100000000 days') AS all_but_last;
SELECT stream, seq FROM hx_event WHERE stream LIKE 'ring:%' ORDER BY stream, seq;
-- so does a cutoff in the future
UPDATE ring SET state = '{"n": 5}' WHERE id = 2;
SELECT hx_stream_trim('-2 days') AS all_but_last;
SELECT stream, seq FROM hx_event WHERE stream LIKE 'ring:%' ORDER BY stream, seq;
DROP TABLE ring;
DELETE FROM hx_event;

-- One definition of the ring: the library's (hx_event_ring, which the
-- trim reads), and the partition key spells it out.  Routing by the key
-- picks the partition the ring names, at the first and last microsecond
-- and the middle of every day around today and around the epoch.
SELECT count(*) AS days, count(DISTINCT partition) AS partitions,
       (SELECT count(*) FROM pg_inherits WHERE inhparent = 'hx_event'::regclass) AS attached
  FROM hx_event_ring();
-- today's partition and tomorrow's (the oldest day's) are written now
SELECT day = (now() AT TIME ZONE 'UTC')::date AS today, current FROM hx_event_ring()
 ORDER BY day DESC LIMIT 1;
SELECT current AS tomorrow FROM hx_event_ring() ORDER BY day LIMIT 1;
BEGIN;
INSERT INTO hx_event (stream, seq, type, event, created_at)
SELECT 'ring-check', row_number() OVER (), 'CUSTOM', '{}', t
  FROM (SELECT c + d * interval '24 hours' + o AS t
          FROM unnest(ARRAY[date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
                            '1970-01-01 00:00:00+00'::timestamptz]) c,
               generate_series(-20, 20) d,
               unnest(ARRAY[interval '0', interval '12 hours', interval '24 hours' - interval '1 microsecond']) o) x;
SELECT count(*) AS checked, count(*) FILTER (WHERE e.tableoid::regclass = g.partition) AS agree,
       count(*) FILTER (WHERE g.day = (e.created_at AT TIME ZONE 'UTC')::date) AS same_day
  FROM hx_event e,
       LATERAL (SELECT r.day, r.partition FROM hx_event_ring(e.created_at) r ORDER BY r.day DESC LIMIT 1) g
 WHERE e.stream = 'ring-check';
ROLLBACK;

-- A trim that runs across midnight (UTC): its now() is yesterday's, the
-- clock today's.  Writers then write the partition of the clock's day,
-- which is also the partition of the day a week back: a trim with a
-- retention under a week must not empty it, and the last events it carries
-- out of the days it empties must land where it does not empty (before
-- 0.6.0 both were lost, and the streams started again at seq 1).  The
-- clock past midnight, as the log sees it: an event a writer logged after
-- midnight, and created_at's default moved a day ahead.
CREATE TABLE nightly (id int PRIMARY KEY, state jsonb);
CREATE TRIGGER hx AFTER INSERT OR UPDATE OR DELETE ON nightly
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'payload=none');
INSERT INTO nightly VALUES (1, '{"n": 0}'), (2, '{"n": 0}'), (3, '{"n": 0}');
UPDATE nightly SET state = '{"n": 1}';
-- nightly:1 a week old (the partition of tomorrow), nightly:3 six days
UPDATE hx_event SET created_at = created_at - interval '7 days' WHERE stream = 'nightly:1';
UPDATE hx_event SET created_at = created_at - interval '6 days' WHERE stream = 'nightly:3';
BEGIN;
INSERT INTO hx_event (stream, seq, type, event, created_at)
	VALUES ('nightly:2', 3, 'STATE_DELTA', '{"after": "midnight"}', now() + interval '1 day');
ALTER TABLE hx_event ALTER COLUMN created_at SET DEFAULT clock_timestamp() + interval '1 day';
SELECT hx_stream_trim('5 days') AS trimmed;
ALTER TABLE hx_event ALTER COLUMN created_at SET DEFAULT clock_timestamp();
COMMIT;
SELECT stream, seq, created_at > now() AS tomorrow FROM hx_event
 WHERE stream LIKE 'nightly:%' ORDER BY stream, seq;
-- every stream goes on from its seq
UPDATE nightly SET state = '{"n": 2}' WHERE id IN (1, 3);
SELECT stream, max(seq) AS last FROM hx_event WHERE stream LIKE 'nightly:%' GROUP BY 1 ORDER BY 1;
DROP TABLE nightly;
DELETE FROM hx_event;
