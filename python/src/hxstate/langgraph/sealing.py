"""What an encrypting saver stores, sealed where it belongs, and opened
back (with ``crypto.EncryptedSerializer``, which this module names only
through the ``Sealer`` protocol: it needs no cryptography itself).

A checkpoint's delta and snapshot are one envelope each: the JSON of the
ops (or of the state) compressed by zlib, then sealed bound to the thread,
namespace, checkpoint, kind and ``{channel: version}`` of what it holds,
which the envelope carries in clear (``c``).  A pending write's value is an
envelope bound to its thread, namespace, checkpoint, task, index and
channel.  A saver without a sealer refuses an envelope (it cannot open
it), and one with a sealer refuses anything else (plaintext where
ciphertext is expected)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from hxstate.errors import Tampered
from hxstate.langgraph import delta as D
from hxstate.langgraph.storage import dumps, pack, unpack

__all__ = ["Sealer", "is_sealed", "open_part", "open_write", "seal_part", "seal_write"]


class Sealer(Protocol):
    def seal(self, plaintext: bytes, where: Sequence[str]) -> dict[str, Any]: ...

    def unseal(self, envelope: Any, where: Sequence[str]) -> bytes: ...


def is_sealed(j: Any) -> bool:
    return type(j) is dict and j.get("$hx") == "sealed"


def _channels(c: dict[str, str]) -> str:
    return json.dumps(c, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def seal_part(sealer: Sealer, where: tuple[str, str, str], kind: str, value: Any, channels: dict[str, str]) -> str:
    """A delta's ops or a snapshot's state, sealed: its JSON text."""
    thread_id, ns, cid = where
    envelope = sealer.seal(pack(dumps(value), always=True) or b"", (thread_id, ns, cid, kind, _channels(channels)))
    envelope["c"] = channels
    return dumps(envelope)


def open_part(sealer: Sealer | None, where: tuple[str, str, str], kind: str, j: Any) -> Any:
    """A delta's ops or a snapshot's state from what a row holds (parsed):
    opened when sealed, refused when it should be and is not (or is, and
    the saver has no key)."""
    if sealer is None:
        if is_sealed(j):
            raise Tampered(f"an encrypted {kind}, and this saver has no key",
                           hint="Open the thread with the EncryptedSerializer it was written with.")
        return j
    c = j.get("c") if type(j) is dict else None
    if not is_sealed(j) or type(c) is not dict or not all(type(k) is str and type(v) is str for k, v in c.items()):
        raise Tampered(f"a plaintext {kind} where ciphertext is expected", detail=f"Checkpoint {where[2]} of thread {where[0]!r}.")
    value = json.loads(unpack(sealer.unseal(j, (*where, kind, _channels(c)))))
    touched = {D.channel_of(op) for op in value} if kind == "delta" else set(value)
    if not touched <= set(c):
        raise Tampered(f"a {kind} that changes channels its envelope does not name")
    return value


def seal_write(sealer: Sealer, where: tuple[str, str, str], task_id: str, idx: int, channel: str, value: Any) -> str:
    envelope = sealer.seal(pack(dumps(value), always=True) or b"", (*where, "write", task_id, str(idx), channel))
    return dumps(envelope)


def open_write(sealer: Sealer | None, where: tuple[str, str, str], task_id: str, idx: int, channel: str, j: Any) -> Any:
    if sealer is None:
        if is_sealed(j):
            raise Tampered("an encrypted write, and this saver has no key")
        return j
    if not is_sealed(j):
        raise Tampered("a plaintext write where ciphertext is expected", detail=f"Checkpoint {where[2]} of thread {where[0]!r}.")
    return json.loads(unpack(sealer.unseal(j, (*where, "write", task_id, str(idx), channel))))
