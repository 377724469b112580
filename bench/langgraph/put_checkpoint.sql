-- bench/langgraph/put_checkpoint.sql: the server's side of HxSaver's put
-- alone: 3,000 calls of <schema>.put_checkpoint() in one DO block, each
-- appending a checkpoint of a 1 kB message to the head of one thread and
-- publishing its event (hx_stream_send), as a run's puts do; no commit,
-- no round trip, no Python.  In a database with hxstate, where
-- HxSaver(conn, schema=...).setup() ran; it empties that schema's
-- checkpoints first, and appends to the thread's log stream.
--
--     psql -d DB -v schema=langgraph -f bench/langgraph/put_checkpoint.sql
--
-- Prints the block's time (\timing): divided by 3,000, a put_checkpoint()
-- call's.
SELECT set_config('hxbench.schema', :'schema', false);
SELECT format('TRUNCATE %I.checkpoints', :'schema') \gexec
\timing on
DO $$
DECLARE
    s text := current_setting('hxbench.schema');
    prev text;
    id text;
    r record;
BEGIN
    FOR i IN 1..3000 LOOP
        id := lpad(i::text, 8, '0');
        EXECUTE format('SELECT * FROM %I.put_checkpoint($1, $2, $3, $4, $5, $6, $7, $8, 0, 0, 0, 0, $9, true, NULL, true, '
                       '$10, $11, NULL)', s)
           INTO r
          USING 'bench'::text, ''::text, id, prev, '\x00'::bytea, '{"source": "loop"}'::jsonb,
                ('[{"op": "append", "path": "/messages", "items": ["' || repeat('x', 1000) || '"]}]')::json,
                CASE WHEN prev IS NULL THEN '{}'::json END, coalesce(prev, id),
                ('[{"op": "add", "path": "/messages/-", "value": "' || repeat('x', 1000) || '"}]')::jsonb,
                CASE WHEN prev IS NULL THEN '{}'::jsonb END;
        IF r.status <> 'done' THEN
            RAISE EXCEPTION 'put_checkpoint() answered %', r.status;
        END IF;
        prev := id;
    END LOOP;
END
$$;
