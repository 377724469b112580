"""Human in the loop through hxstate-gateway: a real LangGraph graph that
calls interrupt(), driven by @ag-ui/client's HttpAgent.

The gateway serves HxSaver's threads (the source langgraph.threads); its run
hook runs the graph for each POST with ``python -m hxstate.langgraph.agui``
(agui_hitl.js).  A user's message makes the graph ask for approval: the run
finishes with outcome interrupt and interrupts[] naming it; the next run's
resume[] approves (or declines) it, and finishes with outcome success.  The
client's state and messages then equal graph.get_state() of the thread, and
@ag-ui/client's verifier accepts every run.  A resume that names an unknown
interrupt, a run that leaves one unanswered, a graph that fails and an
input the graph cannot take get RUN_ERROR."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import BaseMessage

import hitl_graph
from hxstate.langgraph import HxSaver
from test_stream import expected
from paths import HERE, SRC, TOP



class Driver:
    """agui_hitl.js: the gateway, its hook and the HttpAgents, one command
    (a line of JSON) at a time."""

    def __init__(self, dsn: str) -> None:
        env = {
            **os.environ,
            "PGDATABASE": str(psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]),
            "HX_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        self.proc = subprocess.Popen(
            ["node", str(HERE / "agui_hitl.js"), "hitl_graph:builder", "hitl_graph:failing"],
            cwd=HERE, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.port = json.loads(self._line())["port"]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put("")

    def _line(self) -> str:
        line = self.lines.get(timeout=120)
        assert line, f"agui_hitl.js exited ({self.proc.poll()})"
        return line

    def run(self, thread: str, **command: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"thread": thread, **command}) + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self._line())
        assert "failed" not in answer, answer["failed"]
        return answer

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def driver(dsn: str) -> Iterator[Driver]:
    if not shutil.which("node") or not (TOP / "node_modules").is_dir():
        pytest.fail("no node, or no node_modules (test/provision runs npm ci in the repository)")
    with psycopg.connect(dsn, autocommit=True) as conn:
        HxSaver(conn).setup()
    d = Driver(dsn)
    yield d
    d.close()


@pytest.fixture
def graph(dsn: str) -> Iterator[Any]:
    """The graph the hook runs, read here on a saver of the test's own."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield hitl_graph.builder.compile(checkpointer=HxSaver(conn))


def agui_messages(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """What an AG-UI client should hold of a thread's LangChain messages."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.type == "human":
            out.append({"id": m.id, "role": "user", "content": m.content})
        elif m.type == "ai":
            a: dict[str, Any] = {"id": m.id, "role": "assistant", "content": m.content}
            calls = getattr(m, "tool_calls", [])
            if calls:
                a["toolCalls"] = [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["args"]}} for c in calls
                ]
            out.append(a)
        elif m.type == "tool":
            t = {"id": m.id, "role": "tool", "content": m.content, "toolCallId": getattr(m, "tool_call_id")}
            if getattr(m, "status", None) == "error":
                t["error"] = m.content
            out.append(t)
        else:
            raise AssertionError(f"unexpected message {m!r}")
    return out


def client_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The client's messages, tool call arguments parsed (JSON text on the wire)."""
    out = []
    for m in messages:
        m = dict(m)
        if "toolCalls" in m:
            m["toolCalls"] = [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}} for c in m["toolCalls"]]
        out.append(m)
    return out


def check_equal(run: dict[str, Any], graph: Any, thread: str) -> Any:
    """The client's state and messages equal graph.get_state(): returns it."""
    state = graph.get_state({"configurable": {"thread_id": thread}})
    assert run["state"] == expected(state)
    assert client_messages(run["messages"]) == agui_messages(state.values["messages"])
    assert run["verified"] is True, run["verified"]
    return state


def ask(driver: Driver, graph: Any, thread: str) -> tuple[dict[str, Any], Any]:
    """A user's question: the graph asks for approval, outcome interrupt."""
    first = driver.run(thread, message={"id": "u-1", "role": "user", "content": "what is 2 + 3?"})
    assert first["error"] is None, first["error"]
    assert first["finished"]["outcome"] == {"type": "interrupt", "interrupts": first["pendingInterrupts"]}
    state = check_equal(first, graph, thread)
    [pending] = state.interrupts
    assert state.next == ("approve",)
    assert first["pendingInterrupts"] == [
        {
            "id": pending.id,
            "reason": "tool_call",
            "message": "add 2 and 3?",
            "toolCallId": "call-1",
            "metadata": {"value": pending.value},
        }
    ]
    assert [m["role"] for m in first["messages"]] == ["user", "assistant"]
    assert first["messages"][1]["toolCalls"][0]["function"]["name"] == "add"
    assert first["reports"][-1] == {"outcome": "interrupt", "interrupts": [{"id": pending.id, "value": pending.value}],
                                    "checkpoint_id": state.config["configurable"]["checkpoint_id"]}
    return first, pending


def test_approved_through_the_gateway(driver: Driver, graph: Any) -> None:
    thread = f"hitl-{uuid.uuid4()}"
    first, pending = ask(driver, graph, thread)
    # a new thread has no conversation yet: no MESSAGES_SNAPSHOT in the
    # prelude; the graph's messages come before the RUN_FINISHED
    assert first["types"][:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert "MESSAGES_SNAPSHOT" in first["types"]
    assert first["types"][-1] == "RUN_FINISHED"

    second = driver.run(thread, resume=[{"interruptId": pending.id, "status": "resolved", "payload": {"approved": True}}])
    assert second["error"] is None, second["error"]
    assert second["finished"]["outcome"] == {"type": "success"}
    state = check_equal(second, graph, thread)
    assert state.next == () and state.interrupts == ()
    assert second["pendingInterrupts"] == []
    assert [(m["role"], m["content"]) for m in second["messages"][2:]] == [("tool", "5"), ("assistant", "the sum is 5")]
    result = second["finished"]["result"]
    assert result["reason"] == "completed"
    assert result["output"] == {"outcome": "success", "interrupts": [], "checkpoint_id": state.config["configurable"]["checkpoint_id"]}
    # the hook got each POST's input: the message, then the resume (and the conversation as the client had it)
    assert [c["resume"] for c in second["calls"]] == [None, [{"interruptId": pending.id, "status": "resolved", "payload": {"approved": True}}]]
    assert second["calls"][1]["messages"] == [m["id"] for m in first["messages"]]
    # the hook wrote the graph's messages as they were made (hxstate.langgraph.live): the client got the
    # model's tool call and answer, and the tool's result, as events, each message's END before the
    # MESSAGES_SNAPSHOT of the checkpoint that holds it
    t = first["types"]
    assert {"TEXT_MESSAGE_START", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TEXT_MESSAGE_END"} <= set(t), t
    assert t.index("TEXT_MESSAGE_END") < len(t) - 1 - t[::-1].index("MESSAGES_SNAPSHOT"), t
    assert {"TOOL_CALL_RESULT", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"} <= set(second["types"]), second["types"]


def test_declined_through_the_gateway(driver: Driver, graph: Any) -> None:
    thread = f"hitl-{uuid.uuid4()}"
    _, pending = ask(driver, graph, thread)
    second = driver.run(thread, resume=[{"interruptId": pending.id, "status": "resolved", "payload": {"approved": False}}])
    assert second["error"] is None, second["error"]
    assert second["finished"]["outcome"] == {"type": "success"}
    check_equal(second, graph, thread)
    tool, reply = second["messages"][2:]
    assert tool == {"id": "declined-call-1", "role": "tool", "content": "declined by the user", "toolCallId": "call-1",
                    "error": "declined by the user"}
    assert reply["content"] == "I did not add them."


def test_unknown_and_unanswered_interrupts(driver: Driver, graph: Any) -> None:
    thread = f"hitl-{uuid.uuid4()}"
    first, pending = ask(driver, graph, thread)
    # a resume naming an interrupt that is not pending: RUN_ERROR, the hook is not called
    bad = driver.run(thread, resume=[{"interruptId": pending.id, "status": "resolved", "payload": {"approved": True}},
                                     {"interruptId": "no-such-interrupt", "status": "resolved", "payload": True}])
    assert bad["types"] == ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_ERROR"]
    assert bad["error"]["code"] == "hxstate_resume_unknown" and "no-such-interrupt" in bad["error"]["message"]
    assert bad["verified"] is True, bad["verified"]
    assert len(bad["calls"]) == 1
    # a client that does not know of the interrupt sends a new message: RUN_ERROR
    fresh = driver.run(thread, fresh=True, message={"id": "u-2", "role": "user", "content": "hello?"})
    assert fresh["error"]["code"] == "hxstate_interrupt_pending" and pending.id in fresh["error"]["message"]
    assert fresh["verified"] is True, fresh["verified"]
    assert len(fresh["calls"]) == 1
    # the thread is as the first run left it, and still answers
    state = graph.get_state({"configurable": {"thread_id": thread}})
    assert [i.id for i in state.interrupts] == [pending.id]
    assert state.values == graph.get_state({"configurable": {"thread_id": thread}}).values
    done = driver.run(thread, resume=[{"interruptId": pending.id, "status": "cancelled"}])
    assert done["finished"]["outcome"] == {"type": "success"}
    check_equal(done, graph, thread)
    assert done["messages"][-1]["content"] == "I did not add them."  # abandoned: not run


def test_errors_of_the_graph(driver: Driver, graph: Any) -> None:
    thread = f"fail-{uuid.uuid4()}"
    _, pending = ask(driver, graph, thread)
    failed = driver.run(thread, resume=[{"interruptId": pending.id, "status": "resolved", "payload": {"approved": True}}])
    # the graph's own exception: RUN_ERROR, its message kept from the client
    assert failed["types"][-1] == "RUN_ERROR"
    assert failed["error"]["code"] == "hxstate_run_failed"
    assert failed["error"]["message"] == "the run failed"
    assert "secret" not in json.dumps({k: v for k, v in failed.items() if k not in ("reports", "calls")})
    assert failed["verified"] is True, failed["verified"]
    assert failed["reports"][-1]["error"]["code"] == "hxstate_run_failed"
    state = graph.get_state({"configurable": {"thread_id": thread}})
    assert state.next == ("tools",) and state.interrupts == ()
    assert failed["state"] == expected(state)
    # an input the graph cannot take: RUN_ERROR with what is wrong (a
    # fresh agent: the failed run left the client's pending interrupt)
    bad = driver.run(thread, fresh=True, message={"id": "a-9", "role": "assistant", "content": "",
                                      "toolCalls": [{"id": "c-9", "type": "function", "function": {"name": "add", "arguments": "{"}}]})
    assert bad["error"]["code"] == "hxstate_input_invalid"
    assert bad["error"]["message"] == "message 'a-9': the arguments of tool call c-9 are not JSON"
    assert bad["verified"] is True, bad["verified"]
    assert graph.get_state({"configurable": {"thread_id": thread}}).values == state.values
