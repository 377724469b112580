/*-------------------------------------------------------------------------
 *
 * trigger.c
 *	  What the trigger functions of hxstate share (hx_lock_once and
 *	  hx_slot_guard in guard.c, hx_phase_guard and hx_machine_changed in
 *	  phase.c, hx_stream in stream.c, hx_store in store.c): checking how
 *	  they were called, as core's contrib triggers do, resolving their
 *	  arguments once and keeping them, and the fields and values their
 *	  violations report.
 *
 * src/trigger.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rls.h"

#include "trigger.h"

/* Values in messages are cut to this many bytes */
#define VALUE_TEXT_CLIP		64

/* The TriggerData of a trigger call; an error for a direct call */
TriggerData *
hx_trigger_data(FunctionCallInfo fcinfo, const char *funcname)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"%s\" was not called by trigger manager",
						funcname)));
	return (TriggerData *) fcinfo->context;
}

/*
 * Check that fcinfo is a row trigger call for INSERT or UPDATE, or with
 * deletes for DELETE too (BEFORE or AFTER), as the check-and-raise
 * triggers need, and return its TriggerData.
 */
TriggerData *
hx_row_check_trigger_data(FunctionCallInfo fcinfo, const char *funcname,
						  bool deletes)
{
	TriggerData *trigdata = hx_trigger_data(fcinfo, funcname);
	TriggerEvent ev = trigdata->tg_event;

	if (!TRIGGER_FIRED_FOR_ROW(ev))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" must be FOR EACH ROW",
						trigdata->tg_trigger->tgname),
				 errhint("Function \"%s\" checks rows.", funcname)));
	if (TRIGGER_FIRED_INSTEAD(ev))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" must be fired BEFORE or AFTER, not INSTEAD OF",
						trigdata->tg_trigger->tgname)));
	if (!TRIGGER_FIRED_BY_INSERT(ev) && !TRIGGER_FIRED_BY_UPDATE(ev) &&
		!(deletes && TRIGGER_FIRED_BY_DELETE(ev)))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 deletes ?
				 errmsg("trigger \"%s\" must be fired for INSERT, UPDATE or DELETE",
						trigdata->tg_trigger->tgname) :
				 errmsg("trigger \"%s\" must be fired for INSERT or UPDATE",
						trigdata->tg_trigger->tgname)));
	return trigdata;
}

/*
 * What a row trigger hands back: the new row of an INSERT or UPDATE, the
 * old row of a DELETE (which lets a BEFORE DELETE go on); AFTER, anything
 */
Datum
hx_trigger_return(TriggerData *trigdata)
{
	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		return PointerGetDatum(trigdata->tg_newtuple);
	return PointerGetDatum(trigdata->tg_trigtuple);
}

/* The attribute number of column name in rel, or an error naming both */
AttrNumber
hx_trigger_column(Relation rel, const char *name)
{
	AttrNumber	attnum = SPI_fnumber(RelationGetDescr(rel), name);

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						hx_clip(name), RelationGetRelationName(rel))));
	return attnum;
}

/* ---------------------------------------------------------------------
 * Arguments
 * ---------------------------------------------------------------------
 *
 * A trigger's arguments name columns, options and a state machine; what
 * they resolve to (attribute numbers, types, output functions, the
 * prefix of a stream) changes only with the catalogs.  So they are parsed
 * once and kept per backend, by trigger OID, until one of these arrives:
 *	- a relcache invalidation of the trigger's table (a trigger created,
 *	  dropped or renamed on it, a column added, dropped, renamed or
 *	  retyped, an index created or dropped: each sends one), or of the one
 *	  other relation the parser said they depend on
 *	  (hx_trigger_args_depend_on: a stream's table, when the trigger is a
 *	  partition's clone of its parent's);
 *	- a change of the extension (hx_extension_invals(): its version
 *	  decides how streams are named, and where hxdoc is);
 *	- whatever else the caller checks (HxTriggerArgsValid: a stream's name
 *	  against every other table's).
 * Any relcache invalidation that arrives while they are being parsed
 * makes them good for that call only.  Where this backend cannot tell
 * when the extension changes (hx_extension_invals() is 0), they are kept
 * for the statement only, in the trigger manager's FmgrInfo, as before.
 *
 * Memory: the cache lives in cache_cxt, a child of CacheMemoryContext, as
 * long as the backend; each entry's arguments in a context of their own
 * under it.  Arguments replaced while a call may still be using them (a
 * trigger that fired while another one runs, and saw an invalidation)
 * are not freed at once: their context moves under TopTransactionContext,
 * and goes with the transaction.  The callback only marks entries; it
 * never frees anything, as it may run in the middle of a call.
 */
typedef struct ArgsEntry
{
	Oid			tgoid;			/* hash key */
	HxTriggerArgsParser parse;	/* the parser that made args */
	Oid			relid;			/* the trigger's table */
	Oid			deprelid;		/* another relation they depend on */
	uint64		ext_invals;		/* hx_extension_invals() when parsed */
	bool		valid;
	MemoryContext cxt;			/* args, or NULL */
	void	   *args;
} ArgsEntry;

/* Entries beyond this many are swept of the invalid ones */
#define ARGS_CACHE_SWEEP	256

static MemoryContext cache_cxt = NULL;
static HTAB *args_cache = NULL;
static uint64 relcache_invals = 0;	/* relcache invalidations seen */
static ArgsEntry *parsing = NULL;	/* the entry being parsed, if any */

static void
args_relcache_callback(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	ArgsEntry  *entry;

	relcache_invals++;
	if (args_cache == NULL)
		return;
	hash_seq_init(&status, args_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (relid == InvalidOid || entry->relid == relid || entry->deprelid == relid)
			entry->valid = false;
}

void
hx_trigger_init(void)
{
	CacheRegisterRelcacheCallback(args_relcache_callback, (Datum) 0);
}

/* A trigger's parsed arguments, kept in fn_extra */
typedef struct TriggerArgsCache
{
	Oid			tgoid;
	void	   *args;
} TriggerArgsCache;

/*
 * The arguments of the trigger being fired, parsed by parse on first use
 * and kept in fn_extra for the rest of the statement (the trigger
 * manager's FmgrInfo lives as long as the statement's executor state):
 * where the extension's changes cannot be followed.  Keyed by the
 * trigger's oid, as one FmgrInfo may serve another trigger of the same
 * function.
 */
static void *
args_for_statement(FunctionCallInfo fcinfo, TriggerData *trigdata,
				   HxTriggerArgsParser parse)
{
	TriggerArgsCache *cache = (TriggerArgsCache *) fcinfo->flinfo->fn_extra;
	Oid			tgoid = trigdata->tg_trigger->tgoid;

	if (cache != NULL && cache->tgoid == tgoid)
		return cache->args;
	if (cache == NULL)
		cache = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt,
									   sizeof(TriggerArgsCache));
	cache->tgoid = InvalidOid;	/* until parsed without error */
	cache->args = parse(trigdata, fcinfo->flinfo->fn_mcxt);
	cache->tgoid = tgoid;
	fcinfo->flinfo->fn_extra = cache;
	return cache->args;
}

/* Give up an entry's arguments: freed at the end of the transaction */
static void
retire(ArgsEntry *entry)
{
	if (entry->cxt != NULL)
		MemoryContextSetParent(entry->cxt, TopTransactionContext);
	entry->cxt = NULL;
	entry->args = NULL;
	entry->valid = false;
}

/* Forget the entries that no longer hold, once there are many */
static void
sweep(void)
{
	HASH_SEQ_STATUS status;
	ArgsEntry  *entry;

	hash_seq_init(&status, args_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (!entry->valid)
		{
			retire(entry);
			hash_search(args_cache, &entry->tgoid, HASH_REMOVE, NULL);
		}
}

/*
 * The arguments parse made for the trigger being fired, parsed now when
 * none hold (above); valid, when not NULL, says whether kept ones still do.
 */
void *
hx_trigger_args_checked(FunctionCallInfo fcinfo, TriggerData *trigdata,
						HxTriggerArgsParser parse, HxTriggerArgsValid valid)
{
	Oid			tgoid = trigdata->tg_trigger->tgoid;
	uint64		ext_invals = hx_extension_invals();
	uint64		invals;
	ArgsEntry  *entry;
	MemoryContext cxt;
	void	   *args;
	bool		found;

	parsing = NULL;				/* what an error while parsing left */
	if (ext_invals == 0)
		return args_for_statement(fcinfo, trigdata, parse);

	if (args_cache == NULL)
	{
		HASHCTL		ctl;

		cache_cxt = AllocSetContextCreate(CacheMemoryContext,
										  "hxstate trigger arguments",
										  ALLOCSET_SMALL_SIZES);
		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(ArgsEntry);
		ctl.hcxt = cache_cxt;
		args_cache = hash_create("hxstate trigger arguments", 32, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(args_cache, &tgoid, HASH_FIND, NULL);
	if (entry != NULL && entry->valid && entry->parse == parse &&
		entry->ext_invals == ext_invals &&
		(valid == NULL || valid(entry->args)))
		return entry->args;

	if (entry == NULL && hash_get_num_entries(args_cache) >= ARGS_CACHE_SWEEP)
		sweep();
	entry = hash_search(args_cache, &tgoid, HASH_ENTER, &found);
	if (!found)
		entry->cxt = NULL;
	retire(entry);
	entry->parse = parse;
	entry->relid = RelationGetRelid(trigdata->tg_relation);
	entry->deprelid = InvalidOid;
	entry->ext_invals = ext_invals;

	/*
	 * Parsed in a context of the call's, so that an error leaves nothing
	 * behind; moved under the cache once parsed.
	 */
	cxt = AllocSetContextCreate(CurrentMemoryContext,
								"hxstate trigger arguments",
								ALLOCSET_SMALL_SIZES);
	invals = relcache_invals;
	parsing = entry;
	args = parse(trigdata, cxt);
	parsing = NULL;
	MemoryContextSetParent(cxt, cache_cxt);
	entry->cxt = cxt;
	entry->args = args;
	entry->valid = (invals == relcache_invals &&
					ext_invals == hx_extension_invals());
	return args;
}

void *
hx_trigger_args(FunctionCallInfo fcinfo, TriggerData *trigdata,
				HxTriggerArgsParser parse)
{
	return hx_trigger_args_checked(fcinfo, trigdata, parse, NULL);
}

/*
 * Called by a parser: its arguments depend on relation relid too (a
 * relcache invalidation of it makes them parsed again).
 */
void
hx_trigger_args_depend_on(Oid relid)
{
	if (parsing != NULL)
		parsing->deprelid = relid;
}

/*
 * Name the table, column and constraint (the trigger) of a violation.
 * errtablecol() and errtableconstraint() each set the schema and table
 * fields, and a report may set a field only once, so the constraint name
 * is added on its own.  Returns 0, as the errxxx() functions do.
 */
int
hx_errtablecolconstraint(Relation rel, AttrNumber attnum, const char *conname)
{
	errtablecol(rel, attnum);
	err_generic_string(PG_DIAG_CONSTRAINT_NAME, conname);
	return 0;
}

/*
 * A value as text for a message, cut to VALUE_TEXT_CLIP bytes, or NULL
 * when the current user may not see it: no SELECT on the column, or
 * row-level security on the table, as core decides for "Failing row
 * contains".
 */
char *
hx_value_text_for(Relation rel, AttrNumber attnum, Oid typoutput,
				  Datum datum, bool isnull)
{
	Oid			relid = RelationGetRelid(rel);
	char	   *s;
	int			len;

	if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		return NULL;
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK &&
		pg_attribute_aclcheck(relid, attnum, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		return NULL;
	if (isnull)
		return pstrdup("NULL");
	s = OidOutputFunctionCall(typoutput, datum);
	len = strlen(s);
	if (len > VALUE_TEXT_CLIP)
	{
		len = pg_mbcliplen(s, len, VALUE_TEXT_CLIP);
		s = psprintf("%.*s...", len, s);
	}
	return s;
}
