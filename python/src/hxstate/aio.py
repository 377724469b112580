"""The async API: the helpers on an AsyncConnection, and ``follow()``, a
stream's AG-UI events as an async iterator.

    async for event, state in follow(conninfo, table="sessions", key="s-42"):
        print(event["metadata"]["seq"], event["type"], state)

The follower keeps the JavaScript HxStream's guarantees:

- it starts from a snapshot and its seq (``hx_stream_snapshot``, or a
  source function ``(keys text[]) RETURNS TABLE (key, stream, seq, state)``
  such as HxSaver's ``threads``), handed out as a synthetic
  ``STATE_SNAPSHOT`` (``metadata.synthetic: true``); a stream that has
  ended (its state NULL, its last event ``hx.stream_end``) starts from
  that event instead, with the state None;
- then every event in seq order, each seq exactly once, with the state
  after it;
- content comes only from the event log (``hx_stream_events``), read under
  the follower's own privileges: a notification is a wake-up and nothing
  more (any role that can connect can send one), and the log is read at
  every wake-up and every ``poll_interval`` seconds, so gaps, references
  and lost notifications are filled from it;
- when the log no longer continues its cursor (trimmed), it resyncs from a
  fresh snapshot (a stream without a snapshot source raises Trimmed);
- ``hx.stream_end`` is handed out with the state None, and following goes
  on (a key inserted again starts with its snapshot event);
- its state is bounded in bytes (``max_state_bytes``, 64 MiB, the length
  of the state's JSON text): a snapshot or an event longer than that is
  not read from the server, and a delta that would make the state longer
  (a ``copy`` shares what it copies, so a few bytes can double a state's
  text) is not applied; the follower then raises ``StateTooLarge``
  (54000) and stops.  The log is read in pages of at most ``page_size``
  events and about ``max_state_bytes`` bytes;
- a lost connection is retried with jittered, doubling backoff, and the
  follower catches up from its cursor; first it checks that the log still
  holds, at its cursor's seq, the event it handed out there.  PostgreSQL
  can show a commit that a failover then loses (made visible on the old
  primary when its wait for the standby was cut short, never replicated):
  if the new server's log has another event there, or ends below it, the
  follower resyncs from a fresh snapshot (reason ``diverged``), which may
  be older than its cursor.  A follower positioned by a snapshot compares
  the digest of the log's event at the snapshot's seq, read with it.
"""

from __future__ import annotations

import asyncio
import random
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from psycopg import sql

from hxstate import base
from hxstate.errors import NotSetUp, StateTooLarge, Trimmed, errors
from hxstate.patch import PatchError, apply_event_sized, is_end, json_size

__all__ = ["MAX_STATE_BYTES", "follow", "Follower", "merge", "stage", "promote", "state_at", "events", "hx_schema"]

#: a follower's default bound on its state, in bytes of JSON text
MAX_STATE_BYTES = 64 << 20

_schemas: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], str] = weakref.WeakKeyDictionary()


async def hx_schema(conn: psycopg.AsyncConnection[Any]) -> str:
    s = _schemas.get(conn)
    if s is None:
        row = await (await conn.execute(base.SCHEMA_SQL)).fetchone()
        if row is None:
            raise NotSetUp('extension "hxstate" is not installed in this database')
        s = _schemas[conn] = row[0]
    return s


async def merge(
    conn: psycopg.AsyncConnection[Any],
    table: str | tuple[str, ...],
    key_column: str,
    key: Any,
    writes: Any,
    *,
    state_column: str = "state",
) -> Any:
    """hxstate.merge, async."""
    with errors():
        cur = await conn.execute(
            base.merge_sql(await hx_schema(conn), table, key_column, state_column), (base.json_param(writes), key)
        )
        row = await cur.fetchone()
    return None if row is None else row[0]


async def stage(
    conn: psycopg.AsyncConnection[Any],
    stream: str,
    step: str,
    call: str,
    writes: Any,
    ord: int | None = None,
) -> bool:
    """hxstate.stage, async."""
    with errors():
        cur = await conn.execute(base.stage_sql(await hx_schema(conn)), (stream, step, call, base.json_param(writes), ord))
        row = await cur.fetchone()
    assert row is not None
    return bool(row[0])


async def promote(
    conn: psycopg.AsyncConnection[Any],
    table: str | tuple[str, ...],
    key_column: str,
    key: Any,
    stream: str,
    step: str,
    *,
    state_column: str = "state",
) -> Any:
    """hxstate.promote, async."""
    with errors():
        cur = await conn.execute(
            base.promote_sql(await hx_schema(conn), table, key_column, state_column), (stream, step, key)
        )
        row = await cur.fetchone()
    return None if row is None else row[0]


async def state_at(conn: psycopg.AsyncConnection[Any], stream: str, seq: int) -> Any:
    """hxstate.state_at, async."""
    with errors():
        cur = await conn.execute(base.state_at_sql(await hx_schema(conn)), (stream, seq))
        row = await cur.fetchone()
    assert row is not None
    return row[0]


async def events(conn: psycopg.AsyncConnection[Any], stream: str, after: int = 0, max_events: int = 1000) -> list[tuple[int, Any]]:
    """hxstate.events, async."""
    with errors():
        cur = await conn.execute(base.events_sql(await hx_schema(conn)), (stream, after, max_events))
        return [(r[0], r[1]) for r in await cur.fetchall()]


class Follower:
    """One stream, followed: an async iterator of ``(event, state)``."""

    def __init__(
        self,
        conninfo: str,
        *,
        table: str | None = None,
        key: str | None = None,
        source: str | None = None,
        stream: str | None = None,
        after: int | None = None,
        poll_interval: float = 2.0,
        page_size: int = 1000,
        reconnect: tuple[float, float] = (0.1, 5.0),
        max_state_bytes: int = MAX_STATE_BYTES,
    ) -> None:
        if sum(x is not None for x in (table, source, stream)) != 1:
            raise ValueError("follow one of: table= and key=, source= and key=, or stream=")
        if (table is not None or source is not None) and key is None:
            raise ValueError("table= and source= need key=")
        self.conninfo = conninfo
        self.table = table
        self.source = source
        self.key = key
        self.stream = stream
        self.poll_interval = poll_interval
        self.page_size = page_size
        self.reconnect_bounds = reconnect
        if max_state_bytes < 1:
            raise ValueError("max_state_bytes must be positive")
        self.max_state_bytes = max_state_bytes
        #: the length of the state's JSON text, as json_size counts it
        self.state_bytes = 0
        if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
            raise ValueError("after must be a seq: an int >= 0")
        #: seq of the last event handed out (None before the first)
        self.seq: int | None = after
        #: a resume point (after > 0) not yet found in the log
        self._ahead = after is not None and after > 0
        #: the state after the last event handed out
        self.state: Any = None
        self.ended = False
        self.stats = {"events": 0, "pages": 0, "notifications": 0, "resyncs": 0, "reconnects": 0, "polls": 0}
        self._closed = False
        self._conn: psycopg.AsyncConnection[Any] | None = None
        #: the event handed out at self.seq, when it came from the log
        self._last: dict[str, Any] | None = None
        #: when self.seq came from a snapshot: the SHA-256 of the JSON text
        #: of the log's event at that seq, read with the snapshot (None:
        #: the log did not hold it)
        self._last_digest: bytes | None = None

    async def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            await self._conn.close()

    def __aiter__(self) -> AsyncIterator[tuple[dict[str, Any], Any]]:
        return self._run()

    async def _snapshot(
        self, conn: psycopg.AsyncConnection[Any], hx: str
    ) -> tuple[str, int, Any, dict[str, Any] | None, bytes | None] | None:
        """The stream, its seq and the state at it, in one statement; when
        the state is NULL, the stream's last event (did it end?); and the
        digest of the event at seq, which a reconnect after a failover
        compares (_verify)."""
        if self.table is not None:
            source = sql.SQL("{}.hx_stream_snapshot(%s::regclass, %s)").format(sql.Identifier(hx))
            params: tuple[Any, ...] = (self.table, self.key)
        elif self.source is not None:
            source = sql.SQL("{}(ARRAY[%s]::text[])").format(base.table_name(self.source))
            params = (self.key,)
        else:
            return None
        # the state's length is measured by the server, and a state over
        # the bound is not sent
        q = sql.SQL(
            "SELECT s.stream, s.seq, CASE WHEN s.n <= %s THEN s.state END, s.n, "
            "(SELECT e.event FROM {hx}.hx_event e WHERE s.state IS NULL AND s.seq > 0 AND e.stream = s.stream AND e.seq = s.seq), "
            "(SELECT {digest} FROM {hx}.hx_event e WHERE s.seq > 0 AND e.stream = s.stream AND e.seq = s.seq) "
            "FROM (SELECT x.*, pg_catalog.octet_length(x.state::text) AS n FROM {source} x) s"
        ).format(hx=sql.Identifier(hx), digest=_DIGEST, source=source)
        cur = await conn.execute(q, (self.max_state_bytes, *params))
        row = await cur.fetchone()
        if row is None or row[0] is None:
            raise LookupError(f"no stream for key {self.key!r}")
        if row[3] is not None and row[3] > self.max_state_bytes:
            self.stream = row[0]
            self._too_large(f"its state at seq {row[1]} is {row[3]} bytes")
        return row[0], int(row[1]), row[2], row[4], row[5]

    def _too_large(self, what: str) -> None:
        self._closed = True
        raise StateTooLarge(
            f"stream {self.stream!r} cannot be followed within {self.max_state_bytes} bytes: {what}",
            hint="Follow it with a larger max_state_bytes, or keep the stream's state smaller.",
        )

    def _start_from(self, snap: tuple[str, int, Any, dict[str, Any] | None, bytes | None]) -> dict[str, Any]:
        """Take a snapshot: the event that hands it out, the stream's end
        when it ended."""
        self.seq, self.state = snap[1], snap[2]
        self.state_bytes = json_size(self.state) if self.state is not None else 0
        self._last = None
        self._last_digest = snap[4]
        last = snap[3]
        self.ended = last is not None and is_end(last)
        if self.ended:
            assert last is not None
            self.state = None
            return last
        return self._synthetic(self.state)

    def _synthetic(self, state: Any) -> dict[str, Any]:
        return {
            "type": "STATE_SNAPSHOT",
            "snapshot": state,
            "timestamp": int(time.time() * 1000),
            "metadata": {"stream": self.stream, "seq": self.seq or 0, "synthetic": True},
        }

    async def _run(self) -> AsyncIterator[tuple[dict[str, Any], Any]]:
        delay = self.reconnect_bounds[0]
        first = True
        while not self._closed:
            try:
                async with await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True) as conn:
                    self._conn = conn
                    hx = await hx_schema(conn)
                    if self.stream is None:
                        snap = await self._snapshot(conn, hx)
                        assert snap is not None
                        self.stream = snap[0]
                    cur = await conn.execute(sql.SQL("SELECT {}.hx_stream_channel(%s)").format(sql.Identifier(hx)), (self.stream,))
                    channel = (await cur.fetchone() or [""])[0]
                    # armed before the snapshot is read: nothing committed
                    # after it can go unnoticed
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    if not first:
                        self.stats["reconnects"] += 1
                    delay = self.reconnect_bounds[0]
                    if self.seq is None:
                        snap = await self._snapshot(conn, hx)
                        if snap is not None:
                            yield self._start_from(snap), self.state
                        else:
                            self.seq = 0
                    elif self._ahead:
                        async for item in self._find_resume_point(conn, hx):
                            yield item
                    elif not first:
                        async for item in self._verify(conn, hx):
                            yield item
                    first = False
                    while not self._closed:
                        async for item in self._catch_up(conn, hx):
                            yield item
                        got = False
                        async for _ in conn.notifies(timeout=self.poll_interval, stop_after=1):
                            got = True
                        if got:
                            self.stats["notifications"] += 1
                        else:
                            self.stats["polls"] += 1
            except (psycopg.OperationalError, psycopg.InterfaceError):
                if self._closed:
                    return
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, self.reconnect_bounds[1])
            finally:
                self._conn = None

    async def _page(
        self, conn: psycopg.AsyncConnection[Any], hx: str, after: int, limit: int
    ) -> tuple[list[tuple[int, Any, int]], bool]:
        """The stream's events after ``after``: at most ``limit``, and no
        more than about max_state_bytes of them (at least one), each
        measured by the server and not sent when it is longer than that
        (None).  Returns (seq, event, its length) for each, and whether
        there may be more."""
        cur = await conn.execute(
            sql.SQL(
                "SELECT x.seq, CASE WHEN x.n <= %(max)s THEN x.event END, x.n, x.k "
                "FROM (SELECT y.seq, y.event, y.n, pg_catalog.sum(y.n) OVER (ORDER BY y.seq) AS c, "
                "pg_catalog.count(*) OVER () AS k "
                "FROM (SELECT e.seq, e.event, pg_catalog.octet_length(e.event::text) AS n "
                "FROM {}.hx_stream_events(%(stream)s, %(after)s, %(limit)s) e) y) x "
                "WHERE x.c - x.n < %(max)s ORDER BY x.seq"
            ).format(sql.Identifier(hx)),
            {"max": self.max_state_bytes, "stream": self.stream, "after": after, "limit": limit},
        )
        rows = await cur.fetchall()
        return [(r[0], r[1], r[2]) for r in rows], bool(rows) and (len(rows) < rows[0][3] or rows[0][3] == limit)

    async def _catch_up(self, conn: psycopg.AsyncConnection[Any], hx: str) -> AsyncIterator[tuple[dict[str, Any], Any]]:
        while True:
            assert self.seq is not None and self.stream is not None
            rows, more = await self._page(conn, hx, self.seq, self.page_size)
            self.stats["pages"] += 1
            if not rows:
                return
            if rows[0][0] != self.seq + 1:
                async for item in self._resync(conn, hx, "trimmed"):
                    yield item
                continue
            for seq, event, n in rows:
                if seq != self.seq + 1:
                    break
                if event is None:
                    self._too_large(f"event {seq} is {n} bytes")
                try:
                    state, size = apply_event_sized(self.state, self.state_bytes, event, self.max_state_bytes)
                except PatchError:
                    async for item in self._resync(conn, hx, "invalid"):
                        yield item
                    break
                except StateTooLarge:
                    self._too_large(f"event {seq} would make its state longer")
                self.seq, self.state, self.state_bytes, self._last = seq, state, size, event
                self.ended = is_end(event)
                self.stats["events"] += 1
                yield event, state
            if not more:
                return

    async def _verify(self, conn: psycopg.AsyncConnection[Any], hx: str) -> AsyncIterator[tuple[dict[str, Any], Any]]:
        """After a reconnect: is the event handed out at the cursor still
        in the log, unchanged?  Else resync (reason ``diverged``)."""
        if not self.seq:
            return
        if self._last is not None:
            rows, _ = await self._page(conn, hx, self.seq - 1, 1)
            row: tuple[int, Any] | None = (rows[0][0], rows[0][1]) if rows else None
            mine: Any = self._last
        elif self._last_digest is not None:
            # positioned by a snapshot: a snapshot read on a primary that a
            # failover then lost commits from may show one of them
            cur = await conn.execute(
                sql.SQL("SELECT e.seq, {} FROM {}.hx_stream_events(%s, %s, 1) e").format(_DIGEST, sql.Identifier(hx)),
                (self.stream, self.seq - 1),
            )
            found = await cur.fetchone()
            row = (found[0], bytes(found[1])) if found else None
            mine = self._last_digest
        else:
            return
        if row is not None and row[0] > self.seq:
            return  # trimmed past the cursor, and the log goes on: nothing to compare
        if row is None or row[1] != mine:
            async for item in self._resync(conn, hx, "diverged"):
                yield item

    async def _find_resume_point(
        self, conn: psycopg.AsyncConnection[Any], hx: str
    ) -> AsyncIterator[tuple[dict[str, Any], Any]]:
        """``after`` beyond the log's end never waits silently.  The log may
        end below it for a while only (a commit announced an instant before
        it is visible, a server behind the one the seq came from), so it is
        read again 8 times, the wait doubling within the reconnect bounds
        (about 16 s by default); then a follower with a snapshot resyncs to
        it (reason ``ahead``), one of a stream by name raises ValueError."""
        assert self.seq is not None
        delay = self.reconnect_bounds[0]
        for attempt in range(9):
            rows, _ = await self._page(conn, hx, self.seq - 1, 1)
            if rows:
                self._ahead = False  # the log holds it (or was trimmed past it, and goes on)
                return
            if attempt == 8 or self._closed:
                break
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.reconnect_bounds[1])
        self._ahead = False
        if self.table is None and self.source is None:
            self._closed = True
            raise ValueError(f"after={self.seq} is beyond the end of the log of stream {self.stream!r}")
        async for item in self._resync(conn, hx, "ahead"):
            yield item

    async def _resync(self, conn: psycopg.AsyncConnection[Any], hx: str, reason: str) -> AsyncIterator[tuple[dict[str, Any], Any]]:
        snap = await self._snapshot(conn, hx)
        if snap is None:
            if reason == "diverged":
                raise Trimmed(
                    f"the server no longer has event {self.seq} of stream {self.stream!r} as it was read "
                    "(a failover lost that commit)",
                    hint="Follow it with table= or source= to resync from a snapshot.",
                )
            raise Trimmed(
                f"the log of stream {self.stream!r} no longer continues seq {self.seq}",
                hint="Follow it with table= or source= to resync from a snapshot.",
            )
        self.stats["resyncs"] += 1
        event = self._start_from(snap)
        if not self.ended:
            event["metadata"]["reason"] = reason
        yield event, self.state


#: the digest of a log row's event e (its JSON text, as the server writes it)
_DIGEST = sql.SQL("pg_catalog.sha256(pg_catalog.convert_to(e.event::pg_catalog.text, 'UTF8'))")


def follow(conninfo: str, **kwargs: Any) -> Follower:
    """Follow one stream: ``follow(conninfo, table=..., key=...)``,
    ``follow(conninfo, source=..., key=...)`` or ``follow(conninfo, stream=...)``
    (options as Follower's)."""
    return Follower(conninfo, **kwargs)
