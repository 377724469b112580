-- test/lib/hxdoc-fixture.sql: tables with hxdoc columns in use, for the
-- tests that carry a database elsewhere (test/dump/run: pg_dump and
-- pg_restore; test/upgrade/run: pg_upgrade), run in a database where
-- hxstate (0.7.0 or later) is installed and docs/sessions.sql loaded:
--
--   - sessions s-01 .. s-12, written by hx_merge statement by statement
--     (each change an event of the stream): s-01 .. s-08 large (stored in
--     pieces, in several segments; s-02 with a large string, s-03 edited
--     in the middle of its messages, s-04 with a root of many members),
--     s-09 .. s-11 small (in line), s-07 grown, put back in line and grown
--     again, s-12 deleted last (its document dropped, not yet collected);
--   - notes: two hxdoc columns under one hx_store with its own threshold
--     and segment size (a NULL among them);
--   - held: no hx_store; a copy of s-01's stored value, one generation
--     behind s-01's document (readable: docs/storage.md);
--   - hxdoc_fixture_state: the states as jsonb, with the writes the tests
--     make afterwards computed on jsonb: what the hxdoc values must equal.
\set ON_ERROR_STOP on
SET client_min_messages = warning;

CREATE FUNCTION pg_temp.msg(s text, i int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('id', s || '-m' || i, 'role', CASE WHEN i % 2 = 0 THEN 'user' ELSE 'assistant' END,
                            'content', repeat(md5(s || i), 4)) $$;

INSERT INTO sessions (session_id, user_id)
SELECT 's-' || lpad(i::text, 2, '0'), 'u-' || (i % 3) FROM generate_series(1, 12) i;

-- messages appended one statement at a time: 40 to s-01 .. s-08, 3 to the others
DO $$
BEGIN
  FOR r IN 1..40 LOOP
    UPDATE sessions SET state = hx_merge(state, jsonb_build_array(
             jsonb_build_object('op', 'append', 'path', '/messages', 'items', jsonb_build_array(pg_temp.msg(session_id, r))),
             jsonb_build_object('op', 'increment', 'path', '/turns', 'by', 1)))
     WHERE session_id <= 's-08' OR (session_id = 's-12') OR r <= 3;
  END LOOP;
END $$;
UPDATE sessions SET state = hx_merge(state, jsonb_build_array(jsonb_build_object('op', 'replace', 'path', '/blob',
         'value', (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 200) g))))
 WHERE session_id = 's-02';
UPDATE sessions SET state = hx_merge(state, '[{"op": "replace", "path": "/messages/3/content", "value": "edited in the middle"}]')
 WHERE session_id = 's-03';
UPDATE sessions SET state = state::jsonb || (SELECT jsonb_object_agg('k' || g, g) FROM generate_series(1, 300) g)
 WHERE session_id = 's-04';
UPDATE sessions SET state = hx_merge(state, '[{"op": "replace", "path": "/messages", "value": []}]')
 WHERE session_id = 's-07';
UPDATE sessions SET state = hx_merge(state, jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/messages',
         'items', (SELECT jsonb_agg(pg_temp.msg('s-07b', g)) FROM generate_series(1, 30) g))))
 WHERE session_id = 's-07';

-- a copy of s-01's stored value, then one more write of s-01
CREATE TABLE held (id int PRIMARY KEY, state hxdoc);
INSERT INTO held SELECT 1, state FROM sessions WHERE session_id = 's-01';
UPDATE sessions SET state = hx_merge(state, jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/messages',
         'items', jsonb_build_array(pg_temp.msg('s-01', 41)))))
 WHERE session_id = 's-01';

CREATE TABLE notes (id int PRIMARY KEY, a hxdoc, b hxdoc);
CREATE TRIGGER notes_store BEFORE INSERT OR UPDATE OR DELETE ON notes
  FOR EACH ROW EXECUTE FUNCTION hx_store('a', 'b', 'threshold=512', 'segment=2048');
INSERT INTO notes VALUES
  (1, (SELECT jsonb_agg(pg_temp.msg('n-a', g)) FROM generate_series(1, 30) g),
      jsonb_build_object('files', (SELECT jsonb_object_agg('f' || g, pg_temp.msg('n-b', g)) FROM generate_series(1, 30) g))),
  (2, '{"small": true}', NULL);
UPDATE notes SET a = hx_merge(a, jsonb_build_array(jsonb_build_object('op', 'append', 'path', '', 'items',
         jsonb_build_array(pg_temp.msg('n-a', 31)))))
 WHERE id = 1;

-- last: s-12 deleted (no later write of sessions deletes its document)
DELETE FROM sessions WHERE session_id = 's-12';

-- the states, and what the tests' writes make of them, as jsonb
CREATE TABLE hxdoc_fixture_state AS
SELECT 'sessions' AS tab, session_id AS key, state::jsonb AS state FROM sessions
UNION ALL SELECT 'notes.a', id::text, a::jsonb FROM notes
UNION ALL SELECT 'notes.b', id::text, b::jsonb FROM notes
UNION ALL SELECT 'held', id::text, state::jsonb FROM held;

DO $$
BEGIN
  IF (SELECT count(*) FROM sessions, hx_doc_info(state) i WHERE i.format = 'chunked') <> 8 OR
     (SELECT count(*) FROM hx_doc WHERE dropped) <> 1 OR
     (SELECT (hx_doc_info(state)).format FROM held) <> 'chunked' THEN
    RAISE EXCEPTION 'the fixture is not laid out as test/lib/hxdoc-fixture.sql says';
  END IF;
END $$;
