-- test/logical/workload.sql: the publisher's writes while its
-- subscriptions stream (test/logical/run), each statement a transaction
-- of its own unless it says BEGIN.  The sessions table is
-- docs/sessions.sql's (state hxdoc, hx_store, the stream trigger) loaded
-- with test/lib/hxdoc-fixture.sql; notes has two hxdoc columns and
-- REPLICA IDENTITY FULL (its old values are decoded too).
\set ON_ERROR_STOP on
SET client_min_messages = warning;

CREATE FUNCTION pg_temp.msg(s text, i int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('id', s || '-r' || i, 'content', repeat(md5(s || i), 3)) $$;
CREATE FUNCTION pg_temp.append(s text, i int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/messages', 'items', jsonb_build_array(pg_temp.msg(s, i)))) $$;

-- appends, one statement each
UPDATE sessions SET state = hx_merge(state, pg_temp.append(session_id, 1));
UPDATE sessions SET state = hx_merge(state, pg_temp.append(session_id, 2)) WHERE session_id <= 's-04';
UPDATE sessions SET state = hx_merge(state, pg_temp.append(session_id, 3)) WHERE session_id <= 's-02';
-- edits in the middle of the messages, and of the skeleton
UPDATE sessions SET state = hx_merge(state, '[{"op": "replace", "path": "/messages/5/content", "value": "edited"},
                                              {"op": "increment", "path": "/turns", "by": 1}]')
 WHERE session_id IN ('s-01', 's-03', 's-05');
UPDATE sessions SET state = hx_patch(state, '[{"op": "add", "path": "/messages/10", "value": {"id": "inserted"}},
                                             {"op": "remove", "path": "/messages/2"}]')
 WHERE session_id = 's-02';
-- a state put back in line, and grown again
UPDATE sessions SET state = '{"phase": "done"}' WHERE session_id = 's-06';
UPDATE sessions SET state = hx_merge(state, jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/messages',
         'items', (SELECT jsonb_agg(pg_temp.msg('s-06', g)) FROM generate_series(1, 40) g))))
 WHERE session_id = 's-06';
UPDATE sessions SET state = '{"phase": "done"}' WHERE session_id = 's-08';
-- a row deleted, one inserted large, one small
DELETE FROM sessions WHERE session_id = 's-03';
INSERT INTO sessions (session_id, user_id, state)
SELECT 's-21', 'u', jsonb_build_object('messages', (SELECT jsonb_agg(pg_temp.msg('s-21', g)) FROM generate_series(1, 60) g));
INSERT INTO sessions (session_id, user_id) VALUES ('s-22', 'u');
-- an UPDATE that leaves the state alone (the row is written, the state kept)
UPDATE sessions SET updated_at = now() WHERE session_id IN ('s-01', 's-09');

-- one transaction writing several sessions, one of them twice, and a row
-- inserted and written again in it
BEGIN;
UPDATE sessions SET state = hx_merge(state, pg_temp.append(session_id, 10)) WHERE session_id = 's-01';
UPDATE sessions SET state = hx_merge(state, pg_temp.append(session_id, 10)) WHERE session_id = 's-04';
UPDATE sessions SET state = hx_merge(state, pg_temp.append(session_id, 11)) WHERE session_id = 's-01';
INSERT INTO sessions (session_id, user_id, state)
SELECT 's-23', 'u', jsonb_build_object('messages', (SELECT jsonb_agg(pg_temp.msg('s-23', g)) FROM generate_series(1, 40) g));
UPDATE sessions SET state = hx_merge(state, pg_temp.append(session_id, 1)) WHERE session_id = 's-23';
COMMIT;

-- one session written many times in one transaction: each write replaces
-- segments and deletes those the one before replaced, which the decoding
-- of the earlier writes still reads
BEGIN;
UPDATE sessions SET state = hx_merge(state, pg_temp.append(session_id, 20)) WHERE session_id = 's-02';
UPDATE sessions SET state = hx_merge(state, '[{"op": "replace", "path": "/messages/0/content", "value": "first edit"}]') WHERE session_id = 's-02';
UPDATE sessions SET state = hx_merge(state, '[{"op": "replace", "path": "/messages/0/content", "value": "second edit"}]') WHERE session_id = 's-02';
UPDATE sessions SET state = hx_merge(state, '[{"op": "replace", "path": "/messages/0/content", "value": "third edit"}]') WHERE session_id = 's-02';
UPDATE sessions SET state = hx_merge(state, pg_temp.append(session_id, 21)) WHERE session_id = 's-02';
COMMIT;

-- a transaction that rolls back, and one whose savepoint rolls back (on a
-- row the rest of the transaction does not write again: see
-- test/logical/run)
BEGIN;
UPDATE sessions SET state = hx_merge(state, pg_temp.append(session_id, 30));
ROLLBACK;
BEGIN;
UPDATE sessions SET state = hx_merge(state, pg_temp.append(session_id, 31)) WHERE session_id = 's-04';
SAVEPOINT sp;
UPDATE sessions SET state = hx_merge(state, pg_temp.append(session_id, 32)) WHERE session_id = 's-05';
ROLLBACK TO SAVEPOINT sp;
UPDATE sessions SET state = hx_merge(state, pg_temp.append(session_id, 33)) WHERE session_id = 's-07';
COMMIT;

-- a large transaction: past logical_decoding_work_mem (64kB here), so the
-- walsender spills it to disk, or streams it before it commits
BEGIN;
DO $$
BEGIN
  FOR r IN 100..160 LOOP
    UPDATE sessions SET state = hx_merge(state, pg_temp.append(session_id, r)) WHERE session_id IN ('s-01', 's-02', 's-21');
  END LOOP;
END $$;
INSERT INTO sessions (session_id, user_id, state)
SELECT 's-24', 'u', jsonb_build_object('messages', (SELECT jsonb_agg(pg_temp.msg('s-24', g)) FROM generate_series(1, 3000) g));
DELETE FROM sessions WHERE session_id = 's-21';
COMMIT;

-- notes: REPLICA IDENTITY FULL, two columns under one hx_store
UPDATE notes SET a = a::jsonb || jsonb_build_array(pg_temp.msg('n', 1)) WHERE id = 1;
UPDATE notes SET b = jsonb_build_object('files', (SELECT jsonb_object_agg('f' || g, pg_temp.msg('n2', g)) FROM generate_series(1, 20) g))
 WHERE id = 2;
UPDATE notes SET a = a::jsonb || jsonb_build_array(pg_temp.msg('n', 2)), b = b::jsonb || '{"x": 1}';
DELETE FROM notes WHERE id = 1;
INSERT INTO notes SELECT 3, (SELECT jsonb_agg(pg_temp.msg('n3', g)) FROM generate_series(1, 20) g), NULL;
