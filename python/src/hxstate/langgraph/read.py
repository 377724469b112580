"""Reading: get_tuple (a checkpoint and its pending writes, its state
rebuilt from the rows from its snapshot to it, in one statement) and list
(the checkpoints of a filter, newest first)."""

from __future__ import annotations

import base64
import json
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple, get_checkpoint_id

from hxstate.langgraph.heads import Head, objects_of
from hxstate.langgraph.put import FORK_KEY
from hxstate.langgraph.rebuild import rebuild_steps
from hxstate.langgraph.steps import Context, Query, Steps
from hxstate.langgraph.storage import checkpoint_of, dumps, unpack

__all__ = ["get_steps", "list_steps", "to_tuple"]


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
        state = cached.state
    else:
        state = yield from rebuild_steps(ctx.sql, thread_id, ns, row[2], row[10], rows)
    # a run from a checkpoint that is not its namespace's newest, asked
    # for by id, branches from it (time travel): its config says so, and
    # LangGraph carries it to the run's puts
    return to_tuple(ctx, row, state, remember=True, fork=bool(row[11]))


def list_steps(
    ctx: Context,
    config: RunnableConfig | None,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
) -> Steps:
    """The checkpoints of a filter, newest first, as a list."""
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
    # the checkpoints, then the rows their states are rebuilt from: in
    # one snapshot of the database, so that a prune meanwhile does not
    # take rows from under them
    yield Query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    sql = f"SELECT c.base_id, {ctx.sql.SELECT_COLUMNS} FROM {ctx.sql.s}.checkpoints c"
    if wheres:
        sql += " WHERE " + " AND ".join(wheres)
    sql += " ORDER BY c.checkpoint_id DESC"
    if limit is not None:
        sql += " LIMIT %(limit)s"
        params["limit"] = int(limit)
    # and the range of rows their states are rebuilt from, per thread
    # and namespace: from the oldest snapshot they need to the newest
    rows = yield Query(
        f"""SELECT x.*, min(least(x.base_id, x.checkpoint_id)) OVER w, max(x.checkpoint_id) OVER w
  FROM ({sql}) x
WINDOW w AS (PARTITION BY x.thread_id, x.checkpoint_ns)
 ORDER BY x.checkpoint_id DESC""",
        params,
        True,
    )
    chains: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    out: list[CheckpointTuple] = []
    for r in rows:
        base_id, row, (first, last) = r[0], r[1:11], r[11:13]
        key = (row[0], row[1])
        if key not in chains:
            chains[key] = yield Query(
                ctx.sql.CHAIN_SQL, {"thread_id": key[0], "ns": key[1], "first": first, "last": last}, True
            )
        state = yield from rebuild_steps(ctx.sql, key[0], key[1], row[2], base_id, chains[key])
        out.append(to_tuple(ctx, row, state, remember=False))
    return out


def to_tuple(
    ctx: Context, row: tuple[Any, ...], state: dict[str, Any], *, remember: bool, fork: bool = False
) -> CheckpointTuple:
    """A checkpoint's tuple from its row (SELECT_COLUMNS) and its state;
    ``remember``: the saver keeps it as its thread's head; ``fork``: its
    config names it as the checkpoint a run from it branches from
    (FORK_KEY)."""
    (thread_id, ns, cid, parent, stored, metadata, chain_bytes, chain_len, snapshot_bytes, writes) = row[:10]
    checkpoint = checkpoint_of(stored)
    values: dict[str, Any] = {}
    objects: dict[str, list[tuple[Any, Any]]] = {}
    for ch, enc in state.items():
        v = ctx.codec.decode(enc)
        values[ch] = v
        if type(v) is list:
            objects[ch] = objects_of(v)
    if remember:
        ctx.heads.remember(
            thread_id,
            ns,
            Head(cid, dict(checkpoint.get("channel_versions") or {}), dict(state), objects,
                 chain_bytes, chain_len, snapshot_bytes),
        )
    pending = [
        (w[0], w[1], ctx.codec.decode(w[2] if w[5] is None else json.loads(unpack(base64.b64decode(w[5])))))
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
