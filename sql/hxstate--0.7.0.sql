/* hxstate--0.7.0.sql: the whole extension, as version 0.7.0 */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION hxstate" to load this file. \quit

-- Every name in the expressions below (CHECK constraints, defaults, the
-- log's partition key, the statements the script runs) resolves in
-- pg_catalog, whatever else the extension's schema holds.  SET LOCAL
-- lasts as long as the script: CREATE EXTENSION puts the search_path back
-- when it ends.
SET LOCAL search_path = pg_catalog, pg_temp;

--
-- 1. Pure jsonb functions
--
CREATE FUNCTION @extschema@.hx_patch(doc pg_catalog.jsonb, patch pg_catalog.jsonb)
RETURNS pg_catalog.jsonb
AS 'MODULE_PATHNAME', 'hx_patch'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hx_patch(pg_catalog.jsonb, pg_catalog.jsonb)
IS 'apply an RFC 6902 JSON Patch, all operations or none';

CREATE FUNCTION @extschema@.hx_merge(state pg_catalog.jsonb, writes pg_catalog.jsonb)
RETURNS pg_catalog.jsonb
AS 'MODULE_PATHNAME', 'hx_merge'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hx_merge(pg_catalog.jsonb, pg_catalog.jsonb)
IS 'merge a step''s writes into a state: appends, counters and sets compose across parallel writers';

CREATE FUNCTION @extschema@.hx_diff(old pg_catalog.jsonb, new pg_catalog.jsonb,
                                    arrays pg_catalog.text DEFAULT 'append')
RETURNS pg_catalog.jsonb
AS 'MODULE_PATHNAME', 'hx_diff'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hx_diff(pg_catalog.jsonb, pg_catalog.jsonb, pg_catalog.text)
IS 'derive the RFC 6902 patch from one document to another; arrays: append, replace or index';

CREATE FUNCTION @extschema@.hx_check_writes(writes pg_catalog.jsonb)
RETURNS pg_catalog.void
AS 'MODULE_PATHNAME', 'hx_check_writes'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hx_check_writes(pg_catalog.jsonb)
IS 'raise the error hx_merge would raise for writes whatever the state (malformed op list, op, member or pointer)';

CREATE FUNCTION @extschema@.hx_compress(value anyelement, method pg_catalog.text DEFAULT NULL)
RETURNS anyelement
AS 'MODULE_PATHNAME', 'hx_compress'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hx_compress(anyelement, pg_catalog.text)
IS 'a value of a variable-length type compressed in line (pglz or lz4), for narrow rows PostgreSQL stores uncompressed';

--
-- 2. Session invariants: row trigger functions that check and raise;
-- attach them AFTER, as CREATE CONSTRAINT TRIGGER ... AFTER INSERT OR
-- UPDATE ... FOR EACH ROW.
--
CREATE FUNCTION @extschema@.hx_lock_once()
RETURNS trigger
AS 'MODULE_PATHNAME', 'hx_lock_once'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.hx_lock_once()
IS 'row trigger: once a listed column (or column:/json/pointer member) is set, it never changes';

CREATE FUNCTION @extschema@.hx_slot_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'hx_slot_guard'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.hx_slot_guard()
IS 'row trigger: a listed column goes from NULL to a value and back, never from one value to another';

--
-- 3. The phase machine.  Machines are data: a name and the phase a row
-- starts in, and the edges between phases.
--
CREATE TABLE @extschema@.hx_machine (
    machine       text PRIMARY KEY CHECK (machine <> ''),
    initial_phase text NOT NULL CHECK (initial_phase <> '')
);

COMMENT ON TABLE @extschema@.hx_machine
IS 'state machines for hx_phase_guard and hx_next_phase: a name and the phase a row starts in';

CREATE TABLE @extschema@.hx_transition (
    machine    text NOT NULL REFERENCES @extschema@.hx_machine ON UPDATE CASCADE ON DELETE CASCADE,
    from_phase text NOT NULL CHECK (from_phase <> ''),
    event      text NOT NULL CHECK (event <> ''),
    to_phase   text NOT NULL CHECK (to_phase <> ''),
    PRIMARY KEY (machine, from_phase, event)
);

COMMENT ON TABLE @extschema@.hx_transition
IS 'the edges of the state machines: from a phase, an event leads to a phase';

-- Everyone may read the machines (the guards read them as the current
-- user); changing them takes the privileges their owner grants.
GRANT SELECT ON @extschema@.hx_machine, @extschema@.hx_transition TO PUBLIC;

-- The machine of an agent session
INSERT INTO @extschema@.hx_machine VALUES ('agent_session', 'chatting');
INSERT INTO @extschema@.hx_transition VALUES
    ('agent_session', 'chatting',  'open_existing',   'chatting'),
    ('agent_session', 'chatting',  'start_build',     'building'),
    ('agent_session', 'building',  'todo_done_build', 'verifying'),
    ('agent_session', 'building',  'cancel',          'chatting'),
    ('agent_session', 'verifying', 'publish',         'done'),
    ('agent_session', 'verifying', 'revert',          'building'),
    ('agent_session', 'verifying', 'cancel',          'chatting'),
    ('agent_session', 'done',      'open_existing',   'chatting'),
    ('agent_session', 'done',      'start_build',     'building');

-- pg_dump keeps the machines users add; agent_session comes back with
-- CREATE EXTENSION, as shipped.
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_machine',
                                           'WHERE machine <> ''agent_session''');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_transition',
                                           'WHERE machine <> ''agent_session''');

-- Every backend caches the machines; a change to them sends the
-- invalidation that makes each one reload.
CREATE FUNCTION @extschema@.hx_machine_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'hx_machine_changed'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.hx_machine_changed()
IS 'statement trigger on hx_machine and hx_transition: makes every session reload the machines';

CREATE TRIGGER hx_machine_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.hx_machine
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.hx_machine_changed();
CREATE TRIGGER hx_transition_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.hx_transition
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.hx_machine_changed();

CREATE FUNCTION @extschema@.hx_next_phase(machine pg_catalog.text, phase pg_catalog.text,
                                          event pg_catalog.text)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'hx_next_phase'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hx_next_phase(pg_catalog.text, pg_catalog.text, pg_catalog.text)
IS 'the phase an event leads to from a phase, or an invalid transition error';

CREATE FUNCTION @extschema@.hx_machine_dot(machine pg_catalog.text)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'hx_machine_dot'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hx_machine_dot(pg_catalog.text)
IS 'a state machine as a Graphviz digraph';

CREATE FUNCTION @extschema@.hx_phase_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'hx_phase_guard'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.hx_phase_guard()
IS 'row trigger (machine [, column]): rows start in the initial phase and move only along the machine''s edges';

--
-- 4. The event log: every event of every stream, written in the
-- transaction of the change it reports.  The source of truth; NOTIFY and
-- logical decoding only tell followers that there is something to read.
--
-- A ring of eight daily partitions, hx_event_0 .. hx_event_7, by the day
-- of created_at (days since the Unix epoch, modulo 8; computed from an
-- interval, as a partition key must be immutable and EXTRACT of a
-- timestamptz depends on the time zone), so that hx_stream_trim drops
-- whole days with TRUNCATE: no lock that stops writers (they write
-- today's partition), no dead rows to vacuum, the space returned at once.
-- Each partition has its primary key (stream, seq); the trigger finds a
-- stream's last seq through them.  Stream names compare byte by byte
-- (COLLATE "C"): they are identifiers, not prose, and every probe and
-- insert of the key compares them.
--
CREATE TABLE @extschema@.hx_event (
    stream     text        COLLATE pg_catalog."C" NOT NULL,
    seq        bigint      NOT NULL CONSTRAINT hx_event_seq_check CHECK (seq > 0),
    type       text        NOT NULL,
    event      jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
) PARTITION BY LIST ((((floor(EXTRACT(epoch FROM created_at - '1970-01-01 00:00:00+00'::timestamptz)
                               / 86400))::bigint % 8 + 8) % 8));

COMMENT ON TABLE @extschema@.hx_event
IS 'the AG-UI events of every hx_stream stream, by stream and seq, in eight daily partitions';

CREATE TABLE @extschema@.hx_event_0 PARTITION OF @extschema@.hx_event FOR VALUES IN (0);
CREATE TABLE @extschema@.hx_event_1 PARTITION OF @extschema@.hx_event FOR VALUES IN (1);
CREATE TABLE @extschema@.hx_event_2 PARTITION OF @extschema@.hx_event FOR VALUES IN (2);
CREATE TABLE @extschema@.hx_event_3 PARTITION OF @extschema@.hx_event FOR VALUES IN (3);
CREATE TABLE @extschema@.hx_event_4 PARTITION OF @extschema@.hx_event FOR VALUES IN (4);
CREATE TABLE @extschema@.hx_event_5 PARTITION OF @extschema@.hx_event FOR VALUES IN (5);
CREATE TABLE @extschema@.hx_event_6 PARTITION OF @extschema@.hx_event FOR VALUES IN (6);
CREATE TABLE @extschema@.hx_event_7 PARTITION OF @extschema@.hx_event FOR VALUES IN (7);

ALTER TABLE @extschema@.hx_event_0 ADD PRIMARY KEY (stream, seq);
ALTER TABLE @extschema@.hx_event_1 ADD PRIMARY KEY (stream, seq);
ALTER TABLE @extschema@.hx_event_2 ADD PRIMARY KEY (stream, seq);
ALTER TABLE @extschema@.hx_event_3 ADD PRIMARY KEY (stream, seq);
ALTER TABLE @extschema@.hx_event_4 ADD PRIMARY KEY (stream, seq);
ALTER TABLE @extschema@.hx_event_5 ADD PRIMARY KEY (stream, seq);
ALTER TABLE @extschema@.hx_event_6 ADD PRIMARY KEY (stream, seq);
ALTER TABLE @extschema@.hx_event_7 ADD PRIMARY KEY (stream, seq);

COMMENT ON TABLE @extschema@.hx_event_0 IS 'the events of days 0 modulo 8 of the hx_event ring';
COMMENT ON TABLE @extschema@.hx_event_1 IS 'the events of days 1 modulo 8 of the hx_event ring';
COMMENT ON TABLE @extschema@.hx_event_2 IS 'the events of days 2 modulo 8 of the hx_event ring';
COMMENT ON TABLE @extschema@.hx_event_3 IS 'the events of days 3 modulo 8 of the hx_event ring';
COMMENT ON TABLE @extschema@.hx_event_4 IS 'the events of days 4 modulo 8 of the hx_event ring';
COMMENT ON TABLE @extschema@.hx_event_5 IS 'the events of days 5 modulo 8 of the hx_event ring';
COMMENT ON TABLE @extschema@.hx_event_6 IS 'the events of days 6 modulo 8 of the hx_event ring';
COMMENT ON TABLE @extschema@.hx_event_7 IS 'the events of days 7 modulo 8 of the hx_event ring';

-- No privileges by default: the log holds every stream's state.  Readers
-- get SELECT (row-level security can narrow it per stream); owners of
-- streamed tables get INSERT (hx_stream writes as the table owner).
REVOKE ALL ON @extschema@.hx_event FROM PUBLIC;

-- pg_dump dumps the events (the partitions hold them)
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_event_0', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_event_1', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_event_2', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_event_3', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_event_4', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_event_5', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_event_6', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_event_7', '');

-- The ends of streams (hx.stream_end: the row was deleted, or its key
-- changed), few among the events, indexed on their own: where a row's
-- history begins is one probe (hx_stream_since).
CREATE INDEX hx_event_ends ON @extschema@.hx_event (stream, seq)
    WHERE type = 'CUSTOM' AND (event ->> 'name') = 'hx.stream_end';

--
-- 5. Streaming: the trigger that logs and notifies each change, and what
-- followers read
--
CREATE FUNCTION @extschema@.hx_stream()
RETURNS trigger
AS 'MODULE_PATHNAME', 'hx_stream'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.hx_stream()
IS 'row trigger (state_column, key_column [, arrays=, payload=, stream=]): logs each change as an AG-UI event, and NOTIFYs a reference to it';

CREATE FUNCTION @extschema@.hx_stream_channel(stream pg_catalog.text)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'hx_stream_channel'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hx_stream_channel(pg_catalog.text)
IS 'the LISTEN channel of a stream';

-- Which tables stream under which names: read by administrators, and by
-- gateways that build stream names.
CREATE FUNCTION @extschema@.hx_stream_tables()
RETURNS TABLE (source pg_catalog.regclass, prefix pg_catalog.text, named pg_catalog.bool,
               relation pg_catalog.regclass, trigger_name pg_catalog.name,
               conflicts_with pg_catalog.regclass)
AS 'MODULE_PATHNAME', 'hx_stream_tables'
LANGUAGE C STABLE STRICT;

COMMENT ON FUNCTION @extschema@.hx_stream_tables()
IS 'every table whose rows stream: the prefix of its streams, its hx_stream trigger, and a table whose streams would be named alike';

CREATE FUNCTION @extschema@.hx_stream_snapshot(source pg_catalog.regclass, key pg_catalog.text,
                                               OUT stream pg_catalog.text, OUT seq pg_catalog.int8,
                                               OUT state pg_catalog.jsonb)
RETURNS record
AS 'MODULE_PATHNAME', 'hx_stream_snapshot'
LANGUAGE C STABLE STRICT;

COMMENT ON FUNCTION @extschema@.hx_stream_snapshot(pg_catalog.regclass, pg_catalog.text)
IS 'a stream''s current state and the seq of its last event, read in one snapshot';

-- Log streams: streams that no table writes, "@<name>", for writers
-- without a row; the sender writes the log as itself.
CREATE FUNCTION @extschema@.hx_stream_send(stream pg_catalog.text, event pg_catalog.jsonb)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'hx_stream_send'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION @extschema@.hx_stream_send(pg_catalog.text, pg_catalog.jsonb)
IS 'append an AG-UI event (a state event, or a run''s message, tool call, reasoning, step or CUSTOM event) to a log stream "@<name>" as its next event; its seq';

-- A run's events in a row's stream: its messages, tool calls and reasoning
-- as the run makes them, between the state events of the row's changes.
-- The caller must be allowed to update the row (it is locked as an UPDATE
-- locks it); the events are logged as the table's owner, as the trigger
-- logs its changes.
CREATE FUNCTION @extschema@.hx_stream_emit(source pg_catalog.regclass, key pg_catalog.text,
                                           events pg_catalog.jsonb)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'hx_stream_emit'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION @extschema@.hx_stream_emit(pg_catalog.regclass, pg_catalog.text, pg_catalog.jsonb)
IS 'append a run''s AG-UI events (messages, tool calls and reasoning as they are made, steps, CUSTOM) to the stream of a table''s row, all or none; the seq of the last';

-- What SQL of a writer's own inserts into the log (INSERT, COPY) must be
-- what hx_stream_send would write: an event of a log stream, with the
-- stream's next seq and its metadata, dated now.  Writers with INSERT on
-- the log may not write a table's streams, reuse or skip a seq, or date an
-- event out of order; superusers and the log's owner may (pg_restore).
-- The extension's own writes need no check, and bypass it.
CREATE FUNCTION @extschema@.hx_event_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'hx_event_guard'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.hx_event_guard()
IS 'row trigger of hx_event: an event inserted by SQL must be a log stream''s next, with its metadata, dated now';

CREATE TRIGGER hx_event_guard BEFORE INSERT ON @extschema@.hx_event
    FOR EACH ROW EXECUTE FUNCTION @extschema@.hx_event_guard();

-- Batched reads, for a process that follows many streams over a few
-- connections: snapshots of many keys, the last seqs of many streams, and
-- the events after a seq of many streams, each in one statement.
CREATE FUNCTION @extschema@.hx_stream_snapshots(source pg_catalog.regclass, keys pg_catalog.text[])
RETURNS TABLE (key pg_catalog.text, stream pg_catalog.text, seq pg_catalog.int8, state pg_catalog.jsonb)
AS 'MODULE_PATHNAME', 'hx_stream_snapshots'
LANGUAGE C STABLE STRICT;

COMMENT ON FUNCTION @extschema@.hx_stream_snapshots(pg_catalog.regclass, pg_catalog.text[])
IS 'hx_stream_snapshot of many keys of a table, in one snapshot';

CREATE FUNCTION @extschema@.hx_stream_events(stream pg_catalog.text,
                                             after_seq pg_catalog.int8 DEFAULT 0,
                                             max_events pg_catalog.int4 DEFAULT 1000)
RETURNS TABLE (seq pg_catalog.int8, event pg_catalog.jsonb)
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF max_events < 0 THEN
        RAISE EXCEPTION 'max_events must not be negative'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('It is %s.', max_events);
    END IF;
    RETURN QUERY
        SELECT e.seq, e.event
          FROM @extschema@.hx_event e
         WHERE e.stream = hx_stream_events.stream AND e.seq > after_seq
         ORDER BY e.seq
         LIMIT max_events;
END
$$;

COMMENT ON FUNCTION @extschema@.hx_stream_events(pg_catalog.text, pg_catalog.int8, pg_catalog.int4)
IS 'the events of a stream after a seq, in seq order';

CREATE FUNCTION @extschema@.hx_stream_heads(streams pg_catalog.text[])
RETURNS TABLE (stream pg_catalog.text, seq pg_catalog.int8)
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT w.stream,
           coalesce((SELECT max(e.seq) FROM @extschema@.hx_event e
                      WHERE e.stream = w.stream), 0)
      FROM unnest($1) AS w(stream)
     WHERE w.stream IS NOT NULL
$$;

COMMENT ON FUNCTION @extschema@.hx_stream_heads(pg_catalog.text[])
IS 'the seq of the last event of each stream (0 before any)';

CREATE FUNCTION @extschema@.hx_stream_since(stream pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
    -- the event after the stream's last end (the row deleted, or its key
    -- changed), or its first event still in the log
    SELECT coalesce((SELECT max(e.seq) + 1 FROM @extschema@.hx_event e
                      WHERE e.stream = $1
                        AND e.type = 'CUSTOM' AND (e.event ->> 'name') = 'hx.stream_end'),
                    (SELECT min(e.seq) FROM @extschema@.hx_event e WHERE e.stream = $1))
$$;

COMMENT ON FUNCTION @extschema@.hx_stream_since(pg_catalog.text)
IS 'the seq where the history of a stream''s current row begins: after its last hx.stream_end, or its first event in the log';

CREATE FUNCTION @extschema@.hx_stream_events_after(streams pg_catalog.text[],
                                                   after_seqs pg_catalog.int8[],
                                                   max_events pg_catalog.int4 DEFAULT 1000)
RETURNS TABLE (stream pg_catalog.text, seq pg_catalog.int8, event pg_catalog.jsonb)
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF max_events < 0 THEN
        RAISE EXCEPTION 'max_events must not be negative'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('It is %s.', max_events);
    END IF;
    IF cardinality(streams) <> cardinality(after_seqs) THEN
        RAISE EXCEPTION 'streams and after_seqs must have as many elements'
            USING ERRCODE = 'array_subscript_error',
                  DETAIL = format('There are %s streams and %s seqs.',
                                  cardinality(streams), cardinality(after_seqs));
    END IF;
    RETURN QUERY
        SELECT w.stream, e.seq, e.event
          FROM unnest(streams, after_seqs) AS w(stream, after_seq)
         CROSS JOIN LATERAL (
               SELECT x.seq, x.event
                 FROM @extschema@.hx_event x
                WHERE x.stream = w.stream AND x.seq > w.after_seq
                ORDER BY x.seq
                LIMIT max_events) AS e
         ORDER BY w.stream, e.seq;
END
$$;

COMMENT ON FUNCTION @extschema@.hx_stream_events_after(pg_catalog.text[], pg_catalog.int8[], pg_catalog.int4)
IS 'the events after a seq of each of many streams, in stream and seq order';

-- The logical replication transport: a publication of the log's inserts,
-- which followers decode from the WAL (pgoutput) instead of LISTENing.
CREATE FUNCTION @extschema@.hx_stream_publication(publication pg_catalog.name DEFAULT 'hxstate_events')
RETURNS pg_catalog.name
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_publication p WHERE p.pubname = publication) THEN
        EXECUTE format('CREATE PUBLICATION %I FOR TABLE %I.hx_event'
                       ' WITH (publish = %L, publish_via_partition_root = true)',
                       publication, '@extschema@', 'insert');
    ELSIF NOT EXISTS (SELECT 1 FROM pg_publication_tables t
                       WHERE t.pubname = publication
                         AND t.schemaname = '@extschema@' AND t.tablename = 'hx_event') THEN
        RAISE EXCEPTION 'publication "%" does not publish the event log', publication
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('ALTER PUBLICATION %I ADD TABLE %I.hx_event;',
                                publication, '@extschema@');
    END IF;
    RETURN publication;
END
$$;

COMMENT ON FUNCTION @extschema@.hx_stream_publication(pg_catalog.name)
IS 'create (if missing) the publication of the event log that followers decode from the WAL';

-- The ring of daily partitions as the library defines it (the partition
-- key above spells the same arithmetic out; the library checks that they
-- agree): the days up to a time, each with its partition, and whether
-- writers write that partition now.
CREATE FUNCTION @extschema@.hx_event_ring(at pg_catalog.timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (day pg_catalog.date, partition pg_catalog.regclass, current pg_catalog.bool)
AS 'MODULE_PATHNAME', 'hx_event_ring'
LANGUAGE C VOLATILE STRICT;

COMMENT ON FUNCTION @extschema@.hx_event_ring(pg_catalog.timestamptz)
IS 'the days of the hx_event ring up to a time (UTC), newest first, each with its partition, and whether writers write it now';

--
-- Trimming: whole days by TRUNCATE, the rest by DELETE.  Per stream,
-- everything up to its last event older than the cutoff goes, so that
-- what stays is a contiguous tail of the stream; its last event always
-- stays, since it carries the stream's seq.  In this order:
--   1. the partitions that are kept (the current ones, today's and
--      tomorrow's, which writers write, and those of the days from the
--      cutoff's on) lose their rows older than the cutoff row by row,
--      but for each stream's last event: only a stream's newest row older
--      than the cutoff needs the probe for a later one (all partitions are
--      kept when only_stream is given);
--   2. the last event of each stream whose last event is in a partition
--      to empty is copied into today's partition (created_at now), in one
--      statement: per partition, each stream's greatest seq (one pass over
--      its primary key), then one probe per stream for a later event;
--   3. one TRUNCATE empties those partitions, last: its lock, which stops
--      whoever would read them (a writer looking for a stream's last seq
--      beyond today's partition), is held only from then to the commit.
--
CREATE FUNCTION @extschema@.hx_stream_trim(older_than pg_catalog.interval,
                                           only_stream pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.int8
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cutoff timestamptz;
    today date;
    cutoff_day date;
    r record;
    n bigint;
    carried bigint := 0;
    emptied regclass[] := '{}';
    emptied_rows bigint := 0;
    kept regclass[] := '{}';
    part regclass;
    trimmed bigint := 0;
BEGIN
    IF older_than IS NULL THEN
        RETURN 0;
    END IF;
    -- an interval past the range of timestamps reaches the beginning of
    -- time (nothing is older) or its end (everything is)
    BEGIN
        cutoff := now() - older_than;
    EXCEPTION WHEN datetime_field_overflow THEN
        cutoff := CASE WHEN older_than > interval '0' THEN '-infinity'::timestamptz
                       ELSE 'infinity'::timestamptz END;
    END;
    IF cutoff = '-infinity'::timestamptz THEN
        RETURN 0;
    END IF;
    today := (SELECT max(g.day) FROM @extschema@.hx_event_ring(now()) g);
    cutoff_day := CASE WHEN isfinite(cutoff)
                       THEN (SELECT max(g.day) FROM @extschema@.hx_event_ring(cutoff) g)
                       ELSE today + 1 END;
    -- r.day: the newest day, up to today, that r.partition holds.  A
    -- current partition (today's, where last events are carried to even
    -- with a cutoff in the future, or one writers write after midnight)
    -- is never emptied at once.
    FOR r IN SELECT * FROM @extschema@.hx_event_ring(now()) LOOP
        IF only_stream IS NULL AND r.day < least(cutoff_day, today) AND NOT r.current THEN
            EXECUTE format('SELECT count(*) FROM %s', r.partition) INTO n;
            IF n > 0 THEN
                emptied := emptied || r.partition;
                emptied_rows := emptied_rows + n;
            END IF;
        ELSE
            kept := kept || r.partition;
        END IF;
    END LOOP;

    -- 1. row by row in the partitions that stay
    FOREACH part IN ARRAY kept LOOP
        EXECUTE format('WITH cut AS (
                            SELECT e.stream, max(e.seq) AS upto
                              FROM %1$s e
                             WHERE e.created_at < $1
                               AND ($2::text IS NULL OR e.stream = $2)
                             GROUP BY e.stream)
                        DELETE FROM %1$s e
                         USING cut
                         WHERE e.stream = cut.stream
                           AND (e.seq < cut.upto
                                OR e.seq = cut.upto
                                   AND EXISTS (SELECT FROM %2$I.hx_event x
                                                WHERE x.stream = e.stream AND x.seq > e.seq))',
                       part, '@extschema@')
            USING cutoff, only_stream;
        GET DIAGNOSTICS n = ROW_COUNT;
        trimmed := trimmed + n;
    END LOOP;

    IF cardinality(emptied) > 0 THEN
        -- 2. each stream's last event, when it is in a partition to empty,
        -- into today's partition (now(), not the clock: past midnight, the
        -- clock's day could be one to empty)
        EXECUTE format('INSERT INTO %I.hx_event (stream, seq, type, event, created_at)
                        SELECT l.stream, l.seq, l.type, l.event, now()
                          FROM (%s) l
                         WHERE NOT EXISTS (SELECT 1 FROM %I.hx_event x
                                            WHERE x.stream = l.stream AND x.seq > l.seq)',
                       '@extschema@',
                       (SELECT string_agg(format('SELECT e.stream, e.seq, e.type, e.event FROM %1$s e
                                                   WHERE (e.stream, e.seq) IN
                                                         (SELECT stream, max(seq) FROM %1$s GROUP BY stream)', p),
                                          ' UNION ALL ')
                          FROM unnest(emptied) p),
                       '@extschema@');
        GET DIAGNOSTICS carried = ROW_COUNT;
        -- 3. the partitions, at once
        EXECUTE 'TRUNCATE ' || array_to_string(emptied, ', ');
        trimmed := trimmed + emptied_rows - carried;
    END IF;
    RETURN trimmed;
END
$$;

COMMENT ON FUNCTION @extschema@.hx_stream_trim(pg_catalog.interval, pg_catalog.text)
IS 'delete each stream''s events up to its last one older than an interval, keeping its last event';

--
-- 6. Exactly-once step writes.  Runtimes deliver a tool call's writes at
-- least once (activity retries, resends on a timeout); staging them per
-- call of a step, and promoting the step once, makes each write land once,
-- in the model's tool-call order instead of commit order.
--
CREATE TABLE @extschema@.hx_step (
    stream          text        NOT NULL,
    step            text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    promoted_at     timestamptz,
    promoted_calls  text[],
    promoted_writes jsonb,
    PRIMARY KEY (stream, step)
);

COMMENT ON TABLE @extschema@.hx_step
IS 'the promoted steps: when their first call was staged, when they were promoted, which calls and what writes';

CREATE TABLE @extschema@.hx_step_call (
    stream    text        NOT NULL,
    step      text        NOT NULL,
    call      text        NOT NULL,
    ord       integer,
    writes    jsonb       NOT NULL,
    staged_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    PRIMARY KEY (stream, step, call)
);

COMMENT ON TABLE @extschema@.hx_step_call
IS 'the writes each tool call staged for a step not promoted yet';

-- No privileges by default, as for the event log: the runtime's role gets
-- SELECT, INSERT, UPDATE and DELETE on both (hx_stage and hx_promote run
-- with the caller's privileges).
REVOKE ALL ON @extschema@.hx_step, @extschema@.hx_step_call FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_step', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_step_call', '');

-- hx_stage and hx_promote look steps and calls up by key, through plans
-- prepared once per backend.  hx_step_call is small and churns (calls are
-- deleted at promote), and both tables start empty: planned while a table
-- was empty or just vacuumed, a lookup would scan the whole table, and keep
-- scanning it as it grows until the next ANALYZE.  Within these two
-- functions, sequential scans are off, so that every lookup probes the
-- tables' primary keys.
CREATE FUNCTION @extschema@.hx_stage(stream pg_catalog.text, step pg_catalog.text,
                                     call pg_catalog.text, writes pg_catalog.jsonb,
                                     ord pg_catalog.int4 DEFAULT NULL)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'hx_stage'
LANGUAGE C VOLATILE
SET enable_seqscan = off;

COMMENT ON FUNCTION @extschema@.hx_stage(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.int4)
IS 'stage a tool call''s writes for a step of a stream; true when staged, false for a retry with the same writes';

CREATE FUNCTION @extschema@.hx_promote(stream pg_catalog.text, step pg_catalog.text)
RETURNS pg_catalog.jsonb
AS 'MODULE_PATHNAME', 'hx_promote'
LANGUAGE C VOLATILE STRICT
SET enable_seqscan = off;

COMMENT ON FUNCTION @extschema@.hx_promote(pg_catalog.text, pg_catalog.text)
IS 'a step''s staged writes, once, in tool-call order, for hx_merge in the same UPDATE; [] once promoted';

CREATE FUNCTION @extschema@.hx_step_trim(older_than pg_catalog.interval)
RETURNS pg_catalog.int8
LANGUAGE sql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
    WITH trimmed AS (
        DELETE FROM @extschema@.hx_step s
         WHERE s.promoted_at < now() - $1
        RETURNING 1)
    SELECT count(*) FROM trimmed
$$;

COMMENT ON FUNCTION @extschema@.hx_step_trim(pg_catalog.interval)
IS 'forget the steps promoted longer ago than an interval (a later retry of their calls would stage anew)';

--
-- 7. History: a stream's state at any seq still in the log
--
CREATE FUNCTION @extschema@.hx_stream_state_at(stream pg_catalog.text, seq pg_catalog.int8)
RETURNS pg_catalog.jsonb
AS 'MODULE_PATHNAME', 'hx_stream_state_at'
LANGUAGE C STABLE STRICT;

COMMENT ON FUNCTION @extschema@.hx_stream_state_at(pg_catalog.text, pg_catalog.int8)
IS 'a stream''s state right after its event seq, rebuilt from the last snapshot before it and the deltas after';

--
-- Who may call what.  The pure functions, the trigger functions a table's
-- owner attaches (EXECUTE is checked when the trigger is created), the
-- readers of the log and of snapshots (which read as the caller, under its
-- privileges and row-level security) and the writers (hx_stream_send,
-- hx_stage, hx_promote: the log's and the step tables' privileges decide)
-- stay callable by every role.  What describes the whole database, or
-- maintains it, is for the roles an administrator grants it to.
--
REVOKE EXECUTE ON FUNCTION @extschema@.hx_stream_tables() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@.hx_event_ring(pg_catalog.timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@.hx_stream_trim(pg_catalog.interval, pg_catalog.text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@.hx_step_trim(pg_catalog.interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@.hx_stream_publication(pg_catalog.name) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@.hx_machine_changed() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@.hx_event_guard() FROM PUBLIC;
--
-- 8. hxdoc: a state stored so that a write costs what it changes.  A
-- value is jsonb to every reader (it prints as JSON, casts to jsonb
-- implicitly, and jsonb's functions and operators take it); the hx_store
-- trigger stores a large one in pieces: a skeleton in the row, its large
-- members as segments in hx_chunk, and each write writes only the segments
-- it changed.  (docs/storage.md is the design.)
--
CREATE TYPE @extschema@.hxdoc;

CREATE FUNCTION @extschema@.hxdoc_in(pg_catalog.cstring)
RETURNS @extschema@.hxdoc
AS 'MODULE_PATHNAME', 'hxdoc_in'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hxdoc_in(pg_catalog.cstring)
IS 'hxdoc''s input: JSON text, as jsonb reads it';

CREATE FUNCTION @extschema@.hxdoc_out(@extschema@.hxdoc)
RETURNS pg_catalog.cstring
AS 'MODULE_PATHNAME', 'hxdoc_out'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION @extschema@.hxdoc_out(@extschema@.hxdoc)
IS 'hxdoc''s output: the document whole, as JSON text';

CREATE FUNCTION @extschema@.hxdoc_recv(pg_catalog.internal)
RETURNS @extschema@.hxdoc
AS 'MODULE_PATHNAME', 'hxdoc_recv'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hxdoc_recv(pg_catalog.internal)
IS 'hxdoc''s binary input: jsonb''s (a version byte, then the JSON text)';

CREATE FUNCTION @extschema@.hxdoc_send(@extschema@.hxdoc)
RETURNS pg_catalog.bytea
AS 'MODULE_PATHNAME', 'hxdoc_send'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION @extschema@.hxdoc_send(@extschema@.hxdoc)
IS 'hxdoc''s binary output: jsonb''s, of the document whole';

CREATE TYPE @extschema@.hxdoc (
    INPUT = @extschema@.hxdoc_in,
    OUTPUT = @extschema@.hxdoc_out,
    RECEIVE = @extschema@.hxdoc_recv,
    SEND = @extschema@.hxdoc_send,
    INTERNALLENGTH = VARIABLE,
    ALIGNMENT = int4,
    STORAGE = extended
);

COMMENT ON TYPE @extschema@.hxdoc
IS 'a jsonb document stored so that a write costs what it changes (with the hx_store trigger)';

CREATE FUNCTION @extschema@.hxdoc_from_jsonb(pg_catalog.jsonb)
RETURNS @extschema@.hxdoc
AS 'MODULE_PATHNAME', 'hxdoc_from_jsonb'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hxdoc_from_jsonb(pg_catalog.jsonb)
IS 'a jsonb value as hxdoc (in line, until hx_store stores it)';

CREATE FUNCTION @extschema@.hxdoc_to_jsonb(@extschema@.hxdoc)
RETURNS pg_catalog.jsonb
AS 'MODULE_PATHNAME', 'hxdoc_to_jsonb'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION @extschema@.hxdoc_to_jsonb(@extschema@.hxdoc)
IS 'an hxdoc value, whole, as jsonb';

CREATE FUNCTION @extschema@.hxdoc_to_json(@extschema@.hxdoc)
RETURNS pg_catalog.json
LANGUAGE sql STABLE STRICT PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
RETURN (@extschema@.hxdoc_to_jsonb($1))::pg_catalog.json;

COMMENT ON FUNCTION @extschema@.hxdoc_to_json(@extschema@.hxdoc)
IS 'an hxdoc value, whole, as json (to_json, row_to_json and json_agg use it)';

CREATE CAST (pg_catalog.jsonb AS @extschema@.hxdoc)
    WITH FUNCTION @extschema@.hxdoc_from_jsonb(pg_catalog.jsonb) AS ASSIGNMENT;
CREATE CAST (@extschema@.hxdoc AS pg_catalog.jsonb)
    WITH FUNCTION @extschema@.hxdoc_to_jsonb(@extschema@.hxdoc) AS IMPLICIT;
CREATE CAST (@extschema@.hxdoc AS pg_catalog.json)
    WITH FUNCTION @extschema@.hxdoc_to_json(@extschema@.hxdoc);

-- The pieces: a row per document (its table and column, its generation,
-- the segments that generation replaced) and its segments.  The library
-- reads and writes them for whoever reads or writes a table with an
-- hxdoc column; no role has any privilege on them.  User catalog tables,
-- so that logical decoding of such a table can read a value as of the
-- change it decodes.
CREATE TABLE @extschema@.hx_doc (
    doc       bigint   PRIMARY KEY,
    rel       oid      NOT NULL,
    att       smallint NOT NULL,
    dropped   boolean  NOT NULL DEFAULT false
) WITH (user_catalog_table = true);

COMMENT ON TABLE @extschema@.hx_doc
IS 'the hxdoc documents stored in pieces: the table and column each belongs to, and whether its row is gone';

CREATE INDEX hx_doc_rel ON @extschema@.hx_doc (rel, att);
CREATE INDEX hx_doc_dropped ON @extschema@.hx_doc (rel) WHERE dropped;

CREATE TABLE @extschema@.hx_chunk (
    doc  bigint  NOT NULL,
    node integer NOT NULL,
    seg  bigint  NOT NULL,
    gen  bigint  NOT NULL,
    n    integer NOT NULL,
    len  integer NOT NULL,
    refs integer NOT NULL,
    body jsonb   NOT NULL,
    PRIMARY KEY (doc, node, seg, gen)
) WITH (user_catalog_table = true, toast_tuple_target = 8160);

-- a segment stays in its row (hx_store keeps it under 7,680 bytes of jsonb):
-- logical decoding reads segments with a historic snapshot, which cannot
-- fetch TOAST
ALTER TABLE @extschema@.hx_chunk ALTER COLUMN body SET STORAGE MAIN;

COMMENT ON TABLE @extschema@.hx_chunk
IS 'the segments of the hxdoc documents stored in pieces: runs of a node''s elements or members, compressed';

-- A segment comes compressed (hx_store compresses it), and is read through
-- the primary key: kept in the row up to 8 kB (toast_tuple_target), it is
-- read with its row, not by another index scan of its TOAST table.

CREATE SEQUENCE @extschema@.hx_doc_seq;

REVOKE ALL ON @extschema@.hx_doc, @extschema@.hx_chunk, @extschema@.hx_doc_seq FROM PUBLIC;

CREATE FUNCTION @extschema@.hx_store()
RETURNS trigger
AS 'MODULE_PATHNAME', 'hx_store'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.hx_store()
IS 'row trigger (column [, ...] [, threshold=, segment=, from=]): stores hxdoc values so that a write writes only what it changed';

CREATE FUNCTION @extschema@.hx_doc_info(value @extschema@.hxdoc,
                                        OUT format pg_catalog.text, OUT doc pg_catalog.int8,
                                        OUT gen pg_catalog.int8, OUT nodes pg_catalog.int4,
                                        OUT segments pg_catalog.int4, OUT stored_bytes pg_catalog.int8,
                                        OUT json_bytes pg_catalog.int8)
RETURNS record
AS 'MODULE_PATHNAME', 'hx_doc_info'
LANGUAGE C STABLE STRICT;

COMMENT ON FUNCTION @extschema@.hx_doc_info(@extschema@.hxdoc)
IS 'how an hxdoc value is stored: in line or in pieces, its document, generation, nodes, segments and bytes';

CREATE FUNCTION @extschema@.hx_store_gc(source pg_catalog.regclass DEFAULT NULL)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'hx_store_gc'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION @extschema@.hx_store_gc(pg_catalog.regclass)
IS 'delete the stored hxdoc documents that no row holds (of one table, or of all): deleted rows, emptied or dropped tables and columns; how many';

REVOKE EXECUTE ON FUNCTION @extschema@.hx_store_gc(pg_catalog.regclass) FROM PUBLIC;

CREATE FUNCTION @extschema@.hx_store_backfill(source pg_catalog.regclass, col pg_catalog.name,
                                              start pg_catalog.int8 DEFAULT 0,
                                              blocks pg_catalog.int4 DEFAULT 64)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'hx_store_backfill'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION @extschema@.hx_store_backfill(pg_catalog.regclass, pg_catalog.name, pg_catalog.int8, pg_catalog.int4)
IS 'one batch of moving a table to an hxdoc column that an hx_store trigger takes from a jsonb column (from=): the rows of blocks [start, start + blocks) that do not have it yet; the next batch''s start, NULL at the table''s end';

CREATE FUNCTION @extschema@.hx_store_dropped()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'hx_store_dropped'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.hx_store_dropped()
IS 'event trigger: a dropped table''s or column''s stored hxdoc documents are deleted with it';

REVOKE EXECUTE ON FUNCTION @extschema@.hx_store_dropped() FROM PUBLIC;

CREATE EVENT TRIGGER hx_store_dropped ON sql_drop
    EXECUTE FUNCTION @extschema@.hx_store_dropped();
