"""Exactly once across crashes: kill -9 of the runtime between put_writes
and the next put, and of the whole server (a cluster of its own, fsync on,
test/lib/cluster.sh's hx_cluster_kill and hx_cluster_up)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from hxstate.errors import NonDeterministicRetry
from hxstate.langgraph import HxSaver
from test_bugs import runtime

TOP = Path(__file__).resolve().parents[2]


def test_runtime_killed_between_put_writes_and_put(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS py_effects (thread text, step text, at timestamptz DEFAULT now())")
    for saver in ("hx", "pg"):
        thread = f"k-{uuid.uuid4()}"
        killed = runtime(dsn, saver, thread, "kill-after-writes")
        assert killed.returncode == -9 and "step2_writes_acknowledged=1" in killed.stdout, killed.stderr
        resumed = runtime(dsn, saver, thread, "resume")
        assert resumed.returncode == 0, resumed.stderr
        assert "final=['step1', 'step2', 'step3']" in resumed.stdout
        with psycopg.connect(dsn, autocommit=True) as c:
            effects = dict(c.execute("SELECT step, count(*) FROM py_effects WHERE thread = %s GROUP BY step", (thread,)).fetchall())
        # step 2's acknowledged writes were found: it did not run again
        assert effects == {"step1": 1, "step2": 1, "step3": 1}, (saver, effects)


class Cluster:
    """A cluster of its own, driven through test/lib/cluster.sh."""

    def __init__(self, bindir: str) -> None:
        script = (
            f'. "{TOP}/test/lib/cluster.sh"; hx_cluster_start "{bindir}" fsync=on >&2 || exit 1; echo "$PGHOST"; '
            'while read -r cmd; do case $cmd in kill) hx_cluster_kill ;; up) hx_cluster_up ;; esac; echo done; done'
        )
        self.proc = subprocess.Popen(["bash", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.host = self.proc.stdout.readline().strip()
        assert self.host, "the cluster did not start"
        self.dsn = psycopg.conninfo.make_conninfo("", host=self.host, port=5432, user="postgres", dbname="postgres")

    def do(self, cmd: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "done"

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    pg_config = os.environ.get("PG_CONFIG") or shutil.which("pg_config")
    if not pg_config:
        pytest.fail("no PG_CONFIG to start a cluster with (test/suite sets it)")
    bindir = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
    c = Cluster(bindir)
    try:
        yield c
    finally:
        c.stop()


def connect(c: Cluster) -> psycopg.Connection[Any]:
    return psycopg.connect(c.dsn, autocommit=True)


def test_server_killed_between_put_writes_and_put(cluster: Cluster) -> None:
    thread: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    with connect(cluster) as conn:
        conn.execute("CREATE EXTENSION hxstate")
        saver = HxSaver(conn)
        saver.setup()
        cp1 = empty_checkpoint()
        cp1["channel_values"] = {"messages": [{"id": "a", "text": "hi"}]}
        cp1["channel_versions"] = {"messages": 1}
        c1 = saver.put(thread, cp1, {"source": "input", "step": -1}, {"messages": 1})
        saver.put_writes(c1, [("messages", [{"id": "b", "text": "there"}])], "task-1")
    # a power cut right after put_writes was acknowledged
    cluster.do("kill")
    cluster.do("up")
    with connect(cluster) as conn:
        saver = HxSaver(conn)
        t = saver.get_tuple(c1)
        assert t is not None and t.pending_writes == [("task-1", "messages", [{"id": "b", "text": "there"}])]
        # the runtime retries what it is not sure of: a no-op, and a
        # different value for the same write is refused
        saver.put_writes(c1, [("messages", [{"id": "b", "text": "there"}])], "task-1")
        with pytest.raises(NonDeterministicRetry):
            saver.put_writes(c1, [("messages", [{"id": "b", "text": "other"}])], "task-1")
        assert len(saver.get_tuple(c1).pending_writes) == 1  # type: ignore[union-attr]
        cp2 = empty_checkpoint()
        cp2["channel_values"] = {"messages": [{"id": "a", "text": "hi"}, {"id": "b", "text": "there"}]}
        cp2["channel_versions"] = {"messages": 2}
        c2 = saver.put(c1, cp2, {"source": "loop", "step": 0}, {"messages": 2})
    # and a power cut right after the put was acknowledged
    cluster.do("kill")
    cluster.do("up")
    with connect(cluster) as conn:
        saver = HxSaver(conn)
        head = saver.get_tuple(thread)
        assert head is not None and head.config["configurable"]["checkpoint_id"] == c2["configurable"]["checkpoint_id"]
        assert head.checkpoint["channel_values"]["messages"] == [{"id": "a", "text": "hi"}, {"id": "b", "text": "there"}]
        # the put is retried too: a no-op, the head unchanged
        saver.put(c1, cp2, {"source": "loop", "step": 0}, {"messages": 2})
        assert len(list(saver.list(thread))) == 2
        delta = conn.execute("SELECT delta FROM langgraph.checkpoints WHERE checkpoint_id = %s", (cp2["id"],)).fetchone()[0]  # type: ignore[index]
        # what the checkpoint stores is what changed: b, upserted by id
        assert delta == [{"op": "upsert", "path": "/messages", "items": [{"id": "b", "text": "there"}]}]
