-- docs/sessions.sql: the README's sessions table, with its guards and its
-- stream: one source for the README, the regression test of the README's
-- example (sql/sessions.sql), the demo, the benchmark and the reliability
-- runs.  Load it into a database where hxstate is installed:
--
--   psql -f docs/sessions.sql
--
CREATE TABLE sessions (
    session_id   text PRIMARY KEY,
    user_id      text NOT NULL,
    project_id   text,                              -- locked after assignment
    phase        text NOT NULL DEFAULT 'chatting',  -- chatting|building|verifying|done
    pending_tool jsonb,                             -- the tool_use in flight, if any
    cancel_token text,
    state        hxdoc NOT NULL DEFAULT '{}',          -- jsonb, stored so that a write writes what it changed
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TRIGGER state_store BEFORE INSERT OR UPDATE OR DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION hx_store('state');
CREATE CONSTRAINT TRIGGER project_locked AFTER INSERT OR UPDATE ON sessions
    FOR EACH ROW EXECUTE FUNCTION hx_lock_once('project_id');
CREATE CONSTRAINT TRIGGER one_tool_at_a_time AFTER INSERT OR UPDATE ON sessions
    FOR EACH ROW EXECUTE FUNCTION hx_slot_guard('pending_tool');
CREATE CONSTRAINT TRIGGER phase_machine AFTER INSERT OR UPDATE ON sessions
    FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('agent_session');
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id');
