--
-- bench/pgbench/setup.sql: the database of bench/pgbench.sh.
--
-- bench_pg_reset(config, nrows) drops and makes anew the table "sessions"
-- of sql/sessions.sql (the README's session table), with the triggers of
-- one configuration, and fills it with nrows sessions:
--   bare     no trigger at all;
--   guarded  the three guards exactly as the README attaches them:
--            CREATE CONSTRAINT TRIGGER ... AFTER INSERT OR UPDATE ... FOR
--            EACH ROW EXECUTE FUNCTION hx_lock_once('project_id'),
--            hx_slot_guard('pending_tool'), hx_phase_guard('agent_session');
--   stream   the README's stream trigger alone: AFTER INSERT OR UPDATE OR
--            DELETE ... FOR EACH ROW EXECUTE FUNCTION hx_stream('state',
--            'session_id');
--   log      the same with 'payload=none': events logged, no NOTIFY (what
--            the logical replication transport follows).
-- The triggers are attached before the rows go in, as an application would
-- have them: the guards check the inserts, and a stream's log starts with
-- each session's STATE_SNAPSHOT (seq 1), as it would in production.  The
-- event log hx_event is emptied first, so that every run starts alike.
--
-- Every session: session_id 's-0001' ... (the primary key), a user, its
-- project already set (project_id is locked from then on), phase
-- 'chatting' (the machine's initial phase), no pending tool, and a state of
-- about 1 kB: a handful of todos, counters and metadata (bench_pg_state).
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS hxstate;

CREATE FUNCTION bench_pg_state(i int) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $f$
	SELECT jsonb_build_object(
		'thread_id', 'thr_' || lpad(to_hex(i * 7919), 6, '0'),
		'meta', jsonb_build_object('status', 'idle', 'model', 'claude-sonnet',
			'created_at', '2025-01-01T00:00:00Z', 'owner', 'u-' || (i % 97)),
		'stats', jsonb_build_object('tool_calls', 0, 'steps', 0, 'tokens_in', 1200,
			'tokens_out', 340),
		'last_tool', 'search',
		'todos', (SELECT jsonb_agg(jsonb_build_object('id', 't' || j,
				'text', (ARRAY['scaffold the project', 'write the parser tests',
					'fix the empty-input bug', 'run the test suite', 'deploy the preview'])[j % 5 + 1],
				'done', j % 3 = 0) ORDER BY j)
			FROM generate_series(1, 8) j))
$f$;

CREATE FUNCTION bench_pg_reset(config text, nrows int) RETURNS void
LANGUAGE plpgsql SET client_min_messages = warning AS $f$
BEGIN
	IF config NOT IN ('bare', 'guarded', 'stream', 'log') THEN
		RAISE EXCEPTION 'unknown configuration %', config;
	END IF;
	TRUNCATE hx_event;
	DROP TABLE IF EXISTS sessions;
	-- sql/sessions.sql's table, column for column
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
	IF config = 'guarded' THEN
		CREATE CONSTRAINT TRIGGER project_locked AFTER INSERT OR UPDATE ON sessions
			FOR EACH ROW EXECUTE FUNCTION hx_lock_once('project_id');
		CREATE CONSTRAINT TRIGGER one_tool_at_a_time AFTER INSERT OR UPDATE ON sessions
			FOR EACH ROW EXECUTE FUNCTION hx_slot_guard('pending_tool');
		CREATE CONSTRAINT TRIGGER phase_machine AFTER INSERT OR UPDATE ON sessions
			FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('agent_session');
	ELSIF config = 'stream' THEN
		CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON sessions
			FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id');
	ELSIF config = 'log' THEN
		CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON sessions
			FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id', 'payload=none');
	END IF;
	INSERT INTO sessions (session_id, user_id, project_id, state)
		SELECT 's-' || lpad(i::text, 4, '0'), 'u-' || (i % 97), 'prj_' || lpad(i::text, 4, '0'),
			bench_pg_state(i)
		FROM generate_series(1, nrows) i;
END
$f$;

-- The configuration a table has now, from its triggers (checked before
-- every run, so that no run measures the wrong table)
CREATE FUNCTION bench_pg_config() RETURNS text LANGUAGE sql AS $f$
	SELECT CASE string_agg(p.proname, ',' ORDER BY p.proname)
		WHEN 'hx_lock_once,hx_phase_guard,hx_slot_guard' THEN 'guarded'
		WHEN 'hx_stream' THEN CASE WHEN bool_or(encode(t.tgargs, 'escape') LIKE '%payload=none%') THEN 'log' ELSE 'stream' END
		ELSE coalesce(string_agg(p.proname, ',' ORDER BY p.proname), 'bare') END
	FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
	WHERE t.tgrelid = to_regclass('sessions') AND NOT t.tgisinternal
$f$;
