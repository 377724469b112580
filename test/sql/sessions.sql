--
-- The README's session example, end to end: the table of docs/sessions.sql,
-- then the statements (a test checks that the README shows exactly these).
-- pg_regress runs psql in the top directory, where \i finds docs/.
--
\i docs/sessions.sql

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
