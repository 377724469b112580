"""bench/langgraph/savers.py: HxSaver against PostgresSaver (and PostgresSaver with
LangGraph's DeltaChannel for the messages), on one server, in one run.

A 500-turn conversation through a real graph (MessagesState, a fake chat
model, a tool node): each message about 1 kB of text, a tool call every
third turn (the model asks for the tool, the tool answers, the model
replies).  Each contender has a database of its own on the same server and
runs the whole conversation, one after the other.  After 100, 250 and 500
turns: the bytes on disk of the saver's tables (heap, indexes and TOAST),
the WAL generated since the start (pg_current_wal_lsn; nothing else runs on
the server), and the p50 and p99 of put, put_writes and get_tuple over the
ten turns before that point, and of a whole turn through the graph.
get_tuple is also timed on a fresh saver (nothing remembered), as a reader
in another process would call it: 25 reads of the checkpoint that was the
head at each point, after every contender has run, the contenders in turn
(they share the machine's load read after read).  The text of messages
is words of HX_BENCH_VOCAB words (2000, or 30: text that compresses more).

    python bench/langgraph/savers.py            # PG* variables name the server
    HX_BENCH_TURNS=100 python bench/langgraph/savers.py
    HX_BENCH_VOCAB=30 python bench/langgraph/savers.py
    HX_BENCH_SAVERS=hx,pg python bench/langgraph/savers.py   # some of hx, pg, pgdelta (no table)

Run by bench/run's part "langgraph" (HX_BENCH_ONLY=langgraph bash bench/run).
Prints one table per point, then the targets: at the last point, and a
cold read's at every point.
"""

from __future__ import annotations

import functools
import itertools
import os
import random
import statistics
import sys
import time
import zlib
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
WINDOW = 10  # turns before each point whose calls are timed
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
        self.on = False
        for name in self.times:
            setattr(saver, name, self._wrap(name, getattr(saver, name)))

    def _wrap(self, name: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if self.on:
                    self.times[name].append(time.perf_counter() - t0)

        return timed


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] * 1000


def disk(conn: psycopg.Connection[Any], tables: list[str]) -> int:
    return int(
        conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(t::regclass)), 0) FROM unnest(%s::text[]) t", (tables,)
        ).fetchone()[0]  # type: ignore[index]
    )


def wal(conn: psycopg.Connection[Any]) -> int:
    return int(conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0])  # type: ignore[index]


CONTENDERS = {
    "HxSaver": ("hx", MessagesState, ["langgraph.checkpoints", "langgraph.writes"]),
    "PostgresSaver": ("pg", MessagesState, ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]),
    "PostgresSaver+DeltaChannel": ("pgdelta", DeltaMessagesState, ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]),
}


def run(name: str, kind: str, schema: type, tables: list[str]) -> list[dict[str, Any]]:
    db = f"hxbench_lg_{kind}"
    with psycopg.connect("dbname=postgres", autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
    dsn = f"dbname={db}"
    rng = random.Random(1)
    results: list[dict[str, Any]] = []
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn, psycopg.connect(
        dsn, autocommit=True
    ) as probe:
        if kind == "hx":
            probe.execute("CREATE EXTENSION hxstate")
            saver: Any = HxSaver(conn)
        else:
            saver = PostgresSaver(conn)  # type: ignore[arg-type]
        saver.setup()
        probe.execute("CHECKPOINT")
        timed = Timed(saver)
        graph = build(schema, TURNS).compile(checkpointer=saver)
        cfg: Any = {"configurable": {"thread_id": "conversation"}}
        wal0 = wal(probe)
        turn_times: list[float] = []
        for t in range(1, TURNS + 1):
            point = next((p for p in POINTS if p - WINDOW < t <= p), None)
            timed.on = point is not None
            t0 = time.perf_counter()
            graph.invoke({"messages": [HumanMessage(text(rng), id=f"h-{t}")]}, cfg)
            if point is not None:
                turn_times.append(time.perf_counter() - t0)
            if t in POINTS:
                timed.on = False
                head = saver.get_tuple(cfg)
                n_messages = len(head.checkpoint["channel_values"].get("messages", [])) if head else 0
                results.append(
                    {
                        "saver": name,
                        "turns": t,
                        "messages": n_messages,
                        "disk": disk(probe, tables),
                        "wal": wal(probe) - wal0,
                        "put": (pct(timed.times["put"], 50), pct(timed.times["put"], 99)),
                        "put_writes": (pct(timed.times["put_writes"], 50), pct(timed.times["put_writes"], 99)),
                        "get_tuple": (pct(timed.times["get_tuple"], 50), pct(timed.times["get_tuple"], 99)),
                        "head": head.config if head else cfg,
                        "dsn": dsn,
                        "kind": kind,
                        "turn": (pct(turn_times, 50), pct(turn_times, 99)),
                    }
                )
                for k in timed.times:
                    timed.times[k].clear()
                turn_times.clear()
                r = results[-1]
                print(f"  {name}: {t} turns, {r['messages']} messages, {r['disk'] / 1e6:.2f} MB on disk, {r['wal'] / 1e6:.2f} MB of WAL", flush=True)
    return results


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
                    conn = conns[r["dsn"]]
                    saver: Any = HxSaver(conn) if r["kind"] == "hx" else PostgresSaver(conn)  # type: ignore[arg-type]
                    t0 = time.perf_counter()
                    tup = saver.get_tuple(r["head"])
                    xs.append(time.perf_counter() - t0)
                    assert tup is not None
            for r, xs in zip(at, times):
                r["get_tuple_cold"] = (pct(xs, 50), pct(xs, 99))
    finally:
        for c in conns.values():
            c.close()


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
    rows: list[dict[str, Any]] = []
    only = os.environ.get("HX_BENCH_SAVERS")
    for name, (kind, schema, tables) in CONTENDERS.items():
        if only and kind not in only.split(","):
            continue
        rows.extend(run(name, kind, schema, tables))
    print(f"  cold reads: {COLD} of each checkpoint that was a head, the contenders in turn", flush=True)
    cold_reads(rows)
    for point in POINTS:
        print(f"\nafter {point} turns (latencies: p50 / p99 in ms, over the {WINDOW} turns before)")
        print(
            f"{'saver':<27}| {'messages':>8} | {'on disk':>9} | {'WAL':>9} | {'WAL/turn':>8} | {'put':>13} | {'put_writes':>13} | "
            f"{'get_tuple':>13} | {'get_tuple cold':>14} | {'turn':>15}"
        )
        print("-" * 27 + "+" + "+".join("-" * w for w in (10, 11, 11, 10, 15, 15, 15, 16, 17)))
        for r in rows:
            if r["turns"] != point:
                continue

            def lat(v: tuple[float, float]) -> str:
                return f"{v[0]:.2f} / {v[1]:.2f}"

            print(
                f"{r['saver']:<27}| {r['messages']:>8} | {r['disk'] / 1e6:>6.2f} MB | {r['wal'] / 1e6:>6.1f} MB | {r['wal'] / point / 1e3:>5.1f} kB | "
                f"{lat(r['put']):>13} | {lat(r['put_writes']):>13} | {lat(r['get_tuple']):>13} | {lat(r['get_tuple_cold']):>14} | {lat(r['turn']):>15}"
            )
    last = POINTS[-1]
    if {r["saver"] for r in rows} < {"HxSaver", "PostgresSaver"}:
        return
    hx = next(r for r in rows if r["saver"] == "HxSaver" and r["turns"] == last)
    pg = next(r for r in rows if r["saver"] == "PostgresSaver" and r["turns"] == last)
    targets = [
        ("bytes on disk, HxSaver / PostgresSaver", hx["disk"] / pg["disk"], "<= 1/50", hx["disk"] * 50 <= pg["disk"]),
        ("WAL per turn, HxSaver / PostgresSaver", hx["wal"] / pg["wal"], "<= 1/10", hx["wal"] * 10 <= pg["wal"]),
        ("get_tuple p50, HxSaver / PostgresSaver", hx["get_tuple"][0] / pg["get_tuple"][0], "<= 1", hx["get_tuple"][0] <= pg["get_tuple"][0]),
        ("put p50, HxSaver / PostgresSaver", hx["put"][0] / pg["put"][0], "<= 1/2", hx["put"][0] * 2 <= pg["put"][0]),
    ]
    # a cold read, at every point: what another process pays
    for point in POINTS:
        hxc = next(r for r in rows if r["saver"] == "HxSaver" and r["turns"] == point)["get_tuple_cold"][0]
        pgc = next(r for r in rows if r["saver"] == "PostgresSaver" and r["turns"] == point)["get_tuple_cold"][0]
        targets.append((f"get_tuple p50 cold at {point} turns, HxSaver / PostgresSaver", hxc / pgc, "<= 1", hxc <= pgc))
    print(f"\ntargets at {last} turns, and cold reads at each point")
    for label, ratio, target, met in targets:
        print(f"  {label:<58} {ratio:>8.4f}  {target:>8}  {'yes' if met else 'NO'}")
    print(f"Targets met: {sum(t[3] for t in targets)} of {len(targets)}")


if __name__ == "__main__":
    main()
