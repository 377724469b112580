"""A runtime the tests kill: a three-step graph whose steps each record an
external effect (a committed row in py_effects), on PostgresSaver or HxSaver.

    python runtime.py DSN pg|hx THREAD kill-after-put[-late-writes]|kill-after-writes|resume

kill-after-put: the process kills itself (SIGKILL) as soon as the put of the checkpoint
after step 2 returns, printing how many of step 2's writes were durable then
(the test makes the server slow to store step 2's writes; with
-late-writes, step 2's put_writes reaches the saver 300 ms late instead).
resume: runs the thread to its end from where it is, printing the final log.
"""

from __future__ import annotations

import operator
import os
import signal
import time
import sys
from typing import Annotated, Any, TypedDict

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from hxstate.langgraph import HxSaver

dsn, which, thread, mode = sys.argv[1:5]


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def step(name: str) -> Any:
    def node(state: State) -> dict[str, Any]:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("INSERT INTO py_effects (thread, step) VALUES (%s, %s)", (thread, name))
        return {"log": [name]}

    return node


base: Any = PostgresSaver if which == "pg" else HxSaver
writes_sql = (
    "SELECT count(*) FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_id = %s AND channel = 'log'"
    if which == "pg"
    else "SELECT count(*) FROM langgraph.writes WHERE thread_id = %s AND checkpoint_id = %s AND channel = 'log'"
)


class Saver(base):  # type: ignore[misc, valid-type]
    step2_at: str | None = None

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        if mode.startswith("kill-after-put") and ("log", ["step2"]) in list(writes):
            Saver.step2_at = config["configurable"]["checkpoint_id"]
            if mode == "kill-after-put-late-writes":
                time.sleep(0.3)  # the thread reaches the saver late
        super().put_writes(config, writes, task_id, task_path)
        if mode == "kill-after-writes" and ("log", ["step2"]) in list(writes):
            print("step2_writes_acknowledged=1", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        result = super().put(config, checkpoint, metadata, new_versions)
        parent = config["configurable"].get("checkpoint_id")
        if mode.startswith("kill-after-put") and parent is not None and parent == Saver.step2_at:
            with psycopg.connect(dsn, autocommit=True) as c:
                n = c.execute(writes_sql, (thread, parent)).fetchone()[0]  # type: ignore[index]
            print(f"step2_writes_at_kill={n}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return result


g = StateGraph(State)
for name in ("step1", "step2", "step3"):
    g.add_node(name, step(name))
g.add_edge(START, "step1")
g.add_edge("step1", "step2")
g.add_edge("step2", "step3")
g.add_edge("step3", END)

# a pool, as servers run savers: writes and puts go over connections of
# their own (with one connection, its lock would serialise them)
with ConnectionPool(dsn, min_size=2, max_size=4, kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}) as pool:
    saver = Saver(pool)
    if which == "hx":
        saver.setup(allowed_triggers=["py_slow"])  # the test's trigger that slows step 2's writes
    else:
        saver.setup()
    graph = g.compile(checkpointer=saver)
    cfg: Any = {"configurable": {"thread_id": thread}}
    if mode.startswith("kill-after"):
        graph.invoke({"log": []}, cfg, durability="sync")
    else:
        out = graph.invoke(None, cfg, durability="sync")
        print(f"final={out['log']}", flush=True)
