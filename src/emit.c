/*-------------------------------------------------------------------------
 *
 * emit.c
 *	  A run's events in a row's stream, as the run makes them:
 *
 *	  hx_stream_emit(table, key, events)	append events to the stream of
 *			the table's row with that key; the seq of the last
 *
 * A chat UI shows a model's answer as it is generated: its messages, tool
 * calls and reasoning arrive as AG-UI TEXT_MESSAGE_*, TOOL_CALL_* and
 * REASONING_* events long before the row's state holds the finished
 * message.  Written to the row's stream, between the state events its
 * changes make, they are as durable and as resumable as those: a follower
 * that reconnects in the middle of a message reads on from the next
 * fragment.  A writer sends a batch of them per call (one commit for many
 * tokens), and writes the finished message into the state as usual.
 *
 * The row is locked as an UPDATE of it locks it (FOR NO KEY UPDATE), with
 * the caller's privileges and row-level security: a caller that may not
 * update the row may not add to its stream, and the row lock serialises
 * these events with the events of the row's changes, so that seqs stay
 * gap-free and in commit order.  The events are then logged as the
 * hx_stream trigger logs a change, as the table's owner, and notified as
 * its payload option says.
 *
 * src/emit.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "eventlog.h"
#include "stream.h"

/*
 * Lock the row of rel whose key is keytext, as the caller, and return its
 * stream; an error when there is no such row that the caller may update.
 */
static char *
lock_row(Relation rel, StreamArgs *args, const char *keytext)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Oid			typinput;
	Oid			typioparam;
	Oid			argtype = args->key_typid;
	Datum		key;
	char	   *query;
	bool		isnull;
	char	   *stream;

	getTypeInputInfo(args->key_typid, &typinput, &typioparam);
	key = OidInputFunctionCall(typinput, (char *) keytext, typioparam, -1);
	query = psprintf("SELECT t.%s FROM %s.%s t WHERE t.%s %s $1 FOR NO KEY UPDATE OF t",
					 quote_identifier(NameStr(TupleDescAttr(desc, args->key_attnum - 1)->attname)),
					 quote_identifier(get_namespace_name(RelationGetNamespace(rel))),
					 quote_identifier(RelationGetRelationName(rel)),
					 quote_identifier(NameStr(TupleDescAttr(desc, args->key_attnum - 1)->attname)),
					 hx_equality_operator(args->key_typid));
	if (SPI_execute_with_args(query, 1, &argtype, &key, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not lock the row of relation \"%s\"",
			 RelationGetRelationName(rel));
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("relation \"%s\" has no row with key \"%s\"",
						RelationGetRelationName(rel), hx_clip(keytext)),
				 errdetail("A run's events go into the stream of an existing row that the caller may update.")));
	key = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	Assert(!isnull);
	stream = psprintf("%s:%s", args->prefix,
					  OidOutputFunctionCall(args->key_typoutput, key));
	SPI_freetuptable(SPI_tuptable);
	return stream;
}

PG_FUNCTION_INFO_V1(hx_stream_emit);

/*
 * hx_stream_emit(source regclass, key text, events jsonb) -> bigint: append
 * a run's events (a JSON array of AG-UI events) to the stream of source's
 * row with that key, all or none; the seq of the last one (the stream's
 * last seq when the array is empty).
 */
Datum
hx_stream_emit(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *key;
	Jsonb	   *events;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	List	   *checked = NIL;
	List	   *types = NIL;
	ListCell   *lc1;
	ListCell   *lc2;
	Relation	rel;
	StreamArgs *args;
	char	   *stream;
	Oid			save_userid;
	int			save_sec_context;
	Oid			owner;
	Oid			logid;
	int64		seq;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table, key and events must not be null")));
	PreventCommandIfReadOnly("hx_stream_emit()");
	relid = PG_GETARG_OID(0);
	key = text_to_cstring(PG_GETARG_TEXT_PP(1));
	events = hx_detoast_jsonb(PG_GETARG_DATUM(2));
	if (!JB_ROOT_IS_ARRAY(events) || JB_ROOT_IS_SCALAR(events))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("events must be a JSON array of AG-UI events")));

	/* every event checked before anything is written */
	it = JsonbIteratorInit(&events->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		Jsonb	   *event;

		CHECK_FOR_INTERRUPTS();
		if (tok != WJB_ELEM)
			continue;
		event = JsonbValueToJsonb(&v);
		types = lappend(types, (void *) hx_check_event(event, true));
		checked = lappend(checked, event);
	}

	rel = table_open(relid, AccessShareLock);
	args = hx_stream_args(rel, hx_stream_trigger_of(rel), CurrentMemoryContext);
	owner = rel->rd_rel->relowner;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	stream = lock_row(rel, args, key);
	hx_log_prepare();
	logid = hx_log_relid();

	/* logged as the table's owner, as the trigger logs the row's changes */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	if (pg_class_aclcheck(logid, owner, ACL_INSERT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", get_rel_name(logid)),
				 errdetail("The events of relation \"%s\" are logged with the privileges of its owner, role \"%s\".",
						   RelationGetRelationName(rel), GetUserNameFromId(owner, false))));
	LockRelationOid(logid, RowExclusiveLock);

	seq = 0;
	forboth(lc1, checked, lc2, types)
	{
		HxNode	   *body = hx_node_from_jsonb((Jsonb *) lfirst(lc1));

		CHECK_FOR_INTERRUPTS();
		hx_node_expand(body);
		seq = hx_stream_emit_as(args->payload, stream, (const char *) lfirst(lc2), body);
	}
	if (checked == NIL)
		seq = hx_log_next_seq(stream) - 1;

	SetUserIdAndSecContext(save_userid, save_sec_context);
	SPI_finish();
	table_close(rel, NoLock);
	PG_RETURN_INT64(seq);
}
