--
-- runs: a run's events in a row's stream (hx_stream_emit), as the run makes
-- them: its messages, tool calls and reasoning, between the state events
-- of the row's changes
--
-- (err() is defined in setup.sql)
CREATE VIEW run_events AS
	SELECT stream, seq, type, event - 'timestamp' AS event FROM hx_event;

CREATE TABLE chats (id text PRIMARY KEY, owner text NOT NULL DEFAULT current_user, state jsonb NOT NULL DEFAULT '{}');
CREATE TRIGGER chats_stream AFTER INSERT OR UPDATE OR DELETE ON chats
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
INSERT INTO chats (id, state) VALUES ('c-1', '{"messages": [{"id": "u1", "role": "user", "content": "hi"}]}');

-- a batch of a run's events per call: each the stream's next seq, with
-- metadata {stream, seq} and a timestamp; the seq of the last comes back
SELECT hx_stream_emit('chats', 'c-1', '[
  {"type": "STEP_STARTED", "stepName": "model"},
  {"type": "REASONING_START", "messageId": "r1"},
  {"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning"},
  {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "the user greets"},
  {"type": "REASONING_MESSAGE_END", "messageId": "r1"},
  {"type": "REASONING_END", "messageId": "r1"},
  {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
  {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "Hel"}
]') AS last_seq;
SELECT hx_stream_emit('chats', 'c-1', '[
  {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "lo!"},
  {"type": "TEXT_MESSAGE_END", "messageId": "a1"},
  {"type": "TOOL_CALL_START", "toolCallId": "t1", "toolCallName": "lookup", "parentMessageId": "a1"},
  {"type": "TOOL_CALL_ARGS", "toolCallId": "t1", "delta": "{\"q\": \"x\"}"},
  {"type": "TOOL_CALL_END", "toolCallId": "t1"},
  {"type": "TOOL_CALL_RESULT", "messageId": "tr1", "toolCallId": "t1", "content": "found", "role": "tool"},
  {"type": "STEP_FINISHED", "stepName": "model"},
  {"type": "CUSTOM", "name": "usage", "value": {"tokens": 12}, "metadata": {"stream": "elsewhere", "seq": 1}}
]') AS last_seq;
-- the finished message goes into the state as usual: its delta takes the
-- next seq
UPDATE chats SET state = hx_merge(state, '[{"op": "append", "path": "/messages", "items": [{"id": "a1", "role": "assistant", "content": "Hello!"}]}]');
SELECT * FROM run_events WHERE stream = 'chats:c-1' ORDER BY seq;
SELECT bool_and((event->>'timestamp')::numeric > 0) AS timestamps FROM hx_event WHERE stream = 'chats:c-1';
-- a run's events change no state: every seq replays to the state the
-- row had then (the fragments' "delta" strings are no patches)
SELECT seq, hx_stream_state_at('chats:c-1', seq) -> 'messages' -> -1 ->> 'id' AS last_message
  FROM generate_series(1, 18) seq WHERE seq IN (1, 9, 17, 18);
-- an empty batch writes nothing and says where the stream is
SELECT hx_stream_emit('chats', 'c-1', '[]') AS last_seq;

-- a log stream takes a run's events too
SELECT hx_stream_send('@run-1', '{"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}');
SELECT hx_stream_send('@run-1', '{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}');
SELECT hx_stream_send('@run-1', '{"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}');
SELECT hx_stream_send('@run-1', '{"type": "TOOL_CALL_RESULT", "messageId": "r", "toolCallId": "t", "content": [{"type": "text", "text": "ok"}]}');
SELECT seq, hx_stream_state_at('@run-1', seq) FROM generate_series(3, 4) seq;

\pset tuples_only on
\pset format unaligned
-- what a row's stream does not take from a writer: state events (its
-- changes make them), hxstate's own CUSTOM events, unknown types
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "STATE_SNAPSHOT", "snapshot": {}}]')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "STATE_DELTA", "delta": []}]')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "MESSAGES_SNAPSHOT", "messages": []}]')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "CUSTOM", "name": "hx.stream_end", "value": {"reason": "x"}}]')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}]')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}]')$$);
-- events without their members, or with members of the wrong shape
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1"}]')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": 7}]')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "TOOL_CALL_START", "toolCallId": "t"}]')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "t", "content": {}}]')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "TEXT_MESSAGE_END", "messageId": "a1", "snapshot": {}}]')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "CUSTOM", "name": "x", "delta": []}]')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[7]')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"messageId": "a1"}]')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '{"type": "TEXT_MESSAGE_END", "messageId": "a1"}')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '"x"')$$);
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', NULL)$$);
SELECT err($$SELECT hx_stream_emit('chats', NULL, '[]')$$);
-- all or none: a bad event anywhere in the batch writes nothing
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "TEXT_MESSAGE_START", "messageId": "a2"}, {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a2"}]')$$);
-- no such row, no stream trigger, a key the key column cannot take
SELECT err($$SELECT hx_stream_emit('chats', 'c-404', '[{"type": "STEP_STARTED", "stepName": "s"}]')$$);
CREATE TABLE unstreamed (id text PRIMARY KEY);
SELECT err($$SELECT hx_stream_emit('unstreamed', 'x', '[]')$$);
DROP TABLE unstreamed;
CREATE TABLE counted (id int PRIMARY KEY, state jsonb);
CREATE TRIGGER counted_stream AFTER INSERT OR UPDATE OR DELETE ON counted
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
SELECT err($$SELECT hx_stream_emit('counted', 'seven', '[]')$$);
DROP TABLE counted;
-- a write: not in a read-only transaction
BEGIN READ ONLY;
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "STEP_STARTED", "stepName": "s"}]')$$);
ROLLBACK;
\pset tuples_only off
\pset format aligned
SELECT max(seq) AS still_last FROM hx_event WHERE stream = 'chats:c-1';

-- who may: a role that may update the row, as row-level security lets it;
-- it needs nothing on the log (the table's owner logs)
CREATE ROLE regress_hx_runner;
CREATE ROLE regress_hx_viewer;
GRANT SELECT, UPDATE ON chats TO regress_hx_runner;
GRANT SELECT ON chats TO regress_hx_viewer;
INSERT INTO chats (id, owner) VALUES ('c-2', 'regress_hx_runner'), ('c-3', 'someone else');
ALTER TABLE chats ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_chats ON chats TO regress_hx_runner, regress_hx_viewer USING (owner = current_user);
SET ROLE regress_hx_runner;
SELECT hx_stream_emit('chats', 'c-2', '[{"type": "STEP_STARTED", "stepName": "s"}]') AS own_row;
\pset tuples_only on
\pset format unaligned
SELECT err($$SELECT hx_stream_emit('chats', 'c-3', '[{"type": "STEP_STARTED", "stepName": "s"}]')$$);
RESET ROLE;
SET ROLE regress_hx_viewer;
SELECT err($$SELECT hx_stream_emit('chats', 'c-1', '[{"type": "STEP_STARTED", "stepName": "s"}]')$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;
ALTER TABLE chats DISABLE ROW LEVEL SECURITY;
SELECT stream, max(seq) FROM hx_event WHERE stream IN ('chats:c-2', 'chats:c-3') GROUP BY 1 ORDER BY 1;

DROP TABLE chats;
DROP VIEW run_events;
DROP ROLE regress_hx_runner, regress_hx_viewer;
DELETE FROM hx_event;
