"""Applying AG-UI events to a state: RFC 6902 patches and the rest, as pure
functions (no I/O), as the JavaScript client's applyEvent.

A state handed out is never changed afterwards: a patch copies the
containers along each path it touches (copy on write) and shares the rest
with the state before it, so a consumer may keep any state it was given.

``apply_event_sized`` also keeps the state's size, the length of its JSON
text (``json_size``), within a bound: a ``copy`` shares what it copies, so
a few bytes of deltas can double a state's text again and again (14
copies of the whole document make it 16,384 times as long), which a
consumer that prints it, or a gateway that forwards it, pays for.
"""

from __future__ import annotations

from typing import Any

from hxstate.errors import StateTooLarge


class PatchError(ValueError):
    """A patch that does not apply to the state (the follower resyncs)."""


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"malformed JSON Pointer {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(container: list[Any], token: str, *, append: bool) -> int:
    if append and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"array index {token!r} is not an index")
    i = int(token)
    if i > len(container) or (i == len(container) and not append):
        raise PatchError(f"array index {i} is out of range")
    return i


def _get(doc: Any, tokens: list[str]) -> Any:
    for t in tokens:
        if isinstance(doc, dict):
            if t not in doc:
                raise PatchError(f"member {t!r} does not exist")
            doc = doc[t]
        elif isinstance(doc, list):
            doc = doc[_index(doc, t, append=False)]
        else:
            raise PatchError("path goes through a scalar")
    return doc


def _copy_path(root: Any, tokens: list[str]) -> tuple[Any, Any]:
    """A shallow copy of root and of every container down to the parent of
    the last token; returns (new root, that parent)."""
    new_root = root.copy() if isinstance(root, (dict, list)) else root
    parent = new_root
    for t in tokens[:-1]:
        if isinstance(parent, dict):
            if t not in parent:
                raise PatchError(f"member {t!r} does not exist")
            child = parent[t]
            child = child.copy() if isinstance(child, (dict, list)) else child
            parent[t] = child
        elif isinstance(parent, list):
            i = _index(parent, t, append=False)
            child = parent[i]
            child = child.copy() if isinstance(child, (dict, list)) else child
            parent[i] = child
        else:
            raise PatchError("path goes through a scalar")
        parent = child
    return new_root, parent


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    root, parent = _copy_path(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, append=True), value)
    else:
        raise PatchError("path goes through a scalar")
    return root


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    root, parent = _copy_path(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"member {last!r} does not exist")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, append=False)]
    else:
        raise PatchError("path goes through a scalar")
    return root


def apply_patch(doc: Any, patch: list[dict[str, Any]]) -> Any:
    """``doc`` with an RFC 6902 patch applied, all of it or none (raises
    PatchError); ``doc`` itself is not changed."""
    for op in patch:
        kind = op.get("op")
        tokens = _tokens(op.get("path", ""))
        if kind == "add":
            doc = _add(doc, tokens, op["value"])
        elif kind == "remove":
            doc = _remove(doc, tokens)
        elif kind == "replace":
            _get(doc, tokens)
            doc = _add(_remove(doc, tokens), tokens, op["value"]) if tokens else op["value"]
        elif kind == "move":
            frm = _tokens(op["from"])
            value = _get(doc, frm)
            doc = _add(_remove(doc, frm), tokens, value)
        elif kind == "copy":
            doc = _add(doc, tokens, _get(doc, _tokens(op["from"])))
        elif kind == "test":
            if _get(doc, tokens) != op["value"]:
                raise PatchError(f"test failed at {op.get('path')!r}")
        else:
            raise PatchError(f"unknown op {kind!r}")
    return doc


def is_end(event: dict[str, Any]) -> bool:
    """Is the event the ``hx.stream_end`` that ends a stream (a row
    deleted, a thread deleted)?"""
    return event.get("type") == "CUSTOM" and event.get("name") == "hx.stream_end"


def apply_event(state: Any, event: dict[str, Any]) -> Any:
    """The state after an AG-UI event: a snapshot replaces it, a delta
    patches it, ``hx.stream_end`` makes it None, anything else leaves it."""
    kind = event.get("type")
    if kind == "STATE_SNAPSHOT":
        return event.get("snapshot")
    if kind == "STATE_DELTA":
        return apply_patch(state, event.get("delta") or [])
    if is_end(event):
        return None
    return state


def json_size(value: Any, limit: int | None = None) -> int:
    """The length of ``value``'s compact JSON text in bytes of UTF-8 (string
    escapes not counted), without printing it; once past ``limit`` it stops
    and returns a number over ``limit``."""
    total = 0
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is str:
            total += (len(v) if v.isascii() else len(v.encode("utf-8", "surrogatepass"))) + 2
        elif t is dict:
            total += 2 * len(v) + 1 if v else 2  # braces, colons and commas
            for k, x in v.items():
                total += (len(k) if k.isascii() else len(k.encode("utf-8", "surrogatepass"))) + 2
                stack.append(x)
        elif t is list:
            total += len(v) + 1 if v else 2  # brackets and commas
            stack.extend(v)
        elif v is None or t is bool:
            total += 4 if v is None or v is True else 5
        else:
            total += len(repr(v))
        if limit is not None and total > limit:
            return total
    return total


def _member_size(parent: Any, key: str, value: Any, limit: int) -> int:
    """What an object's member, or an array's item, adds to its parent's text."""
    if isinstance(parent, dict):
        return json_size(value, limit) + len(key.encode("utf-8", "surrogatepass")) + 4
    return json_size(value, limit) + 1


def apply_patch_sized(doc: Any, patch: list[dict[str, Any]], size: int, limit: int) -> tuple[Any, int]:
    """``apply_patch``, keeping ``size``, the length of ``doc``'s JSON text,
    up to date op by op: ``(new doc, its size)``.  Raises StateTooLarge
    when the result would be longer than ``limit`` bytes (and PatchError
    as apply_patch); ``doc`` is not changed.  The size of what an op adds
    or removes is measured (a copy's source too, up to the bound), and
    when the running total passes the bound the document is measured
    whole before it is refused."""
    for op in patch:
        kind = op.get("op")
        tokens = _tokens(op.get("path", "")) if kind in ("add", "remove", "replace", "copy") else []
        before = doc
        doc = apply_patch(doc, [op])
        if kind in ("add", "replace", "copy") and not tokens:
            size = json_size(doc, limit)  # the whole document replaced
        elif kind in ("add", "remove", "replace", "copy"):
            parent = _parent_or_none(before, tokens)
            # remove and replace take a member or an item away; add and
            # copy replace an object's member, and insert into an array
            if kind in ("remove", "replace") or (isinstance(parent, dict) and tokens[-1] in parent):
                size -= _member_size(parent, tokens[-1], _get(before, tokens), limit)
            if kind != "remove":
                value = _get(before, _tokens(op.get("from", ""))) if kind == "copy" else op.get("value")
                size += _member_size(parent, tokens[-1], value, limit - size)
        if size > limit:
            size = json_size(doc, limit)
            if size > limit:
                raise StateTooLarge(f"the state would be longer than {limit} bytes")
    return doc, max(size, 0)


def _parent_or_none(doc: Any, tokens: list[str]) -> Any:
    try:
        return _get(doc, tokens[:-1])
    except PatchError:
        return None


def apply_event_sized(state: Any, size: int, event: dict[str, Any], limit: int) -> tuple[Any, int]:
    """``apply_event`` with the state's size kept (``apply_patch_sized``):
    ``(state after the event, its size)``; raises StateTooLarge for a state
    longer than ``limit`` bytes."""
    kind = event.get("type")
    if kind == "STATE_SNAPSHOT":
        snapshot = event.get("snapshot")
        n = json_size(snapshot, limit)
        if n > limit:
            raise StateTooLarge(f"a snapshot longer than {limit} bytes")
        return snapshot, n
    if kind == "STATE_DELTA":
        return apply_patch_sized(state, event.get("delta") or [], size, limit)
    if is_end(event):
        return None, 0
    return state, size
