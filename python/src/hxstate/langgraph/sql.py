"""The SQL of the saver's operations, composed once per schema, and what it
asks of the server before it writes (hxstate's schema, whether it has
hx_compress and the server lz4, whether publish() sends), from which the
SQL of its writes follows."""

from __future__ import annotations

from typing import NamedTuple

from hxstate.errors import NotSetUp
from hxstate.langgraph.steps import Query, StepsOf
from hxstate.langgraph.storage import dumps, quote_ident, quote_literal

__all__ = [
    "DELTA_COMPRESSION",
    "METADATA_COMPRESSION",
    "SNAPSHOT_COMPRESSION",
    "STREAM_END",
    "Server",
    "Statements",
    "checkpoint_sql",
]

# how hx_compress compresses what the saver writes: deltas lz4 (a cold read
# decompresses hundreds of them; pglz would store them 2% smaller and take
# several times as long to decompress them), snapshots pglz (one per
# rebuild; on hundreds of kB of messages it finds the repeats lz4 misses:
# measured 43% smaller with a 30-word vocabulary, 11% with 2,000 words),
# the metadata as the deltas.  (lz4: pglz where the server has no lz4.)
DELTA_COMPRESSION = "lz4"
SNAPSHOT_COMPRESSION = "pglz"
METADATA_COMPRESSION = "lz4"

# what ends a thread's log stream when the thread is deleted, as a deleted
# row's stream ends
STREAM_END = {"type": "CUSTOM", "name": "hx.stream_end", "value": {"reason": "deleted"}}


class Server(NamedTuple):
    """What the saver asks of the server once, before it writes."""

    publishing: bool  # setup() made publish() call hx_stream_send
    hx: str  # hxstate's schema, quoted
    compress: bool  # hxstate has hx_compress
    lz4: bool  # the server has lz4

    def compressed(self, expr: str, method: str) -> str:
        """SQL of ``expr`` compressed in line by hx_compress with ``method``
        (lz4: pglz where the server has no lz4); ``expr`` itself on an
        hxstate without hx_compress."""
        if not self.compress:
            return expr
        if method == "lz4" and not self.lz4:
            method = "pglz"
        return f"{self.hx}.hx_compress({expr}, {quote_literal(method)})"


def checkpoint_sql(c: str) -> str:
    """Checkpoint ``c``'s LangGraph bookkeeping, its packed bytes in
    base64, which storage.checkpoint_of() reads."""
    return f"pg_catalog.encode({c}.packed, 'base64')"


class Statements:
    """The SQL of one schema's saver.  The statements that write depend on
    the server: ``server_steps()`` asks it once (``forget_server()`` after
    setup() changed the schema), and composes them."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        s = self.s = quote_ident(schema)
        #: the advisory lock's first key: puts on one thread's namespace take turns
        self.lock_key = f"hxstate.langgraph:{schema}"
        #: the advisory lock's first key of a thread's ownership: writes
        #: hold it shared, acquire and release exclusive
        self.owner_lock_key = f"hxstate.langgraph.owner:{schema}"
        self.server: Server | None = None
        self.SELECT_COLUMNS = ", ".join(self.columns("c"))
        # a checkpoint and what its state is rebuilt from, in one statement
        # and one index range scan, in the index's order: the rows from its
        # snapshot (base_id) to it, each with its part as JSON text (the
        # snapshot's, the deltas'), the checkpoint itself last, with its
        # own columns (and its base) as one json, which the other rows
        # carry as one NULL.  Parts go as text: the server prints each once
        # and builds no merged state (see rebuild()).  When the saver has
        # the checkpoint's state (%(cached)s), only its row.  A checkpoint
        # asked for by id also says whether a newer one is in its
        # namespace (superseded: a run from it forks the thread).
        head = (
            f"CASE WHEN k.checkpoint_id = (SELECT h.checkpoint_id FROM h) "
            f"THEN json_build_array({', '.join(self.columns('k'))}, (SELECT h.base_id FROM h), "
            f"(SELECT h.superseded FROM h)) END"
        )
        get = f"""WITH h AS (
    SELECT c.checkpoint_id, c.base_id,
           CASE WHEN c.checkpoint_id = %(cached)s OR c.base_id > c.checkpoint_id THEN c.checkpoint_id
                ELSE c.base_id END AS first,
           {{}} AS superseded
      FROM {s}.checkpoints c
     WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = %(ns)s{{}})
SELECT k.checkpoint_id, k.parent_checkpoint_id,
       CASE WHEN k.checkpoint_id = %(cached)s THEN NULL
            WHEN k.checkpoint_id = (SELECT h.base_id FROM h) THEN k.snapshot::text ELSE k.delta::text END,
       {head}
  FROM {s}.checkpoints k
 WHERE k.thread_id = %(thread_id)s AND k.checkpoint_ns = %(ns)s
   AND k.checkpoint_id >= (SELECT h.first FROM h) AND k.checkpoint_id <= (SELECT h.checkpoint_id FROM h)
 ORDER BY k.checkpoint_id"""
        newer = (
            f"EXISTS (SELECT FROM {s}.checkpoints n WHERE n.thread_id = c.thread_id "
            "AND n.checkpoint_ns = c.checkpoint_ns AND n.checkpoint_id > c.checkpoint_id)"
        )
        self.GET_SQL = get.format(newer, " AND c.checkpoint_id = %(id)s")
        self.GET_LATEST_SQL = get.format("false", " ORDER BY c.checkpoint_id DESC LIMIT 1")
        # the rows of a range, each with its snapshot when it has one (a
        # chain ends at its first snapshot), its delta otherwise
        self.CHAIN_SQL = f"""SELECT k.checkpoint_id, k.parent_checkpoint_id,
       CASE WHEN k.snapshot IS NOT NULL THEN k.snapshot::text ELSE k.delta::text END
  FROM {s}.checkpoints k
 WHERE k.thread_id = %(thread_id)s AND k.checkpoint_ns = %(ns)s
   AND k.checkpoint_id >= least(%(first)s, %(last)s) AND k.checkpoint_id <= %(last)s
 ORDER BY k.checkpoint_id"""
        # the rows of a range for list(): each row's delta, and the
        # snapshot of the first (the oldest one a page needs) and of roots;
        # those under %(below)s only, when given (the ones above it the
        # list read already)
        self.RANGE_SQL = f"""SELECT k.checkpoint_id, k.parent_checkpoint_id,
       CASE WHEN k.checkpoint_id = %(first)s OR k.delta IS NULL THEN k.snapshot::text END,
       k.delta::text
  FROM {s}.checkpoints k
 WHERE k.thread_id = %(thread_id)s AND k.checkpoint_ns = %(ns)s
   AND k.checkpoint_id >= %(first)s AND k.checkpoint_id <= %(last)s
   AND (%(below)s::text IS NULL OR k.checkpoint_id < %(below)s)
 ORDER BY k.checkpoint_id"""
        # a checkpoint's chain walked from it by its parents, when the rows
        # of a range do not hold it (a parent not older than its child):
        # (id, part, whether it is the snapshot), its snapshot first
        self.CHAIN_WALK_SQL = f"""WITH RECURSIVE w AS (
    SELECT c.checkpoint_id, c.parent_checkpoint_id, c.snapshot, c.delta, 1 AS depth
      FROM {s}.checkpoints c
     WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = %(ns)s AND c.checkpoint_id = %(id)s
    UNION ALL
    SELECT c.checkpoint_id, c.parent_checkpoint_id, c.snapshot, c.delta, w.depth + 1
      FROM {s}.checkpoints c JOIN w ON c.thread_id = %(thread_id)s AND c.checkpoint_ns = %(ns)s
                                   AND c.checkpoint_id = w.parent_checkpoint_id
     WHERE w.snapshot IS NULL)
SELECT w.checkpoint_id, CASE WHEN w.snapshot IS NOT NULL THEN w.snapshot::text ELSE w.delta::text END,
       w.snapshot IS NOT NULL
  FROM w ORDER BY w.depth DESC"""
        # a put's parent: its bookkeeping and chain, the namespace's newest
        # checkpoint after it (the stream's head, when not this one), a
        # checkpoint that already continued from it (another writer's:
        # the newer ones are scanned, none when the parent is the head),
        # whether it has interrupts, whether this checkpoint exists (a
        # retry), and the interrupts written at this checkpoint already
        self.PARENT_SQL = f"""SELECT {checkpoint_sql("p")}, p.chain_bytes, p.chain_len, p.snapshot_bytes, p.state_bytes, p.base_id,
    (SELECT c.checkpoint_id FROM {s}.checkpoints c
      WHERE c.thread_id = p.thread_id AND c.checkpoint_ns = p.checkpoint_ns
        AND c.checkpoint_id > p.checkpoint_id AND c.checkpoint_id <> %(id)s
      ORDER BY c.checkpoint_id DESC LIMIT 1),
    (SELECT c.checkpoint_id FROM {s}.checkpoints c
      WHERE c.thread_id = p.thread_id AND c.checkpoint_ns = p.checkpoint_ns
        AND c.checkpoint_id > p.checkpoint_id AND c.checkpoint_id <> %(id)s
        AND c.parent_checkpoint_id = p.checkpoint_id
      LIMIT 1),
    EXISTS (SELECT FROM {s}.writes w
             WHERE w.thread_id = p.thread_id AND w.checkpoint_ns = p.checkpoint_ns
               AND w.checkpoint_id = p.checkpoint_id AND w.channel = '__interrupt__'),
    EXISTS (SELECT FROM {s}.checkpoints c
             WHERE c.thread_id = p.thread_id AND c.checkpoint_ns = p.checkpoint_ns AND c.checkpoint_id = %(id)s),
    {self.own_interrupts_sql()}
  FROM {s}.checkpoints p
 WHERE p.thread_id = %(thread_id)s AND p.checkpoint_ns = %(ns)s AND p.checkpoint_id = %(parent)s"""
        # puts on one thread's namespace take turns (a lock in memory, not a
        # row lock, which would write WAL), so that the one reading after
        # the other committed sees its checkpoint
        self.LOCK_SQL = (
            "SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(%(lock)s), "
            "pg_catalog.hashtext(%(thread_id)s || chr(1) || %(ns)s))"
        )
        self.EXISTS_SQL = f"""SELECT EXISTS (SELECT FROM {s}.checkpoints
 WHERE thread_id = %(thread_id)s AND checkpoint_ns = %(ns)s AND checkpoint_id = %(id)s), {self.own_interrupts_sql()}"""
        cols = "(thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, value, packed)"
        vals = (
            "SELECT %s, %s, %s, %s, %s, t.idx, t.channel, t.value::json, t.packed "
            "FROM unnest(%s::int[], %s::text[], %s::text[], %s::bytea[]) AS t(idx, channel, value, packed)"
        )
        self.INSERT_WRITES_SQL = f"INSERT INTO {s}.writes {cols} {vals} ON CONFLICT DO NOTHING"
        self.UPSERT_WRITES_SQL = (
            f"INSERT INTO {s}.writes {cols} {vals} ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) "
            "DO UPDATE SET channel = EXCLUDED.channel, value = EXCLUDED.value, packed = EXCLUDED.packed, "
            "task_path = EXCLUDED.task_path"
        )
        # whether setup() made publish() call hx_stream_send, hxstate's
        # schema, whether it has hx_compress, and whether the server has lz4
        self.SERVER_SQL = """SELECT coalesce(pg_catalog.strpos(pg_catalog.pg_get_functiondef(pg_catalog.to_regprocedure(%s)),
                                  'hx_stream_send') > 0, false),
       n.nspname,
       pg_catalog.to_regprocedure(pg_catalog.quote_ident(n.nspname) || '.hx_compress(anyelement,text)') IS NOT NULL,
       'lz4' = ANY ((SELECT enumvals FROM pg_catalog.pg_settings WHERE name = 'default_toast_compression')::text[])
  FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
 WHERE e.extname = 'hxstate'"""
        self.PUBLISH_SQL = f"SELECT {s}.publish({s}.stream_name(%s), %s::jsonb)"
        # put_checkpoint's arguments in order (put.prepare_fast_put):
        # thread, ns, id, parent, packed, metadata, delta, snapshot,
        # chain_bytes, chain_len, snapshot_bytes, state_bytes, base_id,
        # run, fork_of, publish, patch, root_state, owner
        self.PUT_SQL = f"""SELECT * FROM {s}.put_checkpoint(%s, %s, %s, %s, %s,
    %s::jsonb, %s::json, %s::json, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s)"""
        # a task's writes in one statement (put_writes() in SQL, no
        # transaction of their own): the indexes it stored, NULL for
        # another owner's thread
        self.FAST_WRITES_SQL = f"SELECT {s}.put_writes(%s, %s, %s, %s, %s, %s::int[], %s::text[], %s::text[], %s::bytea[], %s)"
        # a write's ownership: the thread's owner waits for the write's
        # transaction to end; the owner's token and epoch (none: no owner)
        self.OWNER_SQL = f"""SELECT pg_catalog.pg_advisory_xact_lock_shared(pg_catalog.hashtext(%(lock)s), pg_catalog.hashtext(%(thread_id)s)),
       (SELECT o.token FROM {s}.owners o WHERE o.thread_id = %(thread_id)s),
       (SELECT o.epoch FROM {s}.owners o WHERE o.thread_id = %(thread_id)s)"""
        self.ACQUIRE_SQL = f"""INSERT INTO {s}.owners AS o (thread_id, epoch, token) VALUES (%(thread_id)s, 1, '1-' || %(rand)s)
ON CONFLICT (thread_id) DO UPDATE SET epoch = o.epoch + 1, token = (o.epoch + 1)::text || '-' || %(rand)s, acquired_at = now()
RETURNING o.token"""
        self.RELEASE_SQL = f"DELETE FROM {s}.owners WHERE thread_id = %(thread_id)s AND token = %(token)s RETURNING epoch"
        self.EPOCH_SQL = f"SELECT epoch FROM {s}.owners WHERE thread_id = %(thread_id)s"
        # admissions of runs (runs.py)
        admission = f"""r.thread_id, r.run_id, r.input, r.admitted_at, r.outcome, r.detail, r.finished_at,
       (SELECT count(*) FROM {s}.checkpoints c WHERE c.thread_id = r.thread_id AND c.metadata ->> 'run_id' = r.run_id)"""
        self.ADMIT_SQL = f"""WITH ins AS (INSERT INTO {s}.runs (thread_id, run_id, input)
                  VALUES (%(thread_id)s, %(run_id)s, %(input)s::json) ON CONFLICT DO NOTHING RETURNING *)
SELECT true, {admission.replace("r.", "r.", 1)} FROM ins r
UNION ALL
SELECT false, {admission} FROM {s}.runs r
 WHERE r.thread_id = %(thread_id)s AND r.run_id = %(run_id)s AND NOT EXISTS (SELECT FROM ins)"""
        self.FINISH_SQL = f"""UPDATE {s}.runs SET outcome = %(outcome)s, detail = %(detail)s, finished_at = now()
 WHERE thread_id = %(thread_id)s AND run_id = %(run_id)s AND outcome IS NULL RETURNING run_id"""
        self.ADMISSIONS_SQL = f"""SELECT {admission} FROM {s}.runs r
 WHERE (%(thread_id)s::text IS NULL OR r.thread_id = %(thread_id)s) AND (NOT %(unfinished)s OR r.outcome IS NULL)
 ORDER BY r.admitted_at, r.thread_id, r.run_id"""
        self.INTERRUPTS_SQL = f"""SELECT (SELECT max(c.checkpoint_id) FROM {s}.checkpoints c
          WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = '') = %(id)s,
       (SELECT jsonb_agg(w.value::jsonb ORDER BY w.task_path, w.task_id, w.idx) FROM {s}.writes w
         WHERE w.thread_id = %(thread_id)s AND w.checkpoint_ns = '' AND w.checkpoint_id = %(id)s
           AND w.channel = '__interrupt__')"""
        self.STORED_WRITES_SQL = f"""SELECT idx, channel, value, packed FROM {s}.writes
 WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s AND idx = ANY(%s::int[])"""

    def own_interrupts_sql(self) -> str:
        """The interrupts already written at the checkpoint being put: with
        LangGraph's default durability a task's writes can come before its
        checkpoint."""
        return f"""(SELECT jsonb_agg(w.value::jsonb ORDER BY w.task_path, w.task_id, w.idx) FROM {self.s}.writes w
      WHERE w.thread_id = %(thread_id)s AND w.checkpoint_ns = %(ns)s AND w.checkpoint_id = %(id)s
        AND w.channel = '__interrupt__')"""

    def columns(self, c: str) -> list[str]:
        """What read.to_tuple() reads of checkpoint ``c``: its row, and its
        pending writes."""
        return [
            *(f"{c}.{col}" for col in ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id")),
            checkpoint_sql(c),
            *(f"{c}.{col}" for col in ("metadata", "chain_bytes", "chain_len", "snapshot_bytes", "state_bytes")),
            f"""(SELECT json_agg(json_build_array(w.task_id, w.channel, w.value, w.task_path, w.idx,
                                        encode(w.packed, 'base64'))
                      ORDER BY w.task_path, w.task_id, w.idx)
       FROM {self.s}.writes w
      WHERE w.thread_id = {c}.thread_id AND w.checkpoint_ns = {c}.checkpoint_ns
        AND w.checkpoint_id = {c}.checkpoint_id)""",
        ]

    def server_steps(self) -> StepsOf[Server]:
        """What the saver asks of the server, once, and the SQL of its writes
        that follows from it."""
        server = self.server
        if server is None:
            rows = yield Query(self.SERVER_SQL, (f"{self.s}.publish(text,jsonb)",), True)
            if not rows:
                raise NotSetUp(
                    "extension \"hxstate\" is not installed in this database",
                    hint="CREATE EXTENSION hxstate, as a role that may.",
                )
            publishing, hx, compress, lz4 = rows[0]
            server = Server(bool(publishing), quote_ident(hx), bool(compress), bool(lz4))
            self._write_sql(server)
            self.server = server
        return server

    def forget_server(self) -> None:
        """Ask the server again before the next write (setup() ran)."""
        self.server = None

    def _write_sql(self, server: Server) -> None:
        s = self.s
        self.INSERT_SQL = f"""INSERT INTO {s}.checkpoints
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, packed, metadata,
     delta, snapshot, chain_bytes, chain_len, snapshot_bytes, state_bytes, base_id, seq)
VALUES (%(thread_id)s, %(ns)s, %(id)s, %(parent)s, %(packed)s,
        {server.compressed("%(metadata)s::jsonb", METADATA_COMPRESSION)},
        {server.compressed("%(delta)s::json", DELTA_COMPRESSION)},
        {server.compressed("%(snapshot)s::json", SNAPSHOT_COMPRESSION)},
        %(chain_bytes)s, %(chain_len)s, %(snapshot_bytes)s, %(state_bytes)s, %(base_id)s, %(seq)s)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING"""
        # a checkpoint made a snapshot of its own state and a root, before
        # what it was rebuilt from is deleted
        self.MATERIALIZE_SQL = f"""UPDATE {s}.checkpoints
   SET snapshot = {server.compressed("%(snapshot)s::json", SNAPSHOT_COMPRESSION)}, parent_checkpoint_id = NULL,
       chain_bytes = 0, chain_len = 0, snapshot_bytes = %(bytes)s, state_bytes = %(bytes)s, base_id = checkpoint_id
 WHERE thread_id = %(thread_id)s AND checkpoint_ns = %(ns)s AND checkpoint_id = %(id)s"""
        # a thread's stream told what its head is now, after a change that
        # is not a step; or, when the thread has no checkpoint left and
        # this change deleted some (%(ended)s), that it ended, as a deleted
        # row's stream ends (once: a thread with nothing to delete is not
        # ended again).  The saver's tables say it all: the saver's role
        # needs no SELECT on the log.
        self.REPUBLISH_SQL = f"""SELECT {s}.publish({s}.stream_name(h.key),
           CASE WHEN h.state IS NOT NULL
                THEN pg_catalog.jsonb_build_object('type', 'STATE_SNAPSHOT', 'snapshot', h.state)
                ELSE '{dumps(STREAM_END)}'::jsonb END)
  FROM {s}.head_states(%(threads)s::text[]) h
 WHERE h.state IS NOT NULL OR h.key = ANY (%(ended)s::text[])"""
