"""HxSaver's serializer is strict: a value planted in the saver's tables by a
role that can write them (UPDATE is enough) never makes a reader import or
call anything off the allow-list; it is refused with TypeNotAllowed.  What
the saver writes it can read back: a value of a type off the list is
refused when it is written, and the list widens for a state's own types."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ormsgpack
import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg import sql

from graph import answer, compile_graph
from hxstate.errors import DataCorrupted, TypeNotAllowed
from hxstate.langgraph import HxSaver
from hxstate.langgraph.serde import StrictSerializer

SCHEMA = "lg_planted"


@dataclasses.dataclass
class Plan:
    steps: list[str]
    due: datetime.date


def tag(kind: str, data: bytes) -> dict[str, Any]:
    return {"$hx": "serde", "type": kind, "data": base64.b64encode(data).decode()}


def system_call(command: str) -> bytes:
    """LangGraph's msgpack for "call os.system(command)" (a constructor of one argument)."""
    return ormsgpack.packb(ormsgpack.Ext(0, ormsgpack.packb(("os", "system", command))))


@pytest.fixture
def thread(dsn: str) -> Iterator[tuple[psycopg.Connection[Any], str]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        saver = HxSaver(conn, schema=SCHEMA)
        saver.setup()
        thread = f"planted-{uuid.uuid4()}"
        graph = compile_graph([answer(1, "hi")], saver, approval=False)
        graph.invoke({"messages": [HumanMessage("hello", id="h1")]}, {"configurable": {"thread_id": thread}})
        yield conn, thread


def as_writer_of(conn: psycopg.Connection[Any], role: str, table: str, statement: str, params: Any) -> None:
    """Run ``statement`` as a role that may only UPDATE ``table`` of the saver."""
    conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
    conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(role)))
    conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(SCHEMA), sql.Identifier(role)))
    conn.execute(sql.SQL("GRANT UPDATE ON {}.{} TO {}").format(sql.Identifier(SCHEMA), sql.Identifier(table), sql.Identifier(role)))
    try:
        with conn.transaction():
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
            conn.execute(statement, params)
    finally:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


PLANTS = {
    # every delta adds a channel whose value is the payload
    "delta": ("checkpoints", "UPDATE {s}.checkpoints SET delta = %s::json"),
    # the metadata of every checkpoint
    "metadata": ("checkpoints", "UPDATE {s}.checkpoints SET metadata = %s::jsonb"),
    # the pending writes
    "writes": ("writes", "UPDATE {s}.writes SET value = %s::jsonb, packed = NULL"),
}


@pytest.mark.parametrize("where", sorted(PLANTS))
def test_a_planted_payload_runs_nothing(thread: tuple[psycopg.Connection[Any], str], tmp_path: Path, where: str) -> None:
    conn, thread_id = thread
    marker = tmp_path / "pwned"
    payload = tag("msgpack", system_call(f"touch {marker}"))
    value: Any = {
        "delta": [{"op": "add", "path": "/planted", "value": payload}],
        "metadata": {"source": "loop", "step": 1, "planted": payload},
        "writes": payload,
    }[where]
    table, statement = PLANTS[where]
    conn.execute(f"INSERT INTO {SCHEMA}.writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, value) "
                 "SELECT thread_id, '', checkpoint_id, 'task', 0, 'messages', '[]' FROM "
                 f"{SCHEMA}.checkpoints WHERE thread_id = %s ON CONFLICT DO NOTHING", (thread_id,))
    as_writer_of(conn, "hx_planter", table, statement.format(s=SCHEMA), (json.dumps(value),))
    # a fresh process's saver reads the thread
    graph = compile_graph([], HxSaver(conn, schema=SCHEMA), approval=False)
    with pytest.raises(TypeNotAllowed) as e:
        graph.get_state({"configurable": {"thread_id": thread_id}})
    assert not marker.exists()
    assert e.value.sqlstate == "22023"
    assert "names type os.system, which is not on HxSaver's list of types it rebuilds" in str(e.value)
    assert e.value.hint is not None and "StrictSerializer" in e.value.hint


def test_payloads_the_saver_never_writes() -> None:
    strict = StrictSerializer()
    lc2 = json.dumps({"lc": 2, "type": "constructor", "id": ["os", "system"], "args": ["true"]}).encode()
    with pytest.raises(TypeNotAllowed, match="a stored value is a 'json' payload"):
        strict.loads_typed(("json", lc2))
    with pytest.raises(TypeNotAllowed, match="'pickle' payload"):
        strict.loads_typed(("pickle", b"cos\nsystem\n(S'true'\ntR."))
    with pytest.raises(DataCorrupted):
        strict.loads_typed(("msgpack", b"\xc1"))
    with pytest.raises(DataCorrupted):
        strict.loads_typed(("msgpack", ormsgpack.packb(ormsgpack.Ext(42, b""))))
    # a type hidden in another's arguments
    nested = ormsgpack.packb(ormsgpack.Ext(2, ormsgpack.packb(("uuid", "UUID", {"hex": ormsgpack.Ext(0, ormsgpack.packb(("os", "system", "true")))}))))
    with pytest.raises(TypeNotAllowed, match="os.system"):
        strict.loads_typed(("msgpack", nested))
    # an allowed class, but a method of it that is not
    method = ormsgpack.packb(ormsgpack.Ext(3, ormsgpack.packb(("datetime", "datetime", "x", "now"))))
    with pytest.raises(TypeNotAllowed, match="datetime.datetime.now"):
        strict.loads_typed(("msgpack", method))


def test_the_defaults_round_trip() -> None:
    strict = StrictSerializer()
    for value in (
        datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
        datetime.date(2026, 1, 2),
        datetime.timedelta(seconds=5),
        uuid.UUID(int=7),
        {1, 2},
        frozenset({"a"}),
        AIMessage("hi", id="a"),
        b"bytes",
        None,
    ):
        assert strict.loads_typed(strict.dumps_typed(value)) == value


def test_a_type_off_the_list_is_refused_when_written(dsn: str) -> None:
    """What HxSaver writes it reads back: a value of a type the serializer
    would not rebuild is refused by put, before anything is written; the
    list widens for it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        saver = HxSaver(conn, schema=SCHEMA)
        saver.setup()
        cp = empty_checkpoint()
        cp["channel_values"] = {"plan": Plan(["a"], datetime.date(2026, 1, 2))}
        cp["channel_versions"] = {"plan": 1}
        thread = f"typed-{uuid.uuid4()}"
        config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        with pytest.raises(TypeNotAllowed, match="a value of type test_serde.Plan is not on HxSaver's list"):
            saver.put(config, cp, {"source": "input", "step": -1}, {"plan": 1})
        assert conn.execute(f"SELECT count(*) FROM {SCHEMA}.checkpoints WHERE thread_id = %s", (thread,)).fetchone() == (0,)
        # widened: with the class, or by LangGraph's with_allowlist
        for widened in (HxSaver(conn, schema=SCHEMA, serde=StrictSerializer(Plan)),
                        HxSaver(conn, schema=SCHEMA).with_allowlist({("test_serde", "Plan")})):
            out = widened.put(config, cp, {"source": "input", "step": -1}, {"plan": 1})
            back = HxSaver(conn, schema=SCHEMA, serde=StrictSerializer(Plan)).get_tuple(out)
            assert back is not None and back.checkpoint["channel_values"]["plan"] == Plan(["a"], datetime.date(2026, 1, 2))
            with pytest.raises(TypeNotAllowed, match="names type test_serde.Plan"):
                HxSaver(conn, schema=SCHEMA).get_tuple(out)
            saver.delete_thread(thread)
        # LangGraph's permissive serializer, by choice
        out = HxSaver(conn, schema=SCHEMA, serde=JsonPlusSerializer()).put(config, cp, {"source": "input", "step": -1}, {"plan": 1})
        back = HxSaver(conn, schema=SCHEMA, serde=JsonPlusSerializer()).get_tuple(out)
        assert back is not None and back.checkpoint["channel_values"]["plan"] == Plan(["a"], datetime.date(2026, 1, 2))
