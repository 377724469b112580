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


@pytest.fixture(scope="session")
def dsn() -> Iterator[str]:
    with psycopg.connect(conninfo("postgres"), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB)))
    with psycopg.connect(conninfo(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION hxstate")
    yield conninfo()


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


@pytest.fixture
async def aconn(dsn: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        yield c
