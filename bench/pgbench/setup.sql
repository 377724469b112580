--
-- bench/pgbench/setup.sql: the database of bench/pgbench.sh.
--
-- The table is the README's: docs/sessions.sql, loaded after this file
-- (bench/pgbench.sh), its triggers then recorded in bench_pg_triggers and
-- dropped.  bench_pg_reset(config, nrows) empties the table and attaches
-- the triggers of one configuration, then fills it with nrows sessions:
--   bare     no trigger at all;
--   guarded  the three guards, exactly as docs/sessions.sql attaches them
--            (hx_lock_once('project_id'), hx_slot_guard('pending_tool'),
--            hx_phase_guard('agent_session'), as constraint triggers);
--   stream   its stream trigger alone (hx_stream('state', 'session_id'),
--            AFTER INSERT OR UPDATE OR DELETE);
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

-- bench_pg_keep_triggers(): record docs/sessions.sql's triggers, then
-- drop them (bench/pgbench.sh calls it once, after loading the file)
CREATE TABLE bench_pg_triggers (name text PRIMARY KEY, func text NOT NULL, def text NOT NULL);
CREATE FUNCTION bench_pg_keep_triggers() RETURNS void
LANGUAGE plpgsql SET client_min_messages = warning AS $f$
DECLARE
	r record;
BEGIN
	INSERT INTO bench_pg_triggers
		SELECT t.tgname, p.proname, pg_get_triggerdef(t.oid)
		  FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
		 WHERE t.tgrelid = 'sessions'::regclass AND NOT t.tgisinternal;
	FOR r IN SELECT name FROM bench_pg_triggers LOOP
		EXECUTE format('DROP TRIGGER %I ON sessions', r.name);
	END LOOP;
END
$f$;

CREATE FUNCTION bench_pg_reset(config text, nrows int) RETURNS void
LANGUAGE plpgsql SET client_min_messages = warning AS $f$
DECLARE
	r record;
BEGIN
	IF config NOT IN ('bare', 'guarded', 'stream', 'log') THEN
		RAISE EXCEPTION 'unknown configuration %', config;
	END IF;
	FOR r IN SELECT tgname FROM pg_trigger WHERE tgrelid = 'sessions'::regclass AND NOT tgisinternal LOOP
		EXECUTE format('DROP TRIGGER %I ON sessions', r.tgname);
	END LOOP;
	TRUNCATE sessions;
	TRUNCATE hx_event;
	FOR r IN SELECT * FROM bench_pg_triggers LOOP
		IF config = 'guarded' AND r.func <> 'hx_stream' THEN
			EXECUTE r.def;
		ELSIF config = 'stream' AND r.func = 'hx_stream' THEN
			EXECUTE r.def;
		ELSIF config = 'log' AND r.func = 'hx_stream' THEN
			IF right(r.def, 2) <> ''')' THEN
				RAISE EXCEPTION 'unexpected trigger definition: %', r.def;
			END IF;
			EXECUTE left(r.def, -1) || ', ''payload=none'')';
		END IF;
	END LOOP;
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
