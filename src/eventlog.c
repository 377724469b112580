/*-------------------------------------------------------------------------
 *
 * eventlog.c
 *	  The event log hx_event: every event of every stream, written in the
 *	  transaction of the change it reports, the source of truth that
 *	  followers read and resume from.
 *
 * An event is written straight into the partition of its day, as the
 * logical replication apply worker writes a row: the tuple is formed,
 * checked against the partition's constraints and bound, and inserted with
 * its index entries, with no query to plan or start.  That is what an
 * INSERT into the parent does, when the owner has configured nothing more
 * on the log; when they have (row-level security, a trigger or a rule on
 * the log or the partition, a partition that is not laid out as the
 * extension made it or does not accept the row), the event goes through
 * an INSERT into the parent prepared once per backend, so that all of it
 * applies.  The stream's next seq
 * is its last seq plus one, read straight from the partitions' primary
 * keys (stream, seq), backwards, so that neither row-level security nor
 * the owner's privileges can hide an event, and with the latest snapshot,
 * whatever the isolation level, so that the events of every committed
 * transaction count: a stream's writers are serialised by the row lock
 * (or, for a new row, by the key's unique index), so nothing can commit
 * in between.
 *
 * The log is a ring of HX_LOG_BUCKETS daily partitions (eventlog.h).  A
 * stream's events are logged in time order, so its last event is in the
 * most recent partition that holds any of its events: partitions are
 * probed from today's backwards, and the search stops at the first one
 * whose event of the stream is from the day that partition stands for
 * (a partition can still hold an older lap of the ring when trimming has
 * not run for longer than the ring is long; then the search goes on).
 *
 * src/eventlog.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/itup.h"
#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/toast_internals.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "partitioning/partbounds.h"
#include "partitioning/partdesc.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/partcache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "eventlog.h"

/* The log's columns, in order, as the install script creates them */
#define HX_LOG_NATTS 5
#define HX_LOG_CREATED_AT 5		/* attribute number of created_at */
static const Oid log_atttypes[HX_LOG_NATTS] =
{TEXTOID, INT8OID, TEXTOID, JSONBOID, TIMESTAMPTZOID};

/*
 * Cached once per backend: the log's INSERT and its partitions.  A
 * relcache invalidation of the log or of a partition (the extension
 * dropped, say) marks them stale; they are replaced on next use, never
 * freed from inside the callback, which may run while the plan executes.
 */
static SPIPlanPtr insert_plan = NULL;
static Oid	log_relid = InvalidOid;
static Oid	bucket_relids[HX_LOG_BUCKETS];
static bool stale = true;
static bool ring_intact = false;	/* partition b takes the days b mod 8 */
static int	insert_depth = 0;	/* INSERTs of the log running, nested */
static Oid	guard_foid = InvalidOid;	/* hx_event_guard(), where installed */

/* The event hx_log_insert() is inserting through SPI, for the guard */
static const char *inserting_stream = NULL;
static int64 inserting_seq = 0;

/*
 * What writing an event into a partition needs besides the partition
 * itself, prepared once per backend rather than for every event (an
 * executor's ResultRelInfo compiles the CHECK constraints on first use,
 * and ExecOpenIndices() builds each index's IndexInfo, compiling a partial
 * index's predicate, and insert_direct() makes one per event): the
 * compiled CHECK constraints, and the indexes with their IndexInfo, the
 * expressions and predicates compiled.  In cxt, made under the call's
 * memory and moved under CacheMemoryContext once whole (log_partition_for),
 * deleted when replaced (never while busy); valid until a relcache
 * invalidation of the partition (a constraint or an index added or
 * dropped sends one), of one of its indexes, or of the log.  The indexes
 * are kept only when all are btree indexes (no other access method keeps
 * state in an IndexInfo between inserts); otherwise ExecOpenIndices()
 * does it per event.  Busy while in use, so that an event written from
 * inside a constraint's or a predicate's function gets what the executor
 * makes on its own.
 */
typedef struct LogPartition
{
	bool		valid;
	bool		busy;
	Oid			relid;			/* the partition they were made for */
	int			ncheck;
	ExprState **checks;
	bool		has_indexes;	/* the indexes are below */
	int			nindexes;
	Oid		   *indexoids;
	IndexInfo **indexinfos;
	MemoryContext cxt;
} LogPartition;

static LogPartition log_parts[HX_LOG_BUCKETS];
static uint64 log_partition_invals = 0; /* relcache invalidations seen */

static void
log_relcache_callback(Datum arg, Oid relid)
{
	bool		all = (relid == InvalidOid || relid == log_relid);
	int			i;
	int			k;

	log_partition_invals++;
	if (all)
		stale = true;
	for (i = 0; i < HX_LOG_BUCKETS; i++)
	{
		LogPartition *lp = &log_parts[i];

		if (all || relid == bucket_relids[i])
		{
			stale = true;
			lp->valid = false;
		}
		for (k = 0; lp->valid && lp->has_indexes && k < lp->nindexes; k++)
			if (relid == lp->indexoids[k])
				lp->valid = false;
	}
}

void
hx_log_init(void)
{
	CacheRegisterRelcacheCallback(log_relcache_callback, (Datum) 0);
}

/*
 * Days since the Unix epoch of a timestamp, as the partitions count them:
 * the partition key is floor(EXTRACT(epoch FROM created_at - the epoch) /
 * 86400), and that EXTRACT is the exact number of microseconds, so this is
 * floor division of microseconds.
 */
static int64
day_of(TimestampTz ts)
{
	int64		usecs = ts + (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
	int64		per_day = (int64) HX_LOG_BUCKET_SECONDS * USECS_PER_SEC;

	return (usecs >= 0) ? usecs / per_day : -((-usecs + per_day - 1) / per_day);
}

static int
bucket_of_day(int64 day)
{
	return (int) (((day % HX_LOG_BUCKETS) + HX_LOG_BUCKETS) % HX_LOG_BUCKETS);
}

/*
 * Does the partition key expression (of the log rel, over created_at) give
 * every day the partition of the ring (eventlog.h)?  Evaluated on the first
 * and last microsecond and the middle of each day around today, around the
 * epoch, and in the 1990s (days before the epoch are negative).
 */
static bool
key_follows_ring(Relation rel, Node *keyexpr)
{
	static const int64 around[] = {0, 9131};	/* the epoch, 1995 */
	EState	   *estate = CreateExecutorState();
	ExprContext *econtext = GetPerTupleExprContext(estate);
	MemoryContext oldcxt = MemoryContextSwitchTo(estate->es_query_cxt);
	ExprState  *expr = ExecPrepareExpr((Expr *) copyObject(keyexpr), estate);
	TupleTableSlot *slot = MakeSingleTupleTableSlot(RelationGetDescr(rel),
													&TTSOpsVirtual);
	int64		today = day_of(GetCurrentTimestamp());
	int64		per_day = (int64) HX_LOG_BUCKET_SECONDS * USECS_PER_SEC;
	int64		epoch = (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
	bool		follows = true;
	int			c;
	int			k;
	int			t;

	for (c = 0; c < 3 && follows; c++)
	{
		int64		centre = (c < 2) ? around[c] : today;

		for (k = -2 * HX_LOG_BUCKETS; k <= 2 * HX_LOG_BUCKETS && follows; k++)
		{
			int64		day = centre + k;
			TimestampTz times[3];

			times[0] = day * per_day - epoch;
			times[1] = times[0] + per_day / 2;
			times[2] = times[0] + per_day - 1;
			for (t = 0; t < 3 && follows; t++)
			{
				Datum		v;
				bool		isnull;

				ExecClearTuple(slot);
				memset(slot->tts_isnull, true, slot->tts_tupleDescriptor->natts * sizeof(bool));
				slot->tts_values[HX_LOG_CREATED_AT - 1] = TimestampTzGetDatum(times[t]);
				slot->tts_isnull[HX_LOG_CREATED_AT - 1] = false;
				ExecStoreVirtualTuple(slot);
				econtext->ecxt_scantuple = slot;
				v = ExecEvalExprSwitchContext(expr, econtext, &isnull);
				follows = !isnull && DatumGetInt64(v) == bucket_of_day(day) &&
					day_of(times[t]) == day;
				ResetExprContext(econtext);
			}
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	MemoryContextSwitchTo(oldcxt);
	FreeExecutorState(estate);
	return follows;
}

/*
 * Is the log still partitioned as the install script made it: by one
 * bigint expression of created_at alone (the day modulo HX_LOG_BUCKETS, a
 * partition key cannot be altered), each value b taken by hx_event_<b>?
 * Then insert_direct() may pick the partition itself, without evaluating
 * the partition bound (a numeric expression, the larger part of the cost
 * of routing a row).  When partitions were detached or attached otherwise,
 * every event goes through the INSERT into the parent.
 */
static bool
check_ring(void)
{
	Relation	rel = table_open(log_relid, AccessShareLock);
	PartitionKey key;
	PartitionDesc pdesc;
	PartitionBoundInfo bound;
	Bitmapset  *attnos = NULL;
	bool		intact = false;
	int			i;

	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		goto done;
	key = RelationGetPartitionKey(rel);
	if (key->strategy != PARTITION_STRATEGY_LIST || key->partnatts != 1 ||
		key->partattrs[0] != 0 || key->parttypid[0] != INT8OID ||
		list_length(key->partexprs) != 1)
		goto done;
	pull_varattnos(linitial(key->partexprs), 1, &attnos);
	if (!bms_is_member(HX_LOG_CREATED_AT - FirstLowInvalidHeapAttributeNumber, attnos) ||
		bms_num_members(attnos) != 1)
		goto done;
	pdesc = RelationGetPartitionDesc(rel, true);
	bound = pdesc->boundinfo;
	if (bound == NULL || bound->strategy != PARTITION_STRATEGY_LIST ||
		bound->ndatums != HX_LOG_BUCKETS)
		goto done;
	for (i = 0; i < bound->ndatums; i++)
	{
		int64		b = DatumGetInt64(bound->datums[i][0]);

		if (b < 0 || b >= HX_LOG_BUCKETS ||
			pdesc->oids[bound->indexes[i]] != bucket_relids[b])
			goto done;
	}
	intact = key_follows_ring(rel, linitial(key->partexprs));
done:
	table_close(rel, AccessShareLock);
	return intact;
}

/*
 * Find the partitions and prepare the INSERT, once per backend (with a
 * connection to SPI of its own, as writing straight into the partitions
 * needs none)
 */
void
hx_log_prepare(void)
{
	SPIPlanPtr	plan;
	const char *nsp;
	int			i;

	if (insert_plan && !stale)
		return;
	/*
	 * An INSERT that is running the old plan (a trigger the owner put on
	 * the log wrote to a streamed table) still needs it: it is left to the
	 * backend's end then, once.
	 */
	if (insert_plan && insert_depth == 0)
		SPI_freeplan(insert_plan);
	insert_plan = NULL;
	stale = false;

	log_relid = hx_extension_relid("hx_event");
	guard_foid = hx_extension_function("hx_event_guard");
	for (i = 0; i < HX_LOG_BUCKETS; i++)
		bucket_relids[i] = hx_extension_relid(psprintf("hx_event_%d", i));
	ring_intact = check_ring();

	/* every name qualified: this runs as the table owner, any search_path */
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	nsp = quote_identifier(get_namespace_name(get_rel_namespace(log_relid)));
	plan = SPI_prepare(psprintf("INSERT INTO %s.hx_event (stream, seq, type, event, created_at)"
								" VALUES ($1, $2, $3, $4, $5)", nsp),
					   HX_LOG_NATTS, (Oid *) log_atttypes);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	SPI_keepplan(plan);
	SPI_finish();
	insert_plan = plan;
}

Oid
hx_log_relid(void)
{
	Assert(insert_plan != NULL);
	return log_relid;
}

/*
 * What this backend last found as a stream's last seq, by a 64-bit hash of
 * the stream's name: a lower bound for the next probe of it, so that the
 * probe's backward index scan reads only the stream's events from there
 * on, not every one of the stream's entries on the leaf page (a btree scan
 * reads a page's matching entries whole, 120 instructions each).  Any
 * bound gives the right answer: events are never renumbered, so when the
 * probe finds an event at or above the bound it found the stream's last;
 * when it finds none (the stream's newest events were deleted, or two
 * names share a hash), the stream is probed again without one.
 *
 * A set-associative table in the backend's static memory: HX_SEQ_SETS
 * sets of HX_SEQ_WAYS hints (64 kB), a stream's hint in one of its set's
 * ways, a new one replacing the set's oldest.
 */
#define HX_SEQ_SETS 1024
#define HX_SEQ_WAYS 4

typedef struct SeqHint
{
	uint64		hash;
	int64		seq;			/* 0: no hint */
} SeqHint;

static SeqHint seq_hints[HX_SEQ_SETS][HX_SEQ_WAYS];

/* The hint for hash (0 when there is none) */
static int64
seq_hint(uint64 hash)
{
	SeqHint    *set = seq_hints[hash % HX_SEQ_SETS];
	int			w;

	for (w = 0; w < HX_SEQ_WAYS; w++)
		if (set[w].hash == hash && set[w].seq > 0)
			return set[w].seq;
	return 0;
}

/* Remember seq as hash's hint: the set's newest, first in it */
static void
remember_seq(uint64 hash, int64 seq)
{
	SeqHint    *set = seq_hints[hash % HX_SEQ_SETS];
	int			w;

	for (w = 0; w < HX_SEQ_WAYS - 1; w++)
		if (set[w].hash == hash)
			break;
	/* w: the stream's way, or the last (the oldest) */
	memmove(&set[1], &set[0], w * sizeof(SeqHint));
	set[0].hash = hash;
	set[0].seq = seq;
}

/*
 * The last event of stream in one partition, at or above seq from (no
 * bound when from is 0): its seq and created_at; false when the partition
 * holds none.
 */
static bool
probe(Oid relid, Datum streamtext, int64 from, Snapshot snapshot, int64 *seq,
	  TimestampTz *created_at)
{
	Relation	heap = table_open(relid, AccessShareLock);
	Relation	index = index_open(hx_primary_key_index(heap), AccessShareLock);
	TupleTableSlot *slot = table_slot_create(heap, NULL);
	IndexScanDesc scan;
	ScanKeyData keys[2];
	int			nkeys = 1;
	bool		found;

	Assert(index->rd_index->indnkeyatts == 2);
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_TEXTEQ, streamtext);
	keys[0].sk_collation = index->rd_indcollation[0];
	/* the bound, on the key's second column: the seq, a bigint */
	if (from > 0 && TupleDescAttr(RelationGetDescr(index), 1)->atttypid == INT8OID)
	{
		ScanKeyInit(&keys[1], 2, BTGreaterEqualStrategyNumber, F_INT8GE,
					Int64GetDatum(from));
		nkeys = 2;
	}
	scan = hx_index_beginscan(heap, index, snapshot, nkeys, 0);
	index_rescan(scan, keys, nkeys, NULL, 0);
	found = index_getnext_slot(scan, BackwardScanDirection, slot);
	if (found)
	{
		bool		isnull;

		*seq = DatumGetInt64(slot_getattr(slot, index->rd_index->indkey.values[1],
										  &isnull));
		*created_at = DatumGetTimestampTz(slot_getattr(slot, HX_LOG_CREATED_AT, &isnull));
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
	return found;
}

/*
 * The stream's last event at or above seq from (0: any) in every partition
 * that may hold it, newest day first, as hx_log_last() describes; false
 * when none is.
 */
static bool
probe_ring(Datum streamtext, int64 from, Snapshot snapshot, int64 *last_seq,
		   TimestampTz *last_at)
{
	int64		today = day_of(GetCurrentTimestamp());
	bool		any = false;
	int			k;

	for (k = 0; k < HX_LOG_BUCKETS; k++)
	{
		int64		day = today - k;
		int64		seq;
		TimestampTz created_at;

		if (!probe(bucket_relids[bucket_of_day(day)], streamtext, from, snapshot,
				   &seq, &created_at))
			continue;
		if (!any || seq > *last_seq)
		{
			*last_seq = seq;
			*last_at = created_at;
		}
		any = true;
		/*
		 * From this partition's day: the newest, when the partitions hold
		 * the days of the ring; otherwise every one is probed.
		 */
		if (ring_intact && day_of(created_at) >= day)
			break;
	}
	return any;
}

/*
 * The stream's next seq.  An event logged earlier in this
 * statement (say, the end of a row's stream before a new row with its key
 * starts it again) is visible: the SPI INSERT that logged it advanced the
 * command counter after itself.
 *
 * The cache may have gone stale since the trigger prepared it: any lock
 * taken in between (detoasting the state, say) processes invalidations,
 * and a TRUNCATE of a partition by hx_stream_trim or a VACUUM sends one.
 * So it is looked up again here when stale.  It can go stale once more
 * while the partitions are probed; their OIDs still hold, as only dropping
 * the extension changes them, and then table_open() fails cleanly.
 */
int64
hx_log_next_seq(const char *stream)
{
	int64		last;
	TimestampTz last_at;

	hx_log_last(stream, &last, &last_at);
	return last + 1;
}

/*
 * The seq and created_at of the stream's last event (0 and -infinity when
 * it has none), as hx_log_next_seq() finds them.
 */
void
hx_log_last(const char *stream, int64 *last_seq, TimestampTz *last_at)
{
	Snapshot	snapshot;
	Datum		streamtext = CStringGetTextDatum(stream);
	uint64		hash = hash_bytes_extended((const unsigned char *) stream,
										   strlen(stream), 0);
	int64		from = seq_hint(hash);
	int64		last = 0;
	TimestampTz at = DT_NOBEGIN;

	hx_log_prepare();
	Assert(insert_plan != NULL);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	/* nothing at or above the hint: the stream from its start */
	if (!probe_ring(streamtext, from, snapshot, &last, &at) && from > 0)
		(void) probe_ring(streamtext, 0, snapshot, &last, &at);
	UnregisterSnapshot(snapshot);
	remember_seq(hash, last);
	*last_seq = last;
	*last_at = at;
}

/*
 * Are the triggers of the log (or a partition) only the extension's own
 * hx_event_guard?  It checks what SQL inserts; the events written here are
 * made by the extension, with the stream's next seq, and need no check.
 */
static bool
only_guard(TriggerDesc *td)
{
	int			i;

	if (!OidIsValid(guard_foid))
		return false;
	for (i = 0; i < td->numtriggers; i++)
		if (td->triggers[i].tgfoid != guard_foid)
			return false;
	return true;
}

/*
 * May an event be written straight into rel (the log or one of its
 * partitions), with nothing the owner configured left out?
 */
static bool
plain_log_relation(Relation rel, bool partition)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			i;

	if (rel->rd_rel->relrowsecurity || rel->rd_rules != NULL ||
		(rel->trigdesc != NULL && !only_guard(rel->trigdesc)))
		return false;
	if (!partition)
		return true;
	if (rel->rd_rel->relkind != RELKIND_RELATION || !rel->rd_rel->relispartition ||
		desc->natts != HX_LOG_NATTS)
		return false;
	for (i = 0; i < HX_LOG_NATTS; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped || att->atttypid != log_atttypes[i] ||
			att->attgenerated)
			return false;
	}
	return true;
}

/*
 * Compile an index's expressions and predicate into the current context,
 * as ExecPrepareExprList() and ExecPrepareQual() would into an executor's
 */
static void
compile_index_info(IndexInfo *ii)
{
	ListCell   *lc;

	ii->ii_ExpressionsState = NIL;
	foreach(lc, ii->ii_Expressions)
		ii->ii_ExpressionsState =
			lappend(ii->ii_ExpressionsState,
					ExecInitExpr(expression_planner((Expr *) lfirst(lc)), NULL));
	if (ii->ii_Predicate != NIL)
		ii->ii_PredicateState =
			ExecInitQual((List *) expression_planner((Expr *) ii->ii_Predicate), NULL);
}

/*
 * Make what writing into partition part needs, into the current context
 * (as ExecRelCheck() and ExecOpenIndices() would make it).  Compiling
 * expressions may run functions (the planner folds immutable ones), and
 * opening the indexes may process invalidations: the caller makes it into
 * a context of its own, and marks the partition busy meanwhile.
 */
static void
make_log_partition(LogPartition *lp, Relation part, int ncheck)
{
	TupleConstr *constr = part->rd_att->constr;
	List	   *indexoids;
	ListCell   *lc;
	int			i;

	lp->checks = palloc0(Max(ncheck, 1) * sizeof(ExprState *));
	for (i = 0; i < ncheck; i++)
		if (hx_check_enforced(&constr->check[i]))
			lp->checks[i] = ExecInitExpr(expression_planner(stringToNode(constr->check[i].ccbin)),
										 NULL);

	indexoids = RelationGetIndexList(part);
	lp->nindexes = list_length(indexoids);
	lp->indexoids = palloc0(Max(lp->nindexes, 1) * sizeof(Oid));
	lp->indexinfos = palloc0(Max(lp->nindexes, 1) * sizeof(IndexInfo *));
	lp->has_indexes = true;
	i = 0;
	foreach(lc, indexoids)
	{
		Relation	index = index_open(lfirst_oid(lc), RowExclusiveLock);

		lp->indexoids[i] = RelationGetRelid(index);
		if (index->rd_rel->relam != BTREE_AM_OID)
			lp->has_indexes = false;
		else
		{
			lp->indexinfos[i] = BuildIndexInfo(index);
			compile_index_info(lp->indexinfos[i]);
		}
		index_close(index, NoLock);
		i++;
	}
	list_free(indexoids);
	lp->relid = RelationGetRelid(part);
	lp->ncheck = ncheck;
}

/* make_log_partition() for partition b, busy meanwhile */
static void
make_log_partition_busy(int b, LogPartition *fresh, Relation part, int ncheck)
{
	log_parts[b].busy = true;
	PG_TRY();
	{
		make_log_partition(fresh, part, ncheck);
	}
	PG_FINALLY();
	{
		log_parts[b].busy = false;
	}
	PG_END_TRY();
}

/*
 * What writing into partition b (open as part) needs (LogPartition): NULL
 * when busy, or when it could not be made whole, and the executor makes
 * its own.  Its indexes are opened (and locked) here when it is made.
 *
 * It is made in a fresh context under the current one, with the partition
 * marked busy, and installed only once whole: an event written meanwhile
 * (by a function the planner folds) finds it busy instead of freeing the
 * memory being written, and an error leaves the slot empty, the fresh
 * context going with the call's memory.  It is valid only if no relcache
 * invalidation arrived while it was made (log_partition_invals).
 */
static LogPartition *
log_partition_for(int b, Relation part)
{
	LogPartition *lp = &log_parts[b];
	TupleConstr *constr = part->rd_att->constr;
	int			ncheck = constr ? constr->num_check : 0;
	LogPartition *fresh;
	MemoryContext cxt;
	MemoryContext old;
	uint64		invals;

	if (lp->busy)
		return NULL;
	if (lp->valid && lp->relid == RelationGetRelid(part) && lp->ncheck == ncheck)
		return lp;
	if (lp->cxt)
		MemoryContextDelete(lp->cxt);
	memset(lp, 0, sizeof(LogPartition));
	if (ncheck != part->rd_rel->relchecks)
		return NULL;			/* ExecRelCheck() reports it */

	cxt = AllocSetContextCreate(CurrentMemoryContext,
								"hxstate log partition",
								ALLOCSET_SMALL_SIZES);
	fresh = MemoryContextAllocZero(cxt, sizeof(LogPartition));
	invals = log_partition_invals;
	old = MemoryContextSwitchTo(cxt);
	make_log_partition_busy(b, fresh, part, ncheck);
	MemoryContextSwitchTo(old);

	/* nothing made one meanwhile: it was busy */
	Assert(lp->cxt == NULL);
	MemoryContextSetParent(cxt, CacheMemoryContext);
	*lp = *fresh;
	lp->cxt = cxt;
	lp->valid = (invals == log_partition_invals);
	return lp;
}

/* Open rri's indexes, those of partition lp, as ExecOpenIndices() would */
static void
open_indexes(ResultRelInfo *rri, LogPartition *lp)
{
	int			i;

	if (lp->nindexes == 0)
		return;
	rri->ri_NumIndices = lp->nindexes;
	rri->ri_IndexRelationDescs = palloc(lp->nindexes * sizeof(Relation));
	rri->ri_IndexRelationInfo = palloc(lp->nindexes * sizeof(IndexInfo *));
	for (i = 0; i < lp->nindexes; i++)
	{
		rri->ri_IndexRelationDescs[i] = index_open(lp->indexoids[i], RowExclusiveLock);
		rri->ri_IndexRelationInfo[i] = lp->indexinfos[i];
	}
}

/*
 * Write one event (values) into partition part (open and locked), with
 * lp's prepared constraints and indexes when not NULL
 */
static void
write_event(Relation part, LogPartition *lp, Datum *values)
{
	EState	   *estate;
	RangeTblEntry *rte;
	ResultRelInfo *rri;
	TupleTableSlot *slot;

	estate = CreateExecutorState();
	rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(part);
	rte->relkind = part->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	hx_exec_init_range_table(estate, rte);
	rri = makeNode(ResultRelInfo);
	InitResultRelInfo(rri, part, 1, NULL, 0);
	estate->es_output_cid = GetCurrentCommandId(true);
	if (lp != NULL && lp->has_indexes)
		open_indexes(rri, lp);
	else
		ExecOpenIndices(rri, false);
	if (lp != NULL && lp->ncheck > 0)
		hx_ri_check_exprs(rri) = lp->checks;

	slot = ExecInitExtraTupleSlot(estate, RelationGetDescr(part), &TTSOpsVirtual);
	ExecClearTuple(slot);
	memcpy(slot->tts_values, values, HX_LOG_NATTS * sizeof(Datum));
	memset(slot->tts_isnull, false, HX_LOG_NATTS * sizeof(bool));
	ExecStoreVirtualTuple(slot);

#ifdef USE_ASSERT_CHECKING
	/* the day's partition is the one that routing would pick */
	Assert(ExecPartitionCheck(rri, slot, estate, false));
#endif
	/* what ExecSimpleRelationInsert() does, but the bound already known */
	if (part->rd_att->constr)
		ExecConstraints(rri, slot, estate);
	simple_table_tuple_insert(part, slot);
	if (rri->ri_NumIndices > 0)
		list_free(hx_exec_insert_index_tuples(rri, slot, estate));

	ExecCloseIndices(rri);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
}

/* write_event() with lp, busy meanwhile */
static void
write_event_busy(Relation part, LogPartition *lp, Datum *values)
{
	lp->busy = true;
	PG_TRY();
	{
		write_event(part, lp, values);
	}
	PG_FINALLY();
	{
		lp->busy = false;
	}
	PG_END_TRY();
}

/*
 * Write one event straight into the partition of created_at's day; false
 * (and nothing written) when the INSERT into the parent must do it.
 */
static bool
insert_direct(Datum *values, TimestampTz created_at)
{
	Relation	parent;
	Relation	part;
	LogPartition *lp;
	int			b;

	/*
	 * A read-only transaction (or a standby) may not write the log: the
	 * INSERT's executor refuses it as it refuses any other table's, which
	 * writing the heap here would skip.
	 */
	if (!ring_intact || XactReadOnly)
		return false;
	/* the locks an INSERT into the parent takes */
	parent = table_open(log_relid, RowExclusiveLock);
	/* locking may have brought news of a partition attached or detached */
	if (stale || !plain_log_relation(parent, false))
	{
		table_close(parent, NoLock);
		return false;
	}
	b = bucket_of_day(day_of(created_at));
	part = table_open(bucket_relids[b], RowExclusiveLock);
	if (stale || !plain_log_relation(part, true))
	{
		table_close(part, NoLock);
		table_close(parent, NoLock);
		return false;
	}

	/*
	 * What the partition needs, prepared once (LogPartition), busy while in
	 * use.  Making it opens the indexes, which may bring news of a change:
	 * then the executor makes its own this time.
	 */
	lp = log_partition_for(b, part);
	if (lp != NULL && !lp->valid)
		lp = NULL;
	if (lp == NULL)
		write_event(part, NULL, values);
	else
		write_event_busy(part, lp, values);

	table_close(part, NoLock);
	table_close(parent, NoLock);
	return true;
}

/*
 * A stream's name is the first column of the log's key, and an entry of a
 * btree takes at most a third of a page (2,704 bytes with 8 kB pages),
 * compressed where it compresses.  A name too long for that is refused
 * here, before anything of its event is written, with what it is: the
 * btree's own error would advise indexing a hash of the value.  A name
 * under HX_STREAM_NAME_FITS bytes always fits, and is not looked at.
 */
#define HX_STREAM_NAME_FITS 2048

static void
check_stream_name(const char *stream, Datum streamtext, int64 seq,
				  TimestampTz created_at)
{
	Relation	heap;
	Relation	index;
	TupleDesc	desc;
	Datum		values[2];
	bool		isnull[2] = {false, false};
	IndexTuple	itup;
	Size		size;

	if (strlen(stream) < HX_STREAM_NAME_FITS)
		return;
	heap = table_open(bucket_relids[bucket_of_day(day_of(created_at))], AccessShareLock);
	index = index_open(hx_primary_key_index(heap), AccessShareLock);
	desc = RelationGetDescr(index);
	/* the log's key, as the extension made it; any other is left to the insert */
	if (desc->natts == 2 && TupleDescAttr(desc, 0)->atttypid == TEXTOID &&
		TupleDescAttr(desc, 1)->atttypid == INT8OID)
	{
		/*
		 * The name as index_form_tuple() would store it: compressed when
		 * that makes it smaller.  An entry past the largest index_form_tuple()
		 * can form is sized here, so that its error is ours too.
		 */
		Datum		compressed = toast_compress_datum(streamtext,
													  TupleDescAttr(desc, 0)->attcompression);
		Size		namesize = VARSIZE_ANY(DatumGetPointer(compressed != (Datum) 0 ? compressed : streamtext));

		if (compressed != (Datum) 0)
			pfree(DatumGetPointer(compressed));
		if (namesize + MAXALIGN(sizeof(IndexTupleData)) + sizeof(int64) > INDEX_SIZE_MASK)
			size = MAXALIGN(sizeof(IndexTupleData)) + MAXALIGN(namesize) + sizeof(int64);
		else
		{
			values[0] = streamtext;
			values[1] = Int64GetDatum(seq);
			itup = index_form_tuple(desc, values, isnull);
			size = MAXALIGN(IndexTupleSize(itup));
			pfree(itup);
		}
		if (size > HX_BT_MAX_ITEM_SIZE)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("the name of stream \"%s\" is too long for the event log",
							hx_clip(stream)),
					 errdetail("The name is %zu bytes; its entry in the log's index would take %zu bytes, and an entry may take at most %zu.",
							   strlen(stream), size, (Size) HX_BT_MAX_ITEM_SIZE),
					 errhint("A table's stream is named after the table and the row's key: a row whose key is this long cannot be streamed.")));
	}
	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
}

void
hx_log_insert(const char *stream, int64 seq, const char *type, Jsonb *event)
{
	Datum		values[HX_LOG_NATTS];
	TimestampTz created_at = GetCurrentTimestamp();	/* clock_timestamp() */

	Assert(insert_plan != NULL);
	values[0] = CStringGetTextDatum(stream);
	values[1] = Int64GetDatum(seq);
	check_stream_name(stream, values[0], seq, created_at);
	values[2] = CStringGetTextDatum(type);
	/*
	 * The event compressed in line (hx_compress_stored): a row of the log is
	 * narrower than the 2 kB from which PostgreSQL would compress it, yet
	 * its event (a patch with the values it adds) is most of its bytes, of
	 * the log's WAL and of what the walsender reads.  From 1 kB on
	 * (HX_LOG_COMPRESS_MIN): a small delta saves a tenth of its bytes, for
	 * a sixth of what logging it costs.
	 */
	values[3] = hx_compress_stored((struct varlena *) event, HX_LOG_COMPRESS_MIN);
	values[4] = TimestampTzGetDatum(created_at);

	if (insert_direct(values, created_at))
	{
		/* visible to the next event's hx_log_next_seq, as SPI would make it */
		CommandCounterIncrement();
		return;
	}

	{
		const char *save_stream = inserting_stream;
		int64		save_seq = inserting_seq;

		insert_depth++;
		inserting_stream = stream;
		inserting_seq = seq;
		PG_TRY();
		{
			if (SPI_connect() != SPI_OK_CONNECT)
				elog(ERROR, "SPI_connect failed");
			if (SPI_execute_plan(insert_plan, values, NULL, false, 1) != SPI_OK_INSERT)
				elog(ERROR, "could not log event %lld of stream \"%s\"",
					 (long long) seq, stream);
			SPI_finish();
		}
		PG_FINALLY();
		{
			insert_depth--;
			inserting_stream = save_stream;
			inserting_seq = save_seq;
		}
		PG_END_TRY();
	}
}

/*
 * Is the row (stream, seq) the event that hx_log_insert() is inserting
 * through SPI (so that hx_event_guard lets it pass)?
 */
bool
hx_log_inserting(const char *stream, int64 seq)
{
	return inserting_stream != NULL && seq == inserting_seq &&
		strcmp(stream, inserting_stream) == 0;
}

PG_FUNCTION_INFO_V1(hx_event_ring);

/*
 * hx_event_ring(at timestamptz) -> SETOF (day date, partition regclass,
 * current bool): the ring (eventlog.h) as of at: its HX_LOG_BUCKETS days up
 * to at's (UTC), newest first, each with the partition that holds it; a
 * partition is current when writers write it now: it holds today (by the
 * transaction's start, or by the clock), or tomorrow by the clock.
 * hx_stream_trim reads the ring through it, and never empties a current
 * partition at once.
 */
Datum
hx_event_ring(PG_FUNCTION_ARGS)
{
	TimestampTz at = PG_GETARG_TIMESTAMPTZ(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64		first_current = day_of(GetCurrentTransactionStartTimestamp());
	int64		last_current = day_of(GetCurrentTimestamp()) + 1;
	bool		current[HX_LOG_BUCKETS] = {false};
	int64		today;
	int64		day;
	int			k;

	if (TIMESTAMP_NOT_FINITE(at))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	InitMaterializedSRF(fcinfo, 0);
	for (day = first_current; day <= last_current && day < first_current + HX_LOG_BUCKETS; day++)
		current[bucket_of_day(day)] = true;
	if (last_current - first_current >= HX_LOG_BUCKETS)
		memset(current, true, sizeof(current));

	today = day_of(at);
	for (k = 0; k < HX_LOG_BUCKETS; k++)
	{
		int			b;
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		day = today - k;
		b = bucket_of_day(day);
		values[0] = DateADTGetDatum((DateADT) (day - (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE)));
		values[1] = ObjectIdGetDatum(hx_extension_relid(psprintf("hx_event_%d", b)));
		values[2] = BoolGetDatum(current[b]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
