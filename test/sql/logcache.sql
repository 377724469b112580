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
SELECT hx_stream_send('@logcache', '{"type": "CUSTOM", "name": "first"}');
DO $$
DECLARE
	p regclass;
BEGIN
	SELECT partition INTO p FROM hx_event_ring(now()) WHERE current;
	EXECUTE format('ALTER TABLE %s ADD CONSTRAINT logcache_check CHECK (logcache_writer())', p);
END
$$;
SET logcache.write = on;
SELECT hx_stream_send('@logcache', '{"type": "CUSTOM", "name": "second"}');
RESET logcache.write;
-- and the next event is written as before
SELECT hx_stream_send('@logcache', '{"type": "CUSTOM", "name": "third"}');
SELECT stream, seq, event->>'name' AS name FROM hx_event
 WHERE stream LIKE '@logcache%' ORDER BY stream, seq;

DO $$
DECLARE
	p regclass;
BEGIN
	FOR p IN SELECT partition FROM hx_event_ring(now()) LOOP
		EXECUTE format('ALTER TABLE %s DROP CONSTRAINT IF EXISTS logcache_check', p);
	END LOOP;
END
$$;
DROP FUNCTION logcache_writer();
DELETE FROM hx_event WHERE stream LIKE '@logcache%';
