/*-------------------------------------------------------------------------
 *
 * phase.c
 *	  The session's phase as an explicit state machine (seed 002):
 *
 *	  hx_next_phase(machine, phase, event)	the next phase, or an error
 *	  hx_phase_guard(machine [, column])	a row trigger: a row starts in
 *											the machine's initial phase and
 *											moves only along its edges
 *	  hx_machine_dot(machine)				the machine as Graphviz
 *
 * Machines are data: hx_machine (machine, initial_phase) and
 * hx_transition (machine, from_phase, event, to_phase), in the extension's
 * schema.  Each backend caches them all (they are small) and looks
 * transitions up without SPI; the cache is rebuilt when a relcache
 * invalidation of either table arrives.  DML does not send one by itself,
 * so a statement trigger on both tables (hx_machine_changed) does, at
 * commit, to every backend: the next statement of every session sees the
 * change, and the changing transaction sees it from its next command.
 *
 * src/phase.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "hxstate.h"

typedef struct Transition
{
	char	   *from;
	char	   *event;
	char	   *to;
} Transition;

typedef struct Machine
{
	char	   *name;
	char	   *initial;
	int			ntransitions;
	Transition *transitions;	/* sorted by from, then event */
} Machine;

typedef struct MachineCache
{
	MemoryContext cxt;
	int			nmachines;
	Machine    *machines;
} MachineCache;

static MachineCache *cache = NULL;
static bool cache_valid = false;
static uint64 cache_invals = 0;		/* invalidations seen so far */
static Oid	machine_relid = InvalidOid;
static Oid	transition_relid = InvalidOid;

/* Relcache callback: a machine table changed (or everything did) */
static void
machine_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == machine_relid ||
		relid == transition_relid || machine_relid == InvalidOid)
	{
		cache_valid = false;
		cache_invals++;
	}
}

void
hx_phase_init(void)
{
	CacheRegisterRelcacheCallback(machine_relcache_callback, (Datum) 0);
}

static char *
copy_text_attr(HeapTuple tup, TupleDesc desc, int attnum, MemoryContext cxt)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, attnum, &isnull);

	if (isnull)
		return NULL;
	return MemoryContextStrdup(cxt, TextDatumGetCString(d));
}

/* Load every machine and transition with one query */
static void
load_machines(void)
{
	MemoryContext cxt;
	MachineCache *c;
	uint64		invals;
	uint64		i;
	int			m = -1;

	do
	{
		Oid			nspoid;
		const char *nsp;
		char	   *query;

		invals = cache_invals;

		/*
		 * Under the caller's context until complete, so that an error frees
		 * it; created before SPI_connect, whose context SPI_finish deletes.
		 */
		cxt = AllocSetContextCreate(CurrentMemoryContext, "hxstate machines",
									ALLOCSET_SMALL_SIZES);
		c = MemoryContextAllocZero(cxt, sizeof(MachineCache));
		c->cxt = cxt;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");

		nspoid = hx_extension_namespace();
		nsp = quote_identifier(get_namespace_name(nspoid));
		machine_relid = get_relname_relid("hx_machine", nspoid);
		transition_relid = get_relname_relid("hx_transition", nspoid);

		query = psprintf("SELECT m.machine, m.initial_phase, t.from_phase, t.event, t.to_phase"
						 "  FROM %s.hx_machine m LEFT JOIN %s.hx_transition t USING (machine)"
						 " ORDER BY m.machine COLLATE \"C\", t.from_phase COLLATE \"C\","
						 "          t.event COLLATE \"C\"",
						 nsp, nsp);
		if (SPI_execute(query, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "SPI_execute failed: %s", query);

		/* count machines, then fill them */
		for (i = 0; i < SPI_processed; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			char	   *name = copy_text_attr(tup, SPI_tuptable->tupdesc, 1, cxt);

			if (m < 0 || strcmp(c->machines[m].name, name) != 0)
			{
				m++;
				if (m == 0)
					c->machines = MemoryContextAllocZero(cxt, sizeof(Machine) * SPI_processed);
				c->machines[m].name = name;
				c->machines[m].initial = copy_text_attr(tup, SPI_tuptable->tupdesc, 2, cxt);
				c->machines[m].transitions =
					MemoryContextAllocZero(cxt, sizeof(Transition) * SPI_processed);
			}
			if (copy_text_attr(tup, SPI_tuptable->tupdesc, 3, CurrentMemoryContext))
			{
				Transition *t = &c->machines[m].transitions[c->machines[m].ntransitions++];

				t->from = copy_text_attr(tup, SPI_tuptable->tupdesc, 3, cxt);
				t->event = copy_text_attr(tup, SPI_tuptable->tupdesc, 4, cxt);
				t->to = copy_text_attr(tup, SPI_tuptable->tupdesc, 5, cxt);
			}
		}
		c->nmachines = m + 1;
		SPI_finish();
		MemoryContextSetParent(cxt, TopMemoryContext);

		if (cache)
			MemoryContextDelete(cache->cxt);
		cache = c;
		m = -1;
		/* an invalidation during the load means it may be stale: again */
	} while (invals != cache_invals);
	cache_valid = true;
}

static Machine *
find_machine(const char *name, bool missing_ok)
{
	int			i;

	if (!cache_valid)
		load_machines();
	for (i = 0; i < cache->nmachines; i++)
		if (strcmp(cache->machines[i].name, name) == 0)
			return &cache->machines[i];
	if (!missing_ok)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("state machine \"%s\" does not exist", name),
				 errhint("Add it to hx_machine and its edges to hx_transition.")));
	return NULL;
}

static bool
is_phase(Machine *m, const char *phase)
{
	int			i;

	if (strcmp(m->initial, phase) == 0)
		return true;
	for (i = 0; i < m->ntransitions; i++)
		if (strcmp(m->transitions[i].from, phase) == 0 ||
			strcmp(m->transitions[i].to, phase) == 0)
			return true;
	return false;
}

/* "cancel, publish, revert": the events that leave phase, for hints */
static char *
events_from(Machine *m, const char *phase)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < m->ntransitions; i++)
	{
		if (strcmp(m->transitions[i].from, phase) != 0)
			continue;
		if (buf.len > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfo(&buf, "%s (to %s)", m->transitions[i].event,
						 m->transitions[i].to);
	}
	return buf.data;
}

/*
 * Raise the invalid-transition error msg for a move out of phase; from a
 * trigger, rel, attnum and conname say where (NULL rel otherwise).
 */
static void
report_no_edge(Machine *m, const char *phase, const char *msg,
			   Relation rel, AttrNumber attnum, const char *conname)
{
	bool		known = is_phase(m, phase);
	char	   *events = known ? events_from(m, phase) : NULL;

	ereport(ERROR,
			(errcode(ERRCODE_HX_INVALID_TRANSITION),
			 errmsg("%s", msg),
			 !known ?
			 errdetail("\"%s\" is not a phase of state machine \"%s\".",
					   phase, m->name) :
			 (events[0] != '\0') ?
			 errdetail("In state machine \"%s\", phase \"%s\" allows: %s.",
					   m->name, phase, events) :
			 errdetail("In state machine \"%s\", phase \"%s\" is final.",
					   m->name, phase),
			 rel ? hx_errtablecolconstraint(rel, attnum, conname) : 0));
}

PG_FUNCTION_INFO_V1(hx_next_phase);

Datum
hx_next_phase(PG_FUNCTION_ARGS)
{
	char	   *machine = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *phase = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *event = text_to_cstring(PG_GETARG_TEXT_PP(2));
	Machine    *m = find_machine(machine, false);
	int			i;

	for (i = 0; i < m->ntransitions; i++)
	{
		Transition *t = &m->transitions[i];

		if (strcmp(t->from, phase) == 0 && strcmp(t->event, event) == 0)
			PG_RETURN_TEXT_P(cstring_to_text(t->to));
	}
	report_no_edge(m, phase,
				   psprintf("invalid transition: phase=%s, event=%s", phase, event),
				   NULL, 0, NULL);
	PG_RETURN_NULL();			/* keep compiler quiet */
}

/* A Graphviz ID: a double-quoted string with '"' and '\' escaped */
static void
append_dot_id(StringInfo buf, const char *s)
{
	appendStringInfoChar(buf, '"');
	for (; *s; s++)
	{
		if (*s == '"' || *s == '\\')
			appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, *s);
	}
	appendStringInfoChar(buf, '"');
}

PG_FUNCTION_INFO_V1(hx_machine_dot);

Datum
hx_machine_dot(PG_FUNCTION_ARGS)
{
	char	   *machine = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Machine    *m = find_machine(machine, false);
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "digraph ");
	append_dot_id(&buf, m->name);
	appendStringInfoString(&buf, " {\n"
						   "  rankdir=LR;\n"
						   "  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n"
						   "  edge [fontname=\"Helvetica\", fontsize=10];\n"
						   "  \"\" [shape=point];\n"
						   "  \"\" -> ");
	append_dot_id(&buf, m->initial);
	appendStringInfoString(&buf, ";\n");
	for (i = 0; i < m->ntransitions; i++)
	{
		appendStringInfoString(&buf, "  ");
		append_dot_id(&buf, m->transitions[i].from);
		appendStringInfoString(&buf, " -> ");
		append_dot_id(&buf, m->transitions[i].to);
		appendStringInfoString(&buf, " [label=");
		append_dot_id(&buf, m->transitions[i].event);
		appendStringInfoString(&buf, "];\n");
	}
	appendStringInfoString(&buf, "}\n");
	PG_RETURN_TEXT_P(cstring_to_text(buf.data));
}

/* The phase column's value as text, or NULL */
static char *
phase_text(HeapTuple tuple, TupleDesc desc, AttrNumber attnum, Oid typoutput)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, attnum, desc, &isnull);

	return isnull ? NULL : OidOutputFunctionCall(typoutput, d);
}

/* hx_phase_guard's arguments, resolved once per statement */
typedef struct PhaseArgs
{
	Oid			tgoid;
	AttrNumber	attnum;
	Oid			typoutput;
} PhaseArgs;

static PhaseArgs *
phase_args(FunctionCallInfo fcinfo, TriggerData *trigdata)
{
	Trigger    *tg = trigdata->tg_trigger;
	Relation	rel = trigdata->tg_relation;
	PhaseArgs  *args = fcinfo->flinfo->fn_extra;
	bool		isvarlena;

	if (args && args->tgoid == tg->tgoid)
		return args;
	if (tg->tgnargs < 1 || tg->tgnargs > 2)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" must name a state machine and at most one column",
						tg->tgname),
				 errhint("EXECUTE FUNCTION hx_phase_guard('agent_session') guards column \"phase\"; "
						 "hx_phase_guard('agent_session', 'column') guards another.")));
	args = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(PhaseArgs));
	args->attnum = hx_guard_column(rel, (tg->tgnargs == 2) ? tg->tgargs[1] : "phase");
	getTypeOutputInfo(TupleDescAttr(RelationGetDescr(rel), args->attnum - 1)->atttypid,
					  &args->typoutput, &isvarlena);
	args->tgoid = tg->tgoid;
	fcinfo->flinfo->fn_extra = args;
	return args;
}

PG_FUNCTION_INFO_V1(hx_phase_guard);

Datum
hx_phase_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = hx_guard_trigger_data(fcinfo, "hx_phase_guard");
	Trigger    *tg = trigdata->tg_trigger;
	Relation	rel = trigdata->tg_relation;
	TupleDesc	desc = RelationGetDescr(rel);
	PhaseArgs  *args = phase_args(fcinfo, trigdata);
	Machine    *m = find_machine(tg->tgargs[0], false);
	char	   *oldphase = NULL;
	char	   *newphase;
	int			i;

	newphase = phase_text(TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ?
						  trigdata->tg_newtuple : trigdata->tg_trigtuple,
						  desc, args->attnum, args->typoutput);
	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		oldphase = phase_text(trigdata->tg_trigtuple, desc, args->attnum,
							  args->typoutput);

	if (oldphase == NULL)
	{
		/* a new row, or one that never had a phase: it starts */
		if (newphase != NULL && strcmp(newphase, m->initial) == 0)
			return hx_guard_return(trigdata);
		ereport(ERROR,
				(errcode(ERRCODE_HX_INVALID_TRANSITION),
				 errmsg("invalid initial phase: phase=%s", newphase ? newphase : "NULL"),
				 errdetail("State machine \"%s\" starts in phase \"%s\".",
						   m->name, m->initial),
				 hx_errtablecolconstraint(rel, args->attnum, tg->tgname)));
	}

	if (newphase != NULL && strcmp(oldphase, newphase) == 0)
		return hx_guard_return(trigdata);	/* no move */
	if (newphase != NULL)
	{
		for (i = 0; i < m->ntransitions; i++)
			if (strcmp(m->transitions[i].from, oldphase) == 0 &&
				strcmp(m->transitions[i].to, newphase) == 0)
				return hx_guard_return(trigdata);
	}

	report_no_edge(m, oldphase,
				   psprintf("invalid transition: phase=%s, next=%s",
							oldphase, newphase ? newphase : "NULL"),
				   rel, args->attnum, tg->tgname);
	return hx_guard_return(trigdata);	/* keep compiler quiet */
}

PG_FUNCTION_INFO_V1(hx_machine_changed);

/*
 * Statement trigger on hx_machine and hx_transition: DML does not
 * invalidate relcache entries, so send an invalidation for the table
 * ourselves; every backend drops its machine cache when it arrives.
 */
Datum
hx_machine_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = hx_trigger_data(fcinfo, "hx_machine_changed");

	CacheInvalidateRelcache(trigdata->tg_relation);
	return PointerGetDatum(NULL);
}
