-- test/crash/setup.sql: the crash run's database, after CREATE EXTENSION
-- hxstate and docs/sessions.sql (test/crash/run loads it):
--
--   psql -v sessions=40 -f test/crash/setup.sql
--
-- The sessions s-01 .. s-<sessions> and the churn sessions x-01 .. x-04
-- (test/crash/ops.js), each inserted with state '{}' (its stream's
-- STATE_SNAPSHOT, seq 1), and crash_replay(event ORDER BY seq), the
-- aggregate that replays a stream's log in SQL with hx_patch: a
-- STATE_SNAPSHOT sets the state (JSON null: no state, as for a missing
-- row), a STATE_DELTA patches it, hx.stream_end leaves no state (the row is
-- gone), other events leave it as it is.
INSERT INTO sessions (session_id, user_id)
SELECT 's-' || lpad(i::text, 2, '0'), 'u-' || (i % 7)
  FROM generate_series(1, :sessions) AS i;
INSERT INTO sessions (session_id, user_id)
SELECT 'x-' || lpad(i::text, 2, '0'), 'u-x'
  FROM generate_series(1, 4) AS i;

CREATE FUNCTION crash_replay_step(state jsonb, event jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE event->>'type'
        WHEN 'STATE_SNAPSHOT' THEN nullif(event->'snapshot', 'null')
        WHEN 'STATE_DELTA' THEN hx_patch(state, event->'delta')
        WHEN 'CUSTOM' THEN CASE WHEN event->>'name' = 'hx.stream_end' THEN NULL ELSE state END
        ELSE state
    END
$$;

CREATE AGGREGATE crash_replay(jsonb) (SFUNC = crash_replay_step, STYPE = jsonb);
