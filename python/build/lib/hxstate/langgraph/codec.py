"""Channel values as JSON, so that SQL can read them and hx_merge write them.

A value is stored as the JSON it is when it is JSON: None, booleans,
strings, integers, finite floats, lists and string-keyed dicts of those.
LangChain messages become their own dicts (``model_dump()``: ``type``,
``id``, ``content``, ``tool_calls``, ``tool_call_id``, ``name``, ...), which
is what a reader such as the gateway maps to AG-UI messages.  Everything else
goes through LangGraph's serializer and is stored as a tagged object
``{"$hx": "serde", "type": ..., "data": <base64>}``; LangGraph's interrupts
are ``{"$hx": "interrupt", "id": ..., "value": ...}`` and tuples
``{"$hx": "tuple", "items": [...]}``.

The mapping is one to one: a plain dict that a reader would take for a
message or a tag (it has the key ``"$hx"``, or a message's shape) is itself
stored through the serializer, so ``decode(encode(v)) == v`` for every value
the serializer can store.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

TAG = "$hx"

_MESSAGE_CLASSES: tuple[type[BaseMessage], ...] = (
    HumanMessage,
    AIMessage,
    SystemMessage,
    ToolMessage,
    FunctionMessage,
    ChatMessage,
    RemoveMessage,
    AIMessageChunk,
    HumanMessageChunk,
    SystemMessageChunk,
    ToolMessageChunk,
    FunctionMessageChunk,
    ChatMessageChunk,
)
# the "type" a message's dict carries -> its class
MESSAGE_TYPES: dict[str, type[BaseMessage]] = {
    str(cls.model_fields["type"].default): cls for cls in _MESSAGE_CLASSES
}
_MESSAGE_CLASS_SET = frozenset(_MESSAGE_CLASSES)
# keys every message dict has (model_dump of any BaseMessage)
_MESSAGE_KEYS = ("type", "content", "additional_kwargs", "response_metadata")


def _maker(cls: type[BaseMessage]) -> tuple[frozenset[str], Callable[[dict[str, Any]], BaseMessage]] | None:
    """A constructor of ``cls`` from a dict that has exactly its fields
    (a message's own ``model_dump()``), doing what ``model_construct``
    does for such a dict without its walk of aliases and defaults, which
    is most of the time a cold read spends on a thread's messages.  None
    when the class has what that walk is for (aliases, a post-init, a
    root model): then ``model_construct`` itself.  python/tests checks that
    both build equal messages, with equal private fields, for every class."""
    fields = cls.__pydantic_fields__
    if (
        cls.__pydantic_post_init__
        or cls.__pydantic_root_model__
        or any(f.alias is not None or f.validation_alias is not None for f in fields.values())
    ):
        return None
    names = tuple(fields)
    allow_extra = cls.model_config.get("extra") == "allow"
    new = cls.__new__
    setattr_ = object.__setattr__

    def make(j: dict[str, Any]) -> BaseMessage:
        m = new(cls)
        setattr_(m, "__dict__", {n: j[n] for n in names})
        setattr_(m, "__pydantic_fields_set__", set(names))
        setattr_(m, "__pydantic_extra__", {} if allow_extra else None)
        setattr_(m, "__pydantic_private__", None)
        return m

    return frozenset(names), make


# the "type" a message's dict carries -> (the fields of its class, its
# constructor from a whole dump), for the classes _maker can build
_MAKERS = {t: m for t, cls in MESSAGE_TYPES.items() if (m := _maker(cls)) is not None}


class NotJson(Exception):
    """A value that has no plain JSON form."""


def looks_like_message(d: dict[str, Any]) -> bool:
    """Whether a dict is read back as a LangChain message."""
    t = d.get("type")
    return (
        type(t) is str
        and t in MESSAGE_TYPES
        and all(k in d for k in _MESSAGE_KEYS)
    )


def plain_json(v: Any) -> Any:
    """``v`` itself when it is plain JSON that reads back as itself; raises
    NotJson otherwise.  Used for a message's own dump, which is stored as
    it is and never decoded member by member."""
    t = type(v)
    if v is None or t is bool or t is int:
        return v
    if t is str:
        if "\x00" in v:
            raise NotJson("NUL in a string")
        return v
    if t is float:
        if not math.isfinite(v):
            raise NotJson("a float that is not finite")
        return v
    if t is list:
        for x in v:
            plain_json(x)
        return v
    if t is dict:
        for k, x in v.items():
            if type(k) is not str or "\x00" in k:
                raise NotJson("a key that is not a string")
            plain_json(x)
        return v
    raise NotJson(t.__name__)


class Codec:
    """Encodes channel values to JSON and back, with a serializer for what
    is not JSON."""

    def __init__(self, serde: SerializerProtocol) -> None:
        self.serde = serde

    # -- encoding ---------------------------------------------------------

    def encode(self, v: Any) -> Any:
        t = type(v)
        if v is None or t is bool or t is int:
            return v
        if t is str:
            return v if "\x00" not in v else self._serde(v)
        if t is float:
            return v if math.isfinite(v) else self._serde(v)
        if t is list:
            return [self.encode(x) for x in v]
        if t is dict:
            if TAG in v or looks_like_message(v):
                return self._serde(v)
            out: dict[str, Any] = {}
            for k, x in v.items():
                if type(k) is not str or "\x00" in k:
                    return self._serde(v)
                out[k] = self.encode(x)
            return out
        if t in _MESSAGE_CLASS_SET:
            return self.encode_message(v)
        if t is tuple:
            return {TAG: "tuple", "items": [self.encode(x) for x in v]}
        if t.__name__ == "Interrupt" and t.__module__ == "langgraph.types":
            if getattr(v, "response_schema", None) is None:
                return {TAG: "interrupt", "id": v.id, "value": self.encode(v.value)}
        return self._serde(v)

    def encode_message(self, m: BaseMessage) -> Any:
        try:
            return plain_json(m.model_dump())
        except NotJson:
            return self._serde(m)

    def _serde(self, v: Any) -> dict[str, Any]:
        typ, data = self.serde.dumps_typed(v)
        return {TAG: "serde", "type": typ, "data": base64.b64encode(data).decode()}

    # -- decoding ---------------------------------------------------------

    def decode(self, j: Any) -> Any:
        t = type(j)
        if t is list:
            return [self.decode(x) for x in j]
        if t is dict:
            tag = j.get(TAG)
            if tag is not None:
                return self._decode_tagged(j)
            kind = j.get("type")
            maker = _MAKERS.get(kind) if type(kind) is str else None
            if maker is not None and j.keys() == maker[0]:
                return maker[1](j)
            if looks_like_message(j):
                return self.decode_message(j)
            return {k: self.decode(x) for k, x in j.items()}
        return j

    def decode_message(self, j: dict[str, Any]) -> BaseMessage:
        """The message a dict was dumped from.  The dict is a validated
        message's own ``model_dump()``, so it is constructed without
        validating it again (the serializer's way, ``cls(**kwargs)``,
        validates every message of the thread at every read).  A dict that
        is not a whole dump (written by hand, through SQL) is validated."""
        cls = MESSAGE_TYPES[j["type"]]
        if j.keys() >= cls.model_fields.keys():
            return cls.model_construct(**j)
        try:
            return cls(**j)
        except Exception:
            return cls.model_construct(**j)

    def _decode_tagged(self, j: dict[str, Any]) -> Any:
        tag = j[TAG]
        if tag == "serde":
            return self.serde.loads_typed((j["type"], base64.b64decode(j["data"])))
        if tag == "tuple":
            return tuple(self.decode(x) for x in j["items"])
        if tag == "interrupt":
            from langgraph.types import Interrupt

            return Interrupt(value=self.decode(j["value"]), id=j["id"])
        raise ValueError(f"unknown {TAG} tag {tag!r}")


def public_json(j: Any) -> Any:
    """What a reader outside Python sees of an encoded value: interrupts
    as {id, value} and tuples as arrays (serializer blobs stay tagged)."""
    t = type(j)
    if t is list:
        return [public_json(x) for x in j]
    if t is dict:
        tag = j.get(TAG)
        if tag == "tuple":
            return [public_json(x) for x in j["items"]]
        if tag == "interrupt":
            return {"id": j["id"], "value": public_json(j["value"])}
        if tag is not None:
            return j
        return {k: public_json(x) for k, x in j.items()}
    return j
