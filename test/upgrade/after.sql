-- test/upgrade/after.sql: the upgraded cluster (PostgreSQL 18, hxstate
-- updated to the current version) still holds every promise of the old
-- one: the guards refuse, the machines and the steps carry on, the streams
-- go on with the next seq, and history written before the upgrade, in the
-- log's older partitions, still rebuilds.  pgTAP, run by test/upgrade/run.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
SELECT plan(19);

SELECT is((SELECT extversion FROM pg_extension WHERE extname = 'hxstate'),
          (SELECT default_version FROM pg_available_extensions WHERE name = 'hxstate'),
          'hxstate is at the library''s version');
SELECT cmp_ok(current_setting('server_version_num')::int, '>=', 180000, 'the server is PostgreSQL 18');

-- the guards
SELECT throws_ok($$UPDATE sessions SET project_id = 'prj-other' WHERE session_id = 's-1'$$,
                 'XH101', NULL, 'a locked project_id stays locked');
UPDATE sessions SET pending_tool = '{"id": "toolu_x"}' WHERE session_id = 's-2';
SELECT throws_ok($$UPDATE sessions SET pending_tool = '{"id": "toolu_y"}' WHERE session_id = 's-2'$$,
                 'XH102', NULL, 'a busy tool slot refuses another tool');
SELECT throws_ok($$UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'publish') WHERE session_id = 's-1'$$,
                 'XH103', NULL, 'agent_session refuses publish from building');
SELECT throws_ok($$UPDATE sessions SET phase = 'done' WHERE session_id = 's-2'$$,
                 'XH103', NULL, 'the phase guard refuses a jump');
SELECT throws_ok($$UPDATE tickets SET status = 'closed' WHERE id = 4$$,
                 'XH103', NULL, 'the user''s own machine still guards its table');
SELECT lives_ok($$UPDATE tickets SET status = hx_next_phase('ticket', status, 'resolve'),
                                       body = body || '{"resolved": true}' WHERE id = 1$$,
                'and still allows its edges');

-- the streams go on with the next seq
SELECT is((SELECT max(seq) FROM hx_event WHERE stream = 'sessions:s-5'), 13::bigint,
          'a session''s stream has its 13 events');
UPDATE sessions SET state = hx_merge(state, '[{"op": "increment", "path": "/stats/tool_calls", "by": 1}]')
 WHERE session_id = 's-5';
SELECT is((SELECT seq FROM hx_stream_snapshot('sessions', 's-5')), 14::bigint,
          'its next change is seq 14');
SELECT is((SELECT event->'delta' FROM hx_event WHERE stream = 'sessions:s-5' AND seq = 14),
          '[{"op": "replace", "path": "/stats/tool_calls", "value": 13}]'::jsonb,
          'seq 14 is the delta of that change');
INSERT INTO sessions (session_id, user_id) VALUES ('s-40', 'u-new');
SELECT is((SELECT seq FROM hx_stream_snapshot('sessions', 's-40')), 15::bigint,
          'a re-inserted key continues its stream after its end (snapshot, end, snapshot)');
SELECT is((SELECT max(seq) FROM hx_event WHERE stream = 'tickets:1'), 3::bigint,
          'the tickets'' stream went on as well');

-- a table outside schema public: its stream renamed by the update, seqs and all
SELECT is((SELECT array_agg(seq ORDER BY seq) FROM hx_event WHERE stream = 'tenant_b.runs:1'),
          '{1,2,3}'::bigint[], 'the events of a table outside public carry over to its new stream name');
UPDATE tenant_b.runs SET st = '{"a": 3}' WHERE id = 1;
SELECT is((SELECT event->'metadata' FROM hx_event WHERE stream = 'tenant_b.runs:1' AND seq = 4),
          '{"stream": "tenant_b.runs:1", "seq": 4}'::jsonb, 'and its stream goes on at seq 4 under that name');

-- the steps
SELECT is(hx_promote('sessions:s-1', 'step-1'), '[]'::jsonb,
          'a step promoted before the upgrade promotes nothing again');
UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:s-1', 'step-2')) WHERE session_id = 's-1';
SELECT is((SELECT state->'steps' FROM sessions WHERE session_id = 's-1'), '["a", "b", "c"]'::jsonb,
          'a step staged before the upgrade promotes after it, once');

-- history from the older partitions
SELECT is(hx_stream_state_at('sessions:s-6', 3),
          '{"todos": [{"id": "t1", "text": "x"}, {"id": "t2", "text": "xx"}],
            "stats": {"tool_calls": 2}, "last_tool": "tool-2"}'::jsonb,
          'a state rebuilt from events of two days ago');
SELECT is((SELECT count(DISTINCT tableoid) FROM hx_event WHERE stream = 'sessions:s-6'), 3::bigint,
          'whose events still lie in three partitions');

SELECT * FROM finish();
ROLLBACK;
