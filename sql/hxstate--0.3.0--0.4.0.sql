/* hxstate--0.3.0--0.4.0.sql: streaming, AG-UI events to LISTEN clients, resumable from the event log */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION hxstate UPDATE TO '0.4.0'" to load this file. \quit

--
-- The event log: every event of every stream, written in the transaction
-- of the change it reports.  The source of truth; NOTIFY is the fast path.
--
CREATE TABLE @extschema@.hx_event (
    stream     text        NOT NULL,
    seq        bigint      NOT NULL CHECK (seq > 0),
    type       text        NOT NULL,
    event      jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    PRIMARY KEY (stream, seq)
);

COMMENT ON TABLE @extschema@.hx_event
IS 'the AG-UI events of every hx_stream stream, by stream and seq';

-- No privileges by default: the log holds every stream's state.  Readers
-- get SELECT (row-level security can narrow it per stream); owners of
-- streamed tables get INSERT (hx_stream writes as the table owner).
REVOKE ALL ON @extschema@.hx_event FROM PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_event', '');

CREATE FUNCTION @extschema@.hx_stream()
RETURNS trigger
AS 'MODULE_PATHNAME', 'hx_stream'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.hx_stream()
IS 'row trigger (state_column, key_column [, arrays=, payload=, stream=]): logs and NOTIFYs each change as an AG-UI event';

CREATE FUNCTION @extschema@.hx_stream_channel(stream pg_catalog.text)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'hx_stream_channel'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hx_stream_channel(pg_catalog.text)
IS 'the LISTEN channel of a stream';

CREATE FUNCTION @extschema@.hx_stream_snapshot(source pg_catalog.regclass, key pg_catalog.text,
                                               OUT stream pg_catalog.text, OUT seq pg_catalog.int8,
                                               OUT state pg_catalog.jsonb)
RETURNS record
AS 'MODULE_PATHNAME', 'hx_stream_snapshot'
LANGUAGE C STABLE STRICT;

COMMENT ON FUNCTION @extschema@.hx_stream_snapshot(pg_catalog.regclass, pg_catalog.text)
IS 'a stream''s current state and the seq of its last event, read in one snapshot';

CREATE FUNCTION @extschema@.hx_stream_events(stream pg_catalog.text,
                                             after_seq pg_catalog.int8 DEFAULT 0,
                                             max_events pg_catalog.int4 DEFAULT 1000)
RETURNS TABLE (seq pg_catalog.int8, event pg_catalog.jsonb)
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT e.seq, e.event
      FROM @extschema@.hx_event e
     WHERE e.stream = $1 AND e.seq > $2
     ORDER BY e.seq
     LIMIT $3
$$;

COMMENT ON FUNCTION @extschema@.hx_stream_events(pg_catalog.text, pg_catalog.int8, pg_catalog.int4)
IS 'the events of a stream after a seq, in seq order';

CREATE FUNCTION @extschema@.hx_stream_trim(older_than pg_catalog.interval,
                                           only_stream pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.int8
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    -- Per stream, everything up to the last event older than the cutoff
    -- goes, so that what stays is a contiguous tail of the stream; and the
    -- last event always stays, since it carries the stream's seq.
    WITH cut AS (
        SELECT e.stream, max(e.seq) AS upto
          FROM @extschema@.hx_event e
         WHERE e.created_at < now() - $1
           AND ($2 IS NULL OR e.stream = $2)
         GROUP BY e.stream),
    trimmed AS (
        DELETE FROM @extschema@.hx_event e
         USING cut
         WHERE e.stream = cut.stream
           AND e.seq <= cut.upto
           AND e.seq < (SELECT max(x.seq) FROM @extschema@.hx_event x
                         WHERE x.stream = e.stream)
        RETURNING 1)
    SELECT count(*) FROM trimmed
$$;

COMMENT ON FUNCTION @extschema@.hx_stream_trim(pg_catalog.interval, pg_catalog.text)
IS 'delete each stream''s events up to its last one older than an interval, keeping its last event';
