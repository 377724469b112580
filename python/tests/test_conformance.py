"""LangGraph's own checkpointer conformance suite (langgraph-checkpoint-
conformance), on HxSaver and on AsyncHxSaver: every base capability and
every extended one this version of the suite has."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import Capability

from hxstate.langgraph import HxSaver
from hxstate.langgraph.aio import AsyncHxSaver


def report_lines(report: Any) -> list[str]:
    return [
        f"{name}: {r.tests_passed} passed, {r.tests_failed} failed" + (f" {r.failures}" if r.failures else "")
        for name, r in sorted(report.results.items())
    ]


def check(report: Any) -> None:
    print("\n".join(report_lines(report)))
    for cap in Capability:
        r = report.results[cap.value]
        assert r.detected, f"{cap.value} not detected"
        assert r.passed, f"{cap.value}: {r.failures}"
    assert report.passed_all_base()


async def test_conformance_sync_saver(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:

        @checkpointer_test(name="HxSaver")
        async def factory() -> AsyncIterator[HxSaver]:
            saver = HxSaver(conn, schema="conformance_sync")
            saver.setup()
            yield saver

        check(await validate(factory))


async def test_conformance_async_saver(dsn: str) -> None:
    @checkpointer_test(name="AsyncHxSaver")
    async def factory() -> AsyncIterator[AsyncHxSaver]:
        async with AsyncHxSaver.from_conn_string(dsn, schema="conformance_async") as saver:
            await saver.setup()
            yield saver

    check(await validate(factory))
