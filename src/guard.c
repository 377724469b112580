/*-------------------------------------------------------------------------
 *
 * guard.c
 *	  Row trigger functions that keep session columns rigid:
 *
 *	  hx_lock_once(column [, ...])	once not NULL, a column never changes
 *	  hx_slot_guard(column [, ...])	NULL -> value and value -> NULL only
 *
 * and the trigger plumbing they share with hx_phase_guard (phase.c):
 * checking how the function was called, and resolving its arguments once
 * per statement.  An argument "column:/json/pointer" guards one member of
 * a jsonb column the same way; a member counts as unset when it is missing
 * or JSON null.
 *
 * The functions only check and raise; they work attached BEFORE (fail
 * fast) or AFTER.  Attached AFTER, as CREATE CONSTRAINT TRIGGER ... AFTER
 * INSERT OR UPDATE ... FOR EACH ROW, they see the row as stored, after
 * every BEFORE trigger, so a BEFORE trigger that rewrites a guarded column
 * cannot slip past them.  Writing the same value again is not a change:
 * jsonb compares as JSON values, other types by their stored bytes.
 *
 * Violations are user errors with their own SQLSTATEs (XH101 locked,
 * XH102 slot busy) and carry the table, column and constraint (the trigger)
 * so that a client can act on them without parsing the message.
 *
 * src/guard.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"

#include "hxstate.h"

/* ---------------------------------------------------------------------
 * Trigger plumbing
 * ---------------------------------------------------------------------
 */

/* The TriggerData of a trigger call; an error for a direct call */
TriggerData *
hx_trigger_data(FunctionCallInfo fcinfo, const char *funcname)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"%s\" must be called as a trigger", funcname)));
	return (TriggerData *) fcinfo->context;
}

/*
 * Check that fcinfo is a row trigger call for INSERT or UPDATE (BEFORE or
 * AFTER), as every guard needs, and return its TriggerData.
 */
TriggerData *
hx_guard_trigger_data(FunctionCallInfo fcinfo, const char *funcname)
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
	if (!TRIGGER_FIRED_BY_INSERT(ev) && !TRIGGER_FIRED_BY_UPDATE(ev))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" must be fired for INSERT or UPDATE",
						trigdata->tg_trigger->tgname)));
	return trigdata;
}

/* What a row trigger hands back: the new row BEFORE, anything AFTER */
Datum
hx_guard_return(TriggerData *trigdata)
{
	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		return PointerGetDatum(trigdata->tg_newtuple);
	return PointerGetDatum(trigdata->tg_trigtuple);
}

/* The attribute number of column name in rel, or an error naming both */
AttrNumber
hx_guard_column(Relation rel, const char *name)
{
	AttrNumber	attnum = SPI_fnumber(RelationGetDescr(rel), name);

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						name, RelationGetRelationName(rel))));
	return attnum;
}

/*
 * Name the table, column and constraint of a trigger's error report.
 * errtablecol() and errtableconstraint() each set the schema and table
 * fields, and a field may be set only once per report, so the constraint
 * name is added on its own.  Returns 0, as the errxxx() functions do.
 */
int
hx_errtablecolconstraint(Relation rel, AttrNumber attnum, const char *conname)
{
	errtablecol(rel, attnum);
	err_generic_string(PG_DIAG_CONSTRAINT_NAME, conname);
	return 0;
}

/*
 * The guarded columns of a trigger, resolved once per statement and kept
 * in fn_extra.
 */
typedef struct GuardColumn
{
	AttrNumber	attnum;
	const char *colname;
	Oid			typid;
	bool		typbyval;
	int16		typlen;
	Oid			typoutput;
	bool		has_pointer;
	HxPointer	ptr;			/* for "column:/pointer" */
} GuardColumn;

typedef struct GuardArgs
{
	Oid			tgoid;
	int			ncols;
	GuardColumn cols[FLEXIBLE_ARRAY_MEMBER];
} GuardArgs;

static GuardArgs *
guard_args(FunctionCallInfo fcinfo, TriggerData *trigdata, const char *funcname)
{
	Trigger    *tg = trigdata->tg_trigger;
	Relation	rel = trigdata->tg_relation;
	GuardArgs  *args = fcinfo->flinfo->fn_extra;
	MemoryContext oldcxt;
	int			i;

	if (args && args->tgoid == tg->tgoid)
		return args;

	if (tg->tgnargs < 1)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" names no column to guard",
						tg->tgname),
				 errhint("Pass the columns as arguments: EXECUTE FUNCTION %s('column', 'column:/json/pointer').",
						 funcname)));

	oldcxt = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	args = palloc0(offsetof(GuardArgs, cols) + sizeof(GuardColumn) * tg->tgnargs);
	args->ncols = tg->tgnargs;
	for (i = 0; i < tg->tgnargs; i++)
	{
		GuardColumn *col = &args->cols[i];
		const char *arg = tg->tgargs[i];
		const char *colon = strchr(arg, ':');
		bool		isvarlena;

		col->colname = colon ? pnstrdup(arg, colon - arg) : pstrdup(arg);
		col->attnum = hx_guard_column(rel, col->colname);
		col->typid = TupleDescAttr(RelationGetDescr(rel), col->attnum - 1)->atttypid;
		get_typlenbyval(col->typid, &col->typlen, &col->typbyval);
		getTypeOutputInfo(col->typid, &col->typoutput, &isvarlena);
		col->has_pointer = (colon != NULL);
		if (col->has_pointer)
		{
			if (col->typid != JSONBOID)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of relation \"%s\" is of type %s, not jsonb",
								col->colname, RelationGetRelationName(rel),
								format_type_be(col->typid)),
						 errdetail("Trigger \"%s\" guards \"%s\", and only a jsonb column has members.",
								   tg->tgname, arg)));
			hx_pointer_parse(&col->ptr, colon + 1, strlen(colon + 1), NULL,
							 "trigger argument");
		}
	}
	args->tgoid = tg->tgoid;
	MemoryContextSwitchTo(oldcxt);
	fcinfo->flinfo->fn_extra = args;
	return args;
}

/* ---------------------------------------------------------------------
 * Values
 * ---------------------------------------------------------------------
 */

/*
 * The guarded value of a row: the column's datum and, for jsonb, the JSON
 * value itself or the member the pointer names.  isset is false for SQL
 * NULL, and for a member that is missing or JSON null.
 */
typedef struct GuardValue
{
	bool		isset;
	bool		isnull;
	Datum		datum;
	HxNode	   *json;
} GuardValue;

static void
guard_datum(GuardColumn *col, HeapTuple tuple, TupleDesc tupdesc,
			GuardValue *v)
{
	v->datum = heap_getattr(tuple, col->attnum, tupdesc, &v->isnull);
	v->isset = !v->isnull;
	v->json = NULL;
}

/* Detoast and resolve the member, when the bytes alone do not decide */
static void
guard_json(GuardColumn *col, GuardValue *v)
{
	if (v->isnull || col->typid != JSONBOID)
		return;
	v->json = hx_node_from_jsonb(DatumGetJsonbP(v->datum));
	if (col->has_pointer)
	{
		v->json = hx_lookup(v->json, &col->ptr, col->ptr.ntokens, NULL);
		v->isset = v->json != NULL && hx_node_shape(v->json) != HXS_NULL;
	}
}

/*
 * A value as text for a message, cut to 64 bytes: NULL when the current
 * user may not see it (no SELECT on the column, or row-level security on
 * the table), as core does for "Failing row contains".
 */
char *
hx_guard_value_text(Relation rel, AttrNumber attnum, Oid typoutput,
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
	if (len > 64)
	{
		len = pg_mbcliplen(s, len, 64);
		s = psprintf("%.*s...", len, s);
	}
	return s;
}

static char *
guard_value_text(Relation rel, GuardColumn *col, GuardValue *v)
{
	if (col->has_pointer)
	{
		Datum		d = (Datum) 0;

		if (v->json)
			d = JsonbPGetDatum(hx_node_to_jsonb(v->json, 64,
												CurrentMemoryContext));
		return hx_guard_value_text(rel, col->attnum, col->typoutput, d,
								   v->json == NULL);
	}
	return hx_guard_value_text(rel, col->attnum, col->typoutput, v->datum,
							   v->isnull);
}

/* "column \"project_id\"" or "member \"/owner\" of column \"state\"" */
static char *
guard_what(GuardColumn *col)
{
	if (col->has_pointer)
		return psprintf("member \"%s\" of column \"%s\"", col->ptr.text,
						col->colname);
	return psprintf("column \"%s\"", col->colname);
}

typedef enum GuardKind
{
	GUARD_LOCK_ONCE,
	GUARD_SLOT
} GuardKind;

static void
guard_report(GuardKind kind, TriggerData *trigdata, GuardColumn *col,
			 GuardValue *oldv, GuardValue *newv)
{
	Relation	rel = trigdata->tg_relation;
	char	   *oldtext = guard_value_text(rel, col, oldv);
	char	   *newtext = guard_value_text(rel, col, newv);
	char	   *what = guard_what(col);

	if (kind == GUARD_LOCK_ONCE)
		ereport(ERROR,
				(errcode(ERRCODE_HX_LOCKED),
				 errmsg("%s of relation \"%s\" is locked", what,
						RelationGetRelationName(rel)),
				 (oldtext && newtext) ?
				 errdetail("It was set to %s and cannot change to %s.",
						   oldtext, newtext) :
				 errdetail("It was set once and cannot change."),
				 errhint("A column guarded by hx_lock_once is written once, by one writer."),
				 hx_errtablecolconstraint(rel, col->attnum,
										  trigdata->tg_trigger->tgname)));
	else
		ereport(ERROR,
				(errcode(ERRCODE_HX_SLOT_BUSY),
				 errmsg("%s of relation \"%s\" is busy", what,
						RelationGetRelationName(rel)),
				 (oldtext && newtext) ?
				 errdetail("It holds %s and cannot take %s.", oldtext, newtext) :
				 errdetail("It holds a value and cannot take another."),
				 errhint("Set it to NULL when the work it holds ends, then set the next value."),
				 hx_errtablecolconstraint(rel, col->attnum,
										  trigdata->tg_trigger->tgname)));
}

static Datum
guard_check(FunctionCallInfo fcinfo, GuardKind kind, const char *funcname)
{
	TriggerData *trigdata = hx_guard_trigger_data(fcinfo, funcname);
	GuardArgs  *args = guard_args(fcinfo, trigdata, funcname);
	TupleDesc	tupdesc = RelationGetDescr(trigdata->tg_relation);
	int			i;

	/* both guards are about changes: an INSERT sets values freely */
	if (!TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		return hx_guard_return(trigdata);

	for (i = 0; i < args->ncols; i++)
	{
		GuardColumn *col = &args->cols[i];
		GuardValue	oldv;
		GuardValue	newv;

		guard_datum(col, trigdata->tg_trigtuple, tupdesc, &oldv);
		if (oldv.isnull)
			continue;			/* assigning a value */
		guard_datum(col, trigdata->tg_newtuple, tupdesc, &newv);

		/* untouched: the same bytes, or the same TOAST pointer */
		if (!newv.isnull &&
			datumIsEqual(oldv.datum, newv.datum, col->typbyval, col->typlen))
			continue;

		guard_json(col, &oldv);
		if (!oldv.isset)
			continue;			/* the member is still unset */
		guard_json(col, &newv);
		if (kind == GUARD_SLOT && !newv.isset)
			continue;			/* freeing the slot */
		if (newv.isset &&
			(col->typid == JSONBOID ?
			 hx_node_equal(oldv.json, newv.json) :
			 datum_image_eq(oldv.datum, newv.datum, col->typbyval, col->typlen)))
			continue;			/* the same value again */
		guard_report(kind, trigdata, col, &oldv, &newv);
	}
	return hx_guard_return(trigdata);
}

PG_FUNCTION_INFO_V1(hx_lock_once);

Datum
hx_lock_once(PG_FUNCTION_ARGS)
{
	return guard_check(fcinfo, GUARD_LOCK_ONCE, "hx_lock_once");
}

PG_FUNCTION_INFO_V1(hx_slot_guard);

Datum
hx_slot_guard(PG_FUNCTION_ARGS)
{
	return guard_check(fcinfo, GUARD_SLOT, "hx_slot_guard");
}
