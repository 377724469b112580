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
