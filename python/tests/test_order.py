"""The order of an object's keys is kept, as PostgresSaver's msgpack keeps
it: in channel values read back cold across snapshots (jsonb sorts keys:
the saver stores its state as json), after prune and delete_for_runs, in
pending writes and in interrupt payloads; a value whose keys only changed
order is stored as changed."""

from __future__ import annotations

import operator
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from hxstate.langgraph import HxSaver

SCHEMA = "lg_order"


def plan(i: int) -> dict[str, Any]:
    """Keys in no sorted order (jsonb would put "b" first, by length)."""
    return {"zeta": i, "alpha": {"yy": [1, {"q": 1, "b": 2}], "a": "x" * 200}, "mid": None, "b": True}


def keys(v: Any) -> Any:
    """The keys of every object, in order, all the way down."""
    if isinstance(v, dict):
        return [(k, keys(x)) for k, x in v.items()]
    if isinstance(v, list):
        return [keys(x) for x in v]
    return None


@pytest.fixture
def saver(dsn: str) -> Iterator[HxSaver]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        s = HxSaver(conn, schema=SCHEMA, snapshot_min_bytes=1024, rebuild_factor=1)
        s.setup()
        yield s


def put(saver: HxSaver, parent: Any, thread: str, n: int, values: dict[str, Any], **md: Any) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = values
    cp["channel_versions"] = {ch: n for ch in values}
    config = parent or {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return saver.put(config, cp, {"source": "loop", "step": n, **md}, dict(cp["channel_versions"]))


def cold(saver: HxSaver, config: Any) -> Any:
    t = HxSaver(saver.conn, schema=SCHEMA).get_tuple(config)
    assert t is not None
    return t


def test_key_order_across_snapshots_prune_and_writes(saver: HxSaver) -> None:
    thread = f"order-{uuid.uuid4()}"
    cfg = None
    configs = []
    for i in range(30):  # many snapshots: 1 kB each way
        cfg = put(saver, cfg, thread, i + 1, {"plan": plan(i), "log": [plan(j) for j in range(i)]}, run_id=f"r{i // 10}")
        configs.append(cfg)
    snapshots = saver.conn.execute(  # type: ignore[union-attr]
        f"SELECT count(*) FROM {SCHEMA}.checkpoints WHERE thread_id = %s AND snapshot IS NOT NULL", (thread,)
    ).fetchone()[0]
    assert snapshots >= 3
    for i, c in enumerate(configs):
        values = cold(saver, c).checkpoint["channel_values"]
        assert keys(values["plan"]) == keys(plan(i)) and keys(values["log"]) == keys([plan(j) for j in range(i)]), i
    # only the order changed: stored as a change
    reordered = dict(reversed(list(plan(99).items())))
    cfg = put(saver, cfg, thread, 40, {"plan": reordered, "log": []}, run_id="r9")
    assert keys(cold(saver, cfg).checkpoint["channel_values"]["plan"]) == keys(reordered)
    # a pending write
    saver.put_writes(cfg, [("plan", plan(7)), ("log", [plan(8)] * 20)], "task-1")
    pending = {ch: v for _, ch, v in cold(saver, cfg).pending_writes}
    assert keys(pending["plan"]) == keys(plan(7)) and keys(pending["log"]) == keys([plan(8)] * 20)
    # rebuilt as snapshots by delete_for_runs and prune
    saver.delete_for_runs(["r0"])
    assert keys(cold(saver, configs[15]).checkpoint["channel_values"]["plan"]) == keys(plan(15))
    saver.prune([thread])
    assert keys(cold(saver, {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}).checkpoint["channel_values"]["plan"]) == keys(reordered)


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def asks(state: State) -> dict[str, Any]:
    answer = interrupt({"zeta": "last", "alpha": {"z": 1, "a": 2}, "question": "go on?"})
    return {"log": [str(answer)]}


def interrupted(saver: Any, thread: str) -> list[Any]:
    g = StateGraph(State)
    g.add_node("asks", asks)
    g.add_edge(START, "asks")
    g.add_edge("asks", END)
    graph = g.compile(checkpointer=saver)
    cfg: Any = {"configurable": {"thread_id": thread}}
    graph.invoke({"log": []}, cfg)
    fresh = g.compile(checkpointer=type(saver)(saver.conn, **({"schema": SCHEMA} if isinstance(saver, HxSaver) else {})))
    value = fresh.get_state(cfg).interrupts[0].value
    graph.invoke(Command(resume="yes"), cfg)
    return [keys(value), fresh.get_state(cfg).values["log"]]


def test_key_order_of_interrupt_payloads(saver: HxSaver) -> None:
    pg = PostgresSaver(saver.conn)  # type: ignore[arg-type]
    pg.setup()
    assert interrupted(saver, f"order-i-{uuid.uuid4()}") == interrupted(pg, f"order-i-{uuid.uuid4()}") == [
        [("zeta", None), ("alpha", [("z", None), ("a", None)]), ("question", None)], ["yes"]]
