"""LangGraph's Postgres saver bugs #8796 and #8039, reproduced by one script
run against PostgresSaver and against HxSaver; the test prints what each
does and asserts it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver

from graph import answer, compile_graph
from hxstate.errors import ThreadConflict
from hxstate.langgraph import HxSaver
from paths import HERE, SRC



def racing(cls: type, barrier: threading.Barrier) -> type:
    """The saver class, with its first read of the thread's head held until
    the other writer has read it too: both runs start from the same head."""

    class Racing(cls):  # type: ignore[misc, valid-type]
        first = True

        def get_tuple(self, config: Any) -> Any:
            t = super().get_tuple(config)
            if self.first:
                self.first = False
                barrier.wait(timeout=30)
            return t

    return Racing


def two_writers(dsn: str, cls: type, thread: str) -> dict[str, Any]:
    """#8796: two runs on one thread at once.  Returns what happened."""
    with psycopg.connect(dsn, autocommit=True) as c:
        saver = cls(c)
        saver.setup()
        g = compile_graph([answer(1, "first")], saver, approval=False)
        g.invoke({"messages": [HumanMessage("hello", id="h0")]}, {"configurable": {"thread_id": thread}})
    barrier = threading.Barrier(2)
    outcome: dict[str, Any] = {}

    def run(name: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as c:
            g = compile_graph([answer(2, f"reply to {name}")], racing(cls, barrier)(c), approval=False)
            try:
                g.invoke({"messages": [HumanMessage(f"from {name}", id=f"h-{name}")]}, {"configurable": {"thread_id": thread}})
                outcome[name] = "ok"
            except ThreadConflict as e:
                outcome[name] = f"conflict: {e}"

    threads = [threading.Thread(target=run, args=(n,)) for n in ("A", "B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with psycopg.connect(dsn, autocommit=True) as c:
        saver = cls(c)
        listed = list(saver.list({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}))
        head = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        by_id = {t.config["configurable"]["checkpoint_id"]: t for t in listed}
        reachable = set()
        cur = head
        while cur is not None:
            cid = cur.config["configurable"]["checkpoint_id"]
            reachable.add(cid)
            cur = by_id.get(cur.parent_config["configurable"]["checkpoint_id"]) if cur.parent_config else None
        texts = [m.content for m in head.checkpoint["channel_values"]["messages"]]
    return {
        "runs": outcome,
        "checkpoints": len(listed),
        "unreachable": len(set(by_id) - reachable),
        "head_messages": texts,
    }


def test_8796_two_writers_on_one_thread(dsn: str) -> None:
    pg = two_writers(dsn, PostgresSaver, f"w-{uuid.uuid4()}")
    hx = two_writers(dsn, HxSaver, f"w-{uuid.uuid4()}")
    print(f"\n#8796 PostgresSaver: {pg}\n#8796 HxSaver: {hx}")
    # PostgresSaver: both runs succeed, the chain forks, and the checkpoints
    # of one run are committed but unreachable from the head
    assert pg["runs"] == {"A": "ok", "B": "ok"}
    assert pg["unreachable"] > 0
    # HxSaver: one run wins, the other gets a conflict it can retry, and
    # every committed checkpoint is on the head's chain
    assert sorted(v.split(":")[0] for v in hx["runs"].values()) == ["conflict", "ok"]
    assert hx["unreachable"] == 0
    winner = [k for k, v in hx["runs"].items() if v == "ok"][0]
    assert hx["head_messages"][-2:] == [f"from {winner}", f"reply to {winner}"]


def runtime(dsn: str, saver: str, thread: str, mode: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(SRC), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, str(HERE / "runtime.py"), dsn, saver, thread, mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def ordering(dsn: str, saver: str, mode: str) -> dict[str, Any]:
    """#8039: the step's put_writes is slow (as a loaded host makes it) and
    the runtime is killed (-9) right after the next checkpoint's put returns;
    then a fresh process resumes the thread."""
    thread = f"o-{uuid.uuid4()}"
    killed = runtime(dsn, saver, thread, mode)
    assert killed.returncode == -9, killed.stderr
    with psycopg.connect(dsn, autocommit=True) as c:
        durable = c.execute(
            "SELECT count(*) FROM py_effects WHERE thread = %s AND step = 'step2'", (thread,)
        ).fetchone()[0]  # type: ignore[index]
    resumed = runtime(dsn, saver, thread, "resume")
    assert resumed.returncode == 0, resumed.stderr
    with psycopg.connect(dsn, autocommit=True) as c:
        effects = dict(
            c.execute("SELECT step, count(*) FROM py_effects WHERE thread = %s GROUP BY step ORDER BY step", (thread,)).fetchall()
        )
    lines = dict(line.split("=", 1) for line in (killed.stdout + resumed.stdout).splitlines() if "=" in line)
    return {"effects": effects, "step2_effect_before_resume": durable, **lines}


SLOW_WRITES = """
-- step 2's writes take 300 ms to store, as under I/O or lock contention
CREATE OR REPLACE FUNCTION py_slow_pg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF position('step2' in encode(NEW.blob, 'escape')) > 0 THEN PERFORM pg_sleep(0.3); END IF;
    RETURN NEW;
END $$;
CREATE OR REPLACE FUNCTION py_slow_hx() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.value::text LIKE '%step2%' THEN PERFORM pg_sleep(0.3); END IF;
    RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER py_slow BEFORE INSERT ON checkpoint_writes FOR EACH ROW EXECUTE FUNCTION py_slow_pg();
CREATE OR REPLACE TRIGGER py_slow BEFORE INSERT ON langgraph.writes FOR EACH ROW EXECUTE FUNCTION py_slow_hx();
"""


def test_8039_writes_durable_before_the_checkpoint(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS py_effects (thread text, step text, at timestamptz DEFAULT now())")
        PostgresSaver(c).setup()  # type: ignore[arg-type]
        HxSaver(c).setup()
        c.execute(SLOW_WRITES)
    try:
        slow_server = {s: ordering(dsn, s, "kill-after-put") for s in ("pg", "hx")}
    finally:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("DROP TRIGGER py_slow ON checkpoint_writes; DROP TRIGGER py_slow ON langgraph.writes")
    late = {s: ordering(dsn, s, "kill-after-put-late-writes") for s in ("pg", "hx")}
    print(f"\n#8039 slow server: PostgresSaver {slow_server['pg']}\n#8039 slow server: HxSaver {slow_server['hx']}")
    print(f"#8039 late writes: PostgresSaver {late['pg']}\n#8039 late writes: HxSaver {late['hx']}")
    # the server is slow to store step 2's writes: both savers make the
    # checkpoint wait for them (PostgresSaver because one lock serialises all
    # its calls, even over a pool; HxSaver because a put waits for the
    # put_writes under way on its parent, over as many connections as it has)
    for r in slow_server.values():
        assert r["step2_writes_at_kill"] == "1"
    # the writes reach the saver after the put (LangGraph 1.2 submits both to
    # a thread pool and does not wait): with either saver the checkpoint is
    # durable first and the writes are lost with the process
    for r in late.values():
        assert r["step2_writes_at_kill"] == "0"
    # in all four, each step's effect happened once and the state is whole:
    # the checkpoint after step 2 carries step 2's result
    for r in [*slow_server.values(), *late.values()]:
        assert r["effects"] == {"step1": 1, "step2": 1, "step3": 1}
        assert r["final"] == "['step1', 'step2', 'step3']"
