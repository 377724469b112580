--
-- test/pgtap/langgraph.sql: LangGraph's add_messages, whole, with hx_merge
--
-- LangGraph merges a node's messages into the state with add_messages
-- (left, right): a message whose id is already in the list replaces it in
-- place, others are appended, RemoveMessage(id) removes the message with
-- that id, and RemoveMessage(REMOVE_ALL_MESSAGES) drops every message
-- before it.  hxstate writes the same with composing ops on the list:
--
--   a message, or a list of them      upsert   (key "id")
--   RemoveMessage(id)                 discard  with "keys": [id]
--   RemoveMessage(REMOVE_ALL_MESSAGES)  clear, then the messages after it
--
-- The cases are those of LangGraph's own tests of add_messages
-- (libs/langgraph/tests/test_messages_state.py), written as states and
-- op lists; messages are objects {"id", "type", "content"}.  Where hxstate
-- differs on purpose, the case says so and shows what hxstate does:
--   - a message without an id is appended as it is: LangGraph gives it a
--     fresh UUID, hxstate does not invent data in the state;
--   - removing an id that is not there is a no-op: LangGraph raises, but a
--     composing op must be idempotent, so that a retried or reordered
--     write still merges.
--
\ir include/preamble.sql

BEGIN;
SELECT plan(16);

-- add_messages(left, right) as hx_merge: each element of right is a
-- message, {"remove": id}, or {"remove_all": true}
CREATE FUNCTION pg_temp.add_messages(left_ jsonb, right_ jsonb) RETURNS jsonb LANGUAGE sql AS $$
  SELECT hx_merge(jsonb_build_object('messages', left_),
                  coalesce((SELECT jsonb_agg(CASE
                      WHEN m ? 'remove' THEN jsonb_build_object('op', 'discard', 'path', '/messages', 'keys', jsonb_build_array(m -> 'remove'))
                      WHEN m ? 'remove_all' THEN '{"op": "clear", "path": "/messages"}'::jsonb
                      ELSE jsonb_build_object('op', 'upsert', 'path', '/messages', 'items', jsonb_build_array(m)) END
                    ORDER BY ord)
                  FROM jsonb_array_elements(right_) WITH ORDINALITY r(m, ord)), '[]')) -> 'messages'
$$;

SELECT is(pg_temp.add_messages('[{"id": "1", "type": "human", "content": "Hello"}]',
                               '[{"id": "2", "type": "ai", "content": "Hi there!"}]'),
  '[{"id": "1", "type": "human", "content": "Hello"}, {"id": "2", "type": "ai", "content": "Hi there!"}]',
  'test_add_single_message: a new id is appended');

SELECT is(pg_temp.add_messages('[{"id": "1", "type": "human", "content": "Hello"}]',
                               '[{"id": "2", "type": "ai", "content": "Hi there!"}, {"id": "3", "type": "system", "content": "System message"}]'),
  '[{"id": "1", "type": "human", "content": "Hello"}, {"id": "2", "type": "ai", "content": "Hi there!"},
    {"id": "3", "type": "system", "content": "System message"}]',
  'test_add_multiple_messages: new ids are appended in order');

SELECT is(pg_temp.add_messages('[{"id": "1", "type": "human", "content": "Hello"}]',
                               '[{"id": "1", "type": "human", "content": "Hello again"}]'),
  '[{"id": "1", "type": "human", "content": "Hello again"}]',
  'test_update_existing_message: a known id replaces the message in place');

SELECT is(pg_temp.add_messages('[{"type": "human", "content": "Hello"}]',
                               '[{"type": "ai", "content": "Hi there!"}]'),
  '[{"type": "human", "content": "Hello"}, {"type": "ai", "content": "Hi there!"}]',
  'test_missing_ids (differs: no UUID is invented): both messages are kept, appended');

SELECT is(pg_temp.add_messages('[{"id": null, "type": "human", "content": "Hello"}]',
                               '[{"id": null, "type": "ai", "content": "Hi there!"}]'),
  '[{"id": null, "type": "human", "content": "Hello"}, {"id": null, "type": "ai", "content": "Hi there!"}]',
  'test_missing_ids with "id": null: a null id is no id, and matches nothing');

SELECT is(pg_temp.add_messages('[]',
                               '[{"id": "1", "type": "ai", "content": "Hi there!"}, {"id": "1", "type": "ai", "content": "Hi there again!"}]'),
  '[{"id": "1", "type": "ai", "content": "Hi there again!"}]',
  'test_duplicates_in_input: one message, with the last content');

SELECT is(pg_temp.add_messages('[{"id": "1", "type": "human", "content": "Hello"}, {"id": "2", "type": "ai", "content": "Hi there!"}]',
                               '[{"remove": "2"}]'),
  '[{"id": "1", "type": "human", "content": "Hello"}]',
  'test_remove_message: RemoveMessage(id) removes that message');

SELECT is(pg_temp.add_messages('[{"id": "1", "type": "human", "content": "Hello"}, {"id": "2", "type": "ai", "content": "Hi there!"}]',
                               '[{"remove": "2"}, {"remove": "2"}]'),
  '[{"id": "1", "type": "human", "content": "Hello"}]',
  'test_duplicate_remove_message: removing twice is removing once');

SELECT is(pg_temp.add_messages('[{"id": "1", "type": "human", "content": "Hello"}]',
                               '[{"remove": "2"}]'),
  '[{"id": "1", "type": "human", "content": "Hello"}]',
  'test_remove_nonexistent_message (differs: no error, discard is idempotent): nothing changes');

SELECT is(pg_temp.add_messages('[{"id": "1", "type": "human", "content": "Hello"}, {"id": "2", "type": "ai", "content": "Hi there!"}]',
                               '[{"id": "1", "type": "human", "content": "Updated hello"}, {"remove": "2"}, {"id": "3", "type": "system", "content": "New message"}]'),
  '[{"id": "1", "type": "human", "content": "Updated hello"}, {"id": "3", "type": "system", "content": "New message"}]',
  'test_mixed_operations: update, remove and append in one write');

SELECT is(pg_temp.add_messages('[]', '[]'), '[]', 'test_empty_inputs: nothing into nothing');
SELECT is(pg_temp.add_messages('[]', '[{"id": "1", "type": "human", "content": "Hello"}]'),
  '[{"id": "1", "type": "human", "content": "Hello"}]', 'test_empty_inputs: a message into an empty list');
SELECT is(pg_temp.add_messages('[{"id": "1", "type": "human", "content": "Hello"}]', '[]'),
  '[{"id": "1", "type": "human", "content": "Hello"}]', 'test_empty_inputs: nothing into a list');

SELECT is(pg_temp.add_messages('[{"id": "1", "type": "human", "content": "Hello"}, {"id": "2", "type": "ai", "content": "Hi there!"}]',
                               '[{"remove": "1"}, {"remove": "2"}]'),
  '[]', 'test_delete_all: removing every id empties the list');

SELECT is(pg_temp.add_messages('[{"id": "1", "type": "human", "content": "Hello"}, {"id": "2", "type": "ai", "content": "Hi there!"}]',
                               '[{"id": "0", "type": "human", "content": "dropped too"}, {"remove_all": true},
                                 {"id": "3", "type": "human", "content": "fresh"}, {"id": "4", "type": "ai", "content": "start"}]'),
  '[{"id": "3", "type": "human", "content": "fresh"}, {"id": "4", "type": "ai", "content": "start"}]',
  'REMOVE_ALL_MESSAGES: only the messages after it stay');

-- and the ops compose: two nodes' writes in either order give the same set of messages
SELECT is((SELECT jsonb_agg(m ORDER BY m ->> 'id') FROM jsonb_array_elements(
             hx_merge(hx_merge('{"messages": [{"id": "1", "content": "a"}, {"id": "2", "content": "b"}]}',
                               '[{"op": "upsert", "path": "/messages", "items": [{"id": "3", "content": "c"}]}]'),
                      '[{"op": "discard", "path": "/messages", "keys": ["1"]}]') -> 'messages') m),
          (SELECT jsonb_agg(m ORDER BY m ->> 'id') FROM jsonb_array_elements(
             hx_merge(hx_merge('{"messages": [{"id": "1", "content": "a"}, {"id": "2", "content": "b"}]}',
                               '[{"op": "discard", "path": "/messages", "keys": ["1"]}]'),
                      '[{"op": "upsert", "path": "/messages", "items": [{"id": "3", "content": "c"}]}]') -> 'messages') m),
  'an upsert and a discard of other ids compose in either order');

ROLLBACK;
