/* hxstate--0.4.0--0.5.0.sql: following thousands of streams (batched reads, a logical replication transport) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION hxstate UPDATE TO '0.5.0'" to load this file. \quit

--
-- Batched reads, for a process that follows many streams over a few
-- connections: snapshots of many keys, the last seqs of many streams, and
-- the events after a seq of many streams, each in one statement.
--
CREATE FUNCTION @extschema@.hx_stream_snapshots(source pg_catalog.regclass, keys pg_catalog.text[])
RETURNS TABLE (key pg_catalog.text, stream pg_catalog.text, seq pg_catalog.int8, state pg_catalog.jsonb)
AS 'MODULE_PATHNAME', 'hx_stream_snapshots'
LANGUAGE C STABLE STRICT;

COMMENT ON FUNCTION @extschema@.hx_stream_snapshots(pg_catalog.regclass, pg_catalog.text[])
IS 'hx_stream_snapshot of many keys of a table, in one snapshot';

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

-- 0.4.0's hx_stream_events passed a negative max_events on to LIMIT, whose
-- error (2201W) named a clause the caller never wrote
CREATE OR REPLACE FUNCTION @extschema@.hx_stream_events(stream pg_catalog.text,
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

--
-- The logical replication transport: a publication of the log's inserts,
-- which followers decode from the WAL (pgoutput) instead of LISTENing.
--
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

--
-- The event log becomes a ring of eight daily partitions, hx_event_0 ..
-- hx_event_7, by the day of created_at (days since the Unix epoch modulo
-- 8; computed from an interval, as the partition key must be immutable and
-- EXTRACT of a timestamptz depends on the time zone), so that hx_stream_trim drops whole days with TRUNCATE: no lock that
-- stops writers (they write today's partition), no dead rows to vacuum, the
-- space returned at once.  Each partition has its primary key (stream,
-- seq); the trigger finds a stream's last seq through them.  Stream names
-- compare byte by byte (COLLATE "C"): they are identifiers, not prose, and
-- every probe and insert of the key compares them.  The existing log is
-- carried over, with its grants and row-level security policies.
--
ALTER TABLE @extschema@.hx_event RENAME TO hx_event_0_4;

CREATE TABLE @extschema@.hx_event (
    stream     text        COLLATE pg_catalog."C" NOT NULL,
    seq        bigint      NOT NULL CONSTRAINT hx_event_seq_check CHECK (seq > 0),
    type       text        NOT NULL,
    event      jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
) PARTITION BY LIST ((((pg_catalog.floor(EXTRACT(epoch FROM created_at OPERATOR(pg_catalog.-)
                                                            '1970-01-01 00:00:00+00'::timestamptz)
                                       / 86400))::bigint % 8 + 8) % 8));

COMMENT ON TABLE @extschema@.hx_event
IS 'the AG-UI events of every hx_stream stream, by stream and seq, in eight daily partitions';

DO $$
BEGIN
    FOR b IN 0 .. 7 LOOP
        EXECUTE format('CREATE TABLE %I.%I PARTITION OF %I.hx_event FOR VALUES IN (%s)',
                       '@extschema@', 'hx_event_' || b, '@extschema@', b);
        EXECUTE format('ALTER TABLE %I.%I ADD PRIMARY KEY (stream, seq)',
                       '@extschema@', 'hx_event_' || b);
        EXECUTE format('COMMENT ON TABLE %I.%I IS %L', '@extschema@', 'hx_event_' || b,
                       'the events of days ' || b || ' modulo 8 of the hx_event ring');
        PERFORM pg_catalog.pg_extension_config_dump(format('%I.%I', '@extschema@', 'hx_event_' || b)::regclass, '');
    END LOOP;
END
$$;

INSERT INTO @extschema@.hx_event (stream, seq, type, event, created_at)
SELECT stream, seq, type, event, created_at FROM @extschema@.hx_event_0_4;

-- privileges and row-level security move to the new table
REVOKE ALL ON @extschema@.hx_event FROM PUBLIC;
DO $$
DECLARE
    old oid := '@extschema@.hx_event_0_4'::regclass;
    g record;
    p record;
BEGIN
    FOR g IN SELECT a.grantee, a.privilege_type, a.is_grantable
               FROM pg_class c, aclexplode(c.relacl) a
              WHERE c.oid = old AND a.grantee <> c.relowner LOOP
        EXECUTE format('GRANT %s ON %I.hx_event TO %s%s', g.privilege_type, '@extschema@',
                       CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(g.grantee)) END,
                       CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    FOR p IN SELECT pol.polname, pol.polpermissive, pol.polcmd, pol.polroles,
                    pg_get_expr(pol.polqual, pol.polrelid) AS qual,
                    pg_get_expr(pol.polwithcheck, pol.polrelid) AS withcheck
               FROM pg_policy pol WHERE pol.polrelid = old LOOP
        EXECUTE format('CREATE POLICY %I ON %I.hx_event AS %s FOR %s TO %s%s%s',
                       p.polname, '@extschema@',
                       CASE WHEN p.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END,
                       CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE'
                                     WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
                       (SELECT string_agg(CASE WHEN r = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(r)) END, ', ')
                          FROM unnest(p.polroles) r),
                       CASE WHEN p.qual IS NOT NULL THEN ' USING (' || p.qual || ')' ELSE '' END,
                       CASE WHEN p.withcheck IS NOT NULL THEN ' WITH CHECK (' || p.withcheck || ')' ELSE '' END);
    END LOOP;
    IF (SELECT relrowsecurity FROM pg_class WHERE oid = old) THEN
        EXECUTE format('ALTER TABLE %I.hx_event ENABLE ROW LEVEL SECURITY', '@extschema@');
    END IF;
    IF (SELECT relforcerowsecurity FROM pg_class WHERE oid = old) THEN
        EXECUTE format('ALTER TABLE %I.hx_event FORCE ROW LEVEL SECURITY', '@extschema@');
    END IF;
END
$$;

ALTER EXTENSION hxstate DROP TABLE @extschema@.hx_event_0_4;
DROP TABLE @extschema@.hx_event_0_4;

--
-- Trimming: whole days by TRUNCATE, the rest by DELETE.  Per stream,
-- everything up to its last event older than the cutoff goes, so that
-- what stays is a contiguous tail of the stream; its last event always
-- stays, since it carries the stream's seq.  In this order:
--   1. the partitions that are kept (today's, and those of the days from
--      the cutoff's on) lose their rows older than the cutoff row by row,
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
CREATE OR REPLACE FUNCTION @extschema@.hx_stream_trim(older_than pg_catalog.interval,
                                                      only_stream pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.int8
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cutoff timestamptz;
    today bigint := floor(EXTRACT(epoch FROM now()) / 86400)::bigint;
    cutoff_day bigint;
    newest bigint;
    part text;
    n bigint;
    carried bigint := 0;
    emptied text[] := '{}';
    emptied_rows bigint := 0;
    kept text[] := '{}';
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
    cutoff_day := CASE WHEN isfinite(cutoff)
                       THEN floor(EXTRACT(epoch FROM cutoff) / 86400)::bigint
                       ELSE today + 1 END;
    FOR b IN 0 .. 7 LOOP
        part := format('%I.%I', '@extschema@', 'hx_event_' || b);
        -- the newest day this partition can hold: the last day, up to
        -- today, that is b modulo 8; today's partition, where last events
        -- are carried to, is never emptied at once, even by a cutoff in
        -- the future
        newest := today - (((today - b) % 8 + 8) % 8);
        IF only_stream IS NULL AND newest < least(cutoff_day, today) THEN
            EXECUTE format('SELECT count(*) FROM %s', part) INTO n;
            IF n > 0 THEN
                emptied := emptied || part;
                emptied_rows := emptied_rows + n;
            END IF;
        ELSE
            kept := kept || part;
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
        -- 2. each stream's last event, when it is in a partition to empty
        EXECUTE format('INSERT INTO %I.hx_event (stream, seq, type, event)
                        SELECT l.stream, l.seq, l.type, l.event
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

--
-- Exactly-once step writes.  Runtimes deliver a tool call's writes at
-- least once (activity retries, resends on a timeout); staging them per
-- call of a step, and promoting the step once, makes each write land once,
-- in the model's tool-call order instead of commit order.
--
CREATE FUNCTION @extschema@.hx_check_writes(writes pg_catalog.jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'hx_check_writes'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hx_check_writes(pg_catalog.jsonb)
IS 'raise the error hx_merge would raise for writes whatever the state (malformed op list, op, member or pointer)';

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
-- History: a stream's state at any seq still in the log.
--
CREATE FUNCTION @extschema@.hx_stream_state_at(stream pg_catalog.text, seq pg_catalog.int8)
RETURNS pg_catalog.jsonb
AS 'MODULE_PATHNAME', 'hx_stream_state_at'
LANGUAGE C STABLE STRICT;

COMMENT ON FUNCTION @extschema@.hx_stream_state_at(pg_catalog.text, pg_catalog.int8)
IS 'a stream''s state right after its event seq, rebuilt from the last snapshot before it and the deltas after';
