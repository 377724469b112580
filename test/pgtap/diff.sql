--
-- test/pgtap/diff.sql: hx_diff(old, new, arrays), table-driven
--
-- For each pair: the exact patch (ops, their order, escaped pointers), and
-- that hx_patch applies it to old and gives new.  Cases that test/sql/diff.sql
-- does not have: null against a missing member, every type change, nested
-- arrays in each arrays mode, unicode and escaped keys in nested paths,
-- scalar roots.
--
\ir include/preamble.sql

BEGIN;
SELECT plan(76);

CREATE TEMP TABLE cases (descr text, old jsonb, new jsonb, mode text, expected jsonb);
INSERT INTO cases VALUES
  ('index mode recurses into objects inside arrays of arrays',
   '{"m": [[{"a": 1}], [2]]}', '{"m": [[{"a": 2}], [2, 3]]}', 'index',
   '[{"op": "replace", "path": "/m/0/0/a", "value": 2}, {"op": "add", "path": "/m/1/-", "value": 3}]'),
  ('append mode does not recurse into elements: a nested array that grew replaces the outer array',
   '{"a": [[1]]}', '{"a": [[1, 2]]}', 'append',
   '[{"op": "replace", "path": "/a", "value": [[1, 2]]}]'),
  ('append mode replaces an array whose object element changed',
   '{"a": [{"x": 1}]}', '{"a": [{"x": 2}]}', 'append',
   '[{"op": "replace", "path": "/a", "value": [{"x": 2}]}]'),
  ('index mode patches the changed member of that element',
   '{"a": [{"x": 1}]}', '{"a": [{"x": 2}]}', 'index',
   '[{"op": "replace", "path": "/a/0/x", "value": 2}]'),
  ('a member holding JSON null that disappears is removed',
   '{"a": null, "b": 1}', '{"b": 1}', 'append', '[{"op": "remove", "path": "/a"}]'),
  ('a new member holding JSON null is added, with its null value',
   '{}', '{"a": null}', 'append', '[{"op": "add", "path": "/a", "value": null}]'),
  ('JSON null changed to a number is a replace',
   '{"a": null}', '{"a": 1}', 'append', '[{"op": "replace", "path": "/a", "value": 1}]'),
  ('every type change is a replace, in jsonb key order',
   '{"n": 1, "s": "1", "t": true, "o": {}, "l": []}', '{"n": "1", "s": 1, "t": 1, "o": [], "l": {}}', 'index',
   '[{"op": "replace", "path": "/l", "value": {}}, {"op": "replace", "path": "/n", "value": "1"},
     {"op": "replace", "path": "/o", "value": []}, {"op": "replace", "path": "/s", "value": 1},
     {"op": "replace", "path": "/t", "value": 1}]'),
  ('numbers compare numerically: 1 and 1.0 give nothing, 2.50 and 2.51 a replace',
   '{"a": 1, "b": 2.50}', '{"a": 1.0, "b": 2.51}', 'append', '[{"op": "replace", "path": "/b", "value": 2.51}]'),
  ('an empty array that gains an item: append mode adds at "-"',
   '{"l": []}', '{"l": [1]}', 'append', '[{"op": "add", "path": "/l/-", "value": 1}]'),
  ('an empty array that gains an item: replace mode replaces it',
   '{"l": []}', '{"l": [1]}', 'replace', '[{"op": "replace", "path": "/l", "value": [1]}]'),
  ('an empty array that gains an item: index mode adds at "-"',
   '{"l": []}', '{"l": [1]}', 'index', '[{"op": "add", "path": "/l/-", "value": 1}]'),
  ('index mode: an array emptied is removed from the end',
   '{"l": [1, 2]}', '{"l": []}', 'index', '[{"op": "remove", "path": "/l/1"}, {"op": "remove", "path": "/l/0"}]'),
  ('index mode: inner arrays that shrink and grow',
   '[[1, 2], [3]]', '[[1], [3, 4]]', 'index', '[{"op": "remove", "path": "/0/1"}, {"op": "add", "path": "/1/-", "value": 4}]'),
  ('index mode: the first of two elements removed shows as an edit and a removal at the end',
   '[{"id": 1}, {"id": 2}]', '[{"id": 2}]', 'index', '[{"op": "replace", "path": "/0/id", "value": 2}, {"op": "remove", "path": "/1"}]'),
  ('index mode: an object element that became a string',
   '[{"a": 1}]', '["x"]', 'index', '[{"op": "replace", "path": "/0", "value": "x"}]'),
  ('append mode: a prefix that is equal by value (1.0 and 1) still counts as unchanged',
   '[1.0]', '[1, 2]', 'append', '[{"op": "add", "path": "/-", "value": 2}]'),
  ('append mode: an empty array appended as an item',
   '[]', '[[]]', 'append', '[{"op": "add", "path": "/-", "value": []}]'),
  ('append mode: an array that lost its first element is replaced',
   '{"l": [1, 2, 3]}', '{"l": [2, 3]}', 'append', '[{"op": "replace", "path": "/l", "value": [2, 3]}]'),
  ('replace mode still recurses into objects',
   '{"o": {"l": [1], "n": 1}}', '{"o": {"l": [1], "n": 2}}', 'replace', '[{"op": "replace", "path": "/o/n", "value": 2}]'),
  ('a scalar root that changes', '1', '2', 'append', '[{"op": "replace", "path": "", "value": 2}]'),
  ('an equal string root', '"a"', '"a"', 'index', '[]'),
  ('JSON null to false at the root', 'null', 'false', 'replace', '[{"op": "replace", "path": "", "value": false}]'),
  ('1 and 1.0 at the root are equal', '1', '1.0', 'append', '[]'),
  ('an object root that becomes JSON null', '{"a": 1}', 'null', 'index', '[{"op": "replace", "path": "", "value": null}]'),
  ('"/" and "~" escaped in a nested index-mode path',
   '{"a/b": [{"~": 1}]}', '{"a/b": [{"~": 2}]}', 'index', '[{"op": "replace", "path": "/a~1b/0/~0", "value": 2}]'),
  ('unicode keys and the empty key; keys shorter in bytes come first',
   '{"é": 1, "": {"ü": 1}}', '{"é": 2, "": {"ü": 1, "ß": 0}}', 'append',
   '[{"op": "add", "path": "//ß", "value": 0}, {"op": "replace", "path": "/é", "value": 2}]'),
  ('a key that is a prefix of another',
   '{"a": 1, "ab": 1}', '{"ab": 2}', 'append', '[{"op": "remove", "path": "/a"}, {"op": "replace", "path": "/ab", "value": 2}]'),
  ('keys "~0" and "~1" are escaped to "~00" and "~01"',
   '{"~0": 1}', '{"~1": 1}', 'append', '[{"op": "remove", "path": "/~00"}, {"op": "add", "path": "/~01", "value": 1}]'),
  ('object members named "-" and "0" are members',
   '{"-": 1, "0": 1}', '{"0": 2}', 'index', '[{"op": "remove", "path": "/-"}, {"op": "replace", "path": "/0", "value": 2}]'),
  ('a member added below an array element in index mode',
   '{"t": [{"id": 1}]}', '{"t": [{"id": 1, "tags": ["x"]}]}', 'index', '[{"op": "add", "path": "/t/0/tags", "value": ["x"]}]'),
  ('index mode: a nested array in an object in an array gains items',
   '{"t": [{"l": [1]}]}', '{"t": [{"l": [1, 2, 3]}]}', 'index',
   '[{"op": "add", "path": "/t/0/l/-", "value": 2}, {"op": "add", "path": "/t/0/l/-", "value": 3}]');

SELECT is(hx_diff(old, new, mode), expected, descr) FROM cases ORDER BY descr;
SELECT is(hx_patch(old, hx_diff(old, new, mode)), new, 'round trip: ' || descr) FROM cases ORDER BY descr;

-- values in the patch are the new document's values, in their written form
SELECT is(hx_diff('{"a": 1}', '{"a": 1.50, "b": [1.0, {"c": 0.10}]}')::text,
  '[{"op": "replace", "path": "/a", "value": 1.50}, {"op": "add", "path": "/b", "value": [1.0, {"c": 0.10}]}]',
  'values in the patch keep their written form (1.50, 1.0, 0.10)');

-- the default arrays mode is append, and the arguments have names
SELECT is(hx_diff('{"l": [1], "o": [{"x": 1}]}', '{"l": [1, 2], "o": [{"x": 2}]}'),
  '[{"op": "add", "path": "/l/-", "value": 2}, {"op": "replace", "path": "/o", "value": [{"x": 2}]}]'::jsonb,
  'without the third argument arrays are compared in append mode');
SELECT is(hx_diff(new => '[1, 2]', old => '[1, 3]', arrays => 'index'),
  '[{"op": "replace", "path": "/1", "value": 2}]'::jsonb,
  'named arguments old, new and arrays');

-- one edited element of 1,000 in index mode is one op; in append mode, one replace
SELECT is(hx_diff(d, jsonb_set(d, '{items,700,done}', 'true'), 'index'),
  '[{"op": "replace", "path": "/items/700/done", "value": true}]'::jsonb,
  'index mode: one edited element of 1,000 gives one op at its index')
  FROM (SELECT jsonb_build_object('items', jsonb_agg(jsonb_build_object('id', i, 'done', false) ORDER BY i)) AS d
      FROM generate_series(0, 999) i) s;
SELECT is(jsonb_array_length(hx_diff(d, jsonb_set(d, '{items,700,done}', 'true'), 'append')), 1,
  'append mode: the same edit gives one replace of the array')
  FROM (SELECT jsonb_build_object('items', jsonb_agg(jsonb_build_object('id', i, 'done', false) ORDER BY i)) AS d
      FROM generate_series(0, 999) i) s;

-- documents 1,000 levels deep work at the default stack depth
SELECT is(
  hx_diff((repeat('{"a": [', 500) || '1' || repeat(']}', 500))::jsonb,
      (repeat('{"a": [', 500) || '2' || repeat(']}', 500))::jsonb, 'index'),
  ('[{"op": "replace", "path": "' || repeat('/a/0', 500) || '", "value": 2}]')::jsonb,
  'a leaf 1,000 levels down (objects and arrays alternating) gives one replace');

-- NULL in, NULL out
SELECT is(hx_diff('{}', '{"a": 1}', NULL), NULL::jsonb, 'a NULL arrays mode gives NULL, not the default mode');

--
-- Errors
--
SELECT throws_ok(stmt, code::char(5), NULL, descr)
  FROM (VALUES
  ('22023: the empty arrays mode', $$SELECT hx_diff('[1]', '[1, 2]', '')$$, '22023'),
  ('22023: arrays modes are case-sensitive ("Index")', $$SELECT hx_diff('[1]', '[1, 2]', 'Index')$$, '22023'),
  ('22023: no trimming of the arrays mode (" index")', $$SELECT hx_diff('[1]', '[1, 2]', ' index')$$, '22023'),
  ('22023: an unknown mode is an error even for documents without arrays', $$SELECT hx_diff('{"a": 1}', '{"a": 2}', 'merge')$$, '22023')
  ) AS t(descr, stmt, code);

CREATE TEMP TABLE deep AS
  SELECT (repeat('{"a": ', 10000) || '1' || repeat('}', 10000))::jsonb AS o,
       (repeat('{"a": ', 10000) || '2' || repeat('}', 10000))::jsonb AS n;
SET LOCAL max_stack_depth = '100kB';
SELECT throws_ok($$SELECT hx_diff(o, n) FROM deep$$, '54001', NULL,
  '54001: a diff 10,000 levels deep with a 100kB stack');
RESET max_stack_depth;

SELECT * FROM finish();
ROLLBACK;
