-- test/logical/offline.sql: the publisher's writes while one subscription
-- is disabled, so that its slot is behind them (test/logical/run): the
-- walsender decodes each change later, reading the documents as they
-- were then (the side tables are user catalog tables: their old rows are
-- kept for the slot), after the documents moved on, their rows were
-- deleted and collected, and the side tables were vacuumed and rewritten.
\set ON_ERROR_STOP on
SET client_min_messages = warning;

UPDATE sessions SET state = hx_merge(state, '[{"op": "append", "path": "/messages", "items": [{"id": "offline 1"}]}]');
UPDATE sessions SET state = hx_merge(state, '[{"op": "replace", "path": "/messages/1/content", "value": "offline edit"}]')
 WHERE session_id IN ('s-01', 's-02', 's-24');
UPDATE sessions SET state = hx_merge(state, '[{"op": "append", "path": "/messages", "items": [{"id": "offline 2"}]}]');
UPDATE sessions SET state = hx_merge(state, '[{"op": "append", "path": "/messages", "items": [{"id": "offline 3"}]}]')
 WHERE session_id = 's-01';
DELETE FROM sessions WHERE session_id IN ('s-05', 's-23');
UPDATE sessions SET state = '{"small": "again"}' WHERE session_id = 's-06';
SELECT hx_store_gc() >= 0 AS collected;
VACUUM hx_chunk, hx_doc;
VACUUM FULL hx_chunk;
CLUSTER hx_doc USING hx_doc_pkey;
UPDATE sessions SET state = hx_merge(state, '[{"op": "append", "path": "/messages", "items": [{"id": "after the rewrite"}]}]')
 WHERE session_id IN ('s-01', 's-24');
