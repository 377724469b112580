--
-- hx_patch(doc, patch): RFC 6902 JSON Patch, strict and atomic
-- (err() is defined in setup.sql)
--

-- add: a new member, an existing member (replaced), an array insert, the
-- end of an array, and the whole document
SELECT hx_patch('{"a": 1}', '[{"op": "add", "path": "/b", "value": [1, 2]}]');
SELECT hx_patch('{"a": 1}', '[{"op": "add", "path": "/a", "value": {"x": null}}]');
SELECT hx_patch('{"a": [1, 2]}', '[{"op": "add", "path": "/a/1", "value": "mid"}]');
SELECT hx_patch('{"a": [1, 2]}', '[{"op": "add", "path": "/a/2", "value": "end"}]');
SELECT hx_patch('{"a": [1, 2]}', '[{"op": "add", "path": "/a/-", "value": "end"}]');
SELECT hx_patch('{"a": 1}', '[{"op": "add", "path": "", "value": [true]}]');
SELECT hx_patch('[]', '[{"op": "add", "path": "/-", "value": {"id": 1}}]');

-- remove: a member, an array element (the rest shift left)
SELECT hx_patch('{"a": 1, "b": 2}', '[{"op": "remove", "path": "/a"}]');
SELECT hx_patch('{"a": [1, 2, 3]}', '[{"op": "remove", "path": "/a/0"}]');

-- replace: a member, an element, the whole document
SELECT hx_patch('{"a": 1}', '[{"op": "replace", "path": "/a", "value": null}]');
SELECT hx_patch('{"a": [1, 2]}', '[{"op": "replace", "path": "/a/1", "value": 3}]');
SELECT hx_patch('{"a": 1}', '[{"op": "replace", "path": "", "value": "scalar"}]');

-- move: between members, within an array (indexes count after the removal),
-- onto itself (a no-op), and from a child to its parent
SELECT hx_patch('{"a": {"b": 1}}', '[{"op": "move", "from": "/a", "path": "/c"}]');
SELECT hx_patch('{"a": [1, 2, 3, 4]}', '[{"op": "move", "from": "/a/0", "path": "/a/3"}]');
SELECT hx_patch('{"a": 1}', '[{"op": "move", "from": "/a", "path": "/a"}]');
SELECT hx_patch('{"a": {"b": {"c": 1}}}', '[{"op": "move", "from": "/a/b", "path": "/a"}]');

-- copy: a deep copy, so editing the copy leaves the original alone
SELECT hx_patch('{"a": {"b": 1}}', '[{"op": "copy", "from": "/a", "path": "/c"},
	{"op": "add", "path": "/c/d", "value": 2}]');
SELECT hx_patch('{"a": [1]}', '[{"op": "copy", "from": "/a/0", "path": "/a/-"}]');

-- test compares JSON values: numbers numerically, objects in any key order
SELECT hx_patch('{"n": 1}', '[{"op": "test", "path": "/n", "value": 1.0}]');
SELECT hx_patch('{"n": 100}', '[{"op": "test", "path": "/n", "value": 1e2}]');
SELECT hx_patch('{"o": {"a": 1, "b": [1, {"c": 2.50}]}}',
	'[{"op": "test", "path": "/o", "value": {"b": [1, {"c": 2.5}], "a": 1}}]');
SELECT hx_patch('{"s": "x", "z": null, "t": true}',
	'[{"op": "test", "path": "/s", "value": "x"}, {"op": "test", "path": "/z", "value": null},
	  {"op": "test", "path": "/t", "value": true}, {"op": "test", "path": "", "value": {"t": true, "z": null, "s": "x"}}]');
-- test after earlier operations sees their effect
SELECT hx_patch('{}', '[{"op": "add", "path": "/a", "value": [1]}, {"op": "test", "path": "/a/0", "value": 1}]');

-- RFC 6901 pointers: "~0" is "~", "~1" is "/", "/" is the empty key
SELECT hx_patch('{"a/b": 1, "m~n": 2, "": 3}',
	'[{"op": "replace", "path": "/a~1b", "value": 10}, {"op": "replace", "path": "/m~0n", "value": 20},
	  {"op": "replace", "path": "/", "value": 30}]');
SELECT hx_patch('{"~1": 1}', '[{"op": "move", "from": "/~01", "path": "/ü ✓"}]');

-- members an operation does not define are ignored (RFC 6902 section 4)
SELECT hx_patch('{"a": 1}', '[{"op": "remove", "path": "/a", "value": 5, "from": "/x", "note": "hi"}]');

-- an empty patch, and a patch of tests only, return the document
SELECT hx_patch('{"a": 1}', '[]');
SELECT hx_patch('[1, 2]', '[{"op": "test", "path": "/1", "value": 2}]');

-- scalars at the root
SELECT hx_patch('"foo"', '[{"op": "test", "path": "", "value": "foo"}, {"op": "replace", "path": "", "value": 42}]');
SELECT hx_patch('null', '[{"op": "add", "path": "", "value": {}}]');

--
-- Errors: each names the operation's index, its op and its pointer, and
-- has a SQLSTATE of its class
--
\pset tuples_only on
\pset format unaligned

-- malformed patch documents and operations: 22023
SELECT err($$SELECT hx_patch('{}', '{"op": "add"}')$$);
SELECT err($$SELECT hx_patch('{}', '"add"')$$);
SELECT err($$SELECT hx_patch('{}', '[{"op": "test", "path": "", "value": {}}, 7]')$$);
SELECT err($$SELECT hx_patch('{}', '[[]]')$$);
SELECT err($$SELECT hx_patch('{}', '[{"path": "/a"}]')$$);
SELECT err($$SELECT hx_patch('{}', '[{"op": 1, "path": "/a"}]')$$);
SELECT err($$SELECT hx_patch('{}', '[{"op": "ADD", "path": "/a", "value": 1}]')$$);
SELECT err($$SELECT hx_patch('{}', '[{"op": "add", "value": 1}]')$$);
SELECT err($$SELECT hx_patch('{}', '[{"op": "add", "path": null, "value": 1}]')$$);
SELECT err($$SELECT hx_patch('{}', '[{"op": "add", "path": "/a"}]')$$);
SELECT err($$SELECT hx_patch('{}', '[{"op": "replace", "path": ""}]')$$);
SELECT err($$SELECT hx_patch('{}', '[{"op": "test", "path": "/a"}]')$$);
SELECT err($$SELECT hx_patch('{"a": 1}', '[{"op": "move", "path": "/b"}]')$$);
SELECT err($$SELECT hx_patch('{"a": 1}', '[{"op": "copy", "from": ["a"], "path": "/b"}]')$$);
SELECT err($$SELECT hx_patch('{"a": 1}', '[{"op": "remove", "path": ""}]')$$);
SELECT err($$SELECT hx_patch('{"a": {"b": 1}}', '[{"op": "move", "from": "/a", "path": "/a/b/c"}]')$$);

-- malformed JSON pointers: 22P02
SELECT err($$SELECT hx_patch('{}', '[{"op": "add", "path": "a", "value": 1}]')$$);
SELECT err($$SELECT hx_patch('{}', '[{"op": "add", "path": "/a~2", "value": 1}]')$$);
SELECT err($$SELECT hx_patch('{}', '[{"op": "add", "path": "/a~", "value": 1}]')$$);
SELECT err($$SELECT hx_patch('{"a": 1}', '[{"op": "copy", "from": "a", "path": "/b"}]')$$);

-- array indexes that are not indexes: 22033
SELECT err($$SELECT hx_patch('[1, 2]', '[{"op": "remove", "path": "/01"}]')$$);
SELECT err($$SELECT hx_patch('[1, 2]', '[{"op": "add", "path": "/+1", "value": 0}]')$$);
SELECT err($$SELECT hx_patch('[1, 2]', '[{"op": "replace", "path": "/1e0", "value": 0}]')$$);
SELECT err($$SELECT hx_patch('[1, 2]', '[{"op": "test", "path": "/00", "value": 1}]')$$);
SELECT err($$SELECT hx_patch('{"a": [[1]]}', '[{"op": "add", "path": "/a/x/0", "value": 0}]')$$);

-- paths that do not exist: 2203A
SELECT err($$SELECT hx_patch('{"a": 1}', '[{"op": "remove", "path": "/b"}]')$$);
SELECT err($$SELECT hx_patch('{"a": 1}', '[{"op": "replace", "path": "/b", "value": 0}]')$$);
SELECT err($$SELECT hx_patch('{"a": {}}', '[{"op": "add", "path": "/a/b/c", "value": 0}]')$$);
SELECT err($$SELECT hx_patch('{"a": [1, 2]}', '[{"op": "add", "path": "/a/3", "value": 0}]')$$);
SELECT err($$SELECT hx_patch('{"a": [1, 2]}', '[{"op": "remove", "path": "/a/2"}]')$$);
SELECT err($$SELECT hx_patch('{"a": [1]}', '[{"op": "replace", "path": "/a/99999999999999999999", "value": 0}]')$$);
SELECT err($$SELECT hx_patch('{"a": [1, 2]}', '[{"op": "remove", "path": "/a/-"}]')$$);
SELECT err($$SELECT hx_patch('{"a": [1, 2]}', '[{"op": "replace", "path": "/a/-", "value": 0}]')$$);
SELECT err($$SELECT hx_patch('{"a": "text"}', '[{"op": "add", "path": "/a/b", "value": 0}]')$$);
SELECT err($$SELECT hx_patch('{"a": 5}', '[{"op": "remove", "path": "/a/0"}]')$$);
SELECT err($$SELECT hx_patch('"root"', '[{"op": "add", "path": "/a", "value": 0}]')$$);
SELECT err($$SELECT hx_patch('{"a": 1}', '[{"op": "move", "from": "/b", "path": "/c"}]')$$);
SELECT err($$SELECT hx_patch('{"a": 1}', '[{"op": "move", "from": "/b", "path": "/b"}]')$$);
SELECT err($$SELECT hx_patch('{"a": 1}', '[{"op": "copy", "from": "/a/b", "path": "/c"}]')$$);
SELECT err($$SELECT hx_patch('{"a": 1}', '[{"op": "copy", "from": "/a", "path": "/x/y"}]')$$);

-- a failed test: XH001
SELECT err($$SELECT hx_patch('{"a": 1}', '[{"op": "test", "path": "/a", "value": "1"}]')$$);
SELECT err($$SELECT hx_patch('{"a": [1, 2]}', '[{"op": "test", "path": "/a", "value": [2, 1]}]')$$);
SELECT err($$SELECT hx_patch('{"a": {"b": 1}}', '[{"op": "test", "path": "/a", "value": {"b": 1, "c": null}}]')$$);
SELECT err($$SELECT hx_patch('{"a": 1}', '[{"op": "test", "path": "/b", "value": null}]')$$);

-- the index in the message is the failing operation's, counted from 0
SELECT err($$SELECT hx_patch('{}', '[{"op": "add", "path": "/a", "value": 1},
	{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/c"}]')$$);

\pset tuples_only off
\pset format aligned

-- All or nothing: a failing operation leaves the row as it was
CREATE TABLE docs (id int PRIMARY KEY, doc jsonb NOT NULL);
INSERT INTO docs VALUES (1, '{"count": 1, "items": ["a"]}');
UPDATE docs SET doc = hx_patch(doc, '[{"op": "add", "path": "/items/-", "value": "b"},
	{"op": "replace", "path": "/count", "value": 2}, {"op": "test", "path": "/count", "value": 3}]');
SELECT doc FROM docs;
-- optimistic concurrency: test the value read, then write
UPDATE docs SET doc = hx_patch(doc, '[{"op": "test", "path": "/count", "value": 1},
	{"op": "replace", "path": "/count", "value": 2}]');
SELECT doc FROM docs;

-- NULL in, NULL out (the function is STRICT)
SELECT hx_patch(NULL, '[]') IS NULL AS null_doc, hx_patch('{}', NULL) IS NULL AS null_patch;

-- 20,000 operations apply in one call, in linear time
SELECT jsonb_array_length(hx_patch('{"log": []}',
	(SELECT jsonb_agg(jsonb_build_object('op', 'add', 'path', '/log/-', 'value', i))
	   FROM generate_series(1, 20000) i)) -> 'log') AS appended;
SELECT hx_patch('{}', (SELECT jsonb_agg(jsonb_build_object('op', 'add', 'path', '/k' || i, 'value', i))
	   FROM generate_series(1, 20000) i))
	= (SELECT jsonb_object_agg('k' || i, i) FROM generate_series(1, 20000) i) AS same_as_object_agg;
SELECT hx_patch('{"k": 0}', (SELECT jsonb_agg(jsonb_build_object('op', 'replace', 'path', '/k', 'value', i))
	   FROM generate_series(1, 20000) i)) AS last_replace_wins;

-- documents and values nested 10,000 levels deep
SELECT length(hx_patch((repeat('[', 10000) || repeat(']', 10000))::jsonb,
	('[{"op": "add", "path": "' || repeat('/0', 9999) || '", "value": 1}]')::jsonb)::text) AS deep_add;
SELECT hx_patch('{}', ('[{"op": "add", "path": "/deep", "value": ' || repeat('[', 10000)
	|| repeat(']', 10000) || '}]')::jsonb) = ('{"deep": ' || repeat('[', 10000) || repeat(']', 10000) || '}')::jsonb AS deep_value;
SELECT hx_patch((repeat('{"a": ', 10000) || '1' || repeat('}', 10000))::jsonb,
	('[{"op": "test", "path": "", "value": ' || repeat('{"a": ', 10000) || '1.0' || repeat('}', 10000) || '}]')::jsonb)
	= (repeat('{"a": ', 10000) || '1' || repeat('}', 10000))::jsonb AS deep_test_passes;
SELECT err($$SELECT hx_patch((repeat('{"a": ', 10000) || '1' || repeat('}', 10000))::jsonb,
	('[{"op": "test", "path": "", "value": ' || repeat('{"a": ', 10000) || '2' || repeat('}', 10000) || '}]')::jsonb)$$);
-- deeper than the stack allows: a clean error, not a crash
CREATE TABLE deep AS SELECT (repeat('[', 10000) || repeat(']', 10000))::jsonb AS d;
SET max_stack_depth = '100kB';
SELECT err($$SELECT hx_patch(d, ('[{"op": "add", "path": "' || repeat('/0', 9999) || '", "value": 1}]')::jsonb) FROM deep$$);
RESET max_stack_depth;

-- The function is IMMUTABLE, STRICT and PARALLEL SAFE, and documented
SELECT proname, provolatile, proisstrict, proparallel, obj_description(oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc WHERE proname = 'hx_patch';
