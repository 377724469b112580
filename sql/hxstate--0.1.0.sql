/* hxstate--0.1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION hxstate" to load this file. \quit

CREATE FUNCTION @extschema@.hx_patch(doc pg_catalog.jsonb, patch pg_catalog.jsonb)
RETURNS pg_catalog.jsonb
AS 'MODULE_PATHNAME', 'hx_patch'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hx_patch(pg_catalog.jsonb, pg_catalog.jsonb)
IS 'apply an RFC 6902 JSON Patch, all operations or none';
