"""Keys HxSaver cannot keep are refused before anything is written, with a
clear error: a thread id or namespace over 1,024 bytes, a checkpoint, task
or run id over 256 (ProgramLimitExceeded, 54000), a NUL or a lone
surrogate (InvalidParameterValue, 22023).  A thread id of 1,024 bytes
works, its stream too."""

from __future__ import annotations

import random
import string
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from graph import answer, compile_graph
from hxstate.errors import InvalidParameterValue, ProgramLimitExceeded
from hxstate.langgraph import HxSaver

SCHEMA = "lg_limits"


@pytest.fixture
def saver(dsn: str) -> Iterator[HxSaver]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        s = HxSaver(conn, schema=SCHEMA)
        s.setup()
        yield s


def put(saver: HxSaver, thread: str, *, ns: str = "", cid: str | None = None, run_id: str | None = None) -> Any:
    cp = empty_checkpoint()
    if cid is not None:
        cp["id"] = cid
    cp["channel_values"] = {"n": 1}
    cp["channel_versions"] = {"n": 1}
    md: Any = {"source": "input", "step": -1, **({"run_id": run_id} if run_id else {})}
    return saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ns}}, cp, md, {"n": 1})


def written(saver: HxSaver, thread: str) -> tuple[int, int]:
    conn: Any = saver.conn
    rows = conn.execute(f"SELECT count(*) FROM {SCHEMA}.checkpoints WHERE thread_id = %s", (thread,)).fetchone()[0]
    events = conn.execute("SELECT count(*) FROM hx_event WHERE stream = %s", (f"@{SCHEMA}:{thread}",)).fetchone()[0]
    return rows, events


def random_text(n: int) -> str:
    rng = random.Random(n)
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))


@pytest.mark.parametrize(
    "thread",
    ["x" * 9000, random_text(3000), "é" * 513],
    ids=["9000-compressible", "3000-random", "1026-bytes-of-utf8"],
)
def test_thread_ids_too_long(saver: HxSaver, thread: str) -> None:
    with pytest.raises(ProgramLimitExceeded) as e:
        put(saver, thread)
    n = len(thread.encode())
    assert e.value.sqlstate == "54000"
    assert str(e.value).startswith(f"a thread id of {n} bytes is longer than the 1024 bytes HxSaver stores")
    assert written(saver, thread) == (0, 0)


def test_the_longest_thread_id_works(saver: HxSaver) -> None:
    thread = random_text(1024)
    out = put(saver, thread)
    assert written(saver, thread) == (1, 1)
    t = saver.get_tuple(out)
    assert t is not None and t.checkpoint["channel_values"] == {"n": 1}
    graph = compile_graph([answer(1, "hi")], saver, approval=False)
    thread2 = random_text(1023) + "z"
    graph.invoke({"messages": [HumanMessage("hello", id="h1")]}, {"configurable": {"thread_id": thread2}})
    assert written(saver, thread2)[0] >= 2


def test_other_keys(saver: HxSaver) -> None:
    thread = f"keys-{uuid.uuid4()}"
    with pytest.raises(ProgramLimitExceeded, match="a checkpoint namespace of 1025 bytes"):
        put(saver, thread, ns="n" * 1025)
    with pytest.raises(ProgramLimitExceeded, match="a checkpoint id of 257 bytes is longer than the 256 bytes"):
        put(saver, thread, cid="c" * 257)
    with pytest.raises(ProgramLimitExceeded, match="a run id of 300 bytes"):
        put(saver, thread, run_id="r" * 300)
    with pytest.raises(InvalidParameterValue, match="a thread id cannot contain a NUL character") as e:
        put(saver, "a\x00b")
    assert e.value.sqlstate == "22023"
    with pytest.raises(InvalidParameterValue, match="must be Unicode text"):
        put(saver, "a\ud800b")
    out = put(saver, thread)
    with pytest.raises(ProgramLimitExceeded, match="a task id of 300 bytes"):
        saver.put_writes(out, [("n", 2)], "t" * 300)
    with pytest.raises(ProgramLimitExceeded, match="a thread id of 2000 bytes"):
        saver.copy_thread(thread, "x" * 2000)
    assert written(saver, thread) == (1, 1)
    conn: Any = saver.conn
    assert conn.execute(f"SELECT count(*) FROM {SCHEMA}.writes WHERE thread_id = %s", (thread,)).fetchone() == (0,)


def test_through_a_graph(saver: HxSaver) -> None:
    graph = compile_graph([answer(1, "hi")], saver, approval=False)
    thread = "t" * 5000
    with pytest.raises(ProgramLimitExceeded):
        graph.invoke({"messages": [HumanMessage("hello", id="h1")]}, {"configurable": {"thread_id": thread}})
    assert written(saver, thread) == (0, 0)
