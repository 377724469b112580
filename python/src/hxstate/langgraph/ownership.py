"""Write ownership of a thread: one writer at a time, fenced.

``acquire(thread_id)`` makes the caller the thread's owner and returns its
token (``"<epoch>-<random>"``; the epoch grows at each acquire).  While a
thread has an owner, every write to it (put, put_writes, in any namespace)
must carry the owner's token in its config, ``configurable["hx_owner"]``
(LangGraph carries a run's config keys to its writes): a write that
carries another token (a writer another acquire superseded, or one that
released the thread) or none is refused with ``OwnerSuperseded`` (55000),
and nothing of it is written.  The check is made in the write's own
statement and transaction, under a lock that the thread's acquire takes
exclusively and each write shares: an acquire waits for the writes under
way to end, and a write after it sees the new owner.  A thread without an
owner is written as before (ownership is opt-in, per thread);
``release(thread_id, token)`` gives it up.  Deleting, copying and pruning
threads are not fenced (they are an operator's).
"""

from __future__ import annotations

import secrets
from typing import Any

from langchain_core.runnables import RunnableConfig

from hxstate.errors import OwnerSuperseded
from hxstate.langgraph.steps import Context, Query, Steps, StepsOf

__all__ = ["OWNER_KEY", "acquire_steps", "check_owner_steps", "epoch_steps", "owner_of", "refused", "release_steps"]

#: the config key of a write's ownership token
OWNER_KEY = "hx_owner"


def owner_of(config: RunnableConfig) -> str | None:
    token = config.get("configurable", {}).get(OWNER_KEY)
    return None if token is None else str(token)


def refused(thread_id: str, token: str | None, epoch: Any) -> OwnerSuperseded:
    """The error of a write ``token`` may not make, the thread's owner of
    ``epoch`` (None: it has none)."""
    if epoch is None:
        message = f"thread {thread_id!r} has no owner: this writer's ownership was released"
    elif token is None:
        message = f"thread {thread_id!r} is owned (epoch {epoch}): a write must carry its owner's token"
    else:
        message = f"thread {thread_id!r} is owned by another writer (epoch {epoch}): this writer's ownership was superseded"
    return OwnerSuperseded(
        message,
        detail="Nothing was written.",
        hint="Another writer took the thread over: stop, or acquire it again.",
    )


def check_owner_steps(ctx: Context, thread_id: str, token: str | None) -> Steps:
    """In a write's transaction: the thread's owner waits for it to end;
    raises OwnerSuperseded unless ``token`` is the owner's (or the thread
    has none and no token is given)."""
    rows = yield Query(ctx.sql.OWNER_SQL, {"lock": ctx.sql.owner_lock_key, "thread_id": thread_id}, True)
    _, owner, epoch = rows[0]
    if owner != token:
        raise refused(thread_id, token, epoch)
    return None


def acquire_steps(ctx: Context, thread_id: str) -> StepsOf[str]:
    yield Query("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(%s), pg_catalog.hashtext(%s))",
                (ctx.sql.owner_lock_key, thread_id))
    rows = yield Query(ctx.sql.ACQUIRE_SQL, {"thread_id": thread_id, "rand": secrets.token_hex(16)}, True)
    token: str = rows[0][0]
    return token


def release_steps(ctx: Context, thread_id: str, token: str) -> StepsOf[bool]:
    yield Query("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(%s), pg_catalog.hashtext(%s))",
                (ctx.sql.owner_lock_key, thread_id))
    rows = yield Query(ctx.sql.RELEASE_SQL, {"thread_id": thread_id, "token": token}, True)
    return bool(rows)


def epoch_steps(ctx: Context, thread_id: str) -> StepsOf[int | None]:
    rows = yield Query(ctx.sql.EPOCH_SQL, {"thread_id": thread_id}, True)
    return int(rows[0][0]) if rows else None
