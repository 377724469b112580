--
-- test/pgtap/catalog.sql: what the catalog says about the extension's
-- functions, for every function the extension owns (found through
-- pg_depend, so functions added by later versions are checked too)
--
\ir include/preamble.sql

BEGIN;
SELECT plan(34);

-- the functions that belong to the extension, whatever schema it is in
CREATE TEMP VIEW ext_functions AS
  SELECT p.oid::regprocedure::text AS signature, p.*
    FROM pg_depend d
    JOIN pg_proc p ON p.oid = d.objid
   WHERE d.classid = 'pg_proc'::regclass
     AND d.refclassid = 'pg_extension'::regclass
     AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'hxstate')
     AND d.deptype = 'e';

SELECT is((SELECT installed_version FROM pg_available_extensions WHERE name = 'hxstate'),
  (SELECT default_version FROM pg_available_extensions WHERE name = 'hxstate'),
  'CREATE EXTENSION hxstate installs the default version of the control file');

SELECT is((SELECT extrelocatable FROM pg_extension WHERE extname = 'hxstate'), false,
  'the extension is not relocatable: its scripts pin @extschema@');

SELECT ok((SELECT array_agg(signature) FROM ext_functions)
      @> ARRAY['hx_patch(jsonb,jsonb)', 'hx_merge(jsonb,jsonb)', 'hx_diff(jsonb,jsonb,text)'],
  'the extension owns hx_patch(jsonb, jsonb), hx_merge(jsonb, jsonb) and hx_diff(jsonb, jsonb, text)');

SELECT is((SELECT array_agg(signature ORDER BY signature) FROM ext_functions
      WHERE coalesce(obj_description(oid, 'pg_proc'), '') = ''),
  NULL::text[], 'every function of the extension has a COMMENT, so \df+ explains it');

SELECT is((SELECT array_agg(signature ORDER BY signature) FROM ext_functions WHERE prosecdef),
  NULL::text[], 'no function of the extension is SECURITY DEFINER');

SELECT is((SELECT array_agg(signature ORDER BY signature) FROM ext_functions
      WHERE pronamespace <> (SELECT extnamespace FROM pg_extension WHERE extname = 'hxstate')),
  NULL::text[], 'every function of the extension lives in the extension''s schema');

SELECT is((SELECT array_agg(signature ORDER BY signature) FROM ext_functions f JOIN pg_language l ON l.oid = f.prolang
      WHERE l.lanname = 'c' AND (f.probin IS DISTINCT FROM '$libdir/hxstate' OR f.prosrc <> f.proname)),
  NULL::text[], 'every C function loads $libdir/hxstate (not an absolute path) under its own name');

SELECT is((SELECT array_agg(signature ORDER BY signature) FROM ext_functions f JOIN pg_language l ON l.oid = f.prolang
      WHERE l.lanname NOT IN ('c', 'internal')
        AND NOT coalesce(f.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)),
  NULL::text[], 'every SQL or PL function of the extension runs with search_path = pg_catalog, pg_temp');

-- the pure functions
SELECT has_function(fn, args, 'has function ' || fn) FROM (VALUES
  ('hx_patch', ARRAY['jsonb', 'jsonb']), ('hx_merge', ARRAY['jsonb', 'jsonb']),
  ('hx_diff', ARRAY['jsonb', 'jsonb', 'text'])) t(fn, args);
SELECT function_returns(fn, args, 'jsonb', fn || ' returns jsonb') FROM (VALUES
  ('hx_patch', ARRAY['jsonb', 'jsonb']), ('hx_merge', ARRAY['jsonb', 'jsonb']),
  ('hx_diff', ARRAY['jsonb', 'jsonb', 'text'])) t(fn, args);
SELECT volatility_is(fn, args, 'immutable', fn || ' is IMMUTABLE, so it can serve indexes and generated columns')
  FROM (VALUES
  ('hx_patch', ARRAY['jsonb', 'jsonb']), ('hx_merge', ARRAY['jsonb', 'jsonb']),
  ('hx_diff', ARRAY['jsonb', 'jsonb', 'text'])) t(fn, args);
SELECT is_strict(fn, args, fn || ' is STRICT: NULL in, NULL out') FROM (VALUES
  ('hx_patch', ARRAY['jsonb', 'jsonb']), ('hx_merge', ARRAY['jsonb', 'jsonb']),
  ('hx_diff', ARRAY['jsonb', 'jsonb', 'text'])) t(fn, args);
SELECT is((SELECT proparallel FROM ext_functions WHERE signature = sig), 's'::"char", sig || ' is PARALLEL SAFE')
  FROM unnest(ARRAY['hx_patch(jsonb,jsonb)', 'hx_merge(jsonb,jsonb)', 'hx_diff(jsonb,jsonb,text)']) sig;
SELECT ok(has_function_privilege('public', sig, 'EXECUTE'), 'every role may call ' || sig)
  FROM unnest(ARRAY['hx_patch(jsonb,jsonb)', 'hx_merge(jsonb,jsonb)', 'hx_diff(jsonb,jsonb,text)']) sig;

-- argument names and the default that callers write against
SELECT is((SELECT pg_get_function_arguments(oid) FROM ext_functions WHERE signature = sig), args,
  sig || ' takes (' || args || ')')
  FROM (VALUES
  ('hx_patch(jsonb,jsonb)', 'doc jsonb, patch jsonb'),
  ('hx_merge(jsonb,jsonb)', 'state jsonb, writes jsonb'),
  ('hx_diff(jsonb,jsonb,text)', 'old jsonb, new jsonb, arrays text DEFAULT ''append''::text')) t(sig, args);

--
-- Upgrading from 0.1.0, step by step, gives what a fresh install gives
--
CREATE TEMP VIEW ext_catalog AS
  SELECT f.signature, f.provolatile, f.proisstrict, f.proparallel, f.prosecdef, f.proleakproof,
       l.lanname, f.probin, f.prosrc, f.proargnames, f.proconfig,
       pg_get_function_arguments(f.oid) AS arguments, pg_get_function_result(f.oid) AS result,
       obj_description(f.oid, 'pg_proc') AS comment, f.proacl::text AS acl
    FROM ext_functions f JOIN pg_language l ON l.oid = f.prolang;
CREATE TEMP VIEW ext_members AS
  SELECT pg_describe_object(d.classid, d.objid, d.objsubid) AS member
    FROM pg_depend d
   WHERE d.refclassid = 'pg_extension'::regclass
     AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'hxstate')
     AND d.deptype = 'e';
CREATE TEMP TABLE fresh_catalog AS SELECT * FROM ext_catalog;
CREATE TEMP TABLE fresh_members AS SELECT * FROM ext_members;

DROP EXTENSION hxstate;
CREATE EXTENSION hxstate VERSION '0.1.0';
SELECT is((SELECT array_agg(signature) FROM ext_functions), ARRAY['hx_patch(jsonb,jsonb)'],
  'version 0.1.0 installs hx_patch alone');
ALTER EXTENSION hxstate UPDATE;
SELECT is((SELECT extversion FROM pg_extension WHERE extname = 'hxstate'),
  (SELECT default_version FROM pg_available_extensions WHERE name = 'hxstate'),
  'ALTER EXTENSION hxstate UPDATE reaches the default version from 0.1.0');
SELECT is((SELECT jsonb_agg(to_jsonb(c) ORDER BY signature) FROM ext_catalog c),
  (SELECT jsonb_agg(to_jsonb(c) ORDER BY signature) FROM fresh_catalog c),
  'after the upgrade every function is declared as in a fresh install');
SELECT is((SELECT array_agg(member ORDER BY member) FROM ext_members),
  (SELECT array_agg(member ORDER BY member) FROM fresh_members),
  'after the upgrade the extension owns the same objects as a fresh install');
SELECT is(hx_merge(hx_patch('{}', '[{"op": "add", "path": "/l", "value": []}]'),
    '[{"op": "append", "path": "/l", "items": [1]}]'),
  '{"l": [1]}'::jsonb, 'after the upgrade hx_patch and hx_merge work');

SELECT * FROM finish();
ROLLBACK;
