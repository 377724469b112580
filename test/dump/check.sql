-- test/dump/check.sql: a database restored from a dump of
-- test/lib/hxdoc-fixture.sql's, taken at the fixture's snapshot while
-- writes went on (test/dump/run): every state is the one of the snapshot,
-- in line; the side tables are empty; each stream's log replays to its
-- row; then writes go on, and store the large states in pieces again.
-- pgTAP, run by test/dump/run in each restored database.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
SELECT plan(14);

-- hxdoc_fixture_state (a plain table, restored with the rest) holds the
-- states as of the snapshot, as jsonb
SELECT is((SELECT count(*) FROM sessions s JOIN hxdoc_fixture_state f ON f.tab = 'sessions' AND f.key = s.session_id
            WHERE f.state = s.state::jsonb),
          (SELECT count(*) FROM hxdoc_fixture_state WHERE tab = 'sessions'),
          'every session''s state is the one of the dump''s snapshot');
SELECT is((SELECT count(*) FROM sessions), 11::bigint, 'the rows of the snapshot, no more, no fewer');
SELECT is((SELECT count(*) FROM notes n JOIN hxdoc_fixture_state a ON a.tab = 'notes.a' AND a.key = n.id::text
                                        JOIN hxdoc_fixture_state b ON b.tab = 'notes.b' AND b.key = n.id::text
            WHERE a.state IS NOT DISTINCT FROM n.a::jsonb AND b.state IS NOT DISTINCT FROM n.b::jsonb),
          2::bigint, 'both hxdoc columns of notes, NULL included');
SELECT is((SELECT h.state::jsonb FROM held h), (SELECT state FROM hxdoc_fixture_state WHERE tab = 'held'),
          'a value held one generation behind its document was dumped whole');

-- in line until their next write; the side tables (extension members,
-- not dumped) are empty
SELECT is((SELECT array_agg(DISTINCT i.format) FROM (
             SELECT state AS v FROM sessions UNION ALL SELECT a FROM notes UNION ALL SELECT b FROM notes
             UNION ALL SELECT state FROM held) s, hx_doc_info(v) i WHERE v IS NOT NULL),
          '{inline}'::text[], 'every restored value is in line');
SELECT is((SELECT count(*) FROM hx_doc) + (SELECT count(*) FROM hx_chunk), 0::bigint,
          'hx_doc and hx_chunk are empty');

-- the log came along: each stream replays to its row
SELECT is((SELECT count(*) FROM (SELECT stream, max(seq) AS seq FROM hx_event GROUP BY stream) h
             LEFT JOIN sessions s ON 'sessions:' || s.session_id = h.stream
            WHERE hx_stream_state_at(h.stream, h.seq) IS DISTINCT FROM coalesce(s.state::jsonb, 'null')),
          0::bigint, 'every stream''s log replays to its row''s state');

-- writes go on: an append to every session stores the large ones in
-- pieces again, and its delta is logged
CREATE TEMP TABLE before AS SELECT session_id, state::jsonb AS state FROM sessions;
UPDATE sessions SET state = hx_merge(state, '[{"op": "append", "path": "/messages", "items": [{"id": "after-restore"}]}]');
SELECT is((SELECT count(*) FROM sessions s JOIN before b USING (session_id)
            WHERE s.state::jsonb = hx_merge(b.state, '[{"op": "append", "path": "/messages", "items": [{"id": "after-restore"}]}]')),
          11::bigint, 'an append to each session lands');
SELECT is((SELECT array_agg(session_id ORDER BY session_id) FROM sessions, hx_doc_info(state) i WHERE i.format = 'chunked'),
          ARRAY['s-01', 's-02', 's-03', 's-04', 's-05', 's-06', 's-07', 's-08'],
          'the large states are stored in pieces again, the small ones stay in line');
SELECT is((SELECT count(DISTINCT doc) FROM hx_doc), 8::bigint, 'a document each');
UPDATE notes SET a = a::jsonb || '[1]', b = coalesce(b::jsonb, '{}') || '{"x": 1}';
SELECT is((SELECT array_agg((hx_doc_info(a)).format || '/' || (hx_doc_info(b)).format ORDER BY id) FROM notes),
          '{chunked/chunked,inline/inline}'::text[], 'notes too, under its own threshold');
-- a shrink, a delete, hx_store_gc
UPDATE sessions SET state = '{"phase": "done"}' WHERE session_id = 's-08';
DELETE FROM sessions WHERE session_id = 's-07';
SELECT is(hx_store_gc('sessions'), 2::bigint, 'hx_store_gc collects the documents of the shrunk and the deleted state');
SELECT is((SELECT count(*) FROM (SELECT stream, max(seq) AS seq FROM hx_event GROUP BY stream) h
             LEFT JOIN sessions s ON 'sessions:' || s.session_id = h.stream
            WHERE hx_stream_state_at(h.stream, h.seq) IS DISTINCT FROM coalesce(s.state::jsonb, 'null')),
          0::bigint, 'every stream''s log still replays to its row''s state');
SELECT is((SELECT count(*) FROM sessions s JOIN before b USING (session_id)
            WHERE s.session_id <> 's-08'
              AND s.state::jsonb = hx_merge(b.state, '[{"op": "append", "path": "/messages", "items": [{"id": "after-restore"}]}]')),
          9::bigint, 'and the other states are as they were');

SELECT * FROM finish();
ROLLBACK;
