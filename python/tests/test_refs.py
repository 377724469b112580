"""A run's input is stored once: the ``__start__`` task writes the input
that its checkpoint's state holds already (LangGraph's ``__start__``
channel), and that write is stored as a reference to it.  It reads back
as the value written (warm, cold, in list() and in another process's
retry); a reference its checkpoint's state does not hold is an error,
not a wrong value."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from graph import answer, compile_graph
from hxstate.errors import DataCorrupted, NonDeterministicRetry
from hxstate.langgraph import HxSaver

SCHEMA = "lg_refs"


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as c:
        HxSaver(c, schema=SCHEMA).setup()
        yield c


def stored(conn: psycopg.Connection[Any], thread_id: str) -> list[tuple[str, Any, bool]]:
    return [
        (r[0], r[1], r[2])
        for r in conn.execute(
            f"SELECT channel, value, packed IS NOT NULL FROM {SCHEMA}.writes WHERE thread_id = %s ORDER BY checkpoint_id, idx",
            (thread_id,),
        ).fetchall()
    ]


def input_checkpoint(saver: HxSaver, thread_id: str, messages: list[Any]) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"__start__": {"messages": messages}}
    cp["channel_versions"] = {"__start__": 1}
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return saver.put(config, cp, {"source": "input", "step": -1}, {"__start__": 1})


def test_the_start_tasks_write_is_a_reference(conn: psycopg.Connection[Any]) -> None:
    saver = HxSaver(conn, schema=SCHEMA)
    thread_id = f"refs-{uuid.uuid4()}"
    text = "a long question " * 100
    config = input_checkpoint(saver, thread_id, [HumanMessage(text, id="h-1")])
    saver.put_writes(config, [("messages", [HumanMessage(text, id="h-1")]), ("other", [1, 2])], "task-1", "__start__")
    rows = stored(conn, thread_id)
    assert rows[0] == ("messages", {"$hx": "state", "path": "/__start__/messages"}, False)
    assert rows[1] == ("other", [1, 2], False)  # not in __start__: stored as it is
    for reader in (saver, HxSaver(conn, schema=SCHEMA)):  # warm, then cold
        t = reader.get_tuple(config)
        assert t is not None
        assert [(task, ch, v) for task, ch, v in t.pending_writes] == [
            ("task-1", "messages", [HumanMessage(text, id="h-1")]),
            ("task-1", "other", [1, 2]),
        ]
    listed = list(HxSaver(conn, schema=SCHEMA).list({"configurable": {"thread_id": thread_id}}))
    assert listed[0].pending_writes[0][2] == [HumanMessage(text, id="h-1")]
    # a retry from a process that does not remember the checkpoint: the same values pass
    HxSaver(conn, schema=SCHEMA).put_writes(config, [("messages", [HumanMessage(text, id="h-1")]), ("other", [1, 2])], "task-1")
    with pytest.raises(NonDeterministicRetry):
        HxSaver(conn, schema=SCHEMA).put_writes(config, [("messages", [HumanMessage("else", id="h-1")])], "task-1")


def test_a_value_unlike_the_input_is_stored_whole(conn: psycopg.Connection[Any]) -> None:
    saver = HxSaver(conn, schema=SCHEMA)
    thread_id = f"refs-{uuid.uuid4()}"
    config = input_checkpoint(saver, thread_id, [HumanMessage("hi", id="h-1")])
    saver.put_writes(config, [("messages", [HumanMessage("hi there", id="h-1")])], "task-1")
    assert stored(conn, thread_id)[0][1][0]["content"] == "hi there"


def test_a_graphs_input_is_stored_once(conn: psycopg.Connection[Any]) -> None:
    saver = HxSaver(conn, schema=SCHEMA)
    graph = compile_graph([answer(1, "4")], saver, approval=False)
    thread_id = f"refs-{uuid.uuid4()}"
    config: Any = {"configurable": {"thread_id": thread_id}}
    graph.invoke({"messages": [HumanMessage("what is 2 + 2? " * 50, id="h-1")]}, config)
    kept = conn.execute(
        f"SELECT count(*) FROM {SCHEMA}.writes WHERE thread_id = %s AND value::text LIKE '%%\"$hx\":\"state\"%%'",
        (thread_id,),
    ).fetchone()
    assert kept is not None and kept[0] == 1
    # the history reads back whole, cold
    fresh = compile_graph([], HxSaver(conn, schema=SCHEMA), approval=False)
    history = list(fresh.get_state_history(config))
    assert [m.content for m in history[0].values["messages"]][0] == "what is 2 + 2? " * 50
    first = history[-1]
    assert first.tasks and first.tasks[0].name == "__start__"


def test_a_reference_the_state_does_not_hold_is_refused(conn: psycopg.Connection[Any]) -> None:
    saver = HxSaver(conn, schema=SCHEMA)
    thread_id = f"refs-{uuid.uuid4()}"
    config = input_checkpoint(saver, thread_id, [AIMessage("x", id="a-1")])
    saver.put_writes(config, [("messages", [AIMessage("x", id="a-1")])], "task-1")
    conn.execute(
        f"""UPDATE {SCHEMA}.writes SET value = '{{"$hx": "state", "path": "/__start__/nothing"}}' WHERE thread_id = %s""",
        (thread_id,),
    )
    with pytest.raises(DataCorrupted, match="does not hold"):
        HxSaver(conn, schema=SCHEMA).get_tuple(config)
