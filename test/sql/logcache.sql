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
