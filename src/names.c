/*-------------------------------------------------------------------------
 *
 * names.c
 *	  The names of streams, unique per table:
 *
 *	  hx_table_stream_prefix(relid)	the prefix a table's rows stream under
 *			by default
 *	  hx_stream_trigger_prefix(tgoid)	the prefix of an hx_stream trigger's
 *			streams, checked against every other table's
 *	  hx_stream_tables()				every table that streams, its prefix, and
 *			the table it collides with, if any
 *
 * A row's stream is "<prefix>:<key>".  By default the prefix is the name
 * of the table (of the root of its partition tree), qualified by its
 * schema unless the schema is public: "sessions", "tenant_b.sessions".
 * Each part is written bare when it is a lower-case ASCII identifier
 * ([a-z_][a-z0-9_]*) and double-quoted otherwise, with its quotes doubled
 * ("Tenant"."a.b"), as quote_ident writes them: so a prefix reads back as
 * exactly one schema and table, and no two tables get the same one.
 * (Unlike quote_ident, keywords are written bare: the names must not
 * change with the keyword list of another PostgreSQL release.)  No
 * default prefix contains ':' outside quotes, so "<prefix>:" ends where
 * the prefix ends, whatever the key.
 *
 * A trigger's stream=<name> option names its streams freely, and could
 * give two tables one name.  So every backend keeps a registry of the
 * hx_stream triggers of the database (read from pg_trigger), and a
 * trigger whose streams could be named like another table's (the same
 * prefix, or one prefix followed by ':' beginning the other) is refused,
 * with both tables named, whenever it fires and whenever a snapshot is
 * read through it: neither table streams until one gets another name.
 *
 * The registry follows the catalogs through invalidations: a relcache
 * invalidation of a relation (CREATE or DROP TRIGGER on it, a rename, a
 * new schema, a partition attached or detached, but also VACUUM, ANALYZE
 * or an index added) makes the next lookup read that relation's triggers
 * again through pg_trigger's index on tgrelid, and derive every prefix
 * again only when its triggers, or a prefix that its name or its place in
 * a partition tree gave, changed; a renamed schema derives them again; too
 * many invalidations at once, or a reset, read the whole of pg_trigger
 * again.  Deriving costs a lookup or two per trigger (a table partitioned
 * 5,000 times: about 20 ms), so the invalidations that VACUUM sends for
 * each partition must not cause it.  Nothing is freed from inside a
 * callback.
 *
 * src/names.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/partition.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "names.h"
#include "stream.h"

/* An hx_stream trigger, as pg_trigger has it, and what it names */
typedef struct StreamTrigger
{
	Oid			tgoid;			/* hash key */
	Oid			tgrelid;
	Oid			tgparentid;		/* the trigger it was cloned from, if any */
	NameData	tgname;
	char	   *named;			/* its stream=<name> option, or NULL */
	/* derived: */
	Oid			source;			/* the table whose rows these streams are */
	char	   *prefix;			/* NULL when the table is gone */
	Oid			conflict;		/* a trigger of another table naming alike */
} StreamTrigger;

/* Relations invalidated since the registry was last read, at most this many */
#define MAX_DIRTY	32

/*
 * The registry: a hash table and its entries' strings in names_cxt, a
 * child of CacheMemoryContext that lives as long as the backend.
 * read_all() empties the context and builds the table anew; an entry's
 * strings are freed when it is forgotten or its prefix derived again.
 * The callbacks below only set flags: whatever they invalidate is replaced
 * at the next lookup, outside any scan of the table.
 */
static MemoryContext names_cxt = NULL;
static HTAB *triggers = NULL;	/* StreamTrigger by tgoid */
static bool need_full = true;	/* read the whole of pg_trigger */
static bool need_derive = true; /* derive prefixes and conflicts */
static Oid	dirty[MAX_DIRTY];	/* read these relations' triggers */
static int	ndirty = 0;
static uint64 generation = 0;	/* prefixes derived so far */

static void
names_relcache_callback(Datum arg, Oid relid)
{
	int			i;

	if (need_full)
		return;
	if (relid == InvalidOid)
	{
		need_full = true;
		return;
	}
	for (i = 0; i < ndirty; i++)
		if (dirty[i] == relid)
			return;
	if (ndirty == MAX_DIRTY)
		need_full = true;
	else
		dirty[ndirty++] = relid;
}

static void
names_namespace_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	need_derive = true;
}

void
hx_names_init(void)
{
	CacheRegisterRelcacheCallback(names_relcache_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(NAMESPACEOID, names_namespace_callback, (Datum) 0);
}

/* ---------------------------------------------------------------------
 * Default prefixes
 * ---------------------------------------------------------------------
 */

/* An identifier, bare when lower-case ASCII, else double-quoted */
static void
append_name_part(StringInfo buf, const char *ident)
{
	bool		bare = (ident[0] >= 'a' && ident[0] <= 'z') || ident[0] == '_';
	const char *p;

	for (p = ident; *p && bare; p++)
		bare = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_';
	if (bare)
	{
		appendStringInfoString(buf, ident);
		return;
	}
	appendStringInfoChar(buf, '"');
	for (p = ident; *p; p++)
	{
		if (*p == '"')
			appendStringInfoChar(buf, '"');
		appendStringInfoChar(buf, *p);
	}
	appendStringInfoChar(buf, '"');
}

/*
 * The prefix of a table's streams, by default: "<table>" in schema public,
 * "<schema>.<table>" elsewhere; NULL when the table is gone.
 */
char *
hx_table_stream_prefix(Oid relid)
{
	char	   *relname = get_rel_name(relid);
	char	   *nspname;
	StringInfoData buf;

	if (relname == NULL)
		return NULL;
	nspname = get_namespace_name(get_rel_namespace(relid));
	if (nspname == NULL)
		return NULL;
	initStringInfo(&buf);
	if (strcmp(nspname, "public") != 0)
	{
		append_name_part(&buf, nspname);
		appendStringInfoChar(&buf, '.');
	}
	append_name_part(&buf, relname);
	return buf.data;
}

/* ---------------------------------------------------------------------
 * The registry
 * ---------------------------------------------------------------------
 */

/* Is function foid hx_stream (whatever its SQL name)? */
static bool
is_stream_function(Oid foid)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(foid));
	bool		c_named_so = false;
	FmgrInfo	finfo;

	if (!HeapTupleIsValid(tup))
		return false;
	if (((Form_pg_proc) GETSTRUCT(tup))->prolang == ClanguageId)
	{
		bool		isnull;
		Datum		src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);

		c_named_so = !isnull && strcmp(TextDatumGetCString(src), "hx_stream") == 0;
	}
	ReleaseSysCache(tup);
	if (!c_named_so)
		return false;
	/* the symbol of this library, not of another one */
	fmgr_info(foid, &finfo);
	return finfo.fn_addr == hx_stream;
}

/*
 * Read the trigger of tup into *st (its stream=<name> pointing into tup's
 * arguments, or a copy of them) when it is an hx_stream trigger; false
 * when it is another.
 */
static bool
read_trigger(HeapTuple tup, TupleDesc desc, StreamTrigger *st)
{
	Form_pg_trigger tg = (Form_pg_trigger) GETSTRUCT(tup);

	if (!is_stream_function(tg->tgfoid))
		return false;
	memset(st, 0, sizeof(StreamTrigger));
	st->tgoid = tg->oid;
	st->tgrelid = tg->tgrelid;
	st->tgparentid = tg->tgparentid;
	st->tgname = tg->tgname;
	if (tg->tgnargs > 2)
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, Anum_pg_trigger_tgargs, desc, &isnull);
		bytea	   *args = isnull ? NULL : DatumGetByteaPP(d);
		const char *p = args ? VARDATA_ANY(args) : NULL;
		const char *end = args ? p + VARSIZE_ANY_EXHDR(args) : NULL;
		int			i;

		/* NUL-terminated arguments, one after the other */
		for (i = 0; p && i < tg->tgnargs && p < end; i++)
		{
			if (i >= 2 && strncmp(p, "stream=", 7) == 0 && p[7] != '\0')
				st->named = (char *) p + 7;
			p += strlen(p) + 1;
		}
	}
	return true;
}

/* Register a trigger read by read_trigger, to be derived */
static void
enter_trigger(const StreamTrigger *st)
{
	StreamTrigger *entry;
	bool		found;

	entry = hash_search(triggers, &st->tgoid, HASH_ENTER, &found);
	entry->tgrelid = st->tgrelid;
	entry->tgparentid = st->tgparentid;
	entry->tgname = st->tgname;
	entry->named = st->named ? MemoryContextStrdup(names_cxt, st->named) : NULL;
	entry->source = InvalidOid;
	entry->prefix = NULL;
	entry->conflict = InvalidOid;
}

/* Read the whole of pg_trigger */
static void
read_all(void)
{
	HASHCTL		ctl;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;

	if (names_cxt == NULL)
		names_cxt = AllocSetContextCreate(CacheMemoryContext, "hxstate stream names",
										  ALLOCSET_SMALL_SIZES);
	triggers = NULL;
	MemoryContextReset(names_cxt);
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(StreamTrigger);
	ctl.hcxt = names_cxt;
	triggers = hash_create("hxstate stream triggers", 64, &ctl,
						   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	rel = table_open(TriggerRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while ((tup = systable_getnext(scan)) != NULL)
	{
		StreamTrigger st;

		CHECK_FOR_INTERRUPTS();
		if (read_trigger(tup, RelationGetDescr(rel), &st))
			enter_trigger(&st);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
}

static void
forget_entry(StreamTrigger *entry)
{
	if (entry->named)
		pfree(entry->named);
	if (entry->prefix)
		pfree(entry->prefix);
	hash_search(triggers, &entry->tgoid, HASH_REMOVE, NULL);
}

/* The root of relid's partition tree, or relid itself */
static Oid
root_table(Oid relid)
{
	List	   *ancestors;
	Oid			root;

	if (!get_rel_relispartition(relid))
		return relid;
	ancestors = get_partition_ancestors(relid);
	root = ancestors != NIL ? llast_oid(ancestors) : relid;
	list_free(ancestors);
	return root;
}

/* Does st name its streams as the registry's entry for its trigger says? */
static bool
same_trigger(const StreamTrigger *st, const StreamTrigger *entry)
{
	return st->tgparentid == entry->tgparentid &&
		strcmp(NameStr(st->tgname), NameStr(entry->tgname)) == 0 &&
		(st->named == NULL ? entry->named == NULL :
		 entry->named != NULL && strcmp(st->named, entry->named) == 0);
}

/*
 * Do the prefixes derived for the triggers of relid, and for those whose
 * streams are relid's rows, still hold: the same table at the root of the
 * partition tree, with the same name?  (A relation that a partition was
 * detached from has it among its rows no more, so each such trigger's
 * root is looked up: for the rows of a partitioned table, a lookup per
 * partition, when the table itself is invalidated, which is rare; a
 * partition's own invalidation, which VACUUM and ANALYZE send, costs one.)
 */
static bool
prefixes_hold(Oid relid)
{
	HASH_SEQ_STATUS status;
	StreamTrigger *entry;
	Oid			relid_root = InvalidOid;
	Oid			last_source = InvalidOid;
	char	   *last_prefix = NULL;
	bool		hold = true;

	hash_seq_init(&status, triggers);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		Oid			source;

		CHECK_FOR_INTERRUPTS();
		if (!hold || (entry->tgrelid != relid && entry->source != relid))
			continue;
		if (entry->named)
		{
			/* its table, the top of its clones, stays until dropped */
			if (entry->source == relid &&
				(get_rel_name(relid) == NULL) != (entry->prefix == NULL))
				hold = false;
			continue;
		}
		if (entry->tgrelid == relid)
		{
			if (!OidIsValid(relid_root))
				relid_root = root_table(relid);
			source = relid_root;
		}
		else
			source = root_table(entry->tgrelid);
		if (source != entry->source)
		{
			hold = false;
			continue;
		}
		if (source != last_source)
		{
			last_source = source;
			last_prefix = hx_table_stream_prefix(source);
		}
		if ((last_prefix == NULL) != (entry->prefix == NULL) ||
			(last_prefix != NULL && strcmp(last_prefix, entry->prefix) != 0))
			hold = false;
	}
	return hold;
}

/*
 * Read the triggers of relid again; true when the prefixes must be derived
 * again: its hx_stream triggers are not those registered, or a prefix
 * derived from its name or its place in a partition tree changed.  Any
 * other invalidation (VACUUM, ANALYZE, an index or a column added) leaves
 * the registry as it is.
 */
static bool
reread_relation(Oid relid)
{
	HASH_SEQ_STATUS status;
	StreamTrigger *entry;
	StreamTrigger *now;
	int			nnow = 0;
	int			maxnow = 4;
	int			nold = 0;
	bool		same = true;
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tup;
	int			i;

	/* its hx_stream triggers as pg_trigger has them now (named: copies) */
	now = palloc(sizeof(StreamTrigger) * maxnow);
	rel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_trigger_tgrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, TriggerRelidNameIndexId, true, NULL, 1, &key);
	while ((tup = systable_getnext(scan)) != NULL)
	{
		if (nnow == maxnow)
		{
			maxnow *= 2;
			now = repalloc(now, sizeof(StreamTrigger) * maxnow);
		}
		if (!read_trigger(tup, RelationGetDescr(rel), &now[nnow]))
			continue;
		if (now[nnow].named)
			now[nnow].named = pstrdup(now[nnow].named);
		nnow++;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	/* as the registry has them? */
	hash_seq_init(&status, triggers);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (entry->tgrelid != relid)
			continue;
		nold++;
		for (i = 0; i < nnow && now[i].tgoid != entry->tgoid; i++)
			;
		if (i == nnow || !same_trigger(&now[i], entry))
			same = false;
	}
	if (same && nold == nnow)
		same = prefixes_hold(relid);
	else
	{
		hash_seq_init(&status, triggers);
		while ((entry = hash_seq_search(&status)) != NULL)
			if (entry->tgrelid == relid)
				forget_entry(entry);
		for (i = 0; i < nnow; i++)
			enter_trigger(&now[i]);
		same = false;
	}
	for (i = 0; i < nnow; i++)
		if (now[i].named)
			pfree(now[i].named);
	pfree(now);
	return !same;
}

static int
entry_prefix_cmp(const void *a, const void *b)
{
	return strcmp((*(StreamTrigger *const *) a)->prefix,
				  (*(StreamTrigger *const *) b)->prefix);
}

/* The first of n entries sorted by prefix whose prefix is s[0..len), or -1 */
static long
find_prefix(StreamTrigger **sorted, long n, const char *s, int len)
{
	long		lo = 0;
	long		hi = n;

	while (lo < hi)
	{
		long		mid = lo + (hi - lo) / 2;
		const char *p = sorted[mid]->prefix;
		int			d = strncmp(p, s, len);

		if (d == 0 && p[len] != '\0')
			d = 1;				/* s[0..len) followed by more */
		if (d < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < n && strncmp(sorted[lo]->prefix, s, len) == 0 &&
		sorted[lo]->prefix[len] == '\0')
		return lo;
	return -1;
}

/*
 * An entry of the group that begins at sorted[lo] whose source is not
 * source, or NULL: the first one when its source differs, else other, the
 * group's first entry of another source than the first's (NULL when the
 * group has one source).
 */
static StreamTrigger *
other_source(StreamTrigger **sorted, long lo, StreamTrigger *other, Oid source)
{
	return sorted[lo]->source != source ? sorted[lo] : other;
}

/* The first entry of sorted[lo..hi) whose source is not sorted[lo]'s */
static StreamTrigger *
first_other_source(StreamTrigger **sorted, long lo, long hi)
{
	long		i;

	for (i = lo + 1; i < hi; i++)
		if (sorted[i]->source != sorted[lo]->source)
			return sorted[i];
	return NULL;
}

/*
 * Give each entry of the groups sorted[a0..a1) and sorted[b0..b1) that has
 * no conflict yet one of the other group of another source, if there is
 * one, in time linear in the groups' sizes (a table partitioned a
 * thousand times has a thousand triggers of one prefix).
 */
static void
mark_conflicts(StreamTrigger **sorted, long a0, long a1, long b0, long b1)
{
	StreamTrigger *a_other = first_other_source(sorted, a0, a1);
	StreamTrigger *b_other = (b0 == a0) ? a_other : first_other_source(sorted, b0, b1);
	long		i;

	for (i = a0; i < a1; i++)
	{
		StreamTrigger *x = sorted[i];
		StreamTrigger *y = other_source(sorted, b0, b_other, x->source);

		if (y != NULL && !OidIsValid(x->conflict))
			x->conflict = y->tgoid;
	}
	if (b0 == a0)
		return;
	for (i = b0; i < b1; i++)
	{
		StreamTrigger *x = sorted[i];
		StreamTrigger *y = other_source(sorted, a0, a_other, x->source);

		if (y != NULL && !OidIsValid(x->conflict))
			x->conflict = y->tgoid;
	}
}

/*
 * Derive each trigger's table and prefix, and find the triggers of two
 * tables whose streams could be named alike: the same prefix, or a prefix
 * followed by ':' that begins another (a key of the first beginning with
 * the rest of the second would name a stream of the second).  The entries
 * are sorted by prefix and handled a group of one prefix at a time.
 */
static void
derive(void)
{
	HASH_SEQ_STATUS status;
	StreamTrigger *entry;
	StreamTrigger **sorted;
	long		n = 0;
	long		i;
	long		j;

	generation++;
	sorted = palloc(sizeof(StreamTrigger *) * Max(hash_get_num_entries(triggers), 1));
	hash_seq_init(&status, triggers);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		CHECK_FOR_INTERRUPTS();
		if (entry->prefix)
			pfree(entry->prefix);
		entry->prefix = NULL;
		entry->conflict = InvalidOid;
		if (entry->named)
		{
			/* the table where the trigger was created, not a partition's clone */
			StreamTrigger *top = entry;
			StreamTrigger *up;

			while (OidIsValid(top->tgparentid) &&
				   (up = hash_search(triggers, &top->tgparentid, HASH_FIND, NULL)) != NULL &&
				   up != entry)
				top = up;
			entry->source = top->tgrelid;
			if (get_rel_name(entry->source) != NULL)
				entry->prefix = MemoryContextStrdup(names_cxt, entry->named);
		}
		else
		{
			char	   *prefix;

			entry->source = root_table(entry->tgrelid);
			prefix = hx_table_stream_prefix(entry->source);
			if (prefix)
				entry->prefix = MemoryContextStrdup(names_cxt, prefix);
		}
		if (entry->prefix)
			sorted[n++] = entry;
	}

	qsort(sorted, n, sizeof(StreamTrigger *), entry_prefix_cmp);
	for (i = 0; i < n; i = j)
	{
		const char *p = sorted[i]->prefix;
		int			k;

		CHECK_FOR_INTERRUPTS();
		/* the group of prefix p: sorted[i..j) */
		for (j = i + 1; j < n && strcmp(sorted[j]->prefix, p) == 0; j++)
			;
		mark_conflicts(sorted, i, j, i, j);
		/* a shorter prefix that, followed by ':', begins p: its group */
		for (k = 0; p[k]; k++)
		{
			long		g0;
			long		g1;

			if (p[k] != ':' || (g0 = find_prefix(sorted, n, p, k)) < 0)
				continue;
			for (g1 = g0 + 1; g1 < n && strcmp(sorted[g1]->prefix, sorted[g0]->prefix) == 0; g1++)
				;
			mark_conflicts(sorted, i, j, g0, g1);
		}
	}
	pfree(sorted);
}

/* Bring the registry up to date with the catalogs */
static void
refresh(void)
{
	PG_TRY();
	{
		while (need_full || ndirty > 0 || need_derive)
		{
			if (need_full)
			{
				need_full = false;
				ndirty = 0;
				read_all();
				need_derive = true;
			}
			else if (ndirty > 0)
			{
				Oid			rels[MAX_DIRTY];
				int			n = ndirty;
				int			i;

				memcpy(rels, dirty, sizeof(Oid) * n);
				ndirty = 0;
				for (i = 0; i < n; i++)
					if (reread_relation(rels[i]))
						need_derive = true;
			}
			else
			{
				need_derive = false;
				derive();
			}
		}
	}
	PG_CATCH();
	{
		need_full = true;
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * A count that changes whenever the prefixes, or the conflicts between
 * them, may have changed: what hx_stream_trigger_prefix() returned holds
 * while it stays the same.
 */
uint64
hx_stream_names_generation(void)
{
	refresh();
	return generation;
}

/* "schema.table", for messages */
static char *
relation_text(Oid relid)
{
	char	   *relname = get_rel_name(relid);
	char	   *nspname = relname ? get_namespace_name(get_rel_namespace(relid)) : NULL;

	if (relname == NULL || nspname == NULL)
		return psprintf("%u", relid);
	return psprintf("%s.%s", nspname, relname);
}

/*
 * The prefix of the streams of hx_stream trigger tgoid, and the table
 * whose rows they are (*source: the root of a partition tree, or with
 * stream=<name> the table the trigger was created on).  An error when
 * another table's streams could be named alike.
 *
 * Under the scripts of 0.5.0 and before (legacy), streams keep the names
 * those versions gave them, the table's name alone, until ALTER EXTENSION
 * hxstate UPDATE carries their events over to the new names.
 */
char *
hx_stream_trigger_prefix(Oid tgoid, bool legacy, Oid *source)
{
	StreamTrigger *entry;
	StreamTrigger *other;

	refresh();
	entry = hash_search(triggers, &tgoid, HASH_FIND, NULL);
	if (entry == NULL)
	{
		/* created since the last invalidation was seen: read everything */
		need_full = true;
		refresh();
		entry = hash_search(triggers, &tgoid, HASH_FIND, NULL);
	}
	if (entry == NULL || entry->prefix == NULL)
		elog(ERROR, "trigger %u is not an hx_stream trigger of an existing table", tgoid);
	*source = entry->source;
	if (legacy)
		return pstrdup(entry->named ? entry->named : get_rel_name(entry->source));
	other = OidIsValid(entry->conflict) ?
		hash_search(triggers, &entry->conflict, HASH_FIND, NULL) : NULL;
	if (other != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("relations \"%s\" and \"%s\" stream under the same names",
						relation_text(entry->source), relation_text(other->source)),
				 errdetail("Trigger \"%s\" names the streams of relation \"%s\" \"%s:<key>\", and trigger \"%s\" names those of relation \"%s\" \"%s:<key>\".",
						   NameStr(entry->tgname), relation_text(entry->source),
						   hx_clip(entry->prefix), NameStr(other->tgname),
						   relation_text(other->source), hx_clip(other->prefix)),
				 errhint("Give one of the triggers a stream=<name> option of its own.")));
	return pstrdup(entry->prefix);
}

PG_FUNCTION_INFO_V1(hx_stream_tables);

/*
 * hx_stream_tables() -> SETOF (source regclass, prefix text, named bool,
 * relation regclass, trigger name, conflicts_with regclass): the tables
 * whose rows stream, one row per hx_stream trigger (not counting the
 * clones of a partitioned table's trigger on its partitions).
 */
Datum
hx_stream_tables(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS status;
	StreamTrigger *entry;

	InitMaterializedSRF(fcinfo, 0);
	refresh();
	hash_seq_init(&status, triggers);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		Datum		values[6];
		bool		nulls[6] = {false, false, false, false, false, false};
		StreamTrigger *other = NULL;

		if (entry->prefix == NULL ||
			(OidIsValid(entry->tgparentid) &&
			 hash_search(triggers, &entry->tgparentid, HASH_FIND, NULL) != NULL))
			continue;
		if (OidIsValid(entry->conflict))
			other = hash_search(triggers, &entry->conflict, HASH_FIND, NULL);
		values[0] = ObjectIdGetDatum(entry->source);
		values[1] = CStringGetTextDatum(entry->prefix);
		values[2] = BoolGetDatum(entry->named != NULL);
		values[3] = ObjectIdGetDatum(entry->tgrelid);
		values[4] = NameGetDatum(&entry->tgname);
		values[5] = other ? ObjectIdGetDatum(other->source) : (Datum) 0;
		nulls[5] = (other == NULL);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
