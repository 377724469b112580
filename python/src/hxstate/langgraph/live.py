"""A LangGraph run's messages as they are made: its chat models' tokens,
tool calls and reasoning, and its tools' results, as AG-UI events on the
thread's log stream (``@<schema>:<thread_id>``), where the gateway's
followers get them as they come.

Two parts:

- ``MessageEvents`` (pure): what LangGraph's ``stream_mode="messages"``
  hands out, ``(message, metadata)`` pairs, as AG-UI events.  A chat
  model's chunks (``AIMessageChunk``, all with the id of the message they
  make) become ``TEXT_MESSAGE_START`` (at the message's first chunk),
  ``TEXT_MESSAGE_CONTENT`` (its text: a string content, or its text
  blocks), ``TOOL_CALL_START`` / ``TOOL_CALL_ARGS`` (its
  ``tool_call_chunks``, by index, with ``parentMessageId`` the message),
  and ``REASONING_START`` / ``REASONING_MESSAGE_START`` /
  ``REASONING_MESSAGE_CONTENT`` (its ``reasoning`` or ``thinking`` blocks,
  or ``additional_kwargs["reasoning_content"]``; the reasoning's message id
  is the message's with ``:reasoning`` appended).  What is open ends
  (``TOOL_CALL_END``, ``REASONING_MESSAGE_END`` and ``REASONING_END``,
  ``TEXT_MESSAGE_END``) at the chunk marked ``chunk_position="last"``, when
  another message begins, or when the node that made it finishes
  (``close()``).  A whole message (a node's output: a ``ToolMessage``, or a
  message of a model that did not stream) becomes its events at once: a
  tool message ``TOOL_CALL_RESULT``; an AI message its text and tool calls
  (the arguments as compact JSON); a user, system or developer message a
  text message of that role.
- ``LiveLog``: those events written to the stream in batches that share
  commits, on a connection of its own, by a thread of its own.  The rule
  (the JavaScript client's RunWriter's): a token waits at most
  ``flush_ms`` (50) for its commit; a batch goes at once at
  ``max_batch_bytes`` (64 kB) of event text or when it holds an event
  that ends something (``push(..., urgent=True)``: the run says so for
  every ``*_END`` and ``TOOL_CALL_RESULT``); ``flush()`` (which the run
  calls at the end of every node, and at its own) returns once everything
  pushed is committed.
  Consecutive fragments of one construct are one event ("Hel" and "lo" of
  a message, in one batch, are logged as one ``TEXT_MESSAGE_CONTENT``
  "Hello").  So a token costs no commit of its own.  At most
  ``max_pending_bytes`` (4 MiB) wait: past it ``push()`` waits for the
  writer.  A write that fails fails the run (``LiveLogError``, the next
  ``push()`` or ``flush()`` raises it).

The run (``agui.run`` with ``live``) writes a start marker (CUSTOM
``hxstate.run`` ``{runId, status: "started"}``), then the events, then an
end marker (``status`` ``"finished"``, or ``"failed"`` with ``error``); a
reader that joins in the middle of a run reads the log back to the start
marker to reopen what is open there.  Each message's END is committed
before the checkpoint that holds the message: the run closes what a node
has open and flushes when LangGraph reports the node's writes (the
``updates`` stream mode), before it writes the step's checkpoint.  So at
each END the finished message is what the next ``MESSAGES_SNAPSHOT`` shows
(a tool call's arguments as JSON values: the checkpoint keeps them parsed,
and the gateway writes them as compact JSON text).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from psycopg import sql

__all__ = [
    "FLUSH_MS",
    "MAX_BATCH_BYTES",
    "MAX_PENDING_BYTES",
    "RUN_MARKER",
    "LiveLog",
    "LiveLogError",
    "MessageEvents",
    "afeed_run",
    "feed_run",
    "run_marker",
    "storable",
    "stream_items",
]

#: the CUSTOM event that marks a run's start and end in its stream
RUN_MARKER = "hxstate.run"
FLUSH_MS = 50
MAX_BATCH_BYTES = 64 * 1024
MAX_PENDING_BYTES = 4 * 1024 * 1024

# the fragments that join, and the member that names their construct
_FRAGMENTS = {"TEXT_MESSAGE_CONTENT": "messageId", "TOOL_CALL_ARGS": "toolCallId", "REASONING_MESSAGE_CONTENT": "messageId"}


def run_marker(run_id: str, status: str, error: str | None = None) -> dict[str, Any]:
    """The CUSTOM event that marks a run's start (``started``) or end (``finished``, ``failed``)."""
    value: dict[str, Any] = {"runId": run_id, "status": status}
    if error is not None:
        value["error"] = error
    return {"type": "CUSTOM", "name": RUN_MARKER, "value": value}


_UNSTORABLE = re.compile("\x00|[\ud800-\udfff]")


def storable(text: str) -> str:
    """text as jsonb can hold it: a NUL or a lone surrogate (a model's
    output is not checked by anyone before this) becomes U+FFFD, so that
    a stray character costs the run one character, not its events."""
    return _UNSTORABLE.sub("\ufffd", text)


def _text(content: Any) -> str:
    """A message's text as the gateway shows it: a string, or its text blocks joined."""
    if isinstance(content, str):
        return storable(content)
    if not isinstance(content, list):
        return ""
    out = []
    for b in content:
        if isinstance(b, str):
            out.append(b)
        elif isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str):
            out.append(b["text"])
    return storable("".join(out))


def _reasoning(message: BaseMessage) -> str:
    """The reasoning a message (or chunk) carries: reasoning or thinking blocks, or reasoning_content."""
    out = []
    if isinstance(message.content, list):
        for b in message.content:
            if not isinstance(b, Mapping):
                continue
            if b.get("type") == "reasoning" and isinstance(b.get("reasoning"), str):
                out.append(b["reasoning"])
            elif b.get("type") == "thinking" and isinstance(b.get("thinking"), str):
                out.append(b["thinking"])
    extra = message.additional_kwargs.get("reasoning_content")
    if isinstance(extra, str):
        out.append(extra)
    return storable("".join(out))


_ROLES = {HumanMessage: "user", SystemMessage: "system"}


class MessageEvents:
    """LangGraph's ``stream_mode="messages"`` items as AG-UI events (pure).

    ``feed(message)`` returns the events a message or chunk makes;
    ``close()`` the END events of whatever is open (what the run calls when
    the node that made them finishes, and at its end)."""

    def __init__(self) -> None:
        self._text: str | None = None          # the id of the open text message
        self._reasoning: str | None = None     # the id of the open reasoning
        self._calls: dict[Any, str] = {}       # tool_call_chunks' index -> the open tool call's id
        self._waiting: dict[Any, str] = {}     # arguments of a tool call whose id and name have not come yet
        self._done: set[str] = set()           # messages ended (a whole message of the same id is not sent again)

    @property
    def open(self) -> bool:
        """Whether anything is open."""
        return self._text is not None or self._reasoning is not None

    def close(self) -> list[dict[str, Any]]:
        """END events of what is open, innermost first."""
        out: list[dict[str, Any]] = []
        for call in self._calls.values():
            out.append({"type": "TOOL_CALL_END", "toolCallId": call})
        self._calls.clear()
        self._waiting.clear()
        out += self._end_reasoning()
        if self._text is not None:
            out.append({"type": "TEXT_MESSAGE_END", "messageId": self._text})
            self._done.add(self._text)
            self._text = None
        return out

    def _end_reasoning(self) -> list[dict[str, Any]]:
        if self._reasoning is None:
            return []
        rid = self._reasoning
        self._reasoning = None
        return [{"type": "REASONING_MESSAGE_END", "messageId": rid}, {"type": "REASONING_END", "messageId": rid}]

    def feed(self, message: BaseMessage) -> list[dict[str, Any]]:
        """The events of one item of the messages stream."""
        if isinstance(message, AIMessageChunk):
            return self._chunk(message)
        if message.id is not None and message.id in self._done:
            return []
        out = self.close()
        mid = message.id
        if not isinstance(mid, str) or mid == "":
            return out  # LangGraph gives every message it hands out an id; one without cannot be followed
        if isinstance(message, ToolMessage):
            out.append({"type": "TOOL_CALL_RESULT", "messageId": mid, "toolCallId": message.tool_call_id,
                        "content": _text(message.content), "role": "tool"})
        elif isinstance(message, AIMessage):
            out.append({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
            text = _text(message.content)
            if text:
                out.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text})
            for i, call in enumerate(message.tool_calls):
                cid = call.get("id") or f"{mid}-call-{i}"
                out.append({"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": storable(call["name"]), "parentMessageId": mid})
                out.append({"type": "TOOL_CALL_ARGS", "toolCallId": cid,
                            "delta": storable(json.dumps(call.get("args", {}), separators=(",", ":"), ensure_ascii=False))})
                out.append({"type": "TOOL_CALL_END", "toolCallId": cid})
            out.append({"type": "TEXT_MESSAGE_END", "messageId": mid})
        else:
            role = next((r for cls, r in _ROLES.items() if isinstance(message, cls)), None)
            if role is None:
                return out
            if role == "system" and message.additional_kwargs.get("__openai_role__") == "developer":
                role = "developer"
            text = _text(message.content)
            out.append({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": role})
            if text:
                out.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text})
            out.append({"type": "TEXT_MESSAGE_END", "messageId": mid})
        self._done.add(mid)
        return out

    def _chunk(self, chunk: AIMessageChunk) -> list[dict[str, Any]]:
        mid = chunk.id
        if not isinstance(mid, str) or mid == "" or mid in self._done:
            return []
        out: list[dict[str, Any]] = []
        if self._text is not None and self._text != mid:
            out += self.close()
        if self._text is None:
            out.append({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
            self._text = mid
        thought = _reasoning(chunk)
        if thought:
            if self._reasoning is None:
                self._reasoning = f"{mid}:reasoning"
                out.append({"type": "REASONING_START", "messageId": self._reasoning})
                out.append({"type": "REASONING_MESSAGE_START", "messageId": self._reasoning, "role": "reasoning"})
            out.append({"type": "REASONING_MESSAGE_CONTENT", "messageId": self._reasoning, "delta": thought})
        text = _text(chunk.content)
        if text:
            out += self._end_reasoning()  # the answer begins: the thinking has ended
            out.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text})
        for tc in chunk.tool_call_chunks:
            index = tc.get("index")
            key: Any = tc.get("id") if index is None else index
            args = storable(tc.get("args") or "")
            if key not in self._calls:
                cid, name = tc.get("id"), tc.get("name")
                if not cid or not name:
                    self._waiting[key] = self._waiting.get(key, "") + args
                    continue
                out += self._end_reasoning()
                out.append({"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": storable(name), "parentMessageId": mid})
                self._calls[key] = cid
                args = self._waiting.pop(key, "") + args
            if args:
                out.append({"type": "TOOL_CALL_ARGS", "toolCallId": self._calls[key], "delta": args})
        if getattr(chunk, "chunk_position", None) == "last":
            out += self.close()
        return out


class LiveLogError(Exception):
    """The log's writer failed: the run cannot go on writing its events."""


def _bytes(event: Mapping[str, Any]) -> int:
    return len(json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode())


class LiveLog:
    """Events written to a log stream in batches that share commits (see the module's rule).

    ``conninfo``: the database (a connection of the log's own: its commits
    are not the saver's); ``stream``: the log stream; ``schema``: the
    saver's schema, whose ``publish(stream, event)`` appends an event (the
    saver's own function, with the saver's privileges)."""

    def __init__(
        self,
        conninfo: str,
        stream: str,
        *,
        schema: str = "langgraph",
        flush_ms: int = FLUSH_MS,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        max_pending_bytes: int = MAX_PENDING_BYTES,
    ) -> None:
        if flush_ms < 0 or max_batch_bytes < 1 or max_pending_bytes < max_batch_bytes:
            raise ValueError("flush_ms >= 0, max_batch_bytes >= 1, max_pending_bytes >= max_batch_bytes")
        self.stream = stream
        self._flush_s = flush_ms / 1000
        self._max_batch = max_batch_bytes
        self._max_pending = max_pending_bytes
        self._statement = sql.SQL(
            "SELECT {}.publish(%s, e.value) FROM pg_catalog.jsonb_array_elements(%s::jsonb) AS e(value)"
        ).format(sql.Identifier(schema))
        self._conn = psycopg.connect(conninfo, autocommit=False, application_name="hxstate-agui-live")
        self._cond = threading.Condition()
        self._events: list[dict[str, Any]] = []
        self._bytes = 0
        self._since: float | None = None
        self._urgent = False
        self._pushed = 0        # events pushed (a fragment that joined another counts)
        self._committed = 0
        self._inflight = 0      # bytes of the batch being written
        self._error: LiveLogError | None = None
        self._closed = False
        self.published = True   # False once the saver's publish() said this hxstate has no log streams
        self.stats = {"commits": 0, "events": 0, "pushes": 0}
        self._thread = threading.Thread(target=self._loop, name="hxstate-live-log", daemon=True)
        self._thread.start()

    @property
    def backlogged(self) -> bool:
        """Whether ``max_pending_bytes`` wait for the database (``push`` would wait)."""
        with self._cond:
            return self._bytes + self._inflight >= self._max_pending

    def drain(self) -> None:
        """Return once less than ``max_pending_bytes`` wait (at once if so)."""
        with self._cond:
            while self._bytes + self._inflight >= self._max_pending and self._error is None:
                self._urgent = True
                self._cond.notify_all()
                self._cond.wait()
            self._check()

    def push(self, events: Iterable[Mapping[str, Any]], *, urgent: bool = False, wait: bool = True) -> None:
        """Queue events (fragments of one construct join); waits while
        ``max_pending_bytes`` wait for the database (``wait=False``: not;
        an event loop calls ``drain()`` in a thread instead)."""
        with self._cond:
            self._check()
            for e in events:
                event = dict(e)
                member = _FRAGMENTS.get(event["type"])
                last = self._events[-1] if self._events else None
                if member and last is not None and last["type"] == event["type"] and last.get(member) == event.get(member):
                    last["delta"] += event["delta"]
                    self._bytes += len(json.dumps(event["delta"], ensure_ascii=False).encode()) - 2
                else:
                    self._events.append(event)
                    self._bytes += _bytes(event)
                self._pushed += 1
                self.stats["pushes"] += 1
                if self._since is None:
                    self._since = time.monotonic()
            if urgent:
                self._urgent = True
            self._cond.notify_all()
            while wait and self._bytes + self._inflight >= self._max_pending and self._error is None:
                self._urgent = True
                self._cond.notify_all()
                self._cond.wait()
            self._check()

    def flush(self) -> None:
        """Return once everything pushed so far is committed."""
        with self._cond:
            target = self._pushed
            self._urgent = True
            self._cond.notify_all()
            while self._committed < target and self._error is None:
                self._cond.wait()
            self._check()

    def close(self) -> None:
        """Flush, then stop the writer and close its connection."""
        try:
            if self._error is None:
                self.flush()
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            self._thread.join()
            self._conn.close()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise LiveLogError("the live log is closed")

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed and not self._events:
                        return
                    if self._events:
                        due = self._since + self._flush_s  # type: ignore[operator]
                        if self._urgent or self._bytes >= self._max_batch or self._closed or time.monotonic() >= due:
                            break
                        self._cond.wait(max(0.0, due - time.monotonic()))
                    else:
                        self._cond.wait()
                batch, upto = self._events, self._pushed
                self._inflight = self._bytes
                self._events, self._bytes, self._since, self._urgent = [], 0, None, False
            try:
                if self.published:
                    with self._conn.transaction():
                        rows = self._conn.execute(self._statement, (self.stream, json.dumps(batch))).fetchall()
                    if rows and rows[0][0] is None:
                        self.published = False  # this hxstate has no hx_stream_send: nothing to follow
                    self.stats["commits"] += 1
                    self.stats["events"] += len(batch)
                err = None
            except Exception as exc:  # noqa: BLE001 - the run gets it
                err = LiveLogError(f"writing the run's events to {self.stream} failed: {exc}")
                err.__cause__ = exc
            with self._cond:
                self._inflight = 0
                if err is not None:
                    self._error = err
                    self._events, self._bytes = [], 0
                else:
                    self._committed = upto
                self._cond.notify_all()
                if err is not None:
                    return


def stream_items(items: Iterable[Any]) -> Iterable[tuple[str, Any]]:
    """``graph.stream(..., stream_mode=[...])``'s items as (mode, value)
    (a subgraph's items carry their namespace first)."""
    for item in items:
        if isinstance(item, tuple) and len(item) == 3:
            _, mode, value = item
        else:
            mode, value = item
        yield mode, value


def feed_run(live: LiveLog, items: Iterable[Any]) -> None:
    """Write a graph's ``stream_mode=["messages", "updates"]`` items to
    ``live``: each message's events as they come, and, when a node's
    writes are reported (before LangGraph writes the step's checkpoint),
    the END of what is open, committed."""
    events = MessageEvents()
    try:
        for mode, value in stream_items(items):
            if mode == "messages":
                message = value[0] if isinstance(value, Sequence) else value
                if isinstance(message, BaseMessage):
                    out = events.feed(message)
                    if out:
                        live.push(out, urgent=any(_ends(e) for e in out))
            elif mode == "updates":
                live.push(events.close())
                live.flush()
    except BaseException:
        # what the failed node left open is closed (the writer's own failure aside)
        with contextlib.suppress(LiveLogError):
            live.push(events.close())
        raise
    live.push(events.close())


async def afeed_run(live: LiveLog, items: AsyncIterable[Any]) -> None:
    """``feed_run`` for ``graph.astream``: the writer's waits (a flush, a
    backlog) in a thread, not on the event loop."""
    events = MessageEvents()
    try:
        async for mode, value in _astream_items(items):
            if mode == "messages":
                message = value[0] if isinstance(value, Sequence) else value
                if isinstance(message, BaseMessage):
                    out = events.feed(message)
                    if out:
                        live.push(out, urgent=any(_ends(e) for e in out), wait=False)
                        if live.backlogged:
                            await asyncio.to_thread(live.drain)
            elif mode == "updates":
                live.push(events.close(), wait=False)
                await asyncio.to_thread(live.flush)
    except BaseException:
        with contextlib.suppress(LiveLogError):
            live.push(events.close(), wait=False)
        raise
    live.push(events.close(), wait=False)


async def _astream_items(items: AsyncIterable[Any]) -> AsyncIterator[tuple[str, Any]]:
    async for item in items:
        if isinstance(item, tuple) and len(item) == 3:
            _, mode, value = item
        else:
            mode, value = item
        yield mode, value


def _ends(event: Mapping[str, Any]) -> bool:
    """An event that ends something (its batch goes at once)."""
    t = str(event["type"])
    return t.endswith("_END") or t == "TOOL_CALL_RESULT"
