/*-------------------------------------------------------------------------
 *
 * eventlog.c
 *	  The event log hx_event: every event of every stream, written in the
 *	  transaction of the change it reports, the source of truth that
 *	  followers read and resume from.
 *
 * Writing goes through one INSERT prepared per backend, so that what the
 * table's owner configured on the log (row-level security policies,
 * triggers, the partition it routes to) applies.  The stream's next seq
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
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "eventlog.h"

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
static int	insert_depth = 0;	/* INSERTs of the log running, nested */

static void
log_relcache_callback(Datum arg, Oid relid)
{
	int			i;

	if (relid == InvalidOid || relid == log_relid)
		stale = true;
	for (i = 0; i < HX_LOG_BUCKETS; i++)
		if (relid == bucket_relids[i])
			stale = true;
}

void
hx_log_init(void)
{
	CacheRegisterRelcacheCallback(log_relcache_callback, (Datum) 0);
}

/* Prepare the INSERT and find the partitions, once per backend (under SPI) */
void
hx_log_prepare(void)
{
	Oid			instypes[4] = {TEXTOID, INT8OID, TEXTOID, JSONBOID};
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
	for (i = 0; i < HX_LOG_BUCKETS; i++)
		bucket_relids[i] = hx_extension_relid(psprintf("hx_event_%d", i));

	/* every name qualified: this runs as the table owner, any search_path */
	nsp = quote_identifier(get_namespace_name(get_rel_namespace(log_relid)));
	plan = SPI_prepare(psprintf("INSERT INTO %s.hx_event (stream, seq, type, event)"
								" VALUES ($1, $2, $3, $4)", nsp),
					   4, instypes);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	SPI_keepplan(plan);
	insert_plan = plan;
}

Oid
hx_log_relid(void)
{
	Assert(insert_plan != NULL);
	return log_relid;
}

/* Days since the Unix epoch of a timestamp, as the partitions count them */
static int64
day_of(TimestampTz ts)
{
	int64		secs = ts / USECS_PER_SEC +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY;

	/* floor division: the partition key is floor(epoch / 86400) */
	return (secs >= 0) ? secs / HX_LOG_BUCKET_SECONDS :
		-((-secs + HX_LOG_BUCKET_SECONDS - 1) / HX_LOG_BUCKET_SECONDS);
}

static int
bucket_of_day(int64 day)
{
	return (int) (((day % HX_LOG_BUCKETS) + HX_LOG_BUCKETS) % HX_LOG_BUCKETS);
}

/*
 * The last event of stream in one partition: its seq and created_at; false
 * when the partition holds none.
 */
static bool
probe(Oid relid, Datum streamtext, Snapshot snapshot, int64 *seq,
	  TimestampTz *created_at)
{
	Relation	heap = table_open(relid, AccessShareLock);
	Relation	index = index_open(RelationGetPrimaryKeyIndex(heap), AccessShareLock);
	TupleTableSlot *slot = table_slot_create(heap, NULL);
	IndexScanDesc scan;
	ScanKeyData key;
	bool		found;

	Assert(index->rd_index->indnkeyatts == 2);
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_TEXTEQ, streamtext);
	key.sk_collation = index->rd_indcollation[0];
	scan = index_beginscan(heap, index, snapshot, 1, 0);
	index_rescan(scan, &key, 1, NULL, 0);
	found = index_getnext_slot(scan, BackwardScanDirection, slot);
	if (found)
	{
		bool		isnull;

		*seq = DatumGetInt64(slot_getattr(slot, index->rd_index->indkey.values[1],
										  &isnull));
		*created_at = DatumGetTimestampTz(slot_getattr(slot, 5, &isnull));
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
	return found;
}

/*
 * The stream's next seq (under SPI).  An event logged earlier in this
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
	Snapshot	snapshot;
	Datum		streamtext = CStringGetTextDatum(stream);
	int64		today = day_of(GetCurrentTimestamp());
	int64		last = 0;
	int			k;

	hx_log_prepare();
	Assert(insert_plan != NULL);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	for (k = 0; k < HX_LOG_BUCKETS; k++)
	{
		int64		day = today - k;
		int64		seq;
		TimestampTz created_at;

		if (!probe(bucket_relids[bucket_of_day(day)], streamtext, snapshot,
				   &seq, &created_at))
			continue;
		last = Max(last, seq);
		if (day_of(created_at) >= day)
			break;				/* from this partition's day: the newest */
	}
	UnregisterSnapshot(snapshot);
	return last + 1;
}

void
hx_log_insert(const char *stream, int64 seq, const char *type, Jsonb *event)
{
	Datum		values[4];

	Assert(insert_plan != NULL);
	values[0] = CStringGetTextDatum(stream);
	values[1] = Int64GetDatum(seq);
	values[2] = CStringGetTextDatum(type);
	values[3] = JsonbPGetDatum(event);
	insert_depth++;
	PG_TRY();
	{
		if (SPI_execute_plan(insert_plan, values, NULL, false, 1) != SPI_OK_INSERT)
			elog(ERROR, "could not log event %lld of stream \"%s\"",
				 (long long) seq, stream);
	}
	PG_FINALLY();
	{
		insert_depth--;
	}
	PG_END_TRY();
}
