--
-- Upgrades: from 0.1.0, ALTER EXTENSION ... UPDATE step by step gives the
-- same extension as a fresh CREATE EXTENSION (as pg_stat_statements tests)
--

-- what the extension is: its members, function properties, table columns
-- and constraints, and which tables pg_dump treats as configuration
CREATE FUNCTION extension_shape() RETURNS TABLE (item text) LANGUAGE sql AS $$
	SELECT 'member: ' || pg_describe_object(d.classid, d.objid, d.objsubid)
	  FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
	 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND e.extname = 'hxstate'
	UNION ALL
	SELECT format('function: %s(%s) returns %s, %s, strict=%s, parallel=%s, %s, comment=%s',
				  p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid),
				  p.provolatile, p.proisstrict, p.proparallel,
				  coalesce(p.prosrc, ''), obj_description(p.oid, 'pg_proc'))
	  FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
	UNION ALL
	SELECT format('column: %s.%s %s not_null=%s default=%s', c.relname, a.attname,
				  format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(ad.adbin, ad.adrelid))
	  FROM pg_class c JOIN pg_depend d ON d.objid = c.oid AND d.classid = 'pg_class'::regclass AND d.deptype = 'e'
	  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
	  LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
	UNION ALL
	SELECT format('constraint: %s %s', c.relname, pg_get_constraintdef(k.oid))
	  FROM pg_class c JOIN pg_depend d ON d.objid = c.oid AND d.classid = 'pg_class'::regclass AND d.deptype = 'e'
	  JOIN pg_constraint k ON k.conrelid = c.oid
	UNION ALL
	SELECT format('trigger: %s', pg_get_triggerdef(t.oid))
	  FROM pg_trigger t JOIN pg_depend d ON d.objid = t.tgrelid AND d.classid = 'pg_class'::regclass AND d.deptype = 'e'
	 WHERE NOT t.tgisinternal
	UNION ALL
	SELECT format('grant: %s %s', c.relname, c.relacl)
	  FROM pg_class c JOIN pg_depend d ON d.objid = c.oid AND d.classid = 'pg_class'::regclass AND d.deptype = 'e'
	 WHERE c.relkind = 'r'
	UNION ALL
	SELECT format('config: %s %s', x.rel::regclass, x.cond)
	  FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS x(rel, cond)
	 WHERE e.extname = 'hxstate'
	UNION ALL
	SELECT format('rows: %s', m) FROM hx_machine m
	UNION ALL
	SELECT format('rows: %s', t) FROM hx_transition t
$$;

-- a session that streamed, then sees the extension dropped and created
-- again, streams into the new log
CREATE TABLE streamed (k int PRIMARY KEY, s jsonb);
CREATE TRIGGER streamed_stream AFTER INSERT OR UPDATE ON streamed
	FOR EACH ROW EXECUTE FUNCTION hx_stream('s', 'k');
INSERT INTO streamed VALUES (1, '{}');
DROP TABLE streamed;

DROP EXTENSION hxstate;
CREATE EXTENSION hxstate VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'hxstate';
SELECT hx_patch('{"a": 1}', '[{"op": "add", "path": "/b", "value": 2}]');
ALTER EXTENSION hxstate UPDATE TO '0.2.0';
SELECT hx_merge('{"n": 1}', '[{"op": "increment", "path": "/n", "by": 1}]');
ALTER EXTENSION hxstate UPDATE TO '0.3.0';
SELECT hx_next_phase('agent_session', 'chatting', 'start_build');
ALTER EXTENSION hxstate UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'hxstate';
SELECT hx_stream_channel('sessions:s-1');
CREATE TEMP TABLE upgraded AS SELECT item FROM extension_shape();

DROP EXTENSION hxstate;
CREATE EXTENSION hxstate;
CREATE TEMP TABLE fresh AS SELECT item FROM extension_shape();

CREATE TABLE streamed (k int PRIMARY KEY, s jsonb);
CREATE TRIGGER streamed_stream AFTER INSERT OR UPDATE ON streamed
	FOR EACH ROW EXECUTE FUNCTION hx_stream('s', 'k');
INSERT INTO streamed VALUES (1, '{}');
UPDATE streamed SET s = '{"a": 1}';
SELECT stream, seq, type FROM hx_event ORDER BY seq;
DROP TABLE streamed;

-- the same shape, both ways
SELECT 'only after upgrade' AS side, item FROM (SELECT item FROM upgraded EXCEPT ALL SELECT item FROM fresh) x
UNION ALL
SELECT 'only when fresh', item FROM (SELECT item FROM fresh EXCEPT ALL SELECT item FROM upgraded) y;
SELECT count(*) > 40 AS compared_enough FROM fresh;

-- every version's script is in place for pg_available_extension_versions
SELECT version FROM pg_available_extension_versions WHERE name = 'hxstate' ORDER BY version;
-- and the update path exists from every version
SELECT source, target, path FROM pg_extension_update_paths('hxstate')
 WHERE target = '0.4.0' ORDER BY source;
