"""Admission records: a run made durable before it is dispatched.

A run that crashes before its first checkpoint leaves nothing in the
checkpoints: the caller accepted it, and no record says so.  ``admit``
commits the run's identity and input on its thread first (table ``runs``);
the run's checkpoints carry its id in their metadata (``run_id``, as
LangGraph writes it from ``config["metadata"]["run_id"]``), and ``finish``
records how it ended.  ``admissions(thread)`` lists the runs that have not
ended, each with how many checkpoints it wrote: none means it was lost
before its first, and its input is there to dispatch it again.

``admit`` is idempotent: the same run with the same input again returns
its admission (``new`` false); with another input it raises
NonDeterministicRetry (XH201), as a task's writes do.  ``finish`` records
the first end only.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from typing import Any

from hxstate.errors import NonDeterministicRetry
from hxstate.langgraph.limits import check_id, check_key
from hxstate.langgraph.steps import Context, Query, StepsOf
from hxstate.langgraph.storage import dumps

__all__ = ["OUTCOMES", "Admission", "admissions_steps", "admit_steps", "finish_steps"]

#: how a run ends
OUTCOMES = frozenset({"success", "interrupt", "error", "cancelled"})


@dataclass(frozen=True)
class Admission:
    thread_id: str
    run_id: str
    input: Any
    admitted_at: datetime.datetime
    outcome: str | None  # None: it has not ended (or was lost)
    detail: str | None
    finished_at: datetime.datetime | None
    checkpoints: int  # the checkpoints whose metadata names the run
    new: bool = False  # this admit made it

    @property
    def lost_before_first_checkpoint(self) -> bool:
        """Admitted, not ended, and no checkpoint of its own."""
        return self.outcome is None and self.checkpoints == 0


def _admission(row: tuple[Any, ...], new: bool = False) -> Admission:
    thread_id, run_id, input, admitted_at, outcome, detail, finished_at, checkpoints = row
    return Admission(thread_id, run_id, input, admitted_at, outcome, detail, finished_at, int(checkpoints), new)


def admit_steps(ctx: Context, thread_id: str, run_id: str, input: Any) -> StepsOf[Admission]:
    check_key("thread id", thread_id)
    check_id("run id", run_id)
    text = dumps(input)
    params = {"thread_id": thread_id, "run_id": run_id, "input": text}
    rows = yield Query(ctx.sql.ADMIT_SQL, params, True)
    if not rows:  # another admitted it meanwhile: read it
        rows = yield Query(ctx.sql.ADMISSIONS_SQL.replace("ORDER BY", "AND r.run_id = %(run_id)s ORDER BY"),
                           {**params, "unfinished": False}, True)
        rows = [(False, *r) for r in rows]
    found = _admission(rows[0][1:], bool(rows[0][0]))
    if not found.new and found.input != json.loads(text):
        raise NonDeterministicRetry(
            f"run {run_id} of thread {thread_id!r} was admitted before with another input",
            hint="A run's id names one input: give a new run a new id.",
        )
    return found


def finish_steps(ctx: Context, thread_id: str, run_id: str, outcome: str, detail: str | None) -> StepsOf[bool]:
    if outcome not in OUTCOMES:
        raise ValueError(f"a run ends in one of {sorted(OUTCOMES)}, not {outcome!r}")
    rows = yield Query(
        ctx.sql.FINISH_SQL, {"thread_id": thread_id, "run_id": run_id, "outcome": outcome, "detail": detail}, True
    )
    return bool(rows)


def admissions_steps(ctx: Context, thread_id: str | None, unfinished: bool) -> StepsOf[list[Admission]]:
    rows = yield Query(ctx.sql.ADMISSIONS_SQL, {"thread_id": thread_id, "unfinished": unfinished}, True)
    return [_admission(r) for r in rows]
