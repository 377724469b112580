"""The SQL of the helpers, shared by the sync API (hxstate) and the async
one (hxstate.aio).

hxstate's functions are called qualified with the schema the extension was
created in (looked up once per connection), so the helpers work whatever the
connection's search_path."""

from __future__ import annotations

from typing import Any

from psycopg import sql

SCHEMA_SQL = (
    "SELECT n.nspname FROM pg_catalog.pg_extension e "
    "JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'hxstate'"
)


def table_name(name: str) -> sql.Composable:
    """A table name as given (``sessions``, ``app.sessions``), quoted part by
    part; write a name containing a dot or quotes as a tuple of parts."""
    return sql.Identifier(*name.split("."))


def merge_sql(hx: str, table: str | tuple[str, ...], key_column: str, state_column: str) -> sql.Composed:
    t = sql.Identifier(*table) if isinstance(table, tuple) else table_name(table)
    return sql.SQL(
        "UPDATE {t} SET {s} = {hx}.hx_merge({s}, %s::jsonb) WHERE {k} = %s RETURNING {s}"
    ).format(t=t, s=sql.Identifier(state_column), k=sql.Identifier(key_column), hx=sql.Identifier(hx))


def promote_sql(hx: str, table: str | tuple[str, ...], key_column: str, state_column: str) -> sql.Composed:
    t = sql.Identifier(*table) if isinstance(table, tuple) else table_name(table)
    return sql.SQL(
        "UPDATE {t} SET {s} = {hx}.hx_merge({s}, {hx}.hx_promote(%s, %s)) WHERE {k} = %s RETURNING {s}"
    ).format(t=t, s=sql.Identifier(state_column), k=sql.Identifier(key_column), hx=sql.Identifier(hx))


def stage_sql(hx: str) -> sql.Composed:
    return sql.SQL("SELECT {hx}.hx_stage(%s, %s, %s, %s::jsonb, %s)").format(hx=sql.Identifier(hx))


def state_at_sql(hx: str) -> sql.Composed:
    return sql.SQL("SELECT {hx}.hx_stream_state_at(%s, %s)").format(hx=sql.Identifier(hx))


def events_sql(hx: str) -> sql.Composed:
    return sql.SQL("SELECT seq, event FROM {hx}.hx_stream_events(%s, %s, %s)").format(hx=sql.Identifier(hx))


def json_param(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
