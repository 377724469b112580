--
-- security: readers kept apart by the database, role by role.  The table of
-- docs/sessions.sql, then the README's recipe (a test checks that the
-- README shows exactly these statements), then what each role can do.
--
-- (err() is defined in setup.sql)
\i docs/sessions.sql

-- the tables' owner, the agent runtime, and one role per reader
CREATE ROLE app_owner NOLOGIN;
CREATE ROLE agent_runtime LOGIN;
CREATE ROLE readers NOLOGIN;
CREATE ROLE "u-7" LOGIN IN ROLE readers;
CREATE ROLE "u-8" LOGIN IN ROLE readers;
ALTER TABLE sessions OWNER TO app_owner;
GRANT INSERT ON hx_event TO app_owner;
GRANT SELECT, INSERT, UPDATE, DELETE ON sessions TO agent_runtime;
GRANT SELECT ON sessions, hx_event TO readers;

-- a reader reads the sessions whose user_id is its role, which it cannot
-- change: not a setting that any role may SET
ALTER TABLE sessions ENABLE ROW LEVEL SECURITY;
CREATE POLICY runtime_writes ON sessions TO agent_runtime USING (true);
CREATE POLICY reader_reads_own ON sessions FOR SELECT TO readers
    USING (user_id = current_user);

-- and the events of those sessions' streams; the owner writes the log
ALTER TABLE hx_event ENABLE ROW LEVEL SECURITY;
CREATE POLICY owner_writes ON hx_event FOR INSERT TO app_owner WITH CHECK (true);
CREATE POLICY reader_reads_own ON hx_event FOR SELECT TO readers
    USING (stream IN (SELECT 'sessions:' || session_id FROM sessions
                       WHERE user_id = current_user));

-- the runtime writes every session; it needs nothing on the log
SET ROLE agent_runtime;
INSERT INTO sessions (session_id, user_id, state) VALUES
    ('s-7', 'u-7', '{"note": "seven''s"}'),
    ('s-8', 'u-8', '{"note": "eight''s"}');
UPDATE sessions SET state = hx_merge(state, '[{"op": "replace", "path": "/secret", "value": "only eight"}]')
 WHERE session_id = 's-8';
\pset tuples_only on
\pset format unaligned
-- and cannot read it, nor forge an event
SELECT err($$SELECT count(*) FROM hx_event$$);
SELECT err($$INSERT INTO hx_event VALUES ('sessions:s-7', 9, 'STATE_SNAPSHOT', '{}')$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;

-- each reader reads its own session and its stream, and nothing of the
-- other's: every reading function applies the reader's privileges and the
-- policies of the table and of the log
SET ROLE "u-7";
SELECT session_id, state FROM sessions ORDER BY 1;
SELECT stream, seq, state FROM hx_stream_snapshot('sessions', 's-7');
SELECT stream, seq, state FROM hx_stream_snapshot('sessions', 's-8');
SELECT key, stream, seq, state FROM hx_stream_snapshots('sessions', ARRAY['s-7', 's-8']);
SELECT seq, event->>'type' AS type FROM hx_stream_events('sessions:s-7');
SELECT count(*) AS events_of_8 FROM hx_stream_events('sessions:s-8');
SELECT stream, seq, event->>'type' AS type
  FROM hx_stream_events_after(ARRAY['sessions:s-7', 'sessions:s-8'], ARRAY[0, 0]::int8[]);
SELECT * FROM hx_stream_heads(ARRAY['sessions:s-7', 'sessions:s-8']);
SELECT hx_stream_state_at('sessions:s-7', 1);
SELECT hx_stream_since('sessions:s-7') AS since_7, hx_stream_since('sessions:s-8') AS since_8;
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT hx_stream_state_at('sessions:s-8', 2)$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;

-- logged in as u-7: a setting is no way in, nor is another reader's role
SELECT current_user AS admin \gset
\c - "u-7"
SET app.user_id = 'u-8';
SELECT count(*) AS sessions_seen, (SELECT count(*) FROM hx_event) AS events_seen FROM sessions;
\pset tuples_only on
\pset format unaligned
SELECT err($$SET ROLE "u-8"$$);
SELECT err($$SET SESSION AUTHORIZATION "u-8"$$);
\pset tuples_only off
\pset format aligned
\c - :admin

SET ROLE "u-8";
SELECT stream, seq, state FROM hx_stream_snapshot('sessions', 's-8');
SELECT seq, event->'delta' AS delta FROM hx_stream_events('sessions:s-8');
SELECT hx_stream_state_at('sessions:s-8', 2);
SELECT count(*) AS events_of_7 FROM hx_stream_events('sessions:s-7');
RESET ROLE;

-- a role with no grants reads nothing, through any function
CREATE ROLE nobody;
SET ROLE nobody;
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT * FROM hx_stream_snapshot('sessions', 's-7')$$);
SELECT err($$SELECT * FROM hx_stream_snapshots('sessions', ARRAY['s-7'])$$);
SELECT err($$SELECT * FROM hx_stream_events('sessions:s-7')$$);
SELECT err($$SELECT * FROM hx_stream_events_after(ARRAY['sessions:s-7'], ARRAY[0]::int8[])$$);
SELECT err($$SELECT * FROM hx_stream_heads(ARRAY['sessions:s-7'])$$);
SELECT err($$SELECT hx_stream_state_at('sessions:s-7', 1)$$);
SELECT err($$SELECT hx_stream_since('sessions:s-7')$$);
-- nor learns which tables stream, how the log is laid out, or maintains
-- anything: those functions are for the roles an administrator grants
SELECT err($$SELECT count(*) FROM hx_stream_tables()$$);
SELECT err($$SELECT count(*) FROM hx_event_ring()$$);
SELECT err($$SELECT hx_stream_trim('1 day')$$);
SELECT err($$SELECT hx_step_trim('1 day')$$);
SELECT err($$SELECT hx_stream_publication('mine')$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;
-- every other function of the extension is callable by every role; these
-- are the ones that are not
SELECT p.oid::regprocedure AS not_for_public
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'hxstate')
   AND NOT has_function_privilege('nobody', p.oid, 'EXECUTE')
 ORDER BY p.oid::regprocedure::text;

-- the readers are not the partitions' readers: a grant on the log is not
-- one on its partitions, which bypass its policies
SET ROLE "u-7";
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT count(*) FROM hx_event_0$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;

-- a reused key: the row deleted and inserted again for another reader
-- continues its stream; hx_stream_since says where the new row began, and
-- the old row's events stay readable to whoever may read the stream (keys
-- are not to be given to another reader)
SET ROLE agent_runtime;
DELETE FROM sessions WHERE session_id = 's-8';
INSERT INTO sessions (session_id, user_id, state) VALUES ('s-8', 'u-7', '{"note": "seven''s now"}');
RESET ROLE;
SET ROLE "u-7";
SELECT hx_stream_since('sessions:s-8') AS since, (SELECT count(*) FROM hx_stream_events('sessions:s-8')) AS events;
RESET ROLE;

ALTER TABLE hx_event DISABLE ROW LEVEL SECURITY;
DROP POLICY owner_writes ON hx_event;
DROP POLICY reader_reads_own ON hx_event;
DROP TABLE sessions;
REVOKE ALL ON hx_event FROM app_owner, readers;
DROP ROLE app_owner, agent_runtime, readers, "u-7", "u-8", nobody;
DELETE FROM hx_event;
