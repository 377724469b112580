"""Admission records: a run is made durable on its thread before it is
dispatched, so a run that crashes before its first checkpoint leaves a
record (its input, no end, no checkpoint) that another process finds and
dispatches again; the AG-UI command admits each run it is given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage

from graph import answer, compile_graph
from hxstate.errors import NonDeterministicRetry
from hxstate.langgraph import HxSaver
from paths import HERE, SRC


@pytest.fixture
def saver(dsn: str) -> Iterator[HxSaver]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        s = HxSaver(conn)
        s.setup()
        yield s


def test_admit_once(saver: HxSaver) -> None:
    thread, run = f"runs-{uuid.uuid4()}", str(uuid.uuid4())
    first = saver.admit(thread, run, {"messages": ["hi"], "zeta": 1, "alpha": 2})
    assert first.new and first.outcome is None and first.checkpoints == 0 and first.lost_before_first_checkpoint
    again = saver.admit(thread, run, {"messages": ["hi"], "zeta": 1, "alpha": 2})
    assert not again.new and again.admitted_at == first.admitted_at
    assert list(again.input) == ["messages", "zeta", "alpha"]  # as it was given
    with pytest.raises(NonDeterministicRetry, match="was admitted before with another input"):
        saver.admit(thread, run, {"messages": ["other"]})
    with pytest.raises(ValueError, match="a run ends in one of"):
        saver.finish(thread, run, "exploded")
    assert saver.finish(thread, run, "error", "boom") and not saver.finish(thread, run, "success")
    [ended] = saver.admissions(thread, unfinished=False)
    assert (ended.outcome, ended.detail) == ("error", "boom") and ended.finished_at is not None
    assert saver.admissions(thread) == []


def test_a_runs_checkpoints_are_counted(saver: HxSaver) -> None:
    thread, run = f"runs-{uuid.uuid4()}", str(uuid.uuid4())
    saver.admit(thread, run, {"q": "hello"})
    graph = compile_graph([answer(1, "hi")], saver, approval=False)
    graph.invoke({"messages": [HumanMessage("hello", id="h1")]},
                 {"configurable": {"thread_id": thread}, "metadata": {"run_id": run}})
    [running] = saver.admissions(thread)
    assert running.checkpoints >= 2 and not running.lost_before_first_checkpoint
    saver.finish(thread, run, "success")
    assert saver.admissions(thread) == []


CRASHING = '''
import os, signal
from hitl_graph import builder


def graph(saver):
    if os.environ.get("HX_TEST_CRASH") == "1":
        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies before the run's first checkpoint
    return builder.compile(checkpointer=saver)
'''


def command(dsn: str, tmp: Path, thread: str, payload: Any, crash: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": dsn, "HX_TEST_CRASH": "1" if crash else "0", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)])}
    return subprocess.run([sys.executable, "-m", "hxstate.langgraph.agui", f"{tmp / 'crashing.py'}:graph", f"--thread={thread}"],
                          input=json.dumps(payload), env=env, cwd=HERE, capture_output=True, text=True, timeout=120)


def test_a_run_lost_before_its_first_checkpoint_is_found_and_run_again(dsn: str, saver: HxSaver, tmp_path: Path) -> None:
    (tmp_path / "crashing.py").write_text(CRASHING)
    thread, run = f"runs-{uuid.uuid4()}", f"run-{uuid.uuid4()}"
    payload = {"threadId": "client", "runId": run, "messages": [{"id": "u-1", "role": "user", "content": "what is 2 + 3?"}]}
    crashed = command(dsn, tmp_path, thread, payload, crash=True)
    assert crashed.returncode == -9 and crashed.stdout == ""
    # another process: the run was accepted, nothing of it ran, its input is kept
    fresh = HxSaver(saver.conn)
    [lost] = fresh.admissions(thread)
    assert (lost.run_id, lost.input, lost.lost_before_first_checkpoint) == (run, payload, True)
    assert fresh.get_tuple({"configurable": {"thread_id": thread}}) is None
    # dispatched again, as it was given
    again = command(dsn, tmp_path, thread, lost.input, crash=False)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["outcome"] == "interrupt"
    assert fresh.admissions(thread) == []
    [ended] = fresh.admissions(thread, unfinished=False)
    assert ended.outcome == "interrupt" and ended.checkpoints >= 2
    # a run that ended is not run twice
    twice = command(dsn, tmp_path, thread, lost.input, crash=False)
    assert json.loads(twice.stdout)["error"]["code"] == "hxstate_run_duplicate"
