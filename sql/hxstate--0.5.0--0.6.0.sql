/* hxstate--0.5.0--0.6.0.sql: hardening (stream names unique per table, NOTIFY as a hint, readers kept apart) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION hxstate UPDATE TO '0.6.0'" to load this file. \quit

-- Every name in the expressions below (CHECK constraints, defaults, the
-- log's partition key, the statements the script runs) resolves in
-- pg_catalog, whatever else the extension's schema holds.  SET LOCAL
-- lasts as long as the script: ALTER EXTENSION puts the search_path back
-- when it ends.
SET LOCAL search_path = pg_catalog, pg_temp;

--
-- Stream names, unique per table.  A table's rows stream under its name,
-- qualified by its schema unless that is public ("tenant_b.sessions:s-99";
-- "sessions:s-42" as before), with each part double-quoted unless it is a
-- lower-case identifier; stream=<name> options that would give two tables
-- one name are refused when the trigger fires.
--
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

-- Writers wait from here to the commit, and the update waits for those
-- already writing (an event or a step logged under an old name after the
-- renaming would stay behind): the step tables first, then the log, in
-- the order a change that promotes a step takes them.  Readers go on.
-- hx_stream takes its lock on the log before it reads the installed
-- version, so a writer that waited logs under the new names.
LOCK TABLE @extschema@.hx_step_call, @extschema@.hx_step, @extschema@.hx_event IN EXCLUSIVE MODE;

-- The events of the streams whose names change (tables outside schema
-- public, and tables whose names need quotes) are carried over to the new
-- names, with their seqs, and so are the steps staged or promoted under
-- them.  A stream that the old names gave two tables (two tables of one
-- name in two schemas, or a stream=<name> option that named another
-- table's streams) cannot be told apart: its events stay under the old
-- name, with a WARNING; the public table keeps that name, the other
-- streams under its new name from its next change on.
DO $$
DECLARE
    r record;
    ambiguous bigint;
BEGIN
    FOR r IN
        WITH t AS (
            SELECT DISTINCT s.source, s.prefix COLLATE "C" AS new_prefix,
                   (CASE WHEN s.named THEN s.prefix ELSE c.relname::text END) COLLATE "C" AS old_prefix
              FROM @extschema@.hx_stream_tables() s
              JOIN pg_class c ON c.oid = s.source)
        SELECT x.source, x.old_prefix, x.new_prefix,
               -- other tables' old names that streams of x's old name may have had
               coalesce((SELECT array_agg(DISTINCT y.old_prefix) FROM t y
                          WHERE y.source <> x.source
                            AND (starts_with(y.old_prefix || ':', x.old_prefix || ':')
                                 OR starts_with(x.old_prefix || ':', y.old_prefix || ':'))),
                        '{}') AS others
          FROM t x
         WHERE x.old_prefix <> x.new_prefix
    LOOP
        -- (a pass over the streams' events only when another table's could
        -- be among them)
        ambiguous := 0;
        IF cardinality(r.others) > 0 THEN
            SELECT count(DISTINCT e.stream) INTO ambiguous
              FROM @extschema@.hx_event e
             WHERE e.stream >= r.old_prefix || ':' AND e.stream < r.old_prefix || ';'
               AND EXISTS (SELECT FROM unnest(r.others) o WHERE starts_with(e.stream, o || ':'));
        END IF;
        IF ambiguous > 0 THEN
            RAISE WARNING '% streams named "%:<key>" keep their names', ambiguous, r.old_prefix
                USING DETAIL = format('Before 0.6.0 they could be streams of relation %s or of another relation '
                                      '(one whose streams were named %s); relation %s streams as "%s:<key>" from now on.',
                                      r.source, array_to_string(r.others, ' or '), r.source, r.new_prefix);
        END IF;
        UPDATE @extschema@.hx_event e
           SET stream = r.new_prefix || substr(e.stream, length(r.old_prefix) + 1),
               event = jsonb_set(CASE WHEN starts_with(e.event #>> '{value,next}', r.old_prefix || ':')
                                      THEN jsonb_set(e.event, '{value,next}',
                                                     to_jsonb(r.new_prefix || substr(e.event #>> '{value,next}',
                                                                                     length(r.old_prefix) + 1)))
                                      ELSE e.event END,
                                 '{metadata,stream}',
                                 to_jsonb(r.new_prefix || substr(e.stream, length(r.old_prefix) + 1)))
         WHERE e.stream >= r.old_prefix || ':' AND e.stream < r.old_prefix || ';'
           AND NOT EXISTS (SELECT FROM unnest(r.others) o WHERE starts_with(e.stream, o || ':'));
        UPDATE @extschema@.hx_step_call c
           SET stream = r.new_prefix || substr(c.stream, length(r.old_prefix) + 1)
         WHERE c.stream COLLATE "C" >= r.old_prefix || ':' AND c.stream COLLATE "C" < r.old_prefix || ';'
           AND NOT EXISTS (SELECT FROM unnest(r.others) o WHERE starts_with(c.stream COLLATE "C", o || ':'));
        UPDATE @extschema@.hx_step s
           SET stream = r.new_prefix || substr(s.stream, length(r.old_prefix) + 1)
         WHERE s.stream COLLATE "C" >= r.old_prefix || ':' AND s.stream COLLATE "C" < r.old_prefix || ';'
           AND NOT EXISTS (SELECT FROM unnest(r.others) o WHERE starts_with(s.stream COLLATE "C", o || ':'));
    END LOOP;
END
$$;

-- Tables whose streams would still be named alike (stream=<name> options)
-- are refused when their triggers fire: say so now.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT s.source, s.prefix, s.trigger_name, s.conflicts_with
               FROM @extschema@.hx_stream_tables() s
              WHERE s.conflicts_with IS NOT NULL LOOP
        RAISE WARNING 'relations % and % stream under the same names', r.source, r.conflicts_with
            USING DETAIL = format('Trigger %I names the streams of relation %s "%s:<key>".',
                                  r.trigger_name, r.source, r.prefix),
                  HINT = 'Give one of the triggers a stream=<name> option of its own: until then, both refuse every change.';
    END LOOP;
END
$$;

--
-- NOTIFY is a hint.  Any role that can connect can LISTEN to a stream's
-- channel and NOTIFY on it, so a payload only tells followers to read the
-- log, with their own privileges.  hx_stream's default becomes
-- payload=ref (the stream, seq and type; no state): a trigger created
-- without a payload option, which sent the event itself under 0.5.0, sends
-- references from this update on.  payload=auto keeps sending events, for
-- tables whose state every role may see.  (Nothing to change in the
-- catalogs: the library reads the installed version.)
--
COMMENT ON FUNCTION @extschema@.hx_stream()
IS 'row trigger (state_column, key_column [, arrays=, payload=, stream=]): logs each change as an AG-UI event, and NOTIFYs a reference to it';

--
-- Where a row's history begins.  A row deleted and inserted again with its
-- key (for another user, say) continues its stream: hx_stream_since tells
-- the event where the current row began, one probe of an index of the
-- streams' ends.  Building it reads the whole log once; writers wait.
--
-- The ends of streams (hx.stream_end: the row was deleted, or its key
-- changed), few among the events, indexed on their own: where a row's
-- history begins is one probe (hx_stream_since).
CREATE INDEX hx_event_ends ON @extschema@.hx_event (stream, seq)
    WHERE type = 'CUSTOM' AND (event ->> 'name') = 'hx.stream_end';

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

--
-- One definition of the ring of daily partitions: the library's.
-- hx_stream_trim reads it through hx_event_ring (the days up to a time,
-- each with its partition, and whether writers write that partition now);
-- the partition key spells the same arithmetic out, and the library
-- checks that they agree.
--
CREATE FUNCTION @extschema@.hx_event_ring(at pg_catalog.timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (day pg_catalog.date, partition pg_catalog.regclass, current pg_catalog.bool)
AS 'MODULE_PATHNAME', 'hx_event_ring'
LANGUAGE C VOLATILE STRICT;

COMMENT ON FUNCTION @extschema@.hx_event_ring(pg_catalog.timestamptz)
IS 'the days of the hx_event ring up to a time (UTC), newest first, each with its partition, and whether writers write it now';

--
-- hx_stream_trim across midnight (UTC): a trim whose transaction began
-- before midnight carried the last events of the streams of the days it
-- emptied into the partition of the clock's day, which could be one it
-- then emptied, and emptied the partition writers write after midnight.
-- The carried events now go into the partition of now()'s day, and the
-- partitions from today's to the one after the clock's day are never
-- emptied at once.
--
CREATE OR REPLACE FUNCTION @extschema@.hx_stream_trim(older_than pg_catalog.interval,
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


--
-- Log streams, for writers without a row: hx_stream_send appends an event
-- to a stream "@<name>", which no table's stream can be named.
--
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

--
-- Narrow rows compressed: PostgreSQL compresses a row's values only when
-- the row is wider than about 2 kB.
--
CREATE FUNCTION @extschema@.hx_compress(value anyelement, method pg_catalog.text DEFAULT NULL)
RETURNS anyelement
AS 'MODULE_PATHNAME', 'hx_compress'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hx_compress(anyelement, pg_catalog.text)
IS 'a value of a variable-length type compressed in line (pglz or lz4), for narrow rows PostgreSQL stores uncompressed';

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
-- The log's NOT NULL constraints take the names a fresh install gives
-- them.  PostgreSQL 18 keeps NOT NULL constraints in pg_constraint, with
-- names unique in the schema; 0.5.0 created the partitioned log while
-- 0.4.0's table still held hx_event_<column>_not_null, so the log's got a
-- "1" appended.  (Before 18 they have no names, and nothing is renamed.)
-- Last in the script: renaming a constraint locks the log and its
-- partitions ACCESS EXCLUSIVE, which stops readers too, from then to the
-- commit only.
--
DO $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT k.conname, a.attname
               FROM pg_constraint k
               JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1]
              WHERE k.conrelid = '@extschema@.hx_event'::regclass
                AND k.contype = 'n'
                AND k.conname = 'hx_event_' || a.attname || '_not_null1' LOOP
        EXECUTE format('ALTER TABLE %I.hx_event RENAME CONSTRAINT %I TO %I', '@extschema@',
                       c.conname, 'hx_event_' || c.attname || '_not_null');
    END LOOP;
END
$$;
