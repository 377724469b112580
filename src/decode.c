/*-------------------------------------------------------------------------
 *
 * decode.c
 *	  The output plugin "hxstate": logical decoding of the event log's
 *	  inserts, one message per transaction.
 *
 * A follower that decodes the WAL wants one thing of it: each event
 * inserted into hx_event (its stream, seq and JSON text), at its
 * transaction's commit.  pgoutput sends that as three messages per
 * transaction (BEGIN, INSERT, COMMIT) plus a RELATION message per table
 * and session, each one a CopyData message the receiver wakes up for,
 * frames and parses.  This plugin sends one message per transaction that
 * inserted events, holding them until the commit, and nothing for the
 * others.  A slot names it by the library's name:
 *
 *	 CREATE_REPLICATION_SLOT s TEMPORARY LOGICAL hxstate NOEXPORT_SNAPSHOT
 *	 START_REPLICATION SLOT s LOGICAL 0/0 (proto_version '1')
 *
 * Options: proto_version (required; '1' is this format) and max_tx_bytes
 * (the bytes of event text sent per transaction, 16 MB by default: past
 * them an event goes without its text, and the follower reads it from the
 * log, as pgoutput's followers do past their own bound).
 *
 * Format, version 1 (integers in network byte order), the payload of
 * each XLogData message:
 *
 *	 Byte1 'P' (part) or 'C' (commit)
 *	 'C' only: Int64 the transaction's end LSN (what a follower confirms),
 *			   Int64 its commit time (microseconds since 2000-01-01)
 *	 Int32 the number of events that follow, and for each:
 *	   Int32 n, then n bytes: the stream (UTF-8 in a UTF-8 database)
 *	   Int64 seq
 *	   Int32 n, the length of the event's JSON text, as jsonb's output
 *		 function writes it
 *	   Byte1 1 when the text follows (n bytes), 0 when it does not (the
 *		 transaction's events passed max_tx_bytes)
 *
 * A transaction whose events pass HX_DECODE_PART_BYTES of message is sent
 * as 'P' messages and a last 'C': so the walsender holds at most that
 * much of it.  A follower hands a transaction's events on at its 'C' only
 * (pg_failover_slots holds each message back until the standbys have its
 * own position, so only the commit's says they have the whole
 * transaction).
 *
 * Which relations are the log: hx_event and its partitions hx_event_<n>
 * in the extension's schema, with columns stream text, seq bigint and
 * event jsonb.  What was found of a relation is kept per relation OID
 * until the relation cache says it changed.
 *
 * Memory: the plugin's state lives in a context made at startup, a child
 * of the decoding context (freed with it); the transaction's pending
 * message in a child of that, kept across transactions (reset, not
 * freed); each change's work in a context reset after the change.  The
 * relation cache is in CacheMemoryContext, as the relation cache callback
 * that reaches it outlives any decoding session (it cannot be removed):
 * a session that ends in an error frees its decoding context without a
 * shutdown callback, and the cache it leaves must stay valid memory until
 * the next session's startup or the process's end.
 *
 * src/decode.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "libpq/pqformat.h"
#include "replication/logical.h"
#include "replication/output_plugin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "hxstate.h"

extern PGDLLEXPORT void _PG_output_plugin_init(OutputPluginCallbacks *cb);

#define HX_DECODE_PROTO_VERSION 1
#define HX_DECODE_MAX_TX_BYTES	(16 * 1024 * 1024)
#define HX_DECODE_PART_BYTES	(1024 * 1024)
/* a message holds one event's text, or a part: within MaxAllocSize */
#define HX_DECODE_MAX_TX_BYTES_MAX	((int64) MaxAllocSize / 2)

/* What is known of a relation: is it the log, and where are its columns */
typedef struct LogRelation
{
	Oid			relid;			/* hash key */
	bool		valid;
	bool		is_log;
	AttrNumber	stream;
	AttrNumber	seq;
	AttrNumber	event;
} LogRelation;

typedef struct DecodeState
{
	MemoryContext context;		/* this struct */
	MemoryContext txcontext;	/* pending */
	MemoryContext changecontext;	/* a change's work, reset after it */
	HTAB	   *relations;		/* Oid -> LogRelation, in CacheMemoryContext */
	int64		max_tx_bytes;
	StringInfoData pending;		/* the events not sent yet */
	int32		count;			/* ... how many */
	int64		text_bytes;		/* event text sent so far this transaction */
	bool		sent_part;		/* a 'P' went out this transaction */
#if PG_VERSION_NUM < 160000
	int			changes;		/* changes since the walsender last heard */
#endif
} DecodeState;

/*
 * PostgreSQL 15's walsender learns of a transaction's progress only from
 * the plugin: one that skips a long run of changes (a bulk update of other
 * tables) must say so now and then, or its receiver's wal_sender_timeout
 * may pass without a message.  Every HX_DECODE_PROGRESS_CHANGES changes,
 * as pgoutput does in 15; from 16 on, the server does it itself.
 */
#define HX_DECODE_PROGRESS_CHANGES 100

/*
 * The relation cache of the session being decoded (one per process: a
 * walsender decodes one slot), for the invalidation callback, which is
 * registered once per process and cannot be removed.
 */
static HTAB *relation_cache = NULL;
static bool callback_registered = false;

static void
relation_invalidated(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	LogRelation *entry;

	if (relation_cache == NULL)
		return;
	if (OidIsValid(relid))
	{
		entry = hash_search(relation_cache, &relid, HASH_FIND, NULL);
		if (entry != NULL)
			entry->valid = false;
		return;
	}
	hash_seq_init(&status, relation_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
		entry->valid = false;
}

static int64
parse_number_option(DefElem *elem, int64 min, int64 max, const char *what)
{
	char	   *text = defGetString(elem);
	char	   *end;
	long long	v;

	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for option \"%s\" of output plugin \"hxstate\": \"%s\"",
						elem->defname, hx_clip(text)),
				 errdetail("It is %s from " INT64_FORMAT " to " INT64_FORMAT ".",
						   what, min, max)));
	return (int64) v;
}

static void
decode_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt,
			   bool is_init)
{
	MemoryContext context;
	DecodeState *state;
	HASHCTL		hctl;
	ListCell   *lc;
	bool		have_version = false;

	context = AllocSetContextCreate(ctx->context, "hxstate decoding",
									ALLOCSET_SMALL_SIZES);
	state = MemoryContextAllocZero(context, sizeof(DecodeState));
	state->context = context;
	state->txcontext = AllocSetContextCreate(context, "hxstate decoding transaction",
											 ALLOCSET_DEFAULT_SIZES);
	state->changecontext = AllocSetContextCreate(context, "hxstate decoding change",
												 ALLOCSET_DEFAULT_SIZES);
	state->max_tx_bytes = HX_DECODE_MAX_TX_BYTES;

	opt->output_type = OUTPUT_PLUGIN_BINARY_OUTPUT;
	opt->receive_rewrites = false;
	ctx->output_plugin_private = state;

	/* CREATE_REPLICATION_SLOT starts the plugin without options */
	if (!is_init)
	{
		foreach(lc, ctx->output_plugin_options)
		{
			DefElem    *elem = lfirst(lc);

			if (strcmp(elem->defname, "proto_version") == 0)
			{
				if (parse_number_option(elem, 0, PG_INT32_MAX, "a version number") != HX_DECODE_PROTO_VERSION)
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("output plugin \"hxstate\" does not speak protocol version %s",
									hx_clip(defGetString(elem))),
							 errdetail("This library speaks version %d.", HX_DECODE_PROTO_VERSION)));
				have_version = true;
			}
			else if (strcmp(elem->defname, "max_tx_bytes") == 0)
				state->max_tx_bytes = parse_number_option(elem, 0, HX_DECODE_MAX_TX_BYTES_MAX, "a number of bytes");
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("unrecognized option \"%s\" of output plugin \"hxstate\"",
								hx_clip(elem->defname)),
						 errhint("The options are proto_version and max_tx_bytes.")));
		}
		if (!have_version)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("output plugin \"hxstate\" needs option \"proto_version\""),
					 errhint("START_REPLICATION SLOT name LOGICAL 0/0 (proto_version '%d').",
							 HX_DECODE_PROTO_VERSION)));
	}

	/* one left by a session that ended in an error */
	if (relation_cache != NULL)
	{
		hash_destroy(relation_cache);
		relation_cache = NULL;
	}
	MemSet(&hctl, 0, sizeof(hctl));
	hctl.keysize = sizeof(Oid);
	hctl.entrysize = sizeof(LogRelation);
	hctl.hcxt = CacheMemoryContext;
	state->relations = hash_create("hxstate decoding relations", 64, &hctl,
								   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	relation_cache = state->relations;
	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(relation_invalidated, (Datum) 0);
		callback_registered = true;
	}

	{
		MemoryContext old = MemoryContextSwitchTo(state->txcontext);

		initStringInfo(&state->pending);
		MemoryContextSwitchTo(old);
	}
}

static void
decode_shutdown(LogicalDecodingContext *ctx)
{
	DecodeState *state = ctx->output_plugin_private;

	if (state == NULL)
		return;
	if (relation_cache == state->relations)
	{
		hash_destroy(relation_cache);
		relation_cache = NULL;
	}
	MemoryContextDelete(state->context);
	ctx->output_plugin_private = NULL;
}

static void
reset_transaction(DecodeState *state)
{
	/* a transaction that was large leaves its buffer large: start small */
	if (state->pending.maxlen > HX_DECODE_PART_BYTES * 2)
	{
		MemoryContext old;

		MemoryContextReset(state->txcontext);
		old = MemoryContextSwitchTo(state->txcontext);
		initStringInfo(&state->pending);
		MemoryContextSwitchTo(old);
	}
	else
		resetStringInfo(&state->pending);
	state->count = 0;
	state->text_bytes = 0;
	state->sent_part = false;
}

static void
decode_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn)
{
	reset_transaction(ctx->output_plugin_private);
}

/* Is relid a relation of the extension's schema named hx_event or hx_event_<digits>? */
static bool
is_log_name(Relation relation)
{
	const char *name = RelationGetRelationName(relation);
	Oid			nspoid = hx_extension_namespace_if_installed();

	if (!OidIsValid(nspoid) || RelationGetNamespace(relation) != nspoid)
		return false;
	if (strncmp(name, "hx_event", 8) != 0)
		return false;
	if (name[8] == '\0')
		return true;
	if (name[8] != '_' || name[9] == '\0')
		return false;
	for (name += 9; *name; name++)
		if (*name < '0' || *name > '9')
			return false;
	return true;
}

static LogRelation *
log_relation(DecodeState *state, Relation relation)
{
	Oid			relid = RelationGetRelid(relation);
	LogRelation *entry;
	bool		found;
	TupleDesc	desc;

	entry = hash_search(state->relations, &relid, HASH_ENTER, &found);
	if (found && entry->valid)
		return entry;
	entry->valid = true;
	entry->is_log = false;
	entry->stream = entry->seq = entry->event = InvalidAttrNumber;
	if (relation->rd_rel->relkind != RELKIND_RELATION || !is_log_name(relation))
		return entry;
	desc = RelationGetDescr(relation);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		const char *name = NameStr(att->attname);

		if (att->attisdropped)
			continue;
		if (strcmp(name, "stream") == 0 && att->atttypid == TEXTOID)
			entry->stream = att->attnum;
		else if (strcmp(name, "seq") == 0 && att->atttypid == INT8OID)
			entry->seq = att->attnum;
		else if (strcmp(name, "event") == 0 && att->atttypid == JSONBOID)
			entry->event = att->attnum;
	}
	entry->is_log = entry->stream != InvalidAttrNumber &&
		entry->seq != InvalidAttrNumber && entry->event != InvalidAttrNumber;
	return entry;
}

/* Send what is pending as a 'P' message */
static void
send_part(LogicalDecodingContext *ctx, DecodeState *state)
{
	OutputPluginPrepareWrite(ctx, true);
	pq_sendbyte(ctx->out, 'P');
	pq_sendint32(ctx->out, state->count);
	appendBinaryStringInfo(ctx->out, state->pending.data, state->pending.len);
	OutputPluginWrite(ctx, true);
	resetStringInfo(&state->pending);
	state->count = 0;
	state->sent_part = true;
}

static void
decode_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			  Relation relation, ReorderBufferChange *change)
{
	DecodeState *state = ctx->output_plugin_private;
	LogRelation *log;
	HeapTuple	tuple;
	TupleDesc	desc;
	MemoryContext old;
	Datum		d;
	bool		isnull;
	text	   *stream;
	Jsonb	   *event;
	StringInfoData json;
	int64		seq;
	bool		with_text;

#if PG_VERSION_NUM < 160000
	if (++state->changes >= HX_DECODE_PROGRESS_CHANGES)
	{
		OutputPluginUpdateProgress(ctx, false);
		state->changes = 0;
	}
#endif
	if (change->action != REORDER_BUFFER_CHANGE_INSERT)
		return;
	log = log_relation(state, relation);
	if (!log->is_log)
		return;
	tuple = hx_change_newtuple(change);
	if (tuple == NULL)
		return;
	desc = RelationGetDescr(relation);

	old = MemoryContextSwitchTo(state->changecontext);

	d = heap_getattr(tuple, log->stream, desc, &isnull);
	if (isnull)
		goto done;
	stream = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(d));
	d = heap_getattr(tuple, log->seq, desc, &isnull);
	if (isnull)
		goto done;
	seq = DatumGetInt64(d);
	d = heap_getattr(tuple, log->event, desc, &isnull);
	if (isnull)
		goto done;
	event = DatumGetJsonbP(d);
	initStringInfo(&json);
	JsonbToCString(&json, &event->root, VARSIZE(event));

	with_text = state->text_bytes + json.len <= state->max_tx_bytes;
	if (with_text)
		state->text_bytes += json.len;

	/*
	 * What is pending goes out first if this event would take it past a
	 * part's size: the walsender holds a part, or one event, at most.
	 */
	if (state->pending.len > 0 &&
		(int64) state->pending.len + 17 + VARSIZE_ANY_EXHDR(stream) +
		(with_text ? json.len : 0) > HX_DECODE_PART_BYTES)
		send_part(ctx, state);

	MemoryContextSwitchTo(state->txcontext);
	pq_sendint32(&state->pending, VARSIZE_ANY_EXHDR(stream));
	appendBinaryStringInfo(&state->pending, VARDATA_ANY(stream), VARSIZE_ANY_EXHDR(stream));
	pq_sendint64(&state->pending, seq);
	pq_sendint32(&state->pending, json.len);
	pq_sendbyte(&state->pending, with_text ? 1 : 0);
	if (with_text)
		appendBinaryStringInfo(&state->pending, json.data, json.len);
	state->count++;
	MemoryContextSwitchTo(state->changecontext);

	if (state->pending.len >= HX_DECODE_PART_BYTES)
		send_part(ctx, state);

done:
	MemoryContextSwitchTo(old);
	MemoryContextReset(state->changecontext);
}

static void
decode_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			  XLogRecPtr commit_lsn)
{
	DecodeState *state = ctx->output_plugin_private;

#if PG_VERSION_NUM < 160000
	/* skipped (nothing sent) or not: the walsender may confirm progress */
	OutputPluginUpdateProgress(ctx, state->count == 0 && !state->sent_part);
	state->changes = 0;
#endif
	if (state->count == 0 && !state->sent_part)
		return;
	OutputPluginPrepareWrite(ctx, true);
	pq_sendbyte(ctx->out, 'C');
	pq_sendint64(ctx->out, txn->end_lsn);
	pq_sendint64(ctx->out, txn->xact_time.commit_time);
	pq_sendint32(ctx->out, state->count);
	appendBinaryStringInfo(ctx->out, state->pending.data, state->pending.len);
	OutputPluginWrite(ctx, true);
	reset_transaction(state);
}

void
_PG_output_plugin_init(OutputPluginCallbacks *cb)
{
	AssertVariableIsOfType(&_PG_output_plugin_init, LogicalOutputPluginInit);

	cb->startup_cb = decode_startup;
	cb->begin_cb = decode_begin;
	cb->change_cb = decode_change;
	cb->commit_cb = decode_commit;
	cb->shutdown_cb = decode_shutdown;
}
