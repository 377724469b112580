"""How the saver's columns are encoded: JSON text as the saver writes it,
identifiers and literals quoted for the SQL it composes, and ``packed``,
LangGraph's bookkeeping of a checkpoint (and pending writes over 256
bytes) as zlib-compressed JSON with a preset dictionary."""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

__all__ = ["ZDICT", "checkpoint_of", "dumps", "pack", "quote_ident", "quote_literal", "unpack"]

# zlib's preset dictionary for what the saver packs: the JSON LangGraph's
# checkpoints and messages are made of, the most frequent last.  A packed
# value names its dictionary by checksum (zlib's FDICT header), so this one
# never changes: another would be added beside it.
ZDICT = (
    b'{"v":4,"ts":"2026-01-01T00:00:00.000000+00:00","channel_versions":{"__start__":1,"messages":1,"branch:to:"},'
    b'"versions_seen":{"__input__":{},"__start__":{"__start__":1}},"pending_sends":[],'
    b'"updated_channels":["__start__","messages"]}'
    b'[{"content":"","additional_kwargs":{},"response_metadata":{},"type":"tool","name":null,"id":"",'
    b'"tool_call_id":"","artifact":null,"status":"success"},'
    b'{"content":"","additional_kwargs":{},"response_metadata":{},"type":"human","name":null,"id":""},'
    b'{"content":"","additional_kwargs":{},"response_metadata":{},"type":"ai","name":null,"id":"",'
    b'"tool_calls":[{"name":"","args":{},"id":"","type":"tool_call"}],"invalid_tool_calls":[],"usage_metadata":null}]'
)
_ZDICTS = {zlib.adler32(ZDICT): ZDICT}
# compressors primed with ZDICT, by window (its log2), each copied for a
# value (priming one anew costs more than compressing a checkpoint's
# bookkeeping).  A value takes the smallest window that holds the
# dictionary, the value and deflate's lookahead (262 bytes): it
# compresses to what the 32 kB window makes of it, and the state copied
# for a checkpoint's bookkeeping (550 bytes) is 16 kB, not deflate's
# default 256 kB (measured: 3.9 us against 6.0 for the copy and the
# compression, in a loop; the memory touched is what a running saver
# shares with everything else).  Every window decompresses with zlib's
# default, as before.
_PRIMED: dict[int, Any] = {}
_LOOKAHEAD = 262


def _primed(size: int) -> Any:
    wbits = min(15, max(9, (len(ZDICT) + size + _LOOKAHEAD - 1).bit_length()))
    z = _PRIMED.get(wbits)
    if z is None:
        # the hash table in proportion to the window (memLevel 8, zlib's
        # default, with the 32 kB one)
        z = _PRIMED[wbits] = zlib.compressobj(6, zlib.DEFLATED, wbits, wbits - 7, zdict=ZDICT)
    return z


def pack(text: str, *, always: bool = False) -> bytes | None:
    """JSON text compressed (zlib, with ZDICT).  A write's when that saves
    a quarter or more, a checkpoint's bookkeeping always: PostgreSQL's own
    compression (pglz, lz4: no entropy coding, no dictionary) saves a
    quarter of a 1 kB message at best, zlib with the dictionary twice
    that.  Pending writes and LangGraph's versions are read back by the
    saver; the state, which SQL reads, stays JSON."""
    if not always and len(text) < 256:
        return None
    raw = text.encode()
    z = _primed(len(raw)).copy()
    packed = z.compress(raw) + z.flush()
    return packed if always or len(packed) * 4 <= len(raw) * 3 else None


def unpack(packed: bytes) -> str:
    if len(packed) >= 6 and packed[1] & 0x20:  # FDICT: the dictionary's Adler-32 follows
        zdict = _ZDICTS.get(int.from_bytes(packed[2:6], "big"))
        if zdict is None:
            raise ValueError("a packed value names a zlib dictionary this version of hxstate does not have")
        z = zlib.decompressobj(zdict=zdict)
        return (z.decompress(packed) + z.flush()).decode()
    return zlib.decompress(packed).decode()


def checkpoint_of(stored: str) -> dict[str, Any]:
    """A checkpoint's LangGraph bookkeeping from what the saver reads of
    ``packed``: its bytes in base64."""
    loaded: dict[str, Any] = json.loads(unpack(base64.b64decode(stored)))
    return loaded


def dumps(j: Any) -> str:
    return json.dumps(j, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_literal(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"
