"""prune(keep_last=N) over 1,000 random threads: forks, edits and removals,
snapshots along the chains, a subgraph's namespace, chains of several
interrupts with their pending writes.  Afterwards each namespace keeps its
N newest checkpoints and nothing else, each rebuilds (by the saver, cold,
and by SQL's state_at) to the state it was put with, its pending writes
are kept, and its parent is one that stayed or none."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from hxstate.langgraph import HxSaver

SCHEMA = "lg_prune"
THREADS = 1000


@pytest.fixture(scope="module")
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as c:
        HxSaver(c, schema=SCHEMA).setup()
        yield c


class Thread:
    """A random thread: what each checkpoint holds, and its pending writes."""

    def __init__(self, saver: HxSaver, rng: random.Random, name: str) -> None:
        self.saver, self.rng, self.name = saver, rng, name
        self.states: dict[tuple[str, str], dict[str, Any]] = {}  # (ns, id) -> values
        self.parents: dict[tuple[str, str], str | None] = {}
        self.writes: dict[tuple[str, str], list[tuple[str, Any]]] = {}
        self.n = 0

    def put(self, ns: str, parent: str | None, values: dict[str, Any], source: str) -> str:
        self.n += 1
        cid = f"{self.n:06d}"
        cp = empty_checkpoint()
        cp["id"] = cid
        cp["channel_values"] = values
        cp["channel_versions"] = {ch: self.n for ch in values}
        conf: dict[str, Any] = {"thread_id": self.name, "checkpoint_ns": ns}
        if parent:
            conf["checkpoint_id"] = parent
        self.saver.put({"configurable": conf}, cp, {"source": source, "step": self.n}, dict(cp["channel_versions"]))
        self.states[(ns, cid)] = json.loads(json.dumps(values))
        self.parents[(ns, cid)] = parent
        return cid

    def interrupt(self, ns: str, cid: str) -> None:
        writes = [("__interrupt__", f"ask {cid}"),
                  ("messages", [{"id": f"w-{cid}", "text": "pending"}])]
        config = {"configurable": {"thread_id": self.name, "checkpoint_ns": ns, "checkpoint_id": cid}}
        self.saver.put_writes(config, writes, f"task-{cid}")
        self.writes[(ns, cid)] = writes

    def grow(self, ns: str, steps: int) -> None:
        rng = self.rng
        messages: list[dict[str, Any]] = []
        head = self.put(ns, None, {"messages": [], "n": 0}, "input")
        heads = [(head, messages)]
        for i in range(steps):
            parent, msgs = heads[-1]
            source = "loop"
            if rng.random() < 0.15 and len(heads) > 2:
                parent, msgs = rng.choice(heads[:-1])  # a fork from the past
                source = "fork"
            msgs = list(msgs)
            roll = rng.random()
            if roll < 0.6 or not msgs:
                msgs.append({"id": f"{ns}m{i}", "text": " ".join(rng.choice("abcdefgh") * rng.randint(1, 9) for _ in range(30))})
            elif roll < 0.8:
                k = rng.randrange(len(msgs))
                msgs[k] = {**msgs[k], "text": f"edited {i}"}
            else:
                del msgs[rng.randrange(len(msgs))]
            values: dict[str, Any] = {"messages": msgs, "n": i, "doc": {"z": i, "a": [i] * rng.randint(0, 5)}}
            if rng.random() < 0.1:
                values.pop("doc")
            cid = self.put(ns, parent, values, source)
            heads.append((cid, msgs))
            if rng.random() < 0.3:
                self.interrupt(ns, cid)


def test_keep_last_over_a_thousand_random_threads(conn: psycopg.Connection[Any]) -> None:
    rng = random.Random(20261127)
    saver = HxSaver(conn, schema=SCHEMA, snapshot_min_bytes=512, rebuild_factor=1)
    threads: list[tuple[Thread, int]] = []
    for t in range(THREADS):
        th = Thread(saver, rng, f"prune-{t}")
        th.grow("", rng.randint(1, 12))
        if rng.random() < 0.2:
            th.grow("sub:1", rng.randint(1, 5))
        threads.append((th, rng.randint(1, 6)))
    snapshots_cut = 0
    for keep in range(1, 7):
        names = [th.name for th, k in threads if k == keep]
        for i in range(0, len(names), 100):
            saver.prune(names[i:i + 100], keep_last=keep)
    fresh = HxSaver(conn, schema=SCHEMA)
    for th, keep in threads:
        for ns in {ns for ns, _ in th.states}:
            ids = sorted((cid for n, cid in th.states if n == ns), reverse=True)
            kept, gone = ids[:keep], ids[keep:]
            listed = [t.checkpoint["id"] for t in fresh.list({"configurable": {"thread_id": th.name, "checkpoint_ns": ns}})]
            assert listed == kept, (th.name, ns, keep)
            for cid in kept:
                config = {"configurable": {"thread_id": th.name, "checkpoint_ns": ns, "checkpoint_id": cid}}
                t = HxSaver(conn, schema=SCHEMA).get_tuple(config)
                assert t is not None and dict(t.checkpoint["channel_values"]) == th.states[(ns, cid)], (th.name, ns, cid)
                sql_state = conn.execute(f"SELECT {SCHEMA}.state_at(%s, %s, %s)", (th.name, ns, cid)).fetchone()
                assert sql_state is not None and sql_state[0] == th.states[(ns, cid)], (th.name, ns, cid)
                assert [(ch, v) for _, ch, v in t.pending_writes] == th.writes.get((ns, cid), []), (th.name, ns, cid)
                parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
                assert parent is None or parent in kept, (th.name, ns, cid)
                if parent is None and th.parents[(ns, cid)] is not None:
                    snapshots_cut += 1
            for cid in gone:
                config = {"configurable": {"thread_id": th.name, "checkpoint_ns": ns, "checkpoint_id": cid}}
                assert fresh.get_tuple(config) is None
    # the run cut chains (kept checkpoints whose parent went), and deleted writes with their checkpoints
    assert snapshots_cut > 500
    (orphans,) = conn.execute(
        f"""SELECT count(*) FROM {SCHEMA}.writes w WHERE NOT EXISTS (SELECT FROM {SCHEMA}.checkpoints c
             WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)"""
    ).fetchone()  # type: ignore[misc]
    assert orphans == 0


def test_keep_last_refuses_what_it_cannot_mean(conn: psycopg.Connection[Any]) -> None:
    saver = HxSaver(conn, schema=SCHEMA)
    for bad in (0, -1, 1.5, "2"):
        with pytest.raises(ValueError, match="keep_last"):
            saver.prune(["x"], keep_last=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keep_last"):
        saver.prune(["x"], strategy="delete", keep_last=2)
