--
-- test/pgtap/patch.sql: hx_patch(doc, patch), strict RFC 6902, table-driven
--
-- Cases that test/sql/patch.sql does not have: deeper nesting, arrays of
-- objects, unicode and escaped keys, chains of operations that see each
-- other's effect, and one error case per way an operation can go wrong,
-- each with the SQLSTATE a client branches on.
--
\ir include/preamble.sql

BEGIN;
SELECT plan(97);

--
-- Results: one is() per row
--
SELECT is(hx_patch(doc, patch), expected, descr)
  FROM (VALUES
  ('add appends to and inserts into arrays inside an array of objects',
   '{"users": [{"id": 1, "tags": []}, {"id": 2, "tags": ["x"]}]}'::jsonb,
   '[{"op": "add", "path": "/users/1/tags/-", "value": "y"},
     {"op": "add", "path": "/users/0/tags/0", "value": "first"}]'::jsonb,
   '{"users": [{"id": 1, "tags": ["first"]}, {"id": 2, "tags": ["x", "y"]}]}'::jsonb),
  ('add at index 0 of an inner array shifts its elements right',
   '{"m": [[1, 2], [3]]}', '[{"op": "add", "path": "/m/0/0", "value": 0}]',
   '{"m": [[0, 1, 2], [3]]}'),
  ('add at the index equal to an inner array''s length appends',
   '{"m": [[1, 2]]}', '[{"op": "add", "path": "/m/0/2", "value": 3}]',
   '{"m": [[1, 2, 3]]}'),
  ('a multi-digit array index',
   '{"a": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}', '[{"op": "replace", "path": "/a/10", "value": "ten"}]',
   '{"a": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, "ten", 11]}'),
  ('escapes combine: "~0~1" is the key "~/" and "~10" is the key "/0"',
   '{"~/": 1, "/0": 2, "~": 3}',
   '[{"op": "replace", "path": "/~0~1", "value": 10}, {"op": "remove", "path": "/~10"}]',
   '{"~/": 10, "~": 3}'),
  ('a key made only of "~" and "/" characters moves by its escaped pointer',
   '{"~~//": 1}', '[{"op": "move", "from": "/~0~0~1~1", "path": "/plain"}]',
   '{"plain": 1}'),
  ('object members named like array indexes are members, not positions',
   '{"0": "a", "1": "b"}',
   '[{"op": "replace", "path": "/0", "value": "z"}, {"op": "remove", "path": "/1"}]',
   '{"0": "z"}'),
  ('in an object "-" is an ordinary member name',
   '{"o": {}}', '[{"op": "add", "path": "/o/-", "value": 1}, {"op": "test", "path": "/o/-", "value": 1}]',
   '{"o": {"-": 1}}'),
  ('unicode keys at several levels',
   '{"ключ": {"键": [1]}}',
   '[{"op": "add", "path": "/ключ/键/-", "value": 2}, {"op": "add", "path": "/ключ/é", "value": "ü"}]',
   '{"ключ": {"键": [1, 2], "é": "ü"}}'),
  ('keys with spaces, quotes and backslashes need no escaping in a pointer',
   '{}',
   '[{"op": "add", "path": "/with space", "value": 1}, {"op": "add", "path": "/quote\"d", "value": 2},
     {"op": "add", "path": "/back\\slash", "value": 3}]',
   '{"with space": 1, "quote\"d": 2, "back\\slash": 3}'),
  ('the empty key at two levels: "//" and "//x"',
   '{"": {"": 1}}',
   '[{"op": "replace", "path": "//", "value": 2}, {"op": "add", "path": "//x", "value": 3}]',
   '{"": {"": 2, "x": 3}}'),
  ('remove in an array of objects shifts the later elements left',
   '{"q": [{"id": 1}, {"id": 2}, {"id": 3}]}',
   '[{"op": "remove", "path": "/q/0"}, {"op": "test", "path": "/q/0/id", "value": 2},
     {"op": "remove", "path": "/q/1"}]',
   '{"q": [{"id": 2}]}'),
  ('move between two arrays',
   '{"todo": ["a", "b"], "done": ["c"]}', '[{"op": "move", "from": "/todo/0", "path": "/done/0"}]',
   '{"todo": ["b"], "done": ["a", "c"]}'),
  ('move from the end to the front of an array',
   '{"a": [1, 2, 3]}', '[{"op": "move", "from": "/a/2", "path": "/a/0"}]',
   '{"a": [3, 1, 2]}'),
  ('move to "-" of the same array moves the element to the end',
   '{"a": [1, 2, 3]}', '[{"op": "move", "from": "/a/0", "path": "/a/-"}]',
   '{"a": [2, 3, 1]}'),
  ('move a member into a nested object of a sibling',
   '{"x": 1, "y": {"z": {}}}', '[{"op": "move", "from": "/x", "path": "/y/z/x"}]',
   '{"y": {"z": {"x": 1}}}'),
  ('move an element of a nested array out to the root',
   '{"a": {"b": [{"c": 1}]}}', '[{"op": "move", "from": "/a/b/0", "path": "/c"}]',
   '{"a": {"b": []}, "c": {"c": 1}}'),
  ('copy of an array element is deep: appending to the copy leaves the source alone',
   '{"a": [[1]]}',
   '[{"op": "copy", "from": "/a/0", "path": "/b"}, {"op": "add", "path": "/b/-", "value": 2}]',
   '{"a": [[1]], "b": [1, 2]}'),
  ('copy of the whole document into one of its members',
   '{"a": 1}', '[{"op": "copy", "from": "", "path": "/snap"}]',
   '{"a": 1, "snap": {"a": 1}}'),
  ('copy into the middle of an array',
   '{"a": [1, 3], "t": 2}', '[{"op": "copy", "from": "/t", "path": "/a/1"}]',
   '{"a": [1, 2, 3], "t": 2}'),
  ('a chain of six operations, each seeing the effect of the previous ones',
   '{}',
   '[{"op": "add", "path": "/a", "value": {"n": 1}}, {"op": "replace", "path": "/a/n", "value": 2},
     {"op": "move", "from": "/a", "path": "/b"}, {"op": "test", "path": "/b", "value": {"n": 2}},
     {"op": "copy", "from": "/b/n", "path": "/c"}, {"op": "remove", "path": "/b"}]',
   '{"c": 2}'),
  ('replace the root by an array, then add to the new root',
   '{"a": 1}',
   '[{"op": "replace", "path": "", "value": []}, {"op": "add", "path": "/-", "value": 1},
     {"op": "add", "path": "/0", "value": 0}]',
   '[0, 1]'),
  ('add at the root of an array document, then edit the new root',
   '[1]', '[{"op": "add", "path": "", "value": {"x": []}}, {"op": "add", "path": "/x/-", "value": 1}]',
   '{"x": [1]}'),
  ('test compares arrays of objects by value: numbers numerically, keys in any order',
   '{"l": [{"a": [2.50], "b": 1.0}]}',
   '[{"op": "test", "path": "/l", "value": [{"b": 1, "a": [2.5]}]},
     {"op": "test", "path": "/l/0/a/0", "value": 2.5000}]',
   '{"l": [{"a": [2.50], "b": 1.0}]}'),
  ('test of a member whose value is JSON null passes: null is a value, not an absence',
   '{"a": null}', '[{"op": "test", "path": "/a", "value": null}]', '{"a": null}'),
  ('test of an element by index, then replace it',
   '["x", "y"]', '[{"op": "test", "path": "/1", "value": "y"}, {"op": "replace", "path": "/1", "value": "z"}]',
   '["x", "z"]'),
  ('replace with empty containers',
   '{"a": [1], "b": {"c": 1}}',
   '[{"op": "replace", "path": "/a", "value": {}}, {"op": "replace", "path": "/b", "value": []}]',
   '{"a": {}, "b": []}'),
  ('add of JSON null at the end of an array',
   '{"a": []}', '[{"op": "add", "path": "/a/-", "value": null}]', '{"a": [null]}'),
  ('remove of the only member leaves an empty object',
   '{"a": 1}', '[{"op": "remove", "path": "/a"}]', '{}'),
  ('a member removed and added again within one patch',
   '{"a": 1, "b": 2}',
   '[{"op": "remove", "path": "/a"}, {"op": "add", "path": "/a", "value": 3},
     {"op": "remove", "path": "/b"}, {"op": "add", "path": "/b", "value": [4]}]',
   '{"a": 3, "b": [4]}'),
  ('unicode and escaped characters in values survive',
   '{}', '[{"op": "add", "path": "/s", "value": "é\u00e9😀\n\"~/"}]',
   '{"s": "éé😀\n\"~/"}'),
  ('add replaces an existing member even when it holds a container',
   '{"a": {"deep": [1, 2, {"x": 1}]}}', '[{"op": "add", "path": "/a", "value": 0}]', '{"a": 0}'),
  ('move onto a sibling member replaces it',
   '{"a": 1, "b": 2}', '[{"op": "move", "from": "/a", "path": "/b"}]', '{"b": 1}'),
  ('move of a member to its own parent''s place replaces the parent',
   '{"a": {"b": {"c": [1]}}}', '[{"op": "move", "from": "/a/b/c", "path": "/a"}]', '{"a": [1]}')
  ) AS t(descr, doc, patch, expected);

-- number formatting and untouched bytes: compared as text
SELECT is(hx_patch(doc, patch)::text, expected, descr)
  FROM (VALUES
  ('numbers keep their scale; an exponent is stored as its value',
   '{"n": 1.50}'::jsonb, '[{"op": "add", "path": "/m", "value": 1e3}]'::jsonb,
   '{"m": 1000, "n": 1.50}'),
  ('a 51-digit decimal survives exactly',
   '{}', '[{"op": "add", "path": "/x", "value": 123456789012345678901234567890.000000000000000000001}]',
   '{"x": 123456789012345678901234567890.000000000000000000001}'),
  ('members next to an edited one keep their form (1.10 stays 1.10)',
   '{"a": {"b": 1.10}, "c": 1}', '[{"op": "replace", "path": "/c", "value": 2}]',
   '{"a": {"b": 1.10}, "c": 2}'),
  ('a patch of tests only returns the document as it was, trailing zeros included',
   '{"a": [1.000, {"b": 0.10}]}', '[{"op": "test", "path": "/a/0", "value": 1}]',
   '{"a": [1.000, {"b": 0.10}]}')
  ) AS t(descr, doc, patch, expected);

-- an object of 60 members: adds in reverse key order, removes, re-adds and
-- replaces give the same object as jsonb's own operators
SELECT is(
  hx_patch('{"z": 0, "a": 1}', (
    SELECT jsonb_agg(o ORDER BY ord) FROM (
      SELECT i AS ord, jsonb_build_object('op', 'add', 'path', '/k' || (100 - i), 'value', i) AS o
        FROM generate_series(1, 60) i
      UNION ALL
      SELECT 100 + i, jsonb_build_object('op', 'remove', 'path', '/k' || (100 - i))
        FROM generate_series(1, 60, 3) i
      UNION ALL
      SELECT 200 + i, jsonb_build_object('op', 'add', 'path', '/k' || (100 - i), 'value', 're')
        FROM generate_series(1, 60, 6) i
      UNION ALL
      SELECT 300 + i, jsonb_build_object('op', 'replace', 'path', '/k' || (100 - i), 'value', 'rep')
        FROM generate_series(2, 60, 5) i WHERE (i - 1) % 3 <> 0) s)),
  (SELECT '{"z": 0, "a": 1}'::jsonb || jsonb_object_agg('k' || (100 - i),
      CASE WHEN (i - 2) % 5 = 0 AND (i - 1) % 3 <> 0 THEN '"rep"'::jsonb
         WHEN (i - 1) % 6 = 0 THEN '"re"'::jsonb
         ELSE to_jsonb(i) END)
     FROM generate_series(1, 60) i
    WHERE (i - 1) % 3 <> 0 OR (i - 1) % 6 = 0),
  '60 adds in reverse key order, 20 removes, 10 re-adds and replaces agree with jsonb || and -');

-- documents 1,000 levels deep work at the default stack depth
SELECT is(
  hx_patch((repeat('{"a": [', 500) || '1' || repeat(']}', 500))::jsonb,
    ('[{"op": "replace", "path": "' || repeat('/a/0', 499) || '/a", "value": [2]}]')::jsonb),
  (repeat('{"a": [', 500) || '2' || repeat(']}', 500))::jsonb,
  'a replace 1,000 levels down (objects and arrays alternating)');

--
-- Errors: one throws_ok() per row, by SQLSTATE, the code a client branches
-- on (what the messages say, and the operation their context names, is
-- test/sql/patch.sql's to show)
--
SELECT throws_ok(stmt, code::char(5), NULL, descr)
  FROM (VALUES
  -- 22023: malformed patch documents and operations
  ('22023: the patch is JSON null', $$SELECT hx_patch('{}', 'null')$$, '22023'),
  ('22023: the patch is true', $$SELECT hx_patch('{}', 'true')$$, '22023'),
  ('22023: an operation that is JSON null', $$SELECT hx_patch('{}', '[null]')$$, '22023'),
  ('22023: an operation that is a string, after a good one', $$SELECT hx_patch('{}', '[{"op": "add", "path": "/a", "value": 1}, "remove"]')$$, '22023'),
  ('22023: an empty op name', $$SELECT hx_patch('{}', '[{"op": "", "path": ""}]')$$, '22023'),
  ('22023: an op name with a trailing space', $$SELECT hx_patch('{}', '[{"op": "add ", "path": "/a", "value": 1}]')$$, '22023'),
  ('22023: op names are case-sensitive ("Test")', $$SELECT hx_patch('{"a": 1}', '[{"op": "Test", "path": "/a", "value": 1}]')$$, '22023'),
  ('22023: an op name that is an array', $$SELECT hx_patch('{}', '[{"op": ["add"], "path": "/a", "value": 1}]')$$, '22023'),
  ('22023: a numeric path', $$SELECT hx_patch('{"0": 1}', '[{"op": "remove", "path": 0}]')$$, '22023'),
  ('22023: copy without "from" after a good operation names operation 1', $$SELECT hx_patch('{}', '[{"op": "add", "path": "/a", "value": 1}, {"op": "copy", "path": "/b"}]')$$, '22023'),
  ('22023: add with "value" misspelled', $$SELECT hx_patch('{}', '[{"op": "add", "path": "/a", "values": 1}]')$$, '22023'),
  ('22023: move of the whole document into one of its members', $$SELECT hx_patch('{"a": {}}', '[{"op": "move", "from": "", "path": "/a"}]')$$, '22023'),
  ('22023: move into its own grandchild through escaped tokens', $$SELECT hx_patch('{"a/b": {"c": {}}}', '[{"op": "move", "from": "/a~1b", "path": "/a~1b/c/d"}]')$$, '22023'),
  ('22023: remove of the whole document after earlier operations', $$SELECT hx_patch('{}', '[{"op": "add", "path": "/a", "value": 1}, {"op": "test", "path": "/a", "value": 1},
    {"op": "remove", "path": ""}]')$$, '22023'),
  -- 22P02: malformed JSON pointers
  ('22P02: a URI fragment pointer "#/a"', $$SELECT hx_patch('{"a": 1}', '[{"op": "remove", "path": "#/a"}]')$$, '22P02'),
  ('22P02: "~1" without the leading slash', $$SELECT hx_patch('{"/": 1}', '[{"op": "remove", "path": "~1"}]')$$, '22P02'),
  ('22P02: a lone "~" at the end of a nested token', $$SELECT hx_patch('{"a": {"b~": 1}}', '[{"op": "remove", "path": "/a/b~"}]')$$, '22P02'),
  ('22P02: "~3" is not an escape', $$SELECT hx_patch('{}', '[{"op": "add", "path": "/a~3b", "value": 1}]')$$, '22P02'),
  ('22P02: a space before the first slash', $$SELECT hx_patch('{"a": 1}', '[{"op": "test", "path": " /a", "value": 1}]')$$, '22P02'),
  ('22P02: a malformed "from" of move, after a good operation', $$SELECT hx_patch('{"a": {"b": 1}}', '[{"op": "test", "path": "/a/b", "value": 1},
    {"op": "move", "from": "a/b", "path": "/c"}]')$$, '22P02'),
  ('22P02: a malformed pointer is an error even inside a test of a missing path', $$SELECT hx_patch('{}', '[{"op": "test", "path": "/nope~", "value": 1}]')$$, '22P02'),
  -- 22033: array indexes that are not indexes
  ('22033: "-1" is not an index', $$SELECT hx_patch('{"a": [1, 2]}', '[{"op": "remove", "path": "/a/-1"}]')$$, '22033'),
  ('22033: " 1" with a leading space', $$SELECT hx_patch('[1, 2]', '[{"op": "replace", "path": "/ 1", "value": 0}]')$$, '22033'),
  ('22033: "1.5" is not an index', $$SELECT hx_patch('[1, 2]', '[{"op": "replace", "path": "/1.5", "value": 0}]')$$, '22033'),
  ('22033: "0x1" is not an index', $$SELECT hx_patch('[1, 2]', '[{"op": "remove", "path": "/0x1"}]')$$, '22033'),
  ('22033: an Arabic-Indic digit is not an index', $$SELECT hx_patch('[1, 2]', '[{"op": "remove", "path": "/١"}]')$$, '22033'),
  ('22033: a leading zero deep in the path', $$SELECT hx_patch('{"a": [{"b": 1}]}', '[{"op": "remove", "path": "/a/00/b"}]')$$, '22033'),
  ('22033: a bad index in the "from" of copy', $$SELECT hx_patch('{"a": [1, 2]}', '[{"op": "copy", "from": "/a/01", "path": "/b"}]')$$, '22033'),
  ('22033: a bad index in a test', $$SELECT hx_patch('[1]', '[{"op": "test", "path": "/0 ", "value": 1}]')$$, '22033'),
  ('22033: the empty token is not an index', $$SELECT hx_patch('{"a": [1]}', '[{"op": "add", "path": "/a/", "value": 1}]')$$, '22033'),
  -- 2203A: paths that do not exist
  ('2203A: a member of an array element that does not exist', $$SELECT hx_patch('{"users": [{"name": "a"}]}', '[{"op": "replace", "path": "/users/1/name", "value": "b"}]')$$, '2203A'),
  ('2203A: add below a JSON null', $$SELECT hx_patch('{"a": null}', '[{"op": "add", "path": "/a/b", "value": 1}]')$$, '2203A'),
  ('2203A: a number used as a member of an object', $$SELECT hx_patch('{"a": {}}', '[{"op": "remove", "path": "/a/0"}]')$$, '2203A'),
  ('2203A: replace in an empty array', $$SELECT hx_patch('[]', '[{"op": "replace", "path": "/0", "value": 1}]')$$, '2203A'),
  ('2203A: "-" in the middle of a path', $$SELECT hx_patch('{"a": [{}]}', '[{"op": "add", "path": "/a/-/x", "value": 1}]')$$, '2203A'),
  ('2203A: copy to an index past the end', $$SELECT hx_patch('{"a": [1]}', '[{"op": "copy", "from": "/a/0", "path": "/a/3"}]')$$, '2203A'),
  ('2203A: add past the end of a nested array', $$SELECT hx_patch('{"m": [[1]]}', '[{"op": "add", "path": "/m/0/2", "value": 2}]')$$, '2203A'),
  ('2203A: removing the same member twice fails on the second operation', $$SELECT hx_patch('{"a": 1}', '[{"op": "remove", "path": "/a"}, {"op": "remove", "path": "/a"}]')$$, '2203A'),
  ('2203A: move from a missing nested member', $$SELECT hx_patch('{"a": {"b": {}}}', '[{"op": "move", "from": "/a/b/c", "path": "/d"}]')$$, '2203A'),
  ('2203A: a member of a scalar document', $$SELECT hx_patch('5', '[{"op": "replace", "path": "/a", "value": 1}]')$$, '2203A'),
  ('2203A: replace of a member that an earlier move took away', $$SELECT hx_patch('{"a": 1}', '[{"op": "move", "from": "/a", "path": "/b"}, {"op": "replace", "path": "/a", "value": 2}]')$$, '2203A'),
  ('2203A: an index past the end of an array that a remove shortened', $$SELECT hx_patch('[1, 2]', '[{"op": "remove", "path": "/0"}, {"op": "replace", "path": "/1", "value": 0}]')$$, '2203A'),
  -- XH001: failed tests
  ('XH001: true is not 1', $$SELECT hx_patch('{"a": true}', '[{"op": "test", "path": "/a", "value": 1}]')$$, 'XH001'),
  ('XH001: a precomposed "é" is not "e" with a combining accent', $$SELECT hx_patch('{"s": "\u00e9"}', '[{"op": "test", "path": "/s", "value": "e\u0301"}]')$$, 'XH001'),
  ('XH001: an array is not equal to a longer one', $$SELECT hx_patch('[1, 2]', '[{"op": "test", "path": "", "value": [1, 2, 3]}]')$$, 'XH001'),
  ('XH001: an empty object is not an empty array', $$SELECT hx_patch('{"a": {}}', '[{"op": "test", "path": "/a", "value": []}]')$$, 'XH001'),
  ('XH001: 1.0 is not 1.01', $$SELECT hx_patch('{"a": 1.0}', '[{"op": "test", "path": "/a", "value": 1.01}]')$$, 'XH001'),
  ('XH001: the string "null" is not null', $$SELECT hx_patch('{"a": null}', '[{"op": "test", "path": "/a", "value": "null"}]')$$, 'XH001'),
  ('XH001: an object with an extra nested member is not equal', $$SELECT hx_patch('{"a": [{"b": 1}]}', '[{"op": "test", "path": "/a", "value": [{"b": 1, "c": {}}]}]')$$, 'XH001'),
  ('XH001: a test after a replace sees the new value, so the old one fails', $$SELECT hx_patch('{"a": 1}', '[{"op": "test", "path": "/a", "value": 1}, {"op": "replace", "path": "/a", "value": 2},
    {"op": "test", "path": "/a", "value": 1}]')$$, 'XH001'),
  ('XH001: a test of a member that an earlier remove took away', $$SELECT hx_patch('{"a": 1}', '[{"op": "remove", "path": "/a"}, {"op": "test", "path": "/a", "value": 1}]')$$, 'XH001'),
  ('XH001: a test of an index past the end', $$SELECT hx_patch('[1]', '[{"op": "test", "path": "/1", "value": 1}]')$$, 'XH001')
  ) AS t(descr, stmt, code);

--
-- 54001: nesting deeper than the stack allows is a clean error, not a crash
--
CREATE TEMP TABLE deep AS
  SELECT (repeat('{"a": ', 10000) || '1' || repeat('}', 10000))::jsonb AS d;
SET LOCAL max_stack_depth = '100kB';
SELECT throws_ok($$SELECT hx_patch(d, ('[{"op": "replace", "path": "' || repeat('/a', 10000) || '", "value": 2}]')::jsonb) FROM deep$$,
  '54001', NULL, '54001: a replace 10,000 levels down with a 100kB stack');
SELECT throws_ok($$SELECT hx_patch('{}', jsonb_build_array(jsonb_build_object('op', 'copy', 'from', '/x', 'path', '/y'))) FROM deep$$,
  '2203A', NULL, 'with the small stack, other errors keep their own SQLSTATE');
RESET max_stack_depth;
SELECT is(hx_patch(d, ('[{"op": "replace", "path": "' || repeat('/a', 10000) || '", "value": 2}]')::jsonb),
  (repeat('{"a": ', 10000) || '2' || repeat('}', 10000))::jsonb,
  'the same replace 10,000 levels down succeeds at the default stack depth')
  FROM deep;

--
-- All or nothing, row by row: a failing patch in a multi-row UPDATE leaves
-- every row as it was
--
CREATE TEMP TABLE docs (id int PRIMARY KEY, doc jsonb NOT NULL);
INSERT INTO docs VALUES (1, '{"n": 1}'), (2, '{"n": "x"}'), (3, '{"n": 3}');
SELECT throws_ok($$UPDATE docs SET doc = hx_patch(doc, '[{"op": "replace", "path": "/n", "value": 0},
    {"op": "test", "path": "/m", "value": null}]') WHERE id = 2 OR doc ? 'n'$$,
  'XH001', NULL, 'an UPDATE whose patch fails on its test raises XH001');
SELECT is((SELECT jsonb_agg(doc ORDER BY id) FROM docs), '[{"n": 1}, {"n": "x"}, {"n": 3}]'::jsonb,
  'after the failed UPDATE every row holds its old document');

SELECT * FROM finish();
ROLLBACK;
