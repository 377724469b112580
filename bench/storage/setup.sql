--
-- bench/storage/setup.sql: the database of bench/storage.sh.
--
-- Two tables of one definition, docs/sessions.sql's (its guards and its
-- stream trigger on), in two schemas: layout_jsonb.sessions keeps the
-- state as jsonb (COMPRESSION lz4, as the README recommended before 0.7.0),
-- layout_hxdoc.sessions as hxdoc with hx_store.  bench/storage.sh makes
-- them from docs/sessions.sql; this file has what the runs call.
--
SET client_min_messages = warning;

-- a message of about 200 bytes, as a chat's turn or a tool's short answer
CREATE FUNCTION bench_msg(i int) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object('id', 'm' || i, 'role', (ARRAY['user', 'assistant', 'tool'])[i % 3 + 1],
    'content', left(repeat(md5(i::text) || ' the tool answered ', 6), 140))
$$;

-- a session's state with n messages, and the little else an agent keeps
CREATE FUNCTION bench_state(n int) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object(
    'messages', coalesce((SELECT jsonb_agg(bench_msg(i) ORDER BY i) FROM generate_series(1, n) i), '[]'),
    'phase_data', jsonb_build_object('step', 'plan', 'status', 'idle'),
    'stats', jsonb_build_object('tool_calls', 0, 'tokens_in', 0, 'tokens_out', 0))
$$;

-- the three writes measured: an append of one message, a tool step of ten
-- ops, a replace of one scalar
CREATE FUNCTION bench_ops(kind text, i int) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE kind
    WHEN 'append' THEN jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/messages',
                                                            'items', jsonb_build_array(bench_msg(i))))
    WHEN 'merge10' THEN jsonb_build_array(
      jsonb_build_object('op', 'append', 'path', '/messages', 'items', jsonb_build_array(bench_msg(i))),
      jsonb_build_object('op', 'increment', 'path', '/stats/tool_calls', 'by', 1),
      jsonb_build_object('op', 'increment', 'path', '/stats/tokens_in', 'by', 310),
      jsonb_build_object('op', 'increment', 'path', '/stats/tokens_out', 'by', 42),
      jsonb_build_object('op', 'replace', 'path', '/phase_data/status', 'value', 'tool ' || i),
      jsonb_build_object('op', 'replace', 'path', '/phase_data/last_call', 'value', 'toolu_' || i),
      jsonb_build_object('op', 'union', 'path', '/tags', 'items', jsonb_build_array('t' || (i % 5))),
      jsonb_build_object('op', 'upsert', 'path', '/todos', 'items',
                         jsonb_build_array(jsonb_build_object('id', 't' || (i % 8 + 1), 'done', true))),
      jsonb_build_object('op', 'merge', 'path', '/meta', 'value', jsonb_build_object('turn', i)),
      jsonb_build_object('op', 'delete', 'path', '/scratch'))
    ELSE jsonb_build_array(jsonb_build_object('op', 'replace', 'path', '/phase_data/status', 'value', 'status ' || i))
  END
$$;

-- the WAL of each of count writes of a kind to one session, each in a
-- transaction of its own (nothing else runs: autovacuum is off)
CREATE TABLE bench_wal (layout text, size int, kind text, i int, bytes numeric);
CREATE PROCEDURE bench_measure_wal(layout text, size int, kind text, count int, first int)
LANGUAGE plpgsql AS $$
DECLARE
  a pg_lsn;
  b pg_lsn;
BEGIN
  FOR i IN first .. first + count - 1 LOOP
    a := pg_current_wal_insert_lsn();
    EXECUTE format('UPDATE %I.sessions SET state = hx_merge(state, $1) WHERE session_id = $2', 'layout_' || layout)
      USING bench_ops(kind, i), 's-0';
    COMMIT;
    b := pg_current_wal_insert_lsn();
    INSERT INTO bench_wal VALUES (layout, size, kind, i, pg_wal_lsn_diff(b, a));
    COMMIT;
  END LOOP;
END $$;

-- the time to read a session's whole state, count times: the state as
-- jsonb (hxdoc: read whole, from its segments), and a member of it, which
-- needs all of it (jsonb: detoasted and decompressed whole)
CREATE TABLE bench_read (layout text, size int, i int, ms float8);
CREATE PROCEDURE bench_measure_read(layout text, size int, count int)
LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz;
  v jsonb;
BEGIN
  FOR i IN 1 .. count LOOP
    t0 := clock_timestamp();
    EXECUTE format('SELECT (state::jsonb) -> %L FROM %I.sessions WHERE session_id = %L', 'stats', 'layout_' || layout, 's-0') INTO v;
    INSERT INTO bench_read VALUES (layout, size, i, extract(epoch FROM clock_timestamp() - t0) * 1000);
  END LOOP;
END $$;
