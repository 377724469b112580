"""bench/langgraph/savers.py: HxSaver against PostgresSaver, and against
PostgresSaver with LangGraph's DeltaChannel for the messages (its beta
delta storage), on one server, in one run.

A 500-turn conversation through a real graph (MessagesState, a fake chat
model, a tool node): each message about 1 kB of text, a tool call every
third turn (the model asks for the tool, the tool answers, the model
replies).  Each contender has a database of its own on the same server and
a process of its own (as a deployment has it: one saver's garbage is not
collected in another's turn), and runs the whole conversation, the
contenders in turn, turn by turn (so that they share the machine's load).  After 100, 250 and 500
turns: the bytes on disk of every table the saver wrote (heap, indexes and
TOAST: for HxSaver its schema's tables and the partitions of hxstate's log
hx_event that hold its events, which it writes at every checkpoint; for
PostgresSaver its four tables), the WAL generated during its turns
(pg_current_wal_lsn before and after each; nothing else writes then), and
the p50 and p99
of put, put_writes and get_tuple over every call so far, and of a whole
turn through the graph.  get_tuple is also timed on a fresh saver (nothing
remembered), as a reader in another process would call it: 25 reads of
the checkpoint that was the head at each point, after every contender has
run, the contenders in turn (they share the machine's load read after
read).  Then the whole history of the thread, graph.get_state_history()
walked to its end, in a process of its own per contender: its time, and
how much the process's resident memory grew (its high-water mark, before
and after).  The text of messages is words of HX_BENCH_VOCAB words (2000,
or 30: text that compresses more).

    python bench/langgraph/savers.py            # PG* variables name the server
    HX_BENCH_TURNS=100 python bench/langgraph/savers.py
    HX_BENCH_VOCAB=30 python bench/langgraph/savers.py
    HX_BENCH_SAVERS=hx,pg python bench/langgraph/savers.py   # some of hx, pg, pgdelta
    HX_BENCH_HISTORY=0 python bench/langgraph/savers.py      # without the history walks

Run by bench/run's part "langgraph" (HX_BENCH_ONLY=langgraph bash bench/run).
Prints one table per point, the history walks, then the targets.
"""

from __future__ import annotations

import functools
import itertools
import multiprocessing
import os
import random
import subprocess
import sys
import time
import zlib
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from psycopg import sql
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "src"))
from hxstate.langgraph import HxSaver  # noqa: E402

TURNS = int(os.environ.get("HX_BENCH_TURNS", "500"))
POINTS = [p for p in (100, 250, 500) if p <= TURNS] or [TURNS]
COLD = 25  # cold reads at each point
# message text, by HX_BENCH_VOCAB: words of a vocabulary of that many words
# made of syllables, Zipf distributed as a language's are, so that it
# compresses about as text does (2000, the default: zlib 2.5 to 1 on a
# message, 3.7 to 1 on 200 of them together); or 30: the first vocabulary,
# 30 English words drawn uniformly, which compresses more (3.0 and 5.8 to 1)
VOCAB = int(os.environ.get("HX_BENCH_VOCAB", "2000"))
if VOCAB == 30:
    WORDS = (
        "state agent tool call message model thread checkpoint stream event delta snapshot merge reply "
        "question answer user session write read table index server client browser step run graph node"
    ).split()
    WEIGHTS = [1.0] * len(WORDS)  # drawn uniformly, as they were
else:
    _SYLLABLES = "ba be bi bo bu da de di do du ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu ra re ri ro ru sa se si so su ta te ti to tu".split()
    _vocab_rng = random.Random(0)
    WORDS = ["".join(_vocab_rng.choice(_SYLLABLES) for _ in range(_vocab_rng.randint(1, 4))) for _ in range(VOCAB)]
    WEIGHTS = [1 / (i + 1) for i in range(len(WORDS))]
_CUM = list(itertools.accumulate(WEIGHTS))


def text(rng: random.Random, size: int = 1000) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        w = rng.choice(WORDS) if VOCAB == 30 else rng.choices(WORDS, cum_weights=_CUM)[0]
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:size]


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return text(random.Random(query), 1000)


def messages_delta(state: list[Any], writes: list[Any]) -> list[Any]:
    for w in writes:
        state = add_messages(state, w)
    return state


class DeltaMessagesState(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(messages_delta)]


class MessagesState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def replies(rng: random.Random, turns: int) -> list[AIMessage]:
    out: list[AIMessage] = []
    for t in range(1, turns + 1):
        if t % 3 == 0:
            out.append(
                AIMessage(
                    content="",
                    id=f"ai-{t}-call",
                    tool_calls=[{"name": "lookup", "args": {"query": f"q{t}"}, "id": f"call-{t}"}],
                )
            )
        out.append(AIMessage(content=text(rng), id=f"ai-{t}"))
    return out


def build(schema: type, turns: int) -> StateGraph[Any]:
    model = GenericFakeChatModel(messages=iter(replies(random.Random(2), turns)))

    def agent(state: Any) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: Any) -> str:
        last = state["messages"][-1]
        return "tools" if getattr(last, "tool_calls", None) else END

    g = StateGraph(schema)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([lookup]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    return g


class Timed:
    """Wraps a saver's put, put_writes and get_tuple with timers."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver
        self.times: dict[str, list[float]] = {"put": [], "put_writes": [], "get_tuple": []}
        for name in self.times:
            setattr(saver, name, self._wrap(name, getattr(saver, name)))

    def _wrap(self, name: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.times[name].append(time.perf_counter() - t0)

        return timed


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] * 1000


# every table a saver writes, with its indexes and TOAST: its own schema's
# (or public's) tables, and the partitions of hxstate's log that hold rows
WRITTEN = """SELECT c.oid::regclass::text, pg_total_relation_size(c.oid)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind = 'r' AND n.nspname = ANY (%s::text[]) AND NOT c.relispartition
UNION ALL
SELECT p.relid::regclass::text, pg_total_relation_size(p.relid)
  FROM pg_partition_tree(to_regclass('hx_event')) p
 WHERE p.isleaf AND pg_relation_size(p.relid) > 0"""


def disk(conn: psycopg.Connection[Any], schemas: list[str]) -> dict[str, int]:
    return {r[0]: int(r[1]) for r in conn.execute(WRITTEN, (schemas,)).fetchall()}  # type: ignore[call-overload]


def wal(conn: psycopg.Connection[Any]) -> int:
    return int(conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0])  # type: ignore[index]


CONTENDERS = {
    "HxSaver": ("hx", MessagesState, ["langgraph"]),
    "PostgresSaver": ("pg", MessagesState, ["public"]),
    "PostgresSaver+DeltaChannel": ("pgdelta", DeltaMessagesState, ["public"]),
}


def make_saver(kind: str, conn: psycopg.Connection[Any]) -> Any:
    return HxSaver(conn) if kind == "hx" else PostgresSaver(conn)  # type: ignore[arg-type]


class Contender:
    """One saver's conversation: its database, connections, graph and timers."""

    def __init__(self, name: str, kind: str, schema: type, schemas: list[str]) -> None:
        self.name, self.kind, self.schema, self.schemas = name, kind, schema, schemas
        db = f"hxbench_lg_{kind}"
        with psycopg.connect("dbname=postgres", autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
        self.dsn = f"dbname={db}"
        self.rng = random.Random(1)  # the same conversation for each
        self.conn = psycopg.connect(self.dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        self.probe = psycopg.connect(self.dsn, autocommit=True)
        if kind == "hx":
            self.probe.execute("CREATE EXTENSION hxstate")
        self.saver = make_saver(kind, self.conn)
        self.saver.setup()
        self.probe.execute("CHECKPOINT")
        self.timed = Timed(self.saver)
        self.graph = build(schema, TURNS).compile(checkpointer=self.saver)
        self.cfg: Any = {"configurable": {"thread_id": "conversation"}}
        self.wal = 0  # generated during its own turns
        self.turn_times: list[float] = []
        self.results: list[dict[str, Any]] = []

    def turn(self, t: int) -> None:
        before = wal(self.probe)
        t0 = time.perf_counter()
        self.graph.invoke({"messages": [HumanMessage(text(self.rng), id=f"h-{t}")]}, self.cfg)
        self.turn_times.append(time.perf_counter() - t0)
        self.wal += wal(self.probe) - before

    def point(self, t: int) -> None:
        head = self.saver.get_tuple(self.cfg)
        # the graph's view: a DeltaChannel's head checkpoint holds no list
        n_messages = len(self.graph.get_state(self.cfg).values.get("messages", []))
        tables = disk(self.probe, self.schemas)
        self.results.append(
            {
                "saver": self.name,
                "turns": t,
                "messages": n_messages,
                "disk": sum(tables.values()),
                "tables": tables,
                "wal": self.wal,
                **{k: (pct(v, 50), pct(v, 99)) for k, v in self.timed.times.items()},
                "head": head.config if head else self.cfg,
                "dsn": self.dsn,
                "kind": self.kind,
                "turn": (pct(self.turn_times, 50), pct(self.turn_times, 99)),
            }
        )
        r = self.results[-1]
        print(f"  {self.name}: {t} turns, {r['messages']} messages, {r['disk'] / 1e6:.2f} MB on disk, {r['wal'] / 1e6:.2f} MB of WAL", flush=True)

    def close(self) -> None:
        self.conn.close()
        self.probe.close()


def serve(pipe: Connection, name: str) -> None:
    """A contender's process: its conversation, a turn or a point at a time
    as the main process asks."""
    kind, schema, schemas = CONTENDERS[name]
    c = Contender(name, kind, schema, schemas)
    pipe.send("ready")
    while True:
        cmd, arg = pipe.recv()
        if cmd == "turn":
            c.turn(arg)
            pipe.send(None)
        elif cmd == "point":
            c.point(arg)
            pipe.send(c.results[-1])
        else:
            c.close()
            pipe.send(None)
            return


def run(names: list[str]) -> list[dict[str, Any]]:
    """The conversations, turn by turn, the contenders in turn, each in a
    process of its own: they share the machine's load turn after turn.
    The WAL of each is what the server generated during its own turns
    (nothing else writes then)."""
    ctx = multiprocessing.get_context("fork")
    workers: list[tuple[Connection, Any]] = []
    for name in names:
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=serve, args=(theirs, name), daemon=True)
        proc.start()
        if mine.recv() != "ready":
            raise RuntimeError(f"{name} did not start")
        workers.append((mine, proc))
    results: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(workers))}
    try:
        for t in range(1, TURNS + 1):
            for pipe, _ in workers:
                pipe.send(("turn", t))
                pipe.recv()
            if t in POINTS:
                for i, (pipe, _) in enumerate(workers):
                    pipe.send(("point", t))
                    results[i].append(pipe.recv())
        for pipe, proc in workers:
            pipe.send(("close", None))
            pipe.recv()
            proc.join()
    finally:
        for _, proc in workers:
            if proc.is_alive():
                proc.terminate()
    return [r for i in range(len(workers)) for r in results[i]]


def cold_reads(rows: list[dict[str, Any]]) -> None:
    """get_tuple as another process calls it: a fresh saver each time
    (nothing remembered), of the checkpoint that was the thread's head at
    each point.  Measured after every contender has run, the contenders in
    turn, read after read, so that they share the machine's load; the last
    read's tuple is freed before the clock starts."""
    conns = {
        dsn: psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        for dsn in {r["dsn"] for r in rows}
    }
    try:
        for point in POINTS:
            at = [r for r in rows if r["turns"] == point]
            times: list[list[float]] = [[] for _ in at]
            for _ in range(COLD):
                for r, xs in zip(at, times):
                    tup = None
                    saver = make_saver(r["kind"], conns[r["dsn"]])
                    t0 = time.perf_counter()
                    tup = saver.get_tuple(r["head"])
                    xs.append(time.perf_counter() - t0)
                    assert tup is not None
            for r, xs in zip(at, times):
                r["get_tuple_cold"] = (pct(xs, 50), pct(xs, 99))
    finally:
        for c in conns.values():
            c.close()


def high_water() -> int:
    """The process's peak resident memory so far, in bytes (VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def walk_history(kind: str, dsn: str) -> None:
    """In a process of its own: the thread's whole history, as a client
    pages through it (graph.get_state_history, one snapshot at a time).
    Prints its time, its length and how much the peak resident memory grew."""
    schema = next(c[1] for c in CONTENDERS.values() if c[0] == kind)
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        graph = build(schema, 0).compile(checkpointer=make_saver(kind, conn))
        cfg: Any = {"configurable": {"thread_id": "conversation"}}
        graph.get_state(cfg)  # connected, imported, warmed up
        before = high_water()
        t0 = time.perf_counter()
        n = 0
        for _ in graph.get_state_history(cfg):
            n += 1
        seconds = time.perf_counter() - t0
        print(f"{n} {seconds} {high_water() - before}")


def histories(rows: list[dict[str, Any]]) -> None:
    last = POINTS[-1]
    for r in rows:
        if r["turns"] != last:
            continue
        out = subprocess.run([sys.executable, __file__, "--history", r["kind"], r["dsn"]], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"the history walk of {r['saver']} failed: {out.stderr}")
        n, seconds, grew = out.stdout.split()
        r["history"] = (int(n), float(seconds), int(grew))
        print(f"  {r['saver']}: the history of {n} checkpoints in {float(seconds):.1f} s, memory grew {int(grew) / 1e6:.0f} MB", flush=True)


def main() -> None:
    with psycopg.connect("dbname=postgres") as c:
        version = c.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        fsync = c.execute("SHOW fsync").fetchone()[0]  # type: ignore[index]
    rng = random.Random(5)
    one = [text(rng).encode() for _ in range(200)]
    many = b" ".join(one)
    print(
        f"LangGraph savers: {TURNS} turns, PostgreSQL {version}, fsync={fsync}, a vocabulary of {VOCAB} words "
        f"(zlib: a message {sum(map(len, one)) / sum(len(zlib.compress(m)) for m in one):.1f} to 1, "
        f"200 of them together {len(many) / len(zlib.compress(many)):.1f} to 1)"
    )
    only = os.environ.get("HX_BENCH_SAVERS")
    rows = run([name for name, (kind, _, _) in CONTENDERS.items() if not only or kind in only.split(",")])
    print(f"  cold reads: {COLD} of each checkpoint that was a head, the contenders in turn", flush=True)
    cold_reads(rows)
    if os.environ.get("HX_BENCH_HISTORY", "1") != "0":
        histories(rows)

    def lat(v: tuple[float, float]) -> str:
        return f"{v[0]:.2f} / {v[1]:.2f}"

    for point in POINTS:
        print(f"\nafter {point} turns (latencies: p50 / p99 in ms, over every call so far)")
        print(
            f"{'saver':<27}| {'messages':>8} | {'on disk':>9} | {'WAL':>9} | {'WAL/turn':>8} | {'put':>13} | {'put_writes':>13} | "
            f"{'get_tuple':>13} | {'get_tuple cold':>14} | {'turn':>15}"
        )
        print("-" * 27 + "+" + "+".join("-" * w for w in (10, 11, 11, 10, 15, 15, 15, 16, 17)))
        for r in rows:
            if r["turns"] != point:
                continue
            print(
                f"{r['saver']:<27}| {r['messages']:>8} | {r['disk'] / 1e6:>6.2f} MB | {r['wal'] / 1e6:>6.1f} MB | {r['wal'] / point / 1e3:>5.1f} kB | "
                f"{lat(r['put']):>13} | {lat(r['put_writes']):>13} | {lat(r['get_tuple']):>13} | {lat(r['get_tuple_cold']):>14} | {lat(r['turn']):>15}"
            )
    last = POINTS[-1]
    print(f"\nbytes on disk after {last} turns, by table")
    for r in rows:
        if r["turns"] == last:
            print(f"  {r['saver']}: " + ", ".join(f"{t} {b / 1e6:.2f} MB" for t, b in sorted(r["tables"].items(), key=lambda x: -x[1])))
    if any("history" in r for r in rows):
        print(f"\nthe history after {last} turns (graph.get_state_history walked to its end, a process of its own)")
        for r in rows:
            if "history" in r:
                n, seconds, grew = r["history"]
                print(f"  {r['saver']:<27} {n:>5} checkpoints  {seconds:>8.1f} s  memory grew {grew / 1e6:>7.0f} MB")
    by = {(r["saver"], r["turns"]): r for r in rows}
    hx, pg, pgd = by.get(("HxSaver", last)), by.get(("PostgresSaver", last)), by.get(("PostgresSaver+DeltaChannel", last))
    if hx is None:
        return
    targets: list[tuple[str, float, str, bool]] = []
    if pg is not None:
        targets += [
            ("bytes on disk, HxSaver / PostgresSaver", hx["disk"] / pg["disk"], "<= 1/50", hx["disk"] * 50 <= pg["disk"]),
            ("WAL per turn, HxSaver / PostgresSaver", hx["wal"] / pg["wal"], "<= 1/10", hx["wal"] * 10 <= pg["wal"]),
            ("get_tuple p50, HxSaver / PostgresSaver", hx["get_tuple"][0] / pg["get_tuple"][0], "<= 1", hx["get_tuple"][0] <= pg["get_tuple"][0]),
            ("put p50, HxSaver / PostgresSaver", hx["put"][0] / pg["put"][0], "<= 1/2", hx["put"][0] * 2 <= pg["put"][0]),
        ]
        for point in POINTS:
            hxc, pgc = by[("HxSaver", point)]["get_tuple_cold"][0], by[("PostgresSaver", point)]["get_tuple_cold"][0]
            targets.append((f"get_tuple p50 cold at {point} turns, HxSaver / PostgresSaver", hxc / pgc, "<= 1", hxc <= pgc))
        if "history" in hx and "history" in pg:
            targets.append(("history's time, HxSaver / PostgresSaver", hx["history"][1] / pg["history"][1], "<= 1/10",
                            hx["history"][1] * 10 <= pg["history"][1]))
    if "history" in hx:
        targets.append(("history's memory, HxSaver, MB", hx["history"][2] / 1e6, "<= 100", hx["history"][2] <= 100e6))
    if pgd is not None:
        targets += [
            ("bytes on disk, HxSaver / PostgresSaver+DeltaChannel", hx["disk"] / pgd["disk"], "<= 1/3", hx["disk"] * 3 <= pgd["disk"]),
            ("put p50, HxSaver / PostgresSaver+DeltaChannel", hx["put"][0] / pgd["put"][0], "<= 1", hx["put"][0] <= pgd["put"][0]),
            ("turn p50, HxSaver / PostgresSaver+DeltaChannel", hx["turn"][0] / pgd["turn"][0], "<= 0.35", hx["turn"][0] <= 0.35 * pgd["turn"][0]),
        ]
    print(f"\ntargets at {last} turns, and cold reads at each point")
    for label, ratio, target, met in targets:
        print(f"  {label:<62} {ratio:>8.4f}  {target:>8}  {'yes' if met else 'NO'}")
    print(f"Targets met: {sum(t[3] for t in targets)} of {len(targets)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--history"]:
        walk_history(sys.argv[2], sys.argv[3])
    else:
        main()
