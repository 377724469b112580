"""The helpers, on a psycopg connection: hx_merge, hx_stage, hx_promote and
the log's history, with hxstate's SQLSTATEs raised as hxstate.errors."""

from __future__ import annotations

import weakref
from typing import Any

import psycopg

from hxstate import base
from hxstate.errors import NotSetUp, errors

_schemas: weakref.WeakKeyDictionary[psycopg.Connection[Any], str] = weakref.WeakKeyDictionary()


def hx_schema(conn: psycopg.Connection[Any]) -> str:
    """The schema hxstate is installed in, on this connection's database."""
    s = _schemas.get(conn)
    if s is None:
        row = conn.execute(base.SCHEMA_SQL).fetchone()
        if row is None:
            raise NotSetUp('extension "hxstate" is not installed in this database')
        s = _schemas[conn] = row[0]
    return s


def merge(
    conn: psycopg.Connection[Any],
    table: str | tuple[str, ...],
    key_column: str,
    key: Any,
    writes: Any,
    *,
    state_column: str = "state",
) -> Any:
    """Merge a tool's writes (an op list, or an RFC 7386 merge patch) into a
    row's state with one UPDATE; returns the new state, or None when no row
    has the key."""
    with errors():
        row = conn.execute(
            base.merge_sql(hx_schema(conn), table, key_column, state_column), (base.json_param(writes), key)
        ).fetchone()
    return None if row is None else row[0]


def stage(
    conn: psycopg.Connection[Any],
    stream: str,
    step: str,
    call: str,
    writes: Any,
    ord: int | None = None,
) -> bool:
    """Stage a tool call's writes for a step: True when staged, False for a
    retry with the same writes; NonDeterministicRetry (XH201) for other
    writes, StepPromoted (XH202) once the step was promoted."""
    with errors():
        row = conn.execute(base.stage_sql(hx_schema(conn)), (stream, step, call, base.json_param(writes), ord)).fetchone()
    assert row is not None
    return bool(row[0])


def promote(
    conn: psycopg.Connection[Any],
    table: str | tuple[str, ...],
    key_column: str,
    key: Any,
    stream: str,
    step: str,
    *,
    state_column: str = "state",
) -> Any:
    """Promote a step: its staged writes, once, in tool-call order, merged
    into the row's state by one UPDATE; returns the new state (None: no row)."""
    with errors():
        row = conn.execute(
            base.promote_sql(hx_schema(conn), table, key_column, state_column), (stream, step, key)
        ).fetchone()
    return None if row is None else row[0]


def state_at(conn: psycopg.Connection[Any], stream: str, seq: int) -> Any:
    """A stream's state right after its event ``seq``, rebuilt from the log
    (Trimmed, XH301, when the log no longer has what it needs)."""
    with errors():
        row = conn.execute(base.state_at_sql(hx_schema(conn)), (stream, seq)).fetchone()
    assert row is not None
    return row[0]


def events(conn: psycopg.Connection[Any], stream: str, after: int = 0, max_events: int = 1000) -> list[tuple[int, Any]]:
    """A stream's events after seq ``after``, in seq order."""
    with errors():
        return [(r[0], r[1]) for r in conn.execute(base.events_sql(hx_schema(conn)), (stream, after, max_events))]
