/* hxstate--0.6.0--0.7.0.sql: from 0.6.0 to 0.7.0 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION hxstate UPDATE TO '0.7.0'" to load this file. \quit

SET LOCAL search_path = pg_catalog, pg_temp;

-- Tables whose state columns are jsonb keep them: nothing of theirs
-- changes.  A table moves to hxdoc on its owner's terms, online
-- (docs/upgrading.md).
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
