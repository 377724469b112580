--
-- The README's session example, end to end (a test checks that the README
-- shows exactly these statements)
--
CREATE TABLE sessions (
    session_id   text PRIMARY KEY,
    user_id      text NOT NULL,
    project_id   text,                              -- locked after assignment
    phase        text NOT NULL DEFAULT 'chatting',  -- chatting|building|verifying|done
    pending_tool jsonb,                             -- the tool_use in flight, if any
    cancel_token text,
    state        jsonb COMPRESSION lz4 NOT NULL DEFAULT '{}',
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE CONSTRAINT TRIGGER project_locked AFTER INSERT OR UPDATE ON sessions
    FOR EACH ROW EXECUTE FUNCTION hx_lock_once('project_id');
CREATE CONSTRAINT TRIGGER one_tool_at_a_time AFTER INSERT OR UPDATE ON sessions
    FOR EACH ROW EXECUTE FUNCTION hx_slot_guard('pending_tool');
CREATE CONSTRAINT TRIGGER phase_machine AFTER INSERT OR UPDATE ON sessions
    FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('agent_session');
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id');

INSERT INTO sessions (session_id, user_id) VALUES ('s-42', 'u-7');

-- the user picks a project: written once, then locked
UPDATE sessions SET project_id = 'prj_8821' WHERE session_id = 's-42';
UPDATE sessions SET project_id = 'prj_0000' WHERE session_id = 's-42';

-- the build starts: the phase moves along the machine's edges only
UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'start_build')
 WHERE session_id = 's-42';

-- the runtime holds the tool slot while a step's tools run
UPDATE sessions SET pending_tool = '{"id": "toolu_01", "name": "plan_step"}'
 WHERE session_id = 's-42';
UPDATE sessions SET pending_tool = '{"id": "toolu_02"}' WHERE session_id = 's-42';

-- two tools of the step write at once; their writes compose
UPDATE sessions SET state = hx_merge(state, '[
    {"op": "append", "path": "/todos", "items": [{"id": "t1", "text": "scaffold"}]},
    {"op": "increment", "path": "/stats/tool_calls", "by": 1}]')
 WHERE session_id = 's-42';
UPDATE sessions SET state = hx_merge(state, '[
    {"op": "append", "path": "/todos", "items": [{"id": "t2", "text": "deploy"}]},
    {"op": "increment", "path": "/stats/tool_calls", "by": 1},
    {"op": "replace", "path": "/last_tool", "value": "search"}]')
 WHERE session_id = 's-42';
UPDATE sessions SET pending_tool = NULL WHERE session_id = 's-42';

-- publishing from "building" is not an edge
UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'publish')
 WHERE session_id = 's-42';

SELECT project_id, phase, pending_tool, state FROM sessions;

-- every change is an AG-UI event in the log (and on LISTEN "hx:sessions:s-42")
SELECT seq, event->>'type' AS type, coalesce(event->'delta', event->'snapshot') AS body
  FROM hx_stream_events('sessions:s-42');

DROP TABLE sessions;
DELETE FROM hx_event;
