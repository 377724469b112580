"""A thread checkpointed by HxSaver, followed live from its log stream (the
saver publishes each checkpoint of the root namespace with hx_stream_send):
at every step the state followed equals graph.get_state()."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import psycopg
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from graph import answer, compile_graph, tool_call
from hxstate.aio import follow
from hxstate.langgraph import HxSaver


def expected(snapshot: Any) -> dict[str, Any]:
    """What a follower sees of a StateSnapshot: its values as JSON, and its
    interrupts at __interrupt__."""
    # (a channel the graph never wrote is not in the thread's state, where
    # get_state shows its empty default: only the input checkpoint of a new
    # thread has one)
    out: dict[str, Any] = {
        k: [m.model_dump() for m in v] if k == "messages" else v
        for k, v in snapshot.values.items()
        if not (v == [] and snapshot.metadata.get("step") == -1)
    }
    if snapshot.interrupts:
        out["__interrupt__"] = [{"id": i.id, "value": i.value} for i in snapshot.interrupts]
    return out


async def test_followed_state_equals_get_state(dsn: str) -> None:
    thread = f"live-{uuid.uuid4()}"
    states: dict[int, Any] = {}
    events: list[dict[str, Any]] = []
    f = follow(dsn, source="langgraph.threads", key=thread, poll_interval=0.1)
    done = threading.Event()
    checks: list[tuple[Any, dict[str, Any]]] = []

    def run() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            saver = HxSaver(conn)
            saver.setup()
            graph = compile_graph([tool_call(1, 1, 2), answer(2, "3"), tool_call(3, 2, 2), answer(4, "4")], saver)
            cfg: Any = {"configurable": {"thread_id": thread}}

            def check() -> None:
                head = conn.execute(
                    "SELECT seq FROM langgraph.threads(ARRAY[%s])", (thread,)
                ).fetchone()[0]  # type: ignore[index]
                checks.append((head, expected(graph.get_state(cfg))))

            for _ in graph.stream({"messages": [HumanMessage("1 + 2?", id="h1")]}, cfg):
                pass
            check()  # interrupted: the approval is pending
            graph.invoke(Command(resume="yes"), cfg)
            check()
            past = [s for s in graph.get_state_history(cfg) if s.next == ("approve",)][0]
            graph.update_state(past.config, {"messages": [HumanMessage("2 + 2?", id="h2")]}, as_node="tools")
            check()  # a fork: a snapshot
            graph.invoke(None, cfg)
            check()
            graph.invoke(Command(resume="ok"), cfg)
            check()
            # every checkpoint published: the state at its seq is its own
            for s in graph.get_state_history(cfg):
                seq = conn.execute(
                    "SELECT seq FROM langgraph.checkpoints WHERE thread_id = %s AND checkpoint_ns = '' AND checkpoint_id = %s",
                    (thread, s.config["configurable"]["checkpoint_id"]),
                ).fetchone()[0]  # type: ignore[index]
                if seq is not None:
                    checks.append((seq, expected(s)))
        done.set()

    with psycopg.connect(dsn, autocommit=True) as conn:
        HxSaver(conn).setup()
    # following a thread that does not exist yet: seq 0, no state
    it = f.__aiter__()
    first, state0 = await anext(it)
    assert first["metadata"] == {"stream": f"@langgraph:{thread}", "seq": 0, "synthetic": True} and state0 is None
    events.append(first)
    worker = threading.Thread(target=run)
    worker.start()
    async with asyncio.timeout(60):
        pending = asyncio.ensure_future(anext(it))
        while not (done.is_set() and f.seq is not None and f.seq >= max(s for s, _ in checks)):
            finished, _ = await asyncio.wait({pending}, timeout=0.2)
            if finished:
                event, state = pending.result()
                events.append(event)
                states[event["metadata"]["seq"]] = state
                pending = asyncio.ensure_future(anext(it))
        pending.cancel()
    worker.join()
    await f.close()
    assert checks and len(states) >= 5
    for seq, want in checks:
        if "__interrupt__" in want and "__interrupt__" not in states[seq]:
            # the checkpoint came before its task's interrupt: the next event
            # adds it
            assert states[seq] == {k: v for k, v in want.items() if k != "__interrupt__"}, seq
            assert states[seq + 1] == want, seq
        else:
            assert states[seq] == want, seq
    # the interrupt, as AG-UI clients look for it
    interrupted = [s for s in states.values() if s and "__interrupt__" in s]
    assert interrupted and interrupted[0]["__interrupt__"][0]["value"]["question"] == "run the tool?"
    kinds = {e["type"] for e in events}
    assert {"STATE_SNAPSHOT", "STATE_DELTA"} <= kinds
    assert [e["metadata"]["seq"] for e in events] == list(range(0, len(events)))  # every seq, once


async def test_a_deleted_thread_ends_its_stream(dsn: str) -> None:
    """delete_thread ends the thread's stream as a deleted row's ends
    (hx.stream_end, reason "deleted"), once; a follower that starts after
    it starts from that end, as the JavaScript hub does; the thread
    written again starts anew from a snapshot."""
    thread = f"gone-{uuid.uuid4()}"
    cfg: Any = {"configurable": {"thread_id": thread}}
    with psycopg.connect(dsn, autocommit=True) as conn:
        saver = HxSaver(conn)
        saver.setup()

        def head() -> int:
            return int(conn.execute("SELECT seq FROM langgraph.threads(ARRAY[%s])", (thread,)).fetchone()[0])  # type: ignore[index]

        f = follow(dsn, source="langgraph.threads", key=thread, poll_interval=0.1)
        it = f.__aiter__()
        async with asyncio.timeout(30):
            await anext(it)
            graph = compile_graph([answer(1, "hi")], saver)
            graph.invoke({"messages": [HumanMessage("hello", id="h1")]}, cfg)
            while f.seq != head():
                await anext(it)
            assert f.state == expected(graph.get_state(cfg)) and not f.ended
            saver.delete_thread(thread)
            end, state = await anext(it)
            assert end["type"] == "CUSTOM" and end["name"] == "hx.stream_end" and end["value"] == {"reason": "deleted"}
            assert state is None and f.ended and end["metadata"]["seq"] == head()
            saver.delete_thread(thread)  # ended already: nothing more
            assert head() == end["metadata"]["seq"]
            # a follower from now on starts from the end, not from a null state
            g = follow(dsn, source="langgraph.threads", key=thread, poll_interval=0.1)
            first, state = await anext(g.__aiter__())
            assert first["name"] == "hx.stream_end" and first["metadata"]["seq"] == end["metadata"]["seq"]
            assert state is None and g.ended
            await g.close()
            # written again: a snapshot of the new thread
            graph = compile_graph([answer(2, "again")], saver)
            graph.invoke({"messages": [HumanMessage("back", id="h2")]}, cfg)
            event, state = await anext(it)
            assert event["type"] == "STATE_SNAPSHOT" and not f.ended
            while f.seq != head():
                _, state = await anext(it)
            assert state == expected(graph.get_state(cfg))
        await f.close()
