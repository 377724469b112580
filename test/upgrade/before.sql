-- test/upgrade/before.sql: hxstate 0.5.0 in use, on PostgreSQL 15, before
-- pg_upgrade: sessions with every guard and a stream, a machine of the
-- user's own, a log whose events lie in several of its daily partitions,
-- and steps both promoted and still staged.  Run by test/upgrade/run, in a
-- database where the 0.5.0 library and scripts are installed.
\set ON_ERROR_STOP on
SET client_min_messages = warning;

CREATE EXTENSION hxstate;
DO $$
BEGIN
    IF (SELECT extversion FROM pg_extension WHERE extname = 'hxstate') <> '0.5.0' THEN
        RAISE EXCEPTION 'the old cluster must run hxstate 0.5.0';
    END IF;
END $$;

\i docs/sessions.sql

-- a machine of the user's own, guarding a table of its own
INSERT INTO hx_machine VALUES ('ticket', 'open');
INSERT INTO hx_transition VALUES ('ticket', 'open', 'assign', 'assigned'),
                                 ('ticket', 'assigned', 'resolve', 'closed');
CREATE TABLE tickets (id int PRIMARY KEY, status text NOT NULL DEFAULT 'open',
                      body jsonb NOT NULL DEFAULT '{}');
CREATE CONSTRAINT TRIGGER ticket_machine AFTER INSERT OR UPDATE ON tickets
    FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('ticket', 'status');
CREATE TRIGGER ticket_stream AFTER INSERT OR UPDATE OR DELETE ON tickets
    FOR EACH ROW EXECUTE FUNCTION hx_stream('body', 'id', 'payload=none');

-- a streamed table outside schema public: 0.6.0 renames its streams
CREATE SCHEMA tenant_b;
CREATE TABLE tenant_b.runs (id int PRIMARY KEY, st jsonb NOT NULL DEFAULT '{}');
CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON tenant_b.runs
    FOR EACH ROW EXECUTE FUNCTION hx_stream('st', 'id');
INSERT INTO tenant_b.runs VALUES (1);
UPDATE tenant_b.runs SET st = '{"a": 1}';
UPDATE tenant_b.runs SET st = '{"a": 2}';

-- 40 sessions, each with a project, a phase moved, tools held and
-- released, and merged writes; one deleted (its stream ended)
INSERT INTO sessions (session_id, user_id)
    SELECT 's-' || i, 'u-' || (i % 7) FROM generate_series(1, 40) i;
UPDATE sessions SET project_id = 'prj-' || session_id;
UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'start_build')
 WHERE right(session_id, 1) IN ('1', '3', '5', '7');
DO $$
BEGIN
    FOR r IN 1..12 LOOP
        UPDATE sessions SET pending_tool = jsonb_build_object('id', 'toolu_' || r)
         WHERE session_id <> 's-40';
        UPDATE sessions SET state = hx_merge(state, jsonb_build_array(
                   jsonb_build_object('op', 'append', 'path', '/todos',
                                      'items', jsonb_build_array(jsonb_build_object('id', 't' || r, 'text', repeat('x', r)))),
                   jsonb_build_object('op', 'increment', 'path', '/stats/tool_calls', 'by', 1),
                   jsonb_build_object('op', 'replace', 'path', '/last_tool', 'value', 'tool-' || r))),
               pending_tool = NULL;
    END LOOP;
END $$;
DELETE FROM sessions WHERE session_id = 's-40';

INSERT INTO tickets (id) SELECT i FROM generate_series(1, 5) i;
UPDATE tickets SET status = hx_next_phase('ticket', status, 'assign'),
                   body = jsonb_build_object('assignee', 'a' || id) WHERE id <= 3;

-- exactly-once steps: step-1 of s-1 promoted, step-2 staged and waiting
SELECT hx_stage('sessions:s-1', 'step-1', 'toolu_b', '[{"op": "append", "path": "/steps", "items": ["b"]}]', 2);
SELECT hx_stage('sessions:s-1', 'step-1', 'toolu_a', '[{"op": "append", "path": "/steps", "items": ["a"]}]', 1);
UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:s-1', 'step-1'))
 WHERE session_id = 's-1';
SELECT hx_stage('sessions:s-1', 'step-2', 'toolu_c', '[{"op": "append", "path": "/steps", "items": ["c"]}]', 1);

-- The log's events over several days: each stream's first events go to
-- two days ago and the next ones to yesterday, in seq order, as if the
-- sessions had run for three days (a stream's events are logged in time
-- order, which the log's search for a stream's last seq relies on).
UPDATE hx_event SET created_at = created_at - interval '1 day' *
    CASE WHEN seq <= 3 THEN 2 WHEN seq <= 8 THEN 1 ELSE 0 END
 WHERE seq <= 8;
DO $$
DECLARE
    parts int;
BEGIN
    SELECT count(DISTINCT tableoid) INTO parts FROM hx_event;
    IF parts < 3 THEN
        RAISE EXCEPTION 'the log should span 3 partitions, not %', parts;
    END IF;
END $$;
