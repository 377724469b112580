--
-- test/pgtap/versions.sql: behaviour that depends on the PostgreSQL
-- version the extension runs on (src/compat.h).  What a version lacks is
-- skipped there, with the version that has it named.
--
\ir include/preamble.sql

BEGIN;
SELECT plan(5);

CREATE TABLE nt (k int PRIMARY KEY, st jsonb NOT NULL DEFAULT '{}');
CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON nt
    FOR EACH ROW EXECUTE FUNCTION hx_stream('st', 'k', 'payload=none');

-- PostgreSQL 18: a CHECK constraint on the log that is NOT ENFORCED
-- refuses nothing, on the log's direct write as on an INSERT, while an
-- enforced one beside it still refuses
SELECT current_setting('server_version_num')::int >= 180000 AS pg18 \gset
\if :pg18
SELECT lives_ok($$ALTER TABLE hx_event ADD CONSTRAINT nt_not_1 CHECK (stream <> 'nt:1') NOT ENFORCED$$,
                'a CHECK constraint NOT ENFORCED on the log');
SELECT lives_ok($$INSERT INTO nt VALUES (1)$$, 'does not refuse the event it does not hold for');
SELECT is((SELECT count(*) FROM hx_event WHERE stream = 'nt:1'), 1::bigint, 'which is logged');
SELECT lives_ok($$ALTER TABLE hx_event ADD CONSTRAINT nt_not_2 CHECK (stream <> 'nt:2')$$,
                'an enforced one beside it');
SELECT throws_ok($$INSERT INTO nt VALUES (2)$$, '23514', NULL,
                 'refuses the event it does not hold for, and the change with it');
\else
SELECT skip('CHECK constraints NOT ENFORCED are new in PostgreSQL 18', 5);
\endif

SELECT * FROM finish();
ROLLBACK;
