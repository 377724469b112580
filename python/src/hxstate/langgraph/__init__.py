"""HxSaver: a LangGraph checkpointer that keeps a thread's state in hxstate,
as jsonb deltas (see base.py for the storage).

    from hxstate.langgraph import HxSaver

    with HxSaver.from_conn_string("postgresql:///app") as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)

The async saver is ``hxstate.langgraph.aio.AsyncHxSaver``; HxSaver's own
async methods run its sync ones in a worker thread.
"""

from __future__ import annotations

import asyncio
import builtins
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import psycopg

try:
    import langgraph.checkpoint.base  # noqa: F401
    import psycopg_pool  # noqa: F401
except ImportError as missing:  # an install without the extra
    raise ImportError(
        f"hxstate.langgraph needs LangGraph and psycopg-pool ({missing.name} is missing): "
        "pip install 'hxstate[langgraph]'"
    ) from missing

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import Connection
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from hxstate.errors import NonDeterministicRetry, translate
from hxstate.langgraph.base import DEFAULT_SCHEMA, BaseHxSaver, Steps, checkpoint_key
from hxstate.langgraph.put import SLOW
from hxstate.langgraph.runs import Admission

__all__ = ["Admission", "BaseHxSaver", "HxSaver"]


class HxSaver(BaseHxSaver):
    """A LangGraph checkpoint saver on hxstate, over a psycopg connection
    (in autocommit mode, as ``from_conn_string`` opens it) or a pool."""

    def __init__(
        self,
        conn: Connection[Any] | ConnectionPool[Any],
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
        self.lock = threading.Lock()
        # put_writes calls under way, by checkpoint, and the last failure of
        # each: a put waits for those on its parent (see _writes_done)
        self._writing: dict[tuple[str, str, str], int] = {}
        self._write_failed: dict[tuple[str, str, str], BaseException] = {}
        self._writes_cond = threading.Condition()

    @classmethod
    @contextmanager
    def from_conn_string(cls, conninfo: str, **kwargs: Any) -> Iterator[HxSaver]:
        """A saver on a connection of its own, closed when the block ends."""
        with Connection.connect(conninfo, autocommit=True) as conn:
            yield cls(conn, **kwargs)

    @contextmanager
    def _connection(self) -> Iterator[Connection[Any]]:
        if isinstance(self.conn, ConnectionPool):
            with self.conn.connection() as conn:
                yield conn
        else:
            with self.lock:
                yield self.conn

    def _run(self, steps: Steps, *, transaction: bool = True) -> Any:
        try:
            with self._connection() as conn:
                if transaction:
                    with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
                        return _drive(cur, steps)
                with conn.cursor(row_factory=tuple_row) as cur:
                    return _drive(cur, steps)
        except psycopg.Error as err:
            new = translate(err)
            if new is err:
                raise
            raise new from err

    def setup(self, *, trusted_owners: Sequence[str] = (), allowed_triggers: Sequence[str] = ()) -> None:
        """Create the saver's schema and tables, or bring them up to date
        (migrations, as PostgresSaver's setup); run it once before use.

        Raises NotOwner (42501) when the schema holds what the saver's role
        does not own: the schema, or an object in it, of another role, a
        trigger or a rule on its tables, another role that may create in
        it.  ``trusted_owners`` (role names) and ``allowed_triggers``
        (trigger names) accept those, explicitly."""
        self._run(self._setup_steps(trusted_owners, allowed_triggers))

    # -- BaseCheckpointSaver -------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        result: CheckpointTuple | None = self._run(self._get_steps(config), transaction=False)
        return result

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        # a page at a time, the connection free between pages
        pager = self._pager(config, filter, before, limit)
        while page := self._run(pager.page_steps()):
            for item in page:
                yield pager.tuple_of(item)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        # the statement is made first: its Python work overlaps the writes
        # on the parent, which LangGraph stores in another thread
        prepared = self._prepare_put(config, checkpoint, metadata, new_versions)
        self._writes_done(config)
        result = self._run(self._fast_put_steps(config, checkpoint, metadata, new_versions, prepared), transaction=False)
        if result is SLOW:
            result = self._run(self._put_steps(config, checkpoint, metadata, new_versions))
        return cast(RunnableConfig, result)

    def _writes_done(self, config: RunnableConfig) -> None:
        """Wait until the put_writes calls on the checkpoint ``config`` names
        (the parent of the one being put) have committed, and fail if the
        last of them failed: a checkpoint never becomes durable before the
        writes that produced it, whatever order the runtime's threads run
        in (LangGraph submits both to a thread pool; its issue #8039)."""
        key = checkpoint_key(config)
        if key is None:
            return
        with self._writes_cond:
            self._writes_cond.wait_for(lambda: key not in self._writing)
            failed = self._write_failed.get(key)
        if failed is not None:
            raise RuntimeError(
                f"the writes of a task at checkpoint {key[2]} were not stored, so the next checkpoint is not either"
            ) from failed

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        key = checkpoint_key(config)
        with self._writes_cond:
            if key is not None:
                self._writing[key] = self._writing.get(key, 0) + 1
        try:
            # encoded before the connection is taken
            prepared = self._prepare_writes(config, writes, task_id, task_path)
            self._run(
                self._put_writes_steps(config, writes, task_id, task_path, prepared),
                transaction=self._writes_need_transaction(writes),
            )
        except NonDeterministicRetry:
            raise  # what was stored first stays stored
        except BaseException as err:
            with self._writes_cond:
                if key is not None:
                    self._write_failed[key] = err
            raise
        else:
            with self._writes_cond:
                if key is not None:
                    self._write_failed.pop(key, None)
        finally:
            with self._writes_cond:
                if key is not None:
                    n = self._writing[key] - 1
                    if n:
                        self._writing[key] = n
                    else:
                        del self._writing[key]
                self._writes_cond.notify_all()

    def delete_thread(self, thread_id: str) -> None:
        self._run(self._delete_thread_steps(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._run(self._delete_for_runs_steps(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._run(self._copy_thread_steps(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int | None = None) -> None:
        """Delete the threads' checkpoints ("delete"), or all but the newest
        ``keep_last`` (1) of each namespace ("keep_latest"), each that stays
        rebuildable."""
        self._run(self._prune_steps(thread_ids, strategy, keep_last))


    # -- write ownership (ownership.py) ----------------------------------------

    def acquire(self, thread_id: str) -> str:
        """Take the thread: from now on a write to it must carry the token
        returned (config ``{"configurable": {"hx_owner": token}}``); the
        writer that had it is refused from now on (OwnerSuperseded).
        Waits for the writes under way to end."""
        token: str = self._run(self._acquire_steps(thread_id))
        return token

    def release(self, thread_id: str, token: str) -> bool:
        """Give the thread up; whether ``token`` owned it."""
        released: bool = self._run(self._release_steps(thread_id, token))
        return released

    def owner_epoch(self, thread_id: str) -> int | None:
        """The epoch of the thread's owner (None: it has none)."""
        epoch: int | None = self._run(self._epoch_steps(thread_id), transaction=False)
        return epoch

    # -- admissions of runs (runs.py) ------------------------------------------

    def admit(self, thread_id: str, run_id: str, input: Any) -> Admission:
        """Record a run on its thread, with its input, before it is
        dispatched (durable before anything else of it); idempotent."""
        admission: Admission = self._run(self._admit_steps(thread_id, run_id, input))
        return admission

    def finish(self, thread_id: str, run_id: str, outcome: str, detail: str | None = None) -> bool:
        """Record how an admitted run ended (success, interrupt, error,
        cancelled); the first end only."""
        done: bool = self._run(self._finish_steps(thread_id, run_id, outcome, detail))
        return done

    def admissions(self, thread_id: str | None = None, *, unfinished: bool = True) -> builtins.list[Admission]:
        """The admitted runs (of a thread, or all) that have not ended, or all
        of them; each with the number of checkpoints it wrote."""
        found: builtins.list[Admission] = self._run(self._admissions_steps(thread_id, unfinished), transaction=False)
        return found

    # the async API, in a worker thread

    async def aadmit(self, thread_id: str, run_id: str, input: Any) -> Admission:
        return await asyncio.to_thread(self.admit, thread_id, run_id, input)

    async def afinish(self, thread_id: str, run_id: str, outcome: str, detail: str | None = None) -> bool:
        return await asyncio.to_thread(self.finish, thread_id, run_id, outcome, detail)

    async def aadmissions(self, thread_id: str | None = None, *, unfinished: bool = True) -> builtins.list[Admission]:
        return await asyncio.to_thread(self.admissions, thread_id, unfinished=unfinished)

    async def aacquire(self, thread_id: str) -> str:
        return await asyncio.to_thread(self.acquire, thread_id)

    async def arelease(self, thread_id: str, token: str) -> bool:
        return await asyncio.to_thread(self.release, thread_id, token)

    async def aowner_epoch(self, thread_id: str) -> int | None:
        return await asyncio.to_thread(self.owner_epoch, thread_id)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        pager = self._pager(config, filter, before, limit)
        while page := await asyncio.to_thread(self._run, pager.page_steps()):
            for item in page:
                yield pager.tuple_of(item)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int | None = None) -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy, keep_last=keep_last)


def _drive(cur: psycopg.Cursor[Any], steps: Steps) -> Any:
    try:
        q = next(steps)
        while True:
            cur.execute(q.sql, q.params)
            rows = cur.fetchall() if q.fetch else []
            q = steps.send(rows)
    except StopIteration as stop:
        return stop.value
