"""list() is lazy: it reads a page of checkpoints at a time and decodes a
state only when its tuple is handed out, so paging through a long
thread's history (get_state_history) holds about one state, not all of
them."""

from __future__ import annotations

import gc
import random
import tracemalloc
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from hxstate.langgraph import HxSaver

SCHEMA = "lg_history"


@pytest.fixture
def thread(dsn: str) -> Iterator[tuple[psycopg.Connection[Any], Any]]:
    """A thread of 200 checkpoints, each adding a message of 1 kB."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        saver = HxSaver(conn, schema=SCHEMA)
        saver.setup()
        rng = random.Random(1)
        words = "state agent tool call message model thread checkpoint stream event delta snapshot".split()
        thread_id = f"history-{uuid.uuid4()}"
        config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        messages: list[dict[str, Any]] = []
        for i in range(200):
            messages = messages + [{"id": f"m{i}", "type": "note", "text": " ".join(rng.choice(words) for _ in range(150))}]
            cp = empty_checkpoint()
            cp["channel_values"] = {"messages": messages}
            cp["channel_versions"] = {"messages": i + 1}
            config = saver.put(config, cp, {"source": "loop", "step": i}, {"messages": i + 1})
        yield conn, config


def peak(fn: Any) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_paging_through_a_long_history_holds_about_one_state(thread: tuple[psycopg.Connection[Any], Any]) -> None:
    conn, head = thread
    one = peak(lambda: HxSaver(conn, schema=SCHEMA).get_tuple(head))
    seen = []

    def page_through() -> None:
        for t in HxSaver(conn, schema=SCHEMA).list({"configurable": {"thread_id": head["configurable"]["thread_id"]}}):
            seen.append(len(t.checkpoint["channel_values"]["messages"]))

    whole = peak(page_through)
    assert seen == list(range(200, 0, -1))
    # the whole history of 200 states in memory at once would be 100 times one
    assert whole < 4 * one, (whole, one)


def test_the_first_page_comes_first(thread: tuple[psycopg.Connection[Any], Any]) -> None:
    """A client that wants the newest few pays for a page, not the thread."""
    conn, head = thread
    one = peak(lambda: HxSaver(conn, schema=SCHEMA).get_tuple(head))
    first: list[Any] = []
    saver = HxSaver(conn, schema=SCHEMA)
    cost = peak(lambda: first.append(next(iter(saver.list({"configurable": {"thread_id": head["configurable"]["thread_id"]}})))))
    assert first[0].config["configurable"]["checkpoint_id"] == head["configurable"]["checkpoint_id"]
    assert cost < 4 * one, (cost, one)
