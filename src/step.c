/*-------------------------------------------------------------------------
 *
 * step.c
 *	  hx_promote(stream, step) -> jsonb: the writes of a step's tool calls,
 *	  once, for the UPDATE that merges them into the state:
 *
 *	    UPDATE sessions SET state = hx_merge(state, hx_promote('sessions:s-42', 'step-7'))
 *	     WHERE session_id = 's-42';
 *
 * Tools stage their writes per call with hx_stage() (in the install
 * script): hx_step has a row per step, hx_step_call a row per staged call.
 * Promoting locks the step's row, so that it waits for calls being staged
 * and for a concurrent promote; then, if the step was not promoted yet, it
 * returns the staged writes in a deterministic order (by ord, the model's
 * tool-call order, then by call id, bytewise), records them in the step's
 * row as promoted, and deletes the staged calls.  A second promote returns
 * [] and so applies nothing; a promote that rolls back leaves the step as
 * it was.
 *
 * The UPDATE may evaluate hx_promote twice for its row: under READ
 * COMMITTED, when the row was updated concurrently, the executor
 * re-evaluates the new values on the row's latest version.  Both
 * evaluations must return the same writes, or the step would be lost.  So
 * a step promoted by this very statement (its row written by the current
 * transaction with a command id not older than the statement's snapshot)
 * gives its recorded writes again, while any later statement gets [].
 *
 * src/step.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "hxstate.h"

/* Run query (with $1 stream, $2 step, and more values) as SPI, or fail */
static void
run(const char *query, int nargs, Oid *types, Datum *values, int expected)
{
	int			rc = SPI_execute_with_args(query, nargs, types, values, NULL,
										   false, 0);

	if (rc != expected)
		elog(ERROR, "SPI_execute_with_args failed (%s): %s",
			 SPI_result_code_string(rc), query);
}

/* The staged writes of a step, as one op list, and their call ids */
static Jsonb *
staged_writes(const char *nsp, Datum *values, Datum *calls)
{
	Oid			types[2] = {TEXTOID, TEXTOID};
	char	   *query;
	Snapshot	snapshot;
	SPIPlanPtr	plan;
	bool		isnull;
	Datum		d;

	/*
	 * Read with the latest snapshot: the step's row is locked, so no call
	 * can be staged from here on, and every call staged before is
	 * committed, whatever the isolation level of this transaction.  A call
	 * staged as an object (an RFC 7386 patch of the state) becomes a merge
	 * at the root.
	 */
	query = psprintf("SELECT coalesce(pg_catalog.jsonb_agg(o.op ORDER BY c.ord NULLS LAST, c.call COLLATE \"C\", o.n), '[]'),"
					 "       coalesce((SELECT pg_catalog.array_agg(x.call ORDER BY x.ord NULLS LAST, x.call COLLATE \"C\")"
					 "                   FROM %s.hx_step_call x"
					 "                  WHERE x.stream OPERATOR(pg_catalog.=) $1 AND x.step OPERATOR(pg_catalog.=) $2),"
					 "                '{}')"
					 "  FROM %s.hx_step_call c,"
					 "       LATERAL (SELECT w.op, w.n"
					 "                  FROM pg_catalog.jsonb_array_elements("
					 "                         CASE pg_catalog.jsonb_typeof(c.writes) WHEN 'array' THEN c.writes"
					 "                         ELSE pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object("
					 "                                'op', 'merge', 'path', '', 'value', c.writes)) END)"
					 "                       WITH ORDINALITY w(op, n)) o"
					 " WHERE c.stream OPERATOR(pg_catalog.=) $1 AND c.step OPERATOR(pg_catalog.=) $2",
					 nsp, nsp);
	plan = SPI_prepare(query, 2, types);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", query);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	if (SPI_execute_snapshot(plan, values, NULL, snapshot, InvalidSnapshot,
							 true, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read the staged calls");
	UnregisterSnapshot(snapshot);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	*calls = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	return DatumGetJsonbP(d);
}

PG_FUNCTION_INFO_V1(hx_promote);

Datum
hx_promote(PG_FUNCTION_ARGS)
{
	/* the statement that evaluates us: its snapshot's command id */
	CommandId	statement_cid = GetActiveSnapshot()->curcid;
	Datum		values[4];
	Oid			types[4] = {TEXTOID, TEXTOID, TEXTARRAYOID, JSONBOID};
	const char *nsp;
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	bool		promoted;
	Jsonb	   *writes;
	Datum		calls;
	MemoryContext callcxt = CurrentMemoryContext;
	Jsonb	   *result;

	values[0] = PointerGetDatum(PG_GETARG_TEXT_PP(0));
	values[1] = PointerGetDatum(PG_GETARG_TEXT_PP(1));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	nsp = quote_identifier(get_namespace_name(hx_extension_namespace()));

	/* a step that nothing was staged for promotes as nothing, once */
	run(psprintf("INSERT INTO %s.hx_step (stream, step) VALUES ($1, $2)"
				 " ON CONFLICT DO NOTHING", nsp),
		2, types, values, SPI_OK_INSERT);

	/* lock the step: wait for calls being staged and for other promotes */
	run(psprintf("SELECT s.xmin, s.cmin, s.promoted_at IS NOT NULL, s.promoted_writes"
				 "  FROM %s.hx_step s"
				 " WHERE s.stream OPERATOR(pg_catalog.=) $1"
				 "   AND s.step OPERATOR(pg_catalog.=) $2"
				 "   FOR UPDATE", nsp),
		2, types, values, SPI_OK_SELECT);
	if (SPI_processed != 1)
		elog(ERROR, "step row vanished while promoting");
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	promoted = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));

	if (promoted)
	{
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
			Datum		d = SPI_getbinval(tup, desc, 4, &isnull);

			d = SPI_datumTransfer(d, false, -1);
			SPI_finish();
			PG_RETURN_JSONB_P(DatumGetJsonbP(d));
		}
		else
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(callcxt);

			result = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("[]")));
			MemoryContextSwitchTo(oldcxt);
		}
		SPI_finish();
		PG_RETURN_JSONB_P(result);
	}

	writes = staged_writes(nsp, values, &calls);
	values[2] = calls;
	values[3] = JsonbPGetDatum(writes);
	run(psprintf("UPDATE %s.hx_step"
				 "   SET promoted_at = pg_catalog.now(), promoted_calls = $3, promoted_writes = $4"
				 " WHERE stream OPERATOR(pg_catalog.=) $1 AND step OPERATOR(pg_catalog.=) $2", nsp),
		4, types, values, SPI_OK_UPDATE);
	run(psprintf("DELETE FROM %s.hx_step_call"
				 " WHERE stream OPERATOR(pg_catalog.=) $1 AND step OPERATOR(pg_catalog.=) $2", nsp),
		2, types, values, SPI_OK_DELETE);
	result = (Jsonb *) DatumGetPointer(SPI_datumTransfer(JsonbPGetDatum(writes), false, -1));
	SPI_finish();
	PG_RETURN_JSONB_P(result);
}
