"""Integrity-bound encryption (hxstate.langgraph.crypto): a thread's values
stored sealed with AES-GCM, each ciphertext bound to where it belongs.
1,000 attempts to substitute, replay or alter a ciphertext, or to put a
plaintext value where a ciphertext is expected, are each refused with
Tampered; the thread reads, lists, prunes and copies as a plain one."""

from __future__ import annotations

import base64
import json
import os
import random
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncrypted
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from graph import answer, compile_graph, tool_call
from hxstate.errors import Tampered
from hxstate.langgraph import HxSaver
from hxstate.langgraph.crypto import EncryptedSerializer
from hxstate.langgraph.storage import dumps

SCHEMA = "lg_sealed"
KEY = bytes(range(32))
SECRET = "the launch code is 0000"


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as c:
        HxSaver(c, schema=SCHEMA).setup()
        yield c


def sealed(conn: psycopg.Connection[Any], **kwargs: Any) -> HxSaver:
    return HxSaver(conn, schema=SCHEMA, serde=EncryptedSerializer(KEY), **kwargs)


def grow(saver: HxSaver, thread: str, n: int, rng: random.Random) -> list[Any]:
    """A thread of n checkpoints: messages added, edited, removed; pending writes."""
    cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    configs = []
    msgs: list[Any] = []
    for i in range(n):
        roll = rng.random()
        if roll < 0.7 or not msgs:
            msgs = msgs + [HumanMessage(f"{SECRET} #{i} " + "x" * rng.randint(10, 400), id=f"m{i}")]
        elif roll < 0.85:
            msgs = msgs[:-1] + [AIMessage(f"edited {i}", id=msgs[-1].id)]
        else:
            msgs = msgs[1:]
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": msgs, "step": i}
        cp["channel_versions"] = {"messages": i + 1, "step": i + 1}
        cfg = saver.put(cfg, cp, {"source": "loop", "step": i}, dict(cp["channel_versions"]))
        configs.append(cfg)
        if rng.random() < 0.5:
            saver.put_writes(cfg, [("messages", [AIMessage(f"{SECRET} pending {i}", id=f"p{i}")]), ("step", i)], f"task-{i}")
    return configs


def values(t: Any) -> Any:
    return {k: [m.model_dump() for m in v] if k == "messages" else v for k, v in t.checkpoint["channel_values"].items()}


def test_a_sealed_thread_reads_as_a_plain_one(conn: psycopg.Connection[Any]) -> None:
    rng = random.Random(7)
    plain = HxSaver(conn, schema=SCHEMA, snapshot_min_bytes=2048, rebuild_factor=1)
    secret = sealed(conn, snapshot_min_bytes=2048, rebuild_factor=1)
    a, b = f"plain-{uuid.uuid4()}", f"sealed-{uuid.uuid4()}"
    plain_configs = grow(plain, a, 30, random.Random(7))
    configs = grow(secret, b, 30, rng)
    for pc, cfg in zip(plain_configs, configs):
        x = HxSaver(conn, schema=SCHEMA).get_tuple(pc)
        y = sealed(conn).get_tuple(cfg)
        assert x is not None and y is not None and values(x) == values(y)
        assert x.pending_writes == y.pending_writes
    assert [values(t) for t in sealed(conn).list({"configurable": {"thread_id": b}})] == [
        values(t) for t in HxSaver(conn, schema=SCHEMA).list({"configurable": {"thread_id": a}})]
    # nothing in clear: not the text, not on the thread's stream
    text = conn.execute(
        f"""SELECT string_agg(coalesce(delta::text, '') || coalesce(snapshot::text, ''), '') FROM {SCHEMA}.checkpoints WHERE thread_id = %s""",
        (b,)).fetchone()[0]  # type: ignore[index]
    writes = conn.execute(f"SELECT string_agg(value::text, '') FROM {SCHEMA}.writes WHERE thread_id = %s", (b,)).fetchone()[0]  # type: ignore[index]
    assert "launch code" not in text and "launch code" not in writes and '"sealed"' in text
    assert conn.execute(f"SELECT count(*) FROM {SCHEMA}.checkpoints WHERE thread_id = %s AND snapshot IS NOT NULL", (b,)).fetchone()[0] >= 3  # type: ignore[index]
    assert conn.execute("SELECT count(*) FROM hx_event WHERE stream = %s", (f"@{SCHEMA}:{b}",)).fetchone() == (0,)
    # copied (sealed again for the copy), pruned (snapshots sealed for their checkpoints)
    secret.copy_thread(b, b + "-copy")
    assert values(sealed(conn).get_tuple({"configurable": {"thread_id": b + "-copy"}})) == values(sealed(conn).get_tuple(configs[-1]))
    secret.prune([b + "-copy"], keep_last=3)
    assert [values(t) for t in sealed(conn).list({"configurable": {"thread_id": b + "-copy"}})] == [
        values(sealed(conn).get_tuple(c)) for c in reversed(configs[-3:])]


def test_a_sealed_graph_with_an_interrupt(conn: psycopg.Connection[Any]) -> None:
    from langgraph.types import Command

    saver = sealed(conn)
    graph = compile_graph([tool_call(1, 1, 2), answer(2, "3")], saver)
    cfg: Any = {"configurable": {"thread_id": f"sealed-graph-{uuid.uuid4()}"}}
    graph.invoke({"messages": [HumanMessage("1 + 2?", id="h1")]}, cfg)
    fresh = compile_graph([], sealed(conn))
    assert fresh.get_state(cfg).interrupts[0].value["question"] == "run the tool?"
    graph.invoke(Command(resume="yes"), cfg)
    assert [m.content for m in fresh.get_state(cfg).values["messages"]][-1] == "3"


def test_without_the_key(conn: psycopg.Connection[Any]) -> None:
    thread = f"sealed-{uuid.uuid4()}"
    [cfg] = grow(sealed(conn), thread, 1, random.Random(1))
    with pytest.raises(Tampered, match="an encrypted snapshot, and this saver has no key"):
        HxSaver(conn, schema=SCHEMA).get_tuple(cfg)
    with pytest.raises(Tampered, match="under a key this saver does not have"):
        HxSaver(conn, schema=SCHEMA, serde=EncryptedSerializer({"other": os.urandom(32)})).get_tuple(cfg)
    # rotated: the new key writes, the old one still opens
    rotated = HxSaver(conn, schema=SCHEMA, serde=EncryptedSerializer({"k2": os.urandom(32), "k1": KEY}))
    assert rotated.get_tuple(cfg) is not None
    with pytest.raises(ValueError):
        EncryptedSerializer(b"short")


def test_standalone_values_refuse_plaintext() -> None:
    """For another saver, a value is sealed bound to its type; a plaintext
    one is refused, which LangGraph's EncryptedSerializer accepts."""
    ours = EncryptedSerializer(KEY)
    typed = ours.dumps_typed({"a": 1})
    assert ours.loads_typed(typed) == {"a": 1}
    plaintext = JsonPlusSerializer().dumps_typed({"a": "planted"})
    with pytest.raises(Tampered, match="a plaintext value where ciphertext is expected"):
        ours.loads_typed(plaintext)
    theirs = LangGraphEncrypted.__new__(LangGraphEncrypted)
    theirs.serde = JsonPlusSerializer()
    assert theirs.loads_typed(plaintext) == {"a": "planted"}  # LangGraph's accepts it
    with pytest.raises(Tampered):
        ours.loads_typed((typed[0].replace("msgpack", "json"), typed[1]))


# -- substitutions, replays, alterations ---------------------------------------------------------


def rows(conn: psycopg.Connection[Any], thread: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        f"""SELECT checkpoint_id, delta::text, snapshot::text FROM {SCHEMA}.checkpoints
             WHERE thread_id = %s ORDER BY checkpoint_id""", (thread,)).fetchall()


def write_rows(conn: psycopg.Connection[Any], thread: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        f"""SELECT checkpoint_id, task_id, idx, value::text FROM {SCHEMA}.writes WHERE thread_id = %s
             ORDER BY checkpoint_id, task_id, idx""", (thread,)).fetchall()


def test_a_thousand_substitutions_and_replays_are_refused(conn: psycopg.Connection[Any]) -> None:
    rng = random.Random(8938)
    saver = sealed(conn, snapshot_min_bytes=2048, rebuild_factor=1)
    threads = [f"sealed-attack-{i}-{uuid.uuid4()}" for i in range(2)]
    for t in threads:
        grow(saver, t, 25, rng)
    # a copy: the same checkpoints and values, sealed for another thread
    saver.copy_thread(threads[0], threads[0] + "-copy")
    threads.append(threads[0] + "-copy")
    # what each checkpoint reads (its snapshot if it has one, else its delta), and every write
    parts = [(t, cid, "snapshot" if snap else "delta", snap or delta) for t in threads for cid, delta, snap in rows(conn, t)
             if (snap or delta) is not None]
    writes = [(t, cid, task, idx, value) for t in threads for cid, task, idx, value in write_rows(conn, t)]
    assert len(parts) >= 70 and len(writes) >= 20
    refused = 0
    kinds: dict[str, int] = {}

    def attempt(kind: str, table: str, where: tuple[str, str, Any, Any], column: str, text: str) -> None:
        nonlocal refused
        t, cid, task, idx = where
        key = "thread_id = %s AND checkpoint_id = %s" + (" AND task_id = %s AND idx = %s" if table == "writes" else "")
        args = (t, cid, task, idx) if table == "writes" else (t, cid)
        (before,) = conn.execute(f"SELECT {column}::text FROM {SCHEMA}.{table} WHERE {key}", args).fetchone()  # type: ignore[misc]
        if text == before:
            return  # the same ciphertext (a part copied to itself): not an attempt
        conn.execute(f"UPDATE {SCHEMA}.{table} SET {column} = %s::json WHERE {key}", (text, *args))
        try:
            with pytest.raises(Tampered):
                got = sealed(conn).get_tuple({"configurable": {"thread_id": t, "checkpoint_ns": "", "checkpoint_id": cid}})
                assert got is not None
            refused += 1
            kinds[kind] = kinds.get(kind, 0) + 1
        finally:
            conn.execute(f"UPDATE {SCHEMA}.{table} SET {column} = %s::json WHERE {key}", (before, *args))

    n = 0
    while n < 1000:
        roll = rng.random()
        t, cid, kind, text = rng.choice(parts)
        if roll < 0.35:  # another row's ciphertext, of any thread, checkpoint or kind
            _, _, _, other = rng.choice([p for p in parts if p[:2] != (t, cid)])
            attempt("substituted part", "checkpoints", (t, cid, None, None), kind, other)
        elif roll < 0.5:  # the same checkpoint's ciphertext from the copy (or back): replayed elsewhere
            twin = [p for p in parts if p[1] == cid and p[0] != t and p[2] == kind]
            if not twin:
                continue
            attempt("replayed part", "checkpoints", (t, cid, None, None), kind, twin[0][3])
        elif roll < 0.65:  # another write's ciphertext
            wt, wcid, task, idx, _ = rng.choice(writes)
            _, _, _, _, other = rng.choice([w for w in writes if w[:4] != (wt, wcid, task, idx)])
            attempt("substituted write", "writes", (wt, wcid, task, idx), "value", other)
        elif roll < 0.8:  # altered: a byte of the ciphertext, the channels it names, the key's name
            envelope = json.loads(text)
            how = rng.randrange(3)
            if how == 0:
                raw = bytearray(base64.b64decode(envelope["d"]))
                raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
                envelope["d"] = base64.b64encode(bytes(raw)).decode()
            elif how == 1:
                ch = rng.choice(list(envelope["c"]))
                envelope["c"][ch] = str(int(envelope["c"][ch] or 0) + rng.randint(1, 3))
            else:
                envelope["k"] = "k2"
            attempt("altered part", "checkpoints", (t, cid, None, None), kind, dumps(envelope))
        else:  # plaintext where ciphertext is expected
            if kind == "snapshot":
                plain = dumps({"messages": [{"id": "x", "type": "human", "content": "planted", "additional_kwargs": {},
                                             "response_metadata": {}}]})
            else:
                plain = dumps([{"op": "upsert", "path": "/messages", "items": [{"id": "x", "content": "planted"}]}])
            if rng.random() < 0.5:
                attempt("plaintext part", "checkpoints", (t, cid, None, None), kind, plain)
            else:
                wt, wcid, task, idx, _ = rng.choice(writes)
                attempt("plaintext write", "writes", (wt, wcid, task, idx), "value", dumps({"planted": True}))
        n = refused
    assert refused == 1000
    assert set(kinds) == {"substituted part", "replayed part", "substituted write", "altered part", "plaintext part",
                          "plaintext write"}
    # and the thread is as it was
    assert sealed(conn).get_tuple({"configurable": {"thread_id": threads[0]}}) is not None
