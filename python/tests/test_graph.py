"""A real LangGraph graph on HxSaver and on PostgresSaver: a run, an
interrupt() for a human's approval and its resume, the history, a fork by
update_state on a past checkpoint, and streaming.  The two savers must give
equal states, histories and streams."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.types import Command

from graph import answer, chunks, compile_graph, history, snapshot, tool_call
from hxstate.langgraph import HxSaver
from hxstate.langgraph.aio import AsyncHxSaver


def replies() -> list[Any]:
    return [
        tool_call(1, 1, 2),
        answer(2, "1 + 2 = 3"),
        tool_call(3, 2, 2),  # after the fork
        answer(4, "2 + 2 = 4"),
    ]


@pytest.fixture
def savers(dsn: str) -> Iterator[dict[str, Any]]:
    with psycopg.connect(dsn, autocommit=True) as c1, psycopg.connect(dsn, autocommit=True) as c2:
        hx = HxSaver(c1)
        hx.setup()
        pg = PostgresSaver(c2)  # type: ignore[arg-type]
        pg.setup()
        yield {"hx": hx, "pg": pg}


def scenario(saver: Any, thread: str) -> dict[str, Any]:
    """The whole scenario on one saver; returns what is compared."""
    graph = compile_graph(replies(), saver)
    cfg: Any = {"configurable": {"thread_id": thread}}
    out: dict[str, Any] = {}
    # a run, streamed, that stops at the approval
    out["stream1"] = chunks(
        graph.stream({"messages": [HumanMessage("what is 1 + 2?", id="h1")]}, cfg, stream_mode=["values", "updates"])
    )
    out["interrupted"] = snapshot(graph.get_state(cfg))
    # the human approves
    out["resumed"] = chunks(graph.stream(Command(resume="yes"), cfg, stream_mode="values"))
    out["state"] = snapshot(graph.get_state(cfg))
    out["history"] = history(graph, cfg)
    # a fork: the state after the model's first reply, edited
    past = [s for s in graph.get_state_history(cfg) if s.next == ("approve",)][0]
    fork_cfg = graph.update_state(past.config, {"messages": [HumanMessage("no: 2 + 2", id="h2")]}, as_node="tools")
    out["fork"] = snapshot(graph.get_state(fork_cfg))
    out["forked_run"] = chunks(graph.stream(None, fork_cfg, stream_mode="updates"))
    out["forked_resume"] = chunks(graph.stream(Command(resume="ok"), cfg, stream_mode="values"))
    out["final"] = snapshot(graph.get_state(cfg))
    out["final_history"] = history(graph, cfg)
    return out


def test_graph_equal_on_both_savers(savers: dict[str, Any]) -> None:
    hx = scenario(savers["hx"], "graph-1")
    pg = scenario(savers["pg"], "graph-1")
    for key in pg:
        assert hx[key] == pg[key], key
    # and the run did what the scenario says
    assert hx["interrupted"]["next"] == ("approve",)
    assert hx["interrupted"]["interrupts"][0]["interrupt"]["question"] == "run the tool?"
    msgs = hx["state"]["values"]["messages"]
    assert [m["type"] for m in msgs] == ["human", "ai", "human", "tool", "ai"]
    assert msgs[3]["content"] == "3" and msgs[-1]["content"] == "1 + 2 = 3"
    final = hx["final"]["values"]["messages"]
    assert [m["content"] for m in final][-3:] == ["approved: ok", "4", "2 + 2 = 4"]
    assert len(hx["final_history"]) > len(hx["history"])


def test_state_is_queryable_as_json(savers: dict[str, Any], dsn: str) -> None:
    """The thread's channel values are jsonb: SQL reads the messages."""
    scenario(savers["hx"], "graph-sql")
    with psycopg.connect(dsn) as c:
        rows = c.execute(
            """SELECT m ->> 'type', m ->> 'content'
                 FROM langgraph.checkpoints c,
                      jsonb_array_elements(langgraph.state_at(c.thread_id, c.checkpoint_ns, c.checkpoint_id) -> 'messages') m
                WHERE c.thread_id = 'graph-sql'
                  AND c.checkpoint_id = (SELECT max(checkpoint_id) FROM langgraph.checkpoints WHERE thread_id = 'graph-sql')"""
        ).fetchall()
    assert rows[0] == ("human", "what is 1 + 2?")
    assert rows[-1] == ("ai", "2 + 2 = 4")


async def ascenario(saver: Any, thread: str) -> dict[str, Any]:
    graph = compile_graph(replies(), saver)
    cfg: Any = {"configurable": {"thread_id": thread}}
    out: dict[str, Any] = {}
    out["stream1"] = [c async for c in graph.astream({"messages": [HumanMessage("what is 1 + 2?", id="h1")]}, cfg)]
    out["resumed"] = await graph.ainvoke(Command(resume="yes"), cfg)
    out["state"] = snapshot(await graph.aget_state(cfg))
    out["history"] = [snapshot(s) async for s in graph.aget_state_history(cfg)]
    from graph import normalize

    out["stream1"] = normalize(out["stream1"])
    out["resumed"] = normalize(out["resumed"])
    return out


async def test_async_graph_equal_on_both_savers(dsn: str) -> None:
    async with AsyncHxSaver.from_conn_string(dsn) as hx, AsyncPostgresSaver.from_conn_string(dsn) as pg:
        await hx.setup()
        await pg.setup()
        a = await ascenario(hx, "agraph-1")
        b = await ascenario(pg, "agraph-1")
    assert a == b
    assert a["state"]["values"]["messages"][-1]["content"] == "1 + 2 = 3"
