--
-- test/pgtap/include/gen.sql: seeded random JSON documents for the
-- property tests, included by them after BEGIN (the functions live in
-- pg_temp and are gone at ROLLBACK)
--
-- The generator makes nested objects and arrays with unicode keys, keys
-- holding "~" and "/", the empty key, empty containers, and numbers with
-- decimals, trailing zeros, exponents and more digits than a double holds;
-- mutate() derives a changed copy (changed leaves, new and removed members,
-- arrays that grow, shrink, reverse and lose their head, type changes).
-- setseed() before use makes every run see the same documents.
--

---------------------------------------------------------------------------
-- The generator
---------------------------------------------------------------------------

CREATE FUNCTION pg_temp.rint(n int) RETURNS int LANGUAGE sql AS
  $$ SELECT floor(random() * n)::int $$;

CREATE FUNCTION pg_temp.pick(xs jsonb) RETURNS jsonb LANGUAGE sql AS
  $$ SELECT xs -> pg_temp.rint(jsonb_array_length(xs)) $$;

CREATE FUNCTION pg_temp.gen_key() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  keys text[] := ARRAY['a', 'b', 'id', 'name', 'items', '', '~', '/', 'a/b', 'm~n', '~1', '~0',
    '0', '-', 'ключ', '键', 'é', 'emoji😀', 'with space', 'quote"d', 'back\slash', E'tab\t',
    '~/~1', repeat('x', 40)];
BEGIN
  IF random() < 0.7 THEN
    RETURN keys[1 + pg_temp.rint(array_length(keys, 1))];
  END IF;
  RETURN 'k' || pg_temp.rint(30);
END $$;

CREATE FUNCTION pg_temp.gen_number() RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  CASE pg_temp.rint(5)
    WHEN 0 THEN RETURN to_jsonb(pg_temp.rint(2001) - 1000);
    WHEN 1 THEN RETURN to_jsonb(round((pg_temp.rint(4001) - 2000) / 4.0, 2));  -- 1.25, 0.50, -3.00
    WHEN 2 THEN RETURN to_jsonb(pg_temp.rint(10));
    ELSE RETURN pg_temp.pick('[0.1, 1e-7, -0.000, 123456789012345678901234567890, 9007199254740993,
      1.10, -2.5e3, 0.000000000000000000001, 100]');
  END CASE;
END $$;

CREATE FUNCTION pg_temp.gen_scalar() RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  strings jsonb := '["", "a", "hello", "Ünïcödé", "日本語", "😀🎉", "line\nbreak", "\"q\"", "~/~1",
    "null", "0", " "]';
BEGIN
  CASE pg_temp.rint(6)
    WHEN 0 THEN RETURN 'null';
    WHEN 1 THEN RETURN to_jsonb(random() < 0.5);
    WHEN 2, 3 THEN RETURN pg_temp.gen_number();
    WHEN 4 THEN RETURN pg_temp.pick(strings);
    ELSE RETURN to_jsonb((pg_temp.pick(strings) #>> '{}') || pg_temp.rint(100));
  END CASE;
END $$;

CREATE FUNCTION pg_temp.gen_value(depth int) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  roll int := pg_temp.rint(10);
  n int;
  v jsonb;
BEGIN
  IF depth <= 0 OR roll < 5 THEN
    RETURN pg_temp.gen_scalar();
  END IF;
  IF roll < 7 THEN
    n := CASE WHEN random() < 0.15 THEN 0 ELSE pg_temp.rint(5) END;
    v := '[]';
    FOR i IN 1 .. n LOOP
      v := v || jsonb_build_array(pg_temp.gen_value(depth - 1));
    END LOOP;
    RETURN v;
  END IF;
  n := CASE WHEN random() < 0.15 THEN 0 ELSE pg_temp.rint(6) END;
  v := '{}';
  FOR i IN 1 .. n LOOP
    v := v || jsonb_build_object(pg_temp.gen_key(), pg_temp.gen_value(depth - 1));
  END LOOP;
  RETURN v;
END $$;

-- a document: mostly an object of 1 to 7 members, sometimes any value
CREATE FUNCTION pg_temp.gen_doc() RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v jsonb := '{}';
BEGIN
  IF random() < 0.05 THEN
    RETURN pg_temp.gen_value(3);
  END IF;
  FOR i IN 1 .. 1 + pg_temp.rint(7) LOOP
    v := v || jsonb_build_object(pg_temp.gen_key(), pg_temp.gen_value(3));
  END LOOP;
  RETURN v;
END $$;

-- elements lo+1 .. hi of an array
CREATE FUNCTION pg_temp.slice(a jsonb, lo int, hi int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT coalesce(jsonb_agg(e ORDER BY ord), '[]')
    FROM jsonb_array_elements(a) WITH ORDINALITY t(e, ord)
   WHERE ord > lo AND ord <= hi
$$;

-- a changed copy of v: each container changes with probability p
CREATE FUNCTION pg_temp.mutate(v jsonb, p float8) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  r jsonb;
  e jsonb;
  k text;
  len int;
  cut int;
BEGIN
  CASE jsonb_typeof(v)
    WHEN 'array' THEN
      r := '[]';
      FOR e IN SELECT x FROM jsonb_array_elements(v) WITH ORDINALITY t(x, ord) ORDER BY ord LOOP
        r := r || jsonb_build_array(CASE WHEN random() < p THEN pg_temp.mutate(e, p) ELSE e END);
      END LOOP;
      IF random() < p THEN
        len := jsonb_array_length(r);
        CASE pg_temp.rint(5)
          WHEN 0 THEN  -- grow
            FOR i IN 0 .. pg_temp.rint(3) LOOP
              r := r || jsonb_build_array(pg_temp.gen_value(2));
            END LOOP;
          WHEN 1 THEN  -- shrink
            r := pg_temp.slice(r, 0, pg_temp.rint(len + 1));
          WHEN 2 THEN  -- reorder
            r := (SELECT coalesce(jsonb_agg(x ORDER BY ord DESC), '[]')
                FROM jsonb_array_elements(r) WITH ORDINALITY t(x, ord));
          WHEN 3 THEN  -- one element replaced
            IF len > 0 THEN
              r := jsonb_set(r, ARRAY[pg_temp.rint(len)::text], pg_temp.gen_value(2));
            END IF;
          ELSE  -- drop from the front
            cut := pg_temp.rint(len + 1);
            r := pg_temp.slice(r, cut, len);
        END CASE;
      END IF;
      RETURN r;
    WHEN 'object' THEN
      r := '{}';
      FOR k, e IN SELECT key, value FROM jsonb_each(v) ORDER BY key LOOP
        CONTINUE WHEN random() < p / 2;  -- removed member
        r := r || jsonb_build_object(k, CASE WHEN random() < p THEN pg_temp.mutate(e, p) ELSE e END);
      END LOOP;
      IF random() < p THEN  -- new or replaced member
        r := r || jsonb_build_object(pg_temp.gen_key(), pg_temp.gen_value(2));
      END IF;
      RETURN r;
    ELSE
      IF random() < 0.5 THEN
        RETURN pg_temp.gen_scalar();  -- changed leaf
      END IF;
      RETURN pg_temp.gen_value(2);  -- changed leaf or type
  END CASE;
END $$;

-- the same value with every number written with three more decimals
-- (1 becomes 1.000): equal as JSON, different in bytes
CREATE FUNCTION pg_temp.reformat(v jsonb) RETURNS jsonb LANGUAGE sql AS $$
  SELECT CASE jsonb_typeof(v)
    WHEN 'number' THEN to_jsonb((v #>> '{}')::numeric * 1.000)
    WHEN 'array' THEN (SELECT coalesce(jsonb_agg(pg_temp.reformat(e) ORDER BY ord), '[]')
               FROM jsonb_array_elements(v) WITH ORDINALITY t(e, ord))
    WHEN 'object' THEN (SELECT coalesce(jsonb_object_agg(key, pg_temp.reformat(value)), '{}')
                FROM jsonb_each(v))
    ELSE v END
$$;

-- every (key, value) at every level; key is NULL for array elements and the root
CREATE FUNCTION pg_temp.nodes(doc jsonb) RETURNS TABLE (k text, v jsonb) LANGUAGE sql AS $$
  WITH RECURSIVE t(k, v) AS (
    SELECT NULL::text, doc
    UNION ALL
    SELECT c.k, c.v
      FROM t, LATERAL (
      SELECT key, value FROM jsonb_each(CASE WHEN jsonb_typeof(t.v) = 'object' THEN t.v END)
      UNION ALL
      SELECT NULL, value FROM jsonb_array_elements(CASE WHEN jsonb_typeof(t.v) = 'array' THEN t.v END)
      ) c(k, v))
  SELECT k, v FROM t
$$;

-- RFC 6901 escaping of one reference token
CREATE FUNCTION pg_temp.esc(k text) RETURNS text LANGUAGE sql AS
  $$ SELECT replace(replace(k, '~', '~0'), '/', '~1') $$;

-- the value a pointer names in doc, or NULL when it names nothing
CREATE FUNCTION pg_temp.resolve(doc jsonb, ptr text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  cur jsonb := doc;
  tok text;
BEGIN
  IF ptr = '' THEN
    RETURN doc;
  END IF;
  -- string_to_array('', '/') is {}, but "/" has one token, the empty key
  FOREACH tok IN ARRAY CASE WHEN ptr = '/' THEN ARRAY[''] ELSE string_to_array(substr(ptr, 2), '/') END LOOP
    tok := replace(replace(tok, '~1', '/'), '~0', '~');
    IF jsonb_typeof(cur) = 'object' THEN
      cur := cur -> tok;
    ELSIF jsonb_typeof(cur) = 'array' AND tok ~ '^(0|[1-9][0-9]{0,8})$' THEN
      cur := cur -> tok::int;
    ELSE
      RETURN NULL;
    END IF;
    IF cur IS NULL THEN
      RETURN NULL;
    END IF;
  END LOOP;
  RETURN cur;
END $$;

-- RFC 7386 section 2, written independently of hx_merge
CREATE FUNCTION pg_temp.merge_patch(target jsonb, patch jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  t jsonb;
  k text;
  v jsonb;
BEGIN
  IF jsonb_typeof(patch) IS DISTINCT FROM 'object' THEN
    RETURN patch;
  END IF;
  t := CASE WHEN jsonb_typeof(target) = 'object' THEN target ELSE '{}' END;
  FOR k, v IN SELECT key, value FROM jsonb_each(patch) LOOP
    IF v = 'null' THEN
      t := t - k;
    ELSE
      t := t || jsonb_build_object(k, pg_temp.merge_patch(t -> k, v));
    END IF;
  END LOOP;
  RETURN t;
END $$;

-- a merge patch for target: members of target (to recurse into or delete)
-- and new ones, nulls at every level
CREATE FUNCTION pg_temp.gen_merge_patch(target jsonb, depth int) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  p jsonb := '{}';
  k text;
  r float8;
BEGIN
  FOR i IN 1 .. pg_temp.rint(5) LOOP
    IF jsonb_typeof(target) = 'object' AND target <> '{}' AND random() < 0.6 THEN
      k := (SELECT key FROM jsonb_each(target) ORDER BY key
           OFFSET pg_temp.rint((SELECT count(*)::int FROM jsonb_each(target))) LIMIT 1);
    ELSE
      k := pg_temp.gen_key();
    END IF;
    r := random();
    p := p || jsonb_build_object(k,
      CASE WHEN r < 0.3 THEN 'null'::jsonb
         WHEN r < 0.6 AND depth > 0 THEN pg_temp.gen_merge_patch(target -> k, depth - 1)
         ELSE pg_temp.gen_value(2) END);
  END LOOP;
  RETURN p;
END $$;

-- the report of one property: ok() and, when it fails, the first counterexample
CREATE FUNCTION pg_temp.holds(descr text, counterexample text) RETURNS text LANGUAGE sql AS $$
  SELECT ok(counterexample IS NULL, descr)
    || CASE WHEN counterexample IS NULL THEN ''
        ELSE E'\n' || diag('first counterexample: ' || counterexample) END
$$;
