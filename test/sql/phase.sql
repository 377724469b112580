--
-- The phase machine: hx_next_phase, hx_phase_guard, hx_machine_dot
--

-- agent_session, the machine the extension ships: chatting -start_build->
-- building -todo_done_build-> verifying -publish-> done, with cancel,
-- revert and open_existing edges
SELECT * FROM hx_machine ORDER BY machine;
SELECT from_phase, event, to_phase FROM hx_transition
 WHERE machine = 'agent_session' ORDER BY from_phase, event;

-- every edge of the seed's TRANSITIONS table
SELECT phase, event, hx_next_phase('agent_session', phase, event) AS next
  FROM (VALUES ('chatting', 'open_existing'), ('chatting', 'start_build'),
               ('building', 'todo_done_build'), ('building', 'cancel'),
               ('verifying', 'publish'), ('verifying', 'revert'), ('verifying', 'cancel'),
               ('done', 'open_existing'), ('done', 'start_build')) e(phase, event);

\pset tuples_only on
\pset format unaligned
-- anything else is an invalid transition: XH103, with what the phase allows
SELECT err($$SELECT hx_next_phase('agent_session', 'chatting', 'publish')$$);
SELECT err($$SELECT hx_next_phase('agent_session', 'done', 'cancel')$$);
SELECT err($$SELECT hx_next_phase('agent_session', 'limbo', 'start_build')$$);
SELECT err($$SELECT hx_next_phase('agent_session', 'Chatting', 'start_build')$$);
SELECT err($$SELECT hx_next_phase('no_such_machine', 'a', 'b')$$);
\pset tuples_only off
\pset format aligned
SELECT hx_next_phase('agent_session', NULL, 'publish') IS NULL AS strict;

-- the machine drawn for Graphviz
SELECT hx_machine_dot('agent_session');

--
-- hx_phase_guard on a table
--
CREATE TABLE runs (id int PRIMARY KEY, phase text);
CREATE CONSTRAINT TRIGGER phase_machine AFTER INSERT OR UPDATE ON runs
	FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('agent_session');
INSERT INTO runs VALUES (1, 'chatting');
-- the session walks chatting -> building -> verifying -> done -> chatting
UPDATE runs SET phase = hx_next_phase('agent_session', phase, 'start_build');
UPDATE runs SET phase = hx_next_phase('agent_session', phase, 'todo_done_build');
UPDATE runs SET phase = hx_next_phase('agent_session', phase, 'publish');
UPDATE runs SET phase = hx_next_phase('agent_session', phase, 'open_existing');
-- any SQL that moves along an edge is fine; staying put is no move
UPDATE runs SET phase = 'building';
UPDATE runs SET phase = 'building';
SELECT * FROM runs;

\pset tuples_only on
\pset format unaligned
-- a new row starts in the initial phase
SELECT err($$INSERT INTO runs VALUES (2, 'done')$$);
SELECT err($$INSERT INTO runs VALUES (3, NULL)$$);
-- and moves only along an edge, whatever SQL does it
SELECT err($$UPDATE runs SET phase = 'done'$$);
SELECT err($$UPDATE runs SET phase = NULL$$);
SELECT err($$UPDATE runs SET phase = 'limbo'$$);
SELECT err($$UPDATE runs SET phase = hx_next_phase('agent_session', phase, 'publish')$$);
\pset tuples_only off
\pset format aligned

-- the phases in the detail only for those who may read them, as the
-- other guards show their values
CREATE ROLE regress_hx_mover;
GRANT UPDATE, INSERT ON runs TO regress_hx_mover;
SET ROLE regress_hx_mover;
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE runs SET phase = 'done'$$);
SELECT err($$INSERT INTO runs VALUES (4, 'done')$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;
GRANT SELECT (phase) ON runs TO regress_hx_mover;
SET ROLE regress_hx_mover;
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE runs SET phase = 'done'$$);
\pset tuples_only off
\pset format aligned
RESET ROLE;
REVOKE ALL ON runs FROM regress_hx_mover;
DROP ROLE regress_hx_mover;

-- a column of another name, and a row that had no phase before the guard
CREATE TABLE tasks (id int PRIMARY KEY, stage text);
INSERT INTO tasks VALUES (1, NULL);
CREATE CONSTRAINT TRIGGER stage_machine AFTER INSERT OR UPDATE ON tasks
	FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('agent_session', 'stage');
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE tasks SET stage = 'building'$$);
\pset tuples_only off
\pset format aligned
UPDATE tasks SET stage = 'chatting';
SELECT * FROM tasks;

--
-- Machines are data: users add their own with INSERT, and the next
-- statement sees a change
--
INSERT INTO hx_machine VALUES ('ticket', 'open');
INSERT INTO hx_transition VALUES
	('ticket', 'open', 'assign', 'assigned'),
	('ticket', 'assigned', 'resolve', 'closed'),
	('ticket', 'closed', 'reopen', 'open');
CREATE TABLE tickets (id int PRIMARY KEY, status text NOT NULL DEFAULT 'open');
CREATE CONSTRAINT TRIGGER ticket_machine AFTER INSERT OR UPDATE ON tickets
	FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('ticket', 'status');
INSERT INTO tickets (id) VALUES (1);
UPDATE tickets SET status = hx_next_phase('ticket', status, 'assign');
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE tickets SET status = 'open'$$);
\pset tuples_only off
\pset format aligned
INSERT INTO hx_transition VALUES ('ticket', 'assigned', 'unassign', 'open');
UPDATE tickets SET status = 'open';
DELETE FROM hx_transition WHERE machine = 'ticket' AND event = 'assign';
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE tickets SET status = 'assigned'$$);
\pset tuples_only off
\pset format aligned
-- a change rolled back is forgotten too
BEGIN;
INSERT INTO hx_transition VALUES ('ticket', 'open', 'assign', 'assigned');
UPDATE tickets SET status = 'assigned';
ROLLBACK;
\pset tuples_only on
\pset format unaligned
SELECT err($$UPDATE tickets SET status = 'assigned'$$);
\pset tuples_only off
\pset format aligned
SELECT hx_machine_dot('ticket');
-- a final phase
SELECT err($$SELECT hx_next_phase('ticket', 'nowhere', 'go')$$) AS unknown_phase;
INSERT INTO hx_transition VALUES ('ticket', 'open', 'archive', 'archived');
SELECT err($$SELECT hx_next_phase('ticket', 'archived', 'reopen')$$) AS final_phase;

-- the machine tables reject nonsense
SELECT err($$INSERT INTO hx_transition VALUES ('no_such_machine', 'a', 'b', 'c')$$);
SELECT err($$INSERT INTO hx_transition VALUES ('ticket', 'open', 'reopen', '')$$);
SELECT err($$INSERT INTO hx_transition VALUES ('ticket', 'open', 'archive', 'closed')$$);

-- partitioned tables: a row moved to another partition arrives there as an
-- INSERT (PostgreSQL runs the move as a DELETE and an INSERT), which the
-- guard judges as a new row: only a row in the initial phase can move
CREATE TABLE tickets_p (region text, id int, status text NOT NULL DEFAULT 'open',
	PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE tickets_p_eu PARTITION OF tickets_p FOR VALUES IN ('eu');
CREATE TABLE tickets_p_us PARTITION OF tickets_p FOR VALUES IN ('us');
CREATE CONSTRAINT TRIGGER ticket_machine AFTER INSERT OR UPDATE ON tickets_p
	FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('ticket', 'status');
INSERT INTO tickets_p (region, id) VALUES ('eu', 1);
UPDATE tickets_p SET region = 'us';
UPDATE tickets_p SET status = 'archived';
SELECT err($$UPDATE tickets_p SET region = 'eu'$$) AS moved_out_of_initial;
SELECT tableoid::regclass AS partition, * FROM tickets_p;
DROP TABLE tickets_p;

-- pg_dump keeps user machines (extension configuration), not agent_session
SELECT c.relname, x.cond
  FROM pg_extension e,
       unnest(e.extconfig, e.extcondition) AS x(oid, cond)
       JOIN pg_class c ON c.oid = x.oid
 WHERE e.extname = 'hxstate' ORDER BY c.relname;

--
-- Misuse
--
\pset tuples_only on
\pset format unaligned
CREATE TABLE misuse (id int, phase text);
CREATE TRIGGER no_machine BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('nope');
SELECT err($$INSERT INTO misuse VALUES (1, 'a')$$);
DROP TRIGGER no_machine ON misuse;
CREATE TRIGGER no_args BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION hx_phase_guard();
SELECT err($$INSERT INTO misuse VALUES (1, 'a')$$);
DROP TRIGGER no_args ON misuse;
CREATE TRIGGER three_args BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('agent_session', 'phase', 'x');
SELECT err($$INSERT INTO misuse VALUES (1, 'a')$$);
DROP TRIGGER three_args ON misuse;
CREATE TRIGGER no_column BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('agent_session', 'stage');
SELECT err($$INSERT INTO misuse VALUES (1, 'a')$$);
DROP TRIGGER no_column ON misuse;
CREATE TRIGGER on_delete BEFORE DELETE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('agent_session');
INSERT INTO misuse VALUES (1, 'chatting');
SELECT err($$DELETE FROM misuse$$);
SELECT err($$SELECT hx_machine_dot('nope')$$);
\pset tuples_only off
\pset format aligned

-- BEFORE works too, failing fast
CREATE TRIGGER phase_before BEFORE INSERT OR UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('agent_session');
INSERT INTO misuse VALUES (2, 'chatting');
SELECT err($$UPDATE misuse SET phase = 'done' WHERE id = 2$$);

DROP TABLE runs, tasks, tickets, misuse;
DELETE FROM hx_machine WHERE machine = 'ticket';

-- hx_machine_changed is the extension's own trigger: on any other table,
-- or as a row trigger, it is an error, never a trigger that drops rows
CREATE TABLE notes (id int PRIMARY KEY);
CREATE TRIGGER bad BEFORE INSERT ON notes FOR EACH ROW EXECUTE FUNCTION hx_machine_changed();
SELECT err($$INSERT INTO notes VALUES (1)$$);
DROP TRIGGER bad ON notes;
CREATE TRIGGER bad AFTER INSERT ON notes FOR EACH STATEMENT EXECUTE FUNCTION hx_machine_changed();
SELECT err($$INSERT INTO notes VALUES (1)$$);
SELECT count(*) AS rows_kept FROM notes;
DROP TABLE notes;
