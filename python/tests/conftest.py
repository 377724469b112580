"""The tests run against a real server: the one the libpq environment names
(PGHOST, PGPORT, PGUSER), as the Node tests do.  Each session makes a fresh
database with hxstate in it (HX_PY_DB, default hxstate_py)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

DB = os.environ.get("HX_PY_DB", "hxstate_py")


def conninfo(dbname: str = DB) -> str:
    return psycopg.conninfo.make_conninfo("", dbname=dbname)


# hx_stream_send(stream, event) is being added to hxstate 0.6.0: until the
# extension under test has it, the tests define a stand-in with its contract
# (the next seq of a stream that has no row, the event logged with its
# metadata, a reference NOTIFY, a lock per stream)
STAND_IN = """
CREATE FUNCTION hx_stream_send(p_stream text, p_event jsonb) RETURNS bigint
LANGUAGE plpgsql SET search_path = public, pg_catalog AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('hx_stream_send'), hashtext(p_stream));
    SELECT coalesce(max(seq), 0) + 1 INTO n FROM hx_event WHERE stream = p_stream;
    INSERT INTO hx_event (stream, seq, type, event, created_at)
    VALUES (p_stream, n, p_event ->> 'type',
            p_event || jsonb_build_object('timestamp', (extract(epoch FROM now()) * 1000)::bigint,
                                          'metadata', jsonb_build_object('stream', p_stream, 'seq', n)),
            now());
    PERFORM pg_notify(hx_stream_channel(p_stream),
                      jsonb_build_object('ref', true, 'seq', n, 'type', p_event ->> 'type', 'stream', p_stream)::text);
    RETURN n;
END
$$
"""


@pytest.fixture(scope="session")
def dsn() -> Iterator[str]:
    with psycopg.connect(conninfo("postgres"), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB)))
    with psycopg.connect(conninfo(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION hxstate")
        has_send = conn.execute("SELECT to_regprocedure('hx_stream_send(text,jsonb)') IS NOT NULL").fetchone()[0]  # type: ignore[index]
        if not has_send:
            conn.execute(STAND_IN)
    yield conninfo()


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


@pytest.fixture
async def aconn(dsn: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        yield c
