"""follow(): the JavaScript HxStream's guarantees, against a real server."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import psycopg
import pytest

from hxstate import errors
from hxstate.aio import Follower, follow
from hxstate.patch import PatchError, apply_event, apply_patch


@pytest.fixture
def table(conn: psycopg.Connection[Any]) -> str:
    conn.execute(
        """CREATE TABLE IF NOT EXISTS py_follow (k text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
           CREATE OR REPLACE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON py_follow
             FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'k', 'payload=ref')"""
    )
    return "py_follow"


def write(conn: psycopg.Connection[Any], key: str, n: int) -> None:
    conn.execute(
        "UPDATE py_follow SET state = hx_merge(state, %s::jsonb) WHERE k = %s",
        (json.dumps([{"op": "append", "path": "/items", "items": [n]}, {"op": "increment", "path": "/n", "by": 1}]), key),
    )


async def lose_event_4(
    conn: psycopg.Connection[Any], it: Any, f: Follower, key: str, state_before: Any, replaced: bool
) -> int:
    """The "failover", the follower away: seq 4 leaves the log and the row is
    put back to state_before, without the trigger; with replaced the "new
    primary" writes its own seq 4.  The follower's next item must be a
    resync (reason diverged) to the row; returns its seq."""
    with conn.transaction():
        conn.execute("SET LOCAL session_replication_role = replica")
        assert conn.execute("DELETE FROM hx_event WHERE stream = %s AND seq = 4", (f"py_follow:{key}",)).rowcount == 1
        conn.execute("UPDATE py_follow SET state = %s WHERE k = %s", (json.dumps(state_before), key))
    if replaced:
        conn.execute("""UPDATE py_follow SET state = hx_merge(state, '[{"op": "replace", "path": "/other", "value": 1}]') WHERE k = %s""", (key,))
    want = 4 if replaced else 3
    row = conn.execute("SELECT state FROM py_follow WHERE k = %s", (key,)).fetchone()
    assert row is not None
    async with asyncio.timeout(10):
        event, state = await anext(it)
    assert event["type"] == "STATE_SNAPSHOT" and event["metadata"]["reason"] == "diverged"
    assert event["metadata"]["seq"] == want and f.seq == want and state == row[0]
    return want


def kill_followers(conn: psycopg.Connection[Any]) -> None:
    """End every other session on the test's database (the follower's)."""
    killed = conn.execute(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname = current_database()"
    ).fetchone()
    assert killed is not None and killed[0] >= 1


async def take(f: Follower, n: int, timeout: float = 10.0) -> list[tuple[dict[str, Any], Any]]:
    out: list[tuple[dict[str, Any], Any]] = []
    it = f.__aiter__()
    async with asyncio.timeout(timeout):
        while len(out) < n:
            out.append(await anext(it))
    return out


async def test_snapshot_then_every_seq_once(dsn: str, conn: psycopg.Connection[Any], table: str) -> None:
    key = str(uuid.uuid4())
    conn.execute("INSERT INTO py_follow (k) VALUES (%s)", (key,))
    write(conn, key, 0)
    f = follow(dsn, table=table, key=key, poll_interval=0.2)
    it = f.__aiter__()
    first = await anext(it)
    assert first[0]["type"] == "STATE_SNAPSHOT" and first[0]["metadata"]["synthetic"] is True
    assert first[0]["metadata"]["seq"] == 2 and first[1] == {"items": [0], "n": 1}
    # a big write (a delta over NOTIFY's limit would be a reference; here
    # every payload is a reference) and several small ones
    conn.execute(
        "UPDATE py_follow SET state = hx_merge(state, %s::jsonb) WHERE k = %s",
        (json.dumps([{"op": "replace", "path": "/big", "value": "x" * 20000}]), key),
    )
    for i in range(1, 6):
        write(conn, key, i)
    seen = []
    async with asyncio.timeout(10):
        while len(seen) < 6:
            event, state = await anext(it)
            seen.append(event["metadata"]["seq"])
    assert seen == [3, 4, 5, 6, 7, 8]
    assert state["items"] == [0, 1, 2, 3, 4, 5] and state["n"] == 6 and len(state["big"]) == 20000
    await f.close()


async def test_forged_notification_is_only_a_wake_up(dsn: str, conn: psycopg.Connection[Any], table: str) -> None:
    """Any role that can connect can NOTIFY: the follower takes nothing from
    a payload, only from the log."""
    key = str(uuid.uuid4())
    conn.execute("INSERT INTO py_follow (k) VALUES (%s)", (key,))
    f = follow(dsn, table=table, key=key, poll_interval=30)
    it = f.__aiter__()
    await anext(it)
    channel = conn.execute("SELECT hx_stream_channel(%s)", (f"py_follow:{key}",)).fetchone()[0]  # type: ignore[index]
    forged = {"type": "STATE_SNAPSHOT", "snapshot": {"owned": True}, "metadata": {"stream": f"py_follow:{key}", "seq": 2}}
    waiting = asyncio.ensure_future(anext(it))
    await asyncio.sleep(0.5)  # the follower waits for a notification (its poll is 30 s away)
    conn.execute("SELECT pg_notify(%s, %s)", (channel, json.dumps(forged)))
    await asyncio.sleep(0.3)
    assert not waiting.done()  # the forged event was not handed out
    write(conn, key, 1)
    async with asyncio.timeout(10):
        event, state = await waiting
    assert event["type"] == "STATE_DELTA" and state == {"items": [1], "n": 1}
    assert f.stats["notifications"] >= 2 and f.stats["polls"] == 0
    await f.close()


async def test_resync_after_trim_and_stream_end(dsn: str, conn: psycopg.Connection[Any], table: str) -> None:
    key = str(uuid.uuid4())
    stream = f"py_follow:{key}"
    conn.execute("INSERT INTO py_follow (k) VALUES (%s)", (key,))
    f = follow(dsn, table=table, key=key, poll_interval=0.1)
    it = f.__aiter__()
    await anext(it)
    write(conn, key, 1)
    assert (await anext(it))[0]["metadata"]["seq"] == 2
    # the follower is slow: meanwhile three writes, and the log trimmed to
    # the last event (seq 5)
    for i in range(2, 5):
        write(conn, key, i)
    conn.execute("DELETE FROM hx_event WHERE stream = %s AND seq < 5", (stream,))
    event, state = await anext(it)
    assert event["type"] == "STATE_SNAPSHOT" and event["metadata"]["reason"] == "trimmed"
    assert event["metadata"]["seq"] == 5 and state["items"] == [1, 2, 3, 4]
    assert f.stats["resyncs"] == 1
    conn.execute("DELETE FROM py_follow WHERE k = %s", (key,))
    event, state = await anext(it)
    assert event["type"] == "CUSTOM" and event["name"] == "hx.stream_end" and state is None and f.ended
    # a follower that starts now starts from the end (the row's state is
    # NULL, its stream's last event hx.stream_end), as the JavaScript hub's
    g = follow(dsn, table=table, key=key, poll_interval=0.1)
    ((first, state),) = await take(g, 1)
    assert first == event and state is None and g.ended
    await g.close()
    # the key comes back: its snapshot event
    conn.execute("INSERT INTO py_follow (k, state) VALUES (%s, '{\"again\": true}')", (key,))
    event, state = await anext(it)
    assert event["type"] == "STATE_SNAPSHOT" and state == {"again": True} and not f.ended
    await f.close()


async def test_reconnect_catches_up(dsn: str, conn: psycopg.Connection[Any], table: str) -> None:
    key = str(uuid.uuid4())
    conn.execute("INSERT INTO py_follow (k) VALUES (%s)", (key,))
    f = follow(dsn, table=table, key=key, poll_interval=0.2, reconnect=(0.05, 0.2))
    it = f.__aiter__()
    await anext(it)
    write(conn, key, 1)
    await anext(it)
    # the follower's connection dies; writes go on meanwhile
    conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%' OR (backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname = current_database() AND state = 'idle' AND query ILIKE '%%hx_stream_events%%')"
    )
    for i in range(2, 5):
        write(conn, key, i)
    seqs = []
    async with asyncio.timeout(10):
        while len(seqs) < 3:
            event, state = await anext(it)
            seqs.append(event["metadata"]["seq"])
    assert seqs == [3, 4, 5] and state["items"] == [1, 2, 3, 4]
    assert f.stats["reconnects"] >= 1
    await f.close()


@pytest.mark.parametrize("replaced", [True, False], ids=["another-event-at-its-seq", "log-ends-below-it"])
async def test_reconnect_to_a_server_that_lost_an_event_resyncs(
    dsn: str, conn: psycopg.Connection[Any], table: str, replaced: bool
) -> None:
    """PostgreSQL can show a commit that a failover then loses (on the old
    primary, a commit whose wait for the standby is cut short becomes
    visible; the new primary never had it).  Made here on one server: while
    the follower is away, its last event leaves the log and the row is put
    back as it was before it, without the trigger; the "new primary" then
    writes an event of its own at that seq, or nothing.  The follower must
    resync (reason diverged) to the row, not go on from the lost event."""
    key = str(uuid.uuid4())
    conn.execute("INSERT INTO py_follow (k) VALUES (%s)", (key,))
    f = follow(dsn, table=table, key=key, poll_interval=0.2, reconnect=(0.05, 0.2))
    it = f.__aiter__()
    await anext(it)
    for i in range(1, 4):
        write(conn, key, i)
    got = [await anext(it) for _ in range(3)]
    assert [e["metadata"]["seq"] for e, _ in got] == [2, 3, 4]
    conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%' OR (backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname = current_database() AND state = 'idle' AND query ILIKE '%%hx_stream_events%%')"
    )
    want = await lose_event_4(conn, it, f, key, got[1][1], replaced)
    assert f.stats["resyncs"] == 1
    write(conn, key, 9)
    async with asyncio.timeout(10):
        event, state = await anext(it)
    assert event["metadata"]["seq"] == want + 1 and state["items"] == [1, 2, 9]
    await f.close()


@pytest.mark.parametrize("replaced", [True, False], ids=["another-event-at-its-seq", "log-ends-below-it"])
async def test_reconnect_positioned_by_a_snapshot_that_showed_a_lost_commit_resyncs(
    dsn: str, conn: psycopg.Connection[Any], table: str, replaced: bool
) -> None:
    """As above, for a follower whose position comes from its snapshot (it
    has handed out no event since): the snapshot was read at seq 4, which
    the "failover" then loses.  It must resync (diverged), as one that
    handed out event 4 does."""
    key = str(uuid.uuid4())
    stream = f"py_follow:{key}"
    conn.execute("INSERT INTO py_follow (k) VALUES (%s)", (key,))
    states = []
    for i in range(1, 4):
        write(conn, key, i)
        row = conn.execute("SELECT state FROM py_follow WHERE k = %s", (key,)).fetchone()
        assert row is not None
        states.append(row[0])
    f = follow(dsn, table=table, key=key, poll_interval=0.2, reconnect=(0.05, 0.2))
    it = f.__aiter__()
    event, state = await anext(it)
    assert event["metadata"] == {"stream": stream, "seq": 4, "synthetic": True} and state == states[2]
    kill_followers(conn)
    want = await lose_event_4(conn, it, f, key, states[1], replaced)
    assert f.stats["resyncs"] == 1 and f.stats["reconnects"] == 1
    write(conn, key, 9)
    async with asyncio.timeout(10):
        event, state = await anext(it)
    assert event["metadata"]["seq"] == want + 1 and state["items"] == [1, 2, 9]
    await f.close()


async def test_reconnect_positioned_by_a_snapshot_that_lost_nothing_goes_on(
    dsn: str, conn: psycopg.Connection[Any], table: str
) -> None:
    key = str(uuid.uuid4())
    conn.execute("INSERT INTO py_follow (k) VALUES (%s)", (key,))
    write(conn, key, 1)
    f = follow(dsn, table=table, key=key, poll_interval=0.2, reconnect=(0.05, 0.2))
    it = f.__aiter__()
    event, _ = await anext(it)
    assert event["metadata"]["seq"] == 2
    kill_followers(conn)
    write(conn, key, 2)
    async with asyncio.timeout(10):
        event, state = await anext(it)
    assert event["type"] == "STATE_DELTA" and event["metadata"]["seq"] == 3 and state["items"] == [1, 2]
    assert f.stats["resyncs"] == 0 and f.stats["reconnects"] == 1
    await f.close()


async def test_stream_without_snapshot_raises_trimmed(dsn: str, conn: psycopg.Connection[Any], table: str) -> None:
    key = str(uuid.uuid4())
    stream = f"py_follow:{key}"
    conn.execute("INSERT INTO py_follow (k) VALUES (%s)", (key,))
    for i in range(3):
        write(conn, key, i)
    conn.execute("DELETE FROM hx_event WHERE stream = %s AND seq = 2", (stream,))
    f = follow(dsn, stream=stream, after=0, poll_interval=0.1)
    it = f.__aiter__()
    assert (await anext(it))[0]["metadata"]["seq"] == 1
    with pytest.raises(errors.Trimmed):
        await anext(it)


def test_apply_patch_is_pure() -> None:
    before = {"a": [1, {"b": 2}], "c": {"d": 1}}
    after = apply_patch(before, [{"op": "add", "path": "/a/-", "value": 3}, {"op": "replace", "path": "/a/1/b", "value": 5}])
    assert after == {"a": [1, {"b": 5}, 3], "c": {"d": 1}}
    assert before == {"a": [1, {"b": 2}], "c": {"d": 1}}
    assert after["c"] is before["c"]  # untouched members are shared
    assert apply_patch({"a": 1}, [{"op": "move", "from": "/a", "path": "/b"}]) == {"b": 1}
    assert apply_patch({"a": [1]}, [{"op": "copy", "from": "/a", "path": "/b"}, {"op": "remove", "path": "/a/0"}]) == {"a": [], "b": [1]}
    for bad in (
        [{"op": "remove", "path": "/x"}],
        [{"op": "test", "path": "/a", "value": 2}],
        [{"op": "add", "path": "/a/5", "value": 1}],
        [{"op": "replace", "path": "/x", "value": 1}],
    ):
        with pytest.raises(PatchError):
            apply_patch({"a": [1]}, bad)
    assert apply_event({"x": 1}, {"type": "CUSTOM", "name": "hx.stream_end"}) is None
    assert apply_event({"x": 1}, {"type": "STATE_SNAPSHOT", "snapshot": {"y": 2}}) == {"y": 2}
    assert apply_event({"x": 1}, {"type": "RUN_STARTED"}) == {"x": 1}


# -- the followed state is bounded in bytes ------------------------------------------------------


def send(conn: psycopg.Connection[Any], stream: str, event: dict[str, Any]) -> None:
    conn.execute("SELECT hx_stream_send(%s, %s::jsonb)", (stream, json.dumps(event)))


async def test_copies_that_double_the_state_stop_that_stream(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """Fourteen deltas of one copy each (80 bytes apiece, each copying the
    whole state into a member of its own) would make a 1 kB
    state 16,384 times as long: the follower applies them while the state
    stays within max_state_bytes, then raises StateTooLarge (54000) for
    that stream, and another stream followed beside it goes on."""
    stream, other = f"@py:double-{uuid.uuid4()}", f"@py:beside-{uuid.uuid4()}"
    send(conn, stream, {"type": "STATE_SNAPSHOT", "snapshot": {"m": ["x" * 1000]}})
    send(conn, other, {"type": "STATE_SNAPSHOT", "snapshot": {"n": 0}})
    for i in range(14):
        send(conn, stream, {"type": "STATE_DELTA", "delta": [{"op": "copy", "from": "", "path": f"/c{i:02}"}]})
    bound = 100_000
    f = follow(dsn, stream=stream, after=0, poll_interval=0.1, max_state_bytes=bound)
    g = follow(dsn, stream=other, after=0, poll_interval=0.1, max_state_bytes=bound)
    got: list[tuple[dict[str, Any], Any]] = []
    it = f.__aiter__()
    with pytest.raises(errors.StateTooLarge) as e:
        async with asyncio.timeout(30):
            while True:
                got.append(await anext(it))
    assert e.value.sqlstate == "54000"
    assert f"stream {stream!r} cannot be followed within {bound} bytes: event" in str(e.value)
    # every state handed out was within the bound; the one that would pass it was not applied
    sizes = [len(json.dumps(s, separators=(",", ":"))) for _, s in got]
    assert all(n <= bound for n in sizes) and sizes[-1] * 2 > bound
    assert [ev["metadata"]["seq"] for ev, _ in got] == list(range(1, len(got) + 1)) and len(got) < 15
    assert f.seq == len(got)
    # that stream only: the other follower goes on
    (first,) = await take(g, 1)
    send(conn, other, {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/n", "value": 1}]})
    (second,) = await take(g, 1)
    assert first[1] == {"n": 0} and second[1] == {"n": 1}
    await f.close()
    await g.close()


async def test_a_snapshot_or_an_event_over_the_bound_is_not_read(dsn: str, conn: psycopg.Connection[Any], table: str) -> None:
    key = str(uuid.uuid4())
    conn.execute("INSERT INTO py_follow (k, state) VALUES (%s, %s)", (key, json.dumps({"big": "y" * 50_000})))
    f = follow(dsn, table=table, key=key, poll_interval=0.1, max_state_bytes=10_000)
    with pytest.raises(errors.StateTooLarge, match=r"its state at seq 1 is 50\d\d\d bytes"):
        await take(f, 1)
    # an event longer than the bound, after a state within it
    stream = f"@py:big-event-{uuid.uuid4()}"
    send(conn, stream, {"type": "STATE_SNAPSHOT", "snapshot": {}})
    send(conn, stream, {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/big", "value": "z" * 50_000}]})
    g = follow(dsn, stream=stream, after=0, poll_interval=0.1, max_state_bytes=10_000)
    it = g.__aiter__()
    assert (await anext(it))[1] == {}
    with pytest.raises(errors.StateTooLarge, match=r"event 2 is 50\d\d\d bytes"):
        await anext(it)


def test_sizes_kept_op_by_op() -> None:
    """apply_patch_sized keeps the size of the state's JSON text through
    adds, replaces, removes, moves and copies, as json_size measures it."""
    from hxstate.patch import apply_event_sized, json_size

    state: Any = {"a": [1, 2], "é": "ü" * 3}
    size = json_size(state)
    assert size == len(json.dumps(state, separators=(",", ":"), ensure_ascii=False).encode())
    patches = [
        [{"op": "add", "path": "/b", "value": {"c": "text"}}],
        [{"op": "add", "path": "/a/0", "value": "inserted"}],
        [{"op": "replace", "path": "/a/1", "value": [None, True, False, 1.5]}],
        [{"op": "remove", "path": "/é"}],
        [{"op": "copy", "from": "/b", "path": "/d"}, {"op": "copy", "from": "/a", "path": "/a/-"}],
        [{"op": "add", "path": "/b", "value": "replaced"}, {"op": "move", "from": "/d", "path": "/e"}],
        [{"op": "test", "path": "/b", "value": "replaced"}],
    ]
    for patch in patches:
        state, size = apply_event_sized(state, size, {"type": "STATE_DELTA", "delta": patch}, 10_000)
        assert size == json_size(state), (patch, size, json_size(state))
    state, size = apply_event_sized(state, size, {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "", "value": [1]}]}, 10_000)
    assert (state, size) == ([1], json_size([1]))
    with pytest.raises(errors.StateTooLarge):
        apply_event_sized({}, 2, {"type": "STATE_SNAPSHOT", "snapshot": {"x": "y" * 100}}, 50)


async def test_after_beyond_the_log_never_waits_silently(dsn: str, conn: psycopg.Connection[Any], table: str) -> None:
    """A resume point past the log's end: read again within a grace (the
    reconnect bounds), then a follower with a snapshot resyncs to it
    (reason ahead), and one of a stream by name raises ValueError."""
    key = str(uuid.uuid4())
    stream = f"py_follow:{key}"
    conn.execute("INSERT INTO py_follow (k) VALUES (%s)", (key,))
    write(conn, key, 1)
    f = follow(dsn, table=table, key=key, after=100, poll_interval=0.1, reconnect=(0.01, 0.02))
    it = f.__aiter__()
    async with asyncio.timeout(10):
        event, state = await anext(it)
    assert event["type"] == "STATE_SNAPSHOT" and event["metadata"]["reason"] == "ahead"
    assert event["metadata"]["seq"] == 2 and f.seq == 2 and state["items"] == [1]
    assert f.stats["resyncs"] == 1
    write(conn, key, 2)
    async with asyncio.timeout(10):
        event, state = await anext(it)
    assert event["metadata"]["seq"] == 3 and state["items"] == [1, 2]
    await f.close()

    g = follow(dsn, stream=stream, after=100, poll_interval=0.1, reconnect=(0.01, 0.02))
    with pytest.raises(ValueError, match=r"after=100 is beyond the end of the log of stream 'py_follow:"):
        async with asyncio.timeout(10):
            await anext(g.__aiter__())

    # at the head: found at once, and the next event is what comes (a
    # follower resumed without a base state takes it through a snapshot)
    h = follow(dsn, table=table, key=key, after=3, poll_interval=0.1, reconnect=(0.01, 0.02))
    hit = h.__aiter__()
    task = asyncio.ensure_future(anext(hit))
    await asyncio.sleep(0.3)
    write(conn, key, 3)
    async with asyncio.timeout(10):
        event, _ = await task
    assert event["metadata"]["seq"] == 4 and event["metadata"].get("reason") != "ahead"
    await h.close()


@pytest.mark.parametrize("after", [-1, True, "5", 1.5])
def test_after_is_a_seq(dsn: str, after: Any) -> None:
    with pytest.raises(ValueError, match="after must be a seq"):
        follow(dsn, stream="s", after=after)
