"""What changed between two states of a thread, as hx_merge ops.

A thread's state is one JSON object, ``{channel: encoded value}``.  A
checkpoint stores the ops that turn its parent's state into its own:

- a list whose items are objects with unique ``id``s (what ``add_messages``
  keeps) changes by ``discard`` (removed ids) and ``upsert`` (new or changed
  items, by ``id``), or ``clear`` when it was emptied;
- a list that only grew at its end changes by ``append``;
- any other value is set whole (``add``, which also stores ``null``), and a
  channel that disappeared is deleted (``delete``).

``apply_ops`` is the same semantics in Python (hx_merge is the reference), so
that a delta is checked against the value it must produce before it is
stored: a delta that would not rebuild the value is replaced by a plain set.
"""

from __future__ import annotations

import json
from typing import Any

Ops = list[dict[str, Any]]


def pointer(channel: str) -> str:
    return "/" + channel.replace("~", "~0").replace("/", "~1")


def _ids(items: list[Any]) -> list[str] | None:
    """The items' ids when every item is an object with a unique string id."""
    ids: list[str] = []
    seen: set[str] = set()
    for it in items:
        if type(it) is not dict:
            return None
        i = it.get("id")
        if type(i) is not str or i in seen:
            return None
        seen.add(i)
        ids.append(i)
    return ids


Sources = dict[str, tuple[str, Any]]


def sources_of(state: dict[str, Any], skip: str) -> Sources:
    """Items with an id in LangGraph's own channels of a state (``__start__``
    holds a run's input), by id, with their pointers: a new message that is
    one of them is copied from there instead of stored again."""
    out: Sources = {}
    for ch, v in state.items():
        if ch == skip or not ch.startswith("__"):
            continue
        lists = [(pointer(ch), v)] if type(v) is list else []
        if type(v) is dict:
            lists = [(pointer(ch) + pointer(k), x) for k, x in v.items() if type(x) is list]
        for base, items in lists:
            for i, it in enumerate(items):
                if type(it) is dict and type(it.get("id")) is str:
                    out.setdefault(it["id"], (f"{base}/{i}", it))
    return out


def same(a: Any, b: Any) -> bool:
    """Equal as JSON text: the same values of the same types, an object's
    keys in the same order (``==`` ignores it, and a value whose keys
    changed order would keep its old order)."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return False
    if t is dict:
        return len(a) == len(b) and all(ka == kb and same(va, vb) for (ka, va), (kb, vb) in zip(a.items(), b.items()))
    if t is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def list_ops(path: str, old: list[Any], new: list[Any], sources: Sources | None = None) -> Ops | None:
    """Ops from list ``old`` to list ``new``, or None when only a whole set
    says it.  Items that are the same object in both are not compared."""
    if not new:
        return [] if not old else [{"op": "clear", "path": path}]
    n = len(old)
    old_ids = _ids(old)
    new_ids = _ids(new) if old_ids is not None else None
    if old_ids is None or new_ids is None:
        # not a list of messages: only growth at the end has an op
        if len(new) >= n and all(same(a, b) for a, b in zip(old, new)):
            return [] if len(new) == n else [{"op": "append", "path": path, "items": new[n:]}]
        return None
    new_set = set(new_ids)
    removed = [i for i in old_ids if i not in new_set]
    kept = [i for i in old_ids if i in new_set]
    # upsert replaces kept items in place and appends the others in order:
    # the result has the kept ids first, in their old order
    if new_ids[: len(kept)] != kept:
        return None
    old_by_id = {i: it for i, it in zip(old_ids, old)}
    changed = [
        it
        for i, it in zip(new_ids[: len(kept)], new[: len(kept)])
        if not same(old_by_id[i], it)
    ]
    ops: Ops = []
    if removed:
        ops.append({"op": "discard", "path": path, "keys": removed})
    if changed:
        ops.append({"op": "upsert", "path": path, "items": changed})
    # the new items, in order: copied from where the parent state has them,
    # upserted otherwise
    run: list[Any] = []
    for i, it in zip(new_ids[len(kept) :], new[len(kept) :]):
        src = sources.get(i) if sources else None
        if src is not None and same(src[1], it):
            if run:
                ops.append({"op": "upsert", "path": path, "items": run})
                run = []
            ops.append({"op": "copy", "from": src[0], "path": path + "/-"})
        else:
            run.append(it)
    if run:
        ops.append({"op": "upsert", "path": path, "items": run})
    return ops


def appended_ops(channel: str, tail: list[Any], *, keyed: bool, sources: Sources | None = None) -> Ops:
    """Ops that add ``tail`` at the end of the channel's list (which already
    is the parent's list): for a list of objects with ids (``keyed``, and
    the tail's ids new) by ``upsert``, each item the parent state holds in
    LangGraph's own channels (``sources``) by a ``copy`` from there; for
    another list by ``append``."""
    if not tail:
        return []
    path = pointer(channel)
    if not keyed:
        return [{"op": "append", "path": path, "items": tail}]
    ops: Ops = []
    run: list[Any] = []
    for it in tail:
        src = sources.get(it["id"]) if sources else None
        if src is not None and same(src[1], it):
            if run:
                ops.append({"op": "upsert", "path": path, "items": run})
                run = []
            ops.append({"op": "copy", "from": src[0], "path": path + "/-"})
        else:
            run.append(it)
    if run:
        ops.append({"op": "upsert", "path": path, "items": run})
    return ops


def value_ops(channel: str, old: Any, new: Any, *, had: bool, sources: Sources | None = None) -> Ops:
    """Ops that turn the channel's ``old`` value (``had``: it had one) into
    ``new``."""
    path = pointer(channel)
    if had:
        if old is new:
            return []
        if type(old) is list and type(new) is list:
            ops = list_ops(path, old, new, sources)
            if ops is not None:
                return ops
        elif same(old, new):
            return []
    return [{"op": "add", "path": path, "value": new}]


def channel_of(op: dict[str, Any]) -> str:
    return str(op["path"][1:].split("/")[0].replace("~1", "/").replace("~0", "~"))


def resolve(state: Any, ptr: str) -> Any:
    for t in ptr[1:].split("/"):
        t = t.replace("~1", "/").replace("~0", "~")
        state = state[int(t)] if type(state) is list else state[t]
    return state


class Replayer:
    """Deltas applied one after another to a state of its own, in place:
    lists are changed where they are and each list's ids are indexed once,
    so a long chain costs the state plus its ops (apply_ops copies each
    list it changes, as a shared state needs).  ``copy()`` takes the state
    as it is now, to keep while the replay goes on."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state
        self._indexes: dict[str, dict[Any, int]] = {}
        self._channels: dict[str, str] = {}  # path -> channel: a chain names a few channels many times

    def copy(self) -> dict[str, Any]:
        """The state now: its lists copied (the replay changes them in
        place), their items and the other values shared (the replay
        replaces those, never changes them)."""
        return {ch: v.copy() if type(v) is list else v for ch, v in self.state.items()}

    def apply(self, ops: Ops) -> None:
        state, indexes, channels = self.state, self._indexes, self._channels
        for op in ops:
            path = op["path"]
            ch = channels.get(path)
            if ch is None:
                ch = channels[path] = channel_of(op)
            kind = op["op"]
            # what apply_ops does, without a call per op
            if kind == "add":
                # a list of its own: it is changed in place later, and the
                # op may be replayed again (Pager replays a page's deltas
                # once per branch)
                value = op["value"]
                state[ch] = value.copy() if type(value) is list else value
                indexes.pop(ch, None)
                continue
            if kind == "delete":
                state.pop(ch, None)
                indexes.pop(ch, None)
                continue
            cur = state.get(ch)
            if kind in ("upsert", "copy", "append") and type(cur) is list:
                if kind == "append":
                    cur.extend(op["items"])
                    indexes.pop(ch, None)
                    continue
                index = indexes.get(ch)
                if index is None:
                    index = indexes[ch] = {it.get("id"): k for k, it in reversed(list(enumerate(cur))) if type(it) is dict}
                items = op["items"] if kind == "upsert" else [resolve(state, op["from"])]
                for it in items:
                    key = it.get("id") if type(it) is dict else None
                    k = index.get(key) if kind == "upsert" and key is not None else None
                    if k is None:
                        if key is not None and key not in index:
                            index[key] = len(cur)
                        cur.append(it)
                    else:
                        cur[k] = it
            else:
                indexes.pop(ch, None)
                apply_ops(state, [op])


def replay(state: dict[str, Any], deltas: list[Ops]) -> dict[str, Any]:
    """Apply many deltas to a state of one's own, in place (Replayer)."""
    r = Replayer(state)
    for ops in deltas:
        r.apply(ops)
    return r.state


def apply_ops(state: dict[str, Any], ops: Ops) -> dict[str, Any]:
    """Apply our own ops (top-level channels only) to a state, in place."""
    for op in ops:
        ch = op["path"][1:].split("/")[0].replace("~1", "/").replace("~0", "~")
        kind = op["op"]
        if kind == "add":
            state[ch] = op["value"]
        elif kind == "delete":
            state.pop(ch, None)
        elif kind == "append":
            state[ch] = list(state.get(ch) or []) + op["items"]
        elif kind == "clear":
            state[ch] = []
        elif kind == "discard":
            keys = set(op["keys"])
            state[ch] = [it for it in state.get(ch) or [] if not (type(it) is dict and it.get("id") in keys)]
        elif kind == "copy":
            state[ch] = list(state.get(ch) or []) + [resolve(state, op["from"])]
        elif kind == "upsert":
            cur = list(state.get(ch) or [])
            index = {it.get("id"): k for k, it in enumerate(cur) if type(it) is dict}
            for it in op["items"]:
                k = index.get(it.get("id"))
                if k is None:
                    index[it.get("id")] = len(cur)
                    cur.append(it)
                else:
                    cur[k] = it
            state[ch] = cur
        else:
            raise ValueError(f"unexpected op {kind!r}")
    return state


def to_patch(ops: Ops, before: dict[str, Any]) -> list[dict[str, Any]]:
    """The RFC 6902 patch of ``ops`` applied to ``before`` (which is not
    changed), for the thread's stream."""
    patch: list[dict[str, Any]] = []
    state = {k: v for k, v in before.items()}
    for op in ops:
        path = "/" + op["path"][1:].split("/")[0]
        ch = path[1:].replace("~1", "/").replace("~0", "~")
        kind = op["op"]
        if kind == "add":
            patch.append({"op": "replace" if ch in state else "add", "path": path, "value": op["value"]})
        elif kind == "delete":
            if ch in state:
                patch.append({"op": "remove", "path": path})
        elif kind == "append":
            if type(state.get(ch)) is not list:
                patch.append({"op": "add", "path": path, "value": []})
            patch.extend({"op": "add", "path": path + "/-", "value": it} for it in op["items"])
        elif kind == "copy":
            if type(state.get(ch)) is not list:
                patch.append({"op": "add", "path": path, "value": []})
            patch.append({"op": "add", "path": path + "/-", "value": resolve(state, op["from"])})
        elif kind == "clear":
            patch.append({"op": "add", "path": path, "value": []})
        elif kind == "discard":
            cur = state.get(ch) or []
            keys = set(op["keys"])
            for k in range(len(cur) - 1, -1, -1):
                if type(cur[k]) is dict and cur[k].get("id") in keys:
                    patch.append({"op": "remove", "path": f"{path}/{k}"})
        elif kind == "upsert":
            cur = state.get(ch)
            if type(cur) is not list:
                patch.append({"op": "add", "path": path, "value": []})
                cur = []
            index = {it.get("id"): k for k, it in enumerate(cur) if type(it) is dict}
            n = len(cur)
            for it in op["items"]:
                at = index.get(it.get("id"))
                if at is None:
                    index[it.get("id")] = n
                    n += 1
                    patch.append({"op": "add", "path": path + "/-", "value": it})
                else:
                    patch.append({"op": "replace", "path": f"{path}/{at}", "value": it})
        apply_ops(state, [op])
    return patch


def size(j: Any) -> int:
    """The length of a value's JSON text as the saver writes it."""
    return len(json.dumps(j, separators=(",", ":"), ensure_ascii=False))


def size_after(old: Any, new: Any, ops: Ops, old_size: int | None) -> int:
    """The length of ``new``'s JSON text, from ``old``'s (``old_size``, when
    known) when ``ops`` only added items at the end of a list (append,
    copy, upsert of new ids), which is measuring the new items only;
    measured whole otherwise."""
    if old_size is None or type(old) is not list or type(new) is not list or len(new) < len(old):
        return size(new)
    kinds = {op["op"] for op in ops}
    if not kinds <= {"append", "copy", "upsert"}:
        return size(new)
    if "upsert" in kinds:
        old_ids = {it.get("id") for it in old if type(it) is dict}
        for op in ops:
            if op["op"] == "upsert" and any(type(it) is dict and it.get("id") in old_ids for it in op["items"]):
                return size(new)  # an item replaced
    tail = new[len(old):]
    return old_size + sum(size(x) + 1 for x in tail) - (1 if tail and not old else 0)
