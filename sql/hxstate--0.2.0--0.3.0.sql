/* hxstate--0.2.0--0.3.0.sql: session invariants, locked-once columns, a one-tool slot, the phase machine */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION hxstate UPDATE TO '0.3.0'" to load this file. \quit

--
-- Row trigger functions that check and raise; attach them AFTER, as
-- CREATE CONSTRAINT TRIGGER ... AFTER INSERT OR UPDATE ... FOR EACH ROW.
--
CREATE FUNCTION @extschema@.hx_lock_once()
RETURNS trigger
AS 'MODULE_PATHNAME', 'hx_lock_once'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.hx_lock_once()
IS 'row trigger: once a listed column (or column:/json/pointer member) is set, it never changes';

CREATE FUNCTION @extschema@.hx_slot_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'hx_slot_guard'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.hx_slot_guard()
IS 'row trigger: a listed column goes from NULL to a value and back, never from one value to another';

--
-- State machines are data
--
CREATE TABLE @extschema@.hx_machine (
    machine       text PRIMARY KEY CHECK (machine <> ''),
    initial_phase text NOT NULL CHECK (initial_phase <> '')
);

COMMENT ON TABLE @extschema@.hx_machine
IS 'state machines for hx_phase_guard and hx_next_phase: a name and the phase a row starts in';

CREATE TABLE @extschema@.hx_transition (
    machine    text NOT NULL REFERENCES @extschema@.hx_machine ON UPDATE CASCADE ON DELETE CASCADE,
    from_phase text NOT NULL CHECK (from_phase <> ''),
    event      text NOT NULL CHECK (event <> ''),
    to_phase   text NOT NULL CHECK (to_phase <> ''),
    PRIMARY KEY (machine, from_phase, event)
);

COMMENT ON TABLE @extschema@.hx_transition
IS 'the edges of the state machines: from a phase, an event leads to a phase';

-- Everyone may read the machines (the guards read them as the current
-- user); changing them takes the privileges their owner grants.
GRANT SELECT ON @extschema@.hx_machine, @extschema@.hx_transition TO PUBLIC;

-- The machine of seed 002
INSERT INTO @extschema@.hx_machine VALUES ('agent_session', 'chatting');
INSERT INTO @extschema@.hx_transition VALUES
    ('agent_session', 'chatting',  'open_existing',   'chatting'),
    ('agent_session', 'chatting',  'start_build',     'building'),
    ('agent_session', 'building',  'todo_done_build', 'verifying'),
    ('agent_session', 'building',  'cancel',          'chatting'),
    ('agent_session', 'verifying', 'publish',         'done'),
    ('agent_session', 'verifying', 'revert',          'building'),
    ('agent_session', 'verifying', 'cancel',          'chatting'),
    ('agent_session', 'done',      'open_existing',   'chatting'),
    ('agent_session', 'done',      'start_build',     'building');

-- pg_dump keeps the machines users add; agent_session comes back with
-- CREATE EXTENSION, as shipped.
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_machine',
                                           'WHERE machine <> ''agent_session''');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hx_transition',
                                           'WHERE machine <> ''agent_session''');

-- Every backend caches the machines; a change to them sends the
-- invalidation that makes each one reload.
CREATE FUNCTION @extschema@.hx_machine_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'hx_machine_changed'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.hx_machine_changed()
IS 'statement trigger on hx_machine and hx_transition: makes every session reload the machines';

CREATE TRIGGER hx_machine_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.hx_machine
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.hx_machine_changed();
CREATE TRIGGER hx_transition_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.hx_transition
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.hx_machine_changed();

CREATE FUNCTION @extschema@.hx_next_phase(machine pg_catalog.text, phase pg_catalog.text,
                                          event pg_catalog.text)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'hx_next_phase'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hx_next_phase(pg_catalog.text, pg_catalog.text, pg_catalog.text)
IS 'the phase an event leads to from a phase, or an invalid transition error';

CREATE FUNCTION @extschema@.hx_machine_dot(machine pg_catalog.text)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'hx_machine_dot'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.hx_machine_dot(pg_catalog.text)
IS 'a state machine as a Graphviz digraph';

CREATE FUNCTION @extschema@.hx_phase_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'hx_phase_guard'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.hx_phase_guard()
IS 'row trigger (machine [, column]): rows start in the initial phase and move only along the machine''s edges';
