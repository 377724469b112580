"""setup() accepts only a schema that the saver's role owns, with nothing in
it that another role made: another role that may CREATE in the database
could otherwise make the schema first, and its trigger would run as the
saver's role.  What a user trusts is accepted when named."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from psycopg import sql

from hxstate.errors import NotOwner, UndefinedObject
from hxstate.langgraph import HxSaver
from hxstate.langgraph.aio import AsyncHxSaver

ROLES = ("hx_setup_saver", "hx_setup_squatter")


@pytest.fixture
def roles(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """A saver's role and a squatter's, each with CREATE on the database
    (as an application's roles often have)."""
    db = conn.info.dbname
    for r in ROLES:
        conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(r))) if role_exists(conn, r) else None
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(r)))
        conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(r)))
        conn.execute(sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(sql.Identifier(db), sql.Identifier(r)))
    # where the squatter's trigger would note that it ran
    conn.execute("DROP TABLE IF EXISTS public.hx_setup_loot")
    conn.execute("CREATE TABLE public.hx_setup_loot (who text, at timestamptz DEFAULT now())")
    conn.execute("GRANT INSERT ON public.hx_setup_loot TO PUBLIC")
    yield
    for r in ROLES:
        conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(r)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(r)))


def role_exists(conn: psycopg.Connection[Any], role: str) -> bool:
    return conn.execute("SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = %s)", (role,)).fetchone() == (True,)


def as_role(dsn: str, role: str) -> psycopg.Connection[Any]:
    c = psycopg.connect(dsn, autocommit=True)
    c.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
    return c


SQUAT = """
CREATE SCHEMA lg_squat;
CREATE TABLE lg_squat.migrations (v integer PRIMARY KEY);
CREATE FUNCTION lg_squat.steal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.hx_setup_loot (who) VALUES (current_user); RETURN NEW; END $$;
CREATE TRIGGER steal BEFORE INSERT ON lg_squat.migrations FOR EACH ROW EXECUTE FUNCTION lg_squat.steal();
GRANT USAGE, CREATE ON SCHEMA lg_squat TO PUBLIC;
GRANT ALL ON lg_squat.migrations TO PUBLIC;
"""


def test_a_squatted_schema_is_refused(dsn: str, conn: psycopg.Connection[Any], roles: None) -> None:
    with as_role(dsn, "hx_setup_squatter") as squatter:
        squatter.execute(SQUAT)
    with as_role(dsn, "hx_setup_saver") as c:
        with pytest.raises(NotOwner) as e:
            HxSaver(c, schema="lg_squat").setup()
    assert e.value.sqlstate == "42501"
    message = str(e.value)
    assert message.startswith("schema 'lg_squat' holds what the saver's role does not own: schema lg_squat (owned by hx_setup_squatter)")
    for what in ("table migrations (owned by hx_setup_squatter)", "function lg_squat.steal() (owned by hx_setup_squatter)"):
        assert what in message, message
    assert e.value.hint is not None and "trusted_owners" in e.value.hint
    # the squatter's trigger never ran as the saver, and nothing was created in its schema
    assert conn.execute("SELECT count(*) FROM public.hx_setup_loot").fetchone() == (0,)
    assert conn.execute("SELECT to_regclass('lg_squat.checkpoints')").fetchone() == (None,)


def test_what_another_role_added_to_the_savers_schema(dsn: str, conn: psycopg.Connection[Any], roles: None) -> None:
    """A schema the saver made, into which another role got: a trigger on
    its tables (a role granted TRIGGER), the right to CREATE in it, a rule."""
    with as_role(dsn, "hx_setup_saver") as c:
        HxSaver(c, schema="lg_own").setup()
        c.execute("GRANT TRIGGER ON lg_own.writes TO hx_setup_squatter; GRANT USAGE ON SCHEMA lg_own TO hx_setup_squatter")
    with as_role(dsn, "hx_setup_squatter") as squatter:
        squatter.execute("""CREATE SCHEMA hx_setup_tools;
                            CREATE FUNCTION hx_setup_tools.noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
                            CREATE TRIGGER watch BEFORE INSERT ON lg_own.writes FOR EACH ROW EXECUTE FUNCTION hx_setup_tools.noop()""")
    with as_role(dsn, "hx_setup_saver") as c:
        with pytest.raises(NotOwner, match="trigger watch on writes"):
            HxSaver(c, schema="lg_own").setup()
        # a trigger the user means to be there, named
        HxSaver(c, schema="lg_own").setup(allowed_triggers=["watch"])
        c.execute("GRANT CREATE ON SCHEMA lg_own TO hx_setup_squatter")
        with pytest.raises(NotOwner, match="privilege CREATE on the schema .owned by hx_setup_squatter."):
            HxSaver(c, schema="lg_own").setup(allowed_triggers=["watch"])
        c.execute("REVOKE CREATE ON SCHEMA lg_own FROM hx_setup_squatter")
        c.execute("CREATE RULE no_deletes AS ON DELETE TO lg_own.writes DO INSTEAD NOTHING")
        with pytest.raises(NotOwner, match="rule no_deletes on writes"):
            HxSaver(c, schema="lg_own").setup(allowed_triggers=["watch"])


def test_trusted_owners(dsn: str, conn: psycopg.Connection[Any], roles: None) -> None:
    """A schema made by a role the user trusts (its migrations' owner, say),
    named: accepted."""
    with as_role(dsn, "hx_setup_squatter") as owner:
        owner.execute("CREATE SCHEMA lg_trusted; GRANT USAGE, CREATE ON SCHEMA lg_trusted TO hx_setup_saver")
    with as_role(dsn, "hx_setup_saver") as c:
        with pytest.raises(NotOwner):
            HxSaver(c, schema="lg_trusted").setup()
        HxSaver(c, schema="lg_trusted").setup(trusted_owners=["hx_setup_squatter"])
        assert c.execute("SELECT to_regclass('lg_trusted.checkpoints') IS NOT NULL").fetchone() == (True,)
        with pytest.raises(UndefinedObject):
            HxSaver(c, schema="lg_trusted").setup(trusted_owners=["no_such_role"])


async def test_async_setup_refuses_too(dsn: str, roles: None) -> None:
    with as_role(dsn, "hx_setup_squatter") as squatter:
        squatter.execute("CREATE SCHEMA lg_squat_async")
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        await c.execute("SET ROLE hx_setup_saver")
        with pytest.raises(NotOwner):
            await AsyncHxSaver(c, schema="lg_squat_async").setup()


PUT_ARGS = ("text, text, text, text, bytea, jsonb, json, json, bigint, integer, bigint, bigint, text, boolean, text, "
            "boolean, jsonb, jsonb, text")


def test_setup_brings_an_older_put_function_forward(conn: psycopg.Connection[Any]) -> None:
    """A schema set up by a saver whose put_checkpoint() returned a set (its
    RETURNS TABLE, as 0.6.0 made it): setup() replaces it with the function that
    returns one row (a result type is not replaced in place), and puts go
    on."""
    conn.execute("DROP SCHEMA IF EXISTS lg_older CASCADE")
    HxSaver(conn, schema="lg_older").setup()
    conn.execute(f"DROP FUNCTION lg_older.put_checkpoint({PUT_ARGS})")
    # the older function's form (its body: every put the saver's full way)
    conn.execute(
        f"CREATE FUNCTION lg_older.put_checkpoint({PUT_ARGS}) RETURNS TABLE (status text, seq bigint) "
        "LANGUAGE sql AS $$ SELECT 'slow'::text, NULL::bigint $$"
    )
    saver = HxSaver(conn, schema="lg_older")
    saver.setup()
    retset = conn.execute(
        "SELECT proretset FROM pg_proc WHERE oid = to_regprocedure(%s)", (f"lg_older.put_checkpoint({PUT_ARGS})",)
    ).fetchone()
    assert retset == (False,)
    # setup() again leaves the function as it is
    oid = conn.execute("SELECT to_regprocedure(%s)::oid", (f"lg_older.put_checkpoint({PUT_ARGS})",)).fetchone()
    saver.setup()
    assert conn.execute("SELECT to_regprocedure(%s)::oid", (f"lg_older.put_checkpoint({PUT_ARGS})",)).fetchone() == oid
    config: Any = {"configurable": {"thread_id": "older", "checkpoint_ns": ""}}
    for n in range(1, 4):
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": [f"m{i}" for i in range(n)]}
        cp["channel_versions"] = {"messages": n}
        config = saver.put(config, cp, {"source": "loop", "step": n}, {"messages": n})
    got = saver.get_tuple(config)
    assert got is not None and got.checkpoint["channel_values"] == {"messages": ["m0", "m1", "m2"]}
    # each published to the thread's stream
    seqs = conn.execute("SELECT seq FROM lg_older.checkpoints ORDER BY checkpoint_id").fetchall()
    assert len(seqs) == 3 and all(s[0] is not None for s in seqs)
    conn.execute("DROP SCHEMA lg_older CASCADE")
