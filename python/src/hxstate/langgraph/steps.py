"""Every operation of the savers is written once, as a generator of
statements (``Steps``): it yields a ``Query`` and is sent the rows it
fetched.  HxSaver drives the generators over a psycopg connection,
AsyncHxSaver over an async one; both run an operation's statements in
one transaction unless it says otherwise."""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

if TYPE_CHECKING:
    from hxstate.langgraph.codec import Codec
    from hxstate.langgraph.heads import HeadCache
    from hxstate.langgraph.sealing import Sealer
    from hxstate.langgraph.sql import Statements

__all__ = ["Context", "Query", "Rows", "Steps", "StepsOf"]

T = TypeVar("T")


class Query(NamedTuple):
    sql: str
    params: Sequence[Any] | Mapping[str, Any] | None = None
    #: whether the rows are wanted
    fetch: bool = False


Rows = list[tuple[Any, ...]]
#: an operation: yields queries, is sent their rows, returns its result
Steps = Generator[Query, Rows, Any]
StepsOf = Generator[Query, Rows, T]


class Context(Protocol):
    """What an operation reads of the saver that runs it."""

    sql: Statements
    codec: Codec
    heads: HeadCache
    sealer: Sealer | None  # an encrypting saver's (sealing.py)
    snapshot_min_bytes: int
    rebuild_factor: float
    max_chain: int
