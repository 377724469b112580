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

#include "access/htup_details.h"
#include "access/table.h"
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
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "eventlog.h"
#include "names.h"
#include "ops.h"
#include "stream.h"
#include "trigger.h"

/*
 * The events a stream takes from a writer, and the members each needs.
 * State events (snapshots, deltas, messages) go to log streams only: a
 * table's row makes its own.  A run's events (its messages, tool calls and
 * reasoning as they are made, its steps, CUSTOM) go to log streams, and to
 * a row's stream through hx_stream_emit().  The members are AG-UI's.
 */
typedef enum MemberShape
{
	SHAPE_ANY,
	SHAPE_STRING,
	SHAPE_ARRAY,
	SHAPE_CONTENT				/* a string, or an array of content parts */
} MemberShape;

#define EVENT_MEMBERS 3

typedef struct EventRule
{
	const char *type;
	bool		run;			/* a run's event, not a state event */
	const char *members[EVENT_MEMBERS];
	MemberShape shapes[EVENT_MEMBERS];
} EventRule;

static const EventRule event_rules[] =
{
	{"STATE_SNAPSHOT", false, {"snapshot"}, {SHAPE_ANY}},
	{"STATE_DELTA", false, {"delta"}, {SHAPE_ARRAY}},
	{"MESSAGES_SNAPSHOT", false, {"messages"}, {SHAPE_ARRAY}},
	{"CUSTOM", true, {"name"}, {SHAPE_STRING}},
	{"TEXT_MESSAGE_START", true, {"messageId"}, {SHAPE_STRING}},
	{"TEXT_MESSAGE_CONTENT", true, {"messageId", "delta"}, {SHAPE_STRING, SHAPE_STRING}},
	{"TEXT_MESSAGE_END", true, {"messageId"}, {SHAPE_STRING}},
	{"TOOL_CALL_START", true, {"toolCallId", "toolCallName"}, {SHAPE_STRING, SHAPE_STRING}},
	{"TOOL_CALL_ARGS", true, {"toolCallId", "delta"}, {SHAPE_STRING, SHAPE_STRING}},
	{"TOOL_CALL_END", true, {"toolCallId"}, {SHAPE_STRING}},
	{"TOOL_CALL_RESULT", true, {"messageId", "toolCallId", "content"},
	{SHAPE_STRING, SHAPE_STRING, SHAPE_CONTENT}},
	{"REASONING_START", true, {"messageId"}, {SHAPE_STRING}},
	{"REASONING_MESSAGE_START", true, {"messageId"}, {SHAPE_STRING}},
	{"REASONING_MESSAGE_CONTENT", true, {"messageId", "delta"}, {SHAPE_STRING, SHAPE_STRING}},
	{"REASONING_MESSAGE_END", true, {"messageId"}, {SHAPE_STRING}},
	{"REASONING_END", true, {"messageId"}, {SHAPE_STRING}},
	{"STEP_STARTED", true, {"stepName"}, {SHAPE_STRING}},
	{"STEP_FINISHED", true, {"stepName"}, {SHAPE_STRING}},
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

static const char *
shape_name(MemberShape shape)
{
	switch (shape)
	{
		case SHAPE_STRING:
			return "a string";
		case SHAPE_ARRAY:
			return "an array";
		case SHAPE_CONTENT:
			return "a string or an array";
		default:
			return "a value";
	}
}

static bool
shape_fits(MemberShape shape, JsonbValue *v)
{
	bool		array = v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data);

	switch (shape)
	{
		case SHAPE_STRING:
			return v->type == jbvString;
		case SHAPE_ARRAY:
			return array;
		case SHAPE_CONTENT:
			return v->type == jbvString || array;
		default:
			return true;
	}
}

/* The list of types a place takes, for a message */
static char *
types_taken(bool row)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < (int) lengthof(event_rules); i++)
		if (!row || event_rules[i].run)
			appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", event_rules[i].type);
	return buf.data;
}

/*
 * Check an event that a writer sends, and return its type: an object with
 * a "type" that the stream takes (row: a table row's stream, which takes
 * a run's events only; else a log stream) and the members that type
 * needs, in their shapes.  "snapshot" is a STATE_SNAPSHOT's only, and
 * "delta" a STATE_DELTA's patch or a run event's fragment of text: replay
 * and followers read them by the event's type.  CUSTOM names beginning
 * with "hx." are hxstate's, but for hx.stream_end, which ends a log stream.
 */
const char *
hx_check_event(Jsonb *event, bool row)
{
	JsonbValue	v;
	char	   *type;
	const EventRule *rule = NULL;
	int			i;

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
	for (i = 0; i < (int) lengthof(event_rules); i++)
		if (strcmp(type, event_rules[i].type) == 0)
			rule = &event_rules[i];
	if (rule == NULL || (row && !rule->run))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 row ?
				 errmsg("a row's stream takes no \"%s\" events from a writer", hx_clip(type)) :
				 errmsg("a log stream takes no \"%s\" events", hx_clip(type)),
				 row ?
				 errdetail("A row's stream takes a run's events from a writer (%s); its state events come from the row's changes.",
						   types_taken(true)) :
				 errdetail("A log stream takes %s.", types_taken(false))));

	for (i = 0; i < EVENT_MEMBERS && rule->members[i]; i++)
	{
		if (!member(event, rule->members[i], &v))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s event has no member \"%s\"", type, rule->members[i])));
		if (!shape_fits(rule->shapes[i], &v))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("member \"%s\" of a %s event must be %s",
							rule->members[i], type, shape_name(rule->shapes[i])),
					 errdetail("It is of type %s.", value_type(&v))));
	}

	if (strcmp(type, "STATE_DELTA") == 0)
	{
		(void) member(event, "delta", &v);
		hx_patch_check(JsonbValueToJsonb(&v));
	}
	if (strcmp(type, "CUSTOM") == 0)
	{
		(void) member(event, "name", &v);
		if (v.val.string.len >= 3 && strncmp(v.val.string.val, "hx.", 3) == 0)
		{
			if (!row && v.val.string.len == 13 &&
				memcmp(v.val.string.val, "hx.stream_end", 13) == 0)
				check_stream_end(event);
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("CUSTOM event name \"%s\" is reserved",
								hx_clip(pnstrdup(v.val.string.val, v.val.string.len))),
						 row ?
						 errdetail("Names that begin with \"hx.\" are hxstate's own; a row's stream ends when the row is deleted.") :
						 errdetail("Names that begin with \"hx.\" are hxstate's own; a log stream may send \"hx.stream_end\".")));
		}
	}

	/* "snapshot" on its own type only, "delta" on its own and run events */
	if (strcmp(type, "STATE_SNAPSHOT") != 0 && member(event, "snapshot", &v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s event has a member \"snapshot\"", type),
				 errdetail("Member \"snapshot\" belongs to STATE_SNAPSHOT events.")));
	if (strcmp(type, "STATE_DELTA") != 0 &&
		(!rule->run || strcmp(type, "CUSTOM") == 0) && member(event, "delta", &v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s event has a member \"delta\"", type),
				 errdetail("Member \"delta\" belongs to STATE_DELTA events and to the fragments of a run's messages, tool calls and reasoning.")));
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
	type = hx_check_event(event, false);

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

/* ---------------------------------------------------------------------
 * hx_event_guard: what SQL may insert into the log
 * ---------------------------------------------------------------------
 */

/*
 * A column of the log's row, by name (a partition's columns may be laid
 * out otherwise); false when it is NULL, which the log's NOT NULL
 * constraints refuse once the BEFORE triggers are done.
 */
static bool
log_column(TriggerData *trigdata, const char *name, Datum *value)
{
	TupleDesc	desc = RelationGetDescr(trigdata->tg_relation);
	int			attnum = SPI_fnumber(desc, name);
	bool		isnull;

	if (attnum <= 0)
		elog(ERROR, "the log has no column \"%s\"", name);
	*value = heap_getattr(trigdata->tg_trigtuple, attnum, desc, &isnull);
	return !isnull;
}

/* The event's metadata must be {"stream": stream, "seq": seq} */
static void
check_metadata(Jsonb *event, const char *stream, int64 seq)
{
	JsonbValue	meta;
	JsonbValue	v;
	bool		ok = false;

	if (member(event, "metadata", &meta) && meta.type == jbvBinary &&
		JsonContainerIsObject(meta.val.binary.data) &&
		JsonContainerSize(meta.val.binary.data) == 2 &&
		getKeyJsonValueFromContainer(meta.val.binary.data, "stream", 6, &v) != NULL &&
		v.type == jbvString && v.val.string.len == (int) strlen(stream) &&
		memcmp(v.val.string.val, stream, v.val.string.len) == 0 &&
		getKeyJsonValueFromContainer(meta.val.binary.data, "seq", 3, &v) != NULL &&
		v.type == jbvNumeric)
		ok = DatumGetBool(DirectFunctionCall2(numeric_eq,
											  NumericGetDatum(v.val.numeric),
											  NumericGetDatum(int64_to_numeric(seq))));
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("event %lld of stream \"%s\" must have metadata {\"stream\": \"%s\", \"seq\": %lld}",
						(long long) seq, hx_clip(stream), hx_clip(stream), (long long) seq),
				 errdetail("Followers read an event's stream and seq from its metadata.")));
}

static Oid
log_owner(Oid logid)
{
	Relation	rel = table_open(logid, AccessShareLock);
	Oid			owner = rel->rd_rel->relowner;

	table_close(rel, AccessShareLock);
	return owner;
}

PG_FUNCTION_INFO_V1(hx_event_guard);

/*
 * hx_event_guard(): BEFORE INSERT FOR EACH ROW on hx_event.
 *
 * A role with INSERT on the log may log, through hx_stream (as a streamed
 * table's owner) and hx_stream_send (as itself).  What it inserts with SQL
 * of its own (INSERT, COPY) must be what hx_stream_send would have
 * written: an event of a log stream ("@<name>"; a table's streams are
 * written by their rows' triggers only), of a type that stream takes, with
 * the stream's next seq and its metadata, dated now (a stream's events are
 * dated in seq order, which finding its last seq relies on).  Otherwise a
 * writer could put a snapshot into another application's stream, reuse a
 * seq in another day's partition, or log seq 2^63-1 and stop the stream.
 * Where a row-level security policy on the log allows it only some
 * streams, it is confined to those.
 *
 * The extension's own writes are not checked here: they are made with the
 * next seq (eventlog.c writes them straight into the partition when this
 * is the log's only trigger, and lets through the one it inserts with SQL
 * otherwise).  Nor are those of superusers and of the log's owner (a
 * pg_restore of the log, say), who may disable the trigger anyway.
 */
Datum
hx_event_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = hx_trigger_data(fcinfo, "hx_event_guard");
	TriggerEvent ev = trigdata->tg_event;
	char	   *stream;
	int64		seq;
	char	   *type;
	const char *etype;
	Jsonb	   *event;
	TimestampTz created_at;
	int64		last_seq;
	TimestampTz last_at;
	Oid			logid;
	Datum		d[5];

	if (!TRIGGER_FIRED_FOR_ROW(ev) || !TRIGGER_FIRED_BEFORE(ev) ||
		!TRIGGER_FIRED_BY_INSERT(ev))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" must be BEFORE INSERT FOR EACH ROW",
						trigdata->tg_trigger->tgname)));

	if (!log_column(trigdata, "stream", &d[0]) || !log_column(trigdata, "seq", &d[1]) ||
		!log_column(trigdata, "type", &d[2]) || !log_column(trigdata, "event", &d[3]) ||
		!log_column(trigdata, "created_at", &d[4]))
		return PointerGetDatum(trigdata->tg_trigtuple);
	stream = TextDatumGetCString(d[0]);
	seq = DatumGetInt64(d[1]);
	if (hx_log_inserting(stream, seq))
		return PointerGetDatum(trigdata->tg_trigtuple);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	hx_log_prepare();
	logid = hx_log_relid();
	if (superuser() || has_privs_of_role(GetUserId(), log_owner(logid)))
	{
		SPI_finish();
		return PointerGetDatum(trigdata->tg_trigtuple);
	}

	if (stream[0] != HX_LOG_STREAM_MARK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to insert into stream \"%s\"", hx_clip(stream)),
				 errdetail("The events of a table's streams are written by the table's hx_stream trigger only."),
				 errhint("Log streams, named \"%c<name>\", take events from hx_stream_send().",
						 HX_LOG_STREAM_MARK)));
	check_log_stream_name(stream);
	type = TextDatumGetCString(d[2]);
	event = DatumGetJsonbP(d[3]);
	etype = hx_check_event(event, false);
	if (strcmp(type, etype) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("column \"type\" is \"%s\", but the event is of type \"%s\"",
						hx_clip(type), hx_clip(etype))));
	check_metadata(event, stream, seq);

	/* the stream's senders, serialised as hx_stream_send serialises them */
	lock_stream(logid, stream);
	hx_log_last(stream, &last_seq, &last_at);
	if (seq != last_seq + 1)
		ereport(ERROR,
				(errcode(ERRCODE_HX_OUT_OF_SEQUENCE),
				 errmsg("seq %lld is not the next of stream \"%s\"",
						(long long) seq, hx_clip(stream)),
				 errdetail("The stream's next seq is %lld.", (long long) (last_seq + 1)),
				 errhint("Append with hx_stream_send(), which takes the next seq.")));
	created_at = DatumGetTimestampTz(d[4]);
	if (created_at < last_at || created_at > GetCurrentTimestamp())
		ereport(ERROR,
				(errcode(ERRCODE_HX_OUT_OF_SEQUENCE),
				 errmsg("event %lld of stream \"%s\" is dated %s",
						(long long) seq, hx_clip(stream),
						created_at < last_at ? "before the stream's last event" : "in the future"),
				 errdetail("A stream's events are dated in the order of their seqs, up to now."),
				 errhint("Leave created_at to its default.")));
	SPI_finish();
	return PointerGetDatum(trigdata->tg_trigtuple);
}
