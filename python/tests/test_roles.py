"""docs/langgraph.md's roles, as written ("Roles and the log"): the saver's
role has INSERT on the log, confined by a policy to its own streams, and
nothing else on it; a reader follows its threads.  The saver works with
that alone (setup, a run with an interrupt and its resume, deletes,
copies, prunes), the reader follows it, and the saver's role cannot write
any other stream, nor read the log."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command
from psycopg import sql

from graph import answer, compile_graph, tool_call
from hxstate import aio
from hxstate.errors import InsufficientPrivilege, InvalidParameterValue, errors
from hxstate.langgraph import HxSaver
from paths import TOP
from test_stream import expected

DB = "hxstate_py_roles"
ROLES = ("lg_saver", "lg_reader")


def recipe() -> str:
    text = (TOP / "docs" / "langgraph.md").read_text()
    found = re.findall(r"<!-- langgraph-roles:[^>]*-->\n```sql\n(.*?)```", text, re.S)
    assert len(found) == 1
    return str(found[0])


def drop(admin: psycopg.Connection[Any]) -> None:
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB)))
    for r in ROLES:
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(r)))


@pytest.fixture
def db(dsn: str) -> Iterator[str]:
    """A database of its own (the recipe turns on the log's row-level
    security), with hxstate, and the recipe run as written."""
    admin_dsn = psycopg.conninfo.make_conninfo(dsn, dbname="postgres")
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        drop(admin)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB)))
    db_dsn = psycopg.conninfo.make_conninfo(dsn, dbname=DB)
    with psycopg.connect(db_dsn, autocommit=True) as owner:
        owner.execute("CREATE EXTENSION hxstate")
        owner.execute(recipe())
    yield db_dsn
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        drop(admin)


def as_role(dsn: str, role: str) -> str:
    return psycopg.conninfo.make_conninfo(dsn, user=role)


async def test_the_saver_with_the_recipes_roles(db: str) -> None:
    saver_dsn, reader_dsn = as_role(db, "lg_saver"), as_role(db, "lg_reader")
    thread = f"roles-{uuid.uuid4()}"
    cfg: Any = {"configurable": {"thread_id": thread}}
    with psycopg.connect(saver_dsn, autocommit=True) as conn:
        saver = HxSaver(conn)
        saver.setup()
        graph = compile_graph([tool_call(1, 1, 2), answer(2, "3")], saver)
        f = aio.follow(reader_dsn, source="langgraph.threads", key=thread, poll_interval=0.1)
        it = f.__aiter__()
        async with asyncio.timeout(60):
            await anext(it)

            def head() -> int:
                with psycopg.connect(reader_dsn, autocommit=True) as r:
                    return int(r.execute("SELECT seq FROM langgraph.threads(ARRAY[%s])", (thread,)).fetchone()[0])  # type: ignore[index]

            async def caught_up() -> Any:
                while f.seq != head():
                    await anext(it)
                return f.state

            await asyncio.to_thread(graph.invoke, {"messages": [HumanMessage("1 + 2?", id="h1")]}, cfg)
            state = graph.get_state(cfg)
            assert state.interrupts and await caught_up() == expected(state)
            await asyncio.to_thread(graph.invoke, Command(resume="yes"), cfg)
            assert await caught_up() == expected(graph.get_state(cfg))
            # copy, prune, delete_for_runs, delete: each tells the streams
            saver.copy_thread(thread, thread + "-copy")
            saver.prune([thread + "-copy"])
            run_id = next(iter(saver.list(cfg))).metadata.get("run_id")
            saver.delete_for_runs([run_id])
            saver.delete_thread(thread)
            end, gone = await anext(it)
            while not f.ended:
                end, gone = await anext(it)
            assert end["name"] == "hx.stream_end" and gone is None
            saver.delete_thread(thread)  # nothing left: no second end
            assert head() == end["metadata"]["seq"]
        await f.close()


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT hx_stream_send('@other:t', '{\"type\": \"STATE_SNAPSHOT\", \"snapshot\": {}}')",
        "SELECT hx_stream_send('@langgraphs:t', '{\"type\": \"STATE_SNAPSHOT\", \"snapshot\": {}}')",
        "SELECT hx_stream_send('@langgraph', '{\"type\": \"STATE_SNAPSHOT\", \"snapshot\": {}}')",
        "INSERT INTO hx_event (stream, seq, event) VALUES ('@other:t', 1, '{\"type\": \"STATE_SNAPSHOT\", \"snapshot\": {}}')",
        "SELECT count(*) FROM hx_event",
    ],
    ids=["send-other", "send-longer-prefix", "send-no-colon", "insert-other", "read"],
)
def test_the_savers_role_has_its_own_streams_only(db: str, statement: str) -> None:
    with psycopg.connect(as_role(db, "lg_saver"), autocommit=True) as conn:
        HxSaver(conn).setup()
        with pytest.raises(InsufficientPrivilege), errors():
            conn.execute(statement)
        # a table's stream name is no log stream at all
        with pytest.raises(InvalidParameterValue), errors():
            conn.execute("SELECT hx_stream_send('sessions:s-1', '{\"type\": \"STATE_SNAPSHOT\", \"snapshot\": {}}')")
        # its own: yes
        seq = conn.execute("SELECT hx_stream_send('@langgraph:mine', '{\"type\": \"STATE_SNAPSHOT\", \"snapshot\": {}}')").fetchone()
        assert seq is not None and seq[0] >= 1
