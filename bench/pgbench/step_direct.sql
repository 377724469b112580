-- bench/pgbench/step_direct.sql: the same step's four tool calls, each
-- merged by its own UPDATE, at least once (bench/steps.sh; -D rows=N).
\set id random(1, :rows)
UPDATE sessions SET state = hx_merge(state, '[{"op": "append", "path": "/log", "items": [{"tool": 1, "ok": true}]}, {"op": "increment", "path": "/stats/tool_calls", "by": 1}, {"op": "replace", "path": "/last_tool", "value": "tool_1"}]') WHERE session_id = ('s-' || lpad(:id::text, 4, '0'));
UPDATE sessions SET state = hx_merge(state, '[{"op": "append", "path": "/log", "items": [{"tool": 2, "ok": true}]}, {"op": "increment", "path": "/stats/tool_calls", "by": 1}, {"op": "replace", "path": "/last_tool", "value": "tool_2"}]') WHERE session_id = ('s-' || lpad(:id::text, 4, '0'));
UPDATE sessions SET state = hx_merge(state, '[{"op": "append", "path": "/log", "items": [{"tool": 3, "ok": true}]}, {"op": "increment", "path": "/stats/tool_calls", "by": 1}, {"op": "replace", "path": "/last_tool", "value": "tool_3"}]') WHERE session_id = ('s-' || lpad(:id::text, 4, '0'));
UPDATE sessions SET state = hx_merge(state, '[{"op": "append", "path": "/log", "items": [{"tool": 4, "ok": true}]}, {"op": "increment", "path": "/stats/tool_calls", "by": 1}, {"op": "replace", "path": "/last_tool", "value": "tool_4"}]') WHERE session_id = ('s-' || lpad(:id::text, 4, '0'));
