/*-------------------------------------------------------------------------
 *
 * trigger.c
 *	  What the trigger functions of hxstate share (hx_lock_once and
 *	  hx_slot_guard in guard.c, hx_phase_guard and hx_machine_changed in
 *	  phase.c, hx_stream in stream.c): checking how they were called, as
 *	  core's contrib triggers do, resolving their arguments once per
 *	  statement, and the fields and values their violations report.
 *
 * src/trigger.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
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

/* A trigger's parsed arguments, kept in fn_extra */
typedef struct TriggerArgsCache
{
	Oid			tgoid;
	void	   *args;
} TriggerArgsCache;

/*
 * The arguments of the trigger being fired, parsed by parse on first use
 * and kept in fn_extra for the rest of the statement (the trigger
 * manager's FmgrInfo lives as long as the statement's executor state).
 * Keyed by the trigger's oid, as one FmgrInfo may serve another trigger
 * of the same function.
 */
void *
hx_trigger_args(FunctionCallInfo fcinfo, TriggerData *trigdata,
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
