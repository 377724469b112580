"""What a thread's followers see: the graph's own channels and the head's
pending interrupts, published to the thread's log stream
(``@<schema>:<thread_id>``) in the put's own transaction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.serde.types import INTERRUPT

from hxstate.langgraph.codec import public_json

__all__ = ["checkpoint_event", "internal", "interrupt_items", "public_state"]


def internal(channel: str) -> bool:
    """LangGraph's own channels (``__start__``, ``branch:to:...``), which a
    thread's followers do not see."""
    return channel.startswith("__") or channel.startswith("branch:")


def public_state(state: Mapping[str, Any], interrupts: list[Any] | None = None) -> dict[str, Any]:
    """The state a thread's followers see: the graph's own channels, and
    the head's pending interrupts at ``__interrupt__`` as ``[{id, value}]``."""
    out = {k: v for k, v in state.items() if not internal(k)}
    if interrupts:
        out[INTERRUPT] = interrupts
    return out


def interrupt_items(encoded: Any) -> list[Any]:
    """A stored __interrupt__ write as ``[{id, value}]``."""
    items = encoded.get("items", []) if type(encoded) is dict and encoded.get("$hx") == "tuple" else [encoded]
    return [public_json(i) for i in items if type(i) is dict]


def checkpoint_event(
    patch: list[dict[str, Any]] | None,
    state: dict[str, Any],
    *,
    extends_head: bool,
    had_interrupts: bool,
    interrupts: list[Any],
) -> dict[str, Any] | None:
    """The event that tells a thread's stream of a checkpoint: a
    ``STATE_DELTA`` (``patch``, the RFC 6902 patch from the parent's public
    state) when the checkpoint extends the stream's head, a
    ``STATE_SNAPSHOT`` otherwise (a root: no patch; a fork); None when
    nothing its followers see changed."""
    if patch is not None and extends_head:
        delta: list[dict[str, Any]] = [{"op": "remove", "path": "/" + INTERRUPT}] if had_interrupts else []
        delta += patch
        if interrupts:
            delta.append({"op": "add", "path": "/" + INTERRUPT, "value": interrupts})
        return {"type": "STATE_DELTA", "delta": delta} if delta else None
    return {"type": "STATE_SNAPSHOT", "snapshot": public_state(state, interrupts)}
