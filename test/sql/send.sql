--
-- send: log streams, which no table writes (hx_stream_send)
--
-- (err() is defined in setup.sql)

-- events without their timestamp, which changes from run to run
CREATE VIEW events AS
	SELECT stream, seq, type, event - 'timestamp' AS event FROM hx_event;

-- each event is the stream's next, with metadata {stream, seq} and a
-- timestamp as hx_stream's; a caller's metadata and timestamp give way
SELECT hx_stream_send('@thread-1', '{"type": "STATE_SNAPSHOT", "snapshot": {"messages": 0, "step": "plan"}}');
SELECT hx_stream_send('@thread-1', '{"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/step", "value": "act"}],
	"metadata": {"stream": "elsewhere", "seq": 99}, "timestamp": 0}');
SELECT hx_stream_send('@thread-1', '{"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "m1", "role": "user", "content": "hi"}]}');
SELECT hx_stream_send('@thread-1', '{"type": "CUSTOM", "name": "checkpoint", "value": {"id": "c-1"}}');
SELECT hx_stream_send('@thread-1', '{"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/messages", "value": 1}]}');
SELECT hx_stream_send('@thread-2', '{"type": "CUSTOM", "name": "other thread"}');
SELECT * FROM events WHERE stream LIKE '@%' ORDER BY stream, seq;
SELECT bool_and((e.event->>'timestamp')::numeric > 0) AS timestamps FROM hx_event e WHERE stream LIKE '@%';

-- the history of a log stream replays as a table's: from the last
-- snapshot, its deltas (messages and custom events change no state)
SELECT seq, hx_stream_state_at('@thread-1', seq) FROM generate_series(1, 5) seq;
SELECT hx_stream_since('@thread-1');
SELECT * FROM hx_stream_heads(ARRAY['@thread-1', '@thread-2', '@none']);
SELECT seq, event->>'type' AS type FROM hx_stream_events('@thread-1', 3);

-- a log stream ends as a deleted row's does (hx.stream_end, with a
-- reason): its state is null until its next snapshot, where its current
-- history begins again
SELECT hx_stream_send('@thread-3', '{"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}');
SELECT hx_stream_send('@thread-3', '{"type": "CUSTOM", "name": "hx.stream_end", "value": {"reason": "deleted"}}');
SELECT hx_stream_since('@thread-3') AS since_end;
SELECT hx_stream_send('@thread-3', '{"type": "STATE_SNAPSHOT", "snapshot": {"n": 2}}');
SELECT seq, hx_stream_state_at('@thread-3', seq) FROM generate_series(1, 3) seq;
SELECT hx_stream_since('@thread-3') AS since_snapshot;

-- within a transaction, each send takes the next seq; a rollback takes
-- its events back, and the seqs with them
BEGIN;
SELECT hx_stream_send('@thread-2', '{"type": "CUSTOM", "name": "a"}');
SELECT hx_stream_send('@thread-2', '{"type": "CUSTOM", "name": "b"}');
ROLLBACK;
SELECT hx_stream_send('@thread-2', '{"type": "CUSTOM", "name": "c"}');

--
-- What a log stream refuses
--
\pset tuples_only on
\pset format unaligned
-- names that are not a log stream's: those are tables' streams
SELECT err($$SELECT hx_stream_send('sessions:s-1', '{"type": "CUSTOM", "name": "x"}')$$);
SELECT err($$SELECT hx_stream_send('@', '{"type": "CUSTOM", "name": "x"}')$$);
SELECT err($$SELECT hx_stream_send(NULL, '{"type": "CUSTOM", "name": "x"}')$$);
SELECT err($$SELECT hx_stream_send('@t', NULL)$$);
-- events of the wrong shape
SELECT err($$SELECT hx_stream_send('@t', '[{"type": "CUSTOM"}]')$$);
SELECT err($$SELECT hx_stream_send('@t', '"CUSTOM"')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"name": "x"}')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"type": 7}')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"type": "STATE_SNAPSHOT"}')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"type": "STATE_DELTA", "delta": {"op": "add"}}')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"type": "STATE_DELTA", "delta": [{"op": "increment", "path": "/n", "by": 1}]}')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"type": "STATE_DELTA", "delta": [{"op": "add", "path": "a", "value": 1}]}')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"type": "STATE_DELTA", "delta": [{"op": "remove", "path": ""}]}')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/a"}]}')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"type": "MESSAGES_SNAPSHOT", "messages": {}}')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"type": "CUSTOM", "name": ["x"]}')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"type": "CUSTOM", "name": "hx.other"}')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"type": "CUSTOM", "name": "hx.stream_end"}')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"type": "CUSTOM", "name": "hx.stream_end", "value": {"reason": 1}}')$$);
-- "snapshot" and "delta" belong to their own types, which replay reads
SELECT err($$SELECT hx_stream_send('@t', '{"type": "CUSTOM", "name": "x", "snapshot": {}}')$$);
SELECT err($$SELECT hx_stream_send('@t', '{"type": "STATE_DELTA", "delta": [], "snapshot": {}}')$$);
-- a write, refused in a read-only transaction (and on a standby) as
-- others are; so is the event of a streamed temporary table, which such a
-- transaction may write
BEGIN READ ONLY;
SELECT err($$SELECT hx_stream_send('@t', '{"type": "CUSTOM", "name": "x"}')$$);
ROLLBACK;
CREATE TEMP TABLE send_temp (k text PRIMARY KEY, st jsonb);
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON send_temp
	FOR EACH ROW EXECUTE FUNCTION hx_stream('st', 'k', 'stream=send_temp');
BEGIN READ ONLY;
SELECT err($$INSERT INTO send_temp VALUES ('a', '{}')$$);
ROLLBACK;
DROP TABLE send_temp;
\pset tuples_only off
\pset format aligned
SELECT count(*) AS nothing_logged FROM hx_event WHERE stream IN ('@t', 'send_temp:a');

--
-- The sender writes the log as itself
--
CREATE ROLE regress_hx_sender;
CREATE ROLE regress_hx_nobody;
GRANT INSERT ON hx_event TO regress_hx_sender;
SET ROLE regress_hx_nobody;
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT hx_stream_send('@t', '{"type": "CUSTOM", "name": "x"}')$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;
SET ROLE regress_hx_sender;
SELECT hx_stream_send('@t', '{"type": "CUSTOM", "name": "x"}');
RESET ROLE;
-- and the log's row-level security holds for it: a policy that lets it
-- write its own streams only
ALTER TABLE hx_event ENABLE ROW LEVEL SECURITY;
CREATE POLICY sender_own ON hx_event FOR INSERT TO regress_hx_sender
	WITH CHECK (stream LIKE '@t%');
SET ROLE regress_hx_sender;
SELECT hx_stream_send('@t', '{"type": "CUSTOM", "name": "y"}');
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT hx_stream_send('@u', '{"type": "CUSTOM", "name": "x"}')$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;
DROP POLICY sender_own ON hx_event;
ALTER TABLE hx_event DISABLE ROW LEVEL SECURITY;
SELECT stream, seq, event->>'name' AS name FROM hx_event WHERE stream IN ('@t', '@u') ORDER BY 1, 2;

-- What a writer inserts with SQL of its own (INSERT, COPY) is checked as
-- hx_stream_send checks it (hx_event_guard): INSERT on the log lets it
-- write the next event of a log stream, and nothing else
CREATE TABLE guarded (k text PRIMARY KEY, st jsonb);
CREATE TRIGGER guarded_stream AFTER INSERT OR UPDATE OR DELETE ON guarded
	FOR EACH ROW EXECUTE FUNCTION hx_stream('st', 'k');
INSERT INTO guarded VALUES ('s-42', '{"n": 1}');
SET ROLE regress_hx_sender;
\pset tuples_only on
\pset format unaligned
-- a table's stream: only its row's trigger writes it
SELECT err($$INSERT INTO hx_event (stream, seq, type, event) VALUES ('guarded:s-42', 2, 'STATE_SNAPSHOT',
  '{"type": "STATE_SNAPSHOT", "snapshot": {"forged": true}, "metadata": {"stream": "guarded:s-42", "seq": 2}}')$$);
-- a seq that is not the next: taken, skipped ahead, or the last there is
SELECT err($$INSERT INTO hx_event (stream, seq, type, event) VALUES ('@t', 1, 'CUSTOM',
  '{"type": "CUSTOM", "name": "x", "metadata": {"stream": "@t", "seq": 1}}')$$);
SELECT err($$INSERT INTO hx_event (stream, seq, type, event) VALUES ('@t', 9223372036854775807, 'CUSTOM',
  '{"type": "CUSTOM", "name": "x", "metadata": {"stream": "@t", "seq": 9223372036854775807}}')$$);
-- the next seq, dated yesterday (another day's partition, where the
-- primary key would not see seq 3 taken again), or tomorrow
SELECT err($$INSERT INTO hx_event (stream, seq, type, event, created_at) VALUES ('@t', 3, 'CUSTOM',
  '{"type": "CUSTOM", "name": "x", "metadata": {"stream": "@t", "seq": 3}}', now() - interval '1 day')$$);
SELECT err($$INSERT INTO hx_event (stream, seq, type, event, created_at) VALUES ('@t', 3, 'CUSTOM',
  '{"type": "CUSTOM", "name": "x", "metadata": {"stream": "@t", "seq": 3}}', now() + interval '1 day')$$);
-- an event hx_stream_send would refuse, a type column that is not the
-- event's, metadata of another stream or seq
SELECT err($$INSERT INTO hx_event (stream, seq, type, event) VALUES ('@t', 3, 'RUN_STARTED',
  '{"type": "RUN_STARTED", "metadata": {"stream": "@t", "seq": 3}}')$$);
SELECT err($$INSERT INTO hx_event (stream, seq, type, event) VALUES ('@t', 3, 'STATE_SNAPSHOT',
  '{"type": "CUSTOM", "name": "x", "metadata": {"stream": "@t", "seq": 3}}')$$);
SELECT err($$INSERT INTO hx_event (stream, seq, type, event) VALUES ('@t', 3, 'CUSTOM',
  '{"type": "CUSTOM", "name": "x", "metadata": {"stream": "@u", "seq": 3}}')$$);
SELECT err($$INSERT INTO hx_event (stream, seq, type, event) VALUES ('@t', 3, 'CUSTOM',
  '{"type": "CUSTOM", "name": "x"}')$$);
SELECT err($$INSERT INTO hx_event (stream, seq, type, event) VALUES ('@t', 3, 'CUSTOM',
  '{"type": "CUSTOM", "name": "hx.rename", "metadata": {"stream": "@t", "seq": 3}}')$$);
\pset tuples_only off
\pset format aligned
-- the next event of a log stream, as hx_stream_send would write it, goes in
INSERT INTO hx_event (stream, seq, type, event) VALUES ('@t', 3, 'CUSTOM',
  '{"type": "CUSTOM", "name": "z", "metadata": {"stream": "@t", "seq": 3}}');
SELECT hx_stream_send('@t', '{"type": "CUSTOM", "name": "after"}') AS next_seq;
-- and a policy on the log confines the writer to its own log streams: it
-- cannot end another application's
RESET ROLE;
ALTER TABLE hx_event ENABLE ROW LEVEL SECURITY;
CREATE POLICY sender_own ON hx_event FOR INSERT TO regress_hx_sender
	WITH CHECK (stream LIKE '@t%');
SELECT hx_stream_send('@app', '{"type": "CUSTOM", "name": "x"}');
SET ROLE regress_hx_sender;
\pset tuples_only on
\pset format unaligned
SELECT err($$INSERT INTO hx_event (stream, seq, type, event) VALUES ('@app', 2, 'CUSTOM',
  '{"type": "CUSTOM", "name": "hx.stream_end", "value": {"reason": "forged"}, "metadata": {"stream": "@app", "seq": 2}}')$$);
SELECT err($$SELECT hx_stream_send('@app', '{"type": "CUSTOM", "name": "hx.stream_end", "value": {"reason": "forged"}}')$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;
DROP POLICY sender_own ON hx_event;
ALTER TABLE hx_event DISABLE ROW LEVEL SECURITY;
-- the row's stream goes on from its own next seq, and the log is as the
-- writers made it
UPDATE guarded SET st = '{"n": 2}';
SELECT stream, seq, type, event->'snapshot' AS snapshot, event->'delta' AS delta, event->>'name' AS name
  FROM hx_event WHERE stream IN ('@t', '@app', 'guarded:s-42') ORDER BY 1, 2;
-- the log's owner (a superuser here) is not checked: pg_restore writes
-- events in the order of its dump
INSERT INTO hx_event (stream, seq, type, event, created_at) VALUES ('@restored', 7, 'CUSTOM',
  '{"type": "CUSTOM", "name": "x", "metadata": {"stream": "@restored", "seq": 7}}', now() - interval '2 days');
DROP TABLE guarded;
REVOKE ALL ON hx_event FROM regress_hx_sender;
DROP ROLE regress_hx_sender, regress_hx_nobody;

DROP VIEW events;
DELETE FROM hx_event;
