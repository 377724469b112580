-- bench/pgbench/step_staged_last.sql: one step of four tool calls, exactly
-- once, as a runtime that promotes when the step's last call comes in:
-- three calls staged in transactions of their own, the last one staged in
-- the transaction that promotes the step (bench/steps.sh; -D rows=N).
\set id random(1, :rows)
\set step random(1, 2000000000)
SELECT hx_stage('sessions:' || ('s-' || lpad(:id::text, 4, '0')), 'step-' || :step, 'toolu_1', '[{"op": "append", "path": "/log", "items": [{"tool": 1, "ok": true}]}, {"op": "increment", "path": "/stats/tool_calls", "by": 1}, {"op": "replace", "path": "/last_tool", "value": "tool_1"}]', 1);
SELECT hx_stage('sessions:' || ('s-' || lpad(:id::text, 4, '0')), 'step-' || :step, 'toolu_2', '[{"op": "append", "path": "/log", "items": [{"tool": 2, "ok": true}]}, {"op": "increment", "path": "/stats/tool_calls", "by": 1}, {"op": "replace", "path": "/last_tool", "value": "tool_2"}]', 2);
SELECT hx_stage('sessions:' || ('s-' || lpad(:id::text, 4, '0')), 'step-' || :step, 'toolu_3', '[{"op": "append", "path": "/log", "items": [{"tool": 3, "ok": true}]}, {"op": "increment", "path": "/stats/tool_calls", "by": 1}, {"op": "replace", "path": "/last_tool", "value": "tool_3"}]', 3);
BEGIN;
SELECT hx_stage('sessions:' || ('s-' || lpad(:id::text, 4, '0')), 'step-' || :step, 'toolu_4', '[{"op": "append", "path": "/log", "items": [{"tool": 4, "ok": true}]}, {"op": "increment", "path": "/stats/tool_calls", "by": 1}, {"op": "replace", "path": "/last_tool", "value": "tool_4"}]', 4);
UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:' || ('s-' || lpad(:id::text, 4, '0')), 'step-' || :step))
 WHERE session_id = ('s-' || lpad(:id::text, 4, '0'));
COMMIT;
