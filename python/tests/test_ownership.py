"""Write ownership of a thread, one clause a test: a saver that offers it
refuses, observably and atomically with the write, a write from a
superseded owner (LangGraph's write-ownership proposal: two writers on one
parent, one takes the thread over, both commit; the stale one is refused
and the thread keeps one lineage)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from graph import answer, compile_graph
from hxstate.errors import OwnerSuperseded
from hxstate.langgraph import HxSaver
from hxstate.langgraph.aio import AsyncHxSaver
from test_bugs import racing

SCHEMA = "lg_owners"


@pytest.fixture
def saver(dsn: str) -> Iterator[HxSaver]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        s = HxSaver(conn, schema=SCHEMA)
        s.setup()
        yield s


def thread() -> str:
    return f"owned-{uuid.uuid4()}"


def config(thread_id: str, token: str | None = None, **more: Any) -> Any:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": "", **more}
    if token is not None:
        conf["hx_owner"] = token
    return {"configurable": conf}


def put(saver: HxSaver, cfg: Any, n: int, values: dict[str, Any] | None = None) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = values or {"n": n}
    cp["channel_versions"] = {ch: n for ch in cp["channel_values"]}
    return saver.put(cfg, cp, {"source": "loop", "step": n}, dict(cp["channel_versions"]))


def counts(saver: HxSaver, thread_id: str) -> tuple[int, int, int]:
    conn: Any = saver.conn
    return (
        conn.execute(f"SELECT count(*) FROM {SCHEMA}.checkpoints WHERE thread_id = %s", (thread_id,)).fetchone()[0],
        conn.execute(f"SELECT count(*) FROM {SCHEMA}.writes WHERE thread_id = %s", (thread_id,)).fetchone()[0],
        conn.execute("SELECT count(*) FROM hx_event WHERE stream = %s", (f"@{SCHEMA}:{thread_id}",)).fetchone()[0],
    )


def test_1_acquire_gives_a_token_whose_writes_go_through(saver: HxSaver) -> None:
    t = thread()
    token = saver.acquire(t)
    assert token.startswith("1-") and saver.owner_epoch(t) == 1
    c1 = put(saver, config(t, token), 1)
    saver.put_writes({**c1, "configurable": {**c1["configurable"], "hx_owner": token}}, [("n", 2)], "task")
    assert counts(saver, t)[:2] == (1, 1)


def test_2_a_thread_nobody_took_is_written_as_before(saver: HxSaver) -> None:
    t = thread()
    put(saver, config(t), 1)
    assert saver.owner_epoch(t) is None and counts(saver, t)[0] == 1


def test_3_a_superseded_owners_put_is_refused_and_writes_nothing(saver: HxSaver) -> None:
    t = thread()
    a = saver.acquire(t)
    c1 = put(saver, config(t, a), 1)
    b = saver.acquire(t)
    assert b.startswith("2-") and saver.owner_epoch(t) == 2
    before = counts(saver, t)
    with pytest.raises(OwnerSuperseded) as e:
        put(saver, config(t, a, checkpoint_id=c1["configurable"]["checkpoint_id"]), 2)
    assert e.value.sqlstate == "55000"
    assert str(e.value).startswith(f"thread {t!r} is owned by another writer (epoch 2): this writer's ownership was superseded")
    assert counts(saver, t) == before


def test_4_a_superseded_owners_writes_are_refused(saver: HxSaver) -> None:
    t = thread()
    a = saver.acquire(t)
    c1 = put(saver, config(t, a), 1)
    saver.acquire(t)
    stale = {"configurable": {**c1["configurable"], "hx_owner": a}}
    for writes in ([("n", 5)], [("__interrupt__", "ask"), ("n", 6)]):
        with pytest.raises(OwnerSuperseded):
            saver.put_writes(stale, writes, f"task-{len(writes)}")
    assert counts(saver, t)[1] == 0


def test_5_the_new_owner_writes(saver: HxSaver) -> None:
    t = thread()
    saver.acquire(t)
    b = saver.acquire(t)
    c1 = put(saver, config(t, b), 1)
    put(saver, config(t, b, checkpoint_id=c1["configurable"]["checkpoint_id"]), 2)
    assert counts(saver, t)[0] == 2


def test_6_two_writers_on_one_parent_one_takes_over_both_commit(dsn: str, saver: HxSaver) -> None:
    """Both runs read the same head; B takes the thread over; both go on:
    A is refused, B's run commits, and every checkpoint is on one lineage."""
    t = thread()
    a = saver.acquire(t)
    compile_graph([answer(1, "one")], saver, approval=False).invoke(
        {"messages": [HumanMessage("first", id="h1")]}, {"configurable": {"thread_id": t, "hx_owner": a}})
    barrier = threading.Barrier(2)
    outcome: dict[str, str] = {}
    tokens = {"A": a}

    def run(name: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as c:
            s = racing(HxSaver, barrier)(c, schema=SCHEMA)
            if name == "B":
                tokens["B"] = s.acquire(t)
            else:
                time.sleep(0.3)  # B takes the thread before A writes
            g = compile_graph([answer(2, f"reply to {name}")], s, approval=False)
            try:
                g.invoke({"messages": [HumanMessage(f"from {name}", id=f"h-{name}")]},
                         {"configurable": {"thread_id": t, "hx_owner": tokens[name]}})
                outcome[name] = "ok"
            except OwnerSuperseded:
                outcome[name] = "superseded"

    threads = [threading.Thread(target=run, args=(n,)) for n in ("A", "B")]
    for x in threads:
        x.start()
    for x in threads:
        x.join()
    assert outcome == {"A": "superseded", "B": "ok"}
    listed = {x.config["configurable"]["checkpoint_id"]: x for x in saver.list({"configurable": {"thread_id": t}})}
    head = saver.get_tuple({"configurable": {"thread_id": t, "checkpoint_ns": ""}})
    chain = set()
    while head is not None:
        chain.add(head.config["configurable"]["checkpoint_id"])
        head = listed.get(head.parent_config["configurable"]["checkpoint_id"]) if head.parent_config else None
    assert chain == set(listed)
    assert [m.content for m in saver.get_tuple({"configurable": {"thread_id": t}}).checkpoint["channel_values"]["messages"]][-2:] == [  # type: ignore[union-attr]
        "from B", "reply to B"]


def test_7_acquire_waits_for_a_write_under_way(dsn: str, saver: HxSaver) -> None:
    """A write that began before the acquire ends first (it commits as the
    old owner's), and a write after it is refused."""
    t = thread()
    a = saver.acquire(t)
    with psycopg.connect(dsn, autocommit=True) as c:
        with c.transaction():
            # a write of A's under way: it holds the thread's ownership lock shared
            c.execute("SELECT pg_advisory_xact_lock_shared(hashtext(%s), hashtext(%s))", (f"hxstate.langgraph.owner:{SCHEMA}", t))
            got: list[str] = []
            taker = threading.Thread(target=lambda: got.append(saver.acquire(t)))
            taker.start()
            time.sleep(0.5)
            assert not got  # waits for the write
        taker.join(10)
    assert got and got[0].startswith("2-")
    with pytest.raises(OwnerSuperseded):
        put(HxSaver(saver.conn, schema=SCHEMA), config(t, a), 1)


def test_8_release_then_the_released_token_is_refused(saver: HxSaver) -> None:
    t = thread()
    a = saver.acquire(t)
    c1 = put(saver, config(t, a), 1)
    assert saver.release(t, a) is True and saver.release(t, a) is False
    assert saver.owner_epoch(t) is None
    with pytest.raises(OwnerSuperseded, match="has no owner: this writer's ownership was released"):
        put(saver, config(t, a, checkpoint_id=c1["configurable"]["checkpoint_id"]), 2)
    # reads are not fenced
    assert saver.get_tuple(config(t)) is not None


def test_9_acquire_after_release(saver: HxSaver) -> None:
    t = thread()
    a = saver.acquire(t)
    saver.release(t, a)
    b = saver.acquire(t)
    assert b.startswith("1-") and b != a
    put(saver, config(t, b), 1)


def test_10_epochs_grow(saver: HxSaver) -> None:
    t = thread()
    epochs = []
    for _ in range(5):
        saver.acquire(t)
        epochs.append(saver.owner_epoch(t))
    assert epochs == [1, 2, 3, 4, 5]


def test_11_a_token_is_its_threads_only(saver: HxSaver) -> None:
    x, y = thread(), thread()
    ax = saver.acquire(x)
    saver.acquire(y)
    with pytest.raises(OwnerSuperseded):
        put(saver, config(y, ax), 1)
    # and on a thread nobody took, a token is refused too (it owns nothing there)
    with pytest.raises(OwnerSuperseded):
        put(saver, config(thread(), ax), 1)


def test_12_an_owned_thread_refuses_a_write_without_its_token(saver: HxSaver) -> None:
    t = thread()
    saver.acquire(t)
    with pytest.raises(OwnerSuperseded, match="is owned .epoch 1.: a write must carry its owner's token"):
        put(saver, config(t), 1)
    with pytest.raises(OwnerSuperseded):
        saver.put_writes(config(t, checkpoint_id="000001"), [("n", 1)], "task")


def test_13_the_token_is_not_stored(saver: HxSaver) -> None:
    t = thread()
    token = saver.acquire(t)
    compile_graph([answer(1, "one")], saver, approval=False).invoke(
        {"messages": [HumanMessage("first", id="h1")]}, {"configurable": {"thread_id": t, "hx_owner": token}})
    conn: Any = saver.conn
    stored = conn.execute(
        f"SELECT count(*) FROM {SCHEMA}.checkpoints WHERE thread_id = %s AND metadata::text LIKE %s", (t, f"%{token}%")
    ).fetchone()[0]
    assert stored == 0


def test_14_a_refused_write_publishes_nothing(saver: HxSaver) -> None:
    t = thread()
    a = saver.acquire(t)
    c1 = put(saver, config(t, a), 1, {"messages": [{"id": "m1", "text": "x"}]})
    events = counts(saver, t)[2]
    saver.acquire(t)
    with pytest.raises(OwnerSuperseded):
        put(saver, config(t, a, checkpoint_id=c1["configurable"]["checkpoint_id"]), 2,
            {"messages": [{"id": "m1", "text": "x"}, {"id": "m2", "text": "y"}]})
    assert counts(saver, t)[2] == events


def test_15_ownership_is_the_databases_and_the_async_savers_too(dsn: str, saver: HxSaver) -> None:
    """A fresh saver (another process's) sees the owner; AsyncHxSaver
    acquires and is fenced alike."""
    import asyncio

    t = thread()
    a = saver.acquire(t)

    async def main() -> None:
        async with AsyncHxSaver.from_conn_string(dsn, schema=SCHEMA) as other:
            b = await other.aacquire(t)
            assert await other.aowner_epoch(t) == 2
            cp = empty_checkpoint()
            cp["channel_values"] = {"n": 1}
            cp["channel_versions"] = {"n": 1}
            with pytest.raises(OwnerSuperseded):
                await other.aput(config(t, a), cp, {"source": "loop", "step": 1}, {"n": 1})
            await other.aput(config(t, b), cp, {"source": "loop", "step": 1}, {"n": 1})
            assert await other.arelease(t, b)

    asyncio.run(main())
    assert HxSaver(saver.conn, schema=SCHEMA).owner_epoch(t) is None
