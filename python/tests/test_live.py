"""A run's messages on its thread's stream as they are made (live.py): a
streaming chat model's tokens, tool calls and reasoning, and the tools'
results, from LangGraph's stream_mode="messages", written in batches that
share commits; each message's END committed before the checkpoint that
holds it; the run's events (and the prelude at every cut) taken by
@ag-ui/client's verifier; the command writes them with --live."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from hxstate.langgraph import HxSaver
from hxstate.langgraph.agui import run
from hxstate.langgraph.live import LiveLog, LiveLogError, MessageEvents
from paths import HERE, SRC, TOP
from pgproxy import Proxy


class Streaming(BaseChatModel):
    """A chat model that streams its replies (no network): each reply's
    text word by word, its reasoning first, and its tool calls' arguments
    in pieces of a few characters, as real providers' chunks come."""

    replies: list[dict[str, Any]]
    delay: float = 0.0
    mark_last: bool = True   # the last chunk says so (chunk_position="last"), as langchain-core's own models' do
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "hxstate-test-streaming"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        chunk: AIMessageChunk | None = None
        for c in self._stream(messages, stop, run_manager, **kw):
            chunk = c.message if chunk is None else chunk + c.message  # type: ignore[assignment]
        assert chunk is not None
        return ChatResult(generations=[ChatGeneration(message=AIMessage(
            content=chunk.content, id=chunk.id, tool_calls=chunk.tool_calls))])

    def _stream(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Iterator[ChatGenerationChunk]:
        reply = self.replies[self.calls]
        self.calls += 1
        mid = reply["id"]
        pieces: list[AIMessageChunk] = []
        for word in reply.get("reasoning", "").split(" ") if reply.get("reasoning") else []:
            pieces.append(AIMessageChunk(content=[{"type": "reasoning", "reasoning": word + " "}], id=mid))
        for i, word in enumerate(reply.get("text", "").split(" ") if reply.get("text") else []):
            pieces.append(AIMessageChunk(content=("" if i == 0 else " ") + word, id=mid))
        for n, call in enumerate(reply.get("calls", [])):
            args = json.dumps(call["args"], separators=(",", ":"))
            parts = [args[i:i + 3] for i in range(0, len(args), 3)]
            for j, part in enumerate(parts):
                first = j == 0
                pieces.append(AIMessageChunk(content="", id=mid, tool_call_chunks=[{
                    "name": call["name"] if first else None, "id": call["id"] if first else None,
                    "args": part, "index": n, "type": "tool_call_chunk"}]))
        if self.mark_last:
            pieces[-1].chunk_position = "last"
        for p in pieces:
            if self.delay:
                time.sleep(self.delay)
            chunk = ChatGenerationChunk(message=p)
            if run_manager:
                run_manager.on_llm_new_token(p.content if isinstance(p.content, str) else "", chunk=chunk)
            yield chunk


@tool
def lookup(city: str, days: int) -> str:
    """The weather of a city."""
    return f"sunny in {city} for {days} days"


def graph(saver: Any, replies: list[dict[str, Any]], delay: float = 0.0, mark_last: bool = True) -> Any:
    model = Streaming(replies=replies, delay=delay, mark_last=mark_last)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([lookup]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=saver)


WORDS = ("The weather in Paris will be sunny and mild for the next three days, "
         "with light winds from the west and no rain at all expected").split(" ")
REPLIES = [
    {"id": "ai-1", "reasoning": "the user wants a forecast so call the tool", "text": "Let me look that up.",
     "calls": [{"id": "call-1", "name": "lookup", "args": {"city": "Paris", "days": 3}}]},
    {"id": "ai-2", "text": " ".join(WORDS)},
]


@pytest.fixture
def saver(dsn: str) -> Iterator[HxSaver]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        s = HxSaver(conn)
        s.setup()
        yield s


def log_of(conn: psycopg.Connection[Any], stream: str) -> list[tuple[int, str, str, dict[str, Any]]]:
    rows = conn.execute("SELECT seq, type, xmin::text, event FROM hx_event WHERE stream = %s ORDER BY seq", (stream,)).fetchall()
    return [(int(r[0]), r[1], r[2], r[3]) for r in rows]


def verify(events: list[dict[str, Any]]) -> dict[str, Any]:
    """@ag-ui/client's verifier on the run, and on the prelude at every cut then the rest (verify_run.js)."""
    if not shutil.which("node") or not (TOP / "node_modules").is_dir():
        pytest.fail("no node, or no node_modules (npm ci in the repository)")
    out = subprocess.run(["node", str(HERE / "verify_run.js")], input=json.dumps(events), capture_output=True, text=True,
                         cwd=TOP, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def question(text: str) -> dict[str, Any]:
    return {"threadId": "t", "runId": f"r-{uuid.uuid4()}", "messages": [{"id": f"u-{uuid.uuid4()}", "role": "user", "content": text}]}


def test_message_events_of_chunks_and_whole_messages() -> None:
    ev = MessageEvents()
    out: list[dict[str, Any]] = []
    out += ev.feed(AIMessageChunk(content=[{"type": "thinking", "thinking": "hm"}], id="a"))
    out += ev.feed(AIMessageChunk(content="Hi", id="a"))
    out += ev.feed(AIMessageChunk(content="", id="a", tool_call_chunks=[{"name": None, "id": None, "args": '{"x"', "index": 0}]))
    out += ev.feed(AIMessageChunk(content="", id="a", tool_call_chunks=[{"name": "f", "id": "c", "args": ":1}", "index": 0}]))
    out += ev.feed(AIMessageChunk(content="", id="b"))  # another message: what a had open ends
    out += ev.feed(AIMessage(content="Hi", id="a"))     # a's whole message after its chunks: nothing again
    out += ev.close()
    out += ev.feed(ToolMessage(content=[{"type": "text", "text": "r"}], id="t", tool_call_id="c"))
    assert [(e["type"], e.get("delta")) for e in out] == [
        ("TEXT_MESSAGE_START", None), ("REASONING_START", None), ("REASONING_MESSAGE_START", None),
        ("REASONING_MESSAGE_CONTENT", "hm"), ("REASONING_MESSAGE_END", None), ("REASONING_END", None),
        ("TEXT_MESSAGE_CONTENT", "Hi"),
        ("TOOL_CALL_START", None), ("TOOL_CALL_ARGS", '{"x":1}'),
        ("TOOL_CALL_END", None), ("TEXT_MESSAGE_END", None),
        ("TEXT_MESSAGE_START", None), ("TEXT_MESSAGE_END", None),
        ("TOOL_CALL_RESULT", None),
    ]
    assert out[7] == {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f", "parentMessageId": "a"}
    assert out[1]["messageId"] == "a:reasoning"
    assert out[-1] == {"type": "TOOL_CALL_RESULT", "messageId": "t", "toolCallId": "c", "content": "r", "role": "tool"}
    # a model that did not stream: its whole message at once, the arguments as compact JSON
    whole = MessageEvents().feed(AIMessage(content="", id="m", tool_calls=[{"name": "f", "args": {"a": [1, "é"]}, "id": "k"}]))
    assert [e["type"] for e in whole] == ["TEXT_MESSAGE_START", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TEXT_MESSAGE_END"]
    assert whole[2]["delta"] == '{"a":[1,"é"]}'
    verify([*out, *whole])


@pytest.mark.parametrize("mark_last", [True, False], ids=["last-chunk-marked", "last-chunk-unmarked"])
def test_a_graph_streams_its_tokens_and_tool_calls_into_the_threads_log(
    saver: HxSaver, dsn: str, conn: psycopg.Connection[Any], mark_last: bool
) -> None:
    # unmarked: a message ends when its node's writes are reported, before its checkpoint is written
    thread = f"live-{uuid.uuid4()}"
    stream = f"@langgraph:{thread}"
    live = LiveLog(dsn, stream, flush_ms=200)
    try:
        result = run(graph(saver, REPLIES, delay=0.002, mark_last=mark_last), question("weather in Paris?"), thread_id=thread, live=live)
    finally:
        live.close()
    assert result["outcome"] == "success"
    log = log_of(conn, stream)
    types = [t for _, t, _, _ in log]
    events = [e for _, _, _, e in log]
    run_events = [e for _, t, _, e in log if not t.startswith("STATE_")]

    # the text, the reasoning and the arguments, each whole, as the model streamed them
    def joined(kind: str, key: str, ident: str) -> str:
        return "".join(e["delta"] for e in run_events if e["type"] == kind and e[key] == ident)

    assert joined("TEXT_MESSAGE_CONTENT", "messageId", "ai-2") == " ".join(WORDS)
    assert joined("TEXT_MESSAGE_CONTENT", "messageId", "ai-1") == "Let me look that up."
    assert joined("REASONING_MESSAGE_CONTENT", "messageId", "ai-1:reasoning") == "the user wants a forecast so call the tool "
    assert json.loads(joined("TOOL_CALL_ARGS", "toolCallId", "call-1")) == {"city": "Paris", "days": 3}
    results = [e for e in run_events if e["type"] == "TOOL_CALL_RESULT"]
    assert len(results) == 1 and results[0]["toolCallId"] == "call-1" and results[0]["content"] == "sunny in Paris for 3 days"

    # a token costs no commit of its own: the 26 tokens of ai-2, 2 ms apart, within flush_ms of each other
    tokens = len(WORDS)
    contents = [i for i, e in enumerate(events) if e["type"] == "TEXT_MESSAGE_CONTENT" and e["messageId"] == "ai-2"]
    commits = {log[i][2] for i in contents}
    assert len(commits) < tokens / 2, f"{len(commits)} commits for {tokens} tokens"
    assert live.stats["pushes"] > live.stats["events"]

    # markers around the run
    assert events[types.index("CUSTOM")]["value"] == {"runId": events[types.index("CUSTOM")]["value"]["runId"], "status": "started"}
    assert run_events[-1]["name"] == "hxstate.run" and run_events[-1]["value"]["status"] == "finished"

    # each message's END is committed before the checkpoint that holds it, and the message there is what was streamed
    state = saver_state(saver, thread)
    for mid in ("ai-1", "ai-2"):
        end = next(i for i, e in enumerate(events) if e["type"] == "TEXT_MESSAGE_END" and e["messageId"] == mid)
        holds = next(i for i, e in enumerate(events) if e["type"].startswith("STATE_") and f'"{mid}"' in json.dumps(e))
        assert end < holds, f"{mid}: END at {end}, in the state at {holds}"
        msg = next(m for m in state if m.id == mid)
        assert shown(msg.content) == joined("TEXT_MESSAGE_CONTENT", "messageId", mid)
    tool_msg = next(m for m in state if isinstance(m, ToolMessage))
    assert tool_msg.id == results[0]["messageId"]
    ai1 = next(m for m in state if m.id == "ai-1")
    assert ai1.tool_calls[0]["id"] == "call-1" and ai1.tool_calls[0]["args"] == {"city": "Paris", "days": 3}

    # every resumed stream: the verifier takes the prelude at each cut and the rest
    assert verify([e for e in events])["cuts"] == len(events) + 1


async def test_async_runs_stream_too(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """arun with live: the same events, the writer's waits off the event loop."""
    from hxstate.langgraph.agui import arun
    from hxstate.langgraph.aio import AsyncHxSaver

    async with AsyncHxSaver.from_conn_string(dsn) as asaver:
        await asaver.setup()
        thread = f"live-async-{uuid.uuid4()}"
        stream = f"@langgraph:{thread}"
        live = LiveLog(dsn, stream, flush_ms=200)
        try:
            result = await arun(graph(asaver, REPLIES, delay=0.002), question("weather?"), thread_id=thread, live=live)
        finally:
            live.close()
    assert result["outcome"] == "success"
    events = [e for _, _, _, e in log_of(conn, stream)]
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT" and e["messageId"] == "ai-2")
    assert text == " ".join(WORDS)
    for mid in ("ai-1", "ai-2"):
        end = next(i for i, e in enumerate(events) if e["type"] == "TEXT_MESSAGE_END" and e["messageId"] == mid)
        holds = next(i for i, e in enumerate(events) if e["type"].startswith("STATE_") and f'"{mid}"' in json.dumps(e))
        assert end < holds
    assert [e["value"]["status"] for e in events if e["type"] == "CUSTOM"] == ["started", "finished"]
    verify(events)


def shown(content: Any) -> str:
    """A message's text as the gateway shows it (gateway/lib/agui.js textOf): a string, or its strings and text blocks joined."""
    if isinstance(content, str):
        return content
    return "".join(b if isinstance(b, str) else b["text"] for b in content if isinstance(b, str) or b.get("type") == "text")


def saver_state(saver: HxSaver, thread: str) -> list[BaseMessage]:
    snap = graph(saver, []).get_state({"configurable": {"thread_id": thread}})
    return list(snap.values["messages"])


def test_a_failed_node_closes_what_it_had_open_and_marks_the_run_failed(saver: HxSaver, dsn: str, conn: psycopg.Connection[Any]) -> None:
    thread = f"live-fail-{uuid.uuid4()}"
    stream = f"@langgraph:{thread}"

    class Broken(Streaming):
        def _stream(self, *a: Any, **kw: Any) -> Iterator[ChatGenerationChunk]:
            for i, c in enumerate(super()._stream(*a, **kw)):
                if i == 3:
                    raise RuntimeError("the provider hung up")
                yield c

    model = Broken(replies=[{"id": "ai-x", "text": "one two three four five"}])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_edge(START, "agent")
    live = LiveLog(dsn, stream)
    try:
        with pytest.raises(Exception) as failed:
            run(g.compile(checkpointer=saver), question("hi"), thread_id=thread, live=live)
    finally:
        live.close()
    assert getattr(failed.value, "code", None) == "hxstate_run_failed"
    events = [e for _, _, _, e in log_of(conn, stream)]
    run_events = [e for e in events if not e["type"].startswith("STATE_")]
    assert [e["type"] for e in run_events] == ["CUSTOM", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "CUSTOM"]
    assert run_events[2]["delta"] == "one two three"
    assert run_events[-1]["value"]["status"] == "failed" and run_events[-1]["value"]["error"] == "hxstate_run_failed"
    verify(events)


def test_abuse_what_a_model_says_that_jsonb_cannot_hold(saver: HxSaver, dsn: str, conn: psycopg.Connection[Any]) -> None:
    """A model's output is nobody's to check: a NUL or a lone surrogate in a
    token, a tool's name or its arguments costs one character (U+FFFD), not
    the run's events (jsonb holds neither)."""
    ev = MessageEvents()
    out = ev.feed(AIMessageChunk(content="a\x00b\ud800c", id="m", tool_call_chunks=[
        {"name": "f\x00", "id": "k", "args": '{"x":"\udc00"}', "index": 0}]))
    out += ev.feed(AIMessage(content="", id="w", tool_calls=[{"name": "g", "args": {"y": "\ud800"}, "id": "k2"}]))
    out += ev.close()
    stream = f"@langgraph:abuse-{uuid.uuid4()}"
    live = LiveLog(dsn, stream)
    live.push(out, urgent=True)
    live.flush()
    live.close()
    logged = [e for _, _, _, e in log_of(conn, stream)]
    assert [e.get("delta") for e in logged if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["a\ufffdb\ufffdc"]
    assert [e["toolCallName"] for e in logged if e["type"] == "TOOL_CALL_START"] == ["f\ufffd", "g"]
    assert [e["delta"] for e in logged if e["type"] == "TOOL_CALL_ARGS"] == ['{"x":"\ufffd"}', '{"y":"\ufffd"}']
    verify(logged)


def test_the_log_writer_bounds_and_failures(dsn: str, conn: psycopg.Connection[Any], saver: HxSaver) -> None:
    with pytest.raises(ValueError):
        LiveLog(dsn, "@langgraph:x", max_batch_bytes=10, max_pending_bytes=5)
    # a stream the saver's publish() refuses (not a log stream's name): the run's next push or flush raises
    live = LiveLog(dsn, "not-a-log-stream")
    live.push([{"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}], urgent=True)
    with pytest.raises(LiveLogError):
        live.flush()
    with pytest.raises(LiveLogError):
        live.push([{"type": "TEXT_MESSAGE_END", "messageId": "m"}])
    live.close()
    # at max_pending_bytes push waits for the writer: what it holds stays bounded, and everything is written once
    stream = f"@langgraph:bound-{uuid.uuid4()}"
    live = LiveLog(dsn, stream, flush_ms=10_000, max_batch_bytes=1000, max_pending_bytes=4000)
    live.push([{"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}])
    for i in range(200):
        live.push([{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"{i:04d}" * 25}])
    live.push([{"type": "TEXT_MESSAGE_END", "messageId": "m"}])
    live.flush()
    live.close()
    events = [e for _, _, _, e in log_of(conn, stream)]
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == "".join(f"{i:04d}" * 25 for i in range(200))
    assert live.stats["commits"] >= 5, "20 kB through a 4 kB bound: several commits, not one"


def test_the_command_writes_the_run_live_with_live_and_not_without(dsn: str, saver: HxSaver, conn: psycopg.Connection[Any], tmp_path: Any) -> None:
    app = tmp_path / "liveapp.py"
    app.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from test_live import graph, REPLIES\n"
        "def make(saver):\n"
        "    return graph(saver, REPLIES)\n"
    )
    for flag, expect in ((["--live"], True), ([], False)):
        thread = f"cmd-live-{uuid.uuid4()}"
        env = {"PYTHONPATH": f"{SRC}:{HERE}", "PATH": "/usr/bin:/bin"}
        env.update({k: v for k, v in os.environ.items() if k.startswith("PG")})
        out = subprocess.run([sys.executable, "-m", "hxstate.langgraph.agui", f"{app}:make", f"--thread={thread}", f"--dsn={dsn}", *flag],
                             input=json.dumps(question("weather?")), capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["outcome"] == "success"
        types = [t for _, t, _, _ in log_of(conn, f"@langgraph:{thread}")]
        assert ("TEXT_MESSAGE_CONTENT" in types) is expect, types
        assert any(t.startswith("STATE_") for t in types)


def pushed_events(n: int) -> list[dict[str, Any]]:
    """n events no two of which join (each its own message), told apart by their text."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        out += [{"type": "TEXT_MESSAGE_START", "messageId": f"m{i}", "role": "assistant"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}", "delta": f"event {i} ü"},
                {"type": "TEXT_MESSAGE_END", "messageId": f"m{i}"}]
    return out


def write_through(live: LiveLog, events: list[dict[str, Any]]) -> None:
    """events a message (three events, one batch) at a time, each flushed."""
    for i in range(0, len(events), 3):
        live.push(events[i:i + 3], urgent=True)
        live.flush()


def logged(conn: psycopg.Connection[Any], stream: str) -> list[dict[str, Any]]:
    """The stream's events, without what the log adds to them."""
    return [{k: v for k, v in e.items() if k not in ("timestamp", "metadata")} for _, _, _, e in log_of(conn, stream)]


@pytest.mark.parametrize(("at", "in_doubt"), [("statement", 0), ("commit", 1), ("swallow", 1)])
def test_a_lost_connection_loses_and_repeats_no_event(dsn: str, conn: psycopg.Connection[Any], saver: HxSaver, at: str, in_doubt: int) -> None:
    # the 3rd batch's connection is dropped: before its statement reaches the
    # server ("statement"), right after its COMMIT was forwarded, the reply
    # held back ("commit": in doubt, landed), or at its COMMIT, not forwarded
    # ("swallow": in doubt, not landed).  Every event is in the stream once, in order.
    proxy = Proxy(at, 3)
    stream = f"@langgraph:lost-{at}-{uuid.uuid4()}"
    events = pushed_events(6)
    live = LiveLog(proxy.dsn(dsn), stream, retry_s=60, backoff_ms=(10, 200))
    try:
        write_through(live, events)
    finally:
        live.close()
        proxy.close()
    assert proxy.dropped == 1, "the proxy dropped the connection once"
    assert live.stats["in_doubt"] == in_doubt
    assert live.stats["retries"] >= 1
    assert logged(conn, stream) == events
    # the log's row of its batches is gone with it
    assert conn.execute("SELECT count(*) FROM langgraph.live_batches WHERE stream = %s", (stream,)).fetchone() == (0,)


def test_a_connection_that_never_comes_back_fails_the_run_after_the_retry_budget(
        dsn: str, conn: psycopg.Connection[Any], saver: HxSaver) -> None:
    proxy = Proxy("statement", 2, dead=True)
    stream = f"@langgraph:dead-{uuid.uuid4()}"
    events = pushed_events(3)
    live = LiveLog(proxy.dsn(dsn), stream, retry_s=0.5, backoff_ms=(10, 100))
    try:
        with pytest.raises(LiveLogError, match="could not be written in 0.5 s"):
            write_through(live, events)
        with pytest.raises(LiveLogError):
            live.push(events[3:])
    finally:
        live.close()
        proxy.close()
    assert live.stats["retries"] >= 1
    # what was committed before the connection was lost is there, once, and nothing after it
    assert logged(conn, stream) == events[:3]


def test_a_statement_error_is_not_retried(dsn: str, saver: HxSaver) -> None:
    # an event the log refuses (a stream name publish() does not take) fails the run at once, however long the budget
    live = LiveLog(dsn, "not-a-log-stream", retry_s=3600)
    live.push([{"type": "CUSTOM", "name": "x", "value": 1}], urgent=True)
    with pytest.raises(LiveLogError):
        live.flush()
    live.close()
    assert live.stats["retries"] == 0
    # a schema the saver's setup() has not brought up to date (here: none) says so
    live = LiveLog(dsn, f"@langgraph:{uuid.uuid4()}", schema="no_such_saver_schema", retry_s=3600)
    live.push([{"type": "CUSTOM", "name": "x", "value": 1}], urgent=True)
    with pytest.raises(LiveLogError, match=r"run the saver's setup\(\)"):
        live.flush()
    live.close()


def test_abuse_publish_batch(dsn: str, conn: psycopg.Connection[Any], saver: HxSaver) -> None:
    # what a caller of the saver's publish_batch() can hand it: each bad input a clear error, nothing written
    stream = f"@langgraph:abuse-{uuid.uuid4()}"
    writer = uuid.uuid4()
    call = "SELECT langgraph.publish_batch(%s, %s::jsonb, %s, %s)"
    bad: list[tuple[tuple[Any, ...], str]] = [
        ((stream, '{"type": "CUSTOM"}', writer, 1), "22023"),      # not an array
        ((stream, "null", writer, 1), "22023"),
        ((stream, None, writer, 1), "22023"),
        ((stream, '[{"type": "CUSTOM", "name": "x", "value": 1}]', None, 1), "22004"),   # no writer
        ((stream, '[{"type": "CUSTOM", "name": "x", "value": 1}]', writer, None), "22004"),  # no batch number
        ((None, '[{"type": "CUSTOM", "name": "x", "value": 1}]', writer, 1), "22004"),  # no stream
    ]
    for args, sqlstate in bad:
        with pytest.raises(psycopg.Error) as e:
            conn.execute(call, args)
        assert e.value.sqlstate == sqlstate, (args, e.value)
    assert log_of(conn, stream) == []
    # a writer's row names one stream: the same writer on another stream is refused, and writes nothing there
    assert conn.execute(call, (stream, '[{"type": "CUSTOM", "name": "x", "value": 1}]', writer, 1)).fetchone()[0] is not None
    other = f"@langgraph:abuse-other-{uuid.uuid4()}"
    with pytest.raises(psycopg.Error) as e:
        conn.execute(call, (other, '[{"type": "CUSTOM", "name": "x", "value": 2}]', writer, 2))
    assert e.value.sqlstate == "22023"
    assert log_of(conn, other) == []
    assert conn.execute("SELECT stream, batch FROM langgraph.live_batches WHERE writer = %s", (writer,)).fetchone() == (stream, 1)
    # a role that may use the schema but not write the log nor the saver's table: 42501, nothing written
    role = f"live_probe_{uuid.uuid4().hex[:8]}"
    conn.execute(f"CREATE ROLE {role}")
    conn.execute(f"GRANT USAGE ON SCHEMA langgraph TO {role}")
    try:
        with conn.transaction():
            conn.execute(f"SET LOCAL ROLE {role}")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                with conn.transaction():
                    conn.execute(call, (stream, '[{"type": "CUSTOM", "name": "x", "value": 3}]', uuid.uuid4(), 1))
    finally:
        conn.execute(f"REVOKE USAGE ON SCHEMA langgraph FROM {role}")
        conn.execute(f"DROP ROLE {role}")
    assert [e["value"] for _, _, _, e in log_of(conn, stream)] == [1]
    conn.execute("DELETE FROM langgraph.live_batches WHERE writer = %s", (writer,))


def test_a_crashed_writers_row_is_swept_and_an_idle_writers_comes_back(dsn: str, conn: psycopg.Connection[Any], saver: HxSaver) -> None:
    with pytest.raises(ValueError, match="retry_s"):
        LiveLog(dsn, "@langgraph:x", retry_s=3601)
    # two writers' rows: one crashed two days ago, one alive but idle for a day and a half (its last batch then)
    idle = LiveLog(dsn, f"@langgraph:idle-{uuid.uuid4()}", retry_s=60)
    idle.push([{"type": "CUSTOM", "name": "x", "value": 1}], urgent=True)
    idle.flush()
    crashed = uuid.uuid4()
    recent = uuid.uuid4()
    conn.execute("INSERT INTO langgraph.live_batches (writer, stream, batch, seq, committed_at) VALUES "
                 "(%s, '@langgraph:gone', 7, 7, now() - interval '2 days'), (%s, '@langgraph:recent', 3, 3, now() - interval '23 hours')",
                 (crashed, recent))
    conn.execute("UPDATE langgraph.live_batches SET committed_at = now() - interval '36 hours' WHERE writer = %s", (idle._writer,))
    # a new log starts: the rows no batch wrote for a day go, the others stay
    fresh = LiveLog(dsn, f"@langgraph:fresh-{uuid.uuid4()}")
    try:
        left = {r[0] for r in conn.execute("SELECT writer FROM langgraph.live_batches WHERE writer = ANY(%s)",
                                           ([crashed, recent, idle._writer],)).fetchall()}
        assert left == {recent}
        # the idle writer's next batch writes its row again, numbered on from its last: nothing lost, nothing twice
        idle.push([{"type": "CUSTOM", "name": "x", "value": 2}], urgent=True)
        idle.flush()
        assert conn.execute("SELECT batch FROM langgraph.live_batches WHERE writer = %s", (idle._writer,)).fetchone() == (2,)
        assert [e["value"] for _, _, _, e in log_of(conn, idle.stream)] == [1, 2]
    finally:
        idle.close()
        fresh.close()
        conn.execute("DELETE FROM langgraph.live_batches WHERE writer = %s", (recent,))
    # a schema without the table: the sweep says nothing, the first batch names setup()
    live = LiveLog(dsn, f"@langgraph:{uuid.uuid4()}", schema="no_such_saver_schema")
    live.push([{"type": "CUSTOM", "name": "x", "value": 1}], urgent=True)
    with pytest.raises(LiveLogError, match=r"run the saver's setup\(\)"):
        live.flush()
    live.close()


def test_max_pending_bytes_bounds_what_waits_while_the_writer_retries(dsn: str, conn: psycopg.Connection[Any], saver: HxSaver) -> None:
    # the connection is lost for good at the 2nd batch: while the writer retries, push() waits at
    # max_pending_bytes (4000: a few 500-byte events), and raises once the retry budget is spent
    proxy = Proxy("statement", 2, dead=True)
    stream = f"@langgraph:bound-retry-{uuid.uuid4()}"
    live = LiveLog(proxy.dsn(dsn), stream, flush_ms=0, max_batch_bytes=1000, max_pending_bytes=4000, retry_s=1, backoff_ms=(10, 100))
    accepted = 0
    try:
        live.push([{"type": "CUSTOM", "name": "first", "value": 0}], urgent=True)
        live.flush()
        with pytest.raises(LiveLogError, match="could not be written"):
            for i in range(1000):
                live.push([{"type": "CUSTOM", "name": "x", "value": "v" * 450}])
                accepted += 1
    finally:
        live.close()
        proxy.close()
    assert accepted <= 4000 // 450 + 2, f"{accepted} events of 500 bytes were taken past a 4000-byte bound"
    assert [e["name"] for e in logged(conn, stream)] == ["first"]
