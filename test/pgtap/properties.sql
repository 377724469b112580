--
-- test/pgtap/properties.sql: laws of hx_patch, hx_merge and hx_diff over
-- documents generated in SQL from a fixed seed
--
-- The generator (pg_temp functions, gone at ROLLBACK) makes nested objects
-- and arrays with unicode keys, keys holding "~" and "/", the empty key,
-- empty containers, and numbers with decimals, trailing zeros, exponents
-- and more digits than a double holds; mutate() derives a changed copy
-- (changed leaves, new and removed members, arrays that grow, shrink,
-- reverse and lose their head, type changes).  setseed() makes every run
-- see the same documents.
--
-- Each property is one assertion over all generated cases; when it fails,
-- the first counterexample (by case number) is printed with diag().
--
\ir include/preamble.sql

BEGIN;
SELECT plan(26);

\ir include/gen.sql

---------------------------------------------------------------------------
-- The cases
---------------------------------------------------------------------------

SELECT setseed(0.20261122);

-- 400 pairs (a, b): b a mutation of a, sometimes a itself or unrelated
CREATE TEMP TABLE pairs (i int PRIMARY KEY, a jsonb NOT NULL, b jsonb NOT NULL);
DO $$
DECLARE
  a jsonb;
  r float8;
BEGIN
  FOR i IN 1 .. 400 LOOP
    a := pg_temp.gen_doc();
    r := random();
    INSERT INTO pairs VALUES (i, a,
      CASE WHEN r < 0.05 THEN pg_temp.gen_doc()
         WHEN r < 0.10 THEN a
         ELSE pg_temp.mutate(a, 0.3 + random() * 0.5) END);
  END LOOP;
END $$;

CREATE TEMP TABLE modes (m text);
INSERT INTO modes VALUES ('append'), ('replace'), ('index');

-- The generator is worth something only if it makes what the laws are about
CREATE FUNCTION pg_temp.depth(v jsonb) RETURNS int LANGUAGE sql AS $$
  SELECT CASE jsonb_typeof(v)
    WHEN 'array' THEN 1 + coalesce((SELECT max(pg_temp.depth(e)) FROM jsonb_array_elements(v) e), 0)
    WHEN 'object' THEN 1 + coalesce((SELECT max(pg_temp.depth(value)) FROM jsonb_each(v)), 0)
    ELSE 0 END
$$;

SELECT pg_temp.holds('the generated documents contain the cases the laws are about',
  (SELECT nullif(concat_ws(', ',
    CASE WHEN NOT bool_or(k LIKE '%~%') THEN 'no key with "~"' END,
    CASE WHEN NOT bool_or(k LIKE '%/%') THEN 'no key with "/"' END,
    CASE WHEN NOT bool_or(k = '') THEN 'no empty key' END,
    CASE WHEN NOT bool_or(k ~ '[^\x01-\x7f]') THEN 'no non-ASCII key' END,
    CASE WHEN NOT bool_or(v = '{}') THEN 'no empty object' END,
    CASE WHEN NOT bool_or(v = '[]') THEN 'no empty array' END,
    CASE WHEN NOT bool_or(v = 'null') THEN 'no null' END,
    CASE WHEN NOT bool_or(jsonb_typeof(v) = 'number' AND (v #>> '{}')::numeric <> trunc((v #>> '{}')::numeric))
      THEN 'no non-integer number' END,
    CASE WHEN NOT bool_or(jsonb_typeof(v) = 'array' AND jsonb_array_length(v) >= 3) THEN 'no array of 3 or more' END,
    CASE WHEN NOT bool_or(jsonb_typeof(v) NOT IN ('object', 'array') AND k IS NULL AND v = a) THEN 'no scalar document' END,
    CASE WHEN (SELECT max(pg_temp.depth(a)) FROM pairs) < 4 THEN 'nothing 4 levels deep' END), '')
     FROM pairs, LATERAL pg_temp.nodes(a) n));

SELECT pg_temp.holds('at least 80% of the generated pairs differ',
  (SELECT format('only %s of %s pairs differ', count(*) FILTER (WHERE a <> b), count(*))
     FROM pairs HAVING count(*) FILTER (WHERE a <> b) < 0.8 * count(*)));

---------------------------------------------------------------------------
-- hx_diff and hx_patch
---------------------------------------------------------------------------

CREATE FUNCTION pg_temp.round_trip_failure(a jsonb, b jsonb, m text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  p jsonb;
  r jsonb;
BEGIN
  p := hx_diff(a, b, m);
  r := hx_patch(a, p);
  IF r IS DISTINCT FROM b THEN
    RETURN format('a=%s b=%s patch=%s gives %s', a, b, p, r);
  END IF;
  RETURN NULL;
EXCEPTION WHEN OTHERS THEN
  RETURN format('a=%s b=%s patch=%s raises %s: %s', a, b, p, SQLSTATE, SQLERRM);
END $$;

SELECT pg_temp.holds(format('hx_patch(a, hx_diff(a, b, %L)) = b for 400 pairs', m),
  (SELECT f FROM pairs, LATERAL pg_temp.round_trip_failure(a, b, m) f WHERE f IS NOT NULL ORDER BY i LIMIT 1))
  FROM modes ORDER BY m;

SELECT pg_temp.holds('hx_diff(a, a, m) and hx_diff(a, a with 1 written 1.000, m) are [] in every mode',
  (SELECT format('mode %s, a=%s: %s / %s', m, a, hx_diff(a, a, m), hx_diff(a, pg_temp.reformat(a), m))
     FROM pairs, modes
    WHERE hx_diff(a, a, m) <> '[]' OR hx_diff(a, pg_temp.reformat(a), m) <> '[]'
    ORDER BY i, m LIMIT 1));

SELECT pg_temp.holds('hx_diff(a, b, m) is [] only when a = b, in every mode',
  (SELECT format('mode %s, a=%s b=%s: %s', m, a, b, hx_diff(a, b, m))
     FROM pairs, modes
    WHERE (hx_diff(a, b, m) = '[]') <> (a = b)
    ORDER BY i, m LIMIT 1));

-- the patch is plain RFC 6902 that any strict applier takes: only add,
-- remove and replace with just the members they need; remove and replace
-- name what exists in a; add never overwrites an existing member, and
-- "add .../-" appends to an array of a
CREATE FUNCTION pg_temp.op_failure(a jsonb, op jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  path text := op ->> 'path';
BEGIN
  IF op ->> 'op' IN ('remove') AND (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(op) k) <> '{op,path}' THEN
    RETURN 'remove with other members';
  END IF;
  IF op ->> 'op' IN ('add', 'replace') AND (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(op) k) <> '{op,path,value}' THEN
    RETURN 'add or replace with other members';
  END IF;
  IF op ->> 'op' NOT IN ('add', 'remove', 'replace') THEN
    RETURN 'an op other than add, remove and replace';
  END IF;
  IF op ->> 'op' IN ('remove', 'replace') AND pg_temp.resolve(a, path) IS NULL THEN
    RETURN 'remove or replace of a path that a does not have';
  END IF;
  IF op ->> 'op' = 'add' THEN
    IF path LIKE '%/-' AND jsonb_typeof(pg_temp.resolve(a, left(path, -2))) = 'array' THEN
      NULL;  -- appends to an array of a
    ELSIF path LIKE '%/-' AND jsonb_typeof(pg_temp.resolve(a, left(path, -2))) IS DISTINCT FROM 'object' THEN
      RETURN 'add at "-" of something that is neither an array nor an object of a';
    ELSIF pg_temp.resolve(a, path) IS NOT NULL THEN
      RETURN 'add of a member that a already has';
    END IF;
  END IF;
  RETURN NULL;
END $$;

SELECT pg_temp.holds('every op of hx_diff(a, b, m) is a minimal add, remove or replace valid against a',
  (SELECT format('mode %s, a=%s b=%s, op %s: %s', m, a, b, op, f)
     FROM pairs, modes, LATERAL jsonb_array_elements(hx_diff(a, b, m)) op, LATERAL pg_temp.op_failure(a, op) f
    WHERE f IS NOT NULL
    ORDER BY i, m LIMIT 1));

-- append mode: items added at the end of a list give one "add /-" each, and
-- nothing else, whatever sits beside the list; the list's old items are
-- written with 1 as 1.000 in the new document, equal by value only
SELECT pg_temp.holds('append mode: hx_diff of a list that gained items is one "add /log/-" per item, in order',
  (SELECT format('x=%s y=%s: %s', x, y, hx_diff(x, y))
     FROM (SELECT i, items,
          jsonb_build_object('doc', a, 'log', log) AS x,
          jsonb_build_object('doc', a, 'log', pg_temp.reformat(log) || items) AS y
         FROM (SELECT i, a,
              coalesce((SELECT n.v FROM pg_temp.nodes(a) WITH ORDINALITY n(k, v, ord)
                     WHERE jsonb_typeof(n.v) = 'array' ORDER BY ord LIMIT 1), '[]') AS log,
              (SELECT jsonb_agg(n.v ORDER BY ord) FROM pg_temp.nodes(b) WITH ORDINALITY n(k, v, ord)
                WHERE ord <= 1 + i % 4) AS items
             FROM pairs) s) t
    WHERE hx_diff(x, y) IS DISTINCT FROM
      (SELECT jsonb_agg(jsonb_build_object('op', 'add', 'path', '/log/-', 'value', v) ORDER BY ord)
         FROM jsonb_array_elements(items) WITH ORDINALITY e(v, ord))
    ORDER BY i LIMIT 1));

-- index mode on arrays that grow and shrink at every level
CREATE FUNCTION pg_temp.resize(v jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  r jsonb;
  e jsonb;
  k text;
BEGIN
  CASE jsonb_typeof(v)
    WHEN 'array' THEN
      r := '[]';
      FOR e IN SELECT x FROM jsonb_array_elements(v) WITH ORDINALITY t(x, ord) ORDER BY ord LOOP
        r := r || jsonb_build_array(pg_temp.resize(e));
      END LOOP;
      CASE pg_temp.rint(3)
        WHEN 0 THEN r := pg_temp.slice(r, 0, pg_temp.rint(jsonb_array_length(r) + 1));
        WHEN 1 THEN
          FOR i IN 0 .. pg_temp.rint(4) LOOP
            r := r || jsonb_build_array(pg_temp.gen_value(2));
          END LOOP;
        ELSE NULL;
      END CASE;
      RETURN r;
    WHEN 'object' THEN
      r := '{}';
      FOR k, e IN SELECT key, value FROM jsonb_each(v) ORDER BY key LOOP
        r := r || jsonb_build_object(k, pg_temp.resize(e));
      END LOOP;
      RETURN r;
    ELSE
      RETURN v;
  END CASE;
END $$;

CREATE TEMP TABLE arrays (i int PRIMARY KEY, a jsonb NOT NULL, b jsonb NOT NULL);
DO $$
DECLARE
  a jsonb;
BEGIN
  FOR i IN 1 .. 200 LOOP
    a := '[]';
    FOR j IN 1 .. pg_temp.rint(6) LOOP
      a := a || jsonb_build_array(CASE WHEN random() < 0.5
        THEN pg_temp.gen_value(3)
        ELSE jsonb_build_array(pg_temp.gen_value(2), pg_temp.gen_value(2)) END);
    END LOOP;
    a := jsonb_build_object('l', a, 'o', jsonb_build_object('m', jsonb_build_array(a, '[]'::jsonb)));
    INSERT INTO arrays VALUES (i, a, pg_temp.resize(a));
  END LOOP;
END $$;

SELECT pg_temp.holds('index mode: hx_patch(a, hx_diff(a, b, ''index'')) = b for 200 pairs whose arrays grow and shrink at every level',
  (SELECT f FROM arrays, LATERAL pg_temp.round_trip_failure(a, b, 'index') f WHERE f IS NOT NULL ORDER BY i LIMIT 1));

SELECT pg_temp.holds('index mode: those patches remove elements, including nested ones, and add at "-"',
  (SELECT format('%s removes, %s nested removes, %s adds at "-"', r, nr, ad)
     FROM (SELECT count(*) FILTER (WHERE op ->> 'op' = 'remove') AS r,
          count(*) FILTER (WHERE op ->> 'op' = 'remove' AND op ->> 'path' ~ '/[0-9]+/[0-9]+$') AS nr,
          count(*) FILTER (WHERE op ->> 'op' = 'add' AND op ->> 'path' LIKE '%/-') AS ad
         FROM arrays, LATERAL jsonb_array_elements(hx_diff(a, b, 'index')) op) c
    WHERE r < 50 OR nr < 10 OR ad < 50));

-- hx_patch of an empty patch, and of tests only
SELECT pg_temp.holds('hx_patch(a, ''[]'') and hx_merge(a, ''[]'') give a back byte for byte',
  (SELECT format('a=%s: %s / %s', a, hx_patch(a, '[]'), hx_merge(a, '[]'))
     FROM pairs
    WHERE hx_patch(a, '[]')::text <> a::text OR hx_merge(a, '[]')::text <> a::text
    ORDER BY i LIMIT 1));

-- tests of every top-level member (or element, or the root of a scalar)
-- of a, with the values taken from v
CREATE FUNCTION pg_temp.member_tests(a jsonb, v jsonb) RETURNS jsonb LANGUAGE sql AS $$
  SELECT CASE jsonb_typeof(a)
    WHEN 'object' THEN (SELECT coalesce(jsonb_agg(jsonb_build_object('op', 'test',
                    'path', '/' || pg_temp.esc(key), 'value', v -> key) ORDER BY key), '[]')
                FROM jsonb_each(a))
    WHEN 'array' THEN (SELECT coalesce(jsonb_agg(jsonb_build_object('op', 'test',
                    'path', '/' || (ord - 1), 'value', v -> (ord - 1)::int) ORDER BY ord), '[]')
               FROM jsonb_array_elements(a) WITH ORDINALITY t(e, ord))
    ELSE jsonb_build_array(jsonb_build_object('op', 'test', 'path', '', 'value', v)) END
$$;

SELECT pg_temp.holds('a patch of tests of every top-level member of a, values written as in a or with 1 as 1.000, gives a back unchanged',
  (SELECT format('a=%s tests=%s: %s', a, t, f)
     FROM pairs, LATERAL (VALUES (pg_temp.member_tests(a, a)), (pg_temp.member_tests(a, pg_temp.reformat(a)))) x(t),
      LATERAL (SELECT CASE WHEN r.r::text <> a::text THEN 'gives ' || r.r::text END AS f
             FROM (SELECT hx_patch(a, t) AS r) r) y
    WHERE f IS NOT NULL
    ORDER BY i LIMIT 1));

CREATE FUNCTION pg_temp.wrong_test_failure(a jsonb, tests jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  n int := jsonb_array_length(tests) - 1;
  bad jsonb;
  st text;
  msg text;
  ctx text;
BEGIN
  -- the last test's value wrapped in an array: never equal
  bad := jsonb_set(tests, ARRAY[n::text, 'value'], jsonb_build_array(tests -> n -> 'value'));
  PERFORM hx_patch(a, bad);
  RETURN 'no error for ' || bad;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, ctx = PG_EXCEPTION_CONTEXT;
  IF st <> 'XH001' OR ctx NOT LIKE format('JSON Patch operation %s (test) at path %%', n) THEN
    RETURN format('%s: %s (%s) for %s', st, msg, split_part(ctx, E'\n', 1), bad);
  END IF;
  RETURN NULL;
END $$;

SELECT pg_temp.holds('the same tests with the last value changed raise XH001 naming that test',
  (SELECT format('a=%s: %s', a, f)
     FROM pairs, LATERAL pg_temp.wrong_test_failure(a, pg_temp.member_tests(a, a)) f
    WHERE jsonb_array_length(pg_temp.member_tests(a, a)) > 0 AND f IS NOT NULL
    ORDER BY i LIMIT 1));

---------------------------------------------------------------------------
-- hx_merge: RFC 7386 object writes and the merge op
---------------------------------------------------------------------------

CREATE TEMP TABLE merges (i int PRIMARY KEY, a jsonb NOT NULL, p jsonb NOT NULL);
DO $$
DECLARE
  a jsonb;
BEGIN
  FOR n IN 1 .. 300 LOOP
    SELECT p.a INTO a FROM pairs p WHERE p.i = n;
    INSERT INTO merges VALUES (n, a, pg_temp.gen_merge_patch(a, 3));
  END LOOP;
END $$;

SELECT pg_temp.holds('hx_merge(a, p) for an object p equals an independent RFC 7386 merge patch, for 300 pairs',
  (SELECT format('a=%s p=%s: hx_merge gives %s, RFC 7386 %s', a, p, hx_merge(a, p), pg_temp.merge_patch(a, p))
     FROM merges
    WHERE hx_merge(a, p) IS DISTINCT FROM pg_temp.merge_patch(a, p)
    ORDER BY i LIMIT 1));

SELECT pg_temp.holds('the merge op at "" gives what the object write gives',
  (SELECT format('a=%s p=%s: %s / %s', a, p, hx_merge(a, jsonb_build_array(jsonb_build_object('op', 'merge', 'path', '', 'value', p))), hx_merge(a, p))
     FROM merges
    WHERE hx_merge(a, jsonb_build_array(jsonb_build_object('op', 'merge', 'path', '', 'value', p))) IS DISTINCT FROM hx_merge(a, p)
    ORDER BY i LIMIT 1));

SELECT pg_temp.holds('the merge op at a nested path merges there and nowhere else',
  (SELECT format('a=%s p=%s: %s', a, p, got)
     FROM (SELECT i, a, p,
          hx_merge(jsonb_build_object('keep', 1, 'x', jsonb_build_object('y', a)),
               jsonb_build_array(jsonb_build_object('op', 'merge', 'path', '/x/y', 'value', p))) AS got
         FROM merges) m
    WHERE got IS DISTINCT FROM jsonb_build_object('keep', 1, 'x', jsonb_build_object('y', pg_temp.merge_patch(a, p)))
    ORDER BY i LIMIT 1));

---------------------------------------------------------------------------
-- hx_merge: increments commute and sum exactly
---------------------------------------------------------------------------

CREATE FUNCTION pg_temp.gen_increments() RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  paths jsonb := '["/c0", "/c1", "/c2", "/c~1x", "/n/x", "/n/ключ", "/deep/a/b", "/arr/0", "/arr/1/n"]';
  w jsonb := '[]';
BEGIN
  FOR j IN 1 .. 1 + pg_temp.rint(6) LOOP
    w := w || jsonb_build_array(jsonb_build_object('op', 'increment', 'path', pg_temp.pick(paths),
      'by', CASE WHEN random() < 0.2
             THEN pg_temp.pick('[0, -0.000, 1e-20, 18446744073709551615, 1.50, -7]')
             ELSE pg_temp.gen_number() END));
  END LOOP;
  RETURN w;
END $$;

CREATE TEMP TABLE counters (i int PRIMARY KEY, s jsonb NOT NULL, w1 jsonb NOT NULL, w2 jsonb NOT NULL);
DO $$
DECLARE
  s jsonb;
BEGIN
  FOR i IN 1 .. 300 LOOP
    s := jsonb_build_object('other', pg_temp.gen_value(2), 'arr', jsonb_build_array(pg_temp.gen_number(), '{}'::jsonb));
    IF random() < 0.7 THEN s := s || jsonb_build_object('c0', pg_temp.gen_number()); END IF;
    IF random() < 0.7 THEN s := s || jsonb_build_object('c1', pg_temp.gen_number()); END IF;
    IF random() < 0.5 THEN s := s || jsonb_build_object('c/x', pg_temp.gen_number()); END IF;
    IF random() < 0.5 THEN s := s || jsonb_build_object('n', jsonb_build_object('x', pg_temp.gen_number())); END IF;
    INSERT INTO counters VALUES (i, s, pg_temp.gen_increments(), pg_temp.gen_increments());
  END LOOP;
END $$;

SELECT pg_temp.holds('increments commute: hx_merge(hx_merge(s, w1), w2) and hx_merge(hx_merge(s, w2), w1) are byte-identical, for 300 pairs of op lists',
  (SELECT format('s=%s w1=%s w2=%s: %s / %s', s, w1, w2, hx_merge(hx_merge(s, w1), w2), hx_merge(hx_merge(s, w2), w1))
     FROM counters
    WHERE hx_merge(hx_merge(s, w1), w2)::text <> hx_merge(hx_merge(s, w2), w1)::text
    ORDER BY i LIMIT 1));

SELECT pg_temp.holds('each counter is its old value (missing: 0) plus every increment of it; untouched members stay',
  (SELECT format('s=%s w1=%s w2=%s: at %s got %s, expected %s', s, w1, w2, path, got, want)
     FROM (SELECT c.i, s, w1, w2, p.path,
          pg_temp.resolve(hx_merge(hx_merge(s, w1), w2), p.path) AS got,
          CASE WHEN p.total IS NULL THEN pg_temp.resolve(s, p.path)
             ELSE to_jsonb(coalesce((pg_temp.resolve(s, p.path) #>> '{}')::numeric, 0) + p.total) END AS want
         FROM counters c,
          LATERAL (SELECT path, (SELECT sum((op ->> 'by')::numeric)
                       FROM jsonb_array_elements(c.w1 || c.w2) op
                      WHERE op ->> 'path' = path) AS total
                 FROM unnest(ARRAY['/c0', '/c1', '/c2', '/c~1x', '/n/x', '/n/ключ', '/deep/a/b',
                         '/arr/0', '/arr/1/n', '/other']) path) p) x
    WHERE got IS DISTINCT FROM want
    ORDER BY i, path LIMIT 1));

---------------------------------------------------------------------------
-- hx_merge: union is idempotent and appends exactly what is missing
---------------------------------------------------------------------------

CREATE TEMP TABLE domain AS SELECT
  '[0, 1, 1.0, 2.50, 2.5, "a", "b", "", null, true, false, {}, [], {"x": 1}, {"x": 1.0}, [1, 2], [1.0, 2],
    {"y": [1]}, "~/", "ключ", {"x": 1, "y": 2}, [[]], [{}], "1"]'::jsonb AS d;

CREATE FUNCTION pg_temp.gen_items() RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  items jsonb := '[]';
BEGIN
  FOR j IN 1 .. 1 + pg_temp.rint(4) LOOP
    items := items || jsonb_build_array(pg_temp.pick((SELECT d FROM domain)));
  END LOOP;
  RETURN items;
END $$;

-- distinct elements of the domain, in random order
CREATE FUNCTION pg_temp.gen_set() RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  s jsonb := '[]';
  e jsonb;
BEGIN
  FOR j IN 1 .. pg_temp.rint(6) LOOP
    e := pg_temp.pick((SELECT d FROM domain));
    IF NOT EXISTS (SELECT FROM jsonb_array_elements(s) x WHERE x = e) THEN
      s := s || jsonb_build_array(e);
    END IF;
  END LOOP;
  RETURN s;
END $$;

CREATE TEMP TABLE unions (i int PRIMARY KEY, s jsonb NOT NULL, u jsonb NOT NULL);
DO $$
DECLARE
  s jsonb;
  u jsonb;
BEGIN
  FOR i IN 1 .. 300 LOOP
    s := jsonb_build_object('s', pg_temp.gen_set(), 'o', jsonb_build_object('t', pg_temp.gen_set()));
    u := '[]';
    FOR j IN 1 .. 1 + pg_temp.rint(4) LOOP
      u := u || jsonb_build_array(jsonb_build_object('op', 'union',
        'path', pg_temp.pick('["/s", "/o/t", "/new", "/o/new~1x"]'), 'items', pg_temp.gen_items()));
    END LOOP;
    INSERT INTO unions VALUES (i, s, u);
  END LOOP;
END $$;

SELECT pg_temp.holds('union is idempotent: hx_merge(hx_merge(s, u), u) is byte-identical to hx_merge(s, u), for 300 op lists',
  (SELECT format('s=%s u=%s: %s / %s', s, u, hx_merge(s, u), hx_merge(hx_merge(s, u), u))
     FROM unions
    WHERE hx_merge(hx_merge(s, u), u)::text <> hx_merge(s, u)::text
    ORDER BY i LIMIT 1));

SELECT pg_temp.holds('a union of the same items written with 1 as 1.000 adds nothing',
  (SELECT format('s=%s u=%s: %s / %s', s, u, hx_merge(s, u), hx_merge(hx_merge(s, u), pg_temp.reformat(u)))
     FROM unions
    WHERE hx_merge(hx_merge(s, u), pg_temp.reformat(u)) <> hx_merge(s, u)
    ORDER BY i LIMIT 1));

-- the model: the set, then each item not yet in it (by jsonb equality), in order
CREATE FUNCTION pg_temp.union_model(s jsonb, u jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  op jsonb;
  item jsonb;
  path text[];
  arr jsonb;
BEGIN
  FOR op IN SELECT x FROM jsonb_array_elements(u) WITH ORDINALITY t(x, ord) ORDER BY ord LOOP
    path := (SELECT array_agg(replace(replace(tok, '~1', '/'), '~0', '~') ORDER BY n)
           FROM unnest(string_to_array(substr(op ->> 'path', 2), '/')) WITH ORDINALITY t(tok, n));
    arr := coalesce(s #> path, '[]');
    FOR item IN SELECT x FROM jsonb_array_elements(op -> 'items') WITH ORDINALITY t(x, ord) ORDER BY ord LOOP
      IF NOT EXISTS (SELECT FROM jsonb_array_elements(arr) e WHERE e = item) THEN
        arr := arr || jsonb_build_array(item);
      END IF;
    END LOOP;
    s := jsonb_set(s, path, arr);
  END LOOP;
  RETURN s;
END $$;

SELECT pg_temp.holds('union appends, in order, exactly the items not yet present by JSON value',
  (SELECT format('s=%s u=%s: %s, expected %s', s, u, hx_merge(s, u), pg_temp.union_model(s, u))
     FROM unions
    WHERE hx_merge(s, u) IS DISTINCT FROM pg_temp.union_model(s, u)
    ORDER BY i LIMIT 1));

-- unions, appends, upserts and edits of elements interleaved on one array:
-- every union sees the array as the ops before it left it
CREATE TEMP TABLE interleaved (i int PRIMARY KEY, s jsonb NOT NULL, w jsonb NOT NULL, expected jsonb NOT NULL);
DO $$
DECLARE
  arr jsonb;
  s jsonb;
  w jsonb;
  items jsonb;
  item jsonb;
  v jsonb;
  k int;
  pos int;
BEGIN
  FOR i IN 1 .. 200 LOOP
    arr := pg_temp.gen_set();
    s := jsonb_build_object('s', arr);
    w := '[]';
    FOR j IN 1 .. 2 + pg_temp.rint(8) LOOP
      CASE pg_temp.rint(6)
        WHEN 0, 1 THEN
          items := pg_temp.gen_items();
          w := w || jsonb_build_array(jsonb_build_object('op', 'union', 'path', '/s', 'items', items));
          FOR item IN SELECT x FROM jsonb_array_elements(items) WITH ORDINALITY t(x, ord) ORDER BY ord LOOP
            IF NOT EXISTS (SELECT FROM jsonb_array_elements(arr) e WHERE e = item) THEN
              arr := arr || jsonb_build_array(item);
            END IF;
          END LOOP;
        WHEN 2 THEN
          items := pg_temp.gen_items();
          w := w || jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/s', 'items', items));
          arr := arr || items;
        WHEN 3 THEN
          CONTINUE WHEN jsonb_array_length(arr) = 0;
          k := pg_temp.rint(jsonb_array_length(arr));
          v := pg_temp.pick((SELECT d FROM domain));
          w := w || jsonb_build_array(jsonb_build_object('op', 'replace', 'path', '/s/' || k, 'value', v));
          arr := jsonb_set(arr, ARRAY[k::text], v);
        WHEN 4 THEN
          k := pg_temp.rint(jsonb_array_length(arr) + 1);
          w := w || jsonb_build_array(jsonb_build_object('op', 'delete', 'path', '/s/' || k));
          arr := arr - k;
        ELSE
          -- upsert keyed by "x": replaces the first object whose "x" equals
          item := jsonb_build_object('x', pg_temp.pick('[1, 1.0, 2, "a"]'), 'u', j);
          w := w || jsonb_build_array(jsonb_build_object('op', 'upsert', 'path', '/s', 'key', 'x', 'items', jsonb_build_array(item)));
          pos := (SELECT min(ord) - 1 FROM jsonb_array_elements(arr) WITH ORDINALITY t(e, ord)
               WHERE jsonb_typeof(e) = 'object' AND e -> 'x' = item -> 'x');
          arr := CASE WHEN pos IS NULL THEN arr || jsonb_build_array(item)
                ELSE jsonb_set(arr, ARRAY[pos::text], item) END;
      END CASE;
    END LOOP;
    INSERT INTO interleaved VALUES (i, s, w, jsonb_build_object('s', arr));
  END LOOP;
END $$;

SELECT pg_temp.holds('unions interleaved with appends, upserts, replaces and deletes of elements agree with a model, for 200 op lists',
  (SELECT format('s=%s w=%s: %s, expected %s', s, w, hx_merge(s, w), expected)
     FROM interleaved
    WHERE hx_merge(s, w) IS DISTINCT FROM expected
    ORDER BY i LIMIT 1));

---------------------------------------------------------------------------
-- Many edits of the members of one object agree with jsonb's own operators
---------------------------------------------------------------------------

CREATE TEMP TABLE edits (i int PRIMARY KEY, s jsonb NOT NULL, patch jsonb NOT NULL, expected jsonb NOT NULL);
DO $$
DECLARE
  s jsonb;
  cur jsonb;
  patch jsonb;
  k text;
  v jsonb;
BEGIN
  FOR i IN 1 .. 100 LOOP
    s := (SELECT coalesce(jsonb_object_agg('k' || n, n), '{}')
        FROM generate_series(1, pg_temp.rint(60)) n);
    cur := s;
    patch := '[]';
    FOR j IN 1 .. 1 + pg_temp.rint(80) LOOP
      k := CASE WHEN random() < 0.5 THEN 'k' || pg_temp.rint(100) ELSE pg_temp.gen_key() END;
      v := pg_temp.gen_value(1);
      IF cur ? k THEN
        CASE pg_temp.rint(4)
          WHEN 0 THEN
            patch := patch || jsonb_build_array(jsonb_build_object('op', 'remove', 'path', '/' || pg_temp.esc(k)));
            cur := cur - k;
          WHEN 1 THEN
            -- not null: for hx_merge, replace with null deletes
            v := CASE WHEN v = 'null' THEN '0' ELSE v END;
            patch := patch || jsonb_build_array(jsonb_build_object('op', 'replace', 'path', '/' || pg_temp.esc(k), 'value', v));
            cur := cur || jsonb_build_object(k, v);
          WHEN 2 THEN
            patch := patch || jsonb_build_array(jsonb_build_object('op', 'test', 'path', '/' || pg_temp.esc(k), 'value', cur -> k));
          ELSE
            patch := patch || jsonb_build_array(jsonb_build_object('op', 'add', 'path', '/' || pg_temp.esc(k), 'value', v));
            cur := cur || jsonb_build_object(k, v);
        END CASE;
      ELSE
        patch := patch || jsonb_build_array(jsonb_build_object('op', 'add', 'path', '/' || pg_temp.esc(k), 'value', v));
        cur := cur || jsonb_build_object(k, v);
      END IF;
    END LOOP;
    INSERT INTO edits VALUES (i, s, patch, cur);
  END LOOP;
END $$;

SELECT pg_temp.holds('hx_patch: up to 80 adds, removes, replaces and tests of the members of an object of up to 60 agree with jsonb || and -',
  (SELECT format('s=%s patch=%s: %s, expected %s', s, patch, hx_patch(s, patch), expected)
     FROM edits
    WHERE hx_patch(s, patch) IS DISTINCT FROM expected
    ORDER BY i LIMIT 1));

SELECT pg_temp.holds('hx_merge: the same op lists give the same objects',
  (SELECT format('s=%s patch=%s: %s, expected %s', s, patch, hx_merge(s, patch), expected)
     FROM edits
    WHERE hx_merge(s, patch) IS DISTINCT FROM expected
    ORDER BY i LIMIT 1));

SELECT pg_temp.holds('hx_diff of the result gives a patch back to the start: hx_patch(e, hx_diff(e, s)) = s',
  (SELECT f FROM edits, LATERAL pg_temp.round_trip_failure(expected, s, 'append') f WHERE f IS NOT NULL ORDER BY i LIMIT 1));

SELECT * FROM finish();
ROLLBACK;
