"""Time travel: a run from an older checkpoint, asked for by its id ("edit
an earlier message and regenerate"), branches from it, as LangGraph
documents and PostgresSaver does; two runs racing from a thread's head
still never both commit (one gets ThreadConflict), also when they name
the head by its id."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver

from graph import answer, compile_graph
from hxstate.errors import ThreadConflict
from hxstate.langgraph import HxSaver
from hxstate.langgraph.put import FORK_KEY
from test_bugs import racing


def conversation(saver: Any, thread: str) -> tuple[Any, dict[str, Any]]:
    """Two turns; returns the graph and the config of the head after the
    first (before the second question)."""
    graph = compile_graph([answer(1, "one"), answer(2, "two"), answer(3, "two, again")], saver, approval=False)
    cfg: Any = {"configurable": {"thread_id": thread}}
    graph.invoke({"messages": [HumanMessage("first", id="h1")]}, cfg)
    after_first = graph.get_state(cfg).config
    graph.invoke({"messages": [HumanMessage("second", id="h2")]}, cfg)
    return graph, after_first


def edit_and_regenerate(saver: Any, thread: str) -> dict[str, Any]:
    graph, after_first = conversation(saver, thread)
    cfg: Any = {"configurable": {"thread_id": thread}}
    before = {s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(cfg)}
    # the second question, edited, sent again from where it was asked
    past = graph.get_state(after_first)
    graph.invoke({"messages": [HumanMessage("second, edited", id="h2")]}, past.config)
    head = graph.get_state(cfg)
    history = {s.config["configurable"]["checkpoint_id"]: s for s in graph.get_state_history(cfg)}
    chain = []
    at: Any = head
    while at is not None:
        chain.append(at.config["configurable"]["checkpoint_id"])
        at = history.get(at.parent_config["configurable"]["checkpoint_id"]) if at.parent_config else None
    return {
        "messages": [(m.type, m.content) for m in head.values["messages"]],
        # the new branch: from the checkpoint asked for, the head now
        "branch": len(chain[: chain.index(after_first["configurable"]["checkpoint_id"])]),
        # the old branch is kept
        "kept": before <= set(history),
        "checkpoints": len(history) - len(before),
    }


def test_edit_an_earlier_message_and_regenerate(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        pg_saver = PostgresSaver(conn)  # type: ignore[arg-type]
        pg_saver.setup()
        hx_saver = HxSaver(conn)
        hx_saver.setup()
        pg = edit_and_regenerate(pg_saver, f"fork-pg-{uuid.uuid4()}")
        hx_thread = f"fork-hx-{uuid.uuid4()}"
        hx = edit_and_regenerate(hx_saver, hx_thread)
        # the config's key is the saver's, not stored in the metadata
        assert conn.execute("SELECT count(*) FROM langgraph.checkpoints WHERE thread_id = %s AND metadata ? %s",
                            (hx_thread, FORK_KEY)).fetchone() == (0,)
    assert hx == pg
    assert hx["messages"] == [("human", "first"), ("ai", "one"), ("human", "second, edited"), ("ai", "two, again")]
    # every checkpoint of the run is on the new branch, from the one asked for; the old branch is kept
    assert hx["branch"] == hx["checkpoints"] >= 2 and hx["kept"]


def test_the_fork_is_named_only_for_a_superseded_checkpoint(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        saver = HxSaver(conn)
        saver.setup()
        thread = f"fork-key-{uuid.uuid4()}"
        graph, after_first = conversation(saver, thread)
        past = saver.get_tuple(after_first)
        assert past is not None and past.config["configurable"][FORK_KEY] == after_first["configurable"]["checkpoint_id"]
        head = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        assert head is not None and FORK_KEY not in head.config["configurable"]
        by_id = saver.get_tuple(head.config)
        assert by_id is not None and FORK_KEY not in by_id.config["configurable"]


def race(dsn: str, thread: str, config_of: Any) -> dict[str, str]:
    """Two runs on the thread at once, each from the checkpoint config_of
    gives, their reads of it held until both have read."""
    barrier = threading.Barrier(2)
    outcome: dict[str, str] = {}

    def run(name: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as c:
            g = compile_graph([answer(9, f"reply to {name}")], racing(HxSaver, barrier)(c), approval=False)
            try:
                g.invoke({"messages": [HumanMessage(f"from {name}", id=f"h-{name}")]}, config_of())
                outcome[name] = "ok"
            except ThreadConflict as e:
                outcome[name] = f"conflict: {e}"

    threads = [threading.Thread(target=run, args=(n,)) for n in ("A", "B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcome


def test_two_runs_from_the_head_named_by_id_still_conflict(dsn: str) -> None:
    """A run that names the head by its id (as LangGraph Studio does with a
    resume) means to continue it: a second writer that moved the thread
    on meanwhile is a conflict, not a fork."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        saver = HxSaver(conn)
        saver.setup()
        thread = f"fork-race-{uuid.uuid4()}"
        compile_graph([answer(1, "one")], saver, approval=False).invoke(
            {"messages": [HumanMessage("first", id="h1")]}, {"configurable": {"thread_id": thread}})
        head = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        assert head is not None
        outcome = race(dsn, thread, lambda: {"configurable": {"thread_id": thread, "checkpoint_id": head.config["configurable"]["checkpoint_id"]}})
        assert sorted(v.split(":")[0] for v in outcome.values()) == ["conflict", "ok"]
        lost = next(v for v in outcome.values() if v != "ok")
        assert "was written after this run read it (another run on the thread)" in lost
        # every committed checkpoint is on the head's chain
        listed = {t.config["configurable"]["checkpoint_id"]: t for t in saver.list({"configurable": {"thread_id": thread}})}
        cur = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        chain = set()
        while cur is not None:
            chain.add(cur.config["configurable"]["checkpoint_id"])
            cur = listed.get(cur.parent_config["configurable"]["checkpoint_id"]) if cur.parent_config else None
        assert chain == set(listed)


def test_two_forks_from_one_past_checkpoint_both_branch(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        saver = HxSaver(conn)
        saver.setup()
        thread = f"fork-two-{uuid.uuid4()}"
        _, after_first = conversation(saver, thread)
        outcome = race(dsn, thread, lambda: dict(after_first))
        assert outcome == {"A": "ok", "B": "ok"}
