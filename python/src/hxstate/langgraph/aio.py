"""AsyncHxSaver: HxSaver over psycopg's async connections.

    from hxstate.langgraph.aio import AsyncHxSaver

    async with AsyncHxSaver.from_conn_string("postgresql:///app") as saver:
        await saver.setup()
        graph = builder.compile(checkpointer=saver)

Its sync methods, for a graph run from another thread, hand the work to the
saver's event loop (as AsyncPostgresSaver's do).
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar, cast

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import AsyncConnection
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from hxstate.errors import NonDeterministicRetry, translate
from hxstate.langgraph.base import DEFAULT_SCHEMA, BaseHxSaver, Steps, checkpoint_key
from hxstate.langgraph.put import SLOW
from hxstate.langgraph.runs import Admission

__all__ = ["AsyncHxSaver"]

T = TypeVar("T")


class AsyncHxSaver(BaseHxSaver):
    """A LangGraph checkpoint saver on hxstate, over an async psycopg
    connection (autocommit) or pool."""

    def __init__(
        self,
        conn: AsyncConnection[Any] | AsyncConnectionPool[Any],
        *,
        schema: str = DEFAULT_SCHEMA,
        serde: SerializerProtocol | None = None,
        snapshot_min_bytes: int = 65536,
        rebuild_factor: float = 2.0,
        max_chain: int = 10000,
        cache_threads: int = 256,
    ) -> None:
        self._init_base(
            schema=schema,
            serde=serde,
            snapshot_min_bytes=snapshot_min_bytes,
            rebuild_factor=rebuild_factor,
            max_chain=max_chain,
            cache_threads=cache_threads,
        )
        self.conn = conn
        self.lock = asyncio.Lock()
        self.loop = asyncio.get_running_loop()
        # as HxSaver's: a put waits for the put_writes on its parent
        self._writing: dict[tuple[str, str, str], int] = {}
        self._write_failed: dict[tuple[str, str, str], BaseException] = {}
        self._writes_cond = asyncio.Condition()

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, conninfo: str, **kwargs: Any) -> AsyncIterator[AsyncHxSaver]:
        """A saver on a connection of its own, closed when the block ends."""
        async with await AsyncConnection.connect(conninfo, autocommit=True) as conn:
            yield cls(conn, **kwargs)

    async def _run(self, steps: Steps, *, transaction: bool = True) -> Any:
        try:
            if isinstance(self.conn, AsyncConnectionPool):
                async with self.conn.connection() as conn:
                    return await _drive_conn(conn, steps, transaction)
            async with self.lock:
                return await _drive_conn(self.conn, steps, transaction)
        except psycopg.Error as err:
            new = translate(err)
            if new is err:
                raise
            raise new from err

    async def setup(self, *, trusted_owners: Sequence[str] = (), allowed_triggers: Sequence[str] = ()) -> None:
        """Create the saver's schema and tables, or bring them up to date;
        refuses a schema that holds what the saver's role does not own
        (HxSaver.setup)."""
        await self._run(self._setup_steps(trusted_owners, allowed_triggers))

    # -- BaseCheckpointSaver, async ---------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        result: CheckpointTuple | None = await self._run(self._get_steps(config), transaction=False)
        return result

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        # a page at a time, the connection free between pages
        pager = self._pager(config, filter, before, limit)
        while page := await self._run(pager.page_steps()):
            for item in page:
                yield pager.tuple_of(item)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        # the statement is made first, as HxSaver.put makes it
        prepared = self._prepare_put(config, checkpoint, metadata, new_versions)
        key = checkpoint_key(config)
        if key is not None:
            async with self._writes_cond:
                await self._writes_cond.wait_for(lambda: key not in self._writing)
                failed = self._write_failed.get(key)
            if failed is not None:
                raise RuntimeError(
                    f"the writes of a task at checkpoint {key[2]} were not stored, so the next checkpoint is not either"
                ) from failed
        result = await self._run(
            self._fast_put_steps(config, checkpoint, metadata, new_versions, prepared), transaction=False
        )
        if result is SLOW:
            result = await self._run(self._put_steps(config, checkpoint, metadata, new_versions))
        return cast(RunnableConfig, result)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        key = checkpoint_key(config)
        if key is not None:
            self._writing[key] = self._writing.get(key, 0) + 1
        try:
            # encoded before the connection is taken
            prepared = self._prepare_writes(config, writes, task_id, task_path)
            await self._run(
                self._put_writes_steps(config, writes, task_id, task_path, prepared),
                transaction=self._writes_need_transaction(writes),
            )
        except NonDeterministicRetry:
            raise  # what was stored first stays stored
        except BaseException as err:
            if key is not None:
                self._write_failed[key] = err
            raise
        else:
            if key is not None:
                self._write_failed.pop(key, None)
        finally:
            if key is not None:
                n = self._writing[key] - 1
                if n:
                    self._writing[key] = n
                else:
                    del self._writing[key]
            async with self._writes_cond:
                self._writes_cond.notify_all()

    async def adelete_thread(self, thread_id: str) -> None:
        await self._run(self._delete_thread_steps(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._run(self._delete_for_runs_steps(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._run(self._copy_thread_steps(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int | None = None) -> None:
        """AsyncHxSaver's prune (HxSaver.prune)."""
        await self._run(self._prune_steps(thread_ids, strategy, keep_last))

    # -- write ownership (ownership.py) ----------------------------------------

    async def aacquire(self, thread_id: str) -> str:
        """HxSaver.acquire, async."""
        token: str = await self._run(self._acquire_steps(thread_id))
        return token

    async def arelease(self, thread_id: str, token: str) -> bool:
        released: bool = await self._run(self._release_steps(thread_id, token))
        return released

    async def aowner_epoch(self, thread_id: str) -> int | None:
        epoch: int | None = await self._run(self._epoch_steps(thread_id), transaction=False)
        return epoch

    # -- admissions of runs (runs.py) ------------------------------------------

    async def aadmit(self, thread_id: str, run_id: str, input: Any) -> Admission:
        """HxSaver.admit, async."""
        admission: Admission = await self._run(self._admit_steps(thread_id, run_id, input))
        return admission

    async def afinish(self, thread_id: str, run_id: str, outcome: str, detail: str | None = None) -> bool:
        done: bool = await self._run(self._finish_steps(thread_id, run_id, outcome, detail))
        return done

    async def aadmissions(self, thread_id: str | None = None, *, unfinished: bool = True) -> builtins.list[Admission]:
        found: builtins.list[Admission] = await self._run(self._admissions_steps(thread_id, unfinished), transaction=False)
        return found

    # -- the sync API, on the saver's loop ----------------------------------------

    def admit(self, thread_id: str, run_id: str, input: Any) -> Admission:
        return self._sync(self.aadmit(thread_id, run_id, input))

    def finish(self, thread_id: str, run_id: str, outcome: str, detail: str | None = None) -> bool:
        return self._sync(self.afinish(thread_id, run_id, outcome, detail))

    def admissions(self, thread_id: str | None = None, *, unfinished: bool = True) -> builtins.list[Admission]:
        return self._sync(self.aadmissions(thread_id, unfinished=unfinished))

    def acquire(self, thread_id: str) -> str:
        return self._sync(self.aacquire(thread_id))

    def release(self, thread_id: str, token: str) -> bool:
        return self._sync(self.arelease(thread_id, token))

    def owner_epoch(self, thread_id: str) -> int | None:
        return self._sync(self.aowner_epoch(thread_id))

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            if asyncio.get_running_loop() is self.loop:
                coro.close()
                raise asyncio.InvalidStateError(
                    "Synchronous calls to AsyncHxSaver are only allowed from a different thread. "
                    "From the main thread, use the async interface."
                )
        except RuntimeError:
            pass
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._sync(self.aget_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        pager = self._pager(config, filter, before, limit)
        while page := self._sync(self._run(pager.page_steps())):
            for item in page:
                yield pager.tuple_of(item)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._sync(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._sync(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._sync(self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._sync(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._sync(self.acopy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int | None = None) -> None:
        self._sync(self.aprune(thread_ids, strategy=strategy, keep_last=keep_last))


async def _drive_conn(conn: AsyncConnection[Any], steps: Steps, transaction: bool) -> Any:
    if transaction:
        async with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
            return await _drive(cur, steps)
    async with conn.cursor(row_factory=tuple_row) as cur:
        return await _drive(cur, steps)


async def _drive(cur: psycopg.AsyncCursor[Any], steps: Steps) -> Any:
    try:
        q = next(steps)
        while True:
            await cur.execute(q.sql, q.params)
            rows = await cur.fetchall() if q.fetch else []
            q = steps.send(rows)
    except StopIteration as stop:
        return stop.value
