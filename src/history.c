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
 * cannot be rebuilt.  An event that the log's type column marks as the
 * snapshot or end to start from, but that is neither, is reported
 * (XX001), as a delta that is not an array is: the log takes rows from
 * whoever may insert into it.
 *
 * Memory is bounded by the state and one event, whatever the length of
 * the log replayed:
 *	- events are read through a cursor, HISTORY_BATCH rows at a time, and
 *	  each batch is freed before the next (a large event is a TOAST
 *	  pointer in the batch, so a batch stays small);
 *	- each event is detoasted into a context reset after it
 *	  (eventcxt); a delta is handed to the op engine as a list it may not
 *	  keep (hx_patch_apply_copy), which copies it into the tree's memory;
 *	- the snapshot and the op engine's tree live in statecxt, emptied when
 *	  a later snapshot or an end starts the state over.  The tree's memory
 *	  (the state, garbage, copies of deltas) is compacted by the engine
 *	  past its threshold (ops.c), and compaction frees only the engine's
 *	  own memory (ops.h: the memory contract).
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
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "ops.h"

/*
 * Events read per round trip of the cursor.  A batch holds the events'
 * rows as stored: inline values of at most about a page, larger ones as
 * TOAST pointers, so a batch is a few megabytes at most.
 */
#define HISTORY_BATCH	256

/* A replay in progress */
typedef struct Replay
{
	const char *stream;
	int64		seq;			/* the event being replayed, or 0 */
	MemoryContext statecxt;		/* the snapshot and the tree */
	Jsonb	   *snapshot;		/* the document the tree started from */
	HxOpList	ops;
	bool		begun;			/* ops holds a state */
	bool		ended;			/* the last event seen was an end */
} Replay;

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

/*
 * The event the replay starts from, which the log's type column marks as
 * a snapshot or an end, is neither (a row written to hx_event by something
 * other than hx_stream and hx_stream_send, which check their events).
 */
static void
error_no_start(Replay *r)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("event %lld of stream \"%s\" is neither a snapshot nor an end of the stream",
					(long long) r->seq, hx_clip(r->stream)),
			 errdetail("Its row in the log has the type of one, but the event has no member \"snapshot\" and is no CUSTOM \"hx.stream_end\" event.")));
}

static void
replay_error_context(void *arg)
{
	Replay	   *r = (Replay *) arg;

	if (r->seq > 0)
		errcontext("replaying event %lld of stream \"%s\"",
				   (long long) r->seq, hx_clip(r->stream));
}

/* Forget the state replayed so far */
static void
replay_drop_state(Replay *r)
{
	if (r->begun)
		hx_ops_abandon(&r->ops);
	MemoryContextReset(r->statecxt);
	r->snapshot = NULL;
	r->begun = false;
}

/* Is the event's type the string type (of len bytes)? */
static bool
is_type(Jsonb *event, const char *type, int len)
{
	JsonbValue	v;

	return event_member(event, "type", &v) && v.type == jbvString &&
		v.val.string.len == len && memcmp(v.val.string.val, type, len) == 0;
}

/*
 * Replay one event, detoasted in a short-lived context that is reset once
 * this returns: nothing kept may point into it.  Events are told apart by
 * their type: a stream holds a run's events too (messages and tool calls
 * as they were made, whose fragments are "delta" strings), which leave the
 * state as it is.
 */
static void
replay_event(Replay *r, Jsonb *event)
{
	JsonbValue	v;

	if (is_type(event, "STATE_SNAPSHOT", 14) && event_member(event, "snapshot", &v))
	{
		/* a snapshot: the state starts over from it, copied */
		MemoryContext oldcxt;

		replay_drop_state(r);
		oldcxt = MemoryContextSwitchTo(r->statecxt);
		r->snapshot = hx_node_to_jsonb(hx_node_from_value(&v), r->statecxt);
		hx_ops_begin(&r->ops, HX_OPS_PATCH, r->snapshot, 0, NULL, NULL);
		MemoryContextSwitchTo(oldcxt);
		r->begun = true;
		r->ended = false;
	}
	else if (is_stream_end(event))
	{
		replay_drop_state(r);
		r->ended = true;
	}
	else if (r->begun && is_type(event, "STATE_DELTA", 11) &&
			 event_member(event, "delta", &v))
	{
		if (v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("the delta of event %lld of stream \"%s\" is not an array",
							(long long) r->seq, hx_clip(r->stream))));
		hx_patch_apply_copy(&r->ops, v.val.binary.data, v.val.binary.len);
	}
}

PG_FUNCTION_INFO_V1(hx_stream_state_at);

Datum
hx_stream_state_at(PG_FUNCTION_ARGS)
{
	char	   *stream = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		seq = PG_GETARG_INT64(1);
	MemoryContext callcxt = CurrentMemoryContext;
	MemoryContext eventcxt;
	const char *nsp;
	Oid			types[3] = {TEXTOID, INT8OID, INT8OID};
	Datum		values[3];
	int64		last;
	int64		start;
	int64		first;
	bool		isnull;
	Datum		d;
	Portal		portal;
	Replay		r;
	ErrorContextCallback errcallback;
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
	SPI_freetuptable(SPI_tuptable);

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
	memset(&r, 0, sizeof(Replay));
	r.stream = stream;
	r.statecxt = AllocSetContextCreate(callcxt, "hx_stream_state_at state",
									   ALLOCSET_DEFAULT_SIZES);
	eventcxt = AllocSetContextCreate(callcxt, "hx_stream_state_at event",
									 ALLOCSET_DEFAULT_SIZES);
	errcallback.callback = replay_error_context;
	errcallback.arg = &r;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	/* the events from start to seq, and no further: later ones are not read */
	values[1] = Int64GetDatum(start);
	values[2] = Int64GetDatum(seq);
	portal = SPI_cursor_open_with_args(NULL,
									   psprintf("SELECT e.seq, e.event FROM %s.hx_event e"
												" WHERE e.stream OPERATOR(pg_catalog.=) $1"
												"   AND e.seq OPERATOR(pg_catalog.>=) $2"
												"   AND e.seq OPERATOR(pg_catalog.<=) $3"
												" ORDER BY e.seq", nsp),
									   3, types, values, NULL, true, 0);
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
			Datum		event = SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull);
			MemoryContext oldcxt;

			CHECK_FOR_INTERRUPTS();
			if (s != expect)
				error_trimmed(stream, seq, first);
			r.seq = s;
			oldcxt = MemoryContextSwitchTo(eventcxt);
			replay_event(&r, hx_detoast_jsonb(event));
			MemoryContextSwitchTo(oldcxt);
			MemoryContextReset(eventcxt);
			if (s == start && !r.begun && !r.ended)
				error_no_start(&r);
			r.seq = 0;
			expect++;
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	SPI_finish();				/* back in callcxt */
	error_context_stack = errcallback.previous;
	if (expect <= seq)
		error_trimmed(stream, seq, first);	/* trimmed while we read */

	if (!r.begun)
	{
		Assert(r.ended);
		result = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("null")));
	}
	else
	{
		result = hx_ops_end(&r.ops, callcxt);
		if (result == r.snapshot)
			result = (Jsonb *) DatumGetPointer(datumCopy(PointerGetDatum(result), false, -1));
	}
	MemoryContextDelete(r.statecxt);
	MemoryContextDelete(eventcxt);
	PG_RETURN_JSONB_P(result);
}
