--
-- hx_merge(state, writes): step writes that compose across parallel tools
--

--
-- How a runtime's tool writes land: each tool's draft mutations become an
-- op list, and parallel tools' lists merge into one state
--
-- Tool 1: draft.items.push('a'); Tool 2: draft.items.push('b'): both survive
SELECT hx_merge(hx_merge('{"items": []}',
	'[{"op": "append", "path": "/items", "items": ["a"]}]'),
	'[{"op": "append", "path": "/items", "items": ["b"]}]') AS items;
-- Tool 1: draft.count = 5; Tool 2: draft.count = 10: last write wins
SELECT hx_merge(hx_merge('{"count": 0}',
	'[{"op": "replace", "path": "/count", "value": 5}]'),
	'[{"op": "replace", "path": "/count", "value": 10}]') AS count;
SELECT hx_merge(hx_merge('{"count": 0}',
	'[{"op": "replace", "path": "/count", "value": 10}]'),
	'[{"op": "replace", "path": "/count", "value": 5}]') AS count;
-- draft.temp = null: the temp key is removed
SELECT hx_merge('{"temp": 21.5, "keep": true}', '[{"op": "replace", "path": "/temp", "value": null}]');
-- mergeCustomState({ values: { key1: 'value1' } }) and { key2 } from two tools
SELECT hx_merge(hx_merge('{}', '{"values": {"key1": "value1"}}'), '{"values": {"key2": "value2"}}');
-- the same written as RFC 6902 ops, as other producers emit them
SELECT hx_merge(hx_merge('{"notes": []}',
	'[{"op": "add", "path": "/notes/-", "value": "a"}]'),
	'[{"op": "add", "path": "/notes/-", "value": "b"}]') AS notes;

--
-- append
--
SELECT hx_merge('{"log": [1]}', '[{"op": "append", "path": "/log", "items": [2, {"x": 3}]}]');
SELECT hx_merge('{}', '[{"op": "append", "path": "/run/log", "items": ["created"]}]');
SELECT hx_merge('{}', '[{"op": "append", "path": "/log", "items": []}]');
SELECT hx_merge('[1]', '[{"op": "append", "path": "", "items": [2]}]');
SELECT hx_merge('{"m": [[1]]}', '[{"op": "append", "path": "/m/0", "items": [2]}]');

--
-- replace: sets, creating parents; null removes an object member
--
SELECT hx_merge('{"a": 1}', '[{"op": "replace", "path": "/a", "value": {"b": 2}}]');
SELECT hx_merge('{}', '[{"op": "replace", "path": "/x/y/z", "value": 1}]');
SELECT hx_merge('{"a": 1}', '[{"op": "replace", "path": "/missing", "value": null}]');
SELECT hx_merge('{"a": [1, 2]}', '[{"op": "replace", "path": "/a/1", "value": null}]');
SELECT hx_merge('{"a": 1}', '[{"op": "replace", "path": "", "value": ["whole"]}]');

--
-- delete: a missing path is no error
--
SELECT hx_merge('{"a": {"b": 1, "c": 2}}', '[{"op": "delete", "path": "/a/b"}]');
SELECT hx_merge('{"a": 1}', '[{"op": "delete", "path": "/nope/deeper"}]');
SELECT hx_merge('{"a": [1, 2, 3]}', '[{"op": "delete", "path": "/a/0"}, {"op": "delete", "path": "/a/9"}]');
SELECT hx_merge('{"a": "text"}', '[{"op": "delete", "path": "/a/b"}]');

--
-- increment: missing counts as 0, sums are exact
--
SELECT hx_merge('{"n": 1}', '[{"op": "increment", "path": "/n", "by": 2}]');
SELECT hx_merge('{}', '[{"op": "increment", "path": "/stats/calls", "by": 1}]');
SELECT hx_merge('{"n": 0.1}', '[{"op": "increment", "path": "/n", "by": 0.2}, {"op": "increment", "path": "/n", "by": -1}]');
SELECT hx_merge('{"big": 9007199254740993}', '[{"op": "increment", "path": "/big", "by": 1}]');
SELECT hx_merge('{"a": [5]}', '[{"op": "increment", "path": "/a/0", "by": 5}]');

--
-- union: appends what is not there yet, by JSON value (1.0 is 1, keys in any order)
--
SELECT hx_merge('{"tags": ["a", 1, {"x": 1, "y": 2}]}',
	'[{"op": "union", "path": "/tags", "items": ["b", "a", 1.0, {"y": 2, "x": 1}, "b", null]}]');
SELECT hx_merge('{}', '[{"op": "union", "path": "/tags", "items": [1, 1, 2]}]');
-- idempotent
SELECT hx_merge(hx_merge('{}', '[{"op": "union", "path": "/s", "items": [1, 2]}]'),
	'[{"op": "union", "path": "/s", "items": [2, 1]}]');
-- edits between unions are seen: 5 is already there after the replace
SELECT hx_merge('{}', '[{"op": "union", "path": "/s", "items": [1, 2]},
	{"op": "replace", "path": "/s/0", "value": 5}, {"op": "union", "path": "/s", "items": [5, 1]},
	{"op": "increment", "path": "/s/1", "by": 1}, {"op": "union", "path": "/s", "items": [3, 2]}]');

--
-- upsert: the element with the same key is replaced in place, others append
--
SELECT hx_merge('{"messages": [{"id": "m1", "text": "draft"}, {"id": "m2", "text": "hi"}]}',
	'[{"op": "upsert", "path": "/messages", "items": [{"id": "m1", "text": "final"}, {"id": "m3", "text": "new"}]}]');
SELECT hx_merge('{"todos": [{"key": 1, "done": false}]}',
	'[{"op": "upsert", "path": "/todos", "key": "key", "items": [{"key": 1.0, "done": true}, {"done": false}]}]');
SELECT hx_merge('{}', '[{"op": "upsert", "path": "/m", "items": [{"id": 1, "v": "a"}, {"id": 1, "v": "b"}]}]');
-- idempotent
SELECT hx_merge(hx_merge('{"m": []}', '[{"op": "upsert", "path": "/m", "items": [{"id": 1}]}]'),
	'[{"op": "upsert", "path": "/m", "items": [{"id": 1}]}]');
-- a key changed in place between upserts is seen, and each upsert uses its own key
SELECT hx_merge('{}', '[{"op": "upsert", "path": "/m", "items": [{"id": 1, "n": 1}]},
	{"op": "replace", "path": "/m/0/id", "value": 2}, {"op": "upsert", "path": "/m", "items": [{"id": 2, "n": 2}]},
	{"op": "upsert", "path": "/m", "key": "n", "items": [{"id": 9, "n": 2}]}]');

--
-- merge: RFC 7386 at a path
--
SELECT hx_merge('{"cfg": {"a": 1, "b": {"c": 2, "d": 3}}}',
	'[{"op": "merge", "path": "/cfg", "value": {"a": null, "b": {"c": 20}, "e": {"f": null, "g": 1}}}]');
SELECT hx_merge('{"cfg": "text"}', '[{"op": "merge", "path": "/cfg", "value": {"a": 1}}]');
SELECT hx_merge('{"cfg": {"a": 1}}', '[{"op": "merge", "path": "/cfg", "value": [1]}]');
SELECT hx_merge('{"cfg": {"a": 1}, "k": 1}', '[{"op": "merge", "path": "/cfg", "value": null}]');
SELECT hx_merge('{"a": 1}', '[{"op": "merge", "path": "", "value": {"b": 2}}]');

-- a JSON object instead of an op list: an RFC 7386 merge patch of the state
SELECT hx_merge('{"a": 1, "b": {"c": 1}}', '{"a": null, "b": {"d": 2}, "e": [1]}');
SELECT hx_merge('[1, 2]', '{"a": 1}');
SELECT hx_merge('{"a": 1}', '{}');

--
-- RFC 6902 ops, forgiving
--
-- add at ".../-" appends and creates the array; add of a member creates parents
SELECT hx_merge('{}', '[{"op": "add", "path": "/a/list/-", "value": 1}, {"op": "add", "path": "/a/list/-", "value": 2}]');
SELECT hx_merge('{"a": [1, 3]}', '[{"op": "add", "path": "/a/1", "value": 2}]');
SELECT hx_merge('{"a": {}}', '[{"op": "add", "path": "/a/-", "value": 1}]');
SELECT hx_merge('{}', '[{"op": "add", "path": "/x/y", "value": null}]');
-- replace of a missing member creates it; remove of a missing one is fine
SELECT hx_merge('{}', '[{"op": "replace", "path": "/a", "value": 1}, {"op": "remove", "path": "/b"}]');
-- move and copy, with the add side forgiving
SELECT hx_merge('{"a": {"b": 1}}', '[{"op": "move", "from": "/a/b", "path": "/c/d"}]');
SELECT hx_merge('{"a": [1]}', '[{"op": "copy", "from": "/a", "path": "/b/c"}, {"op": "append", "path": "/b/c", "items": [2]}]');
SELECT hx_merge('{"a": 1}', '[{"op": "move", "from": "/a", "path": "/a"}]');
-- test is strict and aborts the write
SELECT hx_merge('{"v": 1}', '[{"op": "test", "path": "/v", "value": 1}, {"op": "replace", "path": "/v", "value": 2}]');

-- ops apply in order, each seeing the previous ones
SELECT hx_merge('{}', '[{"op": "append", "path": "/l", "items": [1]}, {"op": "test", "path": "/l/0", "value": 1},
	{"op": "increment", "path": "/l/0", "by": 1}, {"op": "copy", "from": "/l", "path": "/m"},
	{"op": "delete", "path": "/l"}]');

-- writes that change nothing give back the state itself
SELECT hx_merge('{"a": 1}', '[]'), hx_merge('{"a": 1}', '[{"op": "delete", "path": "/b"}]');

--
-- Errors
--
\pset tuples_only on
\pset format unaligned

-- malformed writes: 22023
SELECT err($$SELECT hx_merge('{}', '"append"')$$);
SELECT err($$SELECT hx_merge('{}', '42')$$);
SELECT err($$SELECT hx_merge('{}', '[1]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"path": "/a"}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "push", "path": "/a"}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "append", "items": [1]}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "append", "path": "/a"}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "append", "path": "/a", "items": 1}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "union", "path": "/a", "items": {"x": 1}}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "increment", "path": "/a"}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "increment", "path": "/a", "by": "1"}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "upsert", "path": "/a", "items": [{"id": 1}, 2]}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "upsert", "path": "/a", "key": 1, "items": []}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "replace", "path": "/a"}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "merge", "path": "/a"}]')$$);
SELECT err($$SELECT hx_merge('{"a": 1}', '[{"op": "delete", "path": ""}]')$$);
SELECT err($$SELECT hx_merge('{"a": {"b": 1}}', '[{"op": "move", "from": "/a", "path": "/a/b"}]')$$);

-- malformed pointers: 22P02; bad indexes: 22033
SELECT err($$SELECT hx_merge('{}', '[{"op": "append", "path": "a", "items": []}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "delete", "path": "/~x"}]')$$);
SELECT err($$SELECT hx_merge('{"a": [1]}', '[{"op": "increment", "path": "/a/01", "by": 1}]')$$);
SELECT err($$SELECT hx_merge('{"a": [1]}', '[{"op": "append", "path": "/a/x", "items": [1]}]')$$);

-- paths that do not exist: 2203A (array elements are never created)
SELECT err($$SELECT hx_merge('{"a": [1]}', '[{"op": "replace", "path": "/a/5", "value": 1}]')$$);
SELECT err($$SELECT hx_merge('{"a": [1]}', '[{"op": "increment", "path": "/a/1/n", "by": 1}]')$$);
SELECT err($$SELECT hx_merge('{"a": [1]}', '[{"op": "add", "path": "/a/3", "value": 1}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "move", "from": "/nope", "path": "/b"}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "copy", "from": "/nope", "path": "/b"}]')$$);

-- type conflicts: XH002
SELECT err($$SELECT hx_merge('{"title": "draft"}', '[{"op": "append", "path": "/title", "items": ["x"]}]')$$);
SELECT err($$SELECT hx_merge('{"meta": {}}', '[{"op": "increment", "path": "/meta", "by": 1}]')$$);
SELECT err($$SELECT hx_merge('{"n": null}', '[{"op": "increment", "path": "/n", "by": 1}]')$$);
SELECT err($$SELECT hx_merge('{"s": {"a": 1}}', '[{"op": "union", "path": "/s", "items": [1]}]')$$);
SELECT err($$SELECT hx_merge('{"m": 7}', '[{"op": "upsert", "path": "/m", "items": [{"id": 1}]}]')$$);
SELECT err($$SELECT hx_merge('{"a": "text"}', '[{"op": "replace", "path": "/a/b/c", "value": 1}]')$$);
SELECT err($$SELECT hx_merge('{"a": 5}', '[{"op": "add", "path": "/a/b", "value": 1}]')$$);
SELECT err($$SELECT hx_merge('{"a": true}', '[{"op": "add", "path": "/a/-", "value": 1}]')$$);

-- a failed test: XH001
SELECT err($$SELECT hx_merge('{"v": 2}', '[{"op": "test", "path": "/v", "value": 1}, {"op": "replace", "path": "/v", "value": 3}]')$$);
SELECT err($$SELECT hx_merge('{}', '[{"op": "test", "path": "/v", "value": null}]')$$);

-- the failing operation's index is named
SELECT err($$SELECT hx_merge('{"n": "x"}', '[{"op": "append", "path": "/l", "items": [1]},
	{"op": "increment", "path": "/n", "by": 1}]')$$);

\pset tuples_only off
\pset format aligned

-- All or nothing, and STRICT: a NOT NULL state column turns NULL writes
-- into an error instead of a lost state
CREATE TABLE sessions (id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
INSERT INTO sessions (id) VALUES ('s-1');
UPDATE sessions SET state = hx_merge(state, '[{"op": "append", "path": "/notes", "items": ["kept"]}]');
UPDATE sessions SET state = hx_merge(state, '[{"op": "append", "path": "/notes", "items": ["lost"]},
	{"op": "increment", "path": "/notes", "by": 1}]');
UPDATE sessions SET state = hx_merge(state, NULL);
SELECT state FROM sessions;

-- large op lists: 20,000 unions into one set, in linear time
SELECT jsonb_array_length(hx_merge('{}', (SELECT jsonb_agg(jsonb_build_object('op', 'union', 'path', '/s', 'items', jsonb_build_array(i % 5000)))
	FROM generate_series(1, 20000) i)) -> 's') AS distinct_items;
SELECT jsonb_array_length(hx_merge('{}', jsonb_build_array(jsonb_build_object('op', 'upsert', 'path', '/m',
	'items', (SELECT jsonb_agg(jsonb_build_object('id', i % 7000, 'v', i)) FROM generate_series(1, 20000) i)))) -> 'm') AS upserted;

SELECT proname, provolatile, proisstrict, proparallel, obj_description(oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc WHERE proname = 'hx_merge';

DROP TABLE sessions;

-- merge with null: a member is removed, an array element becomes null
SELECT hx_merge('{"a": [1, 2], "b": 1}', '[{"op": "merge", "path": "/a/0", "value": null},
	{"op": "merge", "path": "/b", "value": null}]');

-- union and upsert of values nested deeper than hashes look
SELECT jsonb_array_length(hx_merge(jsonb_build_object('s', jsonb_build_array(d)),
	jsonb_build_array(jsonb_build_object('op', 'union', 'path', '/s', 'items', jsonb_build_array(d, d2)))) -> 's') AS deep_union
  FROM (SELECT (repeat('[', 9000) || '1' || repeat(']', 9000))::jsonb AS d,
               (repeat('[', 9000) || '2' || repeat(']', 9000))::jsonb AS d2) v;

-- discard and clear: removal by value or by key, and emptying a list
SELECT hx_merge('{"tags": ["a", "b", "a", "c"]}', '[{"op": "discard", "path": "/tags", "items": ["a", "z"]}]');
SELECT hx_merge('{"m": [{"id": 1}, {"id": 2}, {"id": 1, "x": 0}, {"v": 3}]}', '[{"op": "discard", "path": "/m", "keys": [1, null]}]');
SELECT hx_merge('{"m": [{"k": "a"}, {"k": "b"}]}', '[{"op": "discard", "path": "/m", "key": "k", "keys": ["b"]}]');
SELECT hx_merge('{}', '[{"op": "discard", "path": "/missing/list", "items": [1]}]');
SELECT hx_merge('{"m": [1, 2]}', '[{"op": "clear", "path": "/m"}, {"op": "append", "path": "/m", "items": [3]}, {"op": "clear", "path": "/n"}]');
-- repeated elements and keys: upsert replaces the first occurrence, again and
-- again; union sees every copy; discard removes every copy, once
SELECT hx_merge('{"a": [{"id": 1, "v": 1}, {"id": 1, "v": 2}, {"id": 2}]}',
	'[{"op": "upsert", "path": "/a", "items": [{"id": 1, "v": 9}, {"id": 1, "v": 10}]},
	  {"op": "union", "path": "/a", "items": [{"id": 1, "v": 2}, {"id": 1, "v": 3}, {"id": 1, "v": 3}]},
	  {"op": "upsert", "path": "/a", "items": [{"id": 1, "v": 11}]}]');
SELECT hx_merge('{"a": [{"id": 1}, {"id": 2}, {"id": 1}, {"x": 1}, 3, 3]}',
	'[{"op": "discard", "path": "/a", "keys": [1, 1, null]}, {"op": "union", "path": "/a", "items": [{"id": 1}, 3]},
	  {"op": "discard", "path": "/a", "items": [3, 3]}, {"op": "upsert", "path": "/a", "items": [{"id": 1, "n": 1}]}]');
SELECT jsonb_array_length(hx_merge(s, jsonb_build_array(jsonb_build_object('op', 'union', 'path', '/a', 'items', s -> 'a'),
		jsonb_build_object('op', 'discard', 'path', '/a', 'items', '[0]'::jsonb))) -> 'a') AS ones_left
  FROM (SELECT jsonb_build_object('a', jsonb_agg(i % 2)) AS s FROM generate_series(1, 20000) i) v;
-- values alike down to a depth of 40 and different below are still told apart
SELECT jsonb_array_length(hx_merge('{}', jsonb_build_array(jsonb_build_object('op', 'union', 'path', '/a', 'items',
		jsonb_agg((repeat('[', 40) || (i % 3000) || repeat(']', 40))::jsonb)))) -> 'a') AS distinct_deep
  FROM generate_series(1, 6000) i;
SELECT err($$SELECT hx_merge('{"m": []}', '[{"op": "discard", "path": "/m"}]')$$);
SELECT err($$SELECT hx_merge('{"m": []}', '[{"op": "discard", "path": "/m", "items": [], "keys": []}]')$$);
SELECT err($$SELECT hx_merge('{"m": []}', '[{"op": "discard", "path": "/m", "keys": "k"}]')$$);
SELECT err($$SELECT hx_merge('{"m": "s"}', '[{"op": "discard", "path": "/m", "items": [1]}]')$$);
SELECT err($$SELECT hx_merge('{"m": {}}', '[{"op": "clear", "path": "/m"}]')$$);

-- hx_check_writes: the errors hx_merge would raise whatever the state
SELECT hx_check_writes('[{"op": "append", "path": "/a", "items": [1]}, {"op": "increment", "path": "/n", "by": 2}]');
SELECT hx_check_writes('{"a": null}');
SELECT err($$SELECT hx_check_writes('[{"op": "append", "path": "/a", "items": [1]}, {"op": "append", "path": "a", "items": [1]}]')$$);
SELECT err($$SELECT hx_check_writes('[{"op": "upsert", "path": "/m", "items": [1]}]')$$);
SELECT err($$SELECT hx_check_writes('[{"op": "move", "from": "/a", "path": "/a/b"}]')$$);
SELECT err($$SELECT hx_check_writes('"append"')$$);
-- a type conflict depends on the state: not a malformed write
SELECT hx_check_writes('[{"op": "append", "path": "/title", "items": [1]}]');
