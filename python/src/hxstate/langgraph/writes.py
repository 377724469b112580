"""put_writes: a task's pending writes stored exactly once.

Writing the same values again (a retry) is a no-op; other values for the
same task and index raise NonDeterministicRetry (XH201, as hx_stage), all
in one transaction.  LangGraph's records of an attempt (``__error__``,
``__interrupt__``, ``__resume__``, ``__scheduled__``, at fixed negative
indexes) are overwritten by the last attempt, as LangGraph expects; an
interrupt of the root namespace's head is published to the thread's
stream.

A write whose value the checkpoint's own state holds in LangGraph's
``__start__`` channel (the ``__start__`` task writes a run's input to the
channels: the input checkpoint's state has it already) is stored as a
reference to it, ``{"$hx": "state", "path": "/__start__/<channel>"}``,
not a second copy of its text (state_ref)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP
from langgraph.checkpoint.serde.types import INTERRUPT

from hxstate.errors import DataCorrupted, NonDeterministicRetry
from hxstate.langgraph import delta as D
from hxstate.langgraph.limits import check_id, check_key
from hxstate.langgraph.ownership import check_owner_steps, epoch_steps, owner_of, refused
from hxstate.langgraph.rebuild import rebuild
from hxstate.langgraph.sealing import open_write, seal_write
from hxstate.langgraph.steps import Context, Query, Steps
from hxstate.langgraph.storage import dumps, pack, unpack
from hxstate.langgraph.stream import interrupt_items

__all__ = ["STATE_REF", "Prepared", "prepare_writes", "put_writes_steps", "resolve_write", "state_ref"]

#: the tag of a write stored as a reference into its checkpoint's state
STATE_REF = "state"

# (indexes, channels, values as JSON text, values packed), as the statement takes them
Columns = tuple[list[int], list[str], list[str | None], list[bytes | None]]


@dataclass
class Prepared:
    """A task's writes encoded, as the statements take them, before the
    connection is taken (prepare_writes)."""

    key: tuple[str, str, str, str, str]  # thread, namespace, checkpoint, task, task path
    regular: Columns
    special: Columns
    # each write's (channel, encoded value), by index
    mine: dict[int, tuple[str, Any]]
    # what is stored in place of a value, by index (a reference)
    stored_as: dict[int, Any]
    owner: str | None


def prepare_writes(
    ctx: Context,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> Prepared:
    """The writes' keys checked and their values encoded (and packed, or
    sealed): the Python work of put_writes, which needs no connection."""
    conf = config["configurable"]
    thread_id = check_key("thread id", str(conf["thread_id"]))
    ns = check_key("checkpoint namespace", str(conf.get("checkpoint_ns", "") or ""))
    cid = check_id("checkpoint id", str(conf["checkpoint_id"]))
    check_id("task id", task_id)
    check_key("task path", task_path)
    regular: Columns = ([], [], [], [])
    special: Columns = ([], [], [], [])
    mine: dict[int, tuple[str, Any]] = {}
    stored_as: dict[int, Any] = {}
    start = _start_of(ctx, thread_id, ns, cid)
    for i, (ch, value) in enumerate(writes):
        target = special if ch in WRITES_IDX_MAP else regular
        idx = WRITES_IDX_MAP.get(ch, i)
        enc = ctx.codec.encode(value)
        ref = state_ref(start, ch, enc) if target is regular and ctx.sealer is None else None
        if ctx.sealer is not None:
            # sealed where it belongs (compressed inside)
            text = seal_write(ctx.sealer, (thread_id, ns, cid), task_id, idx, ch, enc)
            packed = None
        elif ref is not None:
            stored_as[idx] = ref
            text, packed = dumps(ref), None
        else:
            text = dumps(enc)
            packed = pack(text) if target is regular else None
        target[0].append(idx)
        target[1].append(ch)
        target[2].append(None if packed is not None else text)
        target[3].append(packed)
        mine[idx] = (ch, enc)
    return Prepared((thread_id, ns, cid, task_id, task_path), regular, special, mine, stored_as, owner_of(config))


def put_writes_steps(
    ctx: Context,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    prepared: Prepared | None = None,
) -> Steps:
    """The writes stored (``prepared``: prepare_writes' work done already)."""
    p = prepared if prepared is not None else prepare_writes(ctx, config, writes, task_id, task_path)
    key, regular, special, mine, stored_as, owner = p.key, p.regular, p.special, p.mine, p.stored_as, p.owner
    thread_id, ns, cid = key[0], key[1], key[2]
    if ctx.sealer is None and len(stored_as) < len(regular[0]):
        # the checkpoint's put may have ended since the writes were
        # prepared (LangGraph runs both in threads of its own): a value
        # its state holds is stored as a reference to it after all
        start = _start_of(ctx, thread_id, ns, cid)
        if start is not None:
            for n, (idx, ch) in enumerate(zip(regular[0], regular[1])):
                ref = None if idx in stored_as else state_ref(start, ch, mine[idx][1])
                if ref is not None:
                    stored_as[idx] = ref
                    regular[2][n], regular[3][n] = dumps(ref), None
    if special[0]:
        # in a transaction (put_writes needs one for them): its ownership first
        yield from check_owner_steps(ctx, thread_id, owner)
        yield Query(ctx.sql.UPSERT_WRITES_SQL, (*key, *special))
        if INTERRUPT in special[1] and ns == "" and ctx.sealer is None and (yield from ctx.sql.server_steps()).publishing:
            yield from _publish_interrupts(ctx, thread_id, cid)
    if regular[0]:
        # one statement; the writes that were there already (a retry) are
        # compared with these after it
        rows = yield Query(ctx.sql.FAST_WRITES_SQL, (*key, *regular, owner), True)
        if rows[0][0] is None:
            epoch = yield from epoch_steps(ctx, thread_id)
            raise refused(thread_id, owner, epoch)
        there = sorted(set(regular[0]) - set(rows[0][0]))
        if not there:
            return None
        stored = yield Query(ctx.sql.STORED_WRITES_SQL, (thread_id, ns, cid, task_id, there), True)
        found = [
            (idx, ch, open_write(ctx.sealer, (thread_id, ns, cid), task_id, idx, ch,
                                 value if packed is None else json.loads(unpack(packed))))
            for idx, ch, value, packed in stored
        ]
        state: dict[str, Any] | None = None
        bad = []
        for idx, ch, got in found:
            if (ch, got) == mine[idx] or (idx in stored_as and (ch, got) == (mine[idx][0], stored_as[idx])):
                continue
            if is_state_ref(got) and state is None:
                # stored by another process as a reference: to the value
                parts = yield Query(ctx.sql.CHAIN_WALK_SQL, {"thread_id": thread_id, "ns": ns, "id": cid}, True)
                state = rebuild([(r[0], r[1]) for r in parts]) if parts and parts[0][2] else {}
            if state is not None and is_state_ref(got) and (ch, resolve_write(state, got)) == mine[idx]:
                continue
            bad.append(idx)
        if bad:
            raise NonDeterministicRetry(
                f"task {task_id} of checkpoint {cid} wrote other values for the same writes before",
                detail=f"The writes at index {', '.join(str(i) for i in sorted(bad))} differ from the ones stored.",
                hint="A task's writes are stored once: a retry must write the same values.",
            )
    return None


def _publish_interrupts(ctx: Context, thread_id: str, cid: str) -> Steps:
    """Interrupts written after the put of their checkpoint, when it is the
    thread's head, go to its stream (written before it, the put publishes
    them with the checkpoint)."""
    yield Query(ctx.sql.LOCK_SQL, {"lock": ctx.sql.lock_key, "thread_id": thread_id, "ns": ""})
    rows = yield Query(ctx.sql.INTERRUPTS_SQL, {"thread_id": thread_id, "id": cid}, True)
    if rows and rows[0][0]:
        items = [i for v in rows[0][1] or [] for i in interrupt_items(v)]
        event = {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/" + INTERRUPT, "value": items}]}
        yield Query(ctx.sql.PUBLISH_SQL, (thread_id, dumps(event)))
    return None


START = "__start__"


def _start_of(ctx: Context, thread_id: str, ns: str, cid: str) -> Any:
    """The ``__start__`` value (encoded) of checkpoint ``cid``'s state, when
    it is the head the saver remembers."""
    head = ctx.heads.get(thread_id, ns)
    return head.state.get(START) if head is not None and head.checkpoint_id == cid else None


def state_ref(start: Any, channel: str, enc: Any) -> dict[str, Any] | None:
    """The reference to store for a write of ``enc`` to ``channel`` when
    the checkpoint's ``__start__`` value (``start``, encoded) holds it."""
    if type(start) is dict and channel in start and start[channel] == enc:
        return {"$hx": STATE_REF, "path": "/" + START + "/" + channel.replace("~", "~0").replace("/", "~1")}
    return None


def is_state_ref(v: Any) -> bool:
    return type(v) is dict and v.get("$hx") == STATE_REF and len(v) == 2 and type(v.get("path")) is str


def resolve_write(state: dict[str, Any], value: Any) -> Any:
    """A stored write's value (encoded): itself, or for a reference the
    value it names in the checkpoint's state (encoded)."""
    if not is_state_ref(value):
        return value
    try:
        return D.resolve(state, value["path"])
    except (KeyError, IndexError, ValueError, TypeError):
        raise DataCorrupted(
            f"a pending write refers to {value['path']}, which its checkpoint's state does not hold",
            detail="The write is stored as a reference into its checkpoint's state.",
        ) from None
