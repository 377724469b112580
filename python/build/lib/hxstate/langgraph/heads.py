"""What the saver remembers of the last checkpoint it read or wrote on a
thread's namespace (its head), so that the next put finds the parent's
state without rebuilding it, and a message that did not change is not
encoded again.  Every entry is keyed by checkpoint id, whose content never
changes."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hxstate.langgraph.codec import Codec

__all__ = ["Head", "HeadCache", "encode_channel", "objects_of"]


@dataclass
class Head:
    """A checkpoint's state as the saver stored it, with its chain's sizes."""

    checkpoint_id: str
    versions: dict[str, Any]
    state: dict[str, Any]  # channel -> encoded value
    # channel -> the Python objects of a list value, with their field values,
    # aligned with the encoded list: an item that is the same object with the
    # same fields is not encoded again
    objects: dict[str, list[tuple[Any, Any]]] = field(default_factory=dict)
    # its chain: the bytes and number of the deltas from its snapshot to
    # it, the snapshot's bytes, and its state's (JSON text)
    chain_bytes: int = 0
    chain_len: int = 0
    snapshot_bytes: int = 0
    state_bytes: int = 0
    # channel -> the length of its value's JSON text, where known
    sizes: dict[str, int] = field(default_factory=dict)


class HeadCache:
    """The heads of the ``size`` threads' namespaces used last, shared by
    the threads of a saver over a pool."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._heads: OrderedDict[tuple[str, str], Head] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, thread_id: str, ns: str) -> Head | None:
        return self._heads.get((thread_id, ns))

    def remember(self, thread_id: str, ns: str, head: Head) -> None:
        key = (thread_id, ns)
        with self._lock:
            self._heads[key] = head
            self._heads.move_to_end(key)
            while len(self._heads) > self.size:
                self._heads.popitem(last=False)

    def forget(self, thread_ids: Sequence[str] | None = None) -> None:
        with self._lock:
            if thread_ids is None:
                self._heads.clear()
                return
            drop = set(thread_ids)
            for key in [k for k in self._heads if k[0] in drop]:
                del self._heads[key]


def _fields(obj: Any) -> Any:
    d = getattr(obj, "__dict__", None)
    if d is None or not hasattr(obj, "model_dump"):
        return None
    return tuple(d.values())


def _same(obj: Any, fields: Any) -> bool:
    if fields is None:
        return False
    values = obj.__dict__.values()
    return len(values) == len(fields) and all(a is b for a, b in zip(values, fields))


def objects_of(values: list[Any]) -> list[tuple[Any, Any]]:
    """A list value's items with their field values, as a Head keeps them."""
    return [(x, _fields(x)) for x in values]


def encode_channel(
    codec: Codec, value: Any, old: Any, old_objects: list[tuple[Any, Any]] | None
) -> tuple[Any, list[tuple[Any, Any]] | None]:
    """A channel's value encoded, and for a list its objects: an item that
    is the same object with the same fields as in the parent takes the
    parent's encoding."""
    if type(value) is not list:
        return codec.encode(value), None
    enc: list[Any] = []
    objs: list[tuple[Any, Any]] = []
    n = len(old_objects) if old_objects is not None and type(old) is list else 0
    for i, x in enumerate(value):
        if i < n:
            assert old_objects is not None
            o, f = old_objects[i]
            if x is o and _same(x, f):
                enc.append(old[i])
                objs.append((o, f))
                continue
        enc.append(codec.encode(x))
        objs.append((x, _fields(x)))
    return enc, objs
