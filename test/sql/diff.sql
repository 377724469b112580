--
-- hx_diff(old, new, arrays): the RFC 6902 patch from old to new
--

-- Objects, key by key: remove, add (never replace of a missing key),
-- recurse into objects, replace what differs
SELECT hx_diff('{"a": 1, "b": {"c": 1, "d": 2}, "e": "x"}', '{"b": {"c": 1, "d": 3}, "e": "x", "f": [1]}');

-- equal documents give [], whatever the number formatting or key order
SELECT hx_diff('{"a": [1, {"b": 2}], "c": null}', '{"c": null, "a": [1.0, {"b": 2.00}]}');
SELECT hx_diff('[]', '[]'), hx_diff('"s"', '"s"'), hx_diff('null', 'null');

-- a type change at any depth, or at the root, is a replace
SELECT hx_diff('{"a": {"b": 1}}', '{"a": [1]}');
SELECT hx_diff('{"a": 1}', '[1]');
SELECT hx_diff('"text"', '{"now": "object"}');

-- pointers are escaped: "~" as "~0", "/" as "~1", the empty key as "/"
SELECT hx_diff('{"a/b": 1, "m~n": 2, "": 3}', '{"a/b": 10, "": 30, "~1": 4}');

-- arrays, mode append (the default): items added at the end are "add /-"
SELECT hx_diff('{"log": [1, 2]}', '{"log": [1, 2, 3, {"x": 4}]}');
SELECT hx_diff('{"log": [1, 2]}', '{"log": [1, 2, 3]}', 'append');
SELECT hx_diff('[1]', '[1, 2]');
-- any other change replaces the whole array
SELECT hx_diff('{"log": [1, 2]}', '{"log": [2, 1]}');
SELECT hx_diff('{"log": [1, 2]}', '{"log": [1]}');
SELECT hx_diff('{"log": [1, 2]}', '{"log": [1, 3, 4]}');

-- arrays, mode replace: any change replaces the array
SELECT hx_diff('{"log": [1, 2]}', '{"log": [1, 2, 3]}', 'replace');
SELECT hx_diff('{"log": [1, 2]}', '{"log": [1, 2.0]}', 'replace');

-- arrays, mode index: element by element, recursing into objects
SELECT hx_diff('{"t": [{"id": 1, "done": false}, {"id": 2, "done": false}]}',
               '{"t": [{"id": 1, "done": true}, {"id": 2, "done": false}, {"id": 3}]}', 'index');
-- removals come from the end, so every index is valid when applied
SELECT hx_diff('[1, 2, 3, 4]', '[1]', 'index');
SELECT hx_diff('[[1, 2], "x"]', '[[1, 3], {"x": 1}]', 'index');

-- the patch always applies to old and gives new
SELECT hx_patch(o, hx_diff(o, n, m)) = n AS round_trip, m
  FROM (VALUES ('{"a": [1, {"b": [2, 3]}], "c": {"d": null}}'::jsonb,
                '{"a": [1, {"b": [3]}, 4], "c": {"e": "~/"}}'::jsonb)) v(o, n),
       unnest(ARRAY['append', 'replace', 'index']) m;

-- op order is deterministic: members in jsonb key order, depth first
SELECT hx_diff('{"b": 1, "aa": 1, "a": {"z": 1, "y": 1}}', '{"b": 2, "aa": 2, "a": {"z": 2, "y": 2}, "c": 1}');

-- a large document that differs in one leaf gives one op
SELECT hx_diff(d, jsonb_set(d, '{k500,v}', '"changed"')) AS one_leaf
  FROM (SELECT jsonb_object_agg('k' || i, jsonb_build_object('v', i, 'w', repeat('x', 50))) AS d
          FROM generate_series(1, 1000) i) s;
-- and one appended item to a long list gives one op
SELECT hx_diff(d, hx_merge(d, '[{"op": "append", "path": "/log", "items": ["new"]}]')) AS one_append
  FROM (SELECT jsonb_build_object('log', jsonb_agg(i)) AS d FROM generate_series(1, 100000) i) s;

-- errors
SELECT err($$SELECT hx_diff('{}', '{}', 'bogus')$$);
SELECT err($$SELECT hx_diff('{}', '{}', 'APPEND')$$);

-- NULL in, NULL out
SELECT hx_diff(NULL, '{}') IS NULL AS null_old, hx_diff('{}', '{}', NULL) IS NULL AS null_mode;

SELECT proname, provolatile, proisstrict, proparallel, obj_description(oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc WHERE proname = 'hx_diff';

-- nested deeper than hx_diff descends (1,024 levels): the differing
-- subtree is replaced whole, and the patch still applies
CREATE TABLE deep_pair AS
	SELECT (repeat('{"a": ', 5000) || '1' || repeat('}', 5000))::jsonb AS o,
	       (repeat('{"a": ', 5000) || '2' || repeat('}', 5000))::jsonb AS n;
SELECT jsonb_array_length(hx_diff(o, n)) AS ops,
       length(hx_diff(o, n)->0->>'path') / 2 AS depth_of_replace,
       hx_patch(o, hx_diff(o, n)) = n AS round_trip,
       hx_diff(o, o) = '[]' AS equal_is_empty
  FROM deep_pair;
DROP TABLE deep_pair;
