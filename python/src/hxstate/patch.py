"""Applying AG-UI events to a state: RFC 6902 patches and the rest, as pure
functions (no I/O), as the JavaScript client's applyEvent.

A state handed out is never changed afterwards: a patch copies the
containers along each path it touches (copy on write) and shares the rest
with the state before it, so a consumer may keep any state it was given.
"""

from __future__ import annotations

from typing import Any


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
