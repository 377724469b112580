--
-- searchpath: every name that hxstate's SQL uses is qualified, so a schema
-- ahead of pg_catalog in the caller's search_path, whose aggregates,
-- functions and operators bear the names of pg_catalog's, changes nothing
-- (before 0.6.0, hx_stream_state_at ran evil.max as its caller)
--
-- (err() is defined in setup.sql)
CREATE SCHEMA evil;
CREATE FUNCTION evil.trap(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS
	$$BEGIN RAISE EXCEPTION 'evil: an aggregate of schema evil ran as %', current_user; END$$;
CREATE FUNCTION evil.trap(bigint) RETURNS bigint LANGUAGE plpgsql AS
	$$BEGIN RAISE EXCEPTION 'evil: count of schema evil ran as %', current_user; END$$;
CREATE AGGREGATE evil.max(bigint) (sfunc = evil.trap, stype = bigint);
CREATE AGGREGATE evil.min(bigint) (sfunc = evil.trap, stype = bigint);
CREATE AGGREGATE evil.count(*) (sfunc = evil.trap, stype = bigint);
CREATE FUNCTION evil.same(text, text) RETURNS boolean LANGUAGE plpgsql AS
	$$BEGIN RAISE EXCEPTION 'evil: an operator of schema evil ran as %', current_user; END$$;
CREATE FUNCTION evil.same(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS
	$$BEGIN RAISE EXCEPTION 'evil: an operator of schema evil ran as %', current_user; END$$;
CREATE FUNCTION evil.member(jsonb, text) RETURNS text LANGUAGE plpgsql AS
	$$BEGIN RAISE EXCEPTION 'evil: ->> of schema evil ran as %', current_user; END$$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.same);
CREATE OPERATOR evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.same);
CREATE OPERATOR evil.< (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.same);
CREATE OPERATOR evil.<= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.same);
CREATE OPERATOR evil.> (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.same);
CREATE OPERATOR evil.>= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.same);
CREATE OPERATOR evil.->> (LEFTARG = jsonb, RIGHTARG = text, FUNCTION = evil.member);
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql AS
	$$BEGIN RAISE EXCEPTION 'evil: now() of schema evil ran as %', current_user; END$$;
CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS
	$$BEGIN RAISE EXCEPTION 'evil: clock_timestamp() of schema evil ran as %', current_user; END$$;
CREATE FUNCTION evil.unnest(anyarray) RETURNS SETOF anyelement LANGUAGE plpgsql AS
	$$BEGIN RAISE EXCEPTION 'evil: unnest of schema evil ran as %', current_user; END$$;

CREATE TABLE papers (id int PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}', phase text,
	project text);
CREATE TRIGGER papers_stream AFTER INSERT OR UPDATE OR DELETE ON papers
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
CREATE CONSTRAINT TRIGGER papers_phase AFTER INSERT OR UPDATE ON papers
	FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('agent_session');
CREATE CONSTRAINT TRIGGER papers_project AFTER INSERT OR UPDATE ON papers
	FOR EACH ROW EXECUTE FUNCTION hx_lock_once('project');

-- the caller's search_path puts evil first: every call below would run a
-- function of evil if any name hxstate uses were not qualified
SET search_path = evil, pg_catalog, public;
INSERT INTO papers VALUES (1, '{"n": 1}', 'chatting', 'p');
UPDATE papers SET state = '{"n": 2}', phase = hx_next_phase('agent_session', phase, 'start_build')
 WHERE id OPERATOR(pg_catalog.=) 1;
SELECT hx_stage('papers:1', 'step-1', 'call-1', '[{"op": "increment", "path": "/n", "by": 1}]', 1);
UPDATE papers SET state = hx_merge(state, hx_promote('papers:1', 'step-1')) WHERE id OPERATOR(pg_catalog.=) 1;
SELECT state FROM papers;
SELECT stream, seq, state FROM hx_stream_snapshot('papers', '1');
SELECT key, stream, seq FROM hx_stream_snapshots('papers', ARRAY['1', '2']);
SELECT seq, event OPERATOR(pg_catalog.->>) 'type' AS type FROM hx_stream_events('papers:1');
SELECT stream, seq FROM hx_stream_events_after(ARRAY['papers:1'], ARRAY[1]::int8[]);
SELECT * FROM hx_stream_heads(ARRAY['papers:1']);
SELECT hx_stream_state_at('papers:1', 2) AS at_2, hx_stream_state_at('papers:1', 3) AS at_3;
SELECT hx_stream_since('papers:1');
SELECT source, prefix FROM hx_stream_tables();
SELECT hx_stream_channel('papers:1');
SELECT hx_stream_trim('1 day') AS trimmed, hx_step_trim('1 day') AS steps_trimmed;
SELECT hx_machine_dot('agent_session') IS NOT NULL AS dot;
DELETE FROM papers WHERE id OPERATOR(pg_catalog.=) 2;
RESET search_path;

-- the guards' errors are theirs, not evil's (err() itself runs with the
-- usual search_path, the statement with evil's)
CREATE FUNCTION as_evil(stmt text) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM set_config('search_path', 'evil, pg_catalog, public', true);
	EXECUTE stmt;
END
$f$;
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT as_evil('UPDATE papers SET project = ''q''')$$);
SELECT err($$SELECT as_evil('UPDATE papers SET phase = ''done''')$$);
SELECT err($$SELECT as_evil('INSERT INTO papers VALUES (2, ''{}'', ''done'')')$$);
\pset tuples_only off
\pset format aligned
SET search_path = evil, pg_catalog, public;
DELETE FROM papers;
RESET search_path;
DROP FUNCTION as_evil(text);

DROP TABLE papers;
DROP SCHEMA evil CASCADE;
DELETE FROM hx_event;
DELETE FROM hx_step;
