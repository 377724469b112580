-- test/upgrade/store-after.sql: the cluster with hxdoc tables in use,
-- upgraded to PostgreSQL 18 (test/upgrade/run): every value reads as
-- before and as its log replays; the value one generation behind and the
-- dropped document are still there; writes go on, into the documents the
-- rows had, and new documents are numbered after the old ones.  pgTAP.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
SELECT plan(19);

SELECT is((SELECT extversion FROM pg_extension WHERE extname = 'hxstate'),
          (SELECT default_version FROM pg_available_extensions WHERE name = 'hxstate'),
          'hxstate is at the library''s version');
SELECT cmp_ok(current_setting('server_version_num')::int, '>=', 180000, 'the server is PostgreSQL 18');

-- reading
SELECT is((SELECT count(*) FROM sessions s JOIN hxdoc_fixture_state f ON f.tab = 'sessions' AND f.key = s.session_id
            WHERE f.state = s.state::jsonb), 11::bigint, 'every session''s state reads as before');
SELECT is((SELECT count(*) FROM notes n
             JOIN hxdoc_fixture_state a ON a.tab = 'notes.a' AND a.key = n.id::text
             JOIN hxdoc_fixture_state b ON b.tab = 'notes.b' AND b.key = n.id::text
            WHERE a.state IS NOT DISTINCT FROM n.a::jsonb AND b.state IS NOT DISTINCT FROM n.b::jsonb),
          2::bigint, 'both hxdoc columns of notes read as before');
SELECT is((SELECT h.state::jsonb FROM held h), (SELECT state FROM hxdoc_fixture_state WHERE tab = 'held'),
          'the value held one generation behind its document reads as before');
SELECT is((SELECT (hx_doc_info(h.state)).gen + 1 FROM held h),
          (SELECT (hx_doc_info(s.state)).gen FROM sessions s WHERE session_id = 's-01'),
          'it is one generation behind s-01''s');
SELECT is((SELECT count(*) FROM (SELECT stream, max(seq) AS seq FROM hx_event GROUP BY stream) h
             LEFT JOIN sessions s ON 'sessions:' || s.session_id = h.stream
            WHERE hx_stream_state_at(h.stream, h.seq) IS DISTINCT FROM coalesce(s.state::jsonb, 'null')),
          0::bigint, 'every stream''s log replays to its row''s state');
SELECT is((SELECT count(*) FROM hx_doc d WHERE d.dropped AND d.rel = 'sessions'::regclass), 1::bigint,
          'the deleted row''s document is still there, dropped');

-- writing: into the documents the rows had
CREATE TEMP TABLE before AS SELECT session_id, state::jsonb AS state FROM sessions;
UPDATE sessions SET state = hx_merge(state, '[{"op": "append", "path": "/messages", "items": [{"id": "after the upgrade"}]}]');
SELECT is((SELECT count(*) FROM sessions s JOIN before b USING (session_id)
            WHERE s.state::jsonb = hx_merge(b.state, '[{"op": "append", "path": "/messages", "items": [{"id": "after the upgrade"}]}]')),
          11::bigint, 'an append to every session lands');
SELECT is((SELECT count(*) FROM sessions s JOIN upgrade_docs u USING (session_id), hx_doc_info(s.state) i
            WHERE i.format = 'chunked' AND i.doc = u.doc AND i.gen = u.gen + 1),
          (SELECT count(*) FROM upgrade_docs),
          'each state in pieces is written into its own document, its next generation');
SELECT is((SELECT count(*) FROM hx_doc d WHERE d.dropped AND d.rel = 'sessions'::regclass), 0::bigint,
          'and the writes deleted the dropped document');
UPDATE sessions SET state = hx_merge(state, '[{"op": "replace", "path": "/messages/0/content", "value": "edited once"}]')
 WHERE session_id = 's-01';
UPDATE sessions SET state = hx_merge(state, '[{"op": "replace", "path": "/messages/0/content", "value": "edited twice"}]')
 WHERE session_id = 's-01';
SELECT throws_ok($$SELECT state::text FROM held$$, 'XH401', NULL,
                 'once two writes replaced its segments, the held value is gone (XH401), as documented');
INSERT INTO sessions (session_id, user_id, state)
SELECT 's-30', 'u', jsonb_build_object('messages', (SELECT jsonb_agg(repeat('n', 100) || g) FROM generate_series(1, 60) g));
SELECT cmp_ok((SELECT (hx_doc_info(state)).doc FROM sessions WHERE session_id = 's-30'), '>',
              (SELECT doc_seq FROM upgrade_marks), 'a new document is numbered after the old ones (hx_doc_seq carried over)');
SELECT is((SELECT count(DISTINCT (hx_doc_info(state)).doc) FROM sessions, hx_doc_info(state) i WHERE i.format = 'chunked'),
          (SELECT count(*) FROM sessions, hx_doc_info(state) i WHERE i.format = 'chunked'), 'no two rows share a document');
UPDATE sessions SET state = '{"phase": "done"}' WHERE session_id = 's-08';
SELECT is((SELECT (hx_doc_info(state)).format FROM sessions WHERE session_id = 's-08'), 'inline',
          'a state put back in line');
DELETE FROM sessions WHERE session_id IN ('s-07', 's-09');
UPDATE notes SET a = a::jsonb || '["after"]', b = coalesce(b::jsonb, '{}') || '{"after": true}';
SELECT is((SELECT array_agg((hx_doc_info(a)).format || '/' || (hx_doc_info(b)).format ORDER BY id) FROM notes),
          '{chunked/chunked,inline/inline}'::text[], 'notes is written on, under its own threshold');
SELECT cmp_ok(hx_store_gc(), '>=', 1::bigint, 'hx_store_gc collects what the shrink and the deletes left');
SELECT is((SELECT count(*) FROM hx_doc WHERE rel = 'sessions'::regclass),
          (SELECT count(*) FROM sessions, hx_doc_info(state) i WHERE i.format = 'chunked'),
          'then sessions has one document per state in pieces');
SELECT is((SELECT count(*) FROM (SELECT stream, max(seq) AS seq FROM hx_event GROUP BY stream) h
             LEFT JOIN sessions s ON 'sessions:' || s.session_id = h.stream
            WHERE hx_stream_state_at(h.stream, h.seq) IS DISTINCT FROM coalesce(s.state::jsonb, 'null')),
          0::bigint, 'every stream''s log still replays to its row''s state');

SELECT * FROM finish();
COMMIT;
