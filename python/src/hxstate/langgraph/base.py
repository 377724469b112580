"""What HxSaver and AsyncHxSaver share: their settings, the SQL of their
schema, what they remember of threads, and every operation written once as
a generator of statements (steps.py) that a sync or an async driver runs.

The operations live by concern: put.py (a checkpoint as what changed),
writes.py (a task's writes, once), read.py (get_tuple and list),
retention.py (deleting, copying, pruning), schema.py (setup and the
tables); sql.py has their SQL, rebuild.py rebuilds a state from its chain,
heads.py is the memory of heads, stream.py what a thread's followers see.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Collection, Mapping, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from hxstate.langgraph import ownership, put, read, retention, runs, schema, writes
from hxstate.langgraph.codec import Codec
from hxstate.langgraph.heads import HeadCache
from hxstate.langgraph.limits import check_key
from hxstate.langgraph.schema import DEFAULT_SCHEMA
from hxstate.langgraph.sealing import Sealer
from hxstate.langgraph.serde import StrictSerializer
from hxstate.langgraph.sql import Statements
from hxstate.langgraph.steps import Query, Steps

__all__ = ["DEFAULT_SCHEMA", "BaseHxSaver", "Query", "Steps", "checkpoint_key"]


class BaseHxSaver(BaseCheckpointSaver[Any]):
    """What the sync and the async saver share."""

    schema: str
    snapshot_min_bytes: int
    rebuild_factor: float
    max_chain: int
    cache_threads: int
    sql: Statements
    codec: Codec
    heads: HeadCache
    sealer: Sealer | None

    def _init_base(
        self,
        *,
        schema: str,
        serde: SerializerProtocol | None,
        snapshot_min_bytes: int,
        rebuild_factor: float,
        max_chain: int,
        cache_threads: int,
    ) -> None:
        # strict: a stored value rebuilds only types of an allow-list (serde.py)
        BaseCheckpointSaver.__init__(self, serde=serde if serde is not None else StrictSerializer())
        self.schema = schema
        # an encrypting serializer (crypto.EncryptedSerializer) seals what
        # the saver stores, where it belongs; its inner serializer takes
        # what JSON cannot hold
        self.sealer = cast(Sealer, self.serde) if _seals(self.serde) else None
        self.codec = Codec(_inner(self.serde))
        if rebuild_factor < 1:
            raise ValueError("rebuild_factor is at least 1: a rebuild reads at least the state")
        self.snapshot_min_bytes = snapshot_min_bytes
        self.rebuild_factor = rebuild_factor
        self.max_chain = max_chain
        self.cache_threads = cache_threads
        # the savers over a pool run calls in many threads at once: the
        # memory of heads has a lock of its own
        self.heads = HeadCache(cache_threads)
        self.sql = Statements(schema)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> BaseHxSaver:
        """A saver whose serializer also rebuilds ``extra_allowlist``'s
        types, sharing this one's connection and memory (LangGraph calls
        it with the types of a graph's state schema when it compiles a
        graph under ``LANGGRAPH_STRICT_MSGPACK=true``)."""
        widen = getattr(self.serde, "with_msgpack_allowlist", None)
        if widen is None:
            return cast(BaseHxSaver, super().with_allowlist(extra_allowlist))
        serde = widen(extra_allowlist)
        if serde is self.serde:
            return self
        clone = copy.copy(self)
        clone.serde = serde
        clone.sealer = cast(Sealer, serde) if _seals(serde) else None
        clone.codec = Codec(_inner(serde))
        return clone

    # -- versions ---------------------------------------------------------

    def get_next_version(self, current: Any, channel: None) -> Any:
        """Integers, as BaseCheckpointSaver's own: a version only has to grow
        along a thread's chain of checkpoints (HxSaver stores values by
        checkpoint, not by channel version, so versions of two forks may
        meet), and a checkpoint holds a dozen of them.  A thread written with
        string versions (PostgresSaver's ``<counter>.<random>``) keeps their
        form, since LangGraph compares a checkpoint's versions together."""
        if current is None:
            return 1
        if isinstance(current, str):
            head = current.split(".")[0]
            return f"{int(head) + 1:0{len(head)}}.{random.random():016}"
        return int(current) + 1

    # -- the operations, as steps -------------------------------------------

    def _put_steps(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Steps:
        return put.put_steps(self, config, checkpoint, metadata, new_versions)

    def _fast_put_steps(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        prepared: put.Prepared | None = None,
    ) -> Steps:
        """The put in one statement, no transaction of its own; put.SLOW
        when _put_steps must do it (in a transaction).  ``prepared``: what
        _prepare_put made of it."""
        return put.fast_put_steps(self, config, checkpoint, metadata, new_versions, prepared)

    def _prepare_put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> put.Prepared | None:
        """A fast put's Python work, done before the put waits for its
        parent's writes and the connection (it needs neither); None when
        _fast_put_steps must do it (the server not asked yet, or the
        parent's state not remembered: then it finds it SLOW)."""
        server = self.sql.server
        if server is None:
            return None
        return put.prepare_fast_put(self, server, config, checkpoint, metadata, new_versions)

    @staticmethod
    def _writes_need_transaction(writes_: Sequence[tuple[str, Any]]) -> bool:
        """A task's writes go in one statement, but for LangGraph's records
        of an attempt (errors, interrupts, ...), which an interrupt's event
        on the thread's stream goes with."""
        return any(ch in WRITES_IDX_MAP for ch, _ in writes_)

    def _prepare_writes(
        self, config: RunnableConfig, writes_: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> writes.Prepared:
        """A task's writes checked and encoded, before the connection is
        taken (a put waiting for it waits the less)."""
        return writes.prepare_writes(self, config, writes_, task_id, task_path)

    def _put_writes_steps(
        self,
        config: RunnableConfig,
        writes_: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
        prepared: writes.Prepared | None = None,
    ) -> Steps:
        return writes.put_writes_steps(self, config, writes_, task_id, task_path, prepared)

    def _get_steps(self, config: RunnableConfig) -> Steps:
        return read.get_steps(self, config)

    def _pager(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> read.Pager:
        """list()'s pages: each page's steps (``page_steps()``) run in a
        transaction of its own, and its tuples decoded as they are handed
        out (``tuple_of``)."""
        return read.Pager(self, config, filter, before, limit)

    def _delete_thread_steps(self, thread_id: str) -> Steps:
        return retention.delete_thread_steps(self, thread_id)

    def _delete_for_runs_steps(self, run_ids: Sequence[str]) -> Steps:
        return retention.delete_for_runs_steps(self, run_ids)

    def _copy_thread_steps(self, source_thread_id: str, target_thread_id: str) -> Steps:
        return retention.copy_thread_steps(self, source_thread_id, target_thread_id)

    def _prune_steps(self, thread_ids: Sequence[str], strategy: str, keep_last: int | None = None) -> Steps:
        return retention.prune_steps(self, thread_ids, strategy, keep_last)

    def _acquire_steps(self, thread_id: str) -> Steps:
        return ownership.acquire_steps(self, check_key("thread id", str(thread_id)))

    def _release_steps(self, thread_id: str, token: str) -> Steps:
        return ownership.release_steps(self, str(thread_id), str(token))

    def _epoch_steps(self, thread_id: str) -> Steps:
        return ownership.epoch_steps(self, str(thread_id))

    def _admit_steps(self, thread_id: str, run_id: str, input: Any) -> Steps:
        return runs.admit_steps(self, str(thread_id), str(run_id), input)

    def _finish_steps(self, thread_id: str, run_id: str, outcome: str, detail: str | None) -> Steps:
        return runs.finish_steps(self, str(thread_id), str(run_id), outcome, detail)

    def _admissions_steps(self, thread_id: str | None, unfinished: bool) -> Steps:
        return runs.admissions_steps(self, None if thread_id is None else str(thread_id), unfinished)

    def _setup_steps(self, trusted_owners: Sequence[str] = (), allowed_triggers: Sequence[str] = ()) -> Steps:
        result = yield from schema.setup_steps(self.schema, trusted_owners, allowed_triggers)
        # what the server has may have changed with the schema
        self.sql.forget_server()
        return result

    # -- DeltaChannel ----------------------------------------------------------

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """A DeltaChannel's writes and seed along the parent chain.  HxSaver
        keeps every channel as deltas already, so plain reducers are the way
        to use it; a DeltaChannel works, through this walk of get_tuple."""
        return BaseCheckpointSaver.get_delta_channel_history(self, config=config, channels=channels)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await BaseCheckpointSaver.aget_delta_channel_history(self, config=config, channels=channels)


def _seals(serde: Any) -> bool:
    return all(hasattr(serde, a) for a in ("seal", "unseal", "inner"))


def _inner(serde: Any) -> Any:
    return serde.inner if _seals(serde) else serde


def checkpoint_key(config: RunnableConfig) -> tuple[str, str, str] | None:
    """(thread, namespace, checkpoint) of a config that names a checkpoint."""
    conf = config["configurable"]
    cid = conf.get("checkpoint_id")
    if not cid:
        return None
    return (str(conf["thread_id"]), str(conf.get("checkpoint_ns", "") or ""), str(cid))
