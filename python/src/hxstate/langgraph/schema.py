"""The saver's schema: its tables (migrations, as PostgresSaver's setup runs
them), its SQL functions (``chain``, ``state_at``, ``stream_name``,
``publish``, ``threads``), and ``setup()``, which refuses a schema that
holds what the saver's role does not own.

The tables, in the schema the user chooses (``langgraph`` by default):

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

from collections.abc import Sequence

from hxstate.errors import NotOwner, NotSetUp
from hxstate.langgraph.sql import DELTA_COMPRESSION, METADATA_COMPRESSION, SNAPSHOT_COMPRESSION, Server
from hxstate.langgraph.steps import Query, Steps
from hxstate.langgraph.storage import quote_ident, quote_literal

__all__ = ["DEFAULT_SCHEMA", "FOREIGN_SQL", "chain_function", "migrations", "put_function", "setup_steps", "stream_functions"]

DEFAULT_SCHEMA = "langgraph"


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
        # - delta and snapshot are json: written once, read whole by the
        #   saver, which parses them itself; json keeps its text, so
        #   sending one is a copy where jsonb is printed anew at every read
        #   (the 1,832 deltas of a 500-turn thread: 0.3 ms against 5.0),
        #   and the order of an object's keys, which jsonb sorts, is kept
        #   (PostgresSaver's msgpack keeps it).  SQL reads them as jsonb
        #   (state_at).
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
    snapshot json,
    chain_bytes bigint NOT NULL DEFAULT 0,
    chain_len integer NOT NULL DEFAULT 0,
    snapshot_bytes bigint NOT NULL DEFAULT 0,
    state_bytes bigint NOT NULL DEFAULT 0,
    base_id text NOT NULL,
    seq bigint,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
)""",
        f"""COMMENT ON COLUMN {s}.checkpoints.packed IS
    'LangGraph''s checkpoint without its channel values (versions, ts), as zlib-compressed JSON'""",
        f"""COMMENT ON COLUMN {s}.checkpoints.delta IS
    'the hx_merge ops from the parent''s state to this checkpoint''s (NULL in a root), compressed in line'""",
        f"""COMMENT ON COLUMN {s}.checkpoints.snapshot IS
    'the whole state, in a root and now and then (base_id names the nearest), compressed in line'""",
        # a task's pending write: its value as JSON (json: its text and key
        # order as written), or packed when that saves a quarter
        f"""CREATE TABLE {s}.writes (
    thread_id text NOT NULL,
    checkpoint_ns text NOT NULL DEFAULT '',
    checkpoint_id text NOT NULL,
    task_id text NOT NULL,
    idx integer NOT NULL,
    channel text NOT NULL,
    task_path text NOT NULL DEFAULT '',
    value json,
    packed bytea,
    CHECK ((value IS NULL) <> (packed IS NULL)),
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
)""",
        chain_function(s),
        f"COMMENT ON FUNCTION {s}.chain(text, text, text) IS "
        "'what a checkpoint kept by HxSaver is rebuilt from: its nearest snapshot, then the deltas on the way, newest first, as json (their text, and the order of their keys, as stored)'",
        f"""CREATE FUNCTION {s}.state_at(p_thread_id text, p_checkpoint_ns text, p_checkpoint_id text)
RETURNS jsonb LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT CASE WHEN ch IS NULL THEN NULL
            WHEN cardinality(ch) = 1 THEN ch[1]::jsonb
            ELSE {hx}.hx_merge(ch[1]::jsonb, coalesce((SELECT jsonb_agg(e.op ORDER BY x.i DESC, e.o)
                                                         FROM unnest(ch[2:]) WITH ORDINALITY AS x(delta, i),
                                                              jsonb_array_elements(x.delta::jsonb) WITH ORDINALITY AS e(op, o)),
                                                       '[]'))
       END
  FROM (SELECT {s}.chain(p_thread_id, p_checkpoint_ns, p_checkpoint_id) AS ch) c
$$""",
        f"COMMENT ON FUNCTION {s}.state_at(text, text, text) IS "
        "'the state (channel values as JSON) of a LangGraph checkpoint kept by HxSaver'",
        # a thread's writer, when one took it (acquire): while it has one,
        # a write must carry its token; epoch grows at each acquire
        f"""CREATE TABLE {s}.owners (
    thread_id text PRIMARY KEY,
    epoch bigint NOT NULL,
    token text NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT now()
)""",
        f"""COMMENT ON TABLE {s}.owners IS
    'the writer that owns a LangGraph thread kept by HxSaver: a write must carry its token (configurable hx_owner)'""",
        # a run admitted on a thread before it was dispatched: its input,
        # and once it ended, how; its checkpoints carry its id in their
        # metadata (run_id), so an admission with none and no end is a run
        # that was lost before its first checkpoint
        f"""CREATE TABLE {s}.runs (
    thread_id text NOT NULL,
    run_id text NOT NULL,
    input json NOT NULL,
    admitted_at timestamptz NOT NULL DEFAULT now(),
    outcome text,
    detail text,
    finished_at timestamptz,
    PRIMARY KEY (thread_id, run_id),
    CHECK ((outcome IS NULL) = (finished_at IS NULL))
)""",
        f"""COMMENT ON TABLE {s}.runs IS
    'runs admitted on LangGraph threads kept by HxSaver: what each was asked, and how it ended (NULL: not yet, or lost)'""",
        # the last batch each live log (live.py's LiveLog) committed, in the
        # transaction of the batch's events: a writer whose connection was
        # lost while its COMMIT was in flight reads here whether it landed
        # (the saver's role need not read the log); a log deletes its row
        # when it closes
        f"""CREATE TABLE {s}.live_batches (
    writer uuid PRIMARY KEY,
    stream text NOT NULL,
    batch bigint NOT NULL,
    seq bigint,
    committed_at timestamptz NOT NULL DEFAULT now()
)""",
        f"""COMMENT ON TABLE {s}.live_batches IS
    'the last batch of events each live log of a LangGraph run committed to its log stream (a commit in doubt is looked up here)'""",
    ]


def chain_function(s: str) -> str:
    """chain(), in schema ``s``: a checkpoint's state is its nearest
    snapshot (base_id) and the deltas on the way to it, merged by one
    hx_merge.  The way is found in one index range scan from the snapshot
    to the checkpoint, newest first, keeping the rows each next parent
    names (rows of other branches are skipped); should a parent's id not
    be older than its child's, one primary-key lookup per checkpoint
    finishes the walk."""
    return f"""CREATE FUNCTION {s}.chain(p_thread_id text, p_checkpoint_ns text, p_checkpoint_id text)
RETURNS json[] LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    want text := p_checkpoint_id;
    base text;
    r record;
    parent text;
    d json;
    snap json;
    deltas json[] := '{{}}';
BEGIN
    SELECT c.base_id INTO base FROM {s}.checkpoints c
     WHERE c.thread_id = p_thread_id AND c.checkpoint_ns = p_checkpoint_ns AND c.checkpoint_id = p_checkpoint_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    FOR r IN SELECT c.checkpoint_id, c.parent_checkpoint_id, c.delta, c.snapshot IS NOT NULL AS is_snapshot
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


def stream_functions(s: str, hx: str, schema: str, send: bool) -> list[str]:
    """What setup() creates afresh each time: how checkpoints reach the
    thread's log stream (hx_stream_send, when this hxstate has it), a
    thread's head as followers see it, and the source function followers
    read it from with its seq."""
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
        # a live log's batch: its events appended in order, and the batch's
        # number recorded for the writer in the same transaction
        f"""CREATE OR REPLACE FUNCTION {s}.publish_batch(p_stream text, p_events jsonb, p_writer uuid, p_batch bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_seq bigint;
    v_event jsonb;
BEGIN
    IF p_stream IS NULL OR p_writer IS NULL OR p_batch IS NULL THEN
        RAISE EXCEPTION 'publish_batch takes a stream, a writer and a batch number'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF jsonb_typeof(p_events) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'a batch is a JSON array of events'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR v_event IN SELECT e.value FROM jsonb_array_elements(p_events) AS e(value) LOOP
        v_seq := {s}.publish(p_stream, v_event);
    END LOOP;
    INSERT INTO {s}.live_batches AS b (writer, stream, batch, seq) VALUES (p_writer, p_stream, p_batch, v_seq)
    ON CONFLICT (writer) DO UPDATE SET batch = excluded.batch, seq = excluded.seq, committed_at = now()
     WHERE b.stream = excluded.stream;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'live log % writes another stream', p_writer
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN v_seq;
END
$$""",
        f"COMMENT ON FUNCTION {s}.publish_batch(text, jsonb, uuid, bigint) IS "
        "'append a live log''s batch of events to a thread''s log stream, and record the batch (NULL: this hxstate has no hx_stream_send)'",
        # a thread's head as its followers see it, read from the saver's
        # tables only (the saver's role need not read the log)
        f"""CREATE OR REPLACE FUNCTION {s}.head_states(keys text[])
RETURNS TABLE (key text, state jsonb)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
SELECT k.key,
       CASE WHEN c.checkpoint_id IS NOT NULL THEN
           coalesce((SELECT jsonb_object_agg(v.key, v.value)
                       FROM jsonb_each({s}.state_at(k.key, '', c.checkpoint_id)) v
                      WHERE v.key NOT LIKE '\_\_%' AND v.key NOT LIKE 'branch:%'), '{{}}')
           || coalesce((SELECT jsonb_build_object('__interrupt__', jsonb_agg(
                                  jsonb_build_object('id', i -> 'id', 'value', i -> 'value')
                                  ORDER BY w.task_path, w.task_id, w.idx, n))
                          FROM {s}.writes w,
                               jsonb_array_elements(CASE WHEN w.value ->> '$hx' = 'tuple' THEN w.value::jsonb -> 'items'
                                                         ELSE jsonb_build_array(w.value::jsonb) END) WITH ORDINALITY AS x(i, n)
                         WHERE w.thread_id = k.key AND w.checkpoint_ns = '' AND w.checkpoint_id = c.checkpoint_id
                           AND w.channel = '__interrupt__'
                        HAVING count(*) > 0), '{{}}')
       END
  FROM unnest(keys) AS k(key)
  LEFT JOIN LATERAL (SELECT x.checkpoint_id FROM {s}.checkpoints x
                      WHERE x.thread_id = k.key AND x.checkpoint_ns = ''
                      ORDER BY x.checkpoint_id DESC LIMIT 1) c ON true
$$""",
        f"COMMENT ON FUNCTION {s}.head_states(text[]) IS "
        "'the head of each LangGraph thread kept by HxSaver, as its followers see it (NULL: no checkpoint)'",
        f"""CREATE OR REPLACE FUNCTION {s}.threads(keys text[])
RETURNS TABLE (key text, stream text, seq bigint, state jsonb)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
SELECT h.key, {s}.stream_name(h.key),
       coalesce((SELECT max(e.seq) FROM {hx}.hx_event e WHERE e.stream = {s}.stream_name(h.key)), 0),
       h.state
  FROM {s}.head_states(keys) h
$$""",
        f"COMMENT ON FUNCTION {s}.threads(text[]) IS "
        "'LangGraph threads kept by HxSaver as a source: each key''s log stream, its last seq and the state at it'",
    ]


def setup_steps(schema: str, trusted_owners: Sequence[str] = (), allowed_triggers: Sequence[str] = ()) -> Steps:
    """Create the saver's schema, tables and functions, or bring them up to
    date; refused (NotOwner) when the schema holds what the role does not own."""
    s = quote_ident(schema)
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
    # (CREATE SCHEMA IF NOT EXISTS wants CREATE on the database even when
    # the schema exists: a role given a schema of its own has not)
    rows = yield Query("SELECT pg_catalog.to_regnamespace(%s) IS NULL", (s,), True)
    if rows[0][0]:
        yield Query(f"CREATE SCHEMA IF NOT EXISTS {s}")
    # one setup at a time
    yield Query("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(%s))", (f"hxstate.langgraph:{schema}",))
    # nothing in the schema runs or is read before it is known to be the
    # saver's own: another role that made the schema first (CREATE on
    # the database is enough) would own what setup() writes into, and
    # its triggers would run as the saver's role
    foreign = yield Query(
        FOREIGN_SQL,
        {"schema": schema, "trusted": list(trusted_owners), "triggers": list(allowed_triggers)},
        True,
    )
    if foreign:
        raise NotOwner(
            f"schema {schema!r} holds what the saver's role does not own: "
            + ", ".join(f"{kind} {what}" + (f" (owned by {owner})" if owner else "") for kind, what, owner in foreign[:5])
            + (f", and {len(foreign) - 5} more" if len(foreign) > 5 else ""),
            detail="setup() creates the saver's tables and functions in a schema of its own role, and accepts "
            "no object another role owns there, no trigger or rule on its tables, and no other role that may "
            "CREATE in it.",
            hint="Use another schema (schema=...), drop what another role made, or, if you trust it, "
            "setup(trusted_owners=[role, ...], allowed_triggers=[name, ...]).",
        )
    steps = migrations(s, hx)
    yield Query(steps[0])
    rows = yield Query(f"SELECT coalesce(max(v), -1) FROM {s}.migrations", None, True)
    done = rows[0][0]
    for v in range(done + 1, len(steps)):
        yield Query(steps[v])
        yield Query(f"INSERT INTO {s}.migrations (v) VALUES (%s)", (v,))
    rows = yield Query(
        """SELECT pg_catalog.to_regprocedure(%s) IS NOT NULL, pg_catalog.to_regprocedure(%s) IS NOT NULL,
                  'lz4' = ANY ((SELECT enumvals FROM pg_catalog.pg_settings WHERE name = 'default_toast_compression')::text[])""",
        (f"{hx}.hx_stream_send(text,jsonb)", f"{hx}.hx_compress(anyelement,text)"),
        True,
    )
    send, compress, lz4 = (bool(x) for x in rows[0])
    for q in stream_functions(s, hx, schema, send):
        yield Query(q)
    for q in put_function(s, schema, Server(send, hx, compress, lz4)):
        yield Query(q)
    return None


def put_function(s: str, schema: str, server: Server) -> list[str]:
    """put_checkpoint(): a put whose parent's state the saver remembers, in
    one statement (put.fast_put_steps): the thread's owner (the write must
    carry its token: 'owner' otherwise), the thread's turn, the checks on
    its parent (each statement of a plpgsql function sees what committed
    before it, the lock's holder's included), the event on the thread's
    stream, the row.  It writes nothing and answers 'slow' when the put
    needs what only the saver's full protocol does (its parent is gone, a
    fork needs a snapshot of the state, interrupts were written at the
    checkpoint before it); 'conflict:<id>' when another writer continued
    its parent (id); 'exists' for a retry; else 'done' and the event's seq."""
    lock = quote_literal(f"hxstate.langgraph:{schema}")
    # hx_stream_send itself, not publish(): a call of a SQL function less
    send = f"{server.hx}.hx_stream_send" if server.publishing else f"{s}.publish"
    owner_lock = quote_literal(f"hxstate.langgraph.owner:{schema}")
    key = "c.thread_id = p_thread AND c.checkpoint_ns = p_ns"
    args = ("text, text, text, text, bytea, jsonb, json, json, bigint, integer, bigint, bigint, text, boolean, text, "
            "boolean, jsonb, jsonb, text")
    return [
        # the savers of 0.6.0 made put_checkpoint return a set (RETURNS
        # TABLE): a function's result type is not replaced, it is dropped
        # first
        f"""DO $$
BEGIN
    IF (SELECT p.proretset FROM pg_catalog.pg_proc p
         WHERE p.oid = pg_catalog.to_regprocedure({quote_literal(f"{s}.put_checkpoint({args})")})) THEN
        DROP FUNCTION {s}.put_checkpoint({args});
    END IF;
END
$$""",
        # The statements, each with a snapshot of its own (a VOLATILE
        # plpgsql function's statement sees what committed before it,
        # the lock's holder's included): the owner's lock; the owner; the
        # thread's turn; then everything the checks read in one
        # statement, after the turn is taken: the checkpoint and its
        # parent (one index range scan from the older of the two: a run
        # appending to the head reads the head), whether another writer
        # continued the parent, whether a newer checkpoint is there, and
        # the interrupts written at the parent and at the checkpoint.
        f"""CREATE OR REPLACE FUNCTION {s}.put_checkpoint(
    p_thread text, p_ns text, p_id text, p_parent text, p_packed bytea, p_metadata jsonb, p_delta json, p_snapshot json,
    p_chain_bytes bigint, p_chain_len integer, p_snapshot_bytes bigint, p_state_bytes bigint, p_base_id text,
    p_run boolean, p_fork_of text, p_publish boolean, p_patch jsonb, p_root_state jsonb, p_owner text,
    OUT status text, OUT seq bigint)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_owner text;
    v_epoch bigint;
    v_exists boolean;
    v_parent boolean;
    v_continued text;
    v_newer boolean;
    v_interrupted boolean;  -- interrupts were written at the parent
    v_own_interrupts boolean;  -- and at the checkpoint
    v_event jsonb;
    v_seq bigint;
BEGIN
    -- the thread's owner, if it has one, waits for this write to end
    PERFORM pg_advisory_xact_lock_shared(hashtext({owner_lock}), hashtext(p_thread));
    SELECT o.token, o.epoch INTO v_owner, v_epoch FROM {s}.owners o WHERE o.thread_id = p_thread;
    IF v_owner IS DISTINCT FROM p_owner THEN
        status := 'owner:' || coalesce(v_epoch::text, '');
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext({lock}), hashtext(p_thread || chr(1) || p_ns));
    SELECT coalesce(bool_or(c.checkpoint_id = p_id), false),
           coalesce(bool_or(c.checkpoint_id = p_parent), false),
           min(c.checkpoint_id) FILTER (WHERE c.checkpoint_id > p_parent AND c.checkpoint_id <> p_id
                                          AND c.parent_checkpoint_id = p_parent),
           coalesce(bool_or(c.checkpoint_id > p_parent AND c.checkpoint_id <> p_id), false),
           p_publish AND EXISTS (SELECT FROM {s}.writes w
                                  WHERE w.thread_id = p_thread AND w.checkpoint_ns = p_ns AND w.checkpoint_id = p_parent
                                    AND w.channel = '__interrupt__'),
           p_publish AND EXISTS (SELECT FROM {s}.writes w
                                  WHERE w.thread_id = p_thread AND w.checkpoint_ns = p_ns AND w.checkpoint_id = p_id
                                    AND w.channel = '__interrupt__')
      INTO v_exists, v_parent, v_continued, v_newer, v_interrupted, v_own_interrupts
      FROM {s}.checkpoints c
     WHERE {key} AND c.checkpoint_id >= least(p_parent, p_id)
       AND (c.checkpoint_id = p_id OR c.checkpoint_id >= p_parent);
    IF v_exists THEN
        status := 'exists';
        RETURN;
    END IF;
    IF p_parent IS NOT NULL THEN
        IF NOT v_parent THEN
            status := 'slow';
            RETURN;
        END IF;
        IF p_run AND p_fork_of IS DISTINCT FROM p_parent AND v_continued IS NOT NULL THEN
            status := 'conflict:' || v_continued;
            RETURN;
        END IF;
    END IF;
    IF p_publish THEN
        IF v_newer OR v_own_interrupts THEN
            status := 'slow';
            RETURN;
        END IF;
        IF p_parent IS NULL THEN
            v_event := jsonb_build_object('type', 'STATE_SNAPSHOT', 'snapshot', p_root_state);
        ELSE
            v_event := CASE WHEN v_interrupted THEN '[{{"op": "remove", "path": "/__interrupt__"}}]'::jsonb
                            ELSE '[]'::jsonb END || p_patch;
            v_event := CASE WHEN jsonb_array_length(v_event) > 0
                            THEN jsonb_build_object('type', 'STATE_DELTA', 'delta', v_event) END;
        END IF;
        IF v_event IS NOT NULL THEN
            v_seq := {send}({quote_literal("@" + schema + ":")} || p_thread, v_event);
        END IF;
    END IF;
    INSERT INTO {s}.checkpoints
        (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, packed, metadata, delta, snapshot,
         chain_bytes, chain_len, snapshot_bytes, state_bytes, base_id, seq)
    VALUES (p_thread, p_ns, p_id, p_parent, p_packed,
            {server.compressed("p_metadata", METADATA_COMPRESSION)},
            {server.compressed("p_delta", DELTA_COMPRESSION)},
            {server.compressed("p_snapshot", SNAPSHOT_COMPRESSION)},
            p_chain_bytes, p_chain_len, p_snapshot_bytes, p_state_bytes, p_base_id, v_seq);
    status := 'done';
    seq := v_seq;
END
$$""",
        f"COMMENT ON FUNCTION {s}.put_checkpoint(text, text, text, text, bytea, jsonb, json, json, bigint, integer, bigint, "
        "bigint, text, boolean, text, boolean, jsonb, jsonb, text) IS "
        "'HxSaver''s put of a checkpoint whose parent''s state it remembers, in one statement'",
        # a task's writes (but LangGraph's records of an attempt), in one
        # statement: the indexes it stored (the others were there, a
        # retry), or NULL when the thread's owner is another
        f"""CREATE OR REPLACE FUNCTION {s}.put_writes(
    p_thread text, p_ns text, p_id text, p_task text, p_path text,
    p_idx integer[], p_channels text[], p_values text[], p_packed bytea[], p_owner text)
RETURNS integer[]
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_stored integer[];
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtext({owner_lock}), hashtext(p_thread));
    IF (SELECT o.token FROM {s}.owners o WHERE o.thread_id = p_thread) IS DISTINCT FROM p_owner THEN
        RETURN NULL;
    END IF;
    WITH ins AS (
        INSERT INTO {s}.writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, value, packed)
        SELECT p_thread, p_ns, p_id, p_task, p_path, t.idx, t.channel, t.value::json, t.packed
          FROM unnest(p_idx, p_channels, p_values, p_packed) AS t(idx, channel, value, packed)
        ON CONFLICT DO NOTHING RETURNING idx)
    SELECT coalesce(array_agg(ins.idx), '{{}}') INTO v_stored FROM ins;
    RETURN v_stored;
END
$$""",
        f"COMMENT ON FUNCTION {s}.put_writes(text, text, text, text, text, integer[], text[], text[], bytea[], text) IS "
        "'HxSaver''s put of a task''s writes, in one statement'",
    ]


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
