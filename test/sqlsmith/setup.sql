-- test/sqlsmith/setup.sql: the database SQLsmith runs against.
--
-- test/sqlsmith/run loads it as a superuser into a fresh database of a
-- throwaway cluster:
--
--   psql -v ON_ERROR_STOP=1 -f test/sqlsmith/setup.sql
--
-- What it makes:
--   - hxsmith_owner (NOLOGIN) owns the application's tables, as in
--     production; hx_stream writes the event log with its privileges, so it
--     gets INSERT on hx_event and nothing more;
--   - hxsmith_app (LOGIN, not superuser, owns nothing) is the role SQLsmith
--     connects as: SELECT, INSERT, UPDATE, DELETE on the application's
--     tables, SELECT on hx_event, SELECT on smith_inputs and the views
--     smith_*; EXECUTE on hxstate's functions is PUBLIC's, as the
--     extension leaves it;
--   - the README's sessions table with its four triggers (docs/sessions.sql),
--     and rows whose states were written with hx_merge, by hxsmith_app,
--     through the triggers: their events are in hx_event;
--   - two user state machines, "ticket" and "deploy", and a table guarded
--     by each (tickets: member locks and slots on a jsonb column, a stream
--     with arrays=index, payload=ref and its own stream name, a NULL-able
--     state; deploys: an enum phase column, arrays=replace, payload=none);
--   - smith_inputs: documents, patches, op lists, array modes, machines,
--     phases, events and stream names, valid and broken, and a function
--     without arguments returning each of them (smith_doc_<id>() ...);
--   - views that call hxstate's functions on every row they read
--     (smith_tails, smith_patched, smith_merged, smith_steps,
--     smith_machines, smith_streams);
--   - hxsmith_catalog.pg_proc, the function list SQLsmith reads, with
--     hxstate's functions weighted.
-- SQLsmith writes no literals but integers and booleans (every other
-- constant is a typed NULL, which a STRICT function never sees), and the
-- few rows a random query reads are mostly filtered away: the inputs, the
-- functions and the views are how hxstate's functions get real arguments.
-- Every statement SQLsmith sends runs in a transaction it rolls back, so
-- this state is what every one of its queries sees.

\set ON_ERROR_STOP 1
SET client_min_messages = warning;

CREATE EXTENSION hxstate;

CREATE ROLE hxsmith_owner NOLOGIN;
CREATE ROLE hxsmith_app LOGIN;
GRANT CREATE, USAGE ON SCHEMA public TO hxsmith_owner;
GRANT USAGE ON SCHEMA public TO hxsmith_app;
-- hx_stream writes the log as the streamed table's owner
GRANT INSERT ON hx_event TO hxsmith_owner;
GRANT SELECT ON hx_event TO hxsmith_app;

-- Two user machines beside the shipped agent_session
INSERT INTO hx_machine VALUES ('ticket', 'open'), ('deploy', 'queued');
INSERT INTO hx_transition VALUES
	('ticket', 'open', 'assign', 'assigned'),
	('ticket', 'assigned', 'unassign', 'open'),
	('ticket', 'assigned', 'resolve', 'closed'),
	('ticket', 'closed', 'reopen', 'open'),
	('deploy', 'queued', 'start', 'running'),
	('deploy', 'running', 'succeed', 'succeeded'),
	('deploy', 'running', 'fail', 'failed'),
	('deploy', 'failed', 'retry', 'queued'),
	('deploy', 'succeeded', 'rollback', 'queued');

-- The application's tables, made and owned by hxsmith_owner
SET ROLE hxsmith_owner;

\ir ../../docs/sessions.sql

CREATE TABLE tickets (
	id     bigint PRIMARY KEY,
	status text NOT NULL DEFAULT 'open',
	meta   jsonb NOT NULL DEFAULT '{}',
	body   jsonb                               -- NULL is JSON null in events
);
CREATE CONSTRAINT TRIGGER ticket_machine AFTER INSERT OR UPDATE ON tickets
	FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('ticket', 'status');
CREATE CONSTRAINT TRIGGER owner_locked AFTER INSERT OR UPDATE ON tickets
	FOR EACH ROW EXECUTE FUNCTION hx_lock_once('meta:/owner', 'meta:/a~1b/0');
CREATE TRIGGER lease_slot BEFORE INSERT OR UPDATE ON tickets
	FOR EACH ROW EXECUTE FUNCTION hx_slot_guard('meta:/lease', 'meta:/m~0n');
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON tickets
	FOR EACH ROW EXECUTE FUNCTION hx_stream('body', 'id', 'arrays=index', 'payload=ref', 'stream=tk');

CREATE TYPE deploy_state AS ENUM ('queued', 'running', 'succeeded', 'failed');
CREATE TABLE deploys (
	name  text PRIMARY KEY,
	state deploy_state NOT NULL DEFAULT 'queued',
	lease jsonb,
	log   jsonb NOT NULL DEFAULT '{}'
);
CREATE CONSTRAINT TRIGGER deploy_machine AFTER INSERT OR UPDATE ON deploys
	FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('deploy', 'state');
CREATE CONSTRAINT TRIGGER one_lease AFTER INSERT OR UPDATE ON deploys
	FOR EACH ROW EXECUTE FUNCTION hx_slot_guard('lease');
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON deploys
	FOR EACH ROW EXECUTE FUNCTION hx_stream('log', 'name', 'arrays=replace', 'payload=none');

CREATE TABLE smith_inputs (
	id      int PRIMARY KEY,
	doc     jsonb,            -- documents and states
	patch   jsonb,            -- RFC 6902 patches for hx_patch
	writes  jsonb,            -- op lists and merge patches for hx_merge
	arrays  text,             -- hx_diff's third argument
	machine text,
	phase   text,
	event   text,
	stream  text,             -- stream names for hx_stream_channel, hx_stream_events
	source  regclass,         -- tables for hx_stream_snapshot, with its key
	key     text,
	age     interval,         -- for hx_stream_trim
	patch_ok  boolean,        -- hx_patch(doc, patch) succeeds
	writes_ok boolean         -- hx_merge(doc, writes) succeeds
);

-- Relations computed by hxstate's functions.  SQLsmith rarely evaluates a
-- function it calls on real data (random predicates, samples and NULL
-- arguments leave few rows); a query that reads these views runs
-- hxstate's functions on every row it reads, inside whatever joins,
-- subqueries, window functions and writes SQLsmith wraps around them.
-- Each is built so that it raises no error of its own.
--
-- hx_stream_events returns a set, which SQLsmith never calls
CREATE VIEW smith_tails AS
SELECT i.id, i.stream, e.seq, e.event
  FROM smith_inputs i CROSS JOIN LATERAL hx_stream_events(i.stream, i.id % 4, 1 + i.id % 5) e;
-- the inputs' patches and op lists that apply, applied
CREATE VIEW smith_patched AS
SELECT i.id, i.doc, i.patch, hx_patch(i.doc, i.patch) AS result
  FROM smith_inputs i WHERE i.patch_ok;
CREATE VIEW smith_merged AS
SELECT i.id, i.doc, i.writes, hx_merge(i.doc, i.writes) AS result
  FROM smith_inputs i WHERE i.writes_ok;
-- a step of two tools' writes on every session, its delta in each array
-- mode, and the delta applied back
CREATE VIEW smith_steps AS
SELECT s.session_id, m.mode, s.state, n.next_state, d.delta,
	hx_patch(s.state, d.delta) AS patched,
	hx_patch(s.state, d.delta) = n.next_state AS round_trip
  FROM sessions s
	CROSS JOIN (VALUES ('append'), ('replace'), ('index')) m(mode)
	CROSS JOIN LATERAL (SELECT hx_merge(s.state, '[
		{"op": "append", "path": "/todos", "items": [{"id": "t9", "text": "smith"}]},
		{"op": "increment", "path": "/stats/tool_calls", "by": 1},
		{"op": "union", "path": "/tags", "items": ["smith", "x"]},
		{"op": "upsert", "path": "/messages", "items": [{"id": "m1", "text": "smith"}]},
		{"op": "merge", "path": "/plan", "value": {"draft": null, "by": "smith"}}]') AS next_state) n
	CROSS JOIN LATERAL (SELECT hx_diff(s.state, n.next_state, m.mode) AS delta) d;
-- every edge of every machine, as hx_next_phase follows it
CREATE VIEW smith_machines AS
SELECT t.machine, t.from_phase, t.event, hx_next_phase(t.machine, t.from_phase, t.event) AS to_phase,
	hx_machine_dot(t.machine) AS dot
  FROM hx_transition t;
-- every session's stream: its snapshot and its channel
CREATE VIEW smith_streams AS
SELECT s.session_id, x.stream, x.seq, x.state, hx_stream_channel(x.stream) AS channel
  FROM sessions s CROSS JOIN LATERAL hx_stream_snapshot('sessions', s.session_id) x;

GRANT SELECT, INSERT, UPDATE, DELETE ON sessions, tickets, deploys TO hxsmith_app;
GRANT SELECT ON smith_inputs, smith_tails, smith_patched, smith_merged, smith_steps,
	smith_machines, smith_streams TO hxsmith_app;

RESET ROLE;

-- ---------------------------------------------------------------------
-- Inputs
-- ---------------------------------------------------------------------

INSERT INTO smith_inputs (id, doc, patch, writes, arrays, machine, phase, event, stream) VALUES
(1, '{}', '[]', '[]', 'append', 'agent_session', 'chatting', 'start_build', 'sessions:s-1'),
(2, '{"a": 1, "b": [1, 2, 3], "c": {"d": "e"}}',
	'[{"op": "add", "path": "/b/-", "value": 4}, {"op": "test", "path": "/a", "value": 1.0}]',
	'[{"op": "append", "path": "/b", "items": [4, 5]}, {"op": "increment", "path": "/a", "by": 1}]',
	'replace', 'agent_session', 'building', 'todo_done_build', 'sessions:s-2'),
(3, '[1, [2, [3, [4]]]]',
	'[{"op": "move", "from": "/1/1", "path": "/0"}, {"op": "copy", "from": "/0", "path": "/-"}]',
	'[{"op": "union", "path": "/tags", "items": [1, 1.0, 1e0, {"x": 1}]}]',
	'index', 'agent_session', 'verifying', 'publish', 'tk:1'),
(4, '"scalar"', '[{"op": "replace", "path": "", "value": {"whole": true}}]',
	'{"temp": null, "values": {"key1": "value1"}}',
	'bogus', 'ticket', 'open', 'assign', 'deploys:web'),
(5, 'null', '[{"op": "remove", "path": ""}]',
	'[{"op": "delete", "path": ""}]',
	'', 'deploy', 'queued', 'start', ''),
(6, '{"a/b": {"m~n": [0]}, "": {"": ""}}',
	'[{"op": "test", "path": "/a~1b/m~0n/0", "value": 0}, {"op": "add", "path": "//", "value": 1}]',
	'[{"op": "upsert", "path": "/msgs", "items": [{"id": "m1", "t": 1}, {"id": "m1", "t": 2}]}]',
	'APPEND', 'nope', 'nowhere', 'nothing', 'sessions:' || repeat('k', 80)),
(7, '{"n": 9007199254740993, "f": 1e308, "g": -0.0, "h": 1e-300}',
	'[{"op": "test", "path": "/n", "value": 9007199254740993.0}]',
	'[{"op": "increment", "path": "/n", "by": 1e308}, {"op": "increment", "path": "/g", "by": -0}]',
	'index', 'ticket', 'closed', 'reopen', repeat('é', 40)),
(8, '{"x": [1, 2]}',
	'[{"op": "add", "path": "/x/01", "value": 0}]',
	'[{"op": "add", "path": "/x/-", "value": 3}, {"op": "remove", "path": "/missing"}]',
	'append', 'deploy', 'running', 'fail', 'sessions:s-1'),
(9, '{"x": [1, 2]}',
	'[{"op": "add", "path": "/x/3", "value": 0}]',
	'[{"op": "move", "from": "/x", "path": "/x/0"}]',
	'replace', 'agent_session', 'done', 'open_existing', 'sessions:nope'),
(10, '{"x": {"y": 1}}',
	'[{"op": "move", "from": "/x", "path": "/x/y"}]',
	'[{"op": "merge", "path": "/x", "value": {"y": null, "z": [1]}}]',
	'index', 'agent_session', 'chatting', 'publish', 'tk:2'),
(11, '{"a": 1}',
	'[{"op": "remove", "path": "/b"}]',
	'[{"op": "test", "path": "/a", "value": 2}]',
	'append', 'ticket', 'assigned', 'resolve', 'tk:999'),
(12, '{"a": 1}',
	'[{"op": "bogus", "path": "/a"}, 1, null]',
	'[{"op": "increment", "path": "/a", "by": "1"}]',
	'replace', 'deploy', 'failed', 'retry', 'sessions:s-3'),
(13, '{"a": 1}',
	'{"op": "add", "path": "/a", "value": 2}',
	'[{"op": "append", "path": "/a", "items": 1}]',
	'index', 'deploy', 'succeeded', 'rollback', 'deploys:api'),
(14, '{"a": 1}',
	'[{"op": "add", "path": "a", "value": 2}, {"op": "add", "path": "/~2", "value": 3}]',
	'[{"op": "replace", "path": "/a/b/c", "value": 1}]',
	'append', 'agent_session', 'building', 'cancel', 'sessions:s-4'),
(15, '{"a": 1}',
	'[{"op": "copy", "path": "/b"}, {"op": "move", "path": "/c"}, {"op": "add", "value": 1}]',
	'[{"op": "upsert", "path": "/u", "items": [1, 2]}, {"op": "upsert", "path": "/v", "key": 5, "items": [{"id": 1}]}]',
	'replace', 'agent_session', '', '', 'sessions:'),
(16, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
(17, '{"list": [{"id": 1}, {"id": 2}, {"id": 3}]}',
	'[{"op": "remove", "path": "/list/0"}, {"op": "replace", "path": "/list/-", "value": 0}]',
	'[{"op": "upsert", "path": "/list", "key": "id", "items": [{"id": 2, "v": "x"}, {"id": 4}]}]',
	'index', 'ticket', 'open', 'unassign', 'tk:3'),
(18, '{"k": "v"}',
	'[{"op": "test", "path": "", "value": {"k": "v"}}, {"op": "test", "path": "/k", "value": "w"}]',
	'[{"op": "replace", "path": "", "value": null}, {"op": "append", "path": "", "items": [1]}]',
	'append', 'deploy', 'queued', 'succeed', 'deploys:db');

-- Big, deep and wide values
INSERT INTO smith_inputs (id, doc, patch, writes, arrays, machine, phase, event, stream)
SELECT 100, jsonb_build_object('todos', jsonb_agg(jsonb_build_object('id', 't' || i, 'text', repeat('x', i % 50), 'n', i))),
	jsonb_agg(jsonb_build_object('op', 'add', 'path', '/todos/-', 'value', i)),
	jsonb_agg(jsonb_build_object('op', 'append', 'path', '/log/' || (i % 7), 'items', jsonb_build_array(i))),
	'index', 'agent_session', 'chatting', 'start_build', 'sessions:big'
  FROM generate_series(1, 2000) i;
-- 3,000 levels of arrays, and a pointer down 2,000 of them
INSERT INTO smith_inputs (id, doc, patch, writes, arrays)
VALUES (101, (repeat('[', 3000) || repeat(']', 3000))::jsonb,
	jsonb_build_array(jsonb_build_object('op', 'add', 'path', repeat('/0', 2000), 'value', 1)),
	jsonb_build_array(jsonb_build_object('op', 'replace', 'path', repeat('/a', 2000), 'value', 1)),
	'index');
INSERT INTO smith_inputs (id, doc, patch, writes, arrays)
VALUES (102, (repeat('{"a": ', 1500) || '1' || repeat('}', 1500))::jsonb,
	jsonb_build_array(jsonb_build_object('op', 'remove', 'path', repeat('/a', 1500))),
	jsonb_build_array(jsonb_build_object('op', 'increment', 'path', repeat('/a', 1500), 'by', 1)),
	'replace');
-- 5,000 ops in one patch, half of them wide objects
INSERT INTO smith_inputs (id, doc, patch, writes)
SELECT 103, jsonb_object_agg('k' || i, i),
	jsonb_agg(jsonb_build_object('op', CASE WHEN i % 2 = 0 THEN 'remove' ELSE 'replace' END,
		'path', '/k' || i, 'value', i)),
	jsonb_agg(jsonb_build_object('op', 'delete', 'path', '/k' || i))
  FROM generate_series(1, 5000) i;

-- Tables, keys and ages for the stream readers
UPDATE smith_inputs SET
	source = (ARRAY['sessions', 'tickets', 'deploys', 'hx_event', 'smith_inputs', 'hx_machine'])[1 + id % 6]::regclass,
	key = (ARRAY['s-1', '7', 'web', 's-39b', 'nope', '', 's-11', '3'])[1 + id % 8],
	age = (ARRAY['0', '-1 day', '1 hour', '7 days', '1000 years', '-1000 years'])[1 + id % 6]::interval
 WHERE id <> 16;

-- Which inputs apply: hxstate's documented errors mean no; anything else
-- (an internal error) stops the setup
DO $$
DECLARE
	r record;
BEGIN
	FOR r IN SELECT id FROM smith_inputs LOOP
		BEGIN
			UPDATE smith_inputs SET patch_ok = hx_patch(doc, patch) IS NOT NULL WHERE id = r.id;
		EXCEPTION WHEN invalid_parameter_value OR invalid_text_representation
			OR invalid_sql_json_subscript OR sql_json_member_not_found
			OR statement_too_complex OR program_limit_exceeded
			OR SQLSTATE 'XH001' OR SQLSTATE 'XH002' THEN
			UPDATE smith_inputs SET patch_ok = false WHERE id = r.id;
		END;
		BEGIN
			UPDATE smith_inputs SET writes_ok = hx_merge(doc, writes) IS NOT NULL WHERE id = r.id;
		EXCEPTION WHEN invalid_parameter_value OR invalid_text_representation
			OR invalid_sql_json_subscript OR sql_json_member_not_found
			OR statement_too_complex OR program_limit_exceeded
			OR SQLSTATE 'XH001' OR SQLSTATE 'XH002' THEN
			UPDATE smith_inputs SET writes_ok = false WHERE id = r.id;
		END;
	END LOOP;
END
$$;

-- SQLsmith's only constants are integers, booleans and typed NULLs; a
-- jsonb or text value it does not take from a column comes, two times in
-- three, from a function without arguments, and pg_catalog has two such
-- for jsonb.  These give it the inputs above: smith_doc_<id>(),
-- smith_patch_<id>(), smith_writes_<id>() (jsonb), and smith_text_<n>()
-- for each distinct array mode, machine, phase, event, stream and key.
DO $$
DECLARE
	r record;
	n int := 0;
BEGIN
	FOR r IN SELECT id, c, v FROM smith_inputs,
			LATERAL (VALUES ('doc', doc), ('patch', patch), ('writes', writes)) x(c, v)
		  WHERE v IS NOT NULL ORDER BY id, c LOOP
		EXECUTE format('CREATE FUNCTION public.smith_%s_%s() RETURNS jsonb LANGUAGE sql IMMUTABLE RETURN %L::jsonb',
			r.c, r.id, r.v);
	END LOOP;
	FOR r IN SELECT DISTINCT v FROM smith_inputs,
			LATERAL (VALUES (arrays), (machine), (phase), (event), (stream), (key)) x(v)
		  WHERE v IS NOT NULL ORDER BY v LOOP
		n := n + 1;
		EXECUTE format('CREATE FUNCTION public.smith_text_%s() RETURNS text LANGUAGE sql IMMUTABLE RETURN %L',
			n, r.v);
	END LOOP;
END
$$;

-- ---------------------------------------------------------------------
-- Rows, written by the application role through the triggers
-- ---------------------------------------------------------------------

SET ROLE hxsmith_app;

INSERT INTO sessions (session_id, user_id)
SELECT 's-' || i, 'u-' || (i % 5) FROM generate_series(1, 40) i;

UPDATE sessions SET project_id = 'prj_' || md5(session_id) WHERE session_id::text ~ '[02468]$';
UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'start_build')
 WHERE session_id::text ~ '[1-7]$';
UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'todo_done_build')
 WHERE phase = 'building' AND session_id ~ '[2-6]$';
UPDATE sessions SET phase = hx_next_phase('agent_session', phase, 'publish')
 WHERE phase = 'verifying' AND session_id ~ '[34]$';
UPDATE sessions SET pending_tool = jsonb_build_object('id', 'toolu_' || session_id, 'name', 'plan_step')
 WHERE session_id ~ '[05]$';

-- Five rounds of two tools' writes each
DO $$
BEGIN
	FOR r IN 1..5 LOOP
		UPDATE sessions SET state = hx_merge(state, jsonb_build_array(
			jsonb_build_object('op', 'append', 'path', '/todos',
				'items', jsonb_build_array(jsonb_build_object('id', 't' || r, 'text', 'step ' || r))),
			jsonb_build_object('op', 'increment', 'path', '/stats/tool_calls', 'by', 1),
			jsonb_build_object('op', 'union', 'path', '/tags', 'items', jsonb_build_array('r' || (r % 3), 'x')),
			jsonb_build_object('op', 'upsert', 'path', '/messages',
				'items', jsonb_build_array(jsonb_build_object('id', 'm' || (r % 2), 'text', 'round ' || r)))));
		UPDATE sessions SET state = hx_merge(state, jsonb_build_array(
			jsonb_build_object('op', 'replace', 'path', '/last_tool', 'value', 'search'),
			jsonb_build_object('op', 'merge', 'path', '/plan',
				'value', jsonb_build_object('version', r, 'draft', CASE WHEN r % 2 = 0 THEN NULL ELSE 'yes' END)),
			jsonb_build_object('op', 'add', 'path', '/notes/-', 'value', r),
			jsonb_build_object('op', 'increment', 'path', '/stats/tokens', 'by', 0.25 * r)))
		 WHERE session_id ~ '[13579]$';
	END LOOP;
END
$$;
-- a merge patch object, a state big enough to be compressed and a delta
-- over NOTIFY's 8,000 bytes, keys that need escaping
UPDATE sessions SET state = hx_merge(state, '{"temp": null, "values": {"key1": "value1"}, "a/b": {"m~n": ""}}')
 WHERE session_id IN ('s-1', 's-2');
UPDATE sessions SET state = hx_merge(state, (SELECT jsonb_build_array(jsonb_build_object(
		'op', 'append', 'path', '/history', 'items', jsonb_agg(repeat(md5(i::text), 4)))) FROM generate_series(1, 600) i))
 WHERE session_id = 's-11';
UPDATE sessions SET pending_tool = NULL WHERE session_id = 's-10';
-- a stream that ends, one whose key changes
DELETE FROM sessions WHERE session_id = 's-40';
UPDATE sessions SET session_id = 's-39b' WHERE session_id = 's-39';

INSERT INTO tickets (id, meta, body)
SELECT i, CASE WHEN i % 2 = 0 THEN jsonb_build_object('owner', 'u-' || i) ELSE '{}' END,
	CASE WHEN i % 4 = 3 THEN NULL ELSE jsonb_build_object('title', 'ticket ' || i, 'comments', '[]'::jsonb) END
  FROM generate_series(1, 12) i;
UPDATE tickets SET status = hx_next_phase('ticket', status, 'assign'),
	meta = meta || '{"lease": "w1", "a/b": ["x"]}' WHERE id % 3 = 0;
UPDATE tickets SET body = hx_merge(coalesce(body, '{}'), '[{"op": "append", "path": "/comments", "items": ["seen"]},
	{"op": "replace", "path": "/comments/0", "value": "first"}]') WHERE id <= 6;
UPDATE tickets SET status = hx_next_phase('ticket', status, 'resolve'), meta = meta - 'lease' WHERE id = 6;
DELETE FROM tickets WHERE id = 12;

INSERT INTO deploys (name) VALUES ('web'), ('api'), ('db'), ('worker');
UPDATE deploys SET state = hx_next_phase('deploy', state::text, 'start')::deploy_state,
	lease = '{"holder": "ci"}', log = hx_merge(log, '[{"op": "append", "path": "/lines", "items": ["started"]}]')
 WHERE name <> 'db';
UPDATE deploys SET state = 'failed', lease = NULL,
	log = hx_merge(log, '[{"op": "append", "path": "/lines", "items": ["failed"]}]') WHERE name = 'api';

RESET ROLE;

-- ---------------------------------------------------------------------
-- Weighting hxstate's functions
-- ---------------------------------------------------------------------
-- SQLsmith picks each function it calls uniformly among the ~3,000 that
-- it reads from pg_proc (unqualified, so through the search_path), and
-- two times in three among the parameterless ones only: hxstate's
-- functions would be in about one query of 500.  The run connects with
-- search_path = hxsmith_catalog, pg_catalog, public, so that SQLsmith
-- reads this view instead: every function once, as in pg_catalog, and
-- each of hxstate's callable functions :weight times (the copies under
-- oids no real object has: the real one plus k * 2^22; SQLsmith reads a
-- function's argument types back by that oid).  Generated queries name
-- every function by its schema, so the search_path changes nothing else.
-- A materialized view, because information_schema.tables, where SQLsmith
-- finds the relations it queries, does not list those.
\if :{?weight}
\else
	\set weight 200
\endif
CREATE SCHEMA hxsmith_catalog;
CREATE MATERIALIZED VIEW hxsmith_catalog.pg_proc AS
SELECT p.oid, p.proname, p.pronamespace, p.prorettype, p.proretset, p.prokind, p.proargtypes
  FROM pg_catalog.pg_proc p
UNION ALL
SELECT oid(p.oid::bigint + k * 4194304), p.proname, p.pronamespace, p.prorettype,
	p.proretset, p.prokind, p.proargtypes
  FROM pg_catalog.pg_proc p
	CROSS JOIN generate_series(1::bigint, :weight - 1) k
 WHERE p.prorettype <> 'pg_catalog.trigger'::pg_catalog.regtype
   AND EXISTS (SELECT FROM pg_catalog.pg_depend d
		WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid
		  AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
		  AND d.refobjid = (SELECT x.oid FROM pg_catalog.pg_extension x WHERE x.extname = 'hxstate')
		  AND d.deptype = 'e');
GRANT USAGE ON SCHEMA hxsmith_catalog TO hxsmith_app;
GRANT SELECT ON hxsmith_catalog.pg_proc TO hxsmith_app;

ANALYZE;

-- The fixture's own checks: events were logged for all three tables, the
-- views raise no error and the deltas apply back, and the role SQLsmith
-- connects as is an application's
DO $$
DECLARE
	n bigint;
BEGIN
	SELECT count(DISTINCT split_part(stream, ':', 1)) INTO n FROM hx_event;
	IF n <> 3 THEN
		RAISE EXCEPTION 'expected events of 3 tables in hx_event, found %', n;
	END IF;
	SELECT count(*) INTO n FROM smith_steps WHERE round_trip IS NOT TRUE;
	IF n <> 0 THEN
		RAISE EXCEPTION '% deltas in smith_steps do not apply back', n;
	END IF;
	PERFORM count(result) FROM smith_patched;
	PERFORM count(result) FROM smith_merged;
	PERFORM count(to_phase), count(dot) FROM smith_machines;
	PERFORM count(state), count(channel) FROM smith_streams;
	PERFORM count(event) FROM smith_tails;
	IF (SELECT rolsuper OR rolcreaterole OR rolcreatedb OR rolbypassrls OR NOT rolcanlogin
		  FROM pg_roles WHERE rolname = 'hxsmith_app') THEN
		RAISE EXCEPTION 'hxsmith_app is not a plain application role';
	END IF;
	IF EXISTS (SELECT FROM pg_class WHERE relowner = 'hxsmith_app'::regrole)
	   OR EXISTS (SELECT FROM pg_proc WHERE proowner = 'hxsmith_app'::regrole)
	   OR EXISTS (SELECT FROM pg_type WHERE typowner = 'hxsmith_app'::regrole)
	   OR EXISTS (SELECT FROM pg_namespace WHERE nspowner = 'hxsmith_app'::regrole) THEN
		RAISE EXCEPTION 'hxsmith_app owns objects';
	END IF;
END
$$;
