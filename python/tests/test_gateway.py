"""A thread checkpointed by HxSaver, followed in the browser's way: over
server-sent events from hxstate-gateway (what an EventSource reads), whose
hub takes the thread's snapshots from the saver's source function.  At every
step the state the events build equals graph.get_state()."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from graph import answer, compile_graph, tool_call
from hxstate.langgraph import HxSaver
from hxstate.patch import apply_event
from test_stream import expected

TOP = Path(__file__).resolve().parents[2]


class Sse:
    """An EventSource's reading of one stream: the events, and the state they
    build (snapshots replace it, deltas patch it)."""

    def __init__(self, port: int, path: str) -> None:
        self.events: list[dict[str, Any]] = []
        # every event, the run's too; and whether the server ended the response
        self.all: list[dict[str, Any]] = []
        self.ended = False
        self.state: Any = None
        self.seq = -1
        self.lock = threading.Condition()
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.conn.request("GET", path, headers={"accept": "text/event-stream"})
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.read()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            self._lines()
            with self.lock:
                self.ended = True
                self.lock.notify_all()
        except (OSError, ValueError, AttributeError):
            pass  # closed

    def _lines(self) -> None:
        data: list[str] = []
        has_id = False
        for raw in self.resp:
            line = raw.decode().rstrip("\n")
            if line.startswith("data:"):
                data.append(line[5:].lstrip())
            elif line.startswith("id:"):
                has_id = True
            elif line == "" and data:
                event = json.loads("\n".join(data))
                data = []
                with self.lock:
                    self.all.append(event)
                # the stream's own events carry their seq as the SSE id; the
                # run's (RUN_STARTED, RUN_FINISHED) and the conversation's
                # (MESSAGES_SNAPSHOT) do not
                own, has_id = has_id, False
                if not own:
                    continue
                with self.lock:
                    self.state = apply_event(self.state, event)
                    self.events.append(event)
                    self.seq = event.get("metadata", {}).get("seq", self.seq)
                    self.lock.notify_all()

    def wait_for(self, seq: int) -> Any:
        with self.lock:
            assert self.lock.wait_for(lambda: self.seq >= seq, timeout=20), (self.seq, seq)
            return self.state

    def wait_end(self) -> list[dict[str, Any]]:
        """Every event, once the server has ended the response."""
        with self.lock:
            assert self.lock.wait_for(lambda: self.ended, timeout=20), [e.get("type") for e in self.all]
            return self.all

    def close(self) -> None:
        # (a reader blocked in the socket holds the response's lock: shut
        # the socket down under it first)
        if self.conn.sock is not None:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        self.conn.close()


@pytest.fixture
def gateway(dsn: str) -> Any:
    if not shutil.which("node") or not (TOP / "node_modules").is_dir():
        pytest.fail("no node, or no node_modules (test/provision runs npm ci in the repository)")
    with psycopg.connect(dsn, autocommit=True) as conn:
        HxSaver(conn).setup()
    env = {**os.environ, "PGDATABASE": psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]}
    proc = subprocess.Popen(
        ["node", str(Path(__file__).with_name("gateway_server.js"))],
        cwd=TOP, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    yield port
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)


def test_a_thread_in_the_browser(dsn: str, gateway: int) -> None:
    thread = f"web-{uuid.uuid4()}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        saver = HxSaver(conn)
        graph = compile_graph([tool_call(1, 1, 2), answer(2, "3")], saver)
        cfg: Any = {"configurable": {"thread_id": thread}}
        sse = Sse(gateway, f"/streams/threads/{thread}")
        try:

            def check() -> None:
                # (a task's interrupt is written in the background, just
                # after the step: the browser's state catches up with it)
                deadline = time.monotonic() + 10
                while True:
                    want = expected(graph.get_state(cfg))
                    head = conn.execute("SELECT seq FROM langgraph.threads(ARRAY[%s])", (thread,)).fetchone()[0]  # type: ignore[index]
                    got = sse.wait_for(head)
                    if got == want or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
                assert got == want, [(e.get("type"), e.get("metadata", {}).get("seq")) for e in sse.events]

            for _ in graph.stream({"messages": [HumanMessage("1 + 2?", id="h1")]}, cfg, stream_mode="updates", durability="sync"):
                check()
            check()  # waiting for the approval: /__interrupt__
            assert sse.state["__interrupt__"][0]["value"]["question"] == "run the tool?"
            for _ in graph.stream(Command(resume="yes"), cfg, stream_mode="updates", durability="sync"):
                check()
            check()
            assert sse.state["messages"][-1]["content"] == "3" and "__interrupt__" not in sse.state
        finally:
            sse.close()
        seqs = [e["metadata"]["seq"] for e in sse.events]
        assert seqs == sorted(set(seqs))  # each seq once, in order
        assert sse.events[0]["type"] == "STATE_SNAPSHOT"
        # and @ag-ui/client, as it is: the thread as an AG-UI run
        out = subprocess.run(
            ["node", str(Path(__file__).with_name("agui_client.js")), str(gateway), f"/agents/threads/{thread}", "300"],
            cwd=TOP, capture_output=True, text=True, timeout=60,
        )
        assert out.returncode == 0, out.stderr
        run = json.loads(out.stdout)
        assert run["types"][0] == "RUN_STARTED" and run["types"][-1] == "RUN_FINISHED"
        assert run["state"] == expected(graph.get_state(cfg))

        # the thread deleted: its stream ends as a deleted row's, for a
        # browser that follows it and for one that comes after
        sse = Sse(gateway, f"/streams/threads/{thread}")
        later: Sse | None = None
        try:
            head = conn.execute("SELECT seq FROM langgraph.threads(ARRAY[%s])", (thread,)).fetchone()[0]  # type: ignore[index]
            sse.wait_for(head)
            saver.delete_thread(thread)
            ended = sse.wait_end()
            later = Sse(gateway, f"/streams/threads/{thread}")
            for events in (ended, later.wait_end()):
                end, finished = events[-2:]
                assert end["type"] == "CUSTOM" and end["name"] == "hx.stream_end" and end["metadata"]["seq"] == head + 1
                assert finished["type"] == "RUN_FINISHED"
                assert finished["result"]["reason"] == "stream_end" and finished["result"]["end"] == {"reason": "deleted"}
            assert sse.state is None
        finally:
            sse.close()
            if later is not None:
                later.close()
