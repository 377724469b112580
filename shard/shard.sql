-- shard/shard.sql: what each shard of a sharded hxstate holds beside the
-- extension and the sessions table (docs/sessions.sql): the functions the
-- router (shard/router.sql) calls by a session's key, and the fence and
-- the copy of a session moving between shards.  Load it, as a superuser,
-- into each shard's database after hxstate and docs/sessions.sql:
--
--   psql -d app -c 'CREATE EXTENSION hxstate' -f docs/sessions.sql -f shard/shard.sql
--
-- docs/sharding.md is the manual.  Everything here is in schema hxshard;
-- the extension and the sessions table are in schema public.
--
-- Every function runs with its caller's privileges (none is SECURITY
-- DEFINER), with search_path pg_catalog, pg_temp and every other name
-- qualified, so that no object another role creates is called instead.
-- What a role needs (docs/sharding.md, "Roles and privileges"): the
-- application's roles what the same SQL needs without the sharding; the
-- mover EXECUTE on the move's functions (revoked from PUBLIC below),
-- SELECT, INSERT, UPDATE and DELETE on hxshard.fence, public.sessions,
-- public.hx_event, public.hx_step and public.hx_step_call, and SET on the
-- parameter session_replication_role (the copy's functions SET it to
-- replica).  An application's role can read the fence (its trigger reads
-- it as the writer), never write it.
--
-- The same functions answer on a shard directly, for an application that
-- talks to one server: hxshard.merge(key, writes) on a shard does what
-- hxshard.merge(key, writes) on the router does, without the routing.
--
-- A session that moves away is fenced first (hxshard.fence, a row of
-- hxshard.fence): from then on every write of it here fails with XH501
-- (moving) or XH502 (moved: its route changed), which the router retries
-- on the session's new route; a session being copied here is fenced as
-- incoming (XH501) until its route switches here.  The fence holds
-- whatever SQL writes the row, through a trigger on the sessions table,
-- and its stage calls through hxshard.stage.
--
-- SQLSTATEs: XH501 the session is moving to another shard, or being
-- copied here (retry); XH502 it has moved to another shard (retry: route
-- anew); XH503 a move of the session is already under way here; XH504
-- the session lives on this shard (a copy into it is refused); P0002 no
-- such session; 22004 a NULL writes, event or step; 55000 a copy that is
-- not whole (the log's head differs), or not prepared; 2202E a page of a
-- copy whose arrays differ in length.

CREATE SCHEMA hxshard;
COMMENT ON SCHEMA hxshard IS 'hxstate sharding: the shard side (shard/shard.sql)';
GRANT USAGE ON SCHEMA hxshard TO PUBLIC;

-- The sessions fenced here: moving (being copied to shard; writes wait
-- for the move), moved (their route is shard now; the copy here is kept
-- until hxshard.sweep, for followers that read it late), or incoming
-- (being copied here from shard; writes wait until the route switches
-- here and hxshard.adopt lifts the fence).  A session that lives here has
-- no fence.
CREATE TABLE hxshard.fence (
    session_id text        PRIMARY KEY,
    state      text        NOT NULL CHECK (state IN ('moving', 'moved', 'incoming')),
    shard      integer     NOT NULL CHECK (shard >= 0),   -- where it goes, or comes from
    head       bigint      NOT NULL CHECK (head >= 0),    -- the stream's last seq when fenced (0: incoming)
    since      timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE hxshard.fence IS 'sessions moving away from this shard, moved away (until swept), or being copied here';
-- Every writer of public.sessions reads it (the trigger hxshard_fence runs
-- as the writer), as do the application's functions; it holds the keys of
-- the sessions that move, which the router's hxshard.pin shows to PUBLIC
-- too.  Only the mover writes it (docs/sharding.md).
REVOKE ALL ON hxshard.fence FROM PUBLIC;
GRANT SELECT ON hxshard.fence TO PUBLIC;

-- The stream of a session, as hx_stream('state', 'session_id') on
-- public.sessions names it
CREATE FUNCTION hxshard.stream_of(session_id text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN 'sessions:' || session_id;

-- The error for a write of a fenced session
CREATE FUNCTION hxshard.refuse(f hxshard.fence) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF f.state = 'moving' THEN
        RAISE EXCEPTION 'session % is moving to shard %', f.session_id, f.shard
            USING ERRCODE = 'XH501', HINT = 'Retry: the write goes to its new shard once the move is done.';
    ELSIF f.state = 'incoming' THEN
        RAISE EXCEPTION 'session % is being copied here from shard %', f.session_id, f.shard
            USING ERRCODE = 'XH501', HINT = 'Retry: the write goes to its shard once the move is done.';
    END IF;
    RAISE EXCEPTION 'session % has moved to shard %', f.session_id, f.shard
        USING ERRCODE = 'XH502', HINT = 'Retry through the router: the session''s route has changed.';
END
$$;

-- The fence's trigger on sessions: a write of a fenced session fails.
-- It runs after the row is locked, so a write that waited for the fence's
-- lock sees the fence (read committed: each statement of this function
-- takes a fresh snapshot; under repeatable read the fence's update of the
-- row makes the write fail with 40001 instead).
CREATE FUNCTION hxshard.fence_guard() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f hxshard.fence;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        SELECT * INTO f FROM hxshard.fence x WHERE x.session_id = OLD.session_id;
        IF FOUND THEN PERFORM hxshard.refuse(f); END IF;
    END IF;
    IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.session_id IS DISTINCT FROM OLD.session_id) THEN
        SELECT * INTO f FROM hxshard.fence x WHERE x.session_id = NEW.session_id;
        IF FOUND THEN PERFORM hxshard.refuse(f); END IF;
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION hxshard.fence_guard() FROM PUBLIC;

CREATE TRIGGER hxshard_fence BEFORE INSERT OR UPDATE OR DELETE ON public.sessions
    FOR EACH ROW EXECUTE FUNCTION hxshard.fence_guard();

-- A session that is not here: moved away (XH502), or never was (P0002)
CREATE FUNCTION hxshard.missing(session_id text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f hxshard.fence;
BEGIN
    SELECT * INTO f FROM hxshard.fence x WHERE x.session_id = missing.session_id;
    IF FOUND THEN PERFORM hxshard.refuse(f); END IF;
    RAISE EXCEPTION 'no session %', session_id USING ERRCODE = 'no_data_found';
END
$$;

-- A write of a fenced session is refused (XH501, XH502): the check of
-- hxshard.stage, whose calls do not go through the sessions table
CREATE FUNCTION hxshard.check_fenced(session_id text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f hxshard.fence;
BEGIN
    SELECT * INTO f FROM hxshard.fence x WHERE x.session_id = check_fenced.session_id;
    IF FOUND THEN PERFORM hxshard.refuse(f); END IF;
END
$$;

-- A read of a session that has moved away is refused (XH502), so that the
-- router reads it on its new shard; one that is moving reads here (its
-- state is whole here until the move switches its route).
CREATE FUNCTION hxshard.check_moved(session_id text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f hxshard.fence;
BEGIN
    SELECT * INTO f FROM hxshard.fence x WHERE x.session_id = check_moved.session_id AND x.state = 'moved';
    IF FOUND THEN PERFORM hxshard.refuse(f); END IF;
END
$$;

--
-- The application's functions, by a session's key.  They run with the
-- caller's privileges (the guards and hx_stage check the caller, as they
-- do for plain SQL).
--

-- A new session (its stream starts with a STATE_SNAPSHOT at seq 1)
CREATE FUNCTION hxshard.create(session_id text, user_id text, project_id text DEFAULT NULL,
                               state jsonb DEFAULT '{}')
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO public.sessions (session_id, user_id, project_id, state)
    VALUES (session_id, user_id, project_id, coalesce(state, '{}'));
    RETURN true;
END
$$;

-- A tool's writes merged into the state: hx_merge in one UPDATE
CREATE FUNCTION hxshard.merge(session_id text, writes jsonb) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF writes IS NULL THEN
        RAISE EXCEPTION 'writes must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE public.sessions s SET state = public.hx_merge(s.state, writes), updated_at = now()
     WHERE s.session_id = merge.session_id;
    IF NOT FOUND THEN PERFORM hxshard.missing(session_id); END IF;
    RETURN true;
END
$$;

-- Columns of the row other than its key: each member of changes that
-- names a column (user_id, project_id, phase, pending_tool, cancel_token,
-- state) sets it, the others stay; the guards check the result
CREATE FUNCTION hxshard.set(session_id text, changes jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r jsonb;
BEGIN
    IF jsonb_typeof(changes) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'changes must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF changes ? 'session_id' THEN
        RAISE EXCEPTION 'a session''s key does not change' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE public.sessions s
       SET (user_id, project_id, phase, pending_tool, cancel_token, state, updated_at) =
           (SELECT n.user_id, n.project_id, n.phase, n.pending_tool, n.cancel_token, n.state, now()
              FROM jsonb_populate_record(s, changes) n)
     WHERE s.session_id = set.session_id
    RETURNING to_jsonb(s) - 'state' INTO r;
    IF NOT FOUND THEN PERFORM hxshard.missing(session_id); END IF;
    RETURN r;
END
$$;

-- A move of the session's phase along the agent_session machine; the new phase
CREATE FUNCTION hxshard.advance(session_id text, event text) RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p text;
BEGIN
    IF event IS NULL THEN
        RAISE EXCEPTION 'the event must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE public.sessions s SET phase = public.hx_next_phase('agent_session', s.phase, event), updated_at = now()
     WHERE s.session_id = advance.session_id
    RETURNING s.phase INTO p;
    IF NOT FOUND THEN PERFORM hxshard.missing(session_id); END IF;
    RETURN p;
END
$$;

-- A tool call's writes staged for a step (hx_stage).  The row's lock
-- (FOR SHARE) orders it with a fence: staged before, it is copied; after,
-- it is refused.
CREATE FUNCTION hxshard.stage(session_id text, step text, call text, writes jsonb,
                              ord integer DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM 1 FROM public.sessions s WHERE s.session_id = stage.session_id FOR SHARE;
    IF NOT FOUND THEN PERFORM hxshard.missing(session_id); END IF;
    PERFORM hxshard.check_fenced(session_id);
    RETURN public.hx_stage(hxshard.stream_of(session_id), step, call, writes, ord);
END
$$;

-- A step promoted: its staged writes, once, in tool-call order, merged
-- (hx_promote in the UPDATE, as the README's recipe does); the writes
CREATE FUNCTION hxshard.promote(session_id text, step text) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    w jsonb;
BEGIN
    IF step IS NULL THEN
        RAISE EXCEPTION 'the step must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    WITH p AS (SELECT public.hx_promote(hxshard.stream_of(promote.session_id), promote.step) AS writes)
    UPDATE public.sessions s SET state = public.hx_merge(s.state, p.writes), updated_at = now()
      FROM p
     WHERE s.session_id = promote.session_id
    RETURNING p.writes INTO w;
    IF NOT FOUND THEN PERFORM hxshard.missing(session_id); END IF;
    RETURN w;
END
$$;

-- The row, as JSON (NULL: no such session)
CREATE FUNCTION hxshard.get(session_id text) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM hxshard.check_moved(session_id);
    RETURN (SELECT to_jsonb(s) FROM public.sessions s WHERE s.session_id = get.session_id);
END
$$;

-- The stream's state and the seq of its last event, in one snapshot
CREATE FUNCTION hxshard.snapshot(session_id text, OUT stream text, OUT seq bigint, OUT state jsonb)
RETURNS record
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM hxshard.check_moved(session_id);
    SELECT h.stream, h.seq, h.state INTO stream, seq, state
      FROM public.hx_stream_snapshot('public.sessions'::regclass, session_id) h;
END
$$;

-- The state right after event seq (hx_stream_state_at)
CREATE FUNCTION hxshard.state_at(session_id text, seq bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM hxshard.check_moved(session_id);
    RETURN public.hx_stream_state_at(hxshard.stream_of(session_id), seq);
END
$$;

-- The session deleted (its stream ends with hx.stream_end)
CREATE FUNCTION hxshard.remove(session_id text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM public.sessions s WHERE s.session_id = remove.session_id;
    IF NOT FOUND THEN PERFORM hxshard.missing(session_id); END IF;
    RETURN true;
END
$$;

--
-- Moving a session (the router's hxshard.move calls these, in this
-- order): on the target, prepare_import, then import_events page by page
-- while the source goes on being written (export_events); on the source,
-- fence (writes stop), the events after the last page, export_row and
-- export_steps; on the target, import_row; the router switches the
-- route; on the target, adopt, on the source, retire.  unfence undoes a
-- fence whose move did not switch.  They run as their caller, the mover
-- (EXECUTE is revoked from PUBLIC; docs/sharding.md lists its grants),
-- with the triggers off where they copy (session_replication_role replica:
-- the copy logs no event and the guards do not judge a row the source
-- already judged): a role that may not SET session_replication_role (a
-- superuser, or one granted SET ON PARAMETER session_replication_role,
-- PostgreSQL 15 and later) gets 42501 from them, before they run.
--

-- Fence the session: wait for the writes in flight (the row's lock), then
-- refuse every later one.  The stream's last seq; the same again for a
-- second call toward the same shard (a move that is resumed).
CREATE FUNCTION hxshard.fence(session_id text, to_shard integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET session_replication_role = replica
AS $$
DECLARE
    f hxshard.fence;
    h bigint;
BEGIN
    PERFORM 1 FROM public.sessions s WHERE s.session_id = fence.session_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no session % on this shard', session_id USING ERRCODE = 'no_data_found';
    END IF;
    SELECT * INTO f FROM hxshard.fence x WHERE x.session_id = fence.session_id;
    IF FOUND THEN
        IF f.state = 'moving' AND f.shard = fence.to_shard THEN
            RETURN f.head;
        END IF;
        RAISE EXCEPTION 'session % is % (shard %)', session_id, f.state, f.shard
            USING ERRCODE = 'XH503';
    END IF;
    -- a new version of the row: a write under repeatable read that read
    -- the row before the fence now fails (40001) instead of landing here
    UPDATE public.sessions s SET session_id = s.session_id WHERE s.session_id = fence.session_id;
    SELECT coalesce(max(e.seq), 0) INTO h FROM public.hx_event e WHERE e.stream = hxshard.stream_of(fence.session_id);
    INSERT INTO hxshard.fence (session_id, state, shard, head) VALUES (session_id, 'moving', to_shard, h);
    RETURN h;
END
$$;

-- A page of the stream's log after a seq: at most max_events events and
-- (but for the first) max_bytes bytes of event
CREATE FUNCTION hxshard.export_events(session_id text, after_seq bigint, max_events integer,
                                      max_bytes integer,
                                      OUT seq bigint, OUT type text, OUT event jsonb,
                                      OUT created_at timestamptz)
RETURNS SETOF record
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT p.seq, p.type, p.event, p.created_at
      FROM (SELECT e.seq, e.type, e.event, e.created_at,
                   sum(pg_column_size(e.event)) OVER (ORDER BY e.seq) - pg_column_size(e.event) AS before
              FROM (SELECT x.seq, x.type, x.event, x.created_at FROM public.hx_event x
                     WHERE x.stream = hxshard.stream_of(export_events.session_id)
                       AND x.seq > export_events.after_seq
                     ORDER BY x.seq LIMIT greatest(export_events.max_events, 1)) e) p
     WHERE p.before = 0 OR p.before < export_events.max_bytes
     ORDER BY p.seq;
END;

-- The fenced row, as JSON
CREATE FUNCTION hxshard.export_row(session_id text) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r jsonb;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM hxshard.fence x WHERE x.session_id = export_row.session_id
                                                   AND x.state = 'moving') THEN
        RAISE EXCEPTION 'session % is not fenced for a move', session_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    SELECT to_jsonb(s) INTO r FROM public.sessions s WHERE s.session_id = export_row.session_id;
    IF r IS NULL THEN
        RAISE EXCEPTION 'no session % on this shard', session_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN r;
END
$$;

-- The session's steps: the promoted ones (hx_step) and the calls staged
-- for steps not promoted yet (hx_step_call)
CREATE FUNCTION hxshard.export_steps(session_id text) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT jsonb_build_object(
        'steps', coalesce((SELECT jsonb_agg(to_jsonb(s)) FROM public.hx_step s
                            WHERE s.stream = hxshard.stream_of(export_steps.session_id)), '[]'),
        'calls', coalesce((SELECT jsonb_agg(to_jsonb(c)) FROM public.hx_step_call c
                            WHERE c.stream = hxshard.stream_of(export_steps.session_id)), '[]'));
END;

-- Make ready for a copy of a session from another shard: forget what
-- this shard holds of it (a copy left by a move that failed, or this
-- shard's own copy from before it moved away), and fence it as incoming,
-- so that a write that reaches it here (a stale route) is refused with
-- XH501 until the route switches here (hxshard.adopt)
CREATE FUNCTION hxshard.prepare_import(session_id text, from_shard integer) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET session_replication_role = replica
AS $$
DECLARE
    f hxshard.fence;
    s text := hxshard.stream_of(session_id);
BEGIN
    SELECT * INTO f FROM hxshard.fence x WHERE x.session_id = prepare_import.session_id FOR UPDATE;
    IF FOUND AND f.state = 'moving' THEN
        RAISE EXCEPTION 'session % is moving away from this shard', session_id USING ERRCODE = 'XH503';
    END IF;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM public.sessions x WHERE x.session_id = prepare_import.session_id) THEN
        RAISE EXCEPTION 'session % lives on this shard', session_id USING ERRCODE = 'XH504';
    END IF;
    -- the fence first (a write that waits for the row below then sees it)
    INSERT INTO hxshard.fence (session_id, state, shard, head) VALUES (session_id, 'incoming', from_shard, 0)
        ON CONFLICT ON CONSTRAINT fence_pkey
        DO UPDATE SET state = 'incoming', shard = EXCLUDED.shard, head = 0, since = now();
    DELETE FROM public.sessions x WHERE x.session_id = prepare_import.session_id;
    DELETE FROM public.hx_event e WHERE e.stream = s;
    DELETE FROM public.hx_step x WHERE x.stream = s;
    DELETE FROM public.hx_step_call x WHERE x.stream = s;
END
$$;

-- Is the session being copied into this shard?
CREATE FUNCTION hxshard.incoming(session_id text) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
RETURN EXISTS (SELECT 1 FROM hxshard.fence x WHERE x.session_id = incoming.session_id AND x.state = 'incoming');

-- A page of the log, as export_events gave it; the stream's last seq
-- here.  The events go in as the source logged them (their seqs and
-- their days): hx_event_guard, which holds SQL's inserts to a log
-- stream's next event dated now, is a trigger of the log, off in this
-- function (session_replication_role replica), as all the copy's are.
CREATE FUNCTION hxshard.import_events(session_id text, from_shard integer, seqs bigint[], types text[],
                                      events jsonb[], created timestamptz[])
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET session_replication_role = replica
AS $$
DECLARE
    s text := hxshard.stream_of(session_id);
    h bigint;
BEGIN
    IF cardinality(seqs) IS DISTINCT FROM cardinality(types) OR cardinality(seqs) IS DISTINCT FROM cardinality(events)
       OR cardinality(seqs) IS DISTINCT FROM cardinality(created) THEN
        RAISE EXCEPTION 'the arrays of a page differ in length' USING ERRCODE = 'array_subscript_error';
    END IF;
    IF NOT hxshard.incoming(session_id) THEN
        RAISE EXCEPTION 'session % is not being copied into this shard (hxshard.prepare_import first)', session_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    INSERT INTO public.hx_event (stream, seq, type, event, created_at)
    SELECT s, p.seq, p.type, p.event, p.created_at
      FROM unnest(seqs, types, events, created) AS p(seq, type, event, created_at)
     WHERE NOT EXISTS (SELECT 1 FROM public.hx_event e WHERE e.stream = s AND e.seq = p.seq);
    SELECT coalesce(max(e.seq), 0) INTO h FROM public.hx_event e WHERE e.stream = s;
    RETURN h;
END
$$;

-- The row and the steps, once the whole log up to head is here: the copy
-- is whole (the route may switch to it)
CREATE FUNCTION hxshard.import_row(session_id text, from_shard integer, session_row jsonb, steps jsonb,
                                   head bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET session_replication_role = replica
AS $$
DECLARE
    s text := hxshard.stream_of(session_id);
    h bigint;
    n bigint;
BEGIN
    IF session_row ->> 'session_id' IS DISTINCT FROM session_id THEN
        RAISE EXCEPTION 'the row is not session %''s', session_id USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT coalesce(max(e.seq), 0), count(*) INTO h, n FROM public.hx_event e WHERE e.stream = s;
    IF h <> head OR (head > 0 AND n <> head - (SELECT coalesce(min(e.seq), 1) FROM public.hx_event e WHERE e.stream = s) + 1) THEN
        RAISE EXCEPTION 'the copy of session % is not whole: its log here ends at seq % (% events), the source''s at %',
                        session_id, h, n, head
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF NOT hxshard.incoming(session_id) THEN
        RAISE EXCEPTION 'session % is not being copied into this shard (hxshard.prepare_import first)', session_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    DELETE FROM public.sessions x WHERE x.session_id = import_row.session_id;
    INSERT INTO public.sessions SELECT * FROM jsonb_populate_record(NULL::public.sessions, session_row);
    DELETE FROM public.hx_step x WHERE x.stream = s;
    DELETE FROM public.hx_step_call x WHERE x.stream = s;
    INSERT INTO public.hx_step SELECT * FROM jsonb_populate_recordset(NULL::public.hx_step, steps -> 'steps');
    INSERT INTO public.hx_step_call SELECT * FROM jsonb_populate_recordset(NULL::public.hx_step_call, steps -> 'calls');
END
$$;

-- The route switched to this shard: the copy is the session now (its
-- fence lifted)
CREATE FUNCTION hxshard.adopt(session_id text) RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    DELETE FROM hxshard.fence x WHERE x.session_id = adopt.session_id AND x.state = 'incoming';
END;

-- The route switched away from this shard: moving becomes moved
CREATE FUNCTION hxshard.retire(session_id text) RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    UPDATE hxshard.fence x SET state = 'moved', since = now() WHERE x.session_id = retire.session_id;
END;

-- A move that did not switch is undone: the session takes writes here again
CREATE FUNCTION hxshard.unfence(session_id text) RETURNS boolean
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH d AS (DELETE FROM hxshard.fence x WHERE x.session_id = unfence.session_id AND x.state = 'moving'
               RETURNING 1)
    SELECT count(*) > 0 FROM d;
END;

-- The copies of sessions that moved away longer ago than an interval:
-- their rows, events and steps, and their fences; how many sessions
CREATE FUNCTION hxshard.sweep(older_than interval DEFAULT '10 minutes') RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET session_replication_role = replica
AS $$
DECLARE
    r record;
    n bigint := 0;
BEGIN
    FOR r IN SELECT x.session_id FROM hxshard.fence x
              WHERE x.state = 'moved' AND x.since < now() - older_than
              FOR UPDATE SKIP LOCKED LOOP
        DELETE FROM public.sessions s WHERE s.session_id = r.session_id;
        DELETE FROM public.hx_event e WHERE e.stream = hxshard.stream_of(r.session_id);
        DELETE FROM public.hx_step s WHERE s.stream = hxshard.stream_of(r.session_id);
        DELETE FROM public.hx_step_call c WHERE c.stream = hxshard.stream_of(r.session_id);
        DELETE FROM hxshard.fence x WHERE x.session_id = r.session_id;
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;

-- The sessions that live here (not fenced, not copies), of the given
-- buckets (hashtext(key) & 1023, as the router's hxshard.bucket_of), for
-- rebalancing; NULL buckets: all
CREATE FUNCTION hxshard.sessions_in(buckets integer[], max_sessions integer DEFAULT 1000000)
RETURNS SETOF text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT s.session_id FROM public.sessions s
     WHERE (sessions_in.buckets IS NULL OR (hashtext(s.session_id) & 1023) = ANY (sessions_in.buckets))
       AND NOT EXISTS (SELECT 1 FROM hxshard.fence x WHERE x.session_id = s.session_id)
     ORDER BY s.session_id
     LIMIT sessions_in.max_sessions;
END;

-- How many sessions live here
CREATE FUNCTION hxshard.session_count() RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT count(*) FROM public.sessions s
     WHERE NOT EXISTS (SELECT 1 FROM hxshard.fence x WHERE x.session_id = s.session_id);
END;

DO $$
DECLARE
    f text;
BEGIN
    -- the copy's functions are the mover's only
    FOREACH f IN ARRAY ARRAY['fence(text,integer)', 'export_events(text,bigint,integer,integer)',
                             'export_row(text)', 'export_steps(text)', 'prepare_import(text,integer)',
                             'incoming(text)',
                             'import_events(text,integer,bigint[],text[],jsonb[],timestamptz[])',
                             'import_row(text,integer,jsonb,jsonb,bigint)', 'adopt(text)',
                             'retire(text)', 'unfence(text)', 'sweep(interval)',
                             'sessions_in(integer[],integer)', 'session_count()'] LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION hxshard.%s FROM PUBLIC', f);
    END LOOP;
END
$$;
