"""HxSaver's serializer of values that are not JSON: strict by default.

HxSaver stores channel values, writes and metadata as JSON, and what JSON
cannot hold (a ``datetime``, a set, a pydantic model, a string with a NUL)
as LangGraph's msgpack encoding, tagged ``{"$hx": "serde", "type",
"data"}``.  That encoding names the Python callable that rebuilds each
object (its module and name); LangGraph's own serializer imports and calls
whatever a stored value names, so a role that can write the saver's tables
(``UPDATE`` on ``checkpoints`` is enough) could make the next process that
reads the thread run ``os.system``.

``StrictSerializer``, HxSaver's default, rebuilds only the types of an
allow-list: ``DEFAULT_TYPES`` (date and time types, ``UUID``,
``Decimal``, sets, ``deque``, IP addresses, paths, LangChain's messages and
``Document``, LangGraph's ``Send``, ``Interrupt``, ``Command``,
``Overwrite``) and the ones it is given.  A stored value that names any
other type, or that is not of a kind the saver writes (``json`` and
``pickle`` payloads), is refused with ``TypeNotAllowed`` (22023) before
anything is imported or called; so is a value of another type when it is
written, so that what a saver writes it can read back.  Widen it with the
types of your state::

    HxSaver(conn, serde=StrictSerializer(MyModel, ("my_pkg.models", "Plan")))

LangGraph itself widens it from a graph's state schema when it compiles
the graph with ``LANGGRAPH_STRICT_MSGPACK=true`` (``with_allowlist``).
``serde=JsonPlusSerializer()`` is LangGraph's permissive behaviour, for
databases where every role that can write the saver's tables is trusted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from hxstate.errors import DataCorrupted, TypeNotAllowed

__all__ = ["DEFAULT_METHODS", "DEFAULT_TYPES", "StrictSerializer"]

_MESSAGES = "langchain_core.messages."
#: the types a StrictSerializer rebuilds unless told more: (module, name)
DEFAULT_TYPES: frozenset[tuple[str, str]] = frozenset(
    {
        ("datetime", "datetime"),
        ("datetime", "date"),
        ("datetime", "time"),
        ("datetime", "timedelta"),
        ("datetime", "timezone"),
        ("zoneinfo", "ZoneInfo"),
        ("uuid", "UUID"),
        ("decimal", "Decimal"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("collections", "deque"),
        ("ipaddress", "IPv4Address"),
        ("ipaddress", "IPv4Interface"),
        ("ipaddress", "IPv4Network"),
        ("ipaddress", "IPv6Address"),
        ("ipaddress", "IPv6Interface"),
        ("ipaddress", "IPv6Network"),
        ("pathlib", "Path"),
        ("pathlib", "PosixPath"),
        ("pathlib", "PurePosixPath"),
        ("pathlib._local", "Path"),
        ("pathlib._local", "PosixPath"),
        *(
            (_MESSAGES + module, name)
            for module, names in (
                ("base", ("BaseMessage", "BaseMessageChunk")),
                ("human", ("HumanMessage", "HumanMessageChunk")),
                ("ai", ("AIMessage", "AIMessageChunk")),
                ("system", ("SystemMessage", "SystemMessageChunk")),
                ("chat", ("ChatMessage", "ChatMessageChunk")),
                ("tool", ("ToolMessage", "ToolMessageChunk")),
                ("function", ("FunctionMessage", "FunctionMessageChunk")),
                ("modifier", ("RemoveMessage",)),
            )
            for name in names
        ),
        ("langchain_core.documents.base", "Document"),
        ("langgraph.types", "Send"),
        ("langgraph.types", "Interrupt"),
        ("langgraph.types", "Command"),
        ("langgraph.types", "Overwrite"),
        ("langgraph.types", "TimeoutPolicy"),
    }
)
#: the methods it calls to rebuild a value: (module, class, method)
DEFAULT_METHODS: frozenset[tuple[str, str, str]] = frozenset({("datetime", "datetime", "fromisoformat")})

# LangGraph's msgpack extension codes (langgraph.checkpoint.serde.jsonplus):
# 0 a constructor with one argument, 1 with positional arguments, 2 with
# keyword arguments, 3 a method with one argument, 4 and 5 pydantic models,
# 6 a numpy array, 7 a DeltaChannel's snapshot (a value, no type)
_NAMED = frozenset({0, 1, 2, 3, 4, 5})
_METHOD = 3
_NUMPY = 6
_WRAPPED = 7
# the payload types the saver writes (dumps_typed of LangGraph's encoder)
_KINDS = frozenset({"null", "bytes", "bytearray", "msgpack"})


def _key(t: type | tuple[str, ...]) -> tuple[str, str]:
    if isinstance(t, type):
        return (t.__module__, t.__name__)
    if len(t) != 2 or not all(isinstance(x, str) for x in t):
        raise TypeError(f"a type to allow is a class or (module, name), not {t!r}")
    return (t[0], t[1])


class StrictSerializer(SerializerProtocol):
    """LangGraph's encoding of what is not JSON, rebuilt only for the types
    of an allow-list (DEFAULT_TYPES and ``types``)."""

    def __init__(self, *types: type | tuple[str, ...], methods: Iterable[tuple[str, str, str]] = ()) -> None:
        self.types: frozenset[tuple[str, str]] = DEFAULT_TYPES | {_key(t) for t in types}
        self.methods: frozenset[tuple[str, str, str]] = DEFAULT_METHODS | frozenset(methods)
        # LangGraph's encoder, and its decoder limited to the same types:
        # the scan below is the gate, this a second one
        self._inner = JsonPlusSerializer(allowed_msgpack_modules=tuple(self.types))

    def with_types(self, *types: type | tuple[str, ...]) -> StrictSerializer:
        """A serializer that also rebuilds ``types``."""
        return StrictSerializer(*self.types, *types, methods=self.methods)

    # LangGraph's name for the same (BaseCheckpointSaver.with_allowlist)
    def with_msgpack_allowlist(self, extra: Iterable[type | tuple[str, ...]]) -> StrictSerializer:
        return self.with_types(*extra)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        kind, data = self._inner.dumps_typed(obj)
        if kind == "msgpack":
            self._scan(data, writing=True)
        elif kind not in _KINDS:
            raise TypeNotAllowed(f"a value of type {type(obj).__name__} would be stored as {kind}, which is not read back")
        return kind, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        if kind not in _KINDS:
            raise TypeNotAllowed(
                f"a stored value is a {kind!r} payload, which HxSaver does not write",
                hint="A role that can write the saver's tables may have planted it.",
            )
        if kind == "msgpack":
            self._scan(payload, writing=False)
        return self._inner.loads_typed(data)

    def _scan(self, data: bytes, *, writing: bool) -> None:
        """Raise TypeNotAllowed if the msgpack names a type (or a method)
        off the list; nothing is imported or called.  (ormsgpack turns an
        exception of the hook into "ext_hook failed": the hook notes what
        it found, and stops the decoding with it.)"""
        refused: list[str] = []
        corrupt: list[str] = []

        class Stop(Exception):
            pass

        def hook(code: int, inner: bytes) -> None:
            if refused or corrupt:
                raise Stop
            if code == _WRAPPED:
                ormsgpack.unpackb(inner, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
                return None
            if code == _NUMPY:
                if ("numpy", "ndarray") not in self.types:
                    refused.append("numpy.ndarray")
                    raise Stop
                return None
            if code not in _NAMED:
                corrupt.append(f"a msgpack extension {code} that LangGraph does not write")
                raise Stop
            tup = ormsgpack.unpackb(inner, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
            if not isinstance(tup, (list, tuple)) or len(tup) < 3 or not all(isinstance(x, str) for x in tup[:2]):
                corrupt.append("a type named in a form LangGraph does not write")
                raise Stop
            if (tup[0], tup[1]) not in self.types:
                refused.append(f"{tup[0]}.{tup[1]}")
                raise Stop
            if code == _METHOD and (len(tup) < 4 or (tup[0], tup[1], tup[3]) not in self.methods):
                refused.append(f"{tup[0]}.{tup[1]}.{tup[3] if len(tup) > 3 else '?'}")
                raise Stop
            return None

        try:
            ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        except (ValueError, TypeError, RecursionError) as err:
            if not refused and not corrupt:
                corrupt.append(f"what is not LangGraph's msgpack ({err})")
        if refused:
            self._refuse(refused[0], writing)
        if corrupt:
            raise DataCorrupted(f"a stored value holds {corrupt[0]}")

    @staticmethod
    def _refuse(name: str, writing: bool) -> None:
        hint = (
            "HxSaver(conn, serde=StrictSerializer(<the type>, ...)) allows it; "
            "serde=JsonPlusSerializer() allows every type, for tables only trusted roles can write."
        )
        if writing:
            raise TypeNotAllowed(f"a value of type {name} is not on HxSaver's list of types it reads back", hint=hint)
        raise TypeNotAllowed(
            f"a stored value names type {name}, which is not on HxSaver's list of types it rebuilds",
            detail="Nothing was imported or called.  A role that can write the saver's tables may have planted it, "
            "or it was stored by a saver with a longer list.",
            hint=hint,
        )
