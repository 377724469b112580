/*-------------------------------------------------------------------------
 *
 * send.c
 *	  Log streams: streams that no table's hx_stream trigger writes, for
 *	  writers without a row (a LangGraph checkpointer keeping a thread's
 *	  state as deltas, say):
 *
 *	  hx_stream_send(stream, event)	append an AG-UI event, return its seq
 *
 * A log stream is named "@<name>": no table's stream can be (a table's
 * default name begins with a letter, '_' or '"', and stream=<name> options
 * may not begin with '@'), so a log stream never shares a name, nor seqs,
 * with a table's rows.
 *
 * Its events are what followers of tables' streams read: STATE_SNAPSHOT
 * (with "snapshot"), STATE_DELTA (with "delta", an RFC 6902 patch),
 * MESSAGES_SNAPSHOT (with "messages") and CUSTOM (with "name"), checked
 * before they are logged.  "snapshot" and "delta" appear on their own
 * types only, and CUSTOM names beginning with "hx." are hxstate's, but for
 * hx.stream_end, which ends a log stream as a deleted row ends a table's
 * (with a reason), so that hx_stream_state_at replays a log stream as it
 * replays a table's.
 *
 * The sender writes the log as itself: it needs INSERT on hx_event, and
 * row-level security on the log applies to it.  A lock on the stream, held
 * to the end of the transaction (as hx_stage's per step), serialises its
 * senders: each gets the next seq, without gaps, in commit order.  Every
 * event gets metadata {stream, seq} and a timestamp, as hx_stream's, and
 * the NOTIFY hint that hx_stream sends by default (a reference).
 *
 * src/send.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"

#include "eventlog.h"
#include "names.h"
#include "ops.h"
#include "stream.h"

/* The events a log stream takes, and the member each needs */
static const struct
{
	const char *type;
	const char *member;
	enum jbvType shape;			/* jbvArray, jbvString, or jbvNull: any */
}			log_events[] =
{
	{"STATE_SNAPSHOT", "snapshot", jbvNull},
	{"STATE_DELTA", "delta", jbvArray},
	{"MESSAGES_SNAPSHOT", "messages", jbvArray},
	{"CUSTOM", "name", jbvString},
};

/* A log stream is "@<name>" */
static void
check_log_stream_name(const char *stream)
{
	if (stream[0] != HX_LOG_STREAM_MARK || stream[1] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stream \"%s\" is not a log stream", hx_clip(stream)),
				 errdetail("Log streams are named \"%c<name>\"; other names are those of tables' streams.",
						   HX_LOG_STREAM_MARK),
				 stream[0] != HX_LOG_STREAM_MARK ?
				 errhint("Send to \"%c%s\".", HX_LOG_STREAM_MARK, hx_clip(stream)) : 0));
}

/* The member of the event object, or false */
static bool
member(Jsonb *event, const char *key, JsonbValue *v)
{
	return getKeyJsonValueFromContainer(&event->root, key, strlen(key), v) != NULL;
}

/* A JSON value's type for a message */
static const char *
value_type(JsonbValue *v)
{
	if (v->type == jbvBinary)
		return JsonContainerIsArray(v->val.binary.data) ? "array" :
			JsonContainerIsObject(v->val.binary.data) ? "object" : "scalar";
	return hx_value_type_name(v);
}

/*
 * The end of a log stream, as hx_stream ends a row's: {"type": "CUSTOM",
 * "name": "hx.stream_end", "value": {"reason": <a string>}}.  Followers
 * hand it out as the end of the stream, and replay makes the state null
 * until the stream's next STATE_SNAPSHOT.
 */
static void
check_stream_end(Jsonb *event)
{
	JsonbValue	value;
	JsonbValue	reason;

	if (!member(event, "value", &value) || value.type != jbvBinary ||
		!JsonContainerIsObject(value.val.binary.data) ||
		getKeyJsonValueFromContainer(value.val.binary.data, "reason", 6, &reason) == NULL ||
		reason.type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hx.stream_end event needs a value with a string \"reason\""),
				 errdetail("A log stream ends with {\"type\": \"CUSTOM\", \"name\": \"hx.stream_end\", \"value\": {\"reason\": \"...\"}}.")));
}

/*
 * Check an event for a log stream, and return its type: an object with a
 * "type" that a log stream takes and the member that type needs, in its
 * shape, and no member that another type has.
 */
static const char *
check_log_event(Jsonb *event)
{
	JsonbValue	v;
	char	   *type;
	int			t;
	int			i;
	int			ntypes = (int) lengthof(log_events);

	if (JB_ROOT_IS_SCALAR(event) || !JB_ROOT_IS_OBJECT(event))
	{
		hx_jsonb_root_value(event, &v);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("event must be a JSON object"),
				 errdetail("The event is of type %s.",
						   JB_ROOT_IS_SCALAR(event) ? hx_value_type_name(&v) : "array")));
	}
	if (!member(event, "type", &v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("event has no member \"type\"")));
	if (v.type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("member \"type\" of the event must be a string"),
				 errdetail("It is of type %s.", value_type(&v))));
	type = pnstrdup(v.val.string.val, v.val.string.len);
	for (t = 0; t < ntypes; t++)
		if (strcmp(type, log_events[t].type) == 0)
			break;
	if (t == ntypes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a log stream takes no \"%s\" events", hx_clip(type)),
				 errdetail("A log stream takes STATE_SNAPSHOT, STATE_DELTA, MESSAGES_SNAPSHOT and CUSTOM events.")));

	if (!member(event, log_events[t].member, &v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s event has no member \"%s\"", type, log_events[t].member)));
	if (log_events[t].shape == jbvArray &&
		!(v.type == jbvBinary && JsonContainerIsArray(v.val.binary.data)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("member \"%s\" of a %s event must be an array",
						log_events[t].member, type),
				 errdetail("It is of type %s.", value_type(&v))));
	if (log_events[t].shape == jbvString && v.type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("member \"%s\" of a %s event must be a string",
						log_events[t].member, type),
				 errdetail("It is of type %s.", value_type(&v))));

	if (strcmp(type, "STATE_DELTA") == 0)
		hx_patch_check(JsonbValueToJsonb(&v));
	if (strcmp(type, "CUSTOM") == 0 && v.val.string.len >= 3 &&
		strncmp(v.val.string.val, "hx.", 3) == 0)
	{
		if (v.val.string.len == 13 &&
			memcmp(v.val.string.val, "hx.stream_end", 13) == 0)
			check_stream_end(event);
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("CUSTOM event name \"%s\" is reserved",
							hx_clip(pnstrdup(v.val.string.val, v.val.string.len))),
					 errdetail("Names that begin with \"hx.\" are hxstate's own; a log stream may send \"hx.stream_end\".")));
	}

	/* "snapshot" and "delta" on their own types only: replay reads them */
	for (i = 0; i < 2; i++)
		if (i != t && member(event, log_events[i].member, &v))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s event has a member \"%s\"", type, log_events[i].member),
					 errdetail("Member \"%s\" belongs to %s events.",
							   log_events[i].member, log_events[i].type)));
	return type;
}

/*
 * The sender writes the log as itself: INSERT on hx_event, on the table or
 * on each of its columns, as core checks it
 */
static void
check_insert_privilege(Oid relid)
{
	Oid			userid = GetUserId();

	if (pg_class_aclcheck(relid, userid, ACL_INSERT) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(relid, userid, ACL_INSERT, ACLMASK_ALL) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, get_rel_name(relid));
}

/* Serialise the stream's senders, to the end of the transaction */
static void
lock_stream(Oid logid, const char *stream)
{
	LOCKTAG		tag;
	uint32		h = DatumGetUInt32(hash_any((const unsigned char *) stream,
											strlen(stream)));

	SET_LOCKTAG_OBJECT(tag, MyDatabaseId, logid, h, 0);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

PG_FUNCTION_INFO_V1(hx_stream_send);

/*
 * hx_stream_send(stream text, event jsonb) -> bigint: append event to the
 * log stream, as the stream's next event; its seq.
 */
Datum
hx_stream_send(PG_FUNCTION_ARGS)
{
	char	   *stream;
	Jsonb	   *event;
	const char *type;
	HxNode	   *body;
	Oid			logid;
	int64		seq;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("stream and event must not be null")));
	/* a write, refused where writes are (before the stream is locked) */
	PreventCommandIfReadOnly("hx_stream_send()");
	stream = text_to_cstring(PG_GETARG_TEXT_PP(0));
	event = hx_detoast_jsonb(PG_GETARG_DATUM(1));
	check_log_stream_name(stream);
	type = check_log_event(event);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	hx_log_prepare();
	logid = hx_log_relid();
	check_insert_privilege(logid);
	lock_stream(logid, stream);

	body = hx_node_from_jsonb(event);
	hx_node_expand(body);
	seq = hx_stream_emit_ref(stream, type, body);
	SPI_finish();
	PG_RETURN_INT64(seq);
}
