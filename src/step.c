/*-------------------------------------------------------------------------
 *
 * step.c
 *	  Exactly-once step writes: hx_stage() stages a tool call's writes for
 *	  a step of a stream, and hx_promote() gives a step's writes, once, to
 *	  the UPDATE that merges them into the state:
 *
 *	    SELECT hx_stage('sessions:s-42', 'step-7', 'toolu_1', '[...]', 1);
 *	    UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:s-42', 'step-7'))
 *	     WHERE session_id = 's-42';
 *
 * hx_step_call has a row per staged call, hx_step a row per promoted step.
 *
 * A step is guarded by a heavyweight lock of its own, held to the end of
 * the transaction: the object (hx_step, a 32-bit hash of stream and step)
 * in pg_locks.  Staging takes it in share mode, so that calls of one step
 * stage in parallel; promoting takes it in exclusive mode, so that a
 * promote waits for the calls being staged, and calls staged later wait
 * for the promote to end.  Both then read hx_step with the latest
 * snapshot, whatever the isolation level: a promote that committed before
 * the lock was granted is seen, so a call never stages into a promoted
 * step (XH202), and a step never promotes twice.  Two steps whose hashes
 * collide only wait for each other.  Staging writes nothing but the
 * call's row: no row lock, which would write WAL.
 *
 * A call staged again with equal writes and ord is a retry and a no-op
 * (false); with other writes, an error (XH201).
 *
 * Promoting, if the step was not promoted yet, returns the staged writes
 * in a deterministic order (by ord, the model's tool-call order, then by
 * call id, bytewise), records them in the step's row (inserted then), and
 * deletes the staged calls.  A second promote returns [] and so applies
 * nothing; a promote that rolls back leaves the step as it was.
 *
 * The UPDATE may evaluate hx_promote twice for its row: under READ
 * COMMITTED, when the row was updated concurrently, the executor
 * re-evaluates the new values on the row's latest version.  Both
 * evaluations must return the same writes, or the step would be lost.  So
 * a step promoted by this very statement (its row written by the current
 * transaction with a command id not older than the statement's snapshot)
 * gives its recorded writes again, while any later statement gets [].
 *
 * Both functions run their statements through plans prepared once per
 * backend (a staged step costs a few index probes, not a parse and plan
 * per statement), with every name qualified, as the caller: what the
 * tables' owner granted and configured applies.  The install script
 * declares both with SET enable_seqscan = off, so that a plan made while a
 * table was empty or just vacuumed still probes its primary key rather
 * than scanning a table that has grown since.
 *
 * src/step.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "hxstate.h"
#include "tree.h"

/* The statements of staging and promoting; $1 is the stream, $2 the step */
typedef enum StepQuery
{
	Q_PROMOTED,					/* staging: was the step promoted? */
	Q_STEP,						/* promoting: the step's row, if promoted */
	Q_INSERT_CALL,				/* $3 call, $4 ord, $5 writes: stage a call */
	Q_STAGED_CALL,				/* $3 call: what a call staged before */
	Q_CALLS,					/* the step's calls, in promoting order */
	Q_RECORD,					/* $3 calls, $4 writes, $5 first staged: promoted */
	Q_DELETE_CALLS,				/* forget the step's staged calls */
	NUM_STEP_QUERIES
} StepQuery;

static struct
{
	const char *sql;			/* %1$s is the extension's schema */
	int			nargs;
	Oid			types[5];
}			step_queries[NUM_STEP_QUERIES] =
{
	[Q_PROMOTED] = {
		"SELECT s.promoted_at IS NOT NULL FROM %1$s.hx_step s"
		" WHERE s.stream OPERATOR(pg_catalog.=) $1 AND s.step OPERATOR(pg_catalog.=) $2",
		2, {TEXTOID, TEXTOID}
	},
	[Q_STEP] = {
		"SELECT s.xmin, s.cmin, s.promoted_writes FROM %1$s.hx_step s"
		" WHERE s.stream OPERATOR(pg_catalog.=) $1 AND s.step OPERATOR(pg_catalog.=) $2"
		"   AND s.promoted_at IS NOT NULL",
		2, {TEXTOID, TEXTOID}
	},
	[Q_INSERT_CALL] = {
		"INSERT INTO %1$s.hx_step_call (stream, step, call, ord, writes)"
		" VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
		5, {TEXTOID, TEXTOID, TEXTOID, INT4OID, JSONBOID}
	},
	[Q_STAGED_CALL] = {
		"SELECT c.writes, c.ord FROM %1$s.hx_step_call c"
		" WHERE c.stream OPERATOR(pg_catalog.=) $1 AND c.step OPERATOR(pg_catalog.=) $2"
		"   AND c.call OPERATOR(pg_catalog.=) $3",
		3, {TEXTOID, TEXTOID, TEXTOID}
	},
	[Q_CALLS] = {
		"SELECT c.call, c.writes, c.staged_at FROM %1$s.hx_step_call c"
		" WHERE c.stream OPERATOR(pg_catalog.=) $1 AND c.step OPERATOR(pg_catalog.=) $2"
		" ORDER BY c.ord NULLS LAST, c.call COLLATE pg_catalog.\"C\"",
		2, {TEXTOID, TEXTOID}
	},
	[Q_RECORD] = {
		"INSERT INTO %1$s.hx_step AS s"
		"       (stream, step, created_at, promoted_at, promoted_calls, promoted_writes)"
		" VALUES ($1, $2, COALESCE($5, pg_catalog.now()), pg_catalog.now(), $3, $4)"
		" ON CONFLICT (stream, step) DO UPDATE"
		"   SET promoted_at = pg_catalog.now(), promoted_calls = $3, promoted_writes = $4",
		5, {TEXTOID, TEXTOID, TEXTARRAYOID, JSONBOID, TIMESTAMPTZOID}
	},
	[Q_DELETE_CALLS] = {
		"DELETE FROM %1$s.hx_step_call c"
		" WHERE c.stream OPERATOR(pg_catalog.=) $1 AND c.step OPERATOR(pg_catalog.=) $2",
		2, {TEXTOID, TEXTOID}
	},
};

/*
 * The prepared plans, for the schema plans_nsp.  The plan cache replans
 * them when the tables change; only a new schema (the extension dropped
 * and created in another) needs new query strings.  A relcache
 * invalidation of the tables, or of everything, makes the next call look
 * the schema up again.  Plans for an old schema are left to the backend's
 * end, never freed: a call of ours could be running them (a trigger on the
 * tables that stages or promotes, nested).
 */
static SPIPlanPtr step_plans[NUM_STEP_QUERIES];
static char *step_sql[NUM_STEP_QUERIES];	/* the statements, for messages */
static Oid	plans_nsp = InvalidOid;
static Oid	step_relid = InvalidOid;
static Oid	call_relid = InvalidOid;
static uint64 step_invals = 0;	/* invalidations of the tables seen */
static uint64 plans_checked = UINT64_MAX;	/* step_invals when last checked */

static void
step_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == step_relid || relid == call_relid)
		step_invals++;
}

/*
 * The streams whose steps each statement of this transaction promoted, by
 * the statement's command id: hx_stream checks that a row the statement
 * changed is a row of one of them, so that a step is not promoted into
 * another stream's row.  In TopTransactionContext, forgotten at the end of
 * the transaction; a statement's promotes are few, one per row it changes.
 */
typedef struct PromotedEntry
{
	CommandId	cid;			/* hash key */
	List	   *streams;		/* char *, each once */
} PromotedEntry;

static HTAB *promoted = NULL;

static void
step_xact_callback(XactEvent event, void *arg)
{
	/* at the end (deferred triggers have fired); the memory goes with it */
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		promoted = NULL;
}

void
hx_step_init(void)
{
	CacheRegisterRelcacheCallback(step_relcache_callback, (Datum) 0);
	RegisterXactCallback(step_xact_callback, NULL);
}

/* Remember that the statement cid promoted a step of stream */
static void
remember_promoted(CommandId cid, const char *stream)
{
	PromotedEntry *entry;
	MemoryContext oldcxt;
	ListCell   *lc;
	bool		found;

	oldcxt = MemoryContextSwitchTo(TopTransactionContext);
	if (promoted == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(CommandId);
		ctl.entrysize = sizeof(PromotedEntry);
		ctl.hcxt = TopTransactionContext;
		promoted = hash_create("hxstate promoted streams", 16, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(promoted, &cid, HASH_ENTER, &found);
	if (!found)
		entry->streams = NIL;
	foreach(lc, entry->streams)
		if (strcmp((char *) lfirst(lc), stream) == 0)
			break;
	if (lc == NULL)
		entry->streams = lappend(entry->streams, pstrdup(stream));
	MemoryContextSwitchTo(oldcxt);
}

HxPromoted
hx_promoted(CommandId cid, const char *stream, const char **other)
{
	PromotedEntry *entry;
	ListCell   *lc;

	if (promoted == NULL ||
		(entry = hash_search(promoted, &cid, HASH_FIND, NULL)) == NULL)
		return HX_PROMOTED_NONE;
	foreach(lc, entry->streams)
		if (strcmp((char *) lfirst(lc), stream) == 0)
			return HX_PROMOTED_STREAM;
	*other = linitial(entry->streams);
	return HX_PROMOTED_OTHERS;
}

/* Make sure the plans are there and name the extension's schema (under SPI) */
static void
prepare_plans(void)
{
	SPIPlanPtr	plans[NUM_STEP_QUERIES];
	char	   *sqls[NUM_STEP_QUERIES];
	uint64		invals = step_invals;
	Oid			nspoid;
	const char *nsp;
	int			i;

	if (plans_checked == invals && OidIsValid(plans_nsp))
		return;
	nspoid = hx_extension_namespace();
	step_relid = hx_extension_relid("hx_step");
	call_relid = hx_extension_relid("hx_step_call");
	if (nspoid == plans_nsp)
	{
		/* an invalidation since invals was read makes the next call check again */
		plans_checked = invals;
		return;
	}

	plans_nsp = InvalidOid;
	nsp = quote_identifier(get_namespace_name(nspoid));
	for (i = 0; i < NUM_STEP_QUERIES; i++)
	{
		sqls[i] = MemoryContextStrdup(TopMemoryContext,
									  psprintf(step_queries[i].sql, nsp));
		plans[i] = SPI_prepare(sqls[i], step_queries[i].nargs, step_queries[i].types);
		if (plans[i] == NULL)
			elog(ERROR, "SPI_prepare failed (%s): %s",
				 SPI_result_code_string(SPI_result), sqls[i]);
	}
	/* the old statements' text goes with them (left to the backend's end) */
	for (i = 0; i < NUM_STEP_QUERIES; i++)
	{
		SPI_keepplan(plans[i]);
		step_plans[i] = plans[i];
		step_sql[i] = sqls[i];
	}
	plans_nsp = nspoid;
	plans_checked = invals;
}

/*
 * A statement that did not do what it does: a rule on the step tables
 * turned it into another (the owner's doing), or a bug.  The message shows
 * the statement as it ran.
 */
static void
report_not_done(StepQuery q, int rc, int expected)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("statement on the step tables did not run as prepared"),
			 errdetail("The statement \"%s\" gave %s, not %s.", step_sql[q],
					   SPI_result_code_string(rc), SPI_result_code_string(expected)),
			 errhint("A rule on hx_step or hx_step_call changes what hx_stage and hx_promote do.")));
}

/* Run a prepared statement, and check that it did what it does */
static uint64
run(StepQuery q, Datum *values, const char *nulls, int expected)
{
	int			rc = SPI_execute_plan(step_plans[q], values, nulls, false, 0);

	if (rc != expected)
		report_not_done(q, rc, expected);
	return SPI_processed;
}

/* Run a prepared statement with the latest snapshot (see the top) */
static uint64
run_latest(StepQuery q, Datum *values, const char *nulls, int expected)
{
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	int			rc = SPI_execute_snapshot(step_plans[q], values, nulls, snapshot,
										  InvalidSnapshot, expected == SPI_OK_SELECT,
										  false, 0);

	UnregisterSnapshot(snapshot);
	if (rc != expected)
		report_not_done(q, rc, expected);
	return SPI_processed;
}

/* Take the step's lock (see the top), to the end of the transaction */
static void
lock_step(Datum stream, Datum step, LOCKMODE mode)
{
	text	   *a = DatumGetTextPP(stream);
	text	   *b = DatumGetTextPP(step);
	uint32		h;
	LOCKTAG		tag;

	h = DatumGetUInt32(hash_any((unsigned char *) VARDATA_ANY(a), VARSIZE_ANY_EXHDR(a)));
	h = hash_combine(h, DatumGetUInt32(hash_any((unsigned char *) VARDATA_ANY(b),
												VARSIZE_ANY_EXHDR(b))));
	SET_LOCKTAG_OBJECT(tag, MyDatabaseId, step_relid, h, 0);
	(void) LockAcquire(&tag, mode, false, false);
}

/* An int4 or NULL as text, for a message */
static const char *
ord_text(Datum ord, bool isnull)
{
	return isnull ? "NULL" : psprintf("%d", DatumGetInt32(ord));
}

PG_FUNCTION_INFO_V1(hx_stage);

/*
 * hx_stage(stream text, step text, call text, writes jsonb, ord int4
 * DEFAULT NULL) -> bool: true when the call's writes were staged, false
 * for a retry with the same writes and ord.
 */
Datum
hx_stage(PG_FUNCTION_ARGS)
{
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	bool		staged;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("stream, step, call and writes must not be null")));
	values[0] = PointerGetDatum(PG_GETARG_TEXT_PP(0));
	values[1] = PointerGetDatum(PG_GETARG_TEXT_PP(1));
	values[2] = PointerGetDatum(PG_GETARG_TEXT_PP(2));
	values[3] = PG_ARGISNULL(4) ? (Datum) 0 : PG_GETARG_DATUM(4);
	nulls[3] = PG_ARGISNULL(4) ? 'n' : ' ';
	values[4] = PointerGetDatum(PG_GETARG_JSONB_P(3));

	/* writes are checked as hx_merge would check them, now */
	DirectFunctionCall1(hx_check_writes, values[4]);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	prepare_plans();

	/* wait for a promote of the step to end; then, was it promoted? */
	lock_step(values[0], values[1], ShareLock);
	if (run_latest(Q_PROMOTED, values, NULL, SPI_OK_SELECT) == 1)
	{
		bool		isnull;

		if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
			ereport(ERROR,
					(errcode(ERRCODE_HX_STEP_PROMOTED),
					 errmsg("step \"%s\" of stream \"%s\" was already promoted",
							hx_clip(TextDatumGetCString(values[1])),
							hx_clip(TextDatumGetCString(values[0]))),
					 errdetail("Call \"%s\" came after the step was promoted.",
							   hx_clip(TextDatumGetCString(values[2]))),
					 errhint("Stage the writes under a new step.")));
	}

	staged = run(Q_INSERT_CALL, values, nulls, SPI_OK_INSERT) == 1;
	if (!staged)
	{
		/* staged before: a retry with equal writes is a no-op, any other is an error */
		HeapTuple	tup;
		TupleDesc	desc;
		bool		writes_null;
		bool		ord_null;
		Datum		writes;
		Datum		ord;
		bool		same_writes;

		if (run(Q_STAGED_CALL, values, NULL, SPI_OK_SELECT) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not stage call \"%s\" of step \"%s\" of stream \"%s\" again",
							hx_clip(TextDatumGetCString(values[2])),
							hx_clip(TextDatumGetCString(values[1])),
							hx_clip(TextDatumGetCString(values[0]))),
					 errdetail("Its staged row was deleted by another transaction."),
					 errhint("Retry the transaction.")));
		tup = SPI_tuptable->vals[0];
		desc = SPI_tuptable->tupdesc;
		writes = SPI_getbinval(tup, desc, 1, &writes_null);
		ord = SPI_getbinval(tup, desc, 2, &ord_null);
		same_writes = DatumGetBool(DirectFunctionCall2(jsonb_eq, writes, values[4]));
		if (!same_writes || ord_null != PG_ARGISNULL(4) ||
			(!ord_null && DatumGetInt32(ord) != DatumGetInt32(values[3])))
			ereport(ERROR,
					(errcode(ERRCODE_HX_CALL_CHANGED),
					 errmsg("call \"%s\" of step \"%s\" of stream \"%s\" was staged with other writes",
							hx_clip(TextDatumGetCString(values[2])),
							hx_clip(TextDatumGetCString(values[1])),
							hx_clip(TextDatumGetCString(values[0]))),
					 same_writes ?
					 errdetail("It was staged with ord %s, not %s.",
							   ord_text(ord, ord_null), ord_text(values[3], PG_ARGISNULL(4))) :
					 errdetail("A retried call must stage the writes it staged before."),
					 errhint("A tool call that produced other writes is a new call: give it its own id.")));
	}

	SPI_finish();
	PG_RETURN_BOOL(staged);
}

/*
 * The staged writes of a step, as one op list in promoting order, and
 * their call ids, and when the first was staged (NULL when none was).  A
 * call staged as an object (an RFC 7386 patch of the state) becomes a
 * merge at the root.
 *
 * Read with the latest snapshot: the step's lock is held, so no call can
 * be staged from here on, and every call staged before is committed,
 * whatever the isolation level of this transaction.
 */
static Jsonb *
staged_writes(Datum *values, Datum *calls, Datum *first, bool *first_null)
{
	HxNode	   *ops = hx_node_new_array(0);
	Datum	   *ids;
	uint64		n;
	uint64		i;

	n = run_latest(Q_CALLS, values, NULL, SPI_OK_SELECT);
	*first_null = true;
	ids = palloc(sizeof(Datum) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Jsonb	   *w;
		HxNode	   *node;
		Datum		at;

		ids[i] = SPI_getbinval(tup, desc, 1, &isnull);
		w = DatumGetJsonbP(SPI_getbinval(tup, desc, 2, &isnull));
		at = SPI_getbinval(tup, desc, 3, &isnull);
		if (*first_null || DatumGetTimestampTz(at) < DatumGetTimestampTz(*first))
			*first = at;
		*first_null = false;

		node = hx_node_from_jsonb(w);
		if (JB_ROOT_IS_ARRAY(w) && !JB_ROOT_IS_SCALAR(w))
		{
			int			m = hx_node_size(node);
			int			j;

			for (j = 0; j < m; j++)
				hx_array_append(ops, hx_node_get_elem(node, j));
		}
		else
		{
			HxNode	   *op = hx_node_new_object(3);

			/* inserted in jsonb key order, so the object stays sorted */
			hx_object_set(op, "op", 2, hx_node_new_string("merge", 5));
			hx_object_set(op, "path", 4, hx_node_new_string("", 0));
			hx_object_set(op, "value", 5, node);
			hx_array_append(ops, op);
		}
	}
	*calls = PointerGetDatum(construct_array(ids, (int) n, TEXTOID, -1, false, TYPALIGN_INT));
	return hx_node_to_jsonb(ops, CurrentMemoryContext);
}

PG_FUNCTION_INFO_V1(hx_promote);

/*
 * hx_promote(stream text, step text) -> jsonb: the step's staged writes,
 * once, for hx_merge in the same UPDATE; [] once promoted.
 */
Datum
hx_promote(PG_FUNCTION_ARGS)
{
	/* the statement that evaluates us: its snapshot's command id */
	CommandId	statement_cid = GetActiveSnapshot()->curcid;
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	bool		first_null;
	Jsonb	   *writes;
	Datum		d;

	values[0] = PointerGetDatum(PG_GETARG_TEXT_PP(0));
	values[1] = PointerGetDatum(PG_GETARG_TEXT_PP(1));
	remember_promoted(statement_cid, TextDatumGetCString(values[0]));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	prepare_plans();

	/* wait for calls being staged and for another promote; then, promoted? */
	lock_step(values[0], values[1], ExclusiveLock);
	if (run_latest(Q_STEP, values, NULL, SPI_OK_SELECT) == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		TransactionId xmin = DatumGetTransactionId(SPI_getbinval(tup, desc, 1, &isnull));
		CommandId	cmin = DatumGetCommandId(SPI_getbinval(tup, desc, 2, &isnull));

		if (TransactionIdIsCurrentTransactionId(xmin) && cmin >= statement_cid)
		{
			/*
			 * This statement promoted it: the same writes again.  They are
			 * read as stored, maybe compressed: copied out of SPI's memory
			 * as they are, and decompressed only after SPI_finish, in the
			 * caller's memory (decompressed within SPI, they would be
			 * freed with it).
			 */
			d = SPI_datumTransfer(SPI_getbinval(tup, desc, 3, &isnull), false, -1);
			SPI_finish();
			PG_RETURN_JSONB_P(DatumGetJsonbP(d));
		}
		SPI_finish();
		PG_RETURN_JSONB_P(DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("[]"))));
	}

	writes = staged_writes(values, &values[2], &values[4], &first_null);
	values[3] = JsonbPGetDatum(writes);
	nulls[4] = first_null ? 'n' : ' ';
	run(Q_RECORD, values, nulls, SPI_OK_INSERT);
	if (!first_null)
		run_latest(Q_DELETE_CALLS, values, NULL, SPI_OK_DELETE);
	d = SPI_datumTransfer(JsonbPGetDatum(writes), false, -1);
	SPI_finish();
	PG_RETURN_JSONB_P(DatumGetJsonbP(d));
}
