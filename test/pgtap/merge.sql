--
-- test/pgtap/merge.sql: hx_merge(state, writes), table-driven
--
-- Every op of the composing engine (append, replace, delete, increment,
-- union, upsert, merge), the forgiving RFC 6902 ops (add, remove, replace,
-- move, copy, test), RFC 7386 object writes, and one error case per way a
-- write can go wrong, with the SQLSTATE a client branches on.  Cases that
-- test/sql/merge.sql does not have: deeper nesting, arrays of objects, unicode
-- and escaped keys, ops that see earlier ops.
--
\ir include/preamble.sql

BEGIN;
SELECT plan(120);

--
-- Results: one is() per row
--
SELECT is(hx_merge(state, writes), expected, descr)
  FROM (VALUES
  -- append
  ('append to an array nested in an array of objects',
   '{"runs": [{"log": ["a"]}, {"log": []}]}'::jsonb,
   '[{"op": "append", "path": "/runs/1/log", "items": ["b", "c"]}, {"op": "append", "path": "/runs/0/log", "items": ["d"]}]'::jsonb,
   '{"runs": [{"log": ["a", "d"]}, {"log": ["b", "c"]}]}'::jsonb),
  ('append adds array items as elements, without flattening them',
   '{"l": [[0]]}', '[{"op": "append", "path": "/l", "items": [[1, 2], []]}]', '{"l": [[0], [1, 2], []]}'),
  ('append creates every missing parent object, with escaped and unicode keys',
   '{"x": 1}', '[{"op": "append", "path": "/a~1b/ключ/m~0n/log", "items": [1]}]',
   '{"x": 1, "a/b": {"ключ": {"m~n": {"log": [1]}}}}'),
  ('two appends in one list keep their order',
   '{}', '[{"op": "append", "path": "/l", "items": [1]}, {"op": "append", "path": "/l", "items": [2, 3]}]',
   '{"l": [1, 2, 3]}'),
  ('append to the member "-" of an object',
   '{"o": {"-": []}}', '[{"op": "append", "path": "/o/-", "items": [1]}]', '{"o": {"-": [1]}}'),
  -- replace
  ('replace sets a member deep inside an array of objects',
   '{"t": [{"id": 1, "s": {"done": false}}]}', '[{"op": "replace", "path": "/t/0/s/done", "value": true}]',
   '{"t": [{"id": 1, "s": {"done": true}}]}'),
  ('replace creates missing parent objects below an array element',
   '{"t": [{}]}', '[{"op": "replace", "path": "/t/0/a/b", "value": 1}]', '{"t": [{"a": {"b": 1}}]}'),
  ('replace with null removes a nested member and keeps its siblings',
   '{"a": {"b": {"c": 1, "d": 2}}}', '[{"op": "replace", "path": "/a/b/c", "value": null}]',
   '{"a": {"b": {"d": 2}}}'),
  ('replace with null under missing parents creates nothing',
   '{"a": 1}', '[{"op": "replace", "path": "/x/y/z", "value": null}]', '{"a": 1}'),
  ('replace with null of an element of a nested array stores null',
   '{"m": [[1, 2]]}', '[{"op": "replace", "path": "/m/0/0", "value": null}]', '{"m": [[null, 2]]}'),
  ('replace with empty containers',
   '{"a": 1, "b": 2}', '[{"op": "replace", "path": "/a", "value": {}}, {"op": "replace", "path": "/b", "value": []}]',
   '{"a": {}, "b": []}'),
  ('replace of the key "~1" written as "/~01"',
   '{"~1": 0, "/": 0}', '[{"op": "replace", "path": "/~01", "value": 1}]', '{"~1": 1, "/": 0}'),
  -- delete
  ('delete an element of an array of objects, then edit the element that moved up',
   '{"m": [{"id": 1}, {"id": 2}, {"id": 3}]}',
   '[{"op": "delete", "path": "/m/0"}, {"op": "replace", "path": "/m/0/seen", "value": true}]',
   '{"m": [{"id": 2, "seen": true}, {"id": 3}]}'),
  ('delete a member of an object inside an array',
   '{"m": [{"id": 1, "tmp": "x"}]}', '[{"op": "delete", "path": "/m/0/tmp"}]', '{"m": [{"id": 1}]}'),
  ('delete is idempotent within one list',
   '{"a": 1, "b": 2}', '[{"op": "delete", "path": "/a"}, {"op": "delete", "path": "/a"}]', '{"b": 2}'),
  ('delete below a scalar or past an array''s end is no error',
   '{"a": 5, "l": [1]}', '[{"op": "delete", "path": "/a/b/c"}, {"op": "delete", "path": "/l/1"}, {"op": "delete", "path": "/l/-"}]',
   '{"a": 5, "l": [1]}'),
  ('delete of a unicode key with a "/" in it',
   '{"é/ü": 1, "é": 2}', '[{"op": "delete", "path": "/é~1ü"}]', '{"é": 2}'),
  -- increment
  ('increment a counter inside an array element, creating it',
   '{"a": [{"n": 1}, {}]}', '[{"op": "increment", "path": "/a/0/n", "by": 1}, {"op": "increment", "path": "/a/1/n", "by": 5}]',
   '{"a": [{"n": 2}, {"n": 5}]}'),
  ('increments of one counter in one list sum',
   '{}', '[{"op": "increment", "path": "/c", "by": 1}, {"op": "increment", "path": "/c", "by": 2},
     {"op": "increment", "path": "/c", "by": -10}]',
   '{"c": -7}'),
  ('increment of an element of a nested array',
   '{"m": [[1, 2]]}', '[{"op": "increment", "path": "/m/0/1", "by": 40}]', '{"m": [[1, 42]]}'),
  ('increment by 0 of a missing counter creates it as 0',
   '{}', '[{"op": "increment", "path": "/z", "by": 0}]', '{"z": 0}'),
  -- union
  ('union compares objects by value: 1.0 is 1, keys in any order',
   '{"s": [{"a": 1, "b": [2]}]}', '[{"op": "union", "path": "/s", "items": [{"b": [2.0], "a": 1.00}, {"a": 1}]}]',
   '{"s": [{"a": 1, "b": [2]}, {"a": 1}]}'),
  ('union compares arrays by value and in order',
   '{"s": [[1, 2]]}', '[{"op": "union", "path": "/s", "items": [[1.0, 2], [2, 1], []]}]', '{"s": [[1, 2], [2, 1], []]}'),
  ('union keeps duplicates that were already in the state',
   '{"s": [1, 1]}', '[{"op": "union", "path": "/s", "items": [1, 2, 2]}]', '{"s": [1, 1, 2]}'),
  ('union tells null, false, 0, "" and "null" apart',
   '{"s": [null]}', '[{"op": "union", "path": "/s", "items": [false, 0, "", "null", null, false]}]',
   '{"s": [null, false, 0, "", "null"]}'),
  ('union into a nested array that does not exist yet creates it',
   '{"a": [{}]}', '[{"op": "union", "path": "/a/0/tags", "items": ["x", "x"]}]', '{"a": [{"tags": ["x"]}]}'),
  ('a union after an edit of an element sees the edited element',
   '{"s": [{"a": 1}, {"b": 2}]}',
   '[{"op": "union", "path": "/s", "items": [3]}, {"op": "delete", "path": "/s/0/a"},
     {"op": "union", "path": "/s", "items": [{}, {"a": 1}]}]',
   '{"s": [{}, {"b": 2}, 3, {"a": 1}]}'),
  ('a union after an append into an element array sees the longer element',
   '{"s": [[1], [2]]}',
   '[{"op": "union", "path": "/s", "items": [3]}, {"op": "append", "path": "/s/0", "items": [9]},
     {"op": "union", "path": "/s", "items": [[1], [1, 9]]}]',
   '{"s": [[1, 9], [2], 3, [1]]}'),
  -- upsert
  ('upsert replaces the whole element, it does not merge into it',
   '{"m": [{"id": 1, "a": 1, "b": 2}]}', '[{"op": "upsert", "path": "/m", "items": [{"id": 1, "a": 5}]}]',
   '{"m": [{"id": 1, "a": 5}]}'),
  ('upsert with a unicode key member and unicode key values',
   '{"m": [{"ключ": "é", "v": 1}, {"ключ": "e", "v": 2}]}',
   '[{"op": "upsert", "path": "/m", "key": "ключ", "items": [{"ключ": "é", "v": 3}, {"ключ": "ü", "v": 4}]}]',
   '{"m": [{"ключ": "é", "v": 3}, {"ключ": "e", "v": 2}, {"ключ": "ü", "v": 4}]}'),
  ('the upsert key is a member name, not a pointer: "a/b" is one member',
   '{"m": [{"a/b": 1, "v": 1}]}', '[{"op": "upsert", "path": "/m", "key": "a/b", "items": [{"a/b": 1, "v": 2}]}]',
   '{"m": [{"a/b": 1, "v": 2}]}'),
  ('upsert matches keys that are objects by value',
   '{"m": [{"id": {"a": 1, "b": [2]}, "v": 1}]}', '[{"op": "upsert", "path": "/m", "items": [{"id": {"b": [2.0], "a": 1}, "v": 2}]}]',
   '{"m": [{"id": {"b": [2.0], "a": 1}, "v": 2}]}'),
  ('upsert skips elements that are not objects or lack the key, and appends items that lack it',
   '{"m": [1, "x", {"name": "n"}, {"id": 7}]}',
   '[{"op": "upsert", "path": "/m", "items": [{"id": 7, "v": 1}, {"v": 2}]}]',
   '{"m": [1, "x", {"name": "n"}, {"id": 7, "v": 1}, {"v": 2}]}'),
  ('upsert creates the array under a missing parent',
   '{}', '[{"op": "upsert", "path": "/chat/messages", "items": [{"id": "m1"}]}]', '{"chat": {"messages": [{"id": "m1"}]}}'),
  ('a JSON null key is no key: the item is appended, and an element whose key is null matches nothing',
   '{"m": [{"v": 0}, {"id": null, "v": 1}]}', '[{"op": "upsert", "path": "/m", "items": [{"id": null, "v": 2}]}]',
   '{"m": [{"v": 0}, {"id": null, "v": 1}, {"id": null, "v": 2}]}'),
  -- merge
  ('merge creates the path and drops nulls from the new subtree',
   '{}', '[{"op": "merge", "path": "/cfg/ui", "value": {"theme": "dark", "x": null, "n": {"y": null, "z": 1}}}]',
   '{"cfg": {"ui": {"theme": "dark", "n": {"z": 1}}}}'),
  ('merge replaces arrays whole, keeping nulls inside them',
   '{"cfg": {"l": [1, 2, 3]}}', '[{"op": "merge", "path": "/cfg", "value": {"l": [null, {"a": null}]}}]',
   '{"cfg": {"l": [null, {"a": null}]}}'),
  ('merge into an element of an array of objects',
   '{"t": [{"id": 1, "s": {"a": 1, "b": 2}}]}', '[{"op": "merge", "path": "/t/0/s", "value": {"a": null, "c": 3}}]',
   '{"t": [{"id": 1, "s": {"b": 2, "c": 3}}]}'),
  ('merge with unicode and escaped-looking keys, which are plain keys in a merge value',
   '{"o": {"ключ": 1, "a~1b": 2}}', '[{"op": "merge", "path": "/o", "value": {"ключ": null, "a~1b": 3, "a/b": 4}}]',
   '{"o": {"a~1b": 3, "a/b": 4}}'),
  ('merge with an empty object changes nothing',
   '{"o": {"a": 1}}', '[{"op": "merge", "path": "/o", "value": {}}]', '{"o": {"a": 1}}'),
  -- object writes: an RFC 7386 merge patch of the whole state
  ('object writes: nested deletes, nested adds, scalars replaced by objects',
   '{"a": {"b": {"c": 1, "d": 2}, "e": 3}, "f": "s"}', '{"a": {"b": {"c": null}, "e": {"g": 1}}, "f": {"h": null}}',
   '{"a": {"b": {"d": 2}, "e": {"g": 1}}, "f": {}}'),
  ('object writes: deleting a member that does not exist changes nothing',
   '{"a": 1}', '{"b": null}', '{"a": 1}'),
  ('object writes on a JSON null state build an object without nulls',
   'null', '{"a": {"b": null, "c": []}}', '{"a": {"c": []}}'),
  ('object writes with unicode keys and the empty key',
   '{"": 1, "ü": 2}', '{"": null, "ü": {"é": 1}}', '{"ü": {"é": 1}}'),
  -- RFC 6902 ops, forgiving
  ('add at "/-" of a missing array below a missing parent creates both',
   '{}', '[{"op": "add", "path": "/a/b/-", "value": 1}, {"op": "add", "path": "/a/b/-", "value": 2}]',
   '{"a": {"b": [1, 2]}}'),
  ('add inserts into an array inside an array of objects',
   '{"t": [{"l": [1, 3]}]}', '[{"op": "add", "path": "/t/0/l/1", "value": 2}]', '{"t": [{"l": [1, 2, 3]}]}'),
  ('add of a member replaces an existing one',
   '{"a": [1]}', '[{"op": "add", "path": "/a", "value": {"b": 1}}]', '{"a": {"b": 1}}'),
  ('remove of a missing nested path is no error',
   '{"a": {}}', '[{"op": "remove", "path": "/a/b/c"}]', '{"a": {}}'),
  ('RFC 6902 replace with JSON null deletes an object member, as replace does',
   '{"a": 1, "b": 2}', '[{"op": "replace", "path": "/a", "value": null}]', '{"b": 2}'),
  ('move to a path whose parents do not exist creates them',
   '{"a": [1, 2]}', '[{"op": "move", "from": "/a/0", "path": "/x/y"}]', '{"a": [2], "x": {"y": 1}}'),
  ('move to "-" of a missing array creates the array',
   '{"v": 1}', '[{"op": "move", "from": "/v", "path": "/l/-"}]', '{"l": [1]}'),
  ('copy then append to the copy leaves the source alone',
   '{"a": {"l": [1]}}', '[{"op": "copy", "from": "/a", "path": "/b"}, {"op": "append", "path": "/b/l", "items": [2]}]',
   '{"a": {"l": [1]}, "b": {"l": [1, 2]}}'),
  ('copy of the whole state into a member',
   '{"a": 1}', '[{"op": "copy", "from": "", "path": "/snap/0"}]', '{"a": 1, "snap": {"0": {"a": 1}}}'),
  ('test passes by JSON value, then the write goes on',
   '{"v": {"n": 1.0, "l": [2.50]}}', '[{"op": "test", "path": "/v", "value": {"l": [2.5], "n": 1}},
     {"op": "increment", "path": "/v/n", "by": 1}]',
   '{"v": {"n": 2.0, "l": [2.50]}}'),
  -- ops after ops
  ('every op of the engine in one list, each seeing the previous ones',
   '{"s": {}}',
   '[{"op": "append", "path": "/s/log", "items": [{"id": "a", "n": 0}]},
     {"op": "upsert", "path": "/s/log", "items": [{"id": "a", "n": 1}, {"id": "b", "n": 1}]},
     {"op": "increment", "path": "/s/log/1/n", "by": 1},
     {"op": "union", "path": "/s/log", "items": [{"n": 2, "id": "b"}, {"id": "c"}]},
     {"op": "merge", "path": "/s/meta", "value": {"count": 3, "x": null}},
     {"op": "replace", "path": "/s/log/2/id", "value": "C"},
     {"op": "test", "path": "/s/log/2", "value": {"id": "C"}},
     {"op": "delete", "path": "/s/log/0"},
     {"op": "copy", "from": "/s/log/0", "path": "/s/last"},
     {"op": "move", "from": "/s/meta/count", "path": "/s/count"}]',
   '{"s": {"log": [{"id": "b", "n": 2}, {"id": "C"}], "meta": {}, "last": {"id": "b", "n": 2}, "count": 3}}'),
  ('an upsert after a union on the same array matches by key, not by whole value',
   '{}', '[{"op": "union", "path": "/m", "items": [{"id": 1, "v": 1}]},
     {"op": "upsert", "path": "/m", "items": [{"id": 1, "v": 2}]},
     {"op": "union", "path": "/m", "items": [{"id": 1, "v": 1}]}]',
   '{"m": [{"id": 1, "v": 2}, {"id": 1, "v": 1}]}'),
  ('two upserts with different keys on the same array in one list',
   '{"m": [{"id": 1, "k": "a"}]}', '[{"op": "upsert", "path": "/m", "items": [{"id": 2, "k": "a"}]},
     {"op": "upsert", "path": "/m", "key": "k", "items": [{"id": 3, "k": "a"}]}]',
   '{"m": [{"id": 3, "k": "a"}, {"id": 2, "k": "a"}]}')
  ) AS t(descr, state, writes, expected);

-- number formatting and untouched bytes: compared as text
SELECT is(hx_merge(state, writes)::text, expected, descr)
  FROM (VALUES
  ('increment keeps the larger scale: 1.50 + 1 is 2.50',
   '{"n": 1.50}'::jsonb, '[{"op": "increment", "path": "/n", "by": 1}]'::jsonb, '{"n": 2.50}'),
  ('increment is exact at 20 decimal places',
   '{"n": 1}', '[{"op": "increment", "path": "/n", "by": 1e-20}]', '{"n": 1.00000000000000000001}'),
  ('increment beyond 64 bits is exact',
   '{"n": 18446744073709551615}', '[{"op": "increment", "path": "/n", "by": 18446744073709551615}]',
   '{"n": 36893488147419103230}'),
  ('a missing counter takes the form of "by"',
   '{}', '[{"op": "increment", "path": "/n", "by": 0.50}]', '{"n": 0.50}'),
  ('union keeps the form of the element already there',
   '{"s": [1.0]}', '[{"op": "union", "path": "/s", "items": [1, 1.00]}]', '{"s": [1.0]}'),
  ('members next to an append keep their form',
   '{"a": 1.10, "l": []}', '[{"op": "append", "path": "/l", "items": [2.000]}]', '{"a": 1.10, "l": [2.000]}')
  ) AS t(descr, state, writes, expected);

-- documents 1,000 levels deep work at the default stack depth
SELECT is(
  hx_merge((repeat('{"a": [', 500) || '1' || repeat(']}', 500))::jsonb,
    ('[{"op": "increment", "path": "' || repeat('/a/0', 500) || '", "by": 1}]')::jsonb),
  (repeat('{"a": [', 500) || '2' || repeat(']}', 500))::jsonb,
  'an increment 1,000 levels down');
SELECT is(
  hx_merge('{}', (repeat('{"a": ', 1000) || '1' || repeat('}', 1000))::jsonb),
  (repeat('{"a": ', 1000) || '1' || repeat('}', 1000))::jsonb,
  'an object write 1,000 levels deep');
SELECT is(
  jsonb_array_length(hx_merge('{"s": []}',
    ('[{"op": "union", "path": "/s", "items": [' || repeat('[', 1000) || repeat(']', 1000) || ', '
     || repeat('[', 1000) || repeat(']', 1000) || ']}]')::jsonb) -> 's'),
  1, 'a union of two equal items 1,000 levels deep adds one');

--
-- Errors: one throws_ok() per row, by SQLSTATE, the code a client branches
-- on (what the messages say, and the operation their context names, is
-- test/sql/merge.sql's to show)
--
SELECT throws_ok(stmt, code::char(5), NULL, descr)
  FROM (VALUES
  -- 22023: malformed writes
  ('22023: writes that are JSON null', $$SELECT hx_merge('{}', 'null')$$, '22023'),
  ('22023: writes that are true', $$SELECT hx_merge('{}', 'true')$$, '22023'),
  ('22023: an op that is a string, after a good one', $$SELECT hx_merge('{}', '[{"op": "delete", "path": "/a"}, "append"]')$$, '22023'),
  ('22023: op names are case-sensitive ("Append")', $$SELECT hx_merge('{}', '[{"op": "Append", "path": "/a", "items": [1]}]')$$, '22023'),
  ('22023: a strict-only op name is not invented ("set")', $$SELECT hx_merge('{}', '[{"op": "set", "path": "/a", "value": 1}]')$$, '22023'),
  ('22023: append with null items', $$SELECT hx_merge('{}', '[{"op": "append", "path": "/a", "items": null}]')$$, '22023'),
  ('22023: union without items', $$SELECT hx_merge('{}', '[{"op": "union", "path": "/a", "item": [1]}]')$$, '22023'),
  ('22023: upsert with an object as items', $$SELECT hx_merge('{}', '[{"op": "upsert", "path": "/a", "items": {"id": 1}}]')$$, '22023'),
  ('22023: upsert with a null key', $$SELECT hx_merge('{}', '[{"op": "upsert", "path": "/a", "key": null, "items": []}]')$$, '22023'),
  ('22023: upsert with an item that is an array, at item 2', $$SELECT hx_merge('{}', '[{"op": "upsert", "path": "/a", "items": [{"id": 1}, {"id": 2}, [3]]}]')$$, '22023'),
  ('22023: increment by null', $$SELECT hx_merge('{}', '[{"op": "increment", "path": "/n", "by": null}]')$$, '22023'),
  ('22023: increment by a boolean', $$SELECT hx_merge('{"n": 1}', '[{"op": "increment", "path": "/n", "by": true}]')$$, '22023'),
  ('22023: increment by a numeric string', $$SELECT hx_merge('{"n": 1}', '[{"op": "increment", "path": "/n", "by": "1"}]')$$, '22023'),
  ('22023: merge without value, after good ops', $$SELECT hx_merge('{}', '[{"op": "append", "path": "/l", "items": []}, {"op": "merge", "path": "/o"}]')$$, '22023'),
  ('22023: add without value', $$SELECT hx_merge('{}', '[{"op": "add", "path": "/a/-"}]')$$, '22023'),
  ('22023: remove of the whole state', $$SELECT hx_merge('{"a": 1}', '[{"op": "remove", "path": ""}]')$$, '22023'),
  ('22023: move into its own child through escaped tokens', $$SELECT hx_merge('{"a/b": {}}', '[{"op": "move", "from": "/a~1b", "path": "/a~1b/c"}]')$$, '22023'),
  ('22023: copy without from', $$SELECT hx_merge('{"a": 1}', '[{"op": "copy", "path": "/b"}]')$$, '22023'),
  ('22023: a non-string path', $$SELECT hx_merge('{}', '[{"op": "delete", "path": ["a"]}]')$$, '22023'),
  -- 22P02: malformed pointers
  ('22P02: a path without the leading slash', $$SELECT hx_merge('{}', '[{"op": "increment", "path": "n", "by": 1}]')$$, '22P02'),
  ('22P02: a bad escape in "from"', $$SELECT hx_merge('{"a": 1}', '[{"op": "copy", "from": "/a~", "path": "/b"}]')$$, '22P02'),
  ('22P02: a bad escape in the path of a union', $$SELECT hx_merge('{}', '[{"op": "union", "path": "/s~2", "items": []}]')$$, '22P02'),
  ('22P02: a bad escape, even where delete would find nothing', $$SELECT hx_merge('{}', '[{"op": "delete", "path": "/x/~"}]')$$, '22P02'),
  -- 22033: bad array indexes
  ('22033: upsert into a member of an array, which needs an index', $$SELECT hx_merge('{"a": [[]]}', '[{"op": "upsert", "path": "/a/x", "items": []}]')$$, '22033'),
  ('22033: delete with a leading-zero index is an error, not a no-op', $$SELECT hx_merge('{"a": [1, 2]}', '[{"op": "delete", "path": "/a/01"}]')$$, '22033'),
  ('22033: test with index "-1"', $$SELECT hx_merge('{"a": [1]}', '[{"op": "test", "path": "/a/-1", "value": 1}]')$$, '22033'),
  ('22033: replace through a non-index into an array of objects', $$SELECT hx_merge('{"t": [{}]}', '[{"op": "replace", "path": "/t/first/done", "value": true}]')$$, '22033'),
  -- 2203A: array elements are never created
  ('2203A: replace below an element past the end', $$SELECT hx_merge('{"a": [1]}', '[{"op": "replace", "path": "/a/3/x", "value": 1}]')$$, '2203A'),
  ('2203A: append to an element past the end', $$SELECT hx_merge('{"a": []}', '[{"op": "append", "path": "/a/0", "items": [1]}]')$$, '2203A'),
  ('2203A: merge into "-" of an array', $$SELECT hx_merge('{"a": []}', '[{"op": "merge", "path": "/a/-", "value": {"x": 1}}]')$$, '2203A'),
  ('2203A: add at an index past the end', $$SELECT hx_merge('{"a": [1]}', '[{"op": "add", "path": "/a/2", "value": 1}]')$$, '2203A'),
  ('2203A: copy from the first element of an empty array', $$SELECT hx_merge('{"a": []}', '[{"op": "copy", "from": "/a/0", "path": "/b"}]')$$, '2203A'),
  ('2203A: move from a member that an earlier delete removed', $$SELECT hx_merge('{"a": 1}', '[{"op": "delete", "path": "/a"}, {"op": "move", "from": "/a", "path": "/b"}]')$$, '2203A'),
  -- XH001: failed tests
  ('XH001: a failed test after two good ops names op 2', $$SELECT hx_merge('{"v": 1}', '[{"op": "increment", "path": "/v", "by": 1}, {"op": "test", "path": "/v", "value": 2},
    {"op": "test", "path": "/v", "value": 1}]')$$, 'XH001'),
  ('XH001: a test of a member that replace with null deleted', $$SELECT hx_merge('{"v": 1}', '[{"op": "replace", "path": "/v", "value": null}, {"op": "test", "path": "/v", "value": null}]')$$, 'XH001'),
  ('XH001: a test of an array against its union', $$SELECT hx_merge('{"s": [1]}', '[{"op": "union", "path": "/s", "items": [2]},
    {"op": "test", "path": "/s", "value": [1]}]')$$, 'XH001'),
  -- XH002: type conflicts
  ('XH002: append to an object', $$SELECT hx_merge('{"l": {}}', '[{"op": "append", "path": "/l", "items": [1]}]')$$, 'XH002'),
  ('XH002: append to JSON null', $$SELECT hx_merge('{"l": null}', '[{"op": "append", "path": "/l", "items": [1]}]')$$, 'XH002'),
  ('XH002: union into a string', $$SELECT hx_merge('{"s": "a,b"}', '[{"op": "union", "path": "/s", "items": ["c"]}]')$$, 'XH002'),
  ('XH002: upsert into an object', $$SELECT hx_merge('{"m": {"id": 1}}', '[{"op": "upsert", "path": "/m", "items": [{"id": 1}]}]')$$, 'XH002'),
  ('XH002: increment a numeric string', $$SELECT hx_merge('{"n": "1"}', '[{"op": "increment", "path": "/n", "by": 1}]')$$, 'XH002'),
  ('XH002: increment a boolean', $$SELECT hx_merge('{"n": false}', '[{"op": "increment", "path": "/n", "by": 1}]')$$, 'XH002'),
  ('XH002: increment an array', $$SELECT hx_merge('{"n": [1]}', '[{"op": "increment", "path": "/n", "by": 1}]')$$, 'XH002'),
  ('XH002: increment the root object', $$SELECT hx_merge('{}', '[{"op": "increment", "path": "", "by": 1}]')$$, 'XH002'),
  ('XH002: replace below a number inside an array of objects', $$SELECT hx_merge('{"t": [{"n": 1}]}', '[{"op": "replace", "path": "/t/0/n/x", "value": 1}]')$$, 'XH002'),
  ('XH002: a write below a member that an earlier op turned into a string', $$SELECT hx_merge('{}', '[{"op": "replace", "path": "/a", "value": "s"}, {"op": "append", "path": "/a/l", "items": [1]}]')$$, 'XH002'),
  ('XH002: copy to a path below a boolean', $$SELECT hx_merge('{"a": 1, "b": true}', '[{"op": "copy", "from": "/a", "path": "/b/c"}]')$$, 'XH002')
  ) AS t(descr, stmt, code);

--
-- Nesting: an RFC 7386 write, a merge op and a union item 10,000 levels
-- deep work even with a 100kB stack (the merge is iterative, and a patch
-- with no null in it is taken as it is where the state has nothing to merge
-- into); where both the state and the write are that deep, the levels they
-- share are unpacked and encoded recursively, and a stack too small for
-- them is a clean 54001, not a crash.  (The ops are built as text: core's
-- jsonb_build_array() would itself recurse into the deep value.)
--
CREATE TEMP TABLE deep AS
  SELECT (repeat('{"a": ', 10000) || '1' || repeat('}', 10000))::jsonb AS o,
         ('[{"op": "merge", "path": "/m", "value": ' || repeat('{"a": ', 10000) || '1' || repeat('}', 10000) || '}]')::jsonb AS merge_op,
         ('[{"op": "union", "path": "/s", "items": [' || repeat('[', 10000) || repeat(']', 10000) || ']}]')::jsonb AS union_op,
         repeat('[', 10000) || repeat(']', 10000) AS a_text;
SET LOCAL max_stack_depth = '100kB';
SELECT ok((SELECT hx_merge('{}', o) = o FROM deep),
  'an object write 10,000 levels deep works with a 100kB stack');
SELECT ok((SELECT hx_merge('{}', merge_op) -> 'm' = o FROM deep),
  'a merge op 10,000 levels deep works with a 100kB stack');
SELECT ok((SELECT (hx_merge('{"s": [[]]}', union_op) -> 's' -> 1)::text = a_text FROM deep),
  'a union of an item 10,000 levels deep works with a 100kB stack');
SELECT throws_ok($$SELECT hx_merge(o, o) FROM deep$$, '54001', NULL,
  '54001: merging 10,000 levels into a state as deep, with a 100kB stack');
RESET max_stack_depth;
SELECT ok((SELECT hx_merge(o, o) = o FROM deep),
  'merging 10,000 levels into a state as deep works with the default stack');

--
-- All or nothing across rows: a conflict in one row's writes leaves
-- every row as it was
--
CREATE TEMP TABLE sessions (id int PRIMARY KEY, state jsonb NOT NULL);
INSERT INTO sessions VALUES (1, '{"n": 1, "l": []}'), (2, '{"n": {}, "l": []}'), (3, '{"n": 3, "l": []}');
SELECT throws_ok($$UPDATE sessions SET state = hx_merge(state, '[{"op": "append", "path": "/l", "items": ["x"]},
    {"op": "increment", "path": "/n", "by": 1}]')$$,
  'XH002', NULL, 'an UPDATE whose writes conflict in one row raises XH002');
SELECT is((SELECT jsonb_agg(state ORDER BY id) FROM sessions),
  '[{"n": 1, "l": []}, {"n": {}, "l": []}, {"n": 3, "l": []}]'::jsonb,
  'after the failed UPDATE no row holds a partial write');

SELECT * FROM finish();
ROLLBACK;
