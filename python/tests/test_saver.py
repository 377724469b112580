"""HxSaver's storage and reads: a cold read (a fresh saver, as another
process reads a thread) and list() give every checkpoint's state, across
snapshots, forks, prunes and parents not older than their children; rows under 2 kB
are stored compressed; LangGraph's bookkeeping is packed; messages are
built as model_construct builds them."""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.base import empty_checkpoint

from hxstate.langgraph import HxSaver
from hxstate.langgraph import sql as Q
from hxstate.langgraph import storage as B
from hxstate.langgraph import codec as C

SCHEMA = "lg_saver"


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as c:
        HxSaver(c, schema=SCHEMA).setup()
        yield c


def text(rng: random.Random, n: int = 900) -> str:
    words = "state agent tool call message model thread checkpoint stream event delta snapshot".split()
    return " ".join(rng.choice(words) for _ in range(n // 6))[:n]


class Thread:
    """Puts checkpoints on a thread by hand, remembering each one's state."""

    def __init__(self, saver: HxSaver, thread: str) -> None:
        self.saver = saver
        self.thread = thread
        self.states: dict[str, dict[str, Any]] = {}
        self.n = 0

    def put(
        self, parent: Any, values: dict[str, Any], *, source: str = "loop", cid: str | None = None, **metadata: Any
    ) -> Any:
        self.n += 1
        cp = empty_checkpoint()
        cp["id"] = cid or f"{self.n:06d}"
        cp["channel_values"] = values
        cp["channel_versions"] = {ch: self.n for ch in values}
        config = parent or {"configurable": {"thread_id": self.thread, "checkpoint_ns": ""}}
        md: Any = {"source": source, "step": self.n, **metadata}
        out = self.saver.put(config, cp, md, dict(cp["channel_versions"]))
        self.states[cp["id"]] = json.loads(json.dumps(values))
        return out


def cold(conn: psycopg.Connection[Any], thread: str, cid: str | None = None) -> dict[str, Any]:
    """A checkpoint's values as a fresh saver reads them."""
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if cid:
        conf["checkpoint_id"] = cid
    t = HxSaver(conn, schema=SCHEMA).get_tuple({"configurable": conf})
    assert t is not None
    return dict(t.checkpoint["channel_values"])


def listed(conn: psycopg.Connection[Any], thread: str) -> dict[str, Any]:
    """Every checkpoint's values as a fresh saver's list() gives them."""
    saver = HxSaver(conn, schema=SCHEMA)
    return {t.checkpoint["id"]: dict(t.checkpoint["channel_values"]) for t in saver.list({"configurable": {"thread_id": thread}})}


def state_at(conn: psycopg.Connection[Any], thread: str, cid: str) -> Any:
    return conn.execute(f"SELECT {SCHEMA}.state_at(%s, '', %s)", (thread, cid)).fetchone()[0]  # type: ignore[index]


def test_cold_reads_across_snapshots_and_forks(conn: psycopg.Connection[Any]) -> None:
    """Every checkpoint of a thread with snapshots, edits, removals and a
    fork whose rows lie between its snapshot and its checkpoints reads
    back as it was put, by a fresh saver and by state_at."""
    rng = random.Random(1)
    t = Thread(HxSaver(conn, schema=SCHEMA, snapshot_min_bytes=4096, rebuild_factor=1), "cold-1")
    msgs: list[dict[str, Any]] = []
    cfg = t.put(None, {"messages": [], "plan": "a"}, source="input")
    configs = [cfg]
    for i in range(40):
        msgs = msgs + [{"id": f"m{i}", "type": "note", "text": text(rng)}]
        if i % 7 == 3:
            msgs[0] = {**msgs[0], "text": f"edited {i}"}
        if i % 11 == 5:
            del msgs[1]
        cfg = t.put(cfg, {"messages": msgs, "plan": f"step {i}"})
        configs.append(cfg)
    # a fork from the middle, and the main line edited by hand: rows of
    # both branches interleave after their snapshot (sources a run does not
    # write, so neither is refused as a second writer)
    fork = configs[20]
    main = cfg
    for i in range(6):
        fork = t.put(fork, {"messages": msgs[:10] + [{"id": f"f{i}", "type": "note", "text": text(rng)}], "plan": "fork"},
                     source="fork")
        main = t.put(main, {"messages": msgs + [{"id": f"x{i}", "type": "note", "text": text(rng)}], "plan": "main"},
                     source="update")
    snapshots = conn.execute(
        f"SELECT count(*) FROM {SCHEMA}.checkpoints WHERE thread_id = 'cold-1' AND snapshot IS NOT NULL"
    ).fetchone()[0]  # type: ignore[index]
    assert snapshots >= 3
    for cid, values in t.states.items():
        assert cold(conn, "cold-1", cid) == values, cid
        assert state_at(conn, "cold-1", cid) == values, cid
    assert cold(conn, "cold-1") == t.states[max(t.states)]
    assert listed(conn, "cold-1") == t.states
    # a page of the history: states rebuilt from the rows that page needs
    before = configs[30]["configurable"]["checkpoint_id"]
    page = list(HxSaver(conn, schema=SCHEMA).list({"configurable": {"thread_id": "cold-1"}}, limit=5, before=configs[30]))
    assert [p.checkpoint["id"] for p in page] == sorted((c for c in t.states if c < before), reverse=True)[:5]
    assert all(p.checkpoint["channel_values"] == t.states[p.checkpoint["id"]] for p in page)


def test_cold_read_when_a_parent_is_not_older(conn: psycopg.Connection[Any]) -> None:
    """Ids that do not grow along the chain (a parent newer than its
    child): the range from the snapshot does not hold the chain, and the
    read walks it with chain()."""
    t = Thread(HxSaver(conn, schema=SCHEMA), "cold-2")
    c1 = t.put(None, {"messages": [{"id": "a", "text": "1"}]}, source="input", cid="500")
    c2 = t.put(c1, {"messages": [{"id": "a", "text": "1"}, {"id": "b", "text": "2"}]}, cid="300", source="update")
    t.put(c2, {"messages": [{"id": "a", "text": "1"}, {"id": "b", "text": "2"}, {"id": "c", "text": "3"}]}, cid="400",
          source="update")
    for cid, values in t.states.items():
        assert cold(conn, "cold-2", cid) == values, cid
    assert listed(conn, "cold-2") == t.states


def test_cold_read_after_prune_and_delete_for_runs(conn: psycopg.Connection[Any]) -> None:
    saver = HxSaver(conn, schema=SCHEMA, snapshot_min_bytes=1024, rebuild_factor=1)
    rng = random.Random(2)
    t = Thread(saver, "cold-3")
    cfg = t.put(None, {"messages": []}, source="input")
    msgs: list[dict[str, Any]] = []
    for i in range(12):
        msgs = msgs + [{"id": f"m{i}", "text": text(rng, 300)}]
        cfg = t.put(cfg, {"messages": msgs})
    saver.prune(["cold-3"])
    (cid,) = [r[0] for r in conn.execute(f"SELECT checkpoint_id FROM {SCHEMA}.checkpoints WHERE thread_id = 'cold-3'")]
    assert cold(conn, "cold-3") == t.states[cid]


def stored(conn: psycopg.Connection[Any], column: str, thread: str) -> list[tuple[Any, ...]]:
    """How each row of a thread stores a column: its compression method,
    its size as stored, its size as text."""
    return conn.execute(
        f"""SELECT pg_column_compression({column}), pg_column_size({column}), octet_length({column}::text)
              FROM {SCHEMA}.checkpoints WHERE thread_id = %s AND {column} IS NOT NULL ORDER BY checkpoint_id""",
        (thread,),
    ).fetchall()


def test_rows_are_compressed_in_line(conn: psycopg.Connection[Any]) -> None:
    """PostgreSQL compresses a row only when it is wider than about 2 kB:
    the saver writes deltas (lz4), snapshots (pglz) and metadata compressed
    in line (hx_compress) whatever the row's width, and so do prune and
    copy_thread."""
    rng = random.Random(3)
    saver = HxSaver(conn, schema=SCHEMA, snapshot_min_bytes=4096, rebuild_factor=1)
    # a thread that starts with a long prompt: a root of 1.5 kB, a snapshot
    t = Thread(saver, "rows-1")
    cfg = t.put(None, {"messages": [{"id": "p", "type": "system", "text": text(rng, 1500)}]}, source="input")
    msgs: list[dict[str, Any]] = []
    for i in range(20):
        msgs = msgs + [{"id": f"m{i}", "type": "note", "text": text(rng, 1000)}]
        cfg = t.put(cfg, {"messages": msgs}, thread_id="rows-1", note=text(rng, 600))
    deltas = stored(conn, "delta", "rows-1")
    assert len(deltas) == 20
    for method, size, raw in deltas:
        assert method == "lz4" and size * 3 < raw * 2, (method, size, raw)
    snapshots = stored(conn, "snapshot", "rows-1")
    assert len(snapshots) >= 3 and snapshots[0][2] > 1500  # the root's, then ones the deltas made
    for method, size, raw in snapshots:
        assert method == "pglz" and size * 2 < raw, (method, size, raw)
    for method, size, raw in stored(conn, "metadata", "rows-1")[1:]:
        assert method == "lz4" and size * 3 < raw * 2, (method, size, raw)
    # copied as stored; the metadata that names the thread compressed again
    saver.copy_thread("rows-1", "rows-2")
    assert stored(conn, "delta", "rows-2") == deltas and stored(conn, "snapshot", "rows-2") == snapshots
    copied = stored(conn, "metadata", "rows-2")[1:]
    assert copied and all(method == "lz4" for method, _, _ in copied)
    assert conn.execute(
        f"SELECT count(*) FROM {SCHEMA}.checkpoints WHERE thread_id = 'rows-2' AND metadata ->> 'thread_id' = 'rows-2'"
    ).fetchone()[0] == 20  # type: ignore[index]
    # the head kept as a snapshot of its own
    saver.prune(["rows-2"])
    ((method, size, raw),) = stored(conn, "snapshot", "rows-2")
    assert method == "pglz" and size * 2 < raw
    assert cold(conn, "rows-1") == t.states[max(t.states)] == cold(conn, "rows-2")


def test_compressed_as_the_server_can() -> None:
    """lz4 where the server has it, pglz otherwise; the value as it is on
    an hxstate without hx_compress."""
    assert Q.Server(True, '"hx"', True, True).compressed("x", "lz4") == """"hx".hx_compress(x, 'lz4')"""
    assert Q.Server(True, '"hx"', True, False).compressed("x", "lz4") == """"hx".hx_compress(x, 'pglz')"""
    assert Q.Server(True, '"hx"', False, True).compressed("x", "pglz") == "x"


def test_bookkeeping_packed(conn: psycopg.Connection[Any]) -> None:
    """LangGraph's versions are packed, and read back as they were put."""
    saver = HxSaver(conn, schema=SCHEMA)
    t = Thread(saver, "pack-1")
    c1 = t.put(None, {"messages": [{"id": "a"}]}, source="input")
    c2 = t.put(c1, {"messages": [{"id": "a"}, {"id": "b"}]})
    before = saver.get_tuple(c2)
    assert before is not None
    packed = conn.execute(
        f"SELECT packed FROM {SCHEMA}.checkpoints WHERE thread_id = 'pack-1' AND checkpoint_id = %s",
        (before.config["configurable"]["checkpoint_id"],),
    ).fetchone()[0]  # type: ignore[index]
    assert json.loads(B.unpack(packed))["channel_versions"] == {"messages": 2}
    after = HxSaver(conn, schema=SCHEMA).get_tuple(c2)
    assert after is not None and after.checkpoint == before.checkpoint
    # a put on a parent read cold takes its versions from there
    c3 = t.put(c2, {"messages": [{"id": "a"}, {"id": "b"}, {"id": "c"}]})
    assert cold(conn, "pack-1", c3["configurable"]["checkpoint_id"]) == t.states[c3["configurable"]["checkpoint_id"]]


def test_pack() -> None:
    text = json.dumps([{"content": "hello " * 100, "type": "ai"}])
    packed = B.pack(text)
    assert packed is not None and len(packed) < len(text) / 4 and B.unpack(packed) == text
    assert B.unpack(zlib.compress(text.encode())) == text  # packed without the dictionary
    assert B.pack("short") is None and B.pack("short", always=True) is not None
    other = zlib.compressobj(6, zdict=b"another dictionary")
    with pytest.raises(ValueError, match="dictionary"):
        B.unpack(other.compress(text.encode()) + other.flush())


MESSAGES: list[BaseMessage] = [
    HumanMessage("hi", id="h"),
    AIMessage("", id="a", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1"}], usage_metadata={
        "input_tokens": 1, "output_tokens": 2, "total_tokens": 3}),
    AIMessageChunk("chunk", id="ac"),
    SystemMessage("be brief"),
    ToolMessage("3", tool_call_id="c1", id="t", artifact={"k": [1]}),
    FunctionMessage("r", name="f"),
    ChatMessage("x", role="critic"),
    RemoveMessage(id="h"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_messages_built_as_model_construct_builds_them(message: BaseMessage) -> None:
    dumped = message.model_dump()
    cls = type(message)
    fast = C.Codec(None).decode(json.loads(json.dumps(dumped)))  # type: ignore[arg-type]
    slow = cls.model_construct(**json.loads(json.dumps(dumped)))
    assert type(fast) is cls
    assert fast == slow == message
    assert list(fast.__dict__) == list(slow.__dict__)
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.__pydantic_extra__ == slow.__pydantic_extra__
    assert fast.__pydantic_private__ == slow.__pydantic_private__
    assert fast.model_dump() == dumped
    # a message of the read is its own: changing it changes no other read
    fast.content = "changed"
    assert C.Codec(None).decode(json.loads(json.dumps(dumped))).content == message.content  # type: ignore[arg-type]


@pytest.mark.parametrize("page", [1, 3, 7, 1000])
def test_list_in_pages(conn: psycopg.Connection[Any], page: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """list() a page at a time gives every checkpoint's state, whatever the
    page's size: across snapshots, edits, removals, a fork, two namespaces
    and two threads, with before, limit and a filter."""
    from hxstate.langgraph import read

    monkeypatch.setattr(read, "PAGE_SIZE", page)
    rng = random.Random(4)
    saver = HxSaver(conn, schema=SCHEMA, snapshot_min_bytes=2048, rebuild_factor=1)
    threads = [f"pages-{page}-a", f"pages-{page}-b"]
    want: dict[tuple[str, str], dict[str, Any]] = {}
    for thread in threads:
        for ns in ("", "sub:1"):
            t = Thread(saver, thread)
            msgs: list[dict[str, Any]] = []
            cfg = t.put({"configurable": {"thread_id": thread, "checkpoint_ns": ns}} if ns else None, {"messages": []},
                        source="input", cid=f"{ns}{t.n + 1:06d}")
            configs = [cfg]
            for i in range(25):
                msgs = msgs + [{"id": f"m{i}", "text": text(rng, 300)}]
                if i % 6 == 5:
                    msgs = msgs[1:]
                cfg = t.put(cfg, {"messages": msgs, "n": i}, cid=f"{ns}{t.n + 1:06d}", mark="even" if i % 2 else "odd")
                configs.append(cfg)
            fork = configs[10]
            for i in range(4):
                fork = t.put(fork, {"messages": msgs[:3] + [{"id": f"f{i}", "text": "fork"}]}, source="fork",
                             cid=f"{ns}{t.n + 1:06d}")
            want.update({(thread, cid): v for cid, v in t.states.items()})
    fresh = HxSaver(conn, schema=SCHEMA)
    got = [(x.config["configurable"]["thread_id"], x.checkpoint["id"], dict(x.checkpoint["channel_values"]))
           for thread in threads for x in fresh.list({"configurable": {"thread_id": thread}})]
    assert {(th, cid): v for th, cid, v in got} == want and len(got) == len(want)
    # newest first, each namespace's checkpoints in order
    for thread in threads:
        ids = [cid for th, cid, _ in got if th == thread]
        assert ids == sorted(ids, reverse=True)
    everything = list(fresh.list(None))
    assert len({(x.config["configurable"]["thread_id"], x.config["configurable"]["checkpoint_ns"], x.checkpoint["id"])
                for x in everything}) >= len(want)
    some = list(fresh.list({"configurable": {"thread_id": threads[0], "checkpoint_ns": ""}},
                           before={"configurable": {"checkpoint_id": "000020"}}, limit=5, filter={"mark": "even"}))
    assert [x.checkpoint["id"] for x in some] == ["000019", "000017", "000015", "000013", "000011"]
    assert all(dict(x.checkpoint["channel_values"]) == want[(threads[0], x.checkpoint["id"])] for x in some)


def chain_sizes(conn: psycopg.Connection[Any], thread: str) -> list[tuple[Any, ...]]:
    """(snapshot?, bytes a rebuild reads, the state's bytes) of each checkpoint."""
    return conn.execute(
        f"""SELECT snapshot IS NOT NULL, snapshot_bytes + chain_bytes, state_bytes,
                   octet_length({SCHEMA}.state_at(thread_id, checkpoint_ns, checkpoint_id)::text)
              FROM {SCHEMA}.checkpoints WHERE thread_id = %s ORDER BY checkpoint_id""",
        (thread,),
    ).fetchall()


def test_snapshots_bound_the_rebuild(conn: psycopg.Connection[Any]) -> None:
    """A snapshot is written when a rebuild would read more than
    rebuild_factor times the state: a thread that grows by appending (a
    conversation) has its root's only, and one whose values are replaced
    at every step gets them as its rebuild grows, the state's bytes
    tracked as it changes."""
    rng = random.Random(5)
    saver = HxSaver(conn, schema=SCHEMA, snapshot_min_bytes=4096)
    grows = Thread(saver, "bound-grows")
    cfg = grows.put(None, {"messages": []}, source="input")
    msgs: list[dict[str, Any]] = []
    for i in range(60):
        msgs = msgs + [{"id": f"m{i}", "text": text(rng, 500)}]
        cfg = grows.put(cfg, {"messages": msgs, "step": i})
    sizes = chain_sizes(conn, "bound-grows")
    assert [s[0] for s in sizes].count(True) == 1  # the root's
    assert all(rebuild <= 2 * state for _, rebuild, state, _ in sizes[1:])
    churns = Thread(saver, "bound-churns")
    cfg = churns.put(None, {"doc": ""}, source="input")
    for i in range(60):
        cfg = churns.put(cfg, {"doc": text(rng, 2000), "messages": [{"id": "only", "text": f"edit {i} " + text(rng, 300)}]})
    sizes = chain_sizes(conn, "bound-churns")
    assert [s[0] for s in sizes].count(True) >= 10
    for snap, rebuild, state, exact in sizes:
        # the state's bytes as tracked, within a few bytes of the state's text (jsonb prints spaces)
        assert state <= exact and exact - state < 100, (state, exact)
        assert rebuild <= max(2 * state, 4096) + 3000
    for cid, values in churns.states.items():
        assert cold(conn, "bound-churns", cid) == values
    assert listed(conn, "bound-churns") == churns.states


def test_what_changed_in_place_is_stored(conn: psycopg.Connection[Any]) -> None:
    """A put compares a list's items with the parent's by identity and, for
    a model, by its fields: a message whose field was reassigned, and a
    plain dict changed in place, are stored as changed; the remembered
    head's values are handed out as lists of their own."""
    saver = HxSaver(conn, schema=SCHEMA)
    thread = f"in-place-{random.random()}"

    def put(parent: Any, values: dict[str, Any], n: int) -> Any:
        cp = empty_checkpoint()
        cp["channel_values"] = values
        cp["channel_versions"] = {ch: n for ch in values}
        return saver.put(parent or {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, cp,
                         {"source": "loop", "step": n}, dict(cp["channel_versions"]))

    m1, m2 = HumanMessage("one", id="m1"), AIMessage("two", id="m2")
    d1 = {"k": 1}
    c1 = put(None, {"messages": [m1], "notes": [d1, "text"]}, 1)
    c2 = put(c1, {"messages": [m1, m2], "notes": [d1, "text", {"k": 2}]}, 2)
    m1.content = "one, edited"
    d1["k"] = 10
    c3 = put(c2, {"messages": [m1, m2, AIMessage("three", id="m3")], "notes": [d1, "text", {"k": 2}, "more"]}, 3)
    values = cold(conn, thread, c3["configurable"]["checkpoint_id"])
    assert [m.content for m in values["messages"]] == ["one, edited", "two", "three"]
    assert values["notes"] == [{"k": 10}, "text", {"k": 2}, "more"]
    assert [m.content for m in cold(conn, thread, c2["configurable"]["checkpoint_id"])["messages"]] == ["one", "two"]
    first = saver.get_tuple(c3)
    assert first is not None
    first.checkpoint["channel_values"]["messages"].append(HumanMessage("not stored", id="x"))
    again = saver.get_tuple(c3)
    assert again is not None and [m.id for m in again.checkpoint["channel_values"]["messages"]] == ["m1", "m2", "m3"]
