/*-------------------------------------------------------------------------
 *
 * history.c
 *	  hx_stream_state_at(stream, seq) -> jsonb: a stream's state as it was
 *	  right after its event seq, rebuilt from the event log.
 *
 * The log holds, per stream, a snapshot (STATE_SNAPSHOT: the row was
 * inserted, or its key came back) followed by deltas (STATE_DELTA: the RFC
 * 6902 patch of each change), and hx.stream_end where the row went away.
 * The state after seq is the last snapshot at or before seq with every
 * delta after it, up to seq, applied in order (JSON null after an end).
 * The deltas are applied to one tree by the op-list engine, and the result
 * encoded once, so a long run of deltas costs their size, not the
 * document's size times their number.
 *
 * A seq the stream has not reached is an error (22023); so is one whose
 * snapshot or deltas were trimmed from the log (XH301): hx_stream_trim
 * keeps a contiguous tail of each stream, and a state before that tail
 * cannot be rebuilt.
 *
 * src/history.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "ops.h"

/* Events read per round trip of the cursor */
#define HISTORY_BATCH	1000

/* The member of an event, or false when it has none */
static bool
event_member(Jsonb *event, const char *member, JsonbValue *v)
{
	return getKeyJsonValueFromContainer(&event->root, member, strlen(member), v) != NULL;
}

static bool
is_stream_end(Jsonb *event)
{
	JsonbValue	type;
	JsonbValue	name;

	return event_member(event, "type", &type) && type.type == jbvString &&
		type.val.string.len == 6 && memcmp(type.val.string.val, "CUSTOM", 6) == 0 &&
		event_member(event, "name", &name) && name.type == jbvString &&
		name.val.string.len == 13 && memcmp(name.val.string.val, "hx.stream_end", 13) == 0;
}

static void
error_trimmed(const char *stream, int64 seq, int64 first)
{
	ereport(ERROR,
			(errcode(ERRCODE_HX_TRIMMED),
			 errmsg("the state of stream \"%s\" at seq %lld is no longer in the event log",
					hx_clip(stream), (long long) seq),
			 first > 0 ?
			 errdetail("The log holds this stream from seq %lld, without a snapshot the state at seq %lld can be rebuilt from.",
					   (long long) first, (long long) seq) :
			 errdetail("The log holds none of this stream's events up to seq %lld.",
					   (long long) seq),
			 errhint("Trimming removed it (hx_stream_trim); keep the log longer to look further back.")));
}

PG_FUNCTION_INFO_V1(hx_stream_state_at);

Datum
hx_stream_state_at(PG_FUNCTION_ARGS)
{
	char	   *stream = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		seq = PG_GETARG_INT64(1);
	MemoryContext callcxt = CurrentMemoryContext;
	const char *nsp;
	Oid			types[2] = {TEXTOID, INT8OID};
	Datum		values[2];
	int64		last;
	int64		start;
	int64		first;
	bool		isnull;
	Datum		d;
	Portal		portal;
	HxOpList	ops;
	bool		begun = false;
	bool		ended PG_USED_FOR_ASSERTS_ONLY = false;
	int64		expect;
	Jsonb	   *result;

	values[0] = CStringGetTextDatum(stream);
	values[1] = Int64GetDatum(seq);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	nsp = quote_identifier(get_namespace_name(hx_extension_namespace()));

	/* the stream's last seq, its first in the log, and where to start */
	if (SPI_execute_with_args(psprintf("SELECT coalesce(pg_catalog.max(e.seq), 0), coalesce(pg_catalog.min(e.seq), 0),"
									   "       (SELECT pg_catalog.max(s.seq) FROM %s.hx_event s"
									   "         WHERE s.stream OPERATOR(pg_catalog.=) $1 AND s.seq OPERATOR(pg_catalog.<=) $2"
									   "           AND (s.type OPERATOR(pg_catalog.=) 'STATE_SNAPSHOT'"
									   "                OR (s.type OPERATOR(pg_catalog.=) 'CUSTOM'"
									   "                    AND s.event OPERATOR(pg_catalog.->>) 'name' OPERATOR(pg_catalog.=) 'hx.stream_end')))"
									   "  FROM %s.hx_event e WHERE e.stream OPERATOR(pg_catalog.=) $1",
									   nsp, nsp),
							  2, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read stream \"%s\"", stream);
	last = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	first = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
	start = isnull ? 0 : DatumGetInt64(d);

	if (seq < 1 || seq > last)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stream \"%s\" has no event %lld", hx_clip(stream), (long long) seq),
				 last > 0 ?
				 errdetail("Its events go from 1 to %lld.", (long long) last) :
				 errdetail("It has no events.")));
	if (start == 0)
		error_trimmed(stream, seq, first);

	/* replay from the snapshot (or end) on, in seq order */
	values[1] = Int64GetDatum(start);
	portal = SPI_cursor_open_with_args(NULL,
									   psprintf("SELECT e.seq, e.event FROM %s.hx_event e"
												" WHERE e.stream OPERATOR(pg_catalog.=) $1"
												"   AND e.seq OPERATOR(pg_catalog.>=) $2"
												" ORDER BY e.seq", nsp),
									   2, types, values, NULL, true, 0);
	expect = start;
	while (expect <= seq)
	{
		uint64		i;

		SPI_cursor_fetch(portal, true, HISTORY_BATCH);
		if (SPI_processed == 0)
			break;
		for (i = 0; i < SPI_processed && expect <= seq; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			int64		s = DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
			Jsonb	   *event = DatumGetJsonbP(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull));
			JsonbValue	v;
			MemoryContext oldcxt;

			CHECK_FOR_INTERRUPTS();
			if (s != expect)
				error_trimmed(stream, seq, first);
			oldcxt = MemoryContextSwitchTo(callcxt);
			if (event_member(event, "snapshot", &v))
			{
				/* a snapshot: the state starts over from it */
				if (begun)
					(void) hx_ops_end(&ops, callcxt);
				hx_ops_begin(&ops, HX_OPS_PATCH,
							 hx_node_to_jsonb(hx_node_from_value(&v), callcxt),
							 0, NULL, NULL);
				begun = true;
				ended = false;
			}
			else if (is_stream_end(event))
			{
				if (begun)
					(void) hx_ops_end(&ops, callcxt);
				begun = false;
				ended = true;
			}
			else if (begun)
			{
				/*
				 * A delta: applied to the tree, which keeps pointing into it,
				 * so it is copied out of the cursor's batch into the tree's
				 * memory first.
				 */
				Jsonb	   *copy = MemoryContextAlloc(ops.treecxt, VARSIZE(event));

				memcpy(copy, event, VARSIZE(event));
				if (event_member(copy, "delta", &v))
				{
					Assert(v.type == jbvBinary);
					hx_patch_apply(&ops, v.val.binary.data);
				}
			}
			MemoryContextSwitchTo(oldcxt);
			expect++;
		}
	}
	SPI_cursor_close(portal);
	if (expect <= seq)
		error_trimmed(stream, seq, first);	/* trimmed while we read */

	if (!begun)
	{
		SPI_finish();
		Assert(ended);
		PG_RETURN_JSONB_P(DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
															 CStringGetDatum("null"))));
	}
	result = hx_ops_end(&ops, callcxt);
	SPI_finish();
	PG_RETURN_JSONB_P(result);
}
