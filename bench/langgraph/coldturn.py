"""bench/langgraph/coldturn.py: a turn's time with the CPU's caches warm
and cold, for HxSaver and PostgresSaver+DeltaChannel, each alone.

savers.py runs the contenders in turn, turn by turn, so each turn of one
starts after the others' turns have run and filled the caches with their
own memory.  This script shows what that does to each saver's turn: the
same conversation (savers.py's graph, messages and vocabulary), alone on
the server, once with nothing run between the turns ("warm") and once with
a 96 MiB buffer written between them ("cold": more than the machine's last
level cache, as another process's turn would).  The buffer is written
outside the timed turn.  Besides the turn's p50, the time HxSaver spends
on its check that no message it remembers was changed in place
(hxstate.langgraph.heads.unchanged, which reads every message's fields).

    python bench/langgraph/coldturn.py          # PG* variables name the server
    HX_BENCH_TURNS=250 python bench/langgraph/coldturn.py
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import HumanMessage
from psycopg import sql
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parent))
import savers  # noqa: E402

import hxstate.langgraph.heads as heads  # noqa: E402
import hxstate.langgraph.read as read  # noqa: E402

FLUSH = bytearray(96 << 20)
check_s = [0.0]
_unchanged = heads.unchanged


def _timed_unchanged(items: Any, value: list[Any]) -> bool:
    t0 = time.perf_counter()
    try:
        return _unchanged(items, value)
    finally:
        check_s[0] += time.perf_counter() - t0


heads.unchanged = _timed_unchanged  # type: ignore[assignment]
read.unchanged = _timed_unchanged  # type: ignore[attr-defined]


def flush_caches() -> None:
    for i in range(0, len(FLUSH), 64):
        FLUSH[i] = (FLUSH[i] + 1) & 255


def run(kind: str, cold: bool) -> tuple[float, float]:
    db = f"hxbench_cold_{kind}"
    with psycopg.connect("dbname=postgres", autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
    conn = psycopg.connect(f"dbname={db}", autocommit=True, prepare_threshold=0, row_factory=dict_row)
    try:
        if kind == "hx":
            conn.execute("CREATE EXTENSION hxstate")
        saver = savers.make_saver(kind, conn)
        saver.setup()
        schema = savers.MessagesState if kind == "hx" else savers.DeltaMessagesState
        graph = savers.build(schema, savers.TURNS).compile(checkpointer=saver)
        cfg: Any = {"configurable": {"thread_id": "conversation"}}
        rng = random.Random(1)
        turns: list[float] = []
        checks: list[float] = []
        for t in range(1, savers.TURNS + 1):
            message = HumanMessage(savers.text(rng), id=f"h-{t}")
            if cold:
                flush_caches()
            check_s[0] = 0.0
            t0 = time.perf_counter()
            graph.invoke({"messages": [message]}, cfg)
            turns.append(time.perf_counter() - t0)
            checks.append(check_s[0])
        return savers.pct(turns, 50), savers.pct(checks, 50)
    finally:
        conn.close()
        with psycopg.connect("dbname=postgres", autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))


def main() -> None:
    print(f"a turn alone, caches warm and cold, {savers.TURNS} turns, p50 in ms")
    print(f"{'saver':<27}| {'warm':>6} | {'cold':>6} | {'cold - warm':>11} | {'HxSaver check, warm / cold':>27}")
    got: dict[str, tuple[float, float, float, float]] = {}
    for name, kind in (("HxSaver", "hx"), ("PostgresSaver+DeltaChannel", "pgdelta")):
        warm, warm_check = run(kind, False)
        cold, cold_check = run(kind, True)
        got[kind] = (warm, cold, warm_check, cold_check)
        check = f"{warm_check:.2f} / {cold_check:.2f}" if kind == "hx" else ""
        print(f"{name:<27}| {warm:>6.2f} | {cold:>6.2f} | {cold - warm:>11.2f} | {check:>27}")
    hx, delta = got["hx"], got["pgdelta"]
    print(f"turn, HxSaver / PostgresSaver+DeltaChannel: warm {hx[0] / delta[0]:.3f}, cold {hx[1] / delta[1]:.3f}")


if __name__ == "__main__":
    main()
