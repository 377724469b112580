"""Integrity-bound encryption of what HxSaver stores (extra ``hxstate[crypto]``).

``EncryptedSerializer(key)`` encrypts with AES-GCM (256, 192 or 128-bit
keys), each ciphertext bound, as its associated data, to where it belongs:

- a checkpoint's delta and its snapshot: one ciphertext each, bound to the
  thread, the namespace, the checkpoint, the kind (delta or snapshot) and
  the channels it holds with their versions (``{"$hx": "sealed", "k": key
  id, "c": {channel: version}, "d": nonce and ciphertext, base64}``, the
  JSON of the values compressed by zlib first);
- a pending write: bound to the thread, namespace, checkpoint, task, index
  and channel.

A ciphertext moved anywhere else (another thread, checkpoint, channel,
version, task or index), replayed from an older row, or altered, does not
open: the read raises ``Tampered`` (XX001), and so does a plaintext value
where a ciphertext is expected (a row written without encryption, or
planted).  The metadata and LangGraph's bookkeeping (versions, time) stay
in clear, as LangGraph's own savers keep them; so do the channels' names
and versions in each envelope.  An encrypting saver publishes nothing to
the thread's stream (its events would be plaintext), and SQL cannot read
its state (``state_at`` and ``threads()`` refuse its rows).

Keys: ``EncryptedSerializer({"2026-11": key, "2026-05": old})`` encrypts
with the first and opens with any (``k`` names it), for rotation.  Used
with another saver (its ``dumps_typed``), a value is encrypted bound to its
type only.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

try:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
except ImportError as missing:  # an install without the extra
    raise ImportError(
        f"hxstate.langgraph.crypto needs cryptography ({missing.name} is missing): pip install 'hxstate[crypto]'"
    ) from missing

from langgraph.checkpoint.serde.base import SerializerProtocol

from hxstate.errors import Tampered
from hxstate.langgraph.serde import StrictSerializer

__all__ = ["EncryptedSerializer"]

_PREFIX = b"hxstate.langgraph/1"
_STANDALONE = "hxsealed+"


def _aad(key_id: str, where: Sequence[str]) -> bytes:
    """The associated data: the format, the key's id and where the value
    belongs, each length-prefixed (no two places read alike)."""
    parts = [_PREFIX, key_id.encode()] + [w.encode("utf-8", "surrogatepass") for w in where]
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


class EncryptedSerializer(SerializerProtocol):
    """AES-GCM with associated data: HxSaver seals its rows bound to where
    they are (``seal``, ``unseal``); ``inner`` serializes what JSON cannot
    hold inside them."""

    def __init__(self, keys: bytes | Mapping[str, bytes], *, serde: SerializerProtocol | None = None) -> None:
        named = {"k1": keys} if isinstance(keys, (bytes, bytearray)) else dict(keys)
        if not named:
            raise ValueError("EncryptedSerializer needs a key")
        for kid, key in named.items():
            if not isinstance(kid, str) or not kid or len(key) not in (16, 24, 32):
                raise ValueError("a key is 16, 24 or 32 bytes, named by a non-empty string")
        self._ciphers = {kid: AESGCM(bytes(key)) for kid, key in named.items()}
        #: the key new ciphertexts are made with (the first)
        self.key_id = next(iter(named))
        self.inner: SerializerProtocol = serde if serde is not None else StrictSerializer()

    def seal(self, plaintext: bytes, where: Sequence[str]) -> dict[str, Any]:
        nonce = os.urandom(12)
        sealed = self._ciphers[self.key_id].encrypt(nonce, plaintext, _aad(self.key_id, where))
        return {"$hx": "sealed", "k": self.key_id, "d": base64.b64encode(nonce + sealed).decode()}

    def unseal(self, envelope: Any, where: Sequence[str]) -> bytes:
        if type(envelope) is not dict or envelope.get("$hx") != "sealed":
            raise Tampered("a plaintext value where ciphertext is expected", detail=f"At {_place(where)}.")
        kid, data = envelope.get("k"), envelope.get("d")
        cipher = self._ciphers.get(kid) if isinstance(kid, str) else None
        if cipher is None or not isinstance(kid, str) or not isinstance(data, str):
            raise Tampered("a ciphertext under a key this saver does not have", detail=f"At {_place(where)}.")
        try:
            raw = base64.b64decode(data, validate=True)
            return cipher.decrypt(raw[:12], raw[12:], _aad(kid, where))
        except (InvalidTag, binascii.Error, ValueError):
            raise Tampered(
                "a ciphertext that does not belong where it is",
                detail=f"At {_place(where)}: moved from elsewhere, replayed from an older row, or altered.",
            ) from None

    # a value encrypted alone, for another saver: bound to its type only
    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        kind, data = self.inner.dumps_typed(obj)
        return _STANDALONE + kind, json.dumps(self.seal(data, ("standalone", kind))).encode()

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        if not kind.startswith(_STANDALONE):
            raise Tampered("a plaintext value where ciphertext is expected")
        inner = kind[len(_STANDALONE):]
        try:
            envelope = json.loads(payload)
        except ValueError:
            raise Tampered("a ciphertext that is not one") from None
        return self.inner.loads_typed((inner, self.unseal(envelope, ("standalone", inner))))


def _place(where: Sequence[str]) -> str:
    return " ".join(repr(w) for w in where)
