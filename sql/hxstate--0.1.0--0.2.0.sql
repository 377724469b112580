/* hxstate--0.1.0--0.2.0.sql: the composing engine, hx_merge and hx_diff */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION hxstate UPDATE TO '0.2.0'" to load this file. \quit

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
