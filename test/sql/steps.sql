--
-- steps: exactly-once step writes (hx_stage, hx_promote) and history
-- (hx_stream_state_at)
--
-- (err() is defined in setup.sql)
CREATE TABLE sessions (session_id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON sessions
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id');
INSERT INTO sessions VALUES ('s-1', '{"todos": []}');

-- tools finish in any order; ord is the model's tool-call order
SELECT hx_stage('sessions:s-1', 'step-1', 'toolu_b', '[{"op": "append", "path": "/todos", "items": ["b"]}, {"op": "replace", "path": "/last", "value": "b"}]', 2);
SELECT hx_stage('sessions:s-1', 'step-1', 'toolu_c', '[{"op": "append", "path": "/todos", "items": ["c"]}]');
SELECT hx_stage('sessions:s-1', 'step-1', 'toolu_a', '[{"op": "append", "path": "/todos", "items": ["a"]}, {"op": "replace", "path": "/last", "value": "a"}]', 1);
-- a retry with the same writes is a no-op (false); with others, an error
SELECT hx_stage('sessions:s-1', 'step-1', 'toolu_a', '[{"op": "append", "path": "/todos", "items": ["a"]}, {"op": "replace", "path": "/last", "value": "a"}]', 1);
SELECT err($$SELECT hx_stage('sessions:s-1', 'step-1', 'toolu_a', '[{"op": "append", "path": "/todos", "items": ["A"]}]', 1)$$);
SELECT err($$SELECT hx_stage('sessions:s-1', 'step-1', 'toolu_a', '[{"op": "append", "path": "/todos", "items": ["a"]}, {"op": "replace", "path": "/last", "value": "a"}]', 3)$$);
-- writes are checked when staged, not at promote
SELECT err($$SELECT hx_stage('sessions:s-1', 'step-1', 'toolu_d', '[{"op": "append", "path": "/todos"}]')$$);
SELECT err($$SELECT hx_stage('sessions:s-1', 'step-1', NULL, '[]')$$);
SELECT stream, step, call, ord FROM hx_step_call ORDER BY ord NULLS LAST, call;

-- one statement promotes the step: in ord order, then by call id, once
UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:s-1', 'step-1')) WHERE session_id = 's-1';
SELECT state FROM sessions;
-- a second promote applies nothing, and a late call is refused
UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:s-1', 'step-1')) WHERE session_id = 's-1';
SELECT err($$SELECT hx_stage('sessions:s-1', 'step-1', 'toolu_e', '[]')$$);
-- what was promoted is recorded; the staged calls are gone
SELECT stream, step, promoted_at IS NOT NULL AS promoted, promoted_calls, promoted_writes FROM hx_step;
SELECT count(*) AS staged_calls FROM hx_step_call;
-- the step was one change: one STATE_DELTA
SELECT seq, type, event->'delta' AS delta FROM hx_event WHERE stream = 'sessions:s-1' ORDER BY seq;

-- a promote that rolls back leaves the step to be promoted again
SELECT hx_stage('sessions:s-1', 'step-2', 'toolu_f', '[{"op": "increment", "path": "/n", "by": 1}]');
BEGIN;
UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:s-1', 'step-2')) WHERE session_id = 's-1';
ROLLBACK;
UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:s-1', 'step-2')) WHERE session_id = 's-1';
SELECT state -> 'n' AS n FROM sessions;

-- a rule that turns a statement of promoting into another: the error
-- shows the statement as it ran (the schema in place)
SELECT hx_stage('sessions:s-1', 'step-r', 'toolu_r', '[]');
CREATE RULE calls_stay AS ON DELETE TO hx_step_call DO INSTEAD SELECT 1;
SELECT err($$SELECT hx_promote('sessions:s-1', 'step-r')$$);
DROP RULE calls_stay ON hx_step_call;
DELETE FROM hx_step_call WHERE step = 'step-r';

-- a step with nothing staged promotes as nothing, and is then closed
SELECT hx_promote('sessions:s-1', 'step-empty');
SELECT err($$SELECT hx_stage('sessions:s-1', 'step-empty', 'late', '[]')$$);

-- trimming forgets promoted steps only
SELECT hx_stage('sessions:s-1', 'step-open', 'toolu_g', '[]');
UPDATE hx_step SET promoted_at = promoted_at - interval '2 days' WHERE promoted_at IS NOT NULL;
SELECT hx_step_trim('1 day') AS trimmed;
SELECT step, promoted_at IS NOT NULL AS promoted FROM hx_step ORDER BY step;
SELECT step, call FROM hx_step_call ORDER BY step, call;

-- history: the state at any seq still in the log
UPDATE sessions SET state = hx_merge(state, '[{"op": "replace", "path": "/last", "value": "x"}]');
SELECT seq, hx_stream_state_at('sessions:s-1', seq) FROM generate_series(1, 4) seq;
DELETE FROM sessions;
INSERT INTO sessions VALUES ('s-1', '{"again": true}');
SELECT seq, hx_stream_state_at('sessions:s-1', seq) FROM generate_series(4, 6) seq;
SELECT err($$SELECT hx_stream_state_at('sessions:s-1', 7)$$);
SELECT err($$SELECT hx_stream_state_at('sessions:s-1', 0)$$);
SELECT err($$SELECT hx_stream_state_at('sessions:none', 1)$$);
-- a trimmed seq cannot be rebuilt
UPDATE hx_event SET created_at = created_at - interval '1 hour' WHERE stream = 'sessions:s-1' AND seq < 6;
SELECT hx_stream_trim('30 minutes') AS trimmed;
SELECT err($$SELECT hx_stream_state_at('sessions:s-1', 2)$$);
SELECT hx_stream_state_at('sessions:s-1', 6);

-- a step's writes go into its own stream's row only: promoted into
-- another row, the UPDATE fails (XH203) and the step stays staged
INSERT INTO sessions VALUES ('s-2', '{"n": 0}');
SELECT hx_stage('sessions:s-1', 'step-3', 'toolu_h', '[{"op": "increment", "path": "/n", "by": 5}]');
SELECT hx_stage('sessions:s-2', 'step-3', 'toolu_i', '[{"op": "increment", "path": "/n", "by": 7}]');
SELECT err($$UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:s-1', 'step-3')) WHERE session_id = 's-2'$$);
SELECT err($$INSERT INTO sessions VALUES ('s-9', hx_merge('{}', hx_promote('sessions:s-1', 'step-3')))$$);
SELECT stream, step, call FROM hx_step_call WHERE step = 'step-3' ORDER BY 1;
-- one statement may promote each row's own step
UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:' || session_id, 'step-3'));
SELECT session_id, state -> 'n' AS n FROM sessions ORDER BY 1;
-- a row whose state does not change took nothing: no check
UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:s-1', 'step-3')) WHERE session_id = 's-2';
-- a row whose key changes takes a step of its old stream or of its new one
SELECT hx_stage('sessions:s-2', 'step-4', 'toolu_j', '[{"op": "increment", "path": "/n", "by": 1}]');
UPDATE sessions SET session_id = 's-3', state = hx_merge(state, hx_promote('sessions:s-2', 'step-4'))
 WHERE session_id = 's-2';
SELECT session_id, state -> 'n' AS n FROM sessions ORDER BY 1;
DELETE FROM sessions WHERE session_id = 's-3';
-- a table without hx_stream checks nothing: its rows take any step
CREATE TABLE unstreamed (id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
INSERT INTO unstreamed VALUES ('u-1');
SELECT hx_stage('sessions:s-1', 'step-5', 'toolu_k', '[{"op": "increment", "path": "/n", "by": 1}]');
UPDATE unstreamed SET state = hx_merge(state, hx_promote('sessions:s-1', 'step-5'));
SELECT state FROM unstreamed;
DROP TABLE unstreamed;

DROP TABLE sessions;
DELETE FROM hx_event;
DELETE FROM hx_step;
DELETE FROM hx_step_call;

-- staging and promoting probe the tables' keys, even with plans made while
-- the tables were empty and analyzed (a scan would read every step ever
-- promoted, once per call): in a new session, 30 steps, no sequential scan
TRUNCATE hx_step, hx_step_call;
ANALYZE hx_step;
ANALYZE hx_step_call;
\c
SELECT pg_stat_force_next_flush();
SELECT sum(seq_scan) AS scans_before FROM pg_stat_user_tables
 WHERE relid IN ('hx_step'::regclass, 'hx_step_call'::regclass) \gset
CREATE TABLE sessions (session_id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
INSERT INTO sessions VALUES ('s-1', '{"n": 0}');
DO $$
BEGIN
    FOR i IN 1 .. 30 LOOP
        FOR j IN 1 .. 2 LOOP
            PERFORM hx_stage('sessions:s-1', 'step-' || i, 'call-' || j, '[{"op": "increment", "path": "/n", "by": 1}]', j);
        END LOOP;
        UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:s-1', 'step-' || i)) WHERE session_id = 's-1';
    END LOOP;
END
$$;
SELECT state FROM sessions;
SELECT pg_stat_force_next_flush();
SELECT sum(seq_scan) - :scans_before AS seq_scans, count(*) AS tables FROM pg_stat_user_tables
 WHERE relid IN ('hx_step'::regclass, 'hx_step_call'::regclass);
SELECT count(*) AS steps, count(*) FILTER (WHERE cardinality(promoted_calls) = 2) AS with_two_calls FROM hx_step;
DROP TABLE sessions;
DELETE FROM hx_step;

-- a call staged as an object (an RFC 7386 patch of the state) is promoted
-- as a merge at the root, in its place among the step's ops
CREATE TABLE sessions (session_id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
INSERT INTO sessions VALUES ('s-1', '{"todos": ["x"], "title": "old", "gone": 1}');
SELECT hx_stage('sessions:s-1', 'step-obj', 'toolu_2', '{"title": "new", "gone": null}', 2);
SELECT hx_stage('sessions:s-1', 'step-obj', 'toolu_1', '[{"op": "append", "path": "/todos", "items": ["y"]}]', 1);
SELECT hx_stage('sessions:s-1', 'step-obj', 'toolu_3', '[{"op": "replace", "path": "/title", "value": "last"}]', 3);
UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:s-1', 'step-obj')) WHERE session_id = 's-1';
SELECT state FROM sessions;
SELECT promoted_calls, promoted_writes FROM hx_step WHERE step = 'step-obj';
DROP TABLE sessions;
DELETE FROM hx_event;
DELETE FROM hx_step;
