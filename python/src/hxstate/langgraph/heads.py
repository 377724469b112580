"""What the saver remembers of the last checkpoint it read or wrote on a
thread's namespace (its head), so that the next put finds the parent's
state without rebuilding it, and a message that did not change is not
encoded again.  Every entry is keyed by checkpoint id, whose content never
changes."""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from hxstate.langgraph.codec import Codec

__all__ = ["Encoded", "Head", "HeadCache", "Items", "encode_channel", "ids_of", "items_of", "unchanged"]


@dataclass
class Items:
    """A list channel's Python objects (as LangGraph passed them to put, or
    as a read decoded them), aligned with its encoded items: an item that
    is the same object with the same fields is not encoded again."""

    objs: list[Any]
    # each object's fields (a copy of its __dict__, for a model), None for
    # other values: a field reassigned since is a change
    fields: list[Any]
    # the encoded items' ids, when every item is an object with a unique
    # string id (a list of messages); None otherwise
    ids: frozenset[str] | None
    # every item is a model whose fields can be compared, or immutable
    # (None in fields: a plain dict or list, which may change in place)
    reusable: bool = True
    # every item is a model (a list of messages): their fields are read at
    # C speed
    models: bool = False


@dataclass
class Head:
    """A checkpoint's state as the saver stored it, with its chain's sizes."""

    checkpoint_id: str
    versions: dict[str, Any]
    state: dict[str, Any]  # channel -> encoded value
    # channel -> a list value's objects (Items)
    objects: dict[str, Items] = field(default_factory=dict)
    # its chain: the bytes and number of the deltas from its snapshot to
    # it, the snapshot's bytes, and its state's (JSON text)
    chain_bytes: int = 0
    chain_len: int = 0
    snapshot_bytes: int = 0
    state_bytes: int = 0
    # channel -> the length of its value's JSON text, where known
    sizes: dict[str, int] = field(default_factory=dict)
    # its nearest snapshot (itself, for a snapshot); "" when not known
    base_id: str = ""


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


_IMMUTABLE = (str, int, float, bool, type(None))


def _fields(obj: Any) -> Any:
    """What tells that an item changed since: a copy of a model's fields
    (its __dict__), () for an immutable value, None for a value that may
    change in place."""
    if isinstance(obj, _IMMUTABLE):
        return ()
    d = getattr(obj, "__dict__", None)
    if d is None or not hasattr(obj, "model_dump"):
        return None
    return dict(d)


def ids_of(encoded: list[Any]) -> frozenset[str] | None:
    """The ids of a list's encoded items, when each is an object with a
    unique string id."""
    ids = [it.get("id") if type(it) is dict else None for it in encoded]
    if not all(type(i) is str for i in ids):
        return None
    found: frozenset[str] = frozenset(cast(list[str], ids))
    return found if len(found) == len(ids) else None


def _is_model(x: Any) -> bool:
    return hasattr(x, "model_dump") and hasattr(x, "__dict__")


def items_of(values: list[Any], encoded: list[Any]) -> Items:
    """A list value's Items, as a Head keeps them."""
    fields = [_fields(x) for x in values]
    return Items(list(values), fields, ids_of(encoded), all(f is not None for f in fields), all(map(_is_model, values)))


_dict_of = operator.attrgetter("__dict__")


def _model_fields(values: list[Any]) -> list[Any]:
    """The fields of models, to compare with _fields' copies, at C speed
    (dicts compare without a copy)."""
    return list(map(_dict_of, values))


def unchanged(items: Items, value: list[Any]) -> bool:
    """Whether ``value`` holds ``items``' objects, each with its fields as
    they were, in their places (and maybe more after them): the common
    case, checked at C speed."""
    n = len(items.objs)
    return (
        items.reusable
        and len(value) >= n
        and all(map(operator.is_, value, items.objs))
        and (_model_fields(items.objs) if items.models else list(map(_fields, items.objs))) == items.fields
    )


@dataclass
class Encoded:
    """A channel's value encoded: ``tail``, the encoded items it added at
    the end of the parent's list when that is all it did (and, for a list
    with ids, their ids are new), else None."""

    value: Any
    items: Items | None
    tail: list[Any] | None


def encode_channel(codec: Codec, value: Any, old: Any, old_items: Items | None) -> Encoded:
    """A channel's value encoded, and for a list its Items: an item that is
    the same object with the same fields as in the parent takes the
    parent's encoding."""
    if type(value) is not list:
        return Encoded(codec.encode(value), None, None)
    if old_items is not None and type(old) is list and len(old) == len(old_items.objs) and unchanged(old_items, value):
        n = len(old)
        tail_objs = value[n:]
        tail = [codec.encode(x) for x in tail_objs]
        ids: frozenset[str] | None = None
        appended: list[Any] | None = tail
        if old_items.ids is not None:
            tail_ids = ids_of(tail)
            if tail_ids is not None and tail_ids.isdisjoint(old_items.ids):
                ids = old_items.ids | tail_ids
            elif tail:
                appended = None  # an id again: an upsert that replaces, not an append
        tail_fields = [_fields(x) for x in tail_objs]
        items = Items(old_items.objs + tail_objs, old_items.fields + tail_fields, ids, None not in tail_fields,
                      old_items.models and all(map(_is_model, tail_objs)))
        return Encoded(old + tail, items, appended)
    enc: list[Any] = []
    n = len(old_items.objs) if old_items is not None and type(old) is list else 0
    for i, x in enumerate(value):
        if i < n:
            assert old_items is not None
            if x is old_items.objs[i] and old_items.fields[i] is not None and _fields(x) == old_items.fields[i]:
                enc.append(old[i])
                continue
        enc.append(codec.encode(x))
    return Encoded(enc, items_of(value, enc), None)
