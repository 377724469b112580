"""A checkpoint's delta, applied by hx_merge to its parent's state, gives its
state: over random lists of messages and other values, and the RFC 6902
patch published for it gives the same."""

from __future__ import annotations

import json
import random
from typing import Any

import psycopg

from hxstate.langgraph import delta as D
from hxstate.patch import apply_patch


def random_change(rng: random.Random, old: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    new = [dict(m) for m in old]
    for _ in range(rng.randint(0, 4)):
        r = rng.random()
        if r < 0.4:
            new.append({"id": f"m{n}-{rng.randint(0, 10**9)}", "type": "ai", "content": "x" * rng.randint(0, 20)})
        elif r < 0.6 and new:
            new[rng.randrange(len(new))]["content"] = "edited"
        elif r < 0.75 and new:
            del new[rng.randrange(len(new))]
        elif r < 0.8:
            new = []
        elif r < 0.85 and len(new) > 1:
            rng.shuffle(new)  # no op says this: a whole set
        elif r < 0.9:
            new.append({"content": "no id"})  # not a list of messages
    return new


def test_replay_of_a_long_chain() -> None:
    """A chain of many deltas replayed in place gives what applying them one
    by one gives."""
    rng = random.Random(3)
    state: dict[str, Any] = {"messages": []}
    deltas = []
    for n in range(200):
        old = state["messages"]
        new = random_change(rng, old, n) if rng.random() < 0.9 else old + [{"id": None, "k": n}]
        ops = D.value_ops("messages", old, new, had=True)
        deltas.append(ops)
        state = D.apply_ops(json.loads(json.dumps(state)), ops)
        assert state["messages"] == new
    assert D.replay({"messages": []}, json.loads(json.dumps(deltas))) == state


def test_deltas_rebuild_states(conn: psycopg.Connection[Any]) -> None:
    rng = random.Random(7)
    cases = []
    for n in range(300):
        channel = rng.choice(["messages", "a/b~c"])
        old: Any = [{"id": f"s{i}", "type": "human", "content": str(i)} for i in range(rng.randint(0, 5))]
        had = rng.random() < 0.9
        new: Any = random_change(rng, old, n) if rng.random() < 0.8 else rng.choice([None, 1, "s", {"k": [1]}])
        state = {channel: old, "other": 1} if had else {"other": 1}
        if isinstance(new, list) and new and rng.random() < 0.5:
            # the run's input holds the new message: copied from there
            state["__start__"] = {"messages": [new[-1]]}
        ops = D.value_ops(channel, old if had else None, new, had=had, sources=D.sources_of(state, channel))
        expected = {**state, channel: new}
        assert D.apply_ops(json.loads(json.dumps(state)), ops) == expected
        assert D.replay(json.loads(json.dumps(state)), [ops[:1], ops[1:]]) == expected
        assert apply_patch(state, D.to_patch(ops, state)) == expected
        cases.append((state, ops, expected))
    rows = conn.execute(
        "SELECT hx_merge(s, o) = e, s, o FROM unnest(%s::jsonb[], %s::jsonb[], %s::jsonb[]) AS t(s, o, e)",
        ([json.dumps(c[0]) for c in cases], [json.dumps(c[1]) for c in cases], [json.dumps(c[2]) for c in cases]),
    ).fetchall()
    bad = [r for r in rows if not r[0]]
    assert not bad, bad[:3]
    kinds = {op["op"] for c in cases for op in c[1]}
    assert {"upsert", "discard", "clear", "add", "append", "copy"} <= kinds
