'use strict';
// test/fuzz/tables.js: the tables, types, roles and state machines that the
// fuzzer's trigger scenarios attach hxstate's triggers to.  They are
// created once per run (setupSql); each scenario then creates triggers on
// one of them, fires them and is rolled back, so the pool never changes.
//
// The pool covers what the trigger functions resolve their arguments
// against: columns of many types (jsonb, json, a domain over jsonb, an
// enum, text, numeric, bytea, arrays, a generated column), odd column
// names ("a:b", spaces, non-ASCII), a dropped column, tables with and
// without a usable unique key (partial, expression and multi-column unique
// indexes do not count), range, list and hash partitions (one attached
// with another column order), a jsonb key, a table whose owner may not
// write the event log, one under row-level security, and a view.
//
// Apart from the pool, fz_replay holds the rows of the replay scenarios,
// with a trigger that records each state and a function that checks
// hx_stream_state_at against the records.
//
// Each table lists its columns with a value type for the generator, the
// key column used in WHERE clauses and whether that key is unique (then
// INSERTs add ON CONFLICT DO NOTHING and key changes use fresh values, so
// that the fuzzer's own statements raise no core error).

const COMMON = `
DO $$ BEGIN
	IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'fz_owner') THEN CREATE ROLE fz_owner; END IF;
	IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'fz_user') THEN CREATE ROLE fz_user; END IF;
END $$;
CREATE TYPE fz_phase AS ENUM ('a', 'b', 'c', 'chatting', 'building');
CREATE DOMAIN fz_jdom AS jsonb;
INSERT INTO hx_machine VALUES ('fz_m', 'a'), ('fz_ünï', '😀'), ('fz_long', repeat('p', 200)), ('fz_chain', 'p0');
INSERT INTO hx_transition VALUES
	('fz_m', 'a', 'go', 'b'), ('fz_m', 'b', 'back', 'a'), ('fz_m', 'b', 'stay', 'b'), ('fz_m', 'a', 'jump', 'c'),
	('fz_ünï', '😀', 'ɛvent', 'ünï'), ('fz_ünï', 'ünï', 'back', '😀'),
	('fz_long', repeat('p', 200), repeat('e', 200), repeat('q', 200));
INSERT INTO hx_transition SELECT 'fz_chain', 'p' || i, 'next', 'p' || (i + 1) FROM generate_series(0, 99) i;
`;

const TABLES = [
  {
    name: 'fz_plain',
    ddl: `CREATE TABLE fz_plain (
	k int PRIMARY KEY, dropped_a int, t text, n numeric, j jsonb, js json, b bytea, arr text[],
	phase text, st jsonb, d fz_jdom, e fz_phase, "Wëird col" text, "a:b" jsonb, "with space" jsonb,
	flag boolean, ts timestamptz, c char(4), g bigint GENERATED ALWAYS AS (k::bigint * 2) STORED);
ALTER TABLE fz_plain DROP COLUMN dropped_a;
INSERT INTO fz_plain (k, t, j, st, phase, e, d) VALUES
	(1, 'x', '{"a": 1}', '{}', 'a', 'a', '{"a": [1]}'), (2, NULL, NULL, NULL, NULL, NULL, NULL),
	(3, 'y', '{"a": {"b": [1, 2]}}', '{"x": 1, "l": [1]}', 'b', 'b', '[]');`,
    cols: {
      k: 'int', t: 'text', n: 'numeric', j: 'jsonb', js: 'json', b: 'bytea', arr: 'text[]', phase: 'phase',
      st: 'jsonb', d: 'jdom', e: 'enum', 'Wëird col': 'text', 'a:b': 'jsonb', 'with space': 'jsonb',
      flag: 'bool', ts: 'tstz', c: 'char4', g: 'generated',
    },
    key: 'k', unique: true,
  },
  {
    name: 'fz_nokey',
    ddl: `CREATE TABLE fz_nokey (k int, st jsonb, phase text, t text);
INSERT INTO fz_nokey VALUES (1, '{}', 'a', 'x'), (1, '{"a": 1}', 'b', 'y'), (2, NULL, NULL, NULL);`,
    cols: { k: 'int', st: 'jsonb', phase: 'phase', t: 'text' },
    key: 'k', unique: false,
  },
  {
    name: 'fz_sessions',
    ddl: `CREATE TABLE fz_sessions (
	session_id text PRIMARY KEY, user_id text NOT NULL, project_id text,
	phase text NOT NULL DEFAULT 'chatting', pending_tool jsonb, cancel_token text,
	state jsonb COMPRESSION lz4 NOT NULL DEFAULT '{}', updated_at timestamptz NOT NULL DEFAULT now());
INSERT INTO fz_sessions (session_id, user_id, project_id, pending_tool, state) VALUES
	('s-1', 'u-1', NULL, NULL, '{}'), ('s-2', 'u-1', 'prj_1', '{"id": "toolu_1"}', '{"todos": [{"id": "t1"}], "stats": {"n": 1}}');`,
    cols: {
      session_id: 'textkey', user_id: 'text', project_id: 'text', phase: 'phase', pending_tool: 'jsonb',
      cancel_token: 'text', state: 'jsonb', updated_at: 'tstz',
    },
    notnull: ['session_id', 'user_id', 'phase', 'state', 'updated_at'],
    key: 'session_id', unique: true,
  },
  {
    name: 'fz_part',
    ddl: `CREATE TABLE fz_part (k int PRIMARY KEY, st jsonb, phase text, t text, j jsonb) PARTITION BY RANGE (k);
CREATE TABLE fz_part_neg PARTITION OF fz_part FOR VALUES FROM (MINVALUE) TO (0);
CREATE TABLE fz_part_mid (t text, dropped int, j jsonb, phase text, st jsonb, k int NOT NULL);
ALTER TABLE fz_part_mid DROP COLUMN dropped;
ALTER TABLE fz_part ATTACH PARTITION fz_part_mid FOR VALUES FROM (0) TO (100);
CREATE TABLE fz_part_def PARTITION OF fz_part DEFAULT;
INSERT INTO fz_part VALUES (-1, '{"a": 1}', 'a', 'x', NULL), (1, '{}', 'a', NULL, '{"a": {"b": 1}}'), (500, '[]', 'b', 'y', '{}');`,
    cols: { k: 'int', st: 'jsonb', phase: 'phase', t: 'text', j: 'jsonb' },
    key: 'k', unique: true,
  },
  {
    name: 'fz_multi',
    ddl: `CREATE TABLE fz_multi (region text, k int, st jsonb, phase text, PRIMARY KEY (region, k)) PARTITION BY LIST (region);
CREATE TABLE fz_multi_eu PARTITION OF fz_multi FOR VALUES IN ('eu') PARTITION BY HASH (k);
CREATE TABLE fz_multi_eu_0 PARTITION OF fz_multi_eu FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE fz_multi_eu_1 PARTITION OF fz_multi_eu FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE fz_multi_us PARTITION OF fz_multi FOR VALUES IN ('us');
CREATE TABLE fz_multi_def PARTITION OF fz_multi DEFAULT;
INSERT INTO fz_multi VALUES ('eu', 1, '{}', 'a'), ('eu', 2, '{"a": 1}', 'b'), ('us', 1, NULL, NULL), ('ap', 1, '[]', 'a');`,
    cols: { region: 'region', k: 'int', st: 'jsonb', phase: 'phase' },
    notnull: ['region', 'k'],
    key: 'k', unique: true,
  },
  {
    name: 'fz_jkey',
    ddl: `CREATE TABLE fz_jkey (jk jsonb PRIMARY KEY, st jsonb, phase fz_phase);
INSERT INTO fz_jkey VALUES ('1', '{}', 'a'), ('{"id": "x"}', '{"a": [1, 2]}', 'b'), ('"😀"', NULL, NULL);`,
    cols: { jk: 'jsonkey', st: 'jsonb', phase: 'enum' },
    key: 'jk', unique: true,
  },
  {
    name: 'fz_odd',
    ddl: `CREATE TABLE fz_odd (k int, u int, st jsonb, phase text);
CREATE UNIQUE INDEX fz_odd_partial ON fz_odd (k) WHERE k > 0;
CREATE UNIQUE INDEX fz_odd_expr ON fz_odd ((k + 0));
CREATE UNIQUE INDEX fz_odd_pair ON fz_odd (k, u);
INSERT INTO fz_odd VALUES (1, 1, '{}', 'a'), (2, 2, '{"a": 1}', 'b');`,
    cols: { k: 'int', u: 'int', st: 'jsonb', phase: 'phase' },
    key: 'k', unique: true,
  },
  {
    name: 'fz_owned',
    ddl: `CREATE TABLE fz_owned (k int PRIMARY KEY, st jsonb, phase text, t text);
INSERT INTO fz_owned VALUES (1, '{}', 'a', 'x'), (2, '{"a": 1}', NULL, NULL);
ALTER TABLE fz_owned OWNER TO fz_owner;
GRANT SELECT, INSERT, UPDATE, DELETE ON fz_owned TO fz_user;`,
    cols: { k: 'int', st: 'jsonb', phase: 'phase', t: 'text' },
    key: 'k', unique: true, role: true,
  },
  {
    name: 'fz_rls',
    ddl: `CREATE TABLE fz_rls (k int PRIMARY KEY, st jsonb, secret text, phase text);
INSERT INTO fz_rls VALUES (1, '{"a": 1}', 's', 'a'), (2, NULL, NULL, NULL);
ALTER TABLE fz_rls ENABLE ROW LEVEL SECURITY;
CREATE POLICY fz_all ON fz_rls USING (true) WITH CHECK (true);
GRANT SELECT (k), INSERT, UPDATE, DELETE ON fz_rls TO fz_user;`,
    cols: { k: 'int', st: 'jsonb', secret: 'text', phase: 'phase' },
    key: 'k', unique: true, role: true,
  },
  {
    name: 'fz_view',
    ddl: `CREATE VIEW fz_view AS SELECT session_id, user_id, project_id, phase, pending_tool, state FROM fz_sessions;`,
    cols: {
      session_id: 'textkey', user_id: 'text', project_id: 'text', phase: 'phase', pending_tool: 'jsonb', state: 'jsonb',
    },
    notnull: ['session_id', 'user_id', 'phase', 'state'],
    key: 'session_id', unique: false, view: true, needs: ['fz_sessions'],
  },
];

// The table of the replay scenarios (inputs.js, replayInput), apart from
// the pool that the trigger scenarios pick from: a trigger records the
// state the row has after each of its stream's events, and
// fz_replay_check compares hx_stream_state_at with what was recorded.  A
// scenario creates the hx_stream trigger ("fz_stream", which fires before
// "zz_fz_record"), so the recorder finds the event the write made.
const REPLAY = {
  name: 'fz_replay',
  ddl: `CREATE TABLE fz_replay (k int PRIMARY KEY, st jsonb NOT NULL DEFAULT '{}');
CREATE TABLE fz_replay_seen (stream text, seq bigint, st jsonb, PRIMARY KEY (stream, seq));
CREATE FUNCTION fz_replay_record() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	key int := CASE TG_OP WHEN 'DELETE' THEN OLD.k ELSE NEW.k END;
BEGIN
	INSERT INTO fz_replay_seen
	SELECT 'fzr:' || key, max(e.seq), CASE TG_OP WHEN 'DELETE' THEN 'null' ELSE NEW.st END
	  FROM hx_event e WHERE e.stream = 'fzr:' || key
	HAVING max(e.seq) IS NOT NULL
	ON CONFLICT (stream, seq) DO UPDATE SET st = EXCLUDED.st;
	RETURN NULL;
END $$;
CREATE TRIGGER zz_fz_record AFTER INSERT OR UPDATE OR DELETE ON fz_replay
	FOR EACH ROW EXECUTE FUNCTION fz_replay_record();
-- every step-th recorded seq of each stream, and its last: rebuilt from
-- the log, the state must be the one the row had; SQLSTATE HXFZ1 when it
-- is not, or when rebuilding it fails
CREATE FUNCTION fz_replay_check(step int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	s record;
	n int := 0;
	got jsonb;
	code text;
	msg text;
BEGIN
	FOR s IN SELECT r.stream, r.seq, r.st FROM fz_replay_seen r
			  WHERE r.seq % step = 0
				 OR r.seq = (SELECT max(x.seq) FROM fz_replay_seen x WHERE x.stream = r.stream)
			  ORDER BY r.stream, r.seq LOOP
		BEGIN
			got := hx_stream_state_at(s.stream, s.seq);
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
			RAISE SQLSTATE 'HXFZ1' USING MESSAGE = format('hx_stream_state_at(%L, %s) failed: %s %s', s.stream, s.seq, code, msg);
		END;
		IF got IS DISTINCT FROM s.st THEN
			RAISE SQLSTATE 'HXFZ1' USING MESSAGE = format('hx_stream_state_at(%L, %s) is not the state the row had at that seq', s.stream, s.seq);
		END IF;
		n := n + 1;
	END LOOP;
	RETURN n;
END $$;`,
  cols: { k: 'int', st: 'jsonb' },
  key: 'k', unique: true,
};

// The phases the pool's machines know, and some they do not
const MACHINES = ['fz_m', 'fz_ünï', 'fz_long', 'fz_chain', 'agent_session'];
const PHASES = ['a', 'b', 'c', 'chatting', 'building', 'verifying', 'done', '😀', 'ünï', 'p0', 'p1', 'p99', 'p100',
  'p'.repeat(200), 'q'.repeat(200), 'zzz', ' a'];
const EVENTS = ['go', 'back', 'stay', 'jump', 'ɛvent', 'next', 'e'.repeat(200), 'start_build', 'cancel', 'publish',
  'todo_done_build', 'revert', 'open_existing', 'nope'];

function setupSql() {
  return [COMMON, ...TABLES.map((t) => t.ddl), REPLAY.ddl].join('\n');
}

function table(name) {
  return TABLES.concat([REPLAY]).find((t) => t.name === name);
}

module.exports = { TABLES, REPLAY, MACHINES, PHASES, EVENTS, COMMON, setupSql, table };
