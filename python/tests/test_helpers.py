"""The helpers against a real server, and every error they raise as the
exception the README's SQLSTATE table names."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import hxstate
from hxstate import aio, errors


@pytest.fixture
def key() -> str:
    """A key of its own per test: the log outlives the table."""
    import uuid

    return f"s-{uuid.uuid4()}"


@pytest.fixture
def sessions(conn: psycopg.Connection[Any], key: str) -> str:
    conn.execute("DROP TABLE IF EXISTS py_sessions")
    conn.execute(
        """CREATE TABLE py_sessions (
             session_id text PRIMARY KEY, user_id text NOT NULL, project_id text,
             phase text NOT NULL DEFAULT 'chatting', pending_tool jsonb,
             state jsonb NOT NULL DEFAULT '{}')"""
    )
    conn.execute(
        """CREATE CONSTRAINT TRIGGER project_locked AFTER INSERT OR UPDATE ON py_sessions
             FOR EACH ROW EXECUTE FUNCTION hx_lock_once('project_id');
           CREATE CONSTRAINT TRIGGER one_tool AFTER INSERT OR UPDATE ON py_sessions
             FOR EACH ROW EXECUTE FUNCTION hx_slot_guard('pending_tool');
           CREATE CONSTRAINT TRIGGER phase_machine AFTER INSERT OR UPDATE ON py_sessions
             FOR EACH ROW EXECUTE FUNCTION hx_phase_guard('agent_session');
           CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON py_sessions
             FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id')"""
    )
    conn.execute("INSERT INTO py_sessions (session_id, user_id) VALUES (%s, 'u-1')", (key,))
    return "py_sessions"


def test_merge(conn: psycopg.Connection[Any], sessions: str, key: str) -> None:
    s = hxstate.merge(conn, sessions, "session_id", key, [{"op": "append", "path": "/todos", "items": ["a"]}])
    assert s == {"todos": ["a"]}
    s = hxstate.merge(conn, sessions, "session_id", key, {"n": 1})
    assert s == {"todos": ["a"], "n": 1}
    assert hxstate.merge(conn, sessions, "session_id", "nobody", {"n": 2}) is None


def test_stage_and_promote_exactly_once(conn: psycopg.Connection[Any], sessions: str, key: str) -> None:
    stream, step = f"py_sessions:{key}", "step-1"
    w1 = [{"op": "append", "path": "/log", "items": ["tool 1"]}, {"op": "increment", "path": "/calls", "by": 1}]
    w2 = [{"op": "append", "path": "/log", "items": ["tool 2"]}, {"op": "increment", "path": "/calls", "by": 1}]
    assert hxstate.stage(conn, stream, step, "call-2", w2, 2) is True
    assert hxstate.stage(conn, stream, step, "call-1", w1, 1) is True
    assert hxstate.stage(conn, stream, step, "call-1", w1, 1) is False  # a retry: no-op
    with pytest.raises(errors.NonDeterministicRetry) as e:
        hxstate.stage(conn, stream, step, "call-1", w2, 1)
    assert e.value.sqlstate == "XH201" and e.value.pgerror is not None
    s = hxstate.promote(conn, sessions, "session_id", key, stream, step)
    assert s == {"log": ["tool 1", "tool 2"], "calls": 2}
    # a second promote applies nothing
    assert hxstate.promote(conn, sessions, "session_id", key, stream, step) == s
    with pytest.raises(errors.StepPromoted):
        hxstate.stage(conn, stream, step, "call-3", w1, 3)


def test_history(conn: psycopg.Connection[Any], sessions: str, key: str) -> None:
    stream = f"py_sessions:{key}"
    for i in range(3):
        hxstate.merge(conn, sessions, "session_id", key, [{"op": "increment", "path": "/n", "by": 1}])
    evs = hxstate.events(conn, stream)
    assert [e[1]["type"] for e in evs] == ["STATE_SNAPSHOT"] + ["STATE_DELTA"] * 3
    assert hxstate.state_at(conn, stream, 3) == {"n": 2}
    with pytest.raises(errors.InvalidParameterValue):
        hxstate.state_at(conn, stream, 99)


@pytest.mark.parametrize(
    "statement, cls",
    [
        ("UPDATE py_sessions SET project_id = 'b' WHERE session_id = %(key)s", errors.LockedColumn),
        ("""UPDATE py_sessions SET pending_tool = '{"id": 2}' WHERE session_id = %(key)s""", errors.SlotBusy),
        ("UPDATE py_sessions SET phase = hx_next_phase('agent_session', phase, 'publish') WHERE session_id = %(key)s", errors.InvalidTransition),
        ("""SELECT hx_merge('{"v": 1}', '[{"op": "test", "path": "/v", "value": 2}]')""", errors.TestFailed),
        ("""SELECT hx_merge('{"v": 1}', '[{"op": "increment", "path": "/v/x", "by": 1}]')""", errors.TypeConflict),
        ("""SELECT hx_merge('{}', '[{"op": "nope", "path": "/v"}]')""", errors.InvalidParameterValue),
        ("""SELECT hx_patch('{}', '[{"op": "remove", "path": "/v"}]')""", errors.PathNotFound),
        ("""SELECT hx_patch('{}', '[{"op": "add", "path": "v", "value": 1}]')""", errors.InvalidTextRepresentation),
        ("""SELECT hx_patch('{"a": [1]}', '[{"op": "add", "path": "/a/01", "value": 1}]')""", errors.InvalidJsonSubscript),
        ("SELECT hx_stage(NULL, 's', 'c', '[]')", errors.NullValueNotAllowed),
        ("SELECT hx_stream_events_after(ARRAY['a'], ARRAY[1, 2]::bigint[])", errors.ArraySubscriptError),
        ("SELECT hx_next_phase('no such machine', 'a', 'b')", errors.UndefinedObject),
        ("""SELECT hx_merge('{"n": 1e131071}', '[{"op": "increment", "path": "/n", "by": 9e131071}]')""", errors.NumericValueOutOfRange),
    ],
)
def test_sqlstates(conn: psycopg.Connection[Any], sessions: str, key: str, statement: str, cls: type[errors.HxError]) -> None:
    conn.execute("UPDATE py_sessions SET project_id = 'a', pending_tool = '{\"id\": 1}' WHERE session_id = %(key)s", {"key": key})
    with pytest.raises(cls) as e, errors.errors():
        conn.execute(statement, {"key": key} if "%(key)s" in statement else None)
    assert e.value.sqlstate == cls.sqlstate
    assert isinstance(e.value.__cause__, psycopg.Error)


def test_read_only_transaction(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(errors.ReadOnlyTransaction) as e, errors.errors(), conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        conn.execute("""SELECT hx_stream_send('@py:read-only', '{"type": "CUSTOM", "name": "x", "value": 1}')""")
    assert e.value.sqlstate == "25006"


def test_every_sqlstate_of_the_readme_has_a_class() -> None:
    import pathlib
    import re

    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = readme[readme.index("### SQLSTATEs") :]
    table = table[: table.index("\n## ")]
    codes = set(re.findall(r"^\| `([0-9A-Z]{5})` \|", table, re.M))
    assert codes, "no SQLSTATE table found"
    assert codes <= set(errors.BY_SQLSTATE), codes - set(errors.BY_SQLSTATE)


async def test_async_helpers(aconn: psycopg.AsyncConnection[Any], sessions: str, key: str) -> None:
    s = await aio.merge(aconn, sessions, "session_id", key, [{"op": "increment", "path": "/a", "by": 2}])
    assert s == {"a": 2}
    assert await aio.stage(aconn, f"py_sessions:{key}", "st", "c", [{"op": "increment", "path": "/a", "by": 1}]) is True
    with pytest.raises(errors.NonDeterministicRetry):
        await aio.stage(aconn, f"py_sessions:{key}", "st", "c", [{"op": "increment", "path": "/a", "by": 5}])
    assert await aio.promote(aconn, sessions, "session_id", key, f"py_sessions:{key}", "st") == {"a": 3}
    assert (await aio.events(aconn, f"py_sessions:{key}"))[-1][0] == 3
    assert await aio.state_at(aconn, f"py_sessions:{key}", 2) == {"a": 2}
