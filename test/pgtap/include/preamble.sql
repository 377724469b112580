--
-- test/pgtap/include/preamble.sql: the psql settings every pgTAP file
-- starts with (\ir include/preamble.sql): stop at the first error, print
-- only TAP.
--
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
