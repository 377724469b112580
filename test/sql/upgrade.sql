--
-- Upgrades: from 0.1.0, ALTER EXTENSION ... UPDATE step by step gives the
-- same extension as a fresh CREATE EXTENSION of the full script (as
-- pg_stat_statements tests), catalog by catalog
--

-- What the extension is, one line per fact, with every object named
-- rather than numbered (OIDs differ between the two installs): for each
-- catalog, the whole row (to_jsonb) but its OIDs, the node trees
-- (deparsed instead: they hold parse locations) and what only says where
-- the rows are stored (statistics, file nodes, a column's "missing" value,
-- the attribute version that some minor releases keep among a column's
-- options).
CREATE FUNCTION extension_shape() RETURNS TABLE (item text) LANGUAGE sql AS $$
	WITH ext AS (SELECT e.* FROM pg_extension e WHERE e.extname = 'hxstate'),
	members AS (
		SELECT d.classid, d.objid, d.objsubid
		  FROM pg_depend d, ext
		 WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'),
	-- the member tables, and their indexes
	rels AS (
		SELECT c.oid FROM pg_class c JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
		UNION
		SELECT i.indexrelid FROM pg_index i JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = i.indrelid),
	-- every object whose comment and initial privileges count
	objects AS (
		SELECT m.classid, m.objid FROM members m
		UNION SELECT 'pg_class'::regclass, r.oid FROM rels r
		UNION SELECT 'pg_constraint'::regclass, k.oid FROM pg_constraint k JOIN rels r ON r.oid = k.conrelid
		UNION SELECT 'pg_trigger'::regclass, t.oid FROM pg_trigger t JOIN rels r ON r.oid = t.tgrelid
		UNION SELECT 'pg_policy'::regclass, p.oid FROM pg_policy p JOIN rels r ON r.oid = p.polrelid
		UNION SELECT 'pg_rewrite'::regclass, w.oid FROM pg_rewrite w JOIN rels r ON r.oid = w.ev_class
		UNION SELECT 'pg_type'::regclass, c.reltype FROM pg_class c JOIN rels r ON r.oid = c.oid WHERE c.reltype <> 0)
	-- pg_extension
	SELECT format('extension: %s', to_jsonb(e) - 'oid' - 'extconfig' - 'extcondition') FROM ext e
	UNION ALL
	SELECT format('config: %s %s', x.rel::regclass, x.cond)
	  FROM ext, unnest(ext.extconfig, ext.extcondition) AS x(rel, cond)
	-- pg_depend: what belongs to the extension
	UNION ALL
	SELECT 'member: ' || pg_describe_object(m.classid, m.objid, m.objsubid) FROM members m
	-- pg_proc: the whole definition, properties, owner and ACL
	UNION ALL
	SELECT format('function: %s %s %s', p.oid::regprocedure,
				  to_jsonb(p) - 'oid' - 'proargdefaults' - 'prosqlbody',
				  pg_get_functiondef(p.oid))
	  FROM pg_proc p JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
	-- pg_class: tables, partitions, indexes
	UNION ALL
	SELECT format('relation: %s %s bound=%s partition_key=%s toast=%s', c.oid::regclass,
				  to_jsonb(c) - 'oid' - 'reltype' - 'reltoastrelid' - 'relfilenode' - 'relpartbound'
					- 'relpages' - 'reltuples' - 'relallvisible' - 'relallfrozen'
					- 'relfrozenxid' - 'relminmxid' - 'relrewrite',
				  pg_get_expr(c.relpartbound, c.oid),
				  CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END,
				  c.reltoastrelid <> 0)
	  FROM pg_class c JOIN rels r ON r.oid = c.oid
	-- pg_type: the tables' row types and their array types
	UNION ALL
	SELECT format('row type: %s %s array=%s', t.oid::regtype,
				  to_jsonb(t) - 'oid' - 'typrelid' - 'typarray' - 'typdefaultbin',
				  t.typarray::regtype)
	  FROM pg_type t JOIN pg_class c ON c.reltype = t.oid JOIN rels r ON r.oid = c.oid
	-- pg_attribute, pg_attrdef: columns, types, collations, defaults
	UNION ALL
	SELECT format('column: %s.%s %s options=%s type=%s collation=%s default=%s', a.attrelid::regclass, a.attname,
				  to_jsonb(a) - 'attrelid' - 'atthasmissing' - 'attmissingval' - 'attoptions',
				  (SELECT array_agg(o) FROM unnest(a.attoptions) o WHERE o NOT LIKE 'pg\_attver=%'),
				  format_type(a.atttypid, a.atttypmod),
				  (SELECT l.collname FROM pg_collation l WHERE l.oid = a.attcollation),
				  pg_get_expr(ad.adbin, ad.adrelid))
	  FROM pg_attribute a JOIN rels r ON r.oid = a.attrelid
	  LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
	 WHERE a.attnum > 0 AND NOT a.attisdropped
	-- pg_constraint
	UNION ALL
	SELECT format('constraint: %s %s %s index=%s parent=%s references=%s %s', k.conrelid::regclass, k.conname,
				  to_jsonb(k) - 'oid' - 'conrelid' - 'conindid' - 'conparentid' - 'confrelid' - 'conbin',
				  nullif(k.conindid, 0)::regclass,
				  (SELECT format('%s.%s', pk.conrelid::regclass, pk.conname) FROM pg_constraint pk WHERE pk.oid = k.conparentid),
				  nullif(k.confrelid, 0)::regclass,
				  pg_get_constraintdef(k.oid))
	  FROM pg_constraint k JOIN rels r ON r.oid = k.conrelid
	-- pg_index
	UNION ALL
	SELECT format('index: %s on %s %s %s', i.indexrelid::regclass, i.indrelid::regclass,
				  to_jsonb(i) - 'indexrelid' - 'indrelid' - 'indexprs' - 'indpred' - 'indcheckxmin',
				  pg_get_indexdef(i.indexrelid))
	  FROM pg_index i JOIN rels r ON r.oid = i.indexrelid
	-- pg_inherits, pg_partitioned_table: partitions and their parents
	UNION ALL
	SELECT format('inherits: %s from %s %s', h.inhrelid::regclass, h.inhparent::regclass,
				  to_jsonb(h) - 'inhrelid' - 'inhparent')
	  FROM pg_inherits h JOIN rels r ON r.oid = h.inhrelid
	UNION ALL
	SELECT format('partitioned: %s %s default=%s', pt.partrelid::regclass,
				  to_jsonb(pt) - 'partrelid' - 'partexprs' - 'partdefid', nullif(pt.partdefid, 0)::regclass)
	  FROM pg_partitioned_table pt JOIN rels r ON r.oid = pt.partrelid
	-- pg_trigger (internal triggers are named by OID: their names count
	-- without the digits)
	UNION ALL
	SELECT format('trigger: %s %s %s function=%s %s', t.tgrelid::regclass,
				  CASE WHEN t.tgisinternal THEN regexp_replace(t.tgname, '[0-9]+', 'N', 'g') ELSE t.tgname END,
				  to_jsonb(t) - 'oid' - 'tgrelid' - 'tgname' - 'tgfoid' - 'tgconstrrelid' - 'tgconstrindid'
					- 'tgconstraint' - 'tgparentid' - 'tgqual',
				  t.tgfoid::regprocedure,
				  CASE WHEN NOT t.tgisinternal THEN pg_get_triggerdef(t.oid) END)
	  FROM pg_trigger t JOIN rels r ON r.oid = t.tgrelid
	-- pg_policy, pg_rewrite
	UNION ALL
	SELECT format('policy: %s %s %s using=%s check=%s', p.polrelid::regclass, p.polname,
				  to_jsonb(p) - 'oid' - 'polrelid' - 'polqual' - 'polwithcheck',
				  pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
	  FROM pg_policy p JOIN rels r ON r.oid = p.polrelid
	UNION ALL
	SELECT format('rule: %s', pg_get_ruledef(w.oid))
	  FROM pg_rewrite w JOIN rels r ON r.oid = w.ev_class
	-- pg_publication, pg_publication_rel: publications of the extension's
	-- tables, and publications that belong to it
	UNION ALL
	SELECT format('published: %s in %s', pr.prrelid::regclass, pb.pubname)
	  FROM pg_publication_rel pr JOIN pg_publication pb ON pb.oid = pr.prpubid JOIN rels r ON r.oid = pr.prrelid
	UNION ALL
	SELECT format('publication: %s %s', pb.pubname, to_jsonb(pb) - 'oid')
	  FROM pg_publication pb JOIN members m ON m.classid = 'pg_publication'::regclass AND m.objid = pb.oid
	-- pg_description: comments on the objects, their columns, constraints,
	-- indexes and triggers
	UNION ALL
	SELECT format('comment: %s is %s', pg_describe_object(d.classoid, d.objoid, d.objsubid), d.description)
	  FROM pg_description d JOIN objects o ON o.classid = d.classoid AND o.objid = d.objoid
	-- pg_init_privs: the privileges pg_dump takes as the extension's own
	UNION ALL
	SELECT format('initial privileges: %s %s %s', pg_describe_object(ip.classoid, ip.objoid, ip.objsubid),
				  ip.privtype, ip.initprivs)
	  FROM pg_init_privs ip JOIN objects o ON o.classid = ip.classoid AND o.objid = ip.objoid
	-- the rows CREATE EXTENSION puts in the configuration tables
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
ALTER EXTENSION hxstate UPDATE TO '0.4.0';
SELECT hx_stream_channel('sessions:s-1');
ALTER EXTENSION hxstate UPDATE TO '0.5.0';
SELECT count(*) AS heads FROM hx_stream_heads(ARRAY['sessions:s-1']);

-- Streams of 0.5.0 that the update renames: until it runs, this library
-- names streams as 0.5.0 did (the table's name alone)
CREATE SCHEMA tenant_b;
CREATE SCHEMA tenant_c;
CREATE TABLE sessions (id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
CREATE TABLE tenant_b.sessions (id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
CREATE TABLE tenant_c.tickets (id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
CREATE TABLE tenant_c.other (id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
CREATE TABLE "Runs" (id text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON tenant_b.sessions FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON tenant_c.tickets FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON tenant_c.other FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id', 'stream=custom');
CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON "Runs" FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'id');
INSERT INTO sessions VALUES ('s-1', '{"of": "public"}');
INSERT INTO tenant_b.sessions VALUES ('s-2', '{"of": "tenant_b"}');
INSERT INTO tenant_c.tickets VALUES ('t-1', '{"n": 1}');
UPDATE tenant_c.tickets SET id = 't-2';
INSERT INTO tenant_c.other VALUES ('o-1', '{}');
INSERT INTO "Runs" VALUES ('r-1', '{}');
SELECT hx_stage('tickets:t-2', 'step-1', 'call-1', '[]');
SELECT hx_stage('tickets:t-2', 'step-0', 'call-1', '[]');
SELECT hx_promote('tickets:t-2', 'step-0');
SELECT stream, seq, type FROM hx_event ORDER BY stream COLLATE "C", seq;
-- the scripts set their own search_path, for as long as they run
BEGIN;
ALTER EXTENSION hxstate UPDATE;
SHOW search_path;
COMMIT;
SELECT extversion FROM pg_extension WHERE extname = 'hxstate';
-- the streams whose names changed carry their events, seqs and steps
-- over; those that 0.5.0 named alike for two tables stay (a WARNING)
SELECT stream, seq, type, event->'metadata' AS metadata, event->'value' AS value
  FROM hx_event ORDER BY stream COLLATE "C", seq;
SELECT stream, step FROM hx_step_call UNION ALL SELECT stream, step FROM hx_step ORDER BY 1, 2;
UPDATE tenant_c.tickets SET state = '{"n": 2}';
UPDATE sessions SET state = '{"of": "public", "n": 2}';
UPDATE tenant_b.sessions SET state = '{"of": "tenant_b", "n": 2}';
SELECT stream, seq, type FROM hx_event
 WHERE stream IN ('tenant_c.tickets:t-2', 'sessions:s-1', 'tenant_b.sessions:s-2') ORDER BY 1, 2;
DROP TABLE sessions, tenant_b.sessions, tenant_c.tickets, tenant_c.other, "Runs";
DROP SCHEMA tenant_b, tenant_c;
DELETE FROM hx_event;
DELETE FROM hx_step;
DELETE FROM hx_step_call;
CREATE TEMP TABLE upgraded AS SELECT item FROM extension_shape();

DROP EXTENSION hxstate;
BEGIN;
CREATE EXTENSION hxstate;
SHOW search_path;
COMMIT;
SELECT extversion FROM pg_extension WHERE extname = 'hxstate';
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
-- and the comparison saw every kind of fact
SELECT split_part(item, ':', 1) AS kind, count(*) > 0 AS seen
  FROM fresh GROUP BY 1 ORDER BY 1;

-- every version's script is in place for pg_available_extension_versions
SELECT version FROM pg_available_extension_versions WHERE name = 'hxstate' ORDER BY version;
-- and the update path to the newest exists from every version
SELECT source, target, path FROM pg_extension_update_paths('hxstate')
 WHERE target = '0.6.0' ORDER BY source;
