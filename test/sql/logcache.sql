--
-- logcache: what a backend keeps to write events straight into the log's
-- partitions (src/eventlog.c: each partition's compiled CHECK constraints
-- and its indexes, made once per backend)
--

-- The planner folds an immutable function while the partition's CHECK
-- constraints are compiled; one (here, one that lies about being
-- immutable) that writes an event meanwhile writes it as the executor
-- would, and the event that was being written goes on: both are logged.
-- (A nested event used to free the memory the constraints were being
-- compiled into: the backend crashed.)
CREATE FUNCTION logcache_writer() RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	IF current_setting('logcache.write', true) = 'on' THEN
		PERFORM set_config('logcache.write', 'off', false);
		PERFORM hx_stream_send('@logcache-inner', '{"type": "CUSTOM", "name": "inner"}');
	END IF;
	RETURN true;
END
$$;
-- today's partition (UTC), which the events below go to
SELECT partition AS part FROM hx_event_ring(now())
 WHERE day = (now() AT TIME ZONE 'UTC')::date \gset
SELECT hx_stream_send('@logcache', '{"type": "CUSTOM", "name": "first"}');
ALTER TABLE :part ADD CONSTRAINT logcache_check CHECK (logcache_writer());
SET logcache.write = on;
SELECT hx_stream_send('@logcache', '{"type": "CUSTOM", "name": "second"}');
RESET logcache.write;
-- and the next event is written as before
SELECT hx_stream_send('@logcache', '{"type": "CUSTOM", "name": "third"}');
SELECT stream, seq, event->>'name' AS name FROM hx_event
 WHERE stream LIKE '@logcache%' ORDER BY stream, seq;

-- an index this session adds to the partition (here a partial unique
-- index on an expression) takes the next event, and goes when its
-- transaction rolls back (the invalidations replayed at abort): the
-- backend opens it no more
BEGIN;
CREATE UNIQUE INDEX logcache_unique ON :part ((event->>'name')) WHERE stream = '@logcache-dup';
SELECT hx_stream_send('@logcache-dup', '{"type": "CUSTOM", "name": "dup"}');
SAVEPOINT s;
SELECT hx_stream_send('@logcache-dup', '{"type": "CUSTOM", "name": "dup"}');
ROLLBACK TO SAVEPOINT s;
ROLLBACK;
SELECT hx_stream_send('@logcache-dup', '{"type": "CUSTOM", "name": "dup"}');
SELECT hx_stream_send('@logcache-dup', '{"type": "CUSTOM", "name": "dup"}');
SELECT stream, seq, event->>'name' AS name FROM hx_event
 WHERE stream = '@logcache-dup' ORDER BY seq;

ALTER TABLE :part DROP CONSTRAINT logcache_check;
\unset part
DROP FUNCTION logcache_writer();
DELETE FROM hx_event WHERE stream LIKE '@logcache%';

-- A stream's next seq: the backend remembers the last seq it found for a
-- stream, and its next look reads the stream's events from there on.
-- Where the stream's newest events have gone since (deleted, the log
-- truncated), nothing is there: it looks again from the stream's start,
-- and the next event follows the last that is left.  (Without that second
-- look the next event took seq 1 again, a duplicate key.)
SELECT hx_stream_send('@seqhint', jsonb_build_object('type', 'CUSTOM', 'name', 'e' || i)) AS seq
  FROM generate_series(1, 5) i;
DELETE FROM hx_event WHERE stream = '@seqhint' AND seq > 2;
SELECT hx_stream_send('@seqhint', '{"type": "CUSTOM", "name": "after the delete"}') AS seq;
DELETE FROM hx_event WHERE stream = '@seqhint';
SELECT hx_stream_send('@seqhint', '{"type": "CUSTOM", "name": "a new start"}') AS seq;
-- a rolled back event leaves its seq to the next
BEGIN;
SELECT hx_stream_send('@seqhint', '{"type": "CUSTOM", "name": "rolled back"}') AS seq;
ROLLBACK;
SELECT hx_stream_send('@seqhint', '{"type": "CUSTOM", "name": "kept"}') AS seq;
-- the events of many streams in turn, more than the backend remembers
-- (4,096), each stream's seqs still one after another (a commit every
-- 1,000 events, each send holding its stream's lock to its commit)
DO $$
BEGIN
	FOR i IN 0..14999 LOOP
		PERFORM hx_stream_send('@seqhint-' || (i % 5000), '{"type": "CUSTOM", "name": "x"}');
		IF i % 1000 = 999 THEN
			COMMIT;
		END IF;
	END LOOP;
END
$$;
SELECT count(*) AS events, count(DISTINCT stream) AS streams,
       min(seq) AS first, max(seq) AS last,
       bool_and(n = 3 AND top = 3) AS each_1_2_3
  FROM (SELECT stream, seq, count(*) OVER w AS n, max(seq) OVER w AS top
          FROM hx_event WHERE stream LIKE '@seqhint-%'
        WINDOW w AS (PARTITION BY stream)) s;
SELECT stream, seq, event->>'name' AS name FROM hx_event
 WHERE stream = '@seqhint' ORDER BY seq;
DELETE FROM hx_event WHERE stream LIKE '@seqhint%';
