"""Deleting, copying and pruning threads.  Every checkpoint that stays
stays rebuildable: one whose chain goes through a checkpoint that goes is
first made a snapshot of its own state.  A thread left without
checkpoints ends its stream (``hx.stream_end``), once; one whose head
changed otherwise gets a snapshot of it."""

from __future__ import annotations

import json
from collections.abc import Sequence

from hxstate.langgraph.limits import check_key
from hxstate.langgraph.rebuild import rebuild_steps
from hxstate.langgraph.sealing import open_part, open_write, seal_part, seal_write
from hxstate.langgraph.sql import METADATA_COMPRESSION, checkpoint_sql
from hxstate.langgraph.steps import Context, Query, Steps
from hxstate.langgraph.storage import checkpoint_of, dumps

__all__ = ["copy_thread_steps", "delete_for_runs_steps", "delete_thread_steps", "prune_steps", "republish_steps"]


def republish_steps(ctx: Context, threads: list[str], ended: list[str]) -> Steps:
    """Tell the threads' streams their head now, after a change that is
    not a step (a snapshot), or that a thread is gone (hx.stream_end): of
    ``ended``, the threads this change deleted checkpoints of, those left
    with none."""
    if (yield from ctx.sql.server_steps()).publishing and ctx.sealer is None:
        yield Query(ctx.sql.REPUBLISH_SQL, {"threads": threads, "ended": ended})
    return None


def materialize_steps(ctx: Context, where: str, params: dict[str, object]) -> Steps:
    """Make the checkpoints ``where`` selects (of ``checkpoints k``)
    snapshots of their own state and roots, before what they were rebuilt
    from is deleted.  Their states are rebuilt by the saver, which keeps
    them as they were written (an object's keys in their order), and
    written as json."""
    rows = yield Query(
        f"SELECT k.thread_id, k.checkpoint_ns, k.checkpoint_id, k.base_id, {checkpoint_sql('k')} "
        f"FROM {ctx.sql.s}.checkpoints k WHERE {where}",
        params,
        True,
    )
    for thread_id, ns, cid, base_id, packed in rows:
        chain = yield Query(ctx.sql.CHAIN_SQL, {"thread_id": thread_id, "ns": ns, "first": base_id, "last": cid}, True)
        state = yield from rebuild_steps(ctx, thread_id, ns, cid, base_id, chain)
        text = dumps(state)
        stored = text
        if ctx.sealer is not None:
            versions = checkpoint_of(packed).get("channel_versions") or {}
            stored = seal_part(ctx.sealer, (thread_id, ns, cid), "snapshot", state, {ch: str(versions.get(ch, "")) for ch in state})
        yield Query(ctx.sql.MATERIALIZE_SQL, {"thread_id": thread_id, "ns": ns, "id": cid, "snapshot": stored, "bytes": len(text)})
    return None


def rebase_steps(ctx: Context, threads: list[str]) -> Steps:
    """After checkpoints were deleted: each remaining checkpoint of
    ``threads`` names as its base (base_id, where its rebuild starts) its
    nearest snapshot on the way to its root, which the delete may have
    taken."""
    s = ctx.sql.s
    rows = yield Query(
        f"SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, snapshot IS NOT NULL, base_id "
        f"FROM {s}.checkpoints WHERE thread_id = ANY(%s)",
        (threads,),
        True,
    )
    rows_by = {(r[0], r[1], r[2]): r for r in rows}
    nearest: dict[tuple[str, str, str], str | None] = {}
    for key in rows_by:
        path = []
        at: tuple[str, str, str] | None = key
        found: str | None = None
        while at is not None:
            if at in nearest:
                found = nearest[at]
                break
            r = rows_by.get(at)
            if r is None:
                break  # a chain that lost a checkpoint: left as it is
            path.append(at)
            if r[4]:
                found = r[2]
                break
            at = (r[0], r[1], r[3]) if r[3] is not None else None
        for p in path:
            nearest[p] = found
    moved = [(k[0], k[1], k[2], b) for k, b in nearest.items() if b is not None and b != rows_by[k][5]]
    if moved:
        yield Query(
            f"""UPDATE {s}.checkpoints c SET base_id = m.base_id
  FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]) AS m(thread_id, checkpoint_ns, checkpoint_id, base_id)
 WHERE c.thread_id = m.thread_id AND c.checkpoint_ns = m.checkpoint_ns AND c.checkpoint_id = m.checkpoint_id""",
            tuple(list(col) for col in zip(*moved)),
        )
    return None


def _deleted(ctx: Context, where: str, params: dict[str, object]) -> Query:
    """Delete the checkpoints ``where`` selects; the threads they were of."""
    return Query(
        f"WITH d AS (DELETE FROM {ctx.sql.s}.checkpoints WHERE {where} RETURNING thread_id) SELECT DISTINCT thread_id FROM d",
        params,
        True,
    )


def delete_thread_steps(ctx: Context, thread_id: str) -> Steps:
    yield Query(f"DELETE FROM {ctx.sql.s}.writes WHERE thread_id = %s", (str(thread_id),))
    gone = yield _deleted(ctx, "thread_id = %(thread)s", {"thread": str(thread_id)})
    yield from republish_steps(ctx, [str(thread_id)], [r[0] for r in gone])
    ctx.heads.forget([str(thread_id)])
    return None


def delete_for_runs_steps(ctx: Context, run_ids: Sequence[str]) -> Steps:
    runs = [str(r) for r in run_ids]
    if not runs:
        return None
    s = ctx.sql.s
    rows = yield Query(
        f"SELECT DISTINCT thread_id FROM {s}.checkpoints WHERE metadata ->> 'run_id' = ANY(%(runs)s)",
        {"runs": runs},
        True,
    )
    if not rows:
        return None
    threads = [r[0] for r in rows]
    server = yield from ctx.sql.server_steps()
    # the checkpoints that stay but were rebuilt through one that goes
    yield from materialize_steps(
        ctx,
        f"""k.thread_id = ANY(%(threads)s) AND (k.metadata ->> 'run_id' IS NULL OR NOT k.metadata ->> 'run_id' = ANY(%(runs)s))
   AND EXISTS (SELECT FROM {s}.checkpoints p
            WHERE p.thread_id = k.thread_id AND p.checkpoint_ns = k.checkpoint_ns
              AND p.checkpoint_id = k.parent_checkpoint_id AND p.metadata ->> 'run_id' = ANY(%(runs)s))""",
        {"threads": threads, "runs": runs},
    )
    yield Query(
        f"""DELETE FROM {s}.writes w USING {s}.checkpoints c
 WHERE c.thread_id = ANY(%(threads)s) AND c.metadata ->> 'run_id' = ANY(%(runs)s)
   AND w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id""",
        {"threads": threads, "runs": runs},
    )
    gone = yield _deleted(ctx, "thread_id = ANY(%(threads)s) AND metadata ->> 'run_id' = ANY(%(runs)s)",
                          {"threads": threads, "runs": runs})
    yield from rebase_steps(ctx, threads)
    yield from republish_steps(ctx, threads, [r[0] for r in gone])
    ctx.heads.forget(threads)
    return None


def copy_thread_steps(ctx: Context, source_thread_id: str, target_thread_id: str) -> Steps:
    s = ctx.sql.s
    src, dst = str(source_thread_id), check_key("thread id", str(target_thread_id))
    server = yield from ctx.sql.server_steps()
    # the values as they are stored (compressed), but metadata that names
    # the thread
    moved = server.compressed("jsonb_set(metadata, '{thread_id}', to_jsonb(%(dst)s::text))", METADATA_COMPRESSION)
    yield Query(
        f"""INSERT INTO {s}.checkpoints
(thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, packed, metadata,
 delta, snapshot, chain_bytes, chain_len, snapshot_bytes, state_bytes, base_id)
SELECT %(dst)s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, packed,
   CASE WHEN metadata ? 'thread_id' THEN {moved} ELSE metadata END,
   delta, snapshot, chain_bytes, chain_len, snapshot_bytes, state_bytes, base_id
  FROM {s}.checkpoints WHERE thread_id = %(src)s
ON CONFLICT DO NOTHING""",
        {"src": src, "dst": dst},
    )
    yield Query(
        f"""INSERT INTO {s}.writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, value, packed)
SELECT %(dst)s, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, value, packed
  FROM {s}.writes WHERE thread_id = %(src)s
ON CONFLICT DO NOTHING""",
        {"src": src, "dst": dst},
    )
    if ctx.sealer is not None:
        yield from _reseal_steps(ctx, src, dst)
    yield from republish_steps(ctx, [dst], [])
    ctx.heads.forget([dst])
    return None


def _reseal_steps(ctx: Context, src: str, dst: str) -> Steps:
    """An encrypting saver's copy: each sealed part opened where it was
    (the source thread) and sealed again where it is (the copy)."""
    assert ctx.sealer is not None
    s = ctx.sql.s
    rows = yield Query(
        f"SELECT checkpoint_ns, checkpoint_id, delta::text, snapshot::text FROM {s}.checkpoints WHERE thread_id = %s",
        (dst,),
        True,
    )
    for ns, cid, delta, snapshot in rows:
        new: list[str | None] = []
        for kind, text in (("delta", delta), ("snapshot", snapshot)):
            if text is None:
                new.append(None)
                continue
            envelope = json.loads(text)
            value = open_part(ctx.sealer, (src, ns, cid), kind, envelope)
            new.append(seal_part(ctx.sealer, (dst, ns, cid), kind, value, envelope["c"]))
        yield Query(
            f"UPDATE {s}.checkpoints SET delta = %s::json, snapshot = %s::json "
            "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s",
            (new[0], new[1], dst, ns, cid),
        )
    writes = yield Query(
        f"SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, value FROM {s}.writes WHERE thread_id = %s",
        (dst,),
        True,
    )
    for ns, cid, task_id, idx, channel, value in writes:
        opened = open_write(ctx.sealer, (src, ns, cid), task_id, idx, channel, value)
        yield Query(
            f"UPDATE {s}.writes SET value = %s::json "
            "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s AND idx = %s",
            (seal_write(ctx.sealer, (dst, ns, cid), task_id, idx, channel, opened), dst, ns, cid, task_id, idx),
        )
    return None


def prune_steps(ctx: Context, thread_ids: Sequence[str], strategy: str, keep_last: int | None = None) -> Steps:
    """prune: "delete" every checkpoint of the threads, or "keep_latest":
    the ``keep_last`` (1) newest checkpoints of each namespace stay, with
    their pending writes, every one rebuildable: one whose parent goes is
    first made a snapshot of its own state and a root, and each that
    stays names its nearest snapshot again (rebase_steps)."""
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"Unknown prune strategy: {strategy!r}")
    if keep_last is not None and (type(keep_last) is not int or keep_last < 1 or strategy != "keep_latest"):
        raise ValueError("keep_last is a number of checkpoints, at least 1, with strategy keep_latest")
    threads = [str(t) for t in thread_ids]
    if not threads:
        return None
    s = ctx.sql.s
    yield from ctx.sql.server_steps()
    if strategy == "delete":
        yield Query(f"DELETE FROM {s}.writes WHERE thread_id = ANY(%(threads)s)", {"threads": threads})
        gone = yield _deleted(ctx, "thread_id = ANY(%(threads)s)", {"threads": threads})
        yield from republish_steps(ctx, threads, [r[0] for r in gone])
        ctx.heads.forget(threads)
        return None
    # the checkpoints that stay: the newest keep_last of each namespace
    kept = f"""SELECT x.thread_id, x.checkpoint_ns, x.checkpoint_id
      FROM (SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id,
                   row_number() OVER (PARTITION BY c.thread_id, c.checkpoint_ns ORDER BY c.checkpoint_id DESC) AS n
              FROM {s}.checkpoints c WHERE c.thread_id = ANY(%(threads)s)) x
     WHERE x.n <= %(keep)s"""
    params = {"threads": threads, "keep": keep_last or 1}
    # those that stay but whose parent goes: snapshots of their own, roots
    yield from materialize_steps(
        ctx,
        f"""(k.thread_id, k.checkpoint_ns, k.checkpoint_id) IN ({kept})
   AND k.parent_checkpoint_id IS NOT NULL
   AND (k.thread_id, k.checkpoint_ns, k.parent_checkpoint_id) NOT IN ({kept})""",
        params,
    )
    goes = f"thread_id = ANY(%(threads)s) AND (thread_id, checkpoint_ns, checkpoint_id) NOT IN ({kept})"
    yield Query(f"DELETE FROM {s}.writes WHERE {goes}", params)
    yield Query(f"DELETE FROM {s}.checkpoints WHERE {goes}", params)
    yield from rebase_steps(ctx, threads)
    ctx.heads.forget(threads)
    return None
