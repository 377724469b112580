"""put: a checkpoint stored as what changed since its parent, now and then
with a snapshot of the whole state, and published to the thread's log
stream in the same transaction.

In order: the checkpoint's keys are checked (limits); the parent is read
(its state from the saver's memory, or rebuilt), under the thread's
advisory lock, and a run's checkpoint whose parent another writer already
continued from is refused (ThreadConflict); the new state is the parent's
with the channels whose versions changed; the delta is the ops between
them, with a snapshot when the chain since the last one has grown past it;
the stream is told; the row is inserted.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)

from hxstate.errors import ThreadConflict
from hxstate.langgraph import delta as D
from hxstate.langgraph.heads import Head, Items, encode_channel
from hxstate.langgraph.limits import check_id, check_key
from hxstate.langgraph.ownership import OWNER_KEY, check_owner_steps, owner_of, refused
from hxstate.langgraph.rebuild import rebuild_steps
from hxstate.langgraph.sealing import seal_part
from hxstate.langgraph.sql import Server
from hxstate.langgraph.steps import Context, Query, Steps, StepsOf
from hxstate.langgraph.storage import checkpoint_of, dumps, pack
from hxstate.langgraph.stream import checkpoint_event, internal, interrupt_items, public_state

__all__ = ["FORK_KEY", "RUN_SOURCES", "SLOW", "Prepared", "fast_put_steps", "prepare_fast_put", "put_steps"]

# sources of checkpoints that a run writes as it advances a thread; the
# others ("update", "fork") are forks a user asked for
RUN_SOURCES = frozenset({"input", "loop"})
# the key of a config that names the checkpoint a run branches from: the
# saver's get_tuple sets it on a checkpoint asked for by id that is not
# its namespace's newest (LangGraph's time travel: a run with input from an
# older checkpoint_id), and LangGraph carries the config's keys to the
# run's puts.  The run's first checkpoint, whose parent it names, is a fork
# the user asked for: not a second writer.
FORK_KEY = "hx_fork_of"


@dataclass
class Target:
    """The checkpoint being put."""

    thread_id: str
    ns: str
    cid: str
    parent: str | None
    metadata: dict[str, Any]
    values: dict[str, Any]
    versions: dict[str, Any]
    fork_of: str | None = None  # the checkpoint the run asked to branch from
    owner: str | None = None  # the write's ownership token (ownership.py)

    @classmethod
    def of(cls, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata) -> Target:
        """The checkpoint's keys, checked before anything is written."""
        conf = config["configurable"]
        md = dict(get_serializable_checkpoint_metadata(config, metadata))
        # LangGraph copies a config's keys into the metadata: not the
        # saver's own (an ownership token is a writer's, not the thread's)
        md.pop(OWNER_KEY, None)
        md.pop(FORK_KEY, None)
        t = cls(
            thread_id=check_key("thread id", str(conf["thread_id"])),
            ns=check_key("checkpoint namespace", str(conf.get("checkpoint_ns", "") or "")),
            cid=check_id("checkpoint id", checkpoint["id"]),
            parent=check_id("checkpoint id", str(conf["checkpoint_id"])) if conf.get("checkpoint_id") else None,
            metadata=md,
            values=checkpoint["channel_values"],
            versions=dict(checkpoint["channel_versions"]),
            fork_of=str(conf[FORK_KEY]) if conf.get(FORK_KEY) else None,
            owner=owner_of(config),
        )
        run_id = md.get("run_id")
        if isinstance(run_id, str):
            check_id("run id", run_id)
        return t

    def config(self) -> RunnableConfig:
        return {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": self.ns, "checkpoint_id": self.cid}}

    def lock(self, ctx: Context) -> Query:
        """The thread's namespace's turn: puts on it take turns on an
        advisory lock (no row is locked, so no WAL)."""
        return Query(ctx.sql.LOCK_SQL, {"lock": ctx.sql.lock_key, "thread_id": self.thread_id, "ns": self.ns})


@dataclass
class Parent:
    """What the put learnt of its parent."""

    base: Head | None  # the parent's state, None for a root (or a parent that is gone)
    base_id: str  # the parent's snapshot
    newest: bool = False  # no checkpoint of the namespace is newer: the checkpoint extends the head
    interrupted: bool = False  # the parent has interrupts pending
    exists: bool = False  # the checkpoint is stored already (a retry)
    own_interrupts: list[Any] | None = None  # interrupts already written at the checkpoint


def read_parent(ctx: Context, t: Target) -> StepsOf[Parent]:
    """The parent's state, from the saver's memory or rebuilt, after the
    thread's turn is taken; refuses a run's checkpoint whose parent another
    writer already continued from."""
    if not t.parent:
        return Parent(None, t.cid)
    cached = ctx.heads.get(t.thread_id, t.ns)
    yield t.lock(ctx)
    rows = yield Query(ctx.sql.PARENT_SQL, {"thread_id": t.thread_id, "ns": t.ns, "parent": t.parent, "id": t.cid}, True)
    if not rows:
        return Parent(None, t.cid)
    (packed, chain_bytes, chain_len, snapshot_bytes, state_bytes, base_id, newer, continued, interrupted, exists, own) = rows[0]
    if continued is not None and t.metadata.get("source") in RUN_SOURCES and not exists and t.fork_of != t.parent:
        raise _conflict(t, continued)
    sizes = {"chain_bytes": chain_bytes, "chain_len": chain_len, "snapshot_bytes": snapshot_bytes, "state_bytes": state_bytes}
    if cached is not None and cached.checkpoint_id == t.parent:
        base = dataclasses.replace(cached, **sizes, base_id=base_id)
    else:
        chain = yield Query(ctx.sql.CHAIN_SQL, {"thread_id": t.thread_id, "ns": t.ns, "first": base_id, "last": t.parent}, True)
        state = yield from rebuild_steps(ctx, t.thread_id, t.ns, t.parent, base_id, chain)
        base = Head(t.parent, dict(checkpoint_of(packed).get("channel_versions") or {}), state, **sizes, base_id=base_id)
    return Parent(base, base_id, newer is None, bool(interrupted), bool(exists), own)


@dataclass
class Change:
    """The new state, the ops from the parent's, the patch of the state its
    followers see, and its size."""

    state: dict[str, Any]
    objects: dict[str, Items]
    ops: D.Ops
    patch: list[dict[str, Any]]  # RFC 6902, from the parent's public state
    sizes: dict[str, int]  # channel -> the length of its value's JSON text
    state_bytes: int


def new_state(ctx: Context, t: Target, new_versions: ChannelVersions, base: Head | None) -> Change:
    """The parent's state with the channels that changed; only those whose
    version changed are looked at.  A list that only grew at its end (a
    conversation's messages) costs its new items: their ops, their patch,
    their size; anything else is compared with the parent's value.  Its
    size follows the parent's."""
    state: dict[str, Any] = {}
    objects: dict[str, Items] = {}
    ops: D.Ops = []
    patch: list[dict[str, Any]] = []
    old_state = base.state if base is not None else {}
    old_versions = base.versions if base is not None else {}
    old_sizes = base.sizes if base is not None else {}
    sizes: dict[str, int] = {}
    state_bytes = base.state_bytes if base is not None else 2
    # the graph's channels first, LangGraph's own ("__start__", whose
    # messages a step copies instead of storing them again) after them
    later: D.Ops = []
    sources: D.Sources | None = None
    for ch, value in t.values.items():
        had = ch in old_state
        old = old_state.get(ch)
        if base is not None and had and ch not in new_versions and ch in t.versions and old_versions.get(ch) == t.versions[ch]:
            state[ch] = old
            if ch in base.objects:
                objects[ch] = base.objects[ch]
            if ch in old_sizes:
                sizes[ch] = old_sizes[ch]
            continue
        enc = encode_channel(ctx.codec, value, old, base.objects.get(ch) if base else None)
        state[ch] = enc.value
        if enc.items is not None:
            objects[ch] = enc.items
        public = not internal(ch)
        if sources is None and public:
            sources = D.sources_of(old_state, ch)
        old_size = old_sizes.get(ch) if had else None
        if had and enc.tail is not None and type(old) is list:
            # only grew at its end: the new items
            ch_ops = D.appended_ops(ch, enc.tail, keyed=enc.items is not None and enc.items.ids is not None,
                                    sources=sources if public else None)
            new_size = (old_size + sum(D.size(x) + 1 for x in enc.tail) - (1 if enc.tail and not old else 0)
                        if old_size is not None else D.size(enc.value))
            if public:
                patch.extend({"op": "add", "path": D.pointer(ch) + "/-", "value": it} for it in enc.tail)
        else:
            ch_ops = D.value_ops(ch, old, enc.value, had=had, sources=sources if public else None)
            new_size = D.size_after(old, enc.value, ch_ops, old_size) if ch_ops or old_size is None else old_size
            if public and ch_ops:
                patch.extend(D.to_patch(ch_ops, old_state))
        (later if ch.startswith("__") else ops).extend(ch_ops)
        sizes[ch] = new_size
        if had:
            state_bytes -= old_size if old_size is not None else D.size(old)
        else:
            state_bytes += len(ch) + 4  # its key
        state_bytes += new_size
    ops.extend(later)
    for ch in old_state:
        if ch not in t.values:
            ops.append({"op": "delete", "path": D.pointer(ch)})
            if not internal(ch):
                patch.append({"op": "remove", "path": D.pointer(ch)})
            state_bytes -= old_sizes.get(ch, D.size(old_state[ch])) + len(ch) + 4
    return Change(state, objects, ops, patch, sizes, state_bytes)


@dataclass
class Row:
    """What the checkpoint's row stores of its state."""

    delta: str | None
    snapshot: str | None
    chain_bytes: int
    chain_len: int
    snapshot_bytes: int
    state_bytes: int
    base_id: str


def chain_row(ctx: Context, t: Target, parent: Parent, change: Change) -> Row:
    """The delta, and a snapshot when rebuilding the checkpoint (its last
    snapshot, then the deltas on the way) would read more than
    ``rebuild_factor`` times its state (and at least snapshot_min_bytes),
    or after max_chain checkpoints: a rebuild reads at most about that
    much, and a thread that grows by appending (a conversation) needs no
    snapshot but its first."""
    base = parent.base
    delta = dumps(change.ops)
    if base is None:
        snapshot = dumps(change.state)
        return _sealed(ctx, t, change, Row(None, snapshot, 0, 0, len(snapshot), len(snapshot), t.cid))
    chain_bytes = base.chain_bytes + len(delta)
    chain_len = base.chain_len + 1
    rebuild = base.snapshot_bytes + chain_bytes
    if rebuild > max(ctx.rebuild_factor * change.state_bytes, ctx.snapshot_min_bytes) or chain_len >= ctx.max_chain:
        snapshot = dumps(change.state)
        return _sealed(ctx, t, change, Row(delta, snapshot, 0, 0, len(snapshot), len(snapshot), t.cid))
    return _sealed(ctx, t, change, Row(delta, None, chain_bytes, chain_len, base.snapshot_bytes, change.state_bytes, parent.base_id))


def _sealed(ctx: Context, t: Target, change: Change, row: Row) -> Row:
    """An encrypting saver's row: its delta and snapshot sealed where they
    belong (their sizes stay the plaintext's)."""
    if ctx.sealer is None:
        return row
    where = (t.thread_id, t.ns, t.cid)
    channels = {D.channel_of(op) for op in change.ops}
    return dataclasses.replace(
        row,
        delta=None if row.delta is None else seal_part(
            ctx.sealer, where, "delta", change.ops, {ch: str(t.versions.get(ch, "")) for ch in channels}),
        snapshot=None if row.snapshot is None else seal_part(
            ctx.sealer, where, "snapshot", change.state, {ch: str(t.versions.get(ch, "")) for ch in change.state}),
    )


def publish_steps(ctx: Context, t: Target, parent: Parent, change: Change) -> StepsOf[int | None]:
    """Tell the thread's stream of the checkpoint (root namespace only):
    returns the event's seq, None when nothing was sent."""
    exists, own = parent.exists, parent.own_interrupts
    if not t.parent:
        # roots take the thread's turn too, for the interrupts' sake
        yield t.lock(ctx)
        rows = yield Query(ctx.sql.EXISTS_SQL, {"thread_id": t.thread_id, "ns": t.ns, "id": t.cid}, True)
        exists, own = rows[0]
    if exists:
        return None
    event = checkpoint_event(
        change.patch if parent.base is not None else None,
        change.state,
        extends_head=parent.newest,
        had_interrupts=parent.interrupted,
        interrupts=[i for v in own or [] for i in interrupt_items(v)],
    )
    if event is None:
        return None
    rows = yield Query(ctx.sql.PUBLISH_SQL, (t.thread_id, dumps(event)), True)
    seq: int | None = rows[0][0]
    return seq


#: what fast_put_steps returns when the put needs put_steps
SLOW = object()


@dataclass
class Prepared:
    """A fast put worked out before it is sent: its statement's
    parameters, and what the saver remembers of it once it is stored."""

    t: Target
    change: Change
    row: Row
    params: tuple[Any, ...]


def prepare_fast_put(
    ctx: Context,
    server: Server,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> Prepared | None:
    """The Python work of a fast put, without the server (so that a saver
    can do it before it waits for the parent's writes and the connection):
    None when put_steps must do the put.  Only the checkpoint's keys are
    checked; the parent's state is the head the saver remembers, which is
    the state of that checkpoint whenever it is read (a checkpoint's
    content never changes)."""
    t = Target.of(config, checkpoint, metadata)
    base = ctx.heads.get(t.thread_id, t.ns) if t.parent else None
    if t.parent and (base is None or base.checkpoint_id != t.parent or not base.base_id):
        return None
    change = new_state(ctx, t, new_versions, base)
    row = chain_row(ctx, t, Parent(base, base.base_id if base is not None else t.cid), change)
    # an encrypting saver publishes nothing: its events would be plaintext
    publish = server.publishing and t.ns == "" and ctx.sealer is None
    patch = root_state = None
    if publish and base is not None:
        patch = dumps(change.patch)
    elif publish:
        root_state = dumps(public_state(change.state))
    bookkeeping = {k: v for k, v in checkpoint.items() if k not in ("channel_values", "id")}
    # in the order of put_checkpoint's arguments (sql.Statements.PUT_SQL)
    params = (
        t.thread_id, t.ns, t.cid, t.parent,
        pack(dumps(bookkeeping), always=True),
        dumps(ctx.codec.encode(t.metadata)),
        row.delta, row.snapshot, row.chain_bytes, row.chain_len, row.snapshot_bytes, row.state_bytes, row.base_id,
        t.metadata.get("source") in RUN_SOURCES, t.fork_of, publish, patch, root_state, t.owner,
    )
    return Prepared(t, change, row, params)


def fast_put_steps(
    ctx: Context,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    prepared: Prepared | None = None,
) -> Steps:
    """A put whose parent is the head the saver remembers (a run going on),
    or a root: in one statement, no transaction of its own (put_checkpoint()
    in SQL: the lock, the checks, the event, the row).  ``prepared``: its
    Python work done already (prepare_fast_put).  Returns SLOW, having
    written nothing, when put_steps must do it."""
    if prepared is None:
        server: Server = yield from ctx.sql.server_steps()
        prepared = prepare_fast_put(ctx, server, config, checkpoint, metadata, new_versions)
        if prepared is None:
            return SLOW
    t = prepared.t
    rows = yield Query(ctx.sql.PUT_SQL, prepared.params, True)
    status: str = rows[0][0]
    if status == "slow":
        return SLOW
    if status.startswith("owner:"):
        raise refused(t.thread_id, t.owner, status.partition(":")[2] or None)
    if status.startswith("conflict:"):
        raise _conflict(t, status.partition(":")[2])
    _remember(ctx, t, prepared.change, prepared.row)
    return t.config()


def _conflict(t: Target, continued: str) -> ThreadConflict:
    # a run continues a checkpoint that another writer has continued from
    # since the run read it (a fork asked for names its parent)
    return ThreadConflict(
        f"thread {t.thread_id!r} moved on from checkpoint {t.parent}: checkpoint {continued}, "
        "which continues it, was written after this run read it (another run on the thread)",
        hint="Run again from the thread's head.  To branch from an older checkpoint on purpose, "
        "run with its checkpoint_id in the config.",
    )


def _remember(ctx: Context, t: Target, change: Change, row: Row) -> None:
    ctx.heads.remember(
        t.thread_id,
        t.ns,
        Head(t.cid, t.versions, change.state, change.objects, row.chain_bytes, row.chain_len, row.snapshot_bytes,
             row.state_bytes, change.sizes, row.base_id),
    )


def put_steps(
    ctx: Context,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> Steps:
    t = Target.of(config, checkpoint, metadata)
    server: Server = yield from ctx.sql.server_steps()
    yield from check_owner_steps(ctx, t.thread_id, t.owner)
    parent = yield from read_parent(ctx, t)
    change = new_state(ctx, t, new_versions, parent.base)
    row = chain_row(ctx, t, parent, change)
    publish = server.publishing and t.ns == "" and ctx.sealer is None
    seq = (yield from publish_steps(ctx, t, parent, change)) if publish else None
    # the id is the row's own column
    bookkeeping = {k: v for k, v in checkpoint.items() if k not in ("channel_values", "id")}
    yield Query(
        ctx.sql.INSERT_SQL,
        {
            "thread_id": t.thread_id,
            "ns": t.ns,
            "id": t.cid,
            "parent": t.parent,
            "packed": pack(dumps(bookkeeping), always=True),
            "metadata": dumps(ctx.codec.encode(t.metadata)),
            "delta": row.delta,
            "snapshot": row.snapshot,
            "chain_bytes": row.chain_bytes,
            "chain_len": row.chain_len,
            "snapshot_bytes": row.snapshot_bytes,
            "state_bytes": row.state_bytes,
            "base_id": row.base_id,
            "seq": seq,
        },
    )
    _remember(ctx, t, change, row)
    return t.config()
