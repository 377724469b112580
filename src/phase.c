/*-------------------------------------------------------------------------
 *
 * phase.c
 *	  The session's phase as an explicit state machine:
 *
 *	  hx_next_phase(machine, phase, event)	the next phase, or an error
 *	  hx_phase_guard(machine [, column])	a row trigger: a row starts in
 *											the machine's initial phase and
 *											moves only along its edges
 *	  hx_machine_dot(machine)				the machine as Graphviz
 *	  hx_machine_changed()					the statement trigger that makes
 *											every backend reload machines
 *
 * Machines are data: hx_machine (machine, initial_phase) and
 * hx_transition (machine, from_phase, event, to_phase), in the extension's
 * schema.  Each backend caches them all and looks transitions up without
 * a query, by binary search.  The cache is read like a catalog, with the
 * latest snapshot, so that a REPEATABLE READ transaction that reloads it
 * does not keep an old version for the rest of the backend's life; it is
 * rebuilt when a relcache invalidation of either table arrives.  DML does
 * not send one by itself, so a statement trigger on both tables
 * (hx_machine_changed) does, at commit, to every backend: the next
 * statement of every session sees the change, and the changing
 * transaction sees it from its next command.
 *
 * src/phase.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "trigger.h"

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
	Transition *transitions;	/* sorted by from, then event (bytewise) */
} Machine;

typedef struct MachineCache
{
	MemoryContext cxt;
	int			nmachines;
	Machine    *machines;		/* sorted by name (bytewise) */
} MachineCache;

static MachineCache *cache = NULL;
static bool cache_valid = false;
static uint64 cache_invals = 0; /* invalidations seen so far */
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

/* ---------------------------------------------------------------------
 * Loading the cache
 * ---------------------------------------------------------------------
 */

static char *
text_attr(HeapTuple tup, TupleDesc desc, int attnum)
{
	bool		isnull;
	Datum		d = heap_getattr(tup, attnum, desc, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

/*
 * Every row of relid, as text columns 1..ncols, read with snapshot into
 * an array of string arrays in the current context.
 */
static char ***
read_rows(Oid relid, int ncols, Snapshot snapshot, int *nrows)
{
	Relation	rel = table_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	TableScanDesc scan = table_beginscan(rel, snapshot, 0, NULL);
	HeapTuple	tup;
	int			cap = 16;
	char	 ***rows = palloc(sizeof(char **) * cap);

	*nrows = 0;
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		char	  **row = palloc(sizeof(char *) * ncols);
		int			i;

		CHECK_FOR_INTERRUPTS();
		for (i = 0; i < ncols; i++)
			row[i] = text_attr(tup, desc, i + 1);
		if (*nrows == cap)
		{
			cap *= 2;
			rows = repalloc_huge(rows, sizeof(char **) * cap);
		}
		rows[(*nrows)++] = row;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	return rows;
}

static int
machine_cmp(const void *a, const void *b)
{
	return strcmp(((const Machine *) a)->name, ((const Machine *) b)->name);
}

/* Transition rows (machine, from, event, to): by machine, from, event */
static int
transition_row_cmp(const void *a, const void *b)
{
	char	  **ra = *(char **const *) a;
	char	  **rb = *(char **const *) b;
	int			i;

	for (i = 0; i < 3; i++)
	{
		int			d = strcmp(ra[i], rb[i]);

		if (d != 0)
			return d;
	}
	return 0;
}

static Machine *
find_loaded_machine(MachineCache *c, const char *name)
{
	Machine		key;

	key.name = (char *) name;
	return bsearch(&key, c->machines, c->nmachines, sizeof(Machine),
				   machine_cmp);
}

/* Read both tables into a new cache, in a context of its own */
static MachineCache *
read_machines(Snapshot snapshot)
{
	MemoryContext cxt;
	MemoryContext oldcxt;
	MachineCache *c;
	char	 ***mrows;
	char	 ***trows;
	int			nm;
	int			nt;
	int			i;

	/*
	 * Under the caller's context until complete, so that an error frees it;
	 * moved under TopMemoryContext by the caller.
	 */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "hxstate machines",
								ALLOCSET_SMALL_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);
	c = palloc0(sizeof(MachineCache));
	c->cxt = cxt;

	mrows = read_rows(machine_relid, 2, snapshot, &nm);
	trows = read_rows(transition_relid, 4, snapshot, &nt);

	c->nmachines = nm;
	c->machines = palloc0(sizeof(Machine) * Max(nm, 1));
	for (i = 0; i < nm; i++)
	{
		c->machines[i].name = mrows[i][0];
		c->machines[i].initial = mrows[i][1];
	}
	qsort(c->machines, nm, sizeof(Machine), machine_cmp);

	/* count each machine's transitions, then fill exact arrays in order */
	qsort(trows, nt, sizeof(char **), transition_row_cmp);
	for (i = 0; i < nt; i++)
	{
		Machine    *m = find_loaded_machine(c, trows[i][0]);

		if (m)					/* the foreign key says it is there */
			m->ntransitions++;
	}
	for (i = 0; i < nm; i++)
	{
		c->machines[i].transitions =
			palloc(sizeof(Transition) * Max(c->machines[i].ntransitions, 1));
		c->machines[i].ntransitions = 0;
	}
	for (i = 0; i < nt; i++)
	{
		Machine    *m = find_loaded_machine(c, trows[i][0]);
		Transition *t;

		if (m == NULL)
			continue;
		t = &m->transitions[m->ntransitions++];
		t->from = trows[i][1];
		t->event = trows[i][2];
		t->to = trows[i][3];
	}
	MemoryContextSwitchTo(oldcxt);
	return c;
}

/*
 * Load every machine and transition, as committed now (and as this
 * transaction changed them so far), whatever the isolation level.
 */
static void
load_machines(void)
{
	uint64		invals;
	MachineCache *c;

	do
	{
		Snapshot	snapshot;

		invals = cache_invals;
		machine_relid = hx_extension_relid("hx_machine");
		transition_relid = hx_extension_relid("hx_transition");

		snapshot = RegisterSnapshot(GetLatestSnapshot());
		c = read_machines(snapshot);
		UnregisterSnapshot(snapshot);
		MemoryContextSetParent(c->cxt, TopMemoryContext);

		if (cache)
			MemoryContextDelete(cache->cxt);
		cache = c;
		/* an invalidation during the load means it may be stale: again */
	} while (invals != cache_invals);
	cache_valid = true;
}

static Machine *
find_machine(const char *name)
{
	Machine    *m;

	if (!cache_valid)
		load_machines();
	m = find_loaded_machine(cache, name);
	if (m == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("state machine \"%s\" does not exist", hx_clip(name)),
				 errhint("Add it to hx_machine and its edges to hx_transition.")));
	return m;
}

/* ---------------------------------------------------------------------
 * Lookups
 * ---------------------------------------------------------------------
 */

/* The first transition out of phase (by binary search), or ntransitions */
static int
first_from(Machine *m, const char *phase)
{
	int			lo = 0;
	int			hi = m->ntransitions;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (strcmp(m->transitions[mid].from, phase) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The transition from phase on event, or NULL */
static Transition *
find_edge(Machine *m, const char *phase, const char *event)
{
	int			i;

	for (i = first_from(m, phase);
		 i < m->ntransitions && strcmp(m->transitions[i].from, phase) == 0;
		 i++)
	{
		int			d = strcmp(m->transitions[i].event, event);

		if (d == 0)
			return &m->transitions[i];
		if (d > 0)
			break;
	}
	return NULL;
}

/* Is there an edge from phase to next? */
static bool
has_move(Machine *m, const char *phase, const char *next)
{
	int			i;

	for (i = first_from(m, phase);
		 i < m->ntransitions && strcmp(m->transitions[i].from, phase) == 0;
		 i++)
	{
		if (strcmp(m->transitions[i].to, next) == 0)
			return true;
	}
	return false;
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

/* "cancel (to chatting), publish (to done)": the edges out of phase */
static char *
edges_from(Machine *m, const char *phase)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = first_from(m, phase);
		 i < m->ntransitions && strcmp(m->transitions[i].from, phase) == 0;
		 i++)
	{
		if (buf.len > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfo(&buf, "%s (to %s)", m->transitions[i].event,
						 m->transitions[i].to);
	}
	return buf.data;
}

/* The detail of an invalid transition out of phase */
static int
errdetail_no_edge(Machine *m, const char *phase)
{
	char	   *edges;

	if (!is_phase(m, phase))
		return errdetail("\"%s\" is not a phase of state machine \"%s\".",
						 hx_clip(phase), m->name);
	edges = edges_from(m, phase);
	if (edges[0] == '\0')
		return errdetail("In state machine \"%s\", phase \"%s\" is final.",
						 m->name, phase);
	return errdetail("In state machine \"%s\", phase \"%s\" allows %s.",
					 m->name, phase, edges);
}

/* The detail of a row's phase that cannot move from oldphase to newshown */
static int
errdetail_moves(Machine *m, const char *oldphase, const char *oldshown,
				const char *newshown)
{
	char	   *edges;

	if (!is_phase(m, oldphase))
		return errdetail("It cannot move from %s to %s: %s is not a phase of state machine \"%s\".",
						 oldshown, newshown, oldshown, m->name);
	edges = edges_from(m, oldphase);
	if (edges[0] == '\0')
		return errdetail("It cannot move from %s to %s: in state machine \"%s\", phase \"%s\" is final.",
						 oldshown, newshown, m->name, oldphase);
	return errdetail("It cannot move from %s to %s: in state machine \"%s\", phase \"%s\" allows %s.",
					 oldshown, newshown, m->name, oldphase, edges);
}

/* ---------------------------------------------------------------------
 * The functions
 * ---------------------------------------------------------------------
 */

PG_FUNCTION_INFO_V1(hx_next_phase);

Datum
hx_next_phase(PG_FUNCTION_ARGS)
{
	char	   *machine = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *phase = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *event = text_to_cstring(PG_GETARG_TEXT_PP(2));
	Machine    *m = find_machine(machine);
	Transition *t = find_edge(m, phase, event);

	if (t == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_HX_INVALID_TRANSITION),
				 errmsg("invalid transition from phase \"%s\" on event \"%s\"",
						hx_clip(phase), hx_clip(event)),
				 errdetail_no_edge(m, phase)));
	PG_RETURN_TEXT_P(cstring_to_text(t->to));
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
	Machine    *m = find_machine(machine);
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

/* hx_phase_guard's arguments, resolved once per statement */
typedef struct PhaseArgs
{
	char	   *machine;
	AttrNumber	attnum;
	Oid			typoutput;
} PhaseArgs;

static void *
parse_phase_args(TriggerData *trigdata, MemoryContext cxt)
{
	Trigger    *tg = trigdata->tg_trigger;
	Relation	rel = trigdata->tg_relation;
	PhaseArgs  *args;
	bool		isvarlena;

	if (tg->tgnargs < 1 || tg->tgnargs > 2)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" must name a state machine and at most one column",
						tg->tgname),
				 errhint("EXECUTE FUNCTION hx_phase_guard('agent_session') guards column \"phase\"; "
						 "hx_phase_guard('agent_session', 'column') guards another.")));
	args = MemoryContextAlloc(cxt, sizeof(PhaseArgs));
	args->machine = MemoryContextStrdup(cxt, tg->tgargs[0]);
	args->attnum = hx_trigger_column(rel, (tg->tgnargs == 2) ? tg->tgargs[1] : "phase");
	getTypeOutputInfo(TupleDescAttr(RelationGetDescr(rel), args->attnum - 1)->atttypid,
					  &args->typoutput, &isvarlena);
	return args;
}

/* The phase column's value as text, or NULL */
static char *
phase_text(HeapTuple tuple, TupleDesc desc, AttrNumber attnum, Oid typoutput)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, attnum, desc, &isnull);

	return isnull ? NULL : OidOutputFunctionCall(typoutput, d);
}

/*
 * The phase column's value for a message: NULL when the current user may
 * not read it (hx_value_text_for), as the other guards decide.
 */
static char *
phase_shown(Relation rel, HeapTuple tuple, PhaseArgs *args)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, args->attnum, RelationGetDescr(rel), &isnull);

	return hx_value_text_for(rel, args->attnum, args->typoutput, d, isnull);
}

PG_FUNCTION_INFO_V1(hx_phase_guard);

/*
 * The messages name the column and the relation, and show the phases in
 * the detail only to a role that may read them: the machine's edges out
 * of the old phase would tell it too.
 */
Datum
hx_phase_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = hx_row_check_trigger_data(fcinfo, "hx_phase_guard", false);
	PhaseArgs  *args = hx_trigger_args(fcinfo, trigdata, parse_phase_args);
	Trigger    *tg = trigdata->tg_trigger;
	Relation	rel = trigdata->tg_relation;
	TupleDesc	desc = RelationGetDescr(rel);
	const char *colname = NameStr(TupleDescAttr(desc, args->attnum - 1)->attname);
	Machine    *m = find_machine(args->machine);
	bool		is_update = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event);
	HeapTuple	newtup = is_update ? trigdata->tg_newtuple : trigdata->tg_trigtuple;
	char	   *oldphase = NULL;
	char	   *newphase;
	char	   *oldshown;
	char	   *newshown;

	newphase = phase_text(newtup, desc, args->attnum, args->typoutput);
	if (is_update)
		oldphase = phase_text(trigdata->tg_trigtuple, desc, args->attnum,
							  args->typoutput);

	if (oldphase == NULL)
	{
		/* a new row, or one that never had a phase: it starts */
		if (newphase != NULL && strcmp(newphase, m->initial) == 0)
			return hx_trigger_return(trigdata);
		newshown = phase_shown(rel, newtup, args);
		ereport(ERROR,
				(errcode(ERRCODE_HX_INVALID_TRANSITION),
				 errmsg("invalid initial phase in column \"%s\" of relation \"%s\"",
						colname, RelationGetRelationName(rel)),
				 newshown ?
				 errdetail("It is %s, and state machine \"%s\" starts in phase \"%s\".",
						   newshown, m->name, m->initial) :
				 errdetail("State machine \"%s\" starts in phase \"%s\".",
						   m->name, m->initial),
				 hx_errtablecolconstraint(rel, args->attnum, tg->tgname)));
	}

	if (newphase != NULL &&
		(strcmp(oldphase, newphase) == 0 || has_move(m, oldphase, newphase)))
		return hx_trigger_return(trigdata);

	oldshown = phase_shown(rel, trigdata->tg_trigtuple, args);
	newshown = phase_shown(rel, newtup, args);
	if (oldshown && newshown)
		ereport(ERROR,
				(errcode(ERRCODE_HX_INVALID_TRANSITION),
				 errmsg("invalid transition in column \"%s\" of relation \"%s\"",
						colname, RelationGetRelationName(rel)),
				 errdetail_moves(m, oldphase, oldshown, newshown),
				 hx_errtablecolconstraint(rel, args->attnum, tg->tgname)));
	ereport(ERROR,
			(errcode(ERRCODE_HX_INVALID_TRANSITION),
			 errmsg("invalid transition in column \"%s\" of relation \"%s\"",
					colname, RelationGetRelationName(rel)),
			 errdetail("Its new value follows no edge of state machine \"%s\" from its old one.",
					   m->name),
			 hx_errtablecolconstraint(rel, args->attnum, tg->tgname)));
	return hx_trigger_return(trigdata); /* keep compiler quiet */
}

PG_FUNCTION_INFO_V1(hx_machine_changed);

/*
 * Statement trigger on hx_machine and hx_transition: DML does not
 * invalidate relcache entries, so send an invalidation for the table
 * ourselves; every backend drops its machine cache when it arrives.  On
 * any other table, or fired any other way, it is an error: as a row
 * trigger it would return no row and silently drop every row written.
 */
Datum
hx_machine_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = hx_trigger_data(fcinfo, "hx_machine_changed");
	Oid			relid = RelationGetRelid(trigdata->tg_relation);

	if (!TRIGGER_FIRED_FOR_STATEMENT(trigdata->tg_event) ||
		!TRIGGER_FIRED_AFTER(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" must be AFTER ... FOR EACH STATEMENT",
						trigdata->tg_trigger->tgname),
				 errdetail("Function \"%s\" is the extension's own trigger on hx_machine and hx_transition.",
						   "hx_machine_changed")));
	if (relid != hx_extension_relid("hx_machine") &&
		relid != hx_extension_relid("hx_transition"))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" is not on hx_machine or hx_transition",
						trigdata->tg_trigger->tgname),
				 errdetail("Function \"%s\" is the extension's own trigger on hx_machine and hx_transition.",
						   "hx_machine_changed")));

	CacheInvalidateRelcache(trigdata->tg_relation);
	return PointerGetDatum(NULL);
}
