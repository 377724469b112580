-- bench/pgbench/update_notify.sql: one step of an agent's session, as one
-- autocommit statement (bench/pgbench.sh; -D rows=N -D plen=B).  A random
-- session:
--   updated_at = now();
--   state: hx_merge of a small write, /stats/tool_calls + 1 and /last_tool
--     replaced by one of four tool names (so the state always changes);
--   pending_tool: set to a new tool_use when free, cleared when held;
--   phase: one edge on along the agent_session machine, through
--     hx_next_phase (chatting -> building -> verifying -> done -> chatting).
-- update.sql plus, in the same statement (so the same transaction), a bare
-- pg_notify on the session's stream channel with a payload of :plen bytes.
\set id random(1, :rows)
\set tool random(1, 4)
\set call random(1, 999999)
WITH u AS (
  UPDATE sessions
     SET updated_at = now(),
         state = hx_merge(state, jsonb_build_array(
                   '{"op": "increment", "path": "/stats/tool_calls", "by": 1}'::jsonb,
                   jsonb_build_object('op', 'replace', 'path', '/last_tool',
                     'value', (ARRAY['search', 'read_file', 'run_tests', 'edit'])[:tool]))),
         pending_tool = CASE WHEN pending_tool IS NULL
                             THEN jsonb_build_object('id', 'toolu_' || :call, 'name', 'run_tests') END,
         phase = hx_next_phase('agent_session', phase,
                   CASE phase WHEN 'chatting' THEN 'start_build' WHEN 'building' THEN 'todo_done_build'
                              WHEN 'verifying' THEN 'publish' ELSE 'open_existing' END)
   WHERE session_id = 's-' || lpad(:id::text, 4, '0')
  RETURNING session_id)
SELECT pg_notify(hx_stream_channel('sessions:' || u.session_id), repeat('x', :plen)) FROM u;
