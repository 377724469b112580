/*-------------------------------------------------------------------------
 *
 * guard.c
 *	  Row trigger functions that keep session columns rigid:
 *
 *	  hx_lock_once(column [, ...])	once not NULL, a column never changes
 *	  hx_slot_guard(column [, ...])	NULL -> value and value -> NULL only
 *
 * An argument "column:/json/pointer" guards one member of
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
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

#include "doc.h"
#include "pointer.h"
#include "trigger.h"

/* A guarded column (or member of a jsonb column), resolved once */
typedef struct GuardColumn
{
	AttrNumber	attnum;
	const char *colname;
	Oid			typid;
	bool		json;			/* jsonb or hxdoc: compared as JSON */
	bool		doc;			/* hxdoc */
	bool		typbyval;
	int16		typlen;
	Oid			typoutput;
	bool		has_pointer;
	HxPointer	ptr;			/* for "column:/pointer" */
} GuardColumn;

typedef struct GuardArgs
{
	int			ncols;
	GuardColumn cols[FLEXIBLE_ARRAY_MEMBER];
} GuardArgs;

/* Parse the guarded columns of a trigger (an HxTriggerArgsParser) */
static void *
parse_guard_args(TriggerData *trigdata, MemoryContext cxt)
{
	Trigger    *tg = trigdata->tg_trigger;
	Relation	rel = trigdata->tg_relation;
	GuardArgs  *args;
	MemoryContext oldcxt;
	int			i;

	if (tg->tgnargs < 1)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" names no column to guard", tg->tgname),
				 errhint("Pass the columns as arguments, as in EXECUTE FUNCTION hx_lock_once('column', 'column:/json/pointer').")));

	oldcxt = MemoryContextSwitchTo(cxt);
	args = palloc0(offsetof(GuardArgs, cols) + sizeof(GuardColumn) * tg->tgnargs);
	args->ncols = tg->tgnargs;
	for (i = 0; i < tg->tgnargs; i++)
	{
		GuardColumn *col = &args->cols[i];
		const char *arg = tg->tgargs[i];
		const char *colon = strchr(arg, ':');
		bool		isvarlena;

		col->colname = colon ? pnstrdup(arg, colon - arg) : pstrdup(arg);
		col->attnum = hx_trigger_column(rel, col->colname);
		col->typid = TupleDescAttr(RelationGetDescr(rel), col->attnum - 1)->atttypid;
		col->doc = hx_doc_is_type(col->typid);
		col->json = col->typid == JSONBOID || col->doc;
		get_typlenbyval(col->typid, &col->typlen, &col->typbyval);
		getTypeOutputInfo(col->typid, &col->typoutput, &isvarlena);
		col->has_pointer = (colon != NULL);
		if (col->has_pointer)
		{
			if (!col->json)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of relation \"%s\" is of type %s, not jsonb or hxdoc",
								col->colname, RelationGetRelationName(rel),
								format_type_be(col->typid)),
						 errdetail("Trigger \"%s\" guards \"%s\", and only jsonb and hxdoc columns have members.",
								   tg->tgname, hx_clip(arg))));
			hx_pointer_parse(&col->ptr, colon + 1, strlen(colon + 1),
							 HX_PTR_ARGUMENT);
		}
	}
	MemoryContextSwitchTo(oldcxt);
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
	if (v->isnull || !col->json)
		return;
	v->json = hx_node_from_jsonb(col->doc ? hx_doc_to_jsonb(v->datum) :
								 hx_detoast_jsonb(v->datum));
	if (col->has_pointer)
	{
		v->json = hx_lookup(v->json, &col->ptr, col->ptr.ntokens, false);
		v->isset = v->json != NULL && !hx_node_is_null(v->json);
	}
}

static char *
guard_value_text(Relation rel, GuardColumn *col, GuardValue *v)
{
	if (col->has_pointer)
	{
		Datum		d = (Datum) 0;

		if (v->json)
			d = JsonbPGetDatum(hx_node_to_jsonb(v->json, CurrentMemoryContext));
		return hx_value_text_for(rel, col->attnum, F_JSONB_OUT, d,
								 v->json == NULL);
	}
	return hx_value_text_for(rel, col->attnum, col->typoutput, v->datum,
							 v->isnull);
}

typedef enum GuardKind
{
	GUARD_LOCK_ONCE,
	GUARD_SLOT
} GuardKind;

/* What a violation did */
typedef enum Violation
{
	CHANGED_LOCKED,				/* hx_lock_once: a set value changed */
	DELETED_LOCKED,				/* hx_lock_once for DELETE: a set row deleted */
	TOOK_BUSY					/* hx_slot_guard: a value replaced by another */
} Violation;

static int
errdetail_violation(Violation v, const char *oldtext, const char *newtext)
{
	switch (v)
	{
		case CHANGED_LOCKED:
			return (oldtext && newtext) ?
				errdetail("It was set to %s and cannot change to %s.", oldtext, newtext) :
				errdetail("It was set once and cannot change.");
		case DELETED_LOCKED:
			return oldtext ?
				errdetail("It was set to %s, and the row cannot be deleted: inserted again, it could take another value.",
						  oldtext) :
				errdetail("It was set, and the row cannot be deleted: inserted again, it could take another value.");
		case TOOK_BUSY:
			return (oldtext && newtext) ?
				errdetail("It holds %s and cannot take %s.", oldtext, newtext) :
				errdetail("It holds a value and cannot take another.");
	}
	return 0;
}

/*
 * Report a violation of guard trigger tg on column col, with the values as
 * the current user may see them (NULL: not shown).
 */
static void
report_violation(TriggerData *trigdata, GuardColumn *col, Violation v,
				 const char *oldtext, const char *newtext)
{
	Relation	rel = trigdata->tg_relation;
	const char *tgname = trigdata->tg_trigger->tgname;
	bool		locked = (v != TOOK_BUSY);

	ereport(ERROR,
			(errcode(locked ? ERRCODE_HX_LOCKED : ERRCODE_HX_SLOT_BUSY),
			 col->has_pointer ?
			 (locked ?
			  errmsg("member \"%s\" of column \"%s\" of relation \"%s\" is locked",
					 hx_clip(col->ptr.text), col->colname, RelationGetRelationName(rel)) :
			  errmsg("member \"%s\" of column \"%s\" of relation \"%s\" is busy",
					 hx_clip(col->ptr.text), col->colname, RelationGetRelationName(rel))) :
			 (locked ?
			  errmsg("column \"%s\" of relation \"%s\" is locked",
					 col->colname, RelationGetRelationName(rel)) :
			  errmsg("column \"%s\" of relation \"%s\" is busy",
					 col->colname, RelationGetRelationName(rel))),
			 errdetail_violation(v, oldtext, newtext),
			 v == CHANGED_LOCKED ?
			 errhint("A column guarded by hx_lock_once is written once, by one writer.") :
			 v == DELETED_LOCKED ?
			 errhint("Trigger \"%s\" keeps the rows whose locked columns are set.", tgname) :
			 errhint("Set it to NULL when the work it holds ends, then set the next value."),
			 hx_errtablecolconstraint(rel, col->attnum, tgname)));
}

/*
 * hx_lock_once attached for DELETE: a row whose locked column is set stays,
 * as deleting it and inserting its key again would set the column anew.
 */
static void
check_delete(TriggerData *trigdata, GuardArgs *args)
{
	Relation	rel = trigdata->tg_relation;
	TupleDesc	tupdesc = RelationGetDescr(rel);
	int			i;

	for (i = 0; i < args->ncols; i++)
	{
		GuardColumn *col = &args->cols[i];
		GuardValue	oldv;

		guard_datum(col, trigdata->tg_trigtuple, tupdesc, &oldv);
		if (oldv.isnull)
			continue;
		guard_json(col, &oldv);
		if (!oldv.isset)
			continue;
		report_violation(trigdata, col, DELETED_LOCKED,
						 guard_value_text(rel, col, &oldv), NULL);
	}
}

static Datum
guard_check(FunctionCallInfo fcinfo, GuardKind kind, const char *funcname)
{
	TriggerData *trigdata = hx_row_check_trigger_data(fcinfo, funcname,
													  kind == GUARD_LOCK_ONCE);
	GuardArgs  *args = hx_trigger_args(fcinfo, trigdata, parse_guard_args);
	Relation	rel = trigdata->tg_relation;
	TupleDesc	tupdesc = RelationGetDescr(rel);
	int			i;

	if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
	{
		check_delete(trigdata, args);
		return hx_trigger_return(trigdata);
	}
	/* both guards are about changes: an INSERT sets values freely */
	if (!TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		return hx_trigger_return(trigdata);

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
			(col->json ?
			 hx_node_equal(oldv.json, newv.json) :
			 datum_image_eq(oldv.datum, newv.datum, col->typbyval, col->typlen)))
			continue;			/* the same value again */
		report_violation(trigdata, col,
						 kind == GUARD_LOCK_ONCE ? CHANGED_LOCKED : TOOK_BUSY,
						 guard_value_text(rel, col, &oldv),
						 guard_value_text(rel, col, &newv));
	}
	return hx_trigger_return(trigdata);
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
