-- shard/router.sql: the router of a sharded hxstate.  A database with
-- PL/Proxy and no hxstate: each of its functions runs the function of
-- the same name (shard/shard.sql) on the shard that holds the session's
-- key.  Load it, as a superuser, into the router's database, then add the
-- shards in order (shard 0 first):
--
--   psql -d router -f shard/router.sql
--   psql -d router -c "SELECT hxshard.add_shard('host=10.0.0.1 dbname=app')"
--   ...
--
-- docs/sharding.md is the manual.
--
-- Where a session lives: its pin, if it has one (a session that moved),
-- else its bucket's shard; a bucket is hashtext(key) & 1023, and the
-- 1024 buckets are dealt round the shards there were when the first
-- shard was added, then moved one by one (hxshard.move_bucket).  PL/Proxy
-- runs each call on the partition that hxshard.shard_of(key) names
-- (modular_mapping: partition = shard number).
--
-- The shards are the options p0, p1, ... of the foreign server hxshard
-- (PL/Proxy's SQL/MED cluster), whose user mapping for PUBLIC connects as
-- the session's user (a shard's connection string names no user).
--
-- Every function runs with its caller's privileges (none is SECURITY
-- DEFINER), on the router and, through PL/Proxy, on the shards.  The
-- application's functions are PUBLIC's; the mover's (move, move_bucket,
-- rebalance, abort_move, sweep, and hxshard_proxy's of the move) and
-- add_shard are no one's until granted.  docs/sharding.md, "Roles and
-- privileges", lists the grants each role needs here and on the shards.
--
-- SQLSTATEs: those of the shard's functions, passed on; 40001 a write
-- that found its session moving for longer than hxshard.retry_ms (the
-- setting; 5000 by default) allows (retry it); XH503 a move of a session
-- that is moving already; 22023 an unknown shard or bucket, a move to
-- where the session is.

CREATE EXTENSION IF NOT EXISTS plproxy;

CREATE SCHEMA hxshard;
COMMENT ON SCHEMA hxshard IS 'hxstate sharding: the router (shard/router.sql)';
GRANT USAGE ON SCHEMA hxshard TO PUBLIC;
-- PL/Proxy's functions, one per shard function; the application calls the
-- wrappers in hxshard, which retry a write of a session that is moving
CREATE SCHEMA hxshard_proxy;
GRANT USAGE ON SCHEMA hxshard_proxy TO PUBLIC;

-- Buckets: where sessions without a pin live
CREATE TABLE hxshard.bucket (
    bucket integer PRIMARY KEY CHECK (bucket BETWEEN 0 AND 1023),
    shard  integer NOT NULL CHECK (shard >= 0)
);
COMMENT ON TABLE hxshard.bucket IS 'the shard of each bucket (hashtext(session key) & 1023)';

-- Pins: sessions that live elsewhere than their bucket (they moved, or
-- their bucket did and they have not followed yet)
CREATE TABLE hxshard.pin (
    session_id text        PRIMARY KEY,
    shard      integer     NOT NULL CHECK (shard >= 0),
    since      timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE hxshard.pin IS 'sessions routed to a shard other than their bucket''s';

-- Moves under way (one row per session moving) and done (a row each,
-- kept for the figures: fenced_at .. switched_at is the writers' pause)
CREATE TABLE hxshard.move (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id  text        NOT NULL,
    from_shard  integer     NOT NULL,
    to_shard    integer     NOT NULL,
    state       text        NOT NULL CHECK (state IN ('copying', 'fenced', 'switched', 'done', 'failed')),
    head        bigint,
    events      bigint      NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    fenced_at   timestamptz,
    switched_at timestamptz,
    done_at     timestamptz,
    error       text
);
CREATE UNIQUE INDEX move_one_at_a_time ON hxshard.move (session_id)
    WHERE state IN ('copying', 'fenced', 'switched');
COMMENT ON TABLE hxshard.move IS 'moves of sessions between shards: those under way, and those done';

REVOKE ALL ON hxshard.bucket, hxshard.pin, hxshard.move FROM PUBLIC;
GRANT SELECT ON hxshard.bucket, hxshard.pin TO PUBLIC;

CREATE FUNCTION hxshard.bucket_of(session_id text) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN hashtext(session_id) & 1023;

-- The shard of a session: the routing function (PL/Proxy's RUN ON)
CREATE FUNCTION hxshard.shard_of(session_id text) RETURNS integer
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
RETURN coalesce((SELECT p.shard FROM hxshard.pin p WHERE p.session_id = shard_of.session_id),
                (SELECT b.shard FROM hxshard.bucket b WHERE b.bucket = hashtext(shard_of.session_id) & 1023));

-- The shards, in order, with their connection strings (the foreign
-- server's options p0, p1, ...)
CREATE FUNCTION hxshard.shards() RETURNS TABLE (shard integer, conninfo text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT substr(split_part(o.opt, '=', 1), 2)::integer, substr(o.opt, strpos(o.opt, '=') + 1)
      FROM pg_foreign_server s, unnest(s.srvoptions) AS o(opt)
     WHERE s.srvname = 'hxshard' AND o.opt ~ '^p[0-9]+='
     ORDER BY 1;
END;

-- The routes of many sessions, in one statement (the followers' lookup)
CREATE FUNCTION hxshard.routes(session_ids text[]) RETURNS TABLE (session_id text, shard integer)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT k.k, coalesce(p.shard, b.shard)
      FROM unnest(routes.session_ids) AS k(k)
      LEFT JOIN hxshard.pin p ON p.session_id = k.k
      LEFT JOIN hxshard.bucket b ON b.bucket = hashtext(k.k) & 1023
     WHERE k.k IS NOT NULL;
END;

-- Add a shard (the next number); the first one gets every bucket, the
-- next ones none until hxshard.move_bucket (or hxshard.rebalance) gives
-- them some.  With deal, the buckets are dealt round all shards anew:
-- only while no session exists yet.
CREATE FUNCTION hxshard.add_shard(conninfo text, deal boolean DEFAULT false) RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
    IF conninfo IS NULL OR conninfo = '' THEN
        RAISE EXCEPTION 'a shard needs a connection string' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_foreign_server WHERE srvname = 'hxshard') THEN
        EXECUTE format('CREATE SERVER hxshard FOREIGN DATA WRAPPER plproxy OPTIONS (modular_mapping %L, p0 %L)',
                       '1', conninfo);
        EXECUTE 'CREATE USER MAPPING FOR PUBLIC SERVER hxshard';
        n := 0;
    ELSE
        SELECT count(*) INTO n FROM hxshard.shards();
        EXECUTE format('ALTER SERVER hxshard OPTIONS (ADD %I %L)', 'p' || n, conninfo);
    END IF;
    IF n = 0 THEN
        INSERT INTO hxshard.bucket SELECT b, 0 FROM generate_series(0, 1023) b
            ON CONFLICT (bucket) DO UPDATE SET shard = 0;
    ELSIF deal THEN
        UPDATE hxshard.bucket SET shard = bucket % (n + 1);
    END IF;
    PERFORM pg_notify('hxshard_route', '*');
    RETURN n;
END
$$;
REVOKE ALL ON FUNCTION hxshard.add_shard(text, boolean) FROM PUBLIC;

--
-- PL/Proxy's functions: each runs its shard function on the session's shard
--
CREATE FUNCTION hxshard_proxy.create(session_id text, user_id text, project_id text, state jsonb)
RETURNS boolean AS $$
    CLUSTER 'hxshard'; RUN ON hxshard.shard_of(session_id);
    SELECT hxshard.create(session_id, user_id, project_id, state);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.merge(session_id text, writes jsonb) RETURNS boolean AS $$
    CLUSTER 'hxshard'; RUN ON hxshard.shard_of(session_id);
    SELECT hxshard.merge(session_id, writes);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.set(session_id text, changes jsonb) RETURNS jsonb AS $$
    CLUSTER 'hxshard'; RUN ON hxshard.shard_of(session_id);
    SELECT hxshard.set(session_id, changes);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.advance(session_id text, event text) RETURNS text AS $$
    CLUSTER 'hxshard'; RUN ON hxshard.shard_of(session_id);
    SELECT hxshard.advance(session_id, event);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.stage(session_id text, step text, call text, writes jsonb, ord integer)
RETURNS boolean AS $$
    CLUSTER 'hxshard'; RUN ON hxshard.shard_of(session_id);
    SELECT hxshard.stage(session_id, step, call, writes, ord);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.promote(session_id text, step text) RETURNS jsonb AS $$
    CLUSTER 'hxshard'; RUN ON hxshard.shard_of(session_id);
    SELECT hxshard.promote(session_id, step);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.remove(session_id text) RETURNS boolean AS $$
    CLUSTER 'hxshard'; RUN ON hxshard.shard_of(session_id);
    SELECT hxshard.remove(session_id);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.get(session_id text) RETURNS jsonb AS $$
    CLUSTER 'hxshard'; RUN ON hxshard.shard_of(session_id);
    SELECT hxshard.get(session_id);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.snapshot(session_id text, OUT stream text, OUT seq bigint, OUT state jsonb)
RETURNS record AS $$
    CLUSTER 'hxshard'; RUN ON hxshard.shard_of(session_id);
    SELECT s.stream, s.seq, s.state FROM hxshard.snapshot(session_id) s;
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.state_at(session_id text, seq bigint) RETURNS jsonb AS $$
    CLUSTER 'hxshard'; RUN ON hxshard.shard_of(session_id);
    SELECT hxshard.state_at(session_id, seq);
$$ LANGUAGE plproxy;

-- The mover's, on a shard by number
CREATE FUNCTION hxshard_proxy.fence(shard integer, session_id text, to_shard integer) RETURNS bigint AS $$
    CLUSTER 'hxshard'; RUN ON shard;
    SELECT hxshard.fence(session_id, to_shard);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.export_events(shard integer, session_id text, after_seq bigint,
                                            max_events integer, max_bytes integer,
                                            OUT seq bigint, OUT type text, OUT event jsonb,
                                            OUT created_at timestamptz)
RETURNS SETOF record AS $$
    CLUSTER 'hxshard'; RUN ON shard;
    SELECT e.seq, e.type, e.event, e.created_at
      FROM hxshard.export_events(session_id, after_seq, max_events, max_bytes) e;
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.export_row(shard integer, session_id text) RETURNS jsonb AS $$
    CLUSTER 'hxshard'; RUN ON shard;
    SELECT hxshard.export_row(session_id);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.export_steps(shard integer, session_id text) RETURNS jsonb AS $$
    CLUSTER 'hxshard'; RUN ON shard;
    SELECT hxshard.export_steps(session_id);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.prepare_import(shard integer, session_id text, from_shard integer) RETURNS void AS $$
    CLUSTER 'hxshard'; RUN ON shard;
    SELECT hxshard.prepare_import(session_id, from_shard);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.import_events(shard integer, session_id text, from_shard integer,
                                            seqs bigint[], types text[], events jsonb[],
                                            created timestamptz[])
RETURNS bigint AS $$
    CLUSTER 'hxshard'; RUN ON shard;
    SELECT hxshard.import_events(session_id, from_shard, seqs, types, events, created);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.import_row(shard integer, session_id text, from_shard integer,
                                         session_row jsonb, steps jsonb, head bigint)
RETURNS void AS $$
    CLUSTER 'hxshard'; RUN ON shard;
    SELECT hxshard.import_row(session_id, from_shard, session_row, steps, head);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.adopt(shard integer, session_id text) RETURNS void AS $$
    CLUSTER 'hxshard'; RUN ON shard;
    SELECT hxshard.adopt(session_id);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.retire(shard integer, session_id text) RETURNS void AS $$
    CLUSTER 'hxshard'; RUN ON shard;
    SELECT hxshard.retire(session_id);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.unfence(shard integer, session_id text) RETURNS boolean AS $$
    CLUSTER 'hxshard'; RUN ON shard;
    SELECT hxshard.unfence(session_id);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.sweep(older_than interval) RETURNS SETOF bigint AS $$
    CLUSTER 'hxshard'; RUN ON ALL;
    SELECT hxshard.sweep(older_than);
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.sessions_in(shard integer, buckets integer[], max_sessions integer)
RETURNS SETOF text AS $$
    CLUSTER 'hxshard'; RUN ON shard;
    SELECT s FROM hxshard.sessions_in(buckets, max_sessions) s;
$$ LANGUAGE plproxy;

CREATE FUNCTION hxshard_proxy.session_count(shard integer) RETURNS bigint AS $$
    CLUSTER 'hxshard'; RUN ON shard;
    SELECT hxshard.session_count();
$$ LANGUAGE plproxy;

-- The application's calls are anyone's (each runs as its caller, on the
-- shard too); the mover's are no one's until granted (docs/sharding.md)
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['fence(integer,text,integer)',
                             'export_events(integer,text,bigint,integer,integer)',
                             'export_row(integer,text)', 'export_steps(integer,text)',
                             'prepare_import(integer,text,integer)',
                             'import_events(integer,text,integer,bigint[],text[],jsonb[],timestamptz[])',
                             'import_row(integer,text,integer,jsonb,jsonb,bigint)', 'adopt(integer,text)',
                             'retire(integer,text)', 'unfence(integer,text)', 'sweep(interval)',
                             'sessions_in(integer,integer[],integer)', 'session_count(integer)'] LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION hxshard_proxy.%s FROM PUBLIC', f);
    END LOOP;
END
$$;

--
-- The application's functions: writes retry while the session moves
--

-- How long a write waits for a moving session (ms), then 40001
CREATE FUNCTION hxshard.retry_ms() RETURNS integer
LANGUAGE sql STABLE
RETURN coalesce(nullif(current_setting('hxshard.retry_ms', true), '')::integer, 5000);

-- A session's key is never NULL (PL/Proxy cannot route one)
CREATE FUNCTION hxshard.key_given(session_id text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF session_id IS NULL THEN
        RAISE EXCEPTION 'a session''s key must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
END
$$;

-- Run a routed call until it does not meet a moving or moved session
-- (XH501, XH502): the route is read afresh each time (read committed)
CREATE FUNCTION hxshard.retrying(session_id text, tries integer, started timestamptz, err text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF clock_timestamp() - started > make_interval(secs => hxshard.retry_ms() / 1000.0) THEN
        RAISE EXCEPTION 'session % is being moved: retry (%)', session_id, err
            USING ERRCODE = 'serialization_failure',
                  HINT = 'The session moves between shards; the write can be retried as it is.';
    END IF;
    -- 1, 2, 4 ms ... up to 20 ms between tries
    PERFORM pg_sleep(least(0.001 * (1 << least(tries, 5)), 0.02));
END
$$;

-- The bucket's lock, held shared by a create until its end: a move of the
-- bucket (which takes it exclusive) waits for the creates in flight, and
-- the creates that come after it wait for its commit.  An advisory lock
-- (key: hxshard.bucket's OID, the bucket), so that a create needs no
-- privilege on hxshard.bucket (a row lock would need UPDATE on it).
CREATE FUNCTION hxshard.lock_bucket(session_id text) RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT pg_catalog.pg_advisory_xact_lock_shared('hxshard.bucket'::pg_catalog.regclass::pg_catalog.oid::integer,
                                                   hashtext(lock_bucket.session_id) & 1023);
END;

CREATE FUNCTION hxshard.create(session_id text, user_id text, project_id text DEFAULT NULL,
                               state jsonb DEFAULT '{}')
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tries integer := 0;
    started timestamptz := clock_timestamp();
BEGIN
    PERFORM hxshard.key_given(session_id);
    LOOP
        BEGIN
            -- the bucket's lock orders the create with a move of the bucket
            PERFORM hxshard.lock_bucket(session_id);
            RETURN hxshard_proxy.create(session_id, user_id, project_id, coalesce(state, '{}'));
        EXCEPTION WHEN SQLSTATE 'XH501' OR SQLSTATE 'XH502' THEN
            PERFORM hxshard.retrying(session_id, tries, started, SQLERRM);
            tries := tries + 1;
        END;
    END LOOP;
END
$$;

CREATE FUNCTION hxshard.merge(session_id text, writes jsonb) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tries integer := 0;
    started timestamptz := clock_timestamp();
BEGIN
    PERFORM hxshard.key_given(session_id);
    LOOP
        BEGIN
            RETURN hxshard_proxy.merge(session_id, writes);
        EXCEPTION WHEN SQLSTATE 'XH501' OR SQLSTATE 'XH502' THEN
            PERFORM hxshard.retrying(session_id, tries, started, SQLERRM);
            tries := tries + 1;
        END;
    END LOOP;
END
$$;

CREATE FUNCTION hxshard.set(session_id text, changes jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tries integer := 0;
    started timestamptz := clock_timestamp();
BEGIN
    PERFORM hxshard.key_given(session_id);
    LOOP
        BEGIN
            RETURN hxshard_proxy.set(session_id, changes);
        EXCEPTION WHEN SQLSTATE 'XH501' OR SQLSTATE 'XH502' THEN
            PERFORM hxshard.retrying(session_id, tries, started, SQLERRM);
            tries := tries + 1;
        END;
    END LOOP;
END
$$;

CREATE FUNCTION hxshard.advance(session_id text, event text) RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tries integer := 0;
    started timestamptz := clock_timestamp();
BEGIN
    PERFORM hxshard.key_given(session_id);
    LOOP
        BEGIN
            RETURN hxshard_proxy.advance(session_id, event);
        EXCEPTION WHEN SQLSTATE 'XH501' OR SQLSTATE 'XH502' THEN
            PERFORM hxshard.retrying(session_id, tries, started, SQLERRM);
            tries := tries + 1;
        END;
    END LOOP;
END
$$;

CREATE FUNCTION hxshard.stage(session_id text, step text, call text, writes jsonb,
                              ord integer DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tries integer := 0;
    started timestamptz := clock_timestamp();
BEGIN
    PERFORM hxshard.key_given(session_id);
    LOOP
        BEGIN
            RETURN hxshard_proxy.stage(session_id, step, call, writes, ord);
        EXCEPTION WHEN SQLSTATE 'XH501' OR SQLSTATE 'XH502' THEN
            PERFORM hxshard.retrying(session_id, tries, started, SQLERRM);
            tries := tries + 1;
        END;
    END LOOP;
END
$$;

CREATE FUNCTION hxshard.promote(session_id text, step text) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tries integer := 0;
    started timestamptz := clock_timestamp();
BEGIN
    PERFORM hxshard.key_given(session_id);
    LOOP
        BEGIN
            RETURN hxshard_proxy.promote(session_id, step);
        EXCEPTION WHEN SQLSTATE 'XH501' OR SQLSTATE 'XH502' THEN
            PERFORM hxshard.retrying(session_id, tries, started, SQLERRM);
            tries := tries + 1;
        END;
    END LOOP;
END
$$;

CREATE FUNCTION hxshard.remove(session_id text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tries integer := 0;
    started timestamptz := clock_timestamp();
BEGIN
    PERFORM hxshard.key_given(session_id);
    LOOP
        BEGIN
            RETURN hxshard_proxy.remove(session_id);
        EXCEPTION WHEN SQLSTATE 'XH501' OR SQLSTATE 'XH502' THEN
            PERFORM hxshard.retrying(session_id, tries, started, SQLERRM);
            tries := tries + 1;
        END;
    END LOOP;
END
$$;

-- Reads: a session that moved away is read on its new shard (one retry)
CREATE FUNCTION hxshard.get(session_id text) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tries integer := 0;
    started timestamptz := clock_timestamp();
BEGIN
    PERFORM hxshard.key_given(session_id);
    LOOP
        BEGIN
            RETURN hxshard_proxy.get(session_id);
        EXCEPTION WHEN SQLSTATE 'XH502' THEN
            PERFORM hxshard.retrying(session_id, tries, started, SQLERRM);
            tries := tries + 1;
        END;
    END LOOP;
END
$$;

CREATE FUNCTION hxshard.snapshot(session_id text, OUT stream text, OUT seq bigint, OUT state jsonb)
RETURNS record
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tries integer := 0;
    started timestamptz := clock_timestamp();
BEGIN
    PERFORM hxshard.key_given(session_id);
    LOOP
        BEGIN
            SELECT s.stream, s.seq, s.state INTO stream, seq, state FROM hxshard_proxy.snapshot(session_id) s;
            RETURN;
        EXCEPTION WHEN SQLSTATE 'XH502' THEN
            PERFORM hxshard.retrying(session_id, tries, started, SQLERRM);
            tries := tries + 1;
        END;
    END LOOP;
END
$$;

CREATE FUNCTION hxshard.state_at(session_id text, seq bigint) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tries integer := 0;
    started timestamptz := clock_timestamp();
BEGIN
    PERFORM hxshard.key_given(session_id);
    LOOP
        BEGIN
            RETURN hxshard_proxy.state_at(session_id, seq);
        EXCEPTION WHEN SQLSTATE 'XH502' THEN
            PERFORM hxshard.retrying(session_id, tries, started, SQLERRM);
            tries := tries + 1;
        END;
    END LOOP;
END
$$;

--
-- Moving a session: copy its log while it is written, fence it, copy
-- the rest and its row and steps, switch its route, retire the source's
-- copy.  Writers pause from the fence to the switch (they retry, above);
-- followers go on from their seq on the new shard, whose log is the same.
--
-- (Procedures that commit cannot have SET clauses: every table and
-- function named below is schema-qualified instead, pg_catalog's too, so
-- that the caller's search_path calls nothing else.)
CREATE PROCEDURE hxshard.move(session_id text, to_shard integer,
                              page_events integer DEFAULT 1000, page_bytes integer DEFAULT 4194304)
LANGUAGE plpgsql
AS $$
DECLARE
    src integer;
    m bigint;
    v_after bigint := 0;   -- the log is copied up to here
    v_head bigint;         -- the source's last seq once fenced
    v_top bigint;
    n bigint;
    total bigint := 0;
    r jsonb;
    st jsonb;
BEGIN
    IF session_id IS NULL OR to_shard IS NULL OR page_events IS NULL OR page_events < 1
       OR page_bytes IS NULL OR page_bytes < 1 THEN
        RAISE EXCEPTION 'a move needs a session, a shard and positive page sizes'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM hxshard.shards() s WHERE s.shard = to_shard) THEN
        RAISE EXCEPTION 'no shard %', to_shard USING ERRCODE = 'invalid_parameter_value';
    END IF;
    src := hxshard.shard_of(session_id);
    IF src = to_shard THEN
        RAISE EXCEPTION 'session % is on shard % already', session_id, to_shard
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM hxshard.move x WHERE x.session_id = move.session_id
                                            AND x.state IN ('copying', 'fenced', 'switched')) THEN
        RAISE EXCEPTION 'session % is moving already', session_id USING ERRCODE = 'XH503';
    END IF;
    INSERT INTO hxshard.move (session_id, from_shard, to_shard, state)
    VALUES (session_id, src, to_shard, 'copying') RETURNING id INTO m;
    COMMIT;

    BEGIN
        -- 1. the log, copied while writers go on
        PERFORM hxshard_proxy.prepare_import(to_shard, session_id, src);
        LOOP
            SELECT pg_catalog.count(*), hxshard_proxy.import_events(to_shard, session_id, src,
                       pg_catalog.array_agg(e.seq ORDER BY e.seq), pg_catalog.array_agg(e.type ORDER BY e.seq),
                       pg_catalog.array_agg(e.event ORDER BY e.seq), pg_catalog.array_agg(e.created_at ORDER BY e.seq))
              INTO n, v_top
              FROM hxshard_proxy.export_events(src, session_id, v_after, page_events, page_bytes) e
            HAVING pg_catalog.count(*) > 0;
            EXIT WHEN n IS NULL;
            total := total + n;
            v_after := v_top;
        END LOOP;

        -- 2. the fence: writers pause from here to the switch
        v_head := hxshard_proxy.fence(src, session_id, to_shard);
        UPDATE hxshard.move x SET state = 'fenced', fenced_at = pg_catalog.clock_timestamp(), head = v_head WHERE x.id = m;
        LOOP
            EXIT WHEN v_after >= v_head;
            SELECT pg_catalog.count(*), hxshard_proxy.import_events(to_shard, session_id, src,
                       pg_catalog.array_agg(e.seq ORDER BY e.seq), pg_catalog.array_agg(e.type ORDER BY e.seq),
                       pg_catalog.array_agg(e.event ORDER BY e.seq), pg_catalog.array_agg(e.created_at ORDER BY e.seq))
              INTO n, v_top
              FROM hxshard_proxy.export_events(src, session_id, v_after, page_events, page_bytes) e
            HAVING pg_catalog.count(*) > 0;
            EXIT WHEN n IS NULL;
            total := total + n;
            v_after := v_top;
        END LOOP;
        r := hxshard_proxy.export_row(src, session_id);
        st := hxshard_proxy.export_steps(src, session_id);
        PERFORM hxshard_proxy.import_row(to_shard, session_id, src, r, st, v_head);
    EXCEPTION WHEN OTHERS THEN
        -- nothing switched: the session goes on where it was
        DECLARE
            msg text := SQLERRM;
            code text := SQLSTATE;
        BEGIN
            BEGIN
                PERFORM hxshard_proxy.unfence(src, session_id);
            EXCEPTION WHEN OTHERS THEN
                NULL; -- the source is unreachable: hxshard.abort_move unfences it later
            END;
            UPDATE hxshard.move x SET state = 'failed', done_at = pg_catalog.clock_timestamp(), error = msg WHERE x.id = m;
            COMMIT;
            RAISE EXCEPTION 'the move of session % to shard % failed: %', session_id, to_shard, msg
                USING ERRCODE = code;
        END;
    END;

    -- 3. the switch: writers go on on the new shard, followers are told
    INSERT INTO hxshard.pin (session_id, shard) VALUES (session_id, to_shard)
        ON CONFLICT ON CONSTRAINT pin_pkey DO UPDATE SET shard = EXCLUDED.shard, since = pg_catalog.now();
    DELETE FROM hxshard.pin p
     WHERE p.session_id = move.session_id
       AND p.shard = (SELECT b.shard FROM hxshard.bucket b WHERE b.bucket = hxshard.bucket_of(move.session_id));
    UPDATE hxshard.move x SET state = 'switched', switched_at = pg_catalog.clock_timestamp(), events = total WHERE x.id = m;
    PERFORM pg_catalog.pg_notify('hxshard_route', CASE WHEN pg_catalog.octet_length(session_id) < 7000 THEN session_id ELSE '*' END);
    COMMIT;

    -- 4. the source's copy is retired (swept later), the target's adopted
    PERFORM hxshard_proxy.adopt(to_shard, session_id);
    PERFORM hxshard_proxy.retire(src, session_id);
    UPDATE hxshard.move x SET state = 'done', done_at = pg_catalog.clock_timestamp() WHERE x.id = m;
    COMMIT;
END
$$;
REVOKE ALL ON PROCEDURE hxshard.move(text, integer, integer, integer) FROM PUBLIC;

-- Finish or undo a move that stopped half way (its process died): one
-- that switched is finished, one that did not is undone
CREATE FUNCTION hxshard.abort_move(session_id text) RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m hxshard.move;
BEGIN
    SELECT * INTO m FROM hxshard.move x WHERE x.session_id = abort_move.session_id
       AND x.state IN ('copying', 'fenced', 'switched') FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'none';
    END IF;
    IF m.state = 'switched' THEN
        PERFORM hxshard_proxy.adopt(m.to_shard, session_id);
        PERFORM hxshard_proxy.retire(m.from_shard, session_id);
        UPDATE hxshard.move SET state = 'done', done_at = clock_timestamp() WHERE id = m.id;
        RETURN 'finished';
    END IF;
    PERFORM hxshard_proxy.unfence(m.from_shard, session_id);
    UPDATE hxshard.move SET state = 'failed', done_at = clock_timestamp(), error = 'aborted' WHERE id = m.id;
    RETURN 'undone';
END
$$;
REVOKE ALL ON FUNCTION hxshard.abort_move(text) FROM PUBLIC;

-- Move a bucket to a shard: new sessions of it are created there from
-- now on, and those that live elsewhere are pinned where they are, then
-- moved one by one.  How many sessions moved.
CREATE PROCEDURE hxshard.move_bucket(bucket integer, to_shard integer, INOUT moved bigint DEFAULT 0)
LANGUAGE plpgsql
AS $$
DECLARE
    s record;
    k text;
BEGIN
    IF bucket IS NULL OR bucket NOT BETWEEN 0 AND 1023 THEN
        RAISE EXCEPTION 'no bucket %', bucket USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM hxshard.shards() x WHERE x.shard = to_shard) THEN
        RAISE EXCEPTION 'no shard %', to_shard USING ERRCODE = 'invalid_parameter_value';
    END IF;
    moved := 0;
    -- the bucket's lock waits for the creates in flight (they hold it
    -- shared: hxshard.lock_bucket), so every session of the bucket is
    -- listed below; its row lock orders this with other moves of it
    PERFORM pg_catalog.pg_advisory_xact_lock('hxshard.bucket'::pg_catalog.regclass::pg_catalog.oid::integer,
                                             move_bucket.bucket);
    PERFORM 1 FROM hxshard.bucket b WHERE b.bucket = move_bucket.bucket FOR UPDATE;
    FOR s IN SELECT x.shard FROM hxshard.shards() x WHERE x.shard <> to_shard LOOP
        INSERT INTO hxshard.pin (session_id, shard)
        SELECT i, s.shard FROM hxshard_proxy.sessions_in(s.shard, ARRAY[bucket], 100000000) i
        ON CONFLICT ON CONSTRAINT pin_pkey DO NOTHING;
    END LOOP;
    UPDATE hxshard.bucket b SET shard = to_shard WHERE b.bucket = move_bucket.bucket;
    PERFORM pg_catalog.pg_notify('hxshard_route', '*');
    COMMIT;
    FOR k IN SELECT p.session_id FROM hxshard.pin p
              WHERE hxshard.bucket_of(p.session_id) = move_bucket.bucket AND p.shard <> to_shard
              ORDER BY p.session_id LOOP
        CALL hxshard.move(k, to_shard);
        moved := moved + 1;
    END LOOP;
END
$$;
REVOKE ALL ON PROCEDURE hxshard.move_bucket(integer, integer, bigint) FROM PUBLIC;

-- Even the buckets out over the shards (after adding one): the shards
-- with more buckets than their share give their highest ones to those
-- with fewer, each bucket moved with its sessions (move_bucket).  How
-- many buckets moved.
CREATE PROCEDURE hxshard.rebalance(INOUT buckets integer DEFAULT 0, max_buckets integer DEFAULT 1024)
LANGUAGE plpgsql
AS $$
DECLARE
    n integer;
    share integer;
    b integer;
    target integer;
    moved bigint;
BEGIN
    buckets := 0;
    SELECT pg_catalog.count(*) INTO n FROM hxshard.shards();
    IF n = 0 THEN RETURN; END IF;
    share := 1024 / n;
    LOOP
        EXIT WHEN buckets >= max_buckets;
        -- the shard with the fewest buckets, and one of the shard with the most
        SELECT x.shard INTO target FROM hxshard.shards() x
          LEFT JOIN hxshard.bucket y ON y.shard = x.shard
         GROUP BY x.shard ORDER BY pg_catalog.count(y.bucket), x.shard LIMIT 1;
        SELECT pg_catalog.max(y.bucket) INTO b FROM hxshard.bucket y
         WHERE y.shard = (SELECT z.shard FROM hxshard.bucket z GROUP BY z.shard
                           ORDER BY pg_catalog.count(*) DESC, z.shard LIMIT 1)
           AND (SELECT pg_catalog.count(*) FROM hxshard.bucket z WHERE z.shard = y.shard) > share
           AND (SELECT pg_catalog.count(*) FROM hxshard.bucket z WHERE z.shard = target) < share;
        EXIT WHEN b IS NULL;
        moved := 0;
        CALL hxshard.move_bucket(b, target, moved);
        buckets := buckets + 1;
    END LOOP;
END
$$;
REVOKE ALL ON PROCEDURE hxshard.rebalance(integer, integer) FROM PUBLIC;

-- Sweep every shard's copies of sessions that moved away (hxshard.sweep
-- on each shard); how many
CREATE FUNCTION hxshard.sweep(older_than interval DEFAULT '10 minutes') RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(sum(n), 0)::bigint FROM hxshard_proxy.sweep(older_than) n;
END;
REVOKE ALL ON FUNCTION hxshard.sweep(interval) FROM PUBLIC;
