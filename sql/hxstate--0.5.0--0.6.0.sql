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
-- The log's NOT NULL constraints take the names a fresh install gives
-- them.  PostgreSQL 18 keeps NOT NULL constraints in pg_constraint, with
-- names unique in the schema; 0.5.0 created the partitioned log while
-- 0.4.0's table still held hx_event_<column>_not_null, so the log's got a
-- "1" appended.  (Before 18 they have no names, and nothing is renamed.)
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
