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
  writer.

  Each event is written once, whatever the connection does.  A batch is
  one statement, the saver's ``publish_batch(stream, events, writer,
  batch)``, which appends the events and records the batch's number for
  this writer (a uuid) in the saver's table ``live_batches``, in the same
  transaction.  A connection lost before COMMIT was sent committed
  nothing: the batch goes again, after a backoff (``backoff_ms``, 100 ms
  doubling to 5 s, each pause drawn from its upper half), on a new
  connection.  A connection lost while COMMIT was in flight leaves the
  commit in doubt: on a new connection the writer ends the old
  connection's backend (``pg_terminate_backend``: the COMMIT may still be
  on its way to it; once it is gone the outcome is settled), then reads
  its row of ``live_batches``: the batch is sent again only if its number
  is not there.  (The saver's role need not read the log: it reads its
  own table.)  A transient error (SQLSTATE class 40 or 53, 55P03, 57014)
  is tried again the same way.  The batch being retried counts toward
  ``max_pending_bytes``.  A batch that goes on failing for ``retry_s``
  (30), or a statement error (an event the database refuses, a
  privilege), fails the run (``LiveLogError``, the next ``push()`` or
  ``flush()`` raises it).  ``retry_s`` is at most an hour
  (``RETRY_S_MAX``).  ``close()`` deletes the writer's row.

  A writer that crashed leaves its row behind: each new log deletes the
  rows no batch has written for a day (``STALE_AFTER``).  That is safe for
  a writer still alive, however idle: its row is read only to settle a
  commit in doubt, within ``retry_s`` of that commit, whose batch wrote
  the row anew; and a batch whose row is gone inserts it again.

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
import random
import re
import threading
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from psycopg import sql

__all__ = [
    "FLUSH_MS",
    "MAX_BATCH_BYTES",
    "MAX_PENDING_BYTES",
    "RETRY_S",
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
RETRY_S = 30.0
#: the longest retry budget: well inside STALE_AFTER, so that a row a
#: commit in doubt is settled by is never one a sweep deletes
RETRY_S_MAX = 3600.0
#: a row of live_batches no batch has written for this long is a crashed
#: writer's: each new log deletes such rows
STALE_AFTER = "1 day"
BACKOFF_MS = (100, 5000)

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
    saver's schema, whose ``publish_batch(stream, events, writer, batch)``
    appends a batch's events and records the batch (the saver's own
    function, with the saver's privileges); ``retry_s``: how long a batch
    may go on failing for a lost connection or a transient error before
    the run fails."""

    def __init__(
        self,
        conninfo: str,
        stream: str,
        *,
        schema: str = "langgraph",
        flush_ms: int = FLUSH_MS,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        max_pending_bytes: int = MAX_PENDING_BYTES,
        retry_s: float = RETRY_S,
        backoff_ms: tuple[int, int] = BACKOFF_MS,
    ) -> None:
        if flush_ms < 0 or max_batch_bytes < 1 or max_pending_bytes < max_batch_bytes:
            raise ValueError("flush_ms >= 0, max_batch_bytes >= 1, max_pending_bytes >= max_batch_bytes")
        if not 0 <= retry_s <= RETRY_S_MAX or not 0 < backoff_ms[0] <= backoff_ms[1]:
            raise ValueError(f"0 <= retry_s <= {RETRY_S_MAX:g}, 0 < backoff_ms[0] <= backoff_ms[1]")
        self.stream = stream
        self._conninfo = conninfo
        self._flush_s = flush_ms / 1000
        self._max_batch = max_batch_bytes
        self._max_pending = max_pending_bytes
        self._retry_s = retry_s
        self._backoff = (backoff_ms[0] / 1000, backoff_ms[1] / 1000)
        self._writer = uuid.uuid4()   # names this log's row in live_batches
        self._batch = 0               # the number of the last batch sent
        q = sql.Identifier(schema)
        self._statement = sql.SQL("SELECT {}.publish_batch(%s, %s::jsonb, %s, %s)").format(q)
        self._landed_statement = sql.SQL("SELECT b.batch FROM {}.live_batches b WHERE b.writer = %s").format(q)
        self._forget_statement = sql.SQL("DELETE FROM {}.live_batches WHERE writer = %s").format(q)
        self._sweep_statement = sql.SQL(
            "DELETE FROM {}.live_batches WHERE committed_at < pg_catalog.now() - %s::interval").format(q)
        self._conn: psycopg.Connection[Any] | None = None
        self._backend: tuple[int, Any] | None = None   # the connection's backend: (pid, backend_start)
        self._connect()  # a database that cannot be reached fails the run at once
        self._sweep()
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
        self.stats = {"commits": 0, "events": 0, "pushes": 0, "retries": 0, "in_doubt": 0}
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
        """Flush, then stop the writer, forget its batches and close its connection."""
        try:
            if self._error is None:
                self.flush()
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            self._thread.join()
            conn, self._conn = self._conn, None
            if conn is not None:
                # (best effort: a row left behind names a log that is gone, and costs nothing but its bytes)
                with contextlib.suppress(psycopg.Error):
                    with conn.transaction():
                        conn.execute(self._forget_statement, (self._writer,))
                conn.close()

    def _sweep(self) -> None:
        """Delete the rows of crashed writers (no batch for STALE_AFTER).
        Best effort, as close()'s: a schema without the table (the saver's
        setup() not run since) is reported by the first batch, a lost
        connection is opened again by it."""
        conn = self._connect()
        with contextlib.suppress(psycopg.Error):
            with conn.transaction():
                conn.execute(self._sweep_statement, (STALE_AFTER,))

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise LiveLogError("the live log is closed")

    def _connect(self) -> psycopg.Connection[Any]:
        """The log's connection (a new one when the last was lost)."""
        if self._conn is None or self._conn.closed:
            self._conn = None
            conn = psycopg.connect(self._conninfo, autocommit=False, application_name="hxstate-agui-live")
            try:
                row = conn.execute("SELECT a.backend_start FROM pg_catalog.pg_stat_activity a "
                                   "WHERE a.pid = pg_catalog.pg_backend_pid()").fetchone()
                conn.commit()
            except BaseException:
                conn.close()
                raise
            self._backend = (conn.info.backend_pid, row[0] if row else None)
            self._conn = conn
        return self._conn

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
            err = None
            try:
                if self.published:
                    self._write(batch)
                    self.stats["commits"] += 1
                    self.stats["events"] += len(batch)
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

    def _write(self, batch: list[dict[str, Any]]) -> None:
        """Commit batch once, whatever the connection does: a connection
        lost before COMMIT was sent, or a transient error, and the batch
        goes again; lost while COMMIT was in flight, and the batch goes
        again only if live_batches says it did not land.  A statement
        error, or ``retry_s`` of failures, raises."""
        self._batch += 1
        number = self._batch
        text = json.dumps(batch)
        deadline: float | None = None
        delay = self._backoff[0]
        in_doubt: tuple[int, Any] | None = None  # the backend that had the COMMIT
        while True:
            committing = False
            try:
                conn = self._connect()
                if in_doubt is not None:
                    if self._landed(conn, in_doubt, number):
                        return
                    in_doubt = None
                row = conn.execute(self._statement, (self.stream, text, self._writer, number)).fetchone()
                committing = True
                conn.commit()
                if row is not None and row[0] is None:
                    self.published = False  # this hxstate has no hx_stream_send: nothing to follow
                return
            except psycopg.Error as exc:
                lost = self._conn is None or self._conn.closed or self._conn.broken or _lost(exc.sqlstate)
                if lost:
                    if self._conn is not None:
                        with contextlib.suppress(psycopg.Error):
                            self._conn.close()
                        self._conn = None
                    if committing and in_doubt is None:
                        self.stats["in_doubt"] += 1
                        in_doubt = self._backend
                elif _transient(exc.sqlstate):
                    with contextlib.suppress(psycopg.Error):
                        self._conn.rollback()  # type: ignore[union-attr]
                else:
                    with contextlib.suppress(psycopg.Error):
                        self._conn.rollback()  # type: ignore[union-attr]
                    if exc.sqlstate in ("3F000", "42883", "42P01"):
                        raise LiveLogError(
                            f"the saver's schema has no publish_batch() or live_batches: run the saver's setup() ({exc})"
                        ) from exc
                    raise
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self._retry_s
                if now >= deadline:
                    raise LiveLogError(f"the batch could not be written in {self._retry_s:g} s: {exc}") from exc
                self.stats["retries"] += 1
                # capped, with full jitter in its upper half; never past the budget
                pause = min(random.uniform(delay / 2, delay), deadline - now)
                delay = min(delay * 2, self._backoff[1])
                time.sleep(pause)

    def _landed(self, conn: psycopg.Connection[Any], backend: tuple[int, Any] | None, number: int) -> bool:
        """Did batch number land?  The backend that had its COMMIT is ended
        first (its COMMIT may still be on its way to it: once it is gone,
        the outcome is settled), then live_batches is read."""
        if backend is not None and backend[1] is not None:
            row = conn.execute(
                "SELECT pg_catalog.bool_and(pg_catalog.pg_terminate_backend(a.pid, 5000)) FROM pg_catalog.pg_stat_activity a "
                "WHERE a.pid = %s AND a.backend_start = %s", backend).fetchone()
            if row is not None and row[0] is False:
                conn.rollback()
                raise psycopg.errors.LockNotAvailable("the connection that sent the COMMIT has not ended yet")
        row = conn.execute(self._landed_statement, (self._writer,)).fetchone()
        conn.commit()
        return row is not None and row[0] == number


_TRANSIENT = ("40", "53")


def _lost(sqlstate: str | None) -> bool:
    """An error that ends the connection (class 08, the server shutting down or starting)."""
    return sqlstate is not None and (sqlstate.startswith("08") or sqlstate in ("57P01", "57P02", "57P03"))


def _transient(sqlstate: str | None) -> bool:
    """An error that may pass (a serialization failure or deadlock, the
    server short of resources, a lock not available, a statement
    cancelled): the batch goes again."""
    return sqlstate is not None and (sqlstate[:2] in _TRANSIENT or sqlstate in ("55P03", "57014"))


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
