"""Reading: get_tuple (a checkpoint and its pending writes, its state
rebuilt from the rows from its snapshot to it, in one statement) and list
(the checkpoints of a filter, newest first, a page at a time: Pager)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple, get_checkpoint_id

from hxstate.langgraph import delta as D
from hxstate.langgraph.heads import Head, Items, items_of, unchanged
from hxstate.langgraph.put import FORK_KEY
from hxstate.langgraph.rebuild import rebuild_steps
from hxstate.langgraph.sealing import Sealer, open_part, open_write
from hxstate.langgraph.steps import Context, Query, Rows, Steps, StepsOf
from hxstate.langgraph.storage import checkpoint_of, dumps, unpack
from hxstate.langgraph.writes import resolve_write

__all__ = ["PAGE_SIZE", "Pager", "get_steps", "range_states_steps", "to_tuple"]


def get_steps(ctx: Context, config: RunnableConfig) -> Steps:
    """The checkpoint ``config`` names, or its namespace's newest."""
    conf = config["configurable"]
    thread_id = str(conf["thread_id"])
    ns = str(conf.get("checkpoint_ns", "") or "")
    cid = get_checkpoint_id(config)
    cached = ctx.heads.get(thread_id, ns)
    known = cached.checkpoint_id if cached is not None else None
    rows = yield Query(
        ctx.sql.GET_SQL if cid else ctx.sql.GET_LATEST_SQL,
        {"thread_id": thread_id, "ns": ns, "id": cid, "cached": known},
        True,
    )
    if not rows:
        return None
    row = rows[-1][3]
    if cached is not None and row[2] == known:
        # the head the saver remembers: its values as they were put, when
        # unchanged since
        return to_tuple(ctx, row, cached.state, remember=False, fork=bool(row[12]), head=cached)
    state = yield from rebuild_steps(ctx, thread_id, ns, row[2], row[11], rows)
    # a run from a checkpoint that is not its namespace's newest, asked
    # for by id, branches from it (time travel): its config says so, and
    # LangGraph carries it to the run's puts
    return to_tuple(ctx, row, state, remember=True, fork=bool(row[12]), base_id=row[11])


#: checkpoints a page of list() holds
PAGE_SIZE = 100


class Pager:
    """list(): the checkpoints of a filter, newest first, a page at a time.

    Each page is one short transaction (REPEATABLE READ, READ ONLY): the
    page's rows, then per thread and namespace the rows their states are
    rebuilt from (from the oldest snapshot they need, in one range scan),
    replayed once, oldest first, with each checkpoint's state taken on the
    way; nothing is held between pages, and a state is decoded only when
    its tuple is handed out.  So a client pages through a long history in
    memory bounded by a page, at about the cost of replaying it once."""

    def __init__(
        self,
        ctx: Context,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
        page_size: int | None = None,
    ) -> None:
        self.ctx = ctx
        self.page_size = page_size or PAGE_SIZE
        wheres: list[str] = []
        params: dict[str, Any] = {}
        if config:
            conf = config["configurable"]
            wheres.append("c.thread_id = %(thread_id)s")
            params["thread_id"] = str(conf["thread_id"])
            ns = conf.get("checkpoint_ns")
            if ns is not None:
                wheres.append("c.checkpoint_ns = %(ns)s")
                params["ns"] = ns
            if cid := get_checkpoint_id(config):
                wheres.append("c.checkpoint_id = %(id)s")
                params["id"] = cid
        if filter:
            wheres.append("c.metadata @> %(filter)s::jsonb")
            params["filter"] = dumps(ctx.codec.encode(filter))
        if before is not None:
            wheres.append("c.checkpoint_id < %(before)s")
            params["before"] = get_checkpoint_id(before)
        # after the last row handed out, in the order (checkpoint_id DESC,
        # thread_id, checkpoint_ns)
        wheres.append(
            "(%(k_id)s::text IS NULL OR c.checkpoint_id < %(k_id)s OR "
            "(c.checkpoint_id = %(k_id)s AND (c.thread_id, c.checkpoint_ns) > (%(k_thread)s, %(k_ns)s)))"
        )
        self.sql = (
            f"SELECT c.base_id, {ctx.sql.SELECT_COLUMNS} FROM {ctx.sql.s}.checkpoints c WHERE "
            + " AND ".join(wheres)
            + " ORDER BY c.checkpoint_id DESC, c.thread_id, c.checkpoint_ns LIMIT %(page)s"
        )
        self.params = params
        self.remaining = None if limit is None else int(limit)
        self.after: tuple[str, str, str] | None = None
        self.done = False
        # per thread and namespace, the rows read so far, parsed once
        self.ranges: dict[tuple[str, str], RangeRows] = {}
        # id of an encoded item -> (the item, its decoded object): an item
        # that several checkpoints share is decoded once
        self.decoded: dict[int, tuple[Any, Any]] = {}

    def page_steps(self) -> StepsOf[list[tuple[tuple[Any, ...], dict[str, Any]]]]:
        """The next page's checkpoints, newest first, each its row and its
        state (encoded); an empty list at the end."""
        n = self.page_size if self.remaining is None else min(self.page_size, self.remaining)
        if self.done or n <= 0:
            return []
        yield Query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        k_id, k_thread, k_ns = self.after or (None, None, None)
        rows = yield Query(self.sql, {**self.params, "k_id": k_id, "k_thread": k_thread, "k_ns": k_ns, "page": n}, True)
        self.done = len(rows) < n
        if self.remaining is not None:
            self.remaining -= len(rows)
        if not rows:
            return []
        last = rows[-1]
        self.after = (last[3], last[1], last[2])
        groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for r in rows:
            groups.setdefault((r[1], r[2]), []).append((r[3], r[0]))
        states: dict[tuple[str, str, str], dict[str, Any]] = {}
        for (thread_id, ns), targets in groups.items():
            cached = self.ranges.setdefault((thread_id, ns), RangeRows(self.ctx.sealer, thread_id, ns))
            found = yield from range_states_steps(self.ctx, thread_id, ns, targets, cached)
            for cid, state in found.items():
                states[(thread_id, ns, cid)] = state
            # the next pages' checkpoints are older, their chains too
            cached.drop_newer(min(cid for cid, _ in targets))
        return [(r[1:12], states[(r[1], r[2], r[3])]) for r in rows]

    def tuple_of(self, item: tuple[tuple[Any, ...], dict[str, Any]]) -> CheckpointTuple:
        return to_tuple(self.ctx, item[0], item[1], remember=False, decode_item=self._decode_item)

    def _decode_item(self, enc: Any) -> Any:
        found = self.decoded.get(id(enc))
        if found is None or found[0] is not enc:
            found = self.decoded[id(enc)] = (enc, self.ctx.codec.decode(enc))
        return found[1]


class RangeRows:
    """The rows of one thread's namespace that a list() read, from ``lo``
    up: each row's parent, its delta parsed (once), and the snapshot text
    of the rows where a replay may start."""

    def __init__(self, sealer: Sealer | None = None, thread_id: str = "", ns: str = "") -> None:
        self.sealer, self.thread_id, self.ns = sealer, thread_id, ns
        self.lo: str | None = None
        self.parents: dict[str, str | None] = {}
        self.snapshots: dict[str, str] = {}
        self.parsed: dict[str, dict[str, Any]] = {}
        self.deltas: dict[str, Any] = {}

    def missing(self, first: str, last: str) -> tuple[str, str, str | None] | None:
        """The range to read for checkpoints from ``first`` to ``last``:
        (first, last, below: read only ids under it), or None."""
        if self.lo is None:
            return first, last, None
        if first < self.lo:
            return first, last, self.lo
        return None

    def add(self, rows: Rows, first: str) -> None:
        for r in rows:
            self.parents[r[0]] = r[1]
            if r[2] is not None:
                self.snapshots[r[0]] = r[2]
        with_delta = [r for r in rows if r[3] is not None]
        if self.sealer is None:
            # one call of the parser for all the deltas
            parsed = json.loads("[" + ",".join(r[3] for r in with_delta) + "]") if with_delta else []
            if any(type(ops) is not list for ops in parsed):
                open_part(None, (self.thread_id, self.ns, ""), "delta", {"$hx": "sealed"})
        else:
            parsed = [open_part(self.sealer, (self.thread_id, self.ns, r[0]), "delta", json.loads(r[3])) for r in with_delta]
        self.deltas.update((r[0], ops) for r, ops in zip(with_delta, parsed))
        self.lo = first if self.lo is None else min(self.lo, first)

    def snapshot(self, cid: str) -> dict[str, Any]:
        """The state of snapshot row ``cid``, for a replay of its own (its
        lists copied, their items shared)."""
        state = self.parsed.get(cid)
        if state is None:
            state = self.parsed[cid] = open_part(
                self.sealer, (self.thread_id, self.ns, cid), "snapshot", json.loads(self.snapshots[cid]))
        return {ch: v.copy() if type(v) is list else v for ch, v in state.items()}

    def drop_newer(self, cid: str) -> None:
        for mine in (self.parents, self.snapshots, self.parsed, self.deltas):
            for k in [k for k in mine if k > cid]:
                del mine[k]


def range_states_steps(
    ctx: Context, thread_id: str, ns: str, targets: list[tuple[str, str]], cached: RangeRows | None = None
) -> StepsOf[dict[str, dict[str, Any]]]:
    """The states of checkpoints ``targets`` ((id, base_id) of one thread's
    namespace): the rows from the oldest snapshot they need to the newest
    of them (those ``cached`` does not hold yet), read once; a replay from
    a snapshot, oldest first, takes each target's state on the way (its
    lists copied, their items shared; another branch's target starts again
    from its own chain).  A target whose chain the rows do not hold (a
    parent not older than its child) is rebuilt alone by chain()."""
    rows = cached if cached is not None else RangeRows(ctx.sealer, thread_id, ns)
    first = min(min(base_id, cid) for cid, base_id in targets)
    last = max(cid for cid, _ in targets)
    need = rows.missing(first, last)
    if need is not None:
        found = yield Query(
            ctx.sql.RANGE_SQL,
            {"thread_id": thread_id, "ns": ns, "first": need[0], "last": need[1], "below": need[2]},
            True,
        )
        rows.add(found, need[0])
    out: dict[str, dict[str, Any]] = {}
    replayer: D.Replayer | None = None
    at_row: str | None = None
    for cid, base_id in sorted(targets):
        path, start = _path(cid, rows.parents, rows.snapshots, rows.deltas, at_row if replayer is not None else None)
        if path is None:
            out[cid] = yield from rebuild_steps(ctx, thread_id, ns, cid, base_id, [])
            continue
        if start is not None:
            replayer = D.Replayer(rows.snapshot(start))
            at_row = start
        assert replayer is not None
        for row_id in reversed(path):
            replayer.apply(rows.deltas[row_id])
            at_row = row_id
        out[cid] = replayer.copy()
    return out


def _path(
    cid: str, parents: dict[str, str | None], snapshots: dict[str, str], deltas: dict[str, Any], at_row: str | None
) -> tuple[list[str] | None, str | None]:
    """The rows from checkpoint ``cid`` back to ``at_row`` (where a replay
    stands), or to a row whose snapshot is at hand (then also that row):
    the deltas to replay, newest first.  None when the rows do not hold
    the way."""
    path: list[str] = []
    at: str | None = cid
    while at is not None and len(path) <= len(parents):
        if at == at_row:
            return path, None
        if at in snapshots:
            return path, at
        if at not in deltas:
            return None, None
        path.append(at)
        at = parents[at]
    return None, None


def to_tuple(
    ctx: Context,
    row: tuple[Any, ...],
    state: dict[str, Any],
    *,
    remember: bool,
    fork: bool = False,
    base_id: str = "",
    head: Head | None = None,
    decode_item: Callable[[Any], Any] | None = None,
) -> CheckpointTuple:
    """A checkpoint's tuple from its row (SELECT_COLUMNS) and its state;
    ``remember``: the saver keeps it as its thread's head; ``fork``: its
    config names it as the checkpoint a run from it branches from
    (FORK_KEY); ``head``: the head the saver remembers, this checkpoint,
    whose lists' objects are handed out again when none changed since
    (each a list of its own) instead of decoded anew; ``decode_item``:
    decodes a list's items (list() shares one object per item among the
    tuples it hands out)."""
    (thread_id, ns, cid, parent, stored, metadata, chain_bytes, chain_len, snapshot_bytes, state_bytes, writes) = row[:11]
    checkpoint = checkpoint_of(stored)
    values: dict[str, Any] = {}
    objects: dict[str, Items] = {}
    for ch, enc in state.items():
        items = head.objects.get(ch) if head is not None else None
        if items is not None and type(enc) is list and len(enc) == len(items.objs) and unchanged(items, items.objs):
            values[ch] = list(items.objs)
            continue
        if decode_item is not None and type(enc) is list:
            # a list's items decoded once for all the tuples that share them
            values[ch] = [decode_item(x) for x in enc]
            continue
        v = ctx.codec.decode(enc)
        values[ch] = v
        if type(v) is list:
            objects[ch] = items_of(v, enc)
    if remember:
        ctx.heads.remember(
            thread_id,
            ns,
            Head(cid, dict(checkpoint.get("channel_versions") or {}), dict(state), objects,
                 chain_bytes, chain_len, snapshot_bytes, state_bytes, base_id=base_id),
        )
    pending = [
        (w[0], w[1], ctx.codec.decode(resolve_write(state, open_write(
            ctx.sealer, (thread_id, ns, cid), w[0], w[4], w[1],
            w[2] if w[5] is None else json.loads(unpack(base64.b64decode(w[5])))))))
        for w in writes or []
    ]
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}
    if fork:
        configurable[FORK_KEY] = cid
    return CheckpointTuple(
        {"configurable": configurable},
        cast(Checkpoint, {**checkpoint, "id": cid, "channel_values": values}),
        cast(CheckpointMetadata, ctx.codec.decode(metadata)),
        (
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": parent}}
            if parent
            else None
        ),
        pending,
    )
