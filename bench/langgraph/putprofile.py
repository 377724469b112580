"""bench/langgraph/putprofile.py: where a saver's put spends its time, in
the conversation of bench/langgraph/savers.py (its graph, its messages),
one saver in a process of its own.

Each put's wall time is split into: waiting for the saver's connection
(its public ``lock``: LangGraph runs put and put_writes in threads of its
own, and they share the connection), the statements (psycopg's execute:
the round trip and the server's work, and for PostgresSaver its
pipeline's sync), and the rest: Python in the put's thread, and for
HxSaver the wait for the writes on the parent (a checkpoint is never
durable before the writes that produced it); with the thread's CPU time
beside it (what is not CPU is waiting: for the server, a lock, the
parent's writes or the GIL).  Prints the p25, p50, p75 and p90 of each,
and the share of puts that waited more than 50 us.

    HX_BENCH_TURNS=500 python bench/langgraph/putprofile.py hx        # or pgdelta, pg

PG* variables name the server, as for savers.py; the saver's database is
savers.py's (dropped and made anew).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import savers as S  # noqa: E402

PARTS = ("total", "cpu", "connection", "statements", "the rest")


def main(kind: str) -> None:
    name = next(n for n, c in S.CONTENDERS.items() if c[0] == kind)
    _, schema, schemas = S.CONTENDERS[name]
    c = S.Contender(name, kind, schema, schemas)
    local = threading.local()
    calls: list[dict[str, float]] = []

    def note(part: str, since: float) -> None:
        cur = getattr(local, "cur", None)
        if cur is not None:
            cur[part] += time.perf_counter() - since

    class TimedLock:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __enter__(self) -> None:
            t0 = time.perf_counter()
            self.inner.acquire()
            note("connection", t0)

        def __exit__(self, *exc: Any) -> None:
            self.inner.release()

        def acquire(self, *a: Any, **k: Any) -> Any:
            return self.inner.acquire(*a, **k)

        def release(self) -> None:
            self.inner.release()

    c.saver.lock = TimedLock(c.saver.lock)
    execute = psycopg.Cursor.execute

    def timed_execute(self: Any, *a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return execute(self, *a, **k)
        finally:
            note("statements", t0)

    psycopg.Cursor.execute = timed_execute  # type: ignore[method-assign]
    if kind != "hx":
        pipeline_exit = psycopg.Pipeline.__exit__

        def timed_exit(self: Any, *a: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return pipeline_exit(self, *a)
            finally:
                note("statements", t0)

        psycopg.Pipeline.__exit__ = timed_exit  # type: ignore[method-assign]
    put = c.saver.put  # savers.Timed's

    def profiled_put(*a: Any, **k: Any) -> Any:
        local.cur = dict.fromkeys(PARTS, 0.0)
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return put(*a, **k)
        finally:
            cur = local.cur
            cur["total"], cur["cpu"] = time.perf_counter() - t0, time.thread_time() - c0
            cur["the rest"] = cur["total"] - cur["connection"] - cur["statements"]
            calls.append(cur)
            local.cur = None

    c.saver.put = profiled_put
    for t in range(1, S.TURNS + 1):
        c.turn(t)
    c.close()
    print(f"{name}: {len(calls)} puts over {S.TURNS} turns, in ms")
    print(f"  {'':<16} {'p25':>7} {'p50':>7} {'p75':>7} {'p90':>7}  waited > 50 us")
    for part in PARTS:
        xs = [x[part] for x in calls]
        waited = "" if part in ("total", "cpu", "the rest") else f"{sum(x > 50e-6 for x in xs) / len(xs):.0%}"
        print(f"  {part:<16} " + " ".join(f"{S.pct(xs, p):>7.3f}" for p in (25, 50, 75, 90)) + f"  {waited}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "hx")
