/*-------------------------------------------------------------------------
 *
 * stream.c
 *	  Every committed change of a row's state, streamed to LISTEN clients as
 *	  AG-UI events that a client can resume without gaps:
 *
 *	  hx_stream(state_column, key_column [, option ...])	AFTER INSERT OR
 *			UPDATE OR DELETE FOR EACH ROW trigger
 *	  hx_stream_snapshot(table, key)	a stream's (stream, seq, state), read
 *			in one snapshot
 *	  hx_stream_channel(stream)			the LISTEN channel of a stream
 *
 * Each row is one stream, named "<prefix>:<key>": the prefix is the
 * table's name, qualified unless its schema is public, or the trigger's
 * stream=<name> option, and no two tables share one (names.c).  INSERT emits
 * STATE_SNAPSHOT, UPDATE emits STATE_DELTA (the hx_diff of the old and new
 * state; an UPDATE that changes nothing emits nothing), DELETE emits a
 * CUSTOM "hx.stream_end" event; an UPDATE of the key ends one stream and
 * starts another.  Every event carries metadata {stream, seq}: seq starts
 * at 1 and has no gaps, because it is the stream's last seq in the event
 * log plus one, read while the row lock serialises the stream's writers,
 * and the log row commits or aborts with the change itself.
 *
 * The event log (hx_event) is the source of truth; NOTIFY only wakes
 * followers up.  Any role can LISTEN, and any role can NOTIFY, so a
 * payload is a hint that followers check against the log, never content:
 * by default (payload=ref) it is a reference {ref, seq, type, stream}
 * (without the stream when its name would not fit NOTIFY's payload),
 * which tells a listener that a stream has an event, not what the event
 * says.  "payload=auto" sends the event when it is shorter than NOTIFY's
 * limit (else a reference), for tables whose state every role may see.
 * When pg_notification_queue_usage() passes hxstate.notify_queue_threshold
 * the trigger stops notifying, rather than letting a stuck listener make
 * writers' commits fail, and clients catch up from the log.
 *
 * The log is written with the privileges of the table's owner, as core's
 * foreign-key triggers check with the privileges of the table's owner:
 * roles that write the table need no privilege on the log, and only roles
 * the administrator grants INSERT on it can write events.
 *
 * src/stream.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/relation.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "common/md5.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "diff.h"
#include "doc.h"
#include "eventlog.h"
#include "names.h"
#include "stream.h"
#include "pointer.h"
#include "trigger.h"

/* async.c's NOTIFY_PAYLOAD_MAX_LENGTH: a payload must be shorter */
#define HX_NOTIFY_PAYLOAD_MAX	8000

/* Events are turned into text to see whether they fit only below this */
#define HX_NOTIFY_TRY_TEXT		(4 * HX_NOTIFY_PAYLOAD_MAX)

static double notify_queue_threshold = 0.5;

void
hx_stream_init(void)
{
	DefineCustomRealVariable("hxstate.notify_queue_threshold",
							 "Fill level of the NOTIFY queue above which hx_stream stops notifying.",
							 "Between 0 and 1, a fraction of the queue as pg_notification_queue_usage() reports it. "
							 "Above it, events still go to the event log, from which clients catch up, "
							 "but writers no longer risk commits that fail on a full queue.",
							 &notify_queue_threshold,
							 0.5, 0.0, 1.0,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	MarkGUCPrefixReserved("hxstate");
	hx_log_init();
	hx_names_init();
}

/* ---------------------------------------------------------------------
 * Streams and channels
 * ---------------------------------------------------------------------
 */

/*
 * The channel of a stream: "hx:<stream>" when that fits in an identifier
 * (NAMEDATALEN - 1 bytes), else "hx:<as much of the stream as fits>#<16
 * hex digits of its MD5>", so that long keys still get channels of their
 * own.  hx_stream_channel() gives clients the same name.
 */
static char *
stream_channel(const char *stream)
{
	int			len = strlen(stream);
	char		md5[33];		/* 32 hex digits */
	const char *errstr = NULL;
	int			keep;

	if (3 + len <= NAMEDATALEN - 1)
		return psprintf("hx:%s", stream);
	if (!pg_md5_hash(stream, len, md5, &errstr))
		elog(ERROR, "could not compute MD5 hash: %s", errstr);
	keep = pg_mbcliplen(stream, len, NAMEDATALEN - 1 - 3 - 1 - 16);
	return psprintf("hx:%.*s#%.16s", keep, stream, md5);
}

PG_FUNCTION_INFO_V1(hx_stream_channel);

Datum
hx_stream_channel(PG_FUNCTION_ARGS)
{
	char	   *stream = text_to_cstring(PG_GETARG_TEXT_PP(0));

	PG_RETURN_TEXT_P(cstring_to_text(stream_channel(stream)));
}

/* ---------------------------------------------------------------------
 * Arguments
 * ---------------------------------------------------------------------
 */

/* Is there a unique index on exactly this one column? */
static bool
has_unique_index(Relation rel, AttrNumber attnum)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	bool		found = false;

	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		Form_pg_index idx;

		if (!HeapTupleIsValid(tup))
			continue;
		idx = (Form_pg_index) GETSTRUCT(tup);
		if (idx->indisunique && idx->indimmediate && idx->indnkeyatts == 1 &&
			idx->indkey.values[0] == attnum &&
			heap_attisnull(tup, Anum_pg_index_indpred, NULL))
			found = true;
		ReleaseSysCache(tup);
		if (found)
			break;
	}
	list_free(indexes);
	return found;
}

/*
 * Parse trigger tg's arguments on rel: state column, key column, then
 * options "arrays=append|replace|index", "payload=auto|ref|none" and
 * "stream=<name>".  The result is allocated in cxt.
 */
StreamArgs *
hx_stream_args(Relation rel, Trigger *tg, MemoryContext cxt)
{
	StreamArgs *args = MemoryContextAllocZero(cxt, sizeof(StreamArgs));
	TupleDesc	desc = RelationGetDescr(rel);
	char	   *prefix;
	Oid			tableid;
	AttrNumber	table_attnum;
	Relation	table;
	bool		unique;
	bool		isvarlena;
	int			i;

	if (tg->tgnargs < 2)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" must name a state column and a key column",
						tg->tgname),
				 errhint("EXECUTE FUNCTION hx_stream('state', 'session_id') streams column \"state\" of each row, keyed by \"session_id\".")));

	args->state_attnum = hx_trigger_column(rel, tg->tgargs[0]);
	args->state_doc = hx_doc_is_type(TupleDescAttr(desc, args->state_attnum - 1)->atttypid);
	if (TupleDescAttr(desc, args->state_attnum - 1)->atttypid != JSONBOID && !args->state_doc)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of relation \"%s\" is of type %s, not jsonb or hxdoc",
						tg->tgargs[0], RelationGetRelationName(rel),
						format_type_be(TupleDescAttr(desc, args->state_attnum - 1)->atttypid)),
				 errdetail("Trigger \"%s\" streams it as agent state.", tg->tgname)));
	args->key_attnum = hx_trigger_column(rel, tg->tgargs[1]);
	args->key_typid = TupleDescAttr(desc, args->key_attnum - 1)->atttypid;
	getTypeOutputInfo(args->key_typid, &args->key_typoutput, &isvarlena);

	/*
	 * NOTIFY sends a reference by default, a hint that any role can LISTEN
	 * to; the event itself only when asked (payload=auto).  0.5.0 sent the
	 * event by default, and its scripts keep that until updated.
	 */
	args->legacy = hx_extension_version() < 600;
	args->mode = HX_ARRAYS_APPEND;
	args->payload = args->legacy ? PAYLOAD_AUTO : PAYLOAD_REF;
	for (i = 2; i < tg->tgnargs; i++)
	{
		const char *opt = tg->tgargs[i];
		const char *eq = strchr(opt, '=');
		const char *value = eq ? eq + 1 : "";
		int			namelen = eq ? (int) (eq - opt) : (int) strlen(opt);

		if (namelen == 6 && strncmp(opt, "arrays", 6) == 0)
			args->mode = hx_parse_array_mode(value);
		else if (namelen == 7 && strncmp(opt, "payload", 7) == 0)
		{
			if (strcmp(value, "auto") == 0)
				args->payload = PAYLOAD_AUTO;
			else if (strcmp(value, "ref") == 0)
				args->payload = PAYLOAD_REF;
			else if (strcmp(value, "none") == 0)
				args->payload = PAYLOAD_NONE;
			else
				ereport(ERROR,
						(errcode(ERRCODE_HX_MALFORMED),
						 errmsg("unrecognized payload mode \"%s\" in trigger \"%s\"",
								hx_clip(value), tg->tgname),
						 errhint("The payload mode must be auto, ref or none.")));
		}
		else if (namelen == 6 && strncmp(opt, "stream", 6) == 0 && value[0] != '\0')
		{
			if (value[0] == HX_LOG_STREAM_MARK)
				ereport(ERROR,
						(errcode(ERRCODE_HX_MALFORMED),
						 errmsg("stream name \"%s\" of trigger \"%s\" begins with \"%c\"",
								hx_clip(value), tg->tgname, HX_LOG_STREAM_MARK),
						 errdetail("Stream names that begin with \"%c\" are those of log streams, which hx_stream_send writes.",
								   HX_LOG_STREAM_MARK)));
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_HX_MALFORMED),
					 errmsg("unrecognized option \"%s\" in trigger \"%s\"",
							hx_clip(opt), tg->tgname),
					 errhint("Options are arrays=append|replace|index, payload=auto|ref|none and stream=<name>.")));
	}

	/*
	 * The streams' names, unique per table (names.c), and one stream per
	 * key: the key must be unique in the table whose rows the streams are
	 * (the root of a partition tree, or with stream=<name> the table the
	 * trigger was created on).  The names hold while the registry's
	 * generation, read first, stays the same.
	 */
	args->names_generation = hx_stream_names_generation();
	prefix = hx_stream_trigger_prefix(tg->tgoid, args->legacy, &tableid);
	table = (tableid == RelationGetRelid(rel)) ? rel :
		relation_open(tableid, AccessShareLock);
	table_attnum = get_attnum(tableid, tg->tgargs[1]);
	unique = table_attnum > 0 && has_unique_index(table, table_attnum);
	if (table != rel)
		relation_close(table, AccessShareLock);
	if (!unique)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
				 errmsg("column \"%s\" of relation \"%s\" has no unique index",
						tg->tgargs[1], get_rel_name(tableid)),
				 errdetail("Trigger \"%s\" names one stream per key, so the key must be unique.",
						   tg->tgname),
				 errhint("Stream by the primary key, or add a unique constraint on the key column.")));
	args->prefix = MemoryContextStrdup(cxt, prefix);
	args->source = tableid;
	return args;
}

/*
 * The arguments of the trigger being fired (an HxTriggerArgsParser): they
 * depend on the table whose rows the streams are too (its unique index)
 */
static void *
parse_stream_trigger_args(TriggerData *trigdata, MemoryContext cxt)
{
	StreamArgs *args = hx_stream_args(trigdata->tg_relation,
									  trigdata->tg_trigger, cxt);

	if (args->source != RelationGetRelid(trigdata->tg_relation))
		hx_trigger_args_depend_on(args->source);
	return args;
}

/*
 * Do kept arguments still name the streams as the registry does (an
 * HxTriggerArgsValid)?  A table renamed, moved to another schema or into
 * a partition tree, or another table now streaming under the same names,
 * derives the prefixes again.
 */
static bool
stream_args_valid(void *args)
{
	return ((StreamArgs *) args)->names_generation == hx_stream_names_generation();
}

/* The stream of a row: "<prefix>:<key>", or NULL when the key is NULL */
char *
hx_row_stream(StreamArgs *args, HeapTuple tuple, TupleDesc desc)
{
	bool		isnull;
	Datum		key = heap_getattr(tuple, args->key_attnum, desc, &isnull);

	if (isnull)
		return NULL;
	return psprintf("%s:%s", args->prefix,
					OidOutputFunctionCall(args->key_typoutput, key));
}

/* ---------------------------------------------------------------------
 * Events
 * ---------------------------------------------------------------------
 */

static HxNode *
int_node(int64 v)
{
	return hx_node_new_numeric(int64_to_numeric(v));
}

static HxNode *
string_node(const char *s)
{
	return hx_node_new_string(s, strlen(s));
}

/* Milliseconds since the Unix epoch, as AG-UI's timestamp */
static int64
now_ms(void)
{
	TimestampTz now = GetCurrentTimestamp();

	return now / 1000 +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
}

/*
 * An AG-UI event {"type": type, <body members>, "timestamp": ms,
 * "metadata": {"stream": stream, "seq": seq}} as jsonb.
 */
static Jsonb *
build_event(const char *type, HxNode *body, const char *stream, int64 seq)
{
	HxNode	   *meta = hx_node_new_object(2);
	HxNode	   *ev = body;

	hx_object_set(meta, "seq", 3, int_node(seq));
	hx_object_set(meta, "stream", 6, string_node(stream));
	hx_object_set(ev, "type", 4, string_node(type));
	hx_object_set(ev, "timestamp", 9, int_node(now_ms()));
	hx_object_set(ev, "metadata", 8, meta);
	return hx_node_to_jsonb(ev, CurrentMemoryContext);
}

/*
 * {"ref": true, "seq": n, "type": "...", "stream": "..."}, or without the
 * stream when its name, escaped as JSON, would not fit NOTIFY's payload (a
 * key of 1,400 control characters escapes to 8,400 bytes): NOTIFY would
 * refuse it, and with it the write.  A hint that names no stream makes a
 * follower read the heads of its streams on the channel, which is the
 * stream's own (hx_stream_channel hashes a long name).
 */
static char *
ref_payload(const char *stream, int64 seq, const char *type)
{
	StringInfoData buf;
	int			before_stream;

	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"ref\": true, \"seq\": %lld, \"type\": ",
					 (long long) seq);
	escape_json(&buf, type);
	before_stream = buf.len;
	appendStringInfoString(&buf, ", \"stream\": ");
	escape_json(&buf, stream);
	if (buf.len + 1 >= HX_NOTIFY_PAYLOAD_MAX)
	{
		buf.len = before_stream;
		buf.data[buf.len] = '\0';
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

static double
notify_queue_usage(void)
{
	LOCAL_FCINFO(fcinfo, 0);

	InitFunctionCallInfoData(*fcinfo, NULL, 0, InvalidOid, NULL, NULL);
	return DatumGetFloat8(pg_notification_queue_usage(fcinfo));
}

static void
notify_event(PayloadMode mode, const char *stream, int64 seq,
			 const char *type, Jsonb *event)
{
	char	   *payload = NULL;

	if (mode == PAYLOAD_NONE)
		return;
	/* at 1 the queue never passes the threshold: skip asking */
	if (notify_queue_threshold < 1.0 &&
		notify_queue_usage() > notify_queue_threshold)
	{
		ereport(DEBUG1,
				(errmsg_internal("hx_stream: NOTIFY queue usage above hxstate.notify_queue_threshold, event %lld of stream \"%s\" is in the log only",
								 (long long) seq, stream)));
		return;
	}
	if (mode == PAYLOAD_AUTO && VARSIZE(event) < HX_NOTIFY_TRY_TEXT)
	{
		payload = JsonbToCString(NULL, &event->root, VARSIZE(event));
		if (strlen(payload) >= HX_NOTIFY_PAYLOAD_MAX)
			payload = NULL;
	}
	if (payload == NULL)
		payload = ref_payload(stream, seq, type);
	Async_Notify(stream_channel(stream), payload);
}

/*
 * Log and notify one event of stream (the log prepared, the stream's
 * writers serialised); body, an unpacked object, gets the common members.
 * Its seq.
 */
int64
hx_stream_emit_as(PayloadMode mode, const char *stream, const char *type, HxNode *body)
{
	int64		seq = hx_log_next_seq(stream);
	Jsonb	   *event = build_event(type, body, stream, seq);

	hx_log_insert(stream, seq, type, event);
	notify_event(mode, stream, seq, type, event);
	return seq;
}

static void
emit(StreamArgs *args, const char *stream, const char *type, HxNode *body)
{
	(void) hx_stream_emit_as(args->payload, stream, type, body);
}

/* An event of a log stream (send.c), notified as a reference */
int64
hx_stream_emit_ref(const char *stream, const char *type, HxNode *body)
{
	return hx_stream_emit_as(PAYLOAD_REF, stream, type, body);
}

static Jsonb *
state_jsonb(StreamArgs *args, HeapTuple tuple, TupleDesc desc)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, args->state_attnum, desc, &isnull);

	if (!isnull)
		return args->state_doc ? hx_doc_to_jsonb(d) : hx_detoast_jsonb(d);
	/* a NULL state is JSON null to clients */
	return hx_node_to_jsonb(hx_node_new_null(), CurrentMemoryContext);
}

static void
emit_snapshot(StreamArgs *args, const char *stream, Jsonb *state)
{
	HxNode	   *body = hx_node_new_object(5);

	hx_object_set(body, "snapshot", 8, hx_node_from_jsonb(state));
	emit(args, stream, "STATE_SNAPSHOT", body);
}

static void
emit_end(StreamArgs *args, const char *stream, const char *reason,
		 const char *next)
{
	HxNode	   *body = hx_node_new_object(5);
	HxNode	   *value = hx_node_new_object(2);

	hx_object_set(value, "reason", 6, string_node(reason));
	if (next)
		hx_object_set(value, "next", 4, string_node(next));
	hx_object_set(body, "name", 4, string_node("hx.stream_end"));
	hx_object_set(body, "value", 5, value);
	emit(args, stream, "CUSTOM", body);
}

/*
 * Would a JavaScript client refuse this pointer?  fast-json-patch, which
 * AG-UI clients apply deltas with, refuses any path through a member
 * "__proto__", or through a member "prototype" of a member "constructor"
 * (prototype pollution), and the client then keeps its old state.
 */
static bool
path_refused_by_clients(const char *path, int len)
{
	HxPointer	ptr;
	int			i;

	hx_pointer_parse(&ptr, path, len, HX_PTR_PATH);
	for (i = 0; i < ptr.ntokens; i++)
	{
		if (strcmp(ptr.tokens[i].s, "__proto__") == 0)
			return true;
		if (i > 0 && strcmp(ptr.tokens[i].s, "prototype") == 0 &&
			strcmp(ptr.tokens[i - 1].s, "constructor") == 0)
			return true;
	}
	return false;
}

/* Does a delta (an array node of ops, as hx_diff_nodes makes) name one? */
static bool
delta_refused_by_clients(HxNode *delta)
{
	int			i;

	for (i = 0; i < delta->u.arr.n; i++)
	{
		HxNode	   *path = hx_node_get_member(delta->u.arr.elems[i], "path", 4);

		Assert(path != NULL && hx_node_shape(path) == HXS_STRING);
		if (path_refused_by_clients(path->u.scalar.val.string.val,
									path->u.scalar.val.string.len))
			return true;
	}
	return false;
}

/*
 * The event of an UPDATE that changed the state: a STATE_DELTA, or a
 * STATE_SNAPSHOT where a standard client would refuse the delta, so that
 * every follower stays exact whatever the keys.
 */
static void
emit_change(StreamArgs *args, const char *stream, Jsonb *oldstate,
			Jsonb *newstate)
{
	HxNode	   *delta = hx_diff_nodes(oldstate, newstate, args->mode);
	HxNode	   *body;

	if (delta->u.arr.n == 0)
		return;					/* equal as JSON values */
	if (delta_refused_by_clients(delta))
	{
		emit_snapshot(args, stream, newstate);
		return;
	}
	body = hx_node_new_object(5);
	hx_object_set(body, "delta", 5, delta);
	emit(args, stream, "STATE_DELTA", body);
}

/* ---------------------------------------------------------------------
 * The trigger
 * ---------------------------------------------------------------------
 */

/*
 * Does another hx_stream trigger of rel name the row's stream "stream"
 * (a table may stream under two names)?
 */
static bool
other_trigger_names(Relation rel, Trigger *self, StreamArgs *args,
					HeapTuple tuple, const char *stream)
{
	TriggerDesc *td = rel->trigdesc;
	int			i;

	for (i = 0; td && i < td->numtriggers; i++)
	{
		Trigger    *tg = &td->triggers[i];
		FmgrInfo	finfo;
		Oid			source;
		AttrNumber	attnum;
		bool		isnull;
		Datum		key;
		Oid			typoutput;
		bool		isvarlena;
		char	   *prefix;

		if (tg->tgoid == self->tgoid || tg->tgnargs < 2)
			continue;
		fmgr_info(tg->tgfoid, &finfo);
		if (finfo.fn_addr != hx_stream)
			continue;
		attnum = SPI_fnumber(RelationGetDescr(rel), tg->tgargs[1]);
		if (attnum <= 0)
			continue;
		key = heap_getattr(tuple, attnum, RelationGetDescr(rel), &isnull);
		if (isnull)
			continue;
		prefix = hx_stream_trigger_prefix(tg->tgoid, args->legacy, &source);
		getTypeOutputInfo(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid,
						  &typoutput, &isvarlena);
		if (strcmp(psprintf("%s:%s", prefix, OidOutputFunctionCall(typoutput, key)),
				   stream) == 0)
			return true;
	}
	return false;
}

/*
 * A row that the statement that wrote it changed with the writes of a step
 * (hx_promote) must be a row of the step's stream: the statement promoted
 * steps of the row's stream (stream, or when its key changed oldstream),
 * or none at all.  The statement is the one whose command id the row
 * version carries.
 */
static void
check_promoted(TriggerData *trigdata, StreamArgs *args, HeapTuple tuple,
			   const char *stream, const char *oldstream)
{
	HeapTupleHeader tup = tuple->t_data;
	const char *other = NULL;
	HxPromoted p;

	if (!TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmin(tup)))
		return;					/* not a row version of ours (cannot happen) */
	p = hx_promoted(HeapTupleHeaderGetCmin(tup), stream, &other);
	if (p != HX_PROMOTED_OTHERS)
		return;
	if (oldstream &&
		hx_promoted(HeapTupleHeaderGetCmin(tup), oldstream, &other) == HX_PROMOTED_STREAM)
		return;
	if (other_trigger_names(trigdata->tg_relation, trigdata->tg_trigger, args,
							tuple, other))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_HX_WRONG_ROW),
			 errmsg("row of stream \"%s\" cannot take the writes of a step of stream \"%s\"",
					hx_clip(stream), hx_clip(other)),
			 errdetail("The statement that changed the row promoted steps of other streams only."),
			 errhint("Promote a step in the UPDATE of its own stream's row."),
			 errtable(trigdata->tg_relation)));
}

static void
check_log_privileges(Relation rel)
{
	Oid			owner = rel->rd_rel->relowner;
	Oid			event_relid = hx_log_relid();

	if (pg_class_aclcheck(event_relid, owner, ACL_INSERT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", get_rel_name(event_relid)),
				 errdetail("Streamed changes of relation \"%s\" are logged with the privileges of its owner, role \"%s\".",
						   RelationGetRelationName(rel),
						   GetUserNameFromId(owner, false)),
				 errhint("GRANT INSERT ON %s.hx_event TO %s;",
						 quote_identifier(get_namespace_name(get_rel_namespace(event_relid))),
						 quote_identifier(GetUserNameFromId(owner, false)))));
}

PG_FUNCTION_INFO_V1(hx_stream);

Datum
hx_stream(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata;
	TriggerEvent ev;
	Relation	rel;
	TupleDesc	desc;
	StreamArgs *args;
	MemoryContext workcxt;
	MemoryContext oldcxt;
	Oid			save_userid;
	int			save_sec_context;

	trigdata = hx_trigger_data(fcinfo, "hx_stream");
	ev = trigdata->tg_event;
	rel = trigdata->tg_relation;
	desc = RelationGetDescr(rel);
	if (!TRIGGER_FIRED_FOR_ROW(ev) || !TRIGGER_FIRED_AFTER(ev) ||
		TRIGGER_FIRED_BY_TRUNCATE(ev))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" must be AFTER INSERT OR UPDATE OR DELETE FOR EACH ROW",
						trigdata->tg_trigger->tgname),
				 errdetail("A stream reports rows as they are stored, after every BEFORE trigger.")));

	workcxt = AllocSetContextCreate(CurrentMemoryContext, "hx_stream",
									ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(workcxt);

	hx_log_prepare();
	check_log_privileges(rel);

	/*
	 * The lock on the log that writing the event takes anyway, taken before
	 * the arguments are read: they depend on the installed version of the
	 * scripts (the names of streams), and ALTER EXTENSION hxstate UPDATE
	 * renames the streams under a lock that stops writers, so a writer that
	 * waited for it reads the new version.
	 */
	LockRelationOid(hx_log_relid(), RowExclusiveLock);
	args = hx_trigger_args_checked(fcinfo, trigdata, parse_stream_trigger_args,
								   stream_args_valid);

	/* write the log as the table's owner; an error restores the user */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(rel->rd_rel->relowner,
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE);

	if (TRIGGER_FIRED_BY_INSERT(ev))
	{
		char	   *stream = hx_row_stream(args, trigdata->tg_trigtuple, desc);

		if (stream)
		{
			check_promoted(trigdata, args, trigdata->tg_trigtuple, stream, NULL);
			emit_snapshot(args, stream,
						  state_jsonb(args, trigdata->tg_trigtuple, desc));
		}
	}
	else if (TRIGGER_FIRED_BY_DELETE(ev))
	{
		char	   *stream = hx_row_stream(args, trigdata->tg_trigtuple, desc);

		if (stream)
			emit_end(args, stream, "deleted", NULL);
	}
	else
	{
		HeapTuple	oldtup = trigdata->tg_trigtuple;
		HeapTuple	newtup = trigdata->tg_newtuple;
		char	   *oldstream = hx_row_stream(args, oldtup, desc);
		char	   *newstream = hx_row_stream(args, newtup, desc);

		if (oldstream && newstream && strcmp(oldstream, newstream) == 0)
		{
			bool		oldnull;
			bool		newnull;
			Datum		oldd = heap_getattr(oldtup, args->state_attnum, desc, &oldnull);
			Datum		newd = heap_getattr(newtup, args->state_attnum, desc, &newnull);

			/* the same bytes (or TOAST pointer): no change, no event */
			if (oldnull != newnull ||
				(!oldnull && !datumIsEqual(oldd, newd, false, -1)))
			{
				check_promoted(trigdata, args, newtup, newstream, NULL);
				emit_change(args, oldstream,
							state_jsonb(args, oldtup, desc),
							state_jsonb(args, newtup, desc));
			}
		}
		else
		{
			/* the key changed: one stream ends, another starts */
			if (newstream)
				check_promoted(trigdata, args, newtup, newstream, oldstream);
			if (oldstream)
				emit_end(args, oldstream, "key_changed", newstream);
			if (newstream)
				emit_snapshot(args, newstream,
							  state_jsonb(args, newtup, desc));
		}
	}

	SetUserIdAndSecContext(save_userid, save_sec_context);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(workcxt);
	return PointerGetDatum(NULL);
}

/* The hx_stream trigger of rel; an error unless there is exactly one */
Trigger *
hx_stream_trigger_of(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;
	Trigger    *found = NULL;
	int			i;

	for (i = 0; td && i < td->numtriggers; i++)
	{
		Trigger    *tg = &td->triggers[i];
		FmgrInfo	finfo;

		fmgr_info(tg->tgfoid, &finfo);
		if (finfo.fn_addr != hx_stream)
			continue;
		if (found)
			ereport(ERROR,
					(errcode(ERRCODE_AMBIGUOUS_PARAMETER),
					 errmsg("relation \"%s\" has more than one hx_stream trigger",
							RelationGetRelationName(rel))));
		found = tg;
	}
	if (found == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("relation \"%s\" has no hx_stream trigger",
						RelationGetRelationName(rel))));
	return found;
}
