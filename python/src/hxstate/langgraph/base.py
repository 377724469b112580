"""What HxSaver and AsyncHxSaver share: the SQL, and every operation written
once as a generator of statements that a sync or an async driver runs.

Storage (in the schema the user chooses, ``langgraph`` by default):

- ``checkpoints``: one row per checkpoint: the checkpoint without its
  values (``packed``), the metadata, and its state as what changed:
  ``delta``, the hx_merge ops from the parent's state, and now and then
  ``snapshot``, the whole state.  A checkpoint's state is its nearest
  snapshot ancestor's snapshot with the deltas after it applied in order
  (``state_at``, one ``hx_merge``; the saver reads the rows from the
  snapshot to the checkpoint in one range scan and replays them itself).
  A snapshot is written when the deltas since the last one add up to more
  than that snapshot (at least ``snapshot_min_bytes``) or when
  ``max_chain`` checkpoints passed: rebuilding reads at most about twice
  the state, and what is stored and WAL-logged per step is what changed,
  plus snapshots whose sizes grow geometrically (together about twice the
  final state).  The saver compresses the metadata, deltas and snapshots
  it writes in line (hx_compress), whatever the row's width.
- ``writes``: the pending writes of tasks (``put_writes``), staged once:
  retrying equal writes is a no-op, other writes for the same task and index
  are an error (``NonDeterministicRetry``, XH201), except LangGraph's own
  records of an attempt (errors, interrupts, resumes, scheduled), which the
  last attempt overwrites as LangGraph expects.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import threading
import zlib
from collections import OrderedDict
from collections.abc import Collection, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import INTERRUPT

from hxstate.errors import NonDeterministicRetry, NotOwner, NotSetUp, ThreadConflict
from hxstate.langgraph import delta as D
from hxstate.langgraph.codec import Codec, public_json
from hxstate.langgraph.limits import check_id, check_key
from hxstate.langgraph.serde import StrictSerializer

DEFAULT_SCHEMA = "langgraph"
# what ends a thread's log stream when the thread is deleted, as a deleted
# row's stream ends
STREAM_END = {"type": "CUSTOM", "name": "hx.stream_end", "value": {"reason": "deleted"}}
# sources of checkpoints that a run writes as it advances a thread; the
# others ("update", "fork") are forks a user asked for
RUN_SOURCES = frozenset({"input", "loop"})


# zlib's preset dictionary for what the saver packs: the JSON LangGraph's
# checkpoints and messages are made of, the most frequent last.  A packed
# value names its dictionary by checksum (zlib's FDICT header), so this one
# never changes: another would be added beside it.
ZDICT = (
    b'{"v":4,"ts":"2026-01-01T00:00:00.000000+00:00","channel_versions":{"__start__":1,"messages":1,"branch:to:"},'
    b'"versions_seen":{"__input__":{},"__start__":{"__start__":1}},"pending_sends":[],'
    b'"updated_channels":["__start__","messages"]}'
    b'[{"content":"","additional_kwargs":{},"response_metadata":{},"type":"tool","name":null,"id":"",'
    b'"tool_call_id":"","artifact":null,"status":"success"},'
    b'{"content":"","additional_kwargs":{},"response_metadata":{},"type":"human","name":null,"id":""},'
    b'{"content":"","additional_kwargs":{},"response_metadata":{},"type":"ai","name":null,"id":"",'
    b'"tool_calls":[{"name":"","args":{},"id":"","type":"tool_call"}],"invalid_tool_calls":[],"usage_metadata":null}]'
)
_ZDICTS = {zlib.adler32(ZDICT): ZDICT}


def pack(text: str, *, always: bool = False) -> bytes | None:
    """JSON text compressed (zlib, with ZDICT).  A write's when that saves
    a quarter or more, a checkpoint's bookkeeping always: PostgreSQL's own
    compression (pglz, lz4: no entropy coding, no dictionary) saves a
    quarter of a 1 kB message at best, zlib with the dictionary twice
    that.  Pending writes and LangGraph's versions are read back by the
    saver; the state, which SQL reads, stays jsonb."""
    if not always and len(text) < 256:
        return None
    raw = text.encode()
    z = zlib.compressobj(6, zdict=ZDICT)
    packed = z.compress(raw) + z.flush()
    return packed if always or len(packed) * 4 <= len(raw) * 3 else None


def unpack(packed: bytes) -> str:
    if len(packed) >= 6 and packed[1] & 0x20:  # FDICT: the dictionary's Adler-32 follows
        zdict = _ZDICTS.get(int.from_bytes(packed[2:6], "big"))
        if zdict is None:
            raise ValueError("a packed value names a zlib dictionary this version of hxstate does not have")
        z = zlib.decompressobj(zdict=zdict)
        return (z.decompress(packed) + z.flush()).decode()
    return zlib.decompress(packed).decode()


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def dumps(j: Any) -> str:
    return json.dumps(j, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class Query(NamedTuple):
    sql: str
    params: Sequence[Any] | Mapping[str, Any] | None = None
    fetch: bool = False


Steps = Generator[Query, list[tuple[Any, ...]], Any]


def migrations(s: str, hx: str) -> list[str]:
    """The saver's migrations; the position of each is its version.  ``s``
    is the saver's schema and ``hx`` hxstate's, both quoted."""
    return [
        f"CREATE TABLE IF NOT EXISTS {s}.migrations (v integer PRIMARY KEY)",
        # a checkpoint: LangGraph's bookkeeping, its metadata, and its state
        # as a delta from its parent's, now and then a snapshot.
        # - packed: the bookkeeping (channel versions, the versions each
        #   node has seen, ts), about 330 bytes of JSON, which zlib with
        #   ZDICT packs to 100 (PostgreSQL's compression: 300); read back
        #   by the saver, not by SQL.
        # - delta is json: written once, read whole by the saver, which
        #   parses it itself; json keeps its text, so sending a delta is a
        #   copy where jsonb is printed anew at every read (the 1,832 deltas
        #   of a 500-turn thread: 0.3 ms against 5.0).  The state itself
        #   (snapshot, state_at) is jsonb.
        # - The saver writes metadata, delta and snapshot compressed in line
        #   (hx_compress, see BaseHxSaver._write_sql): PostgreSQL compresses
        #   a row's values only when the row is wider than about 2 kB, and
        #   a checkpoint that adds a message is a row of 1 to 2 kB.
        # - Storage is PostgreSQL's default: a row still wider than 2 kB (a
        #   snapshot) has its widest values moved out of line.  Keeping them
        #   in the row up to a page (STORAGE MAIN) bought nothing: with
        #   messages of 1 to 4 kB, a cold read's time within 1% and the
        #   bytes within 7%, either way.
        f"""CREATE TABLE {s}.checkpoints (
    thread_id text NOT NULL,
    checkpoint_ns text NOT NULL DEFAULT '',
    checkpoint_id text NOT NULL,
    parent_checkpoint_id text,
    packed bytea NOT NULL,
    metadata jsonb NOT NULL DEFAULT '{{}}',
    delta json,
    snapshot jsonb,
    chain_bytes bigint NOT NULL DEFAULT 0,
    chain_len integer NOT NULL DEFAULT 0,
    snapshot_bytes bigint NOT NULL DEFAULT 0,
    base_id text NOT NULL,
    seq bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
)""",
        f"""COMMENT ON COLUMN {s}.checkpoints.packed IS
    'LangGraph''s checkpoint without its channel values (versions, ts), as zlib-compressed JSON'""",
        f"""COMMENT ON COLUMN {s}.checkpoints.delta IS
    'the hx_merge ops from the parent''s state to this checkpoint''s (NULL in a root), compressed in line'""",
        f"""COMMENT ON COLUMN {s}.checkpoints.snapshot IS
    'the whole state, in a root and now and then (base_id names the nearest), compressed in line'""",
        f"""CREATE TABLE {s}.writes (
    thread_id text NOT NULL,
    checkpoint_ns text NOT NULL DEFAULT '',
    checkpoint_id text NOT NULL,
    task_id text NOT NULL,
    idx integer NOT NULL,
    channel text NOT NULL,
    task_path text NOT NULL DEFAULT '',
    value jsonb,
    packed bytea,
    CHECK ((value IS NULL) <> (packed IS NULL)),
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
)""",
        f"CREATE INDEX checkpoints_run_id_idx ON {s}.checkpoints ((metadata ->> 'run_id'))",
        chain_function(s),
        f"COMMENT ON FUNCTION {s}.chain(text, text, text) IS "
        "'what a checkpoint kept by HxSaver is rebuilt from: its nearest snapshot, then the deltas on the way, newest first'",
        f"""CREATE FUNCTION {s}.state_at(p_thread_id text, p_checkpoint_ns text, p_checkpoint_id text)
RETURNS jsonb LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT CASE WHEN ch IS NULL THEN NULL
            WHEN cardinality(ch) = 1 THEN ch[1]
            ELSE {hx}.hx_merge(ch[1], coalesce((SELECT jsonb_agg(e.op ORDER BY x.i DESC, e.o)
                                                  FROM unnest(ch[2:]) WITH ORDINALITY AS x(delta, i),
                                                       jsonb_array_elements(x.delta) WITH ORDINALITY AS e(op, o)),
                                                '[]'))
       END
  FROM (SELECT {s}.chain(p_thread_id, p_checkpoint_ns, p_checkpoint_id) AS ch) c
$$""",
        f"COMMENT ON FUNCTION {s}.state_at(text, text, text) IS "
        "'the state (channel values as JSON) of a LangGraph checkpoint kept by HxSaver'",
    ]


def checkpoint_of(stored: str) -> dict[str, Any]:
    """A checkpoint's LangGraph bookkeeping from what _checkpoint_sql()
    reads: its packed bytes in base64."""
    loaded: dict[str, Any] = json.loads(unpack(base64.b64decode(stored)))
    return loaded


def walk(rows: Sequence[tuple[Any, ...]], cid: str, base_id: str) -> list[str] | None:
    """The parts a checkpoint is rebuilt from, its snapshot's then its
    deltas from the oldest, found among ``rows`` (id, parent, part as JSON
    text: the rows from its snapshot to it) by following parents from it
    back to its snapshot, skipping rows of other branches; None when the
    rows do not hold that whole way (a parent not older than its child,
    or a part missing)."""
    by_id = {r[0]: r for r in rows}
    parts: list[str] = []
    at: str | None = cid
    while True:
        r = by_id.get(at)
        if r is None or r[2] is None or len(parts) >= len(rows):
            return None
        parts.append(r[2])
        if at == base_id:
            parts.reverse()
            return parts
        at = r[1]


def rebuild(parts: Sequence[str]) -> dict[str, Any]:
    """A state from its snapshot's and its deltas' JSON text, replayed
    here.  Measured against a merge in the server (state_at, one hx_merge
    of the snapshot and every op on the way), this costs a fifth of it: the
    bytes sent are about the same (deltas are mostly what the state holds
    anyway), the server prints each part once, and the replay indexes each
    list once instead of per op."""
    if not parts:
        return {}
    # one call of the parser, not one per part
    loaded = json.loads("[" + ",".join(parts) + "]")
    state: dict[str, Any] = loaded[0]
    return D.replay(state, loaded[1:])


def chain_function(s: str) -> str:
    """chain(), in schema ``s``: a checkpoint's state is its nearest
    snapshot (base_id) and the deltas on the way to it, merged by one
    hx_merge.  The way is found in one index range scan from the snapshot
    to the checkpoint, newest first, keeping the rows each next parent
    names (rows of other branches are skipped); should a parent's id not
    be older than its child's, one primary-key lookup per checkpoint
    finishes the walk."""
    return f"""CREATE FUNCTION {s}.chain(p_thread_id text, p_checkpoint_ns text, p_checkpoint_id text)
RETURNS jsonb[] LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    want text := p_checkpoint_id;
    base text;
    r record;
    parent text;
    d jsonb;
    snap jsonb;
    deltas jsonb[] := '{{}}';
BEGIN
    SELECT c.base_id INTO base FROM {s}.checkpoints c
     WHERE c.thread_id = p_thread_id AND c.checkpoint_ns = p_checkpoint_ns AND c.checkpoint_id = p_checkpoint_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    FOR r IN SELECT c.checkpoint_id, c.parent_checkpoint_id, c.delta::jsonb AS delta, c.snapshot IS NOT NULL AS is_snapshot
               FROM {s}.checkpoints c
              WHERE c.thread_id = p_thread_id AND c.checkpoint_ns = p_checkpoint_ns
                AND c.checkpoint_id >= base AND c.checkpoint_id <= p_checkpoint_id
              ORDER BY c.checkpoint_id DESC
    LOOP
        CONTINUE WHEN r.checkpoint_id <> want;
        EXIT WHEN r.is_snapshot;
        deltas := deltas || r.delta;
        want := r.parent_checkpoint_id;
        IF want IS NULL THEN
            snap := '{{}}';
            EXIT;
        END IF;
    END LOOP;
    WHILE snap IS NULL LOOP
        SELECT c.parent_checkpoint_id, c.delta, c.snapshot INTO parent, d, snap
          FROM {s}.checkpoints c
         WHERE c.thread_id = p_thread_id AND c.checkpoint_ns = p_checkpoint_ns AND c.checkpoint_id = want;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'checkpoint "%" of thread "%" is missing', want, p_thread_id
                USING ERRCODE = 'data_corrupted',
                      DETAIL = format('Checkpoint "%s" is rebuilt from it.', p_checkpoint_id);
        END IF;
        EXIT WHEN snap IS NOT NULL;
        deltas := deltas || d;
        IF parent IS NULL THEN
            snap := '{{}}';
            EXIT;
        END IF;
        want := parent;
    END LOOP;
    RETURN snap || deltas;
END
$$"""

def internal(channel: str) -> bool:
    """LangGraph's own channels (``__start__``, ``branch:to:...``), which a
    thread's followers do not see."""
    return channel.startswith("__") or channel.startswith("branch:")


def stream_functions(s: str, hx: str, schema: str, send: bool) -> list[str]:
    """What setup() creates afresh each time: how checkpoints reach the
    thread's log stream (hx_stream_send, when this hxstate has it), and the
    source function followers read a thread's head from."""
    prefix = "@" + schema + ":"
    publish = (
        f"SELECT {hx}.hx_stream_send(p_stream, p_event)" if send else "SELECT NULL::bigint"
    )
    return [
        f"""CREATE OR REPLACE FUNCTION {s}.stream_name(p_thread_id text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp
AS $$ SELECT {quote_literal(prefix)} || p_thread_id $$""",
        f"COMMENT ON FUNCTION {s}.stream_name(text) IS 'the log stream that follows a LangGraph thread kept by HxSaver'",
        f"""CREATE OR REPLACE FUNCTION {s}.publish(p_stream text, p_event jsonb) RETURNS bigint
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$ {publish} $$""",
        f"COMMENT ON FUNCTION {s}.publish(text, jsonb) IS 'append an event to a thread''s log stream (NULL: this hxstate has no hx_stream_send)'",
        f"""CREATE OR REPLACE FUNCTION {s}.threads(keys text[])
RETURNS TABLE (key text, stream text, seq bigint, state jsonb)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
SELECT k.key, {s}.stream_name(k.key),
       coalesce((SELECT max(e.seq) FROM {hx}.hx_event e WHERE e.stream = {s}.stream_name(k.key)), 0),
       CASE WHEN c.checkpoint_id IS NOT NULL THEN
           coalesce((SELECT jsonb_object_agg(v.key, v.value)
                       FROM jsonb_each({s}.state_at(k.key, '', c.checkpoint_id)) v
                      WHERE v.key NOT LIKE '\_\_%' AND v.key NOT LIKE 'branch:%'), '{{}}')
           || coalesce((SELECT jsonb_build_object('__interrupt__', jsonb_agg(
                                  jsonb_build_object('id', i -> 'id', 'value', i -> 'value')
                                  ORDER BY w.task_path, w.task_id, w.idx, n))
                          FROM {s}.writes w,
                               jsonb_array_elements(CASE WHEN w.value ->> '$hx' = 'tuple' THEN w.value -> 'items'
                                                         ELSE jsonb_build_array(w.value) END) WITH ORDINALITY AS x(i, n)
                         WHERE w.thread_id = k.key AND w.checkpoint_ns = '' AND w.checkpoint_id = c.checkpoint_id
                           AND w.channel = '__interrupt__'
                        HAVING count(*) > 0), '{{}}')
       END
  FROM unnest(keys) AS k(key)
  LEFT JOIN LATERAL (SELECT x.checkpoint_id FROM {s}.checkpoints x
                      WHERE x.thread_id = k.key AND x.checkpoint_ns = ''
                      ORDER BY x.checkpoint_id DESC LIMIT 1) c ON true
$$""",
        f"COMMENT ON FUNCTION {s}.threads(text[]) IS "
        "'LangGraph threads kept by HxSaver as a source: each key''s log stream, its last seq and the state at it'",
    ]


def quote_literal(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


def public_state(state: Mapping[str, Any], interrupts: list[Any] | None = None) -> dict[str, Any]:
    """The state a thread's followers see: the graph's own channels, and
    the head's pending interrupts at ``__interrupt__`` as ``[{id, value}]``."""
    out = {k: v for k, v in state.items() if not internal(k)}
    if interrupts:
        out[INTERRUPT] = interrupts
    return out


def interrupt_items(encoded: Any) -> list[Any]:
    """A stored __interrupt__ write as ``[{id, value}]``."""
    items = encoded.get("items", []) if type(encoded) is dict and encoded.get("$hx") == "tuple" else [encoded]
    return [public_json(i) for i in items if type(i) is dict]


@dataclass
class Head:
    """What the saver remembers of the last checkpoint it read or wrote on a
    thread's namespace, so that the next put finds the parent's state
    without rebuilding it."""

    checkpoint_id: str
    versions: dict[str, Any]
    state: dict[str, Any]  # channel -> encoded value
    # channel -> the Python objects of a list value, with their field values,
    # aligned with the encoded list: an item that is the same object with the
    # same fields is not encoded again
    objects: dict[str, list[tuple[Any, Any]]] = field(default_factory=dict)
    chain_bytes: int = 0
    chain_len: int = 0
    snapshot_bytes: int = 0


def _fields(obj: Any) -> Any:
    d = getattr(obj, "__dict__", None)
    if d is None or not hasattr(obj, "model_dump"):
        return None
    return tuple(d.values())


def _same(obj: Any, fields: Any) -> bool:
    if fields is None:
        return False
    values = obj.__dict__.values()
    return len(values) == len(fields) and all(a is b for a, b in zip(values, fields))


# how hx_compress compresses what the saver writes: deltas lz4 (a cold read
# decompresses hundreds of them; pglz would store them 2% smaller and take
# several times as long to decompress them), snapshots pglz (one per
# rebuild; on hundreds of kB of messages it finds the repeats lz4 misses:
# measured 43% smaller with a 30-word vocabulary, 11% with 2,000 words),
# the metadata as the deltas.  (lz4: pglz where the server has no lz4.)
DELTA_COMPRESSION = "lz4"
SNAPSHOT_COMPRESSION = "pglz"
METADATA_COMPRESSION = "lz4"


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


class BaseHxSaver(BaseCheckpointSaver[Any]):
    """What the sync and the async saver share."""

    schema: str
    snapshot_min_bytes: int
    max_chain: int
    cache_threads: int

    def _init_base(
        self,
        *,
        schema: str,
        serde: SerializerProtocol | None,
        snapshot_min_bytes: int,
        max_chain: int,
        cache_threads: int,
    ) -> None:
        # strict: a stored value rebuilds only types of an allow-list (serde.py)
        BaseCheckpointSaver.__init__(self, serde=serde if serde is not None else StrictSerializer())
        self.schema = schema
        self.s = quote_ident(schema)
        self.codec = Codec(self.serde)
        self.snapshot_min_bytes = snapshot_min_bytes
        self.max_chain = max_chain
        self.cache_threads = cache_threads
        self._heads: OrderedDict[tuple[str, str], Head] = OrderedDict()
        # the savers over a pool run calls in many threads at once
        self._heads_lock = threading.Lock()
        # what the saver asks of the server before it writes (None: not
        # asked yet, or setup() ran since)
        self._server: Server | None = None
        self._sql()

    def _own_interrupts_sql(self) -> str:
        """The interrupts already written at the checkpoint being put: with
        LangGraph's default durability a task's writes can come before its
        checkpoint."""
        return f"""(SELECT jsonb_agg(w.value ORDER BY w.task_path, w.task_id, w.idx) FROM {self.s}.writes w
      WHERE w.thread_id = %(thread_id)s AND w.checkpoint_ns = %(ns)s AND w.checkpoint_id = %(id)s
        AND w.channel = '__interrupt__')"""

    @staticmethod
    def _checkpoint_sql(c: str) -> str:
        """Checkpoint ``c``'s LangGraph bookkeeping, its packed bytes in
        base64, which checkpoint_of() reads."""
        return f"pg_catalog.encode({c}.packed, 'base64')"

    def _columns(self, c: str) -> list[str]:
        """What _tuple() reads of checkpoint ``c``: its row, and its pending
        writes."""
        return [
            *(f"{c}.{col}" for col in ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id")),
            self._checkpoint_sql(c),
            *(f"{c}.{col}" for col in ("metadata", "chain_bytes", "chain_len", "snapshot_bytes")),
            f"""(SELECT jsonb_agg(jsonb_build_array(w.task_id, w.channel, w.value, w.task_path, w.idx,
                                        encode(w.packed, 'base64'))
                      ORDER BY w.task_path, w.task_id, w.idx)
       FROM {self.s}.writes w
      WHERE w.thread_id = {c}.thread_id AND w.checkpoint_ns = {c}.checkpoint_ns
        AND w.checkpoint_id = {c}.checkpoint_id)""",
        ]

    def _sql(self) -> None:
        s = self.s
        self.SELECT_COLUMNS = ", ".join(self._columns("c"))
        # a checkpoint and what its state is rebuilt from, in one statement
        # and one index range scan, in the index's order: the rows from its
        # snapshot (base_id) to it, each with its part as JSON text (the
        # snapshot's, the deltas'), the checkpoint itself last, with its
        # own columns (and its base) as one jsonb, which the other rows
        # carry as one NULL.  Parts go as text: the server prints each once
        # and builds no merged state (see rebuild()).  When the saver has
        # the checkpoint's state (%(cached)s), only its row.
        head = (
            f"CASE WHEN k.checkpoint_id = (SELECT h.checkpoint_id FROM h) "
            f"THEN jsonb_build_array({', '.join(self._columns('k'))}, (SELECT h.base_id FROM h)) END"
        )
        get = f"""WITH h AS (
    SELECT c.checkpoint_id, c.base_id,
           CASE WHEN c.checkpoint_id = %(cached)s OR c.base_id > c.checkpoint_id THEN c.checkpoint_id
                ELSE c.base_id END AS first
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
        self.GET_SQL = get.format(" AND c.checkpoint_id = %(id)s")
        self.GET_LATEST_SQL = get.format(" ORDER BY c.checkpoint_id DESC LIMIT 1")
        # the rows of a range, each with its snapshot when it has one (a
        # chain ends at its first snapshot), its delta otherwise
        self.CHAIN_SQL = f"""SELECT k.checkpoint_id, k.parent_checkpoint_id,
       CASE WHEN k.snapshot IS NOT NULL THEN k.snapshot::text ELSE k.delta::text END
  FROM {s}.checkpoints k
 WHERE k.thread_id = %(thread_id)s AND k.checkpoint_ns = %(ns)s
   AND k.checkpoint_id >= least(%(first)s, %(last)s) AND k.checkpoint_id <= %(last)s
 ORDER BY k.checkpoint_id"""
        # what chain() walks to, when the rows of the range are not enough
        # (a parent not older than its child)
        self.CHAIN_FALLBACK_SQL = f"""SELECT x::text FROM unnest({s}.chain(%(thread_id)s, %(ns)s, %(id)s)) WITH ORDINALITY AS u(x, i)
 ORDER BY u.i = 1 DESC, u.i DESC"""
        self.PARENT_SQL = f"""SELECT {self._checkpoint_sql("p")}, p.chain_bytes, p.chain_len, p.snapshot_bytes, p.base_id,
    (SELECT c.checkpoint_id FROM {s}.checkpoints c
      WHERE c.thread_id = p.thread_id AND c.checkpoint_ns = p.checkpoint_ns
        AND c.checkpoint_id > p.checkpoint_id AND c.checkpoint_id <> %(id)s
      ORDER BY c.checkpoint_id DESC LIMIT 1),
    EXISTS (SELECT FROM {s}.writes w
             WHERE w.thread_id = p.thread_id AND w.checkpoint_ns = p.checkpoint_ns
               AND w.checkpoint_id = p.checkpoint_id AND w.channel = '__interrupt__'),
    EXISTS (SELECT FROM {s}.checkpoints c
             WHERE c.thread_id = p.thread_id AND c.checkpoint_ns = p.checkpoint_ns AND c.checkpoint_id = %(id)s),
    {self._own_interrupts_sql()}
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
 WHERE thread_id = %(thread_id)s AND checkpoint_ns = %(ns)s AND checkpoint_id = %(id)s), {self._own_interrupts_sql()}"""
        cols = "(thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, value, packed)"
        vals = (
            "SELECT %s, %s, %s, %s, %s, t.idx, t.channel, t.value::jsonb, t.packed "
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
        self.INTERRUPTS_SQL = f"""SELECT (SELECT max(c.checkpoint_id) FROM {s}.checkpoints c
          WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = '') = %(id)s,
       (SELECT jsonb_agg(w.value ORDER BY w.task_path, w.task_id, w.idx) FROM {s}.writes w
         WHERE w.thread_id = %(thread_id)s AND w.checkpoint_ns = '' AND w.checkpoint_id = %(id)s
           AND w.channel = '__interrupt__')"""
        self.STORED_WRITES_SQL = f"""SELECT idx, channel, value, packed FROM {s}.writes
 WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s AND idx = ANY(%s::int[])"""

    def _server_steps(self) -> Generator[Query, list[tuple[Any, ...]], Server]:
        """What the saver asks of the server, once, and the SQL of its writes
        that follows from it."""
        server = self._server
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
            self._server = server
        return server

    def _write_sql(self, server: Server) -> None:
        s = self.s
        self.INSERT_SQL = f"""INSERT INTO {s}.checkpoints
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, packed, metadata,
     delta, snapshot, chain_bytes, chain_len, snapshot_bytes, base_id, seq)
VALUES (%(thread_id)s, %(ns)s, %(id)s, %(parent)s, %(packed)s,
        {server.compressed("%(metadata)s::jsonb", METADATA_COMPRESSION)},
        {server.compressed("%(delta)s::json", DELTA_COMPRESSION)},
        {server.compressed("%(snapshot)s::jsonb", SNAPSHOT_COMPRESSION)},
        %(chain_bytes)s, %(chain_len)s, %(snapshot_bytes)s, %(base_id)s, %(seq)s)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING"""
        # a thread's stream told what its head is now, after a change that
        # is not a step; or, when the thread has no checkpoint left, that
        # it ended, as a deleted row's stream ends (once: not again after
        # an end)
        self.REPUBLISH_SQL = f"""SELECT {s}.publish(t.stream,
           CASE WHEN t.state IS NOT NULL
                THEN pg_catalog.jsonb_build_object('type', 'STATE_SNAPSHOT', 'snapshot', t.state)
                ELSE '{dumps(STREAM_END)}'::jsonb END)
  FROM {s}.threads(%s::text[]) t
 WHERE t.state IS NOT NULL
    OR (t.seq > 0 AND NOT EXISTS (SELECT FROM {server.hx}.hx_event e
                                   WHERE e.stream = t.stream AND e.seq = t.seq AND e.event ->> 'type' = 'CUSTOM'
                                     AND e.event ->> 'name' = 'hx.stream_end'))"""

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> BaseHxSaver:
        """A saver whose serializer also rebuilds ``extra_allowlist``'s
        types, sharing this one's connection and memory (LangGraph calls
        it with the types of a graph's state schema when it compiles a
        graph under ``LANGGRAPH_STRICT_MSGPACK=true``)."""
        widen = getattr(self.serde, "with_msgpack_allowlist", None)
        if widen is None:
            return cast(BaseHxSaver, super().with_allowlist(extra_allowlist))
        serde = widen(extra_allowlist)
        if serde is self.serde:
            return self
        clone = copy.copy(self)
        clone.serde = serde
        clone.codec = Codec(serde)
        return clone

    # -- versions ---------------------------------------------------------

    def get_next_version(self, current: Any, channel: None) -> Any:
        """Integers, as BaseCheckpointSaver's own: a version only has to grow
        along a thread's chain of checkpoints (HxSaver stores values by
        checkpoint, not by channel version, so versions of two forks may
        meet), and a checkpoint holds a dozen of them.  A thread written with
        string versions (PostgresSaver's ``<counter>.<random>``) keeps their
        form, since LangGraph compares a checkpoint's versions together."""
        if current is None:
            return 1
        if isinstance(current, str):
            head = current.split(".")[0]
            return f"{int(head) + 1:0{len(head)}}.{random.random():016}"
        return int(current) + 1

    # -- the cache of heads -------------------------------------------------

    def _remember(self, thread_id: str, ns: str, head: Head) -> None:
        key = (thread_id, ns)
        with self._heads_lock:
            self._heads[key] = head
            self._heads.move_to_end(key)
            while len(self._heads) > self.cache_threads:
                self._heads.popitem(last=False)

    def _forget(self, thread_ids: Sequence[str] | None = None) -> None:
        with self._heads_lock:
            if thread_ids is None:
                self._heads.clear()
                return
            drop = set(thread_ids)
            for key in [k for k in self._heads if k[0] in drop]:
                del self._heads[key]

    # -- put ----------------------------------------------------------------

    def _put_steps(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Steps:
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        ns = str(conf.get("checkpoint_ns", "") or "")
        parent = conf.get("checkpoint_id")
        cid = checkpoint["id"]
        next_config: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}
        }
        md = get_serializable_checkpoint_metadata(config, metadata)
        check_key("thread id", thread_id)
        check_key("checkpoint namespace", ns)
        check_id("checkpoint id", cid)
        if parent:
            check_id("checkpoint id", str(parent))
        if isinstance(md.get("run_id"), str):
            check_id("run id", md["run_id"])
        values = checkpoint["channel_values"]
        versions = dict(checkpoint["channel_versions"])

        cached = self._heads.get((thread_id, ns))
        base: Head | None = None
        base_id: str = cid
        newest = interrupted = exists = False
        own_interrupts: list[Any] | None = None
        server = yield from self._server_steps()
        publishing = server.publishing and ns == ""
        if parent:
            use_cache = cached is not None and cached.checkpoint_id == parent
            yield Query(self.LOCK_SQL, {"lock": f"hxstate.langgraph:{self.schema}", "thread_id": thread_id, "ns": ns})
            rows = yield Query(
                self.PARENT_SQL,
                {"thread_id": thread_id, "ns": ns, "parent": parent, "id": cid},
                True,
            )
            if rows:
                (pcheckpoint, chain_bytes, chain_len, snapshot_bytes, base_id, child,
                 interrupted, exists, own_interrupts) = rows[0]
                newest = child is None
                if child is not None and md.get("source") in RUN_SOURCES:
                    if not exists:
                        raise ThreadConflict(
                            f"thread {thread_id!r} moved on from checkpoint {parent}: checkpoint {child}, "
                            "newer, was written by another writer",
                            hint="Another writer moved the thread on: run again from the thread's head.",
                        )
                if use_cache:
                    assert cached is not None
                    base = cached
                else:
                    chain = yield Query(
                        self.CHAIN_SQL,
                        {"thread_id": thread_id, "ns": ns, "first": base_id, "last": parent},
                        True,
                    )
                    parent_state = yield from self._rebuild_steps(thread_id, ns, parent, base_id, chain)
                    pversions = checkpoint_of(pcheckpoint).get("channel_versions")
                    base = Head(parent, dict(pversions or {}), parent_state)
                base.chain_bytes, base.chain_len, base.snapshot_bytes = chain_bytes, chain_len, snapshot_bytes

        # the new state: the parent's, with the channels that changed
        state: dict[str, Any] = {}
        objects: dict[str, list[tuple[Any, Any]]] = {}
        ops: D.Ops = []
        old_state = base.state if base is not None else {}
        old_versions = base.versions if base is not None else {}
        # the graph's channels first, LangGraph's own ("__start__", whose
        # messages a step copies instead of storing them again) after them
        later: D.Ops = []
        sources: D.Sources | None = None
        for ch, value in values.items():
            had = ch in old_state
            if (
                base is not None
                and had
                and ch not in new_versions
                and ch in versions
                and old_versions.get(ch) == versions[ch]
            ):
                state[ch] = old_state[ch]
                if ch in base.objects:
                    objects[ch] = base.objects[ch]
                continue
            enc, objs = self._encode_channel(value, old_state.get(ch), base.objects.get(ch) if base else None)
            state[ch] = enc
            if objs is not None:
                objects[ch] = objs
            if ch.startswith("__"):
                later.extend(D.value_ops(ch, old_state.get(ch), enc, had=had))
            else:
                if sources is None:
                    sources = D.sources_of(old_state, ch)
                ops.extend(D.value_ops(ch, old_state.get(ch), enc, had=had, sources=sources))
        ops.extend(later)
        for ch in old_state:
            if ch not in values:
                ops.append({"op": "delete", "path": D.pointer(ch)})

        delta_text = dumps(ops)
        snapshot_text: str | None = None
        if base is None:
            snapshot_text = dumps(state)
            chain_bytes, chain_len, snapshot_bytes = 0, 0, len(snapshot_text)
        else:
            chain_bytes = base.chain_bytes + len(delta_text)
            chain_len = base.chain_len + 1
            snapshot_bytes = base.snapshot_bytes
            if chain_bytes > max(snapshot_bytes, self.snapshot_min_bytes) or chain_len >= self.max_chain:
                snapshot_text = dumps(state)
                chain_bytes, chain_len, snapshot_bytes = 0, 0, len(snapshot_text)

        # the id is the row's own column
        copy = {k: v for k, v in checkpoint.items() if k not in ("channel_values", "id")}
        seq = None
        if publishing and not parent:
            # roots take the thread's turn too, for the interrupts' sake
            yield Query(self.LOCK_SQL, {"lock": f"hxstate.langgraph:{self.schema}", "thread_id": thread_id, "ns": ns})
            rows = yield Query(self.EXISTS_SQL, {"thread_id": thread_id, "ns": ns, "id": cid}, True)
            exists, own_interrupts = rows[0]
        if publishing and not exists:
            event: dict[str, Any] | None
            items = [i for v in own_interrupts or [] for i in interrupt_items(v)]
            if base is not None and newest:
                patch: list[dict[str, Any]] = [{"op": "remove", "path": "/" + INTERRUPT}] if interrupted else []
                patch += D.to_patch([op for op in ops if not internal(D.channel_of(op))], base.state)
                if items:
                    patch.append({"op": "add", "path": "/" + INTERRUPT, "value": items})
                event = {"type": "STATE_DELTA", "delta": patch} if patch else None
            else:
                event = {"type": "STATE_SNAPSHOT", "snapshot": public_state(state, items)}
            if event is not None:
                rows = yield Query(self.PUBLISH_SQL, (thread_id, dumps(event)), True)
                seq = rows[0][0]
        packed = pack(dumps(copy), always=True)
        metadata_text = dumps(self.codec.encode(md))
        yield Query(
            self.INSERT_SQL,
            {
                "thread_id": thread_id,
                "ns": ns,
                "id": cid,
                "parent": parent,
                "packed": packed,
                "metadata": metadata_text,
                "delta": delta_text if base is not None else None,
                "snapshot": snapshot_text,
                "chain_bytes": chain_bytes,
                "chain_len": chain_len,
                "snapshot_bytes": snapshot_bytes,
                "base_id": cid if snapshot_text is not None else base_id,
                "seq": seq,
            },
        )
        self._remember(
            thread_id,
            ns,
            Head(cid, versions, state, objects, chain_bytes, chain_len, snapshot_bytes),
        )
        return next_config

    def _encode_channel(
        self, value: Any, old: Any, old_objects: list[tuple[Any, Any]] | None
    ) -> tuple[Any, list[tuple[Any, Any]] | None]:
        if type(value) is not list:
            return self.codec.encode(value), None
        enc: list[Any] = []
        objs: list[tuple[Any, Any]] = []
        n = len(old_objects) if old_objects is not None and type(old) is list else 0
        for i, x in enumerate(value):
            if i < n:
                assert old_objects is not None
                o, f = old_objects[i]
                if x is o and _same(x, f):
                    enc.append(old[i])
                    objs.append((o, f))
                    continue
            enc.append(self.codec.encode(x))
            objs.append((x, _fields(x)))
        return enc, objs

    # -- put_writes ---------------------------------------------------------

    def _put_writes_steps(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Steps:
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        ns = str(conf.get("checkpoint_ns", "") or "")
        cid = str(conf["checkpoint_id"])
        check_key("thread id", thread_id)
        check_key("checkpoint namespace", ns)
        check_id("checkpoint id", cid)
        check_id("task id", task_id)
        check_key("task path", task_path)
        regular: tuple[list[int], list[str], list[str | None], list[bytes | None]] = ([], [], [], [])
        special: tuple[list[int], list[str], list[str | None], list[bytes | None]] = ([], [], [], [])
        mine: dict[int, tuple[str, Any]] = {}
        for i, (ch, value) in enumerate(writes):
            target = special if ch in WRITES_IDX_MAP else regular
            idx = WRITES_IDX_MAP.get(ch, i)
            enc = self.codec.encode(value)
            text = dumps(enc)
            packed = pack(text) if target is regular else None
            target[0].append(idx)
            target[1].append(ch)
            target[2].append(None if packed is not None else text)
            target[3].append(packed)
            mine[idx] = (ch, enc)
        key = (thread_id, ns, cid, task_id, task_path)
        if special[0]:
            yield Query(self.UPSERT_WRITES_SQL, (*key, *special))
            if INTERRUPT in special[1] and ns == "" and (yield from self._server_steps()).publishing:
                # after the put of this checkpoint, or before it: then the
                # put publishes the interrupts with the checkpoint
                yield Query(self.LOCK_SQL, {"lock": f"hxstate.langgraph:{self.schema}", "thread_id": thread_id, "ns": ns})
                rows = yield Query(self.INTERRUPTS_SQL, {"thread_id": thread_id, "id": cid}, True)
                if rows and rows[0][0]:
                    items = [i for v in rows[0][1] or [] for i in interrupt_items(v)]
                    event = {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/" + INTERRUPT, "value": items}]}
                    yield Query(self.PUBLISH_SQL, (thread_id, dumps(event)))
        if regular[0]:
            yield Query(self.INSERT_WRITES_SQL, (*key, *regular))
            stored = yield Query(self.STORED_WRITES_SQL, (thread_id, ns, cid, task_id, regular[0]), True)
            bad = [
                idx
                for idx, ch, value, packed in stored
                if (ch, value if packed is None else json.loads(unpack(packed))) != mine[idx]
            ]
            if bad:
                raise NonDeterministicRetry(
                    f"task {task_id} of checkpoint {cid} wrote other values for the same writes before",
                    detail=f"The writes at index {', '.join(str(i) for i in sorted(bad))} differ from the ones stored.",
                    hint="A task's writes are stored once: a retry must write the same values.",
                )
        return None

    # -- reading ------------------------------------------------------------

    def _get_steps(self, config: RunnableConfig) -> Steps:
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        ns = str(conf.get("checkpoint_ns", "") or "")
        cid = get_checkpoint_id(config)
        cached = self._heads.get((thread_id, ns))
        known = cached.checkpoint_id if cached is not None else None
        rows = yield Query(
            self.GET_SQL if cid else self.GET_LATEST_SQL,
            {"thread_id": thread_id, "ns": ns, "id": cid, "cached": known},
            True,
        )
        if not rows:
            return None
        row = rows[-1][3]
        if cached is not None and row[2] == known:
            state = cached.state
        else:
            state = yield from self._rebuild_steps(thread_id, ns, row[2], row[10], rows)
        return self._tuple(row, state, remember=True)

    def _rebuild_steps(
        self, thread_id: str, ns: str, cid: str, base_id: str, rows: Sequence[tuple[Any, ...]]
    ) -> Generator[Query, list[tuple[Any, ...]], dict[str, Any]]:
        """A checkpoint's state from the rows of its range (id, parent,
        part), or from chain() when they do not hold its whole chain."""
        parts = walk(rows, cid, base_id)
        if parts is None:
            found = yield Query(self.CHAIN_FALLBACK_SQL, {"thread_id": thread_id, "ns": ns, "id": cid}, True)
            parts = [r[0] for r in found]
        return rebuild(parts)

    def _list_steps(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Steps:
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
            params["filter"] = dumps(self.codec.encode(filter))
        if before is not None:
            wheres.append("c.checkpoint_id < %(before)s")
            params["before"] = get_checkpoint_id(before)
        # the checkpoints, then the rows their states are rebuilt from: in
        # one snapshot of the database, so that a prune meanwhile does not
        # take rows from under them
        yield Query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        sql = f"SELECT c.base_id, {self.SELECT_COLUMNS} FROM {self.s}.checkpoints c"
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
                    self.CHAIN_SQL, {"thread_id": key[0], "ns": key[1], "first": first, "last": last}, True
                )
            state = yield from self._rebuild_steps(key[0], key[1], row[2], base_id, chains[key])
            out.append(self._tuple(row, state, remember=False))
        return out

    def _tuple(self, row: tuple[Any, ...], state: dict[str, Any], *, remember: bool) -> CheckpointTuple:
        (thread_id, ns, cid, parent, stored, metadata, chain_bytes, chain_len, snapshot_bytes, writes) = row[:10]
        checkpoint = checkpoint_of(stored)
        values: dict[str, Any] = {}
        objects: dict[str, list[tuple[Any, Any]]] = {}
        for ch, enc in state.items():
            v = self.codec.decode(enc)
            values[ch] = v
            if type(v) is list:
                objects[ch] = [(x, _fields(x)) for x in v]
        if remember:
            self._remember(
                thread_id,
                ns,
                Head(cid, dict(checkpoint.get("channel_versions") or {}), dict(state), objects,
                     chain_bytes, chain_len, snapshot_bytes),
            )
        pending = [
            (w[0], w[1], self.codec.decode(w[2] if w[5] is None else json.loads(unpack(base64.b64decode(w[5])))))
            for w in writes or []
        ]
        return CheckpointTuple(
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}},
            cast(Checkpoint, {**checkpoint, "id": cid, "channel_values": values}),
            cast(CheckpointMetadata, self.codec.decode(metadata)),
            (
                {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": parent}}
                if parent
                else None
            ),
            pending,
        )

    # -- deleting, copying, pruning ------------------------------------------

    def _republish(self, threads: list[str]) -> Steps:
        """Tell the threads' streams their head now, after a change that is
        not a step (a snapshot), or that a thread is gone (hx.stream_end)."""
        if (yield from self._server_steps()).publishing:
            yield Query(self.REPUBLISH_SQL, (threads,))
        return None

    def _delete_thread_steps(self, thread_id: str) -> Steps:
        yield Query(f"DELETE FROM {self.s}.writes WHERE thread_id = %s", (str(thread_id),))
        yield Query(f"DELETE FROM {self.s}.checkpoints WHERE thread_id = %s", (str(thread_id),))
        yield from self._republish([str(thread_id)])
        self._forget([str(thread_id)])
        return None

    def _materialize_sql(self, server: Server, where: str) -> str:
        """Make the checkpoints ``where`` selects snapshots of their own state
        and roots, before what they were rebuilt from is deleted."""
        s = self.s
        return f"""UPDATE {s}.checkpoints c
   SET snapshot = {server.compressed("m.state", SNAPSHOT_COMPRESSION)}, parent_checkpoint_id = NULL, chain_bytes = 0, chain_len = 0, base_id = c.checkpoint_id,
       snapshot_bytes = octet_length(m.state::text)
  FROM (SELECT k.thread_id, k.checkpoint_ns, k.checkpoint_id,
               {s}.state_at(k.thread_id, k.checkpoint_ns, k.checkpoint_id) AS state
          FROM {s}.checkpoints k WHERE {where}) m
 WHERE c.thread_id = m.thread_id AND c.checkpoint_ns = m.checkpoint_ns AND c.checkpoint_id = m.checkpoint_id"""

    def _delete_for_runs_steps(self, run_ids: Sequence[str]) -> Steps:
        runs = [str(r) for r in run_ids]
        if not runs:
            return None
        s = self.s
        rows = yield Query(
            f"SELECT DISTINCT thread_id FROM {s}.checkpoints WHERE metadata ->> 'run_id' = ANY(%(runs)s)",
            {"runs": runs},
            True,
        )
        if not rows:
            return None
        threads = [r[0] for r in rows]
        server = yield from self._server_steps()
        # the checkpoints that stay but were rebuilt through one that goes
        yield Query(
            self._materialize_sql(
                server,
                f"""k.thread_id = ANY(%(threads)s) AND (k.metadata ->> 'run_id' IS NULL OR NOT k.metadata ->> 'run_id' = ANY(%(runs)s))
   AND EXISTS (SELECT FROM {s}.checkpoints p
                WHERE p.thread_id = k.thread_id AND p.checkpoint_ns = k.checkpoint_ns
                  AND p.checkpoint_id = k.parent_checkpoint_id AND p.metadata ->> 'run_id' = ANY(%(runs)s))"""
            ),
            {"threads": threads, "runs": runs},
        )
        yield Query(
            f"""DELETE FROM {s}.writes w USING {s}.checkpoints c
 WHERE c.thread_id = ANY(%(threads)s) AND c.metadata ->> 'run_id' = ANY(%(runs)s)
   AND w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id""",
            {"threads": threads, "runs": runs},
        )
        yield Query(
            f"DELETE FROM {s}.checkpoints WHERE thread_id = ANY(%(threads)s) AND metadata ->> 'run_id' = ANY(%(runs)s)",
            {"threads": threads, "runs": runs},
        )
        yield from self._republish(threads)
        self._forget(threads)
        return None

    def _copy_thread_steps(self, source_thread_id: str, target_thread_id: str) -> Steps:
        s = self.s
        src, dst = str(source_thread_id), check_key("thread id", str(target_thread_id))
        server = yield from self._server_steps()
        # the values as they are stored (compressed), but metadata that names
        # the thread
        moved = server.compressed("jsonb_set(metadata, '{thread_id}', to_jsonb(%(dst)s::text))", METADATA_COMPRESSION)
        yield Query(
            f"""INSERT INTO {s}.checkpoints
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, packed, metadata,
     delta, snapshot, chain_bytes, chain_len, snapshot_bytes, base_id)
SELECT %(dst)s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, packed,
       CASE WHEN metadata ? 'thread_id' THEN {moved} ELSE metadata END,
       delta, snapshot, chain_bytes, chain_len, snapshot_bytes, base_id
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
        yield from self._republish([dst])
        self._forget([dst])
        return None

    def _prune_steps(self, thread_ids: Sequence[str], strategy: str) -> Steps:
        if isinstance(thread_ids, str):
            raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"Unknown prune strategy: {strategy!r}")
        threads = [str(t) for t in thread_ids]
        if not threads:
            return None
        s = self.s
        server = yield from self._server_steps()
        if strategy == "keep_latest":
            # the latest checkpoint of each namespace stays, as its own snapshot
            yield Query(
                f"""CREATE TEMPORARY TABLE hx_prune_keep ON COMMIT DROP AS
SELECT DISTINCT ON (thread_id, checkpoint_ns) thread_id, checkpoint_ns, checkpoint_id
  FROM {s}.checkpoints WHERE thread_id = ANY(%(threads)s)
 ORDER BY thread_id, checkpoint_ns, checkpoint_id DESC""",
                {"threads": threads},
            )
            yield Query(
                self._materialize_sql(
                    server,
                    "(k.thread_id, k.checkpoint_ns, k.checkpoint_id) IN (SELECT * FROM hx_prune_keep) "
                    "AND (k.snapshot IS NULL OR k.parent_checkpoint_id IS NOT NULL)"
                )
            )
            keep = "(thread_id, checkpoint_ns, checkpoint_id) NOT IN (SELECT * FROM hx_prune_keep)"
            yield Query(f"DELETE FROM {s}.writes WHERE thread_id = ANY(%(threads)s) AND {keep}", {"threads": threads})
            yield Query(f"DELETE FROM {s}.checkpoints WHERE thread_id = ANY(%(threads)s) AND {keep}", {"threads": threads})
        else:
            yield Query(f"DELETE FROM {s}.writes WHERE thread_id = ANY(%(threads)s)", {"threads": threads})
            yield Query(f"DELETE FROM {s}.checkpoints WHERE thread_id = ANY(%(threads)s)", {"threads": threads})
            yield from self._republish(threads)
        self._forget(threads)
        return None

    # -- DeltaChannel ----------------------------------------------------------

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """A DeltaChannel's writes and seed along the parent chain.  HxSaver
        keeps every channel as deltas already, so plain reducers are the way
        to use it; a DeltaChannel works, through this walk of get_tuple."""
        return BaseCheckpointSaver.get_delta_channel_history(self, config=config, channels=channels)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await BaseCheckpointSaver.aget_delta_channel_history(self, config=config, channels=channels)

    # -- setup ---------------------------------------------------------------

    def _setup_steps(self, trusted_owners: Sequence[str] = (), allowed_triggers: Sequence[str] = ()) -> Steps:
        rows = yield Query(
            "SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'hxstate'",
            (),
            True,
        )
        if not rows:
            raise NotSetUp(
                "extension \"hxstate\" is not installed in this database",
                hint="CREATE EXTENSION hxstate, as a role that may.",
            )
        hx = quote_ident(rows[0][0])
        yield Query(f"CREATE SCHEMA IF NOT EXISTS {self.s}")
        # one setup at a time
        yield Query("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(%s))", (f"hxstate.langgraph:{self.schema}",))
        # nothing in the schema runs or is read before it is known to be the
        # saver's own: another role that made the schema first (CREATE on
        # the database is enough) would own what setup() writes into, and
        # its triggers would run as the saver's role
        foreign = yield Query(
            FOREIGN_SQL,
            {"schema": self.schema, "trusted": list(trusted_owners), "triggers": list(allowed_triggers)},
            True,
        )
        if foreign:
            raise NotOwner(
                f"schema {self.schema!r} holds what the saver's role does not own: "
                + ", ".join(f"{kind} {what}" + (f" (owned by {owner})" if owner else "") for kind, what, owner in foreign[:5])
                + (f", and {len(foreign) - 5} more" if len(foreign) > 5 else ""),
                detail="setup() creates the saver's tables and functions in a schema of its own role, and accepts "
                "no object another role owns there, no trigger or rule on its tables, and no other role that may "
                "CREATE in it.",
                hint="Use another schema (schema=...), drop what another role made, or, if you trust it, "
                "setup(trusted_owners=[role, ...], allowed_triggers=[name, ...]).",
            )
        steps = migrations(self.s, hx)
        yield Query(steps[0])
        rows = yield Query(f"SELECT coalesce(max(v), -1) FROM {self.s}.migrations", None, True)
        done = rows[0][0]
        for v in range(done + 1, len(steps)):
            yield Query(steps[v])
            yield Query(f"INSERT INTO {self.s}.migrations (v) VALUES (%s)", (v,))
        rows = yield Query(
            f"SELECT pg_catalog.to_regprocedure(%s) IS NOT NULL", (f"{hx}.hx_stream_send(text,jsonb)",), True
        )
        for q in stream_functions(self.s, hx, self.schema, bool(rows[0][0])):
            yield Query(q)
        self._server = None
        return None


# What in the saver's schema (%(schema)s) the role running setup() does not
# own, nor a role it trusts (%(trusted)s: names, which must exist): the
# schema itself, its relations, functions, types and operators; triggers
# on its tables other than %(triggers)s (a trigger has no owner: it runs as
# whoever writes the table) and rules; roles that may CREATE in it.
# (kind, what, owner) for each.
FOREIGN_SQL = """WITH s AS (SELECT n.oid, n.nspacl FROM pg_catalog.pg_namespace n WHERE n.nspname = %(schema)s),
ok AS (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user
       UNION SELECT t FROM pg_catalog.unnest(%(trusted)s::pg_catalog.regrole[]) t),
owned (kind, what, owner) AS (
    SELECT 'schema', pg_catalog.quote_ident(n.nspname), n.nspowner FROM pg_catalog.pg_namespace n WHERE n.oid = (SELECT oid FROM s)
    UNION ALL
    SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'i' THEN 'index' WHEN 'I' THEN 'index'
                          WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view'
                          WHEN 'f' THEN 'foreign table' ELSE 'relation' END,
           pg_catalog.quote_ident(c.relname), c.relowner
      FROM pg_catalog.pg_class c WHERE c.relnamespace = (SELECT oid FROM s)
    UNION ALL
    SELECT 'function', p.oid::pg_catalog.regprocedure::text, p.proowner FROM pg_catalog.pg_proc p WHERE p.pronamespace = (SELECT oid FROM s)
    UNION ALL
    SELECT 'type', pg_catalog.quote_ident(t.typname), t.typowner FROM pg_catalog.pg_type t WHERE t.typnamespace = (SELECT oid FROM s)
    UNION ALL
    SELECT 'operator', o.oid::pg_catalog.regoperator::text, o.oprowner FROM pg_catalog.pg_operator o WHERE o.oprnamespace = (SELECT oid FROM s)
)
SELECT o.kind, o.what, pg_catalog.pg_get_userbyid(o.owner) FROM owned o WHERE o.owner NOT IN (SELECT oid FROM ok)
UNION ALL
SELECT 'trigger', pg_catalog.format('%%I on %%I', t.tgname, c.relname), NULL
  FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = (SELECT oid FROM s) AND NOT t.tgisinternal AND NOT t.tgname = ANY (%(triggers)s::text[])
UNION ALL
SELECT 'rule', pg_catalog.format('%%I on %%I', r.rulename, c.relname), NULL
  FROM pg_catalog.pg_rewrite r JOIN pg_catalog.pg_class c ON c.oid = r.ev_class
 WHERE c.relnamespace = (SELECT oid FROM s) AND r.rulename <> '_RETURN'
UNION ALL
SELECT DISTINCT 'privilege', 'CREATE on the schema', CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee) END
  FROM s, pg_catalog.aclexplode(s.nspacl) a
 WHERE a.privilege_type = 'CREATE' AND a.grantee NOT IN (SELECT oid FROM ok)"""


def checkpoint_key(config: RunnableConfig) -> tuple[str, str, str] | None:
    """(thread, namespace, checkpoint) of a config that names a checkpoint."""
    conf = config["configurable"]
    cid = conf.get("checkpoint_id")
    if not cid:
        return None
    return (str(conf["thread_id"]), str(conf.get("checkpoint_ns", "") or ""), str(cid))

