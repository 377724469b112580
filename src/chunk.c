/*-------------------------------------------------------------------------
 *
 * chunk.c
 *	  The side tables of hxdoc values stored in pieces (doc.h): hx_doc, one
 *	  row per document (its table and column, and whether its row is gone),
 *	  written when a document is made and dropped, and hx_chunk, the
 *	  segments of its nodes.
 *
 * Both are read and written here through their primary keys, with the
 * table AM and the executor's simple-relation routines, as the logical
 * replication worker writes a row: no query is planned per write.  They
 * are the extension's own, with no privileges for any role: the hx_store
 * trigger writes them for whoever writes a table with an hxdoc column, and
 * a value is read for whoever holds it (a role gets a value only from a
 * row it may read, and no input can spell a value in pieces).  They are
 * user catalog tables, so that logical decoding of a table with an hxdoc
 * column can read a value as of the decoded change.
 *
 * Columns, in order, as the install script creates them:
 *	hx_doc   (doc int8, rel oid, att int2, dropped bool)
 *	hx_chunk (doc int8, node int4, seg int8, gen int8, n int4, len int4,
 *			  refs int4, body jsonb), keyed (doc, node, seg, gen); n is the
 *			  number of elements or members, len the body's bytes before
 *			  compression, refs the number of placeholders in it
 *
 * src/chunk.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/toast_compression.h"
#include "access/toast_internals.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/indexing.h"
#include "common/pg_lzcompress.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "doc.h"

#ifdef USE_LZ4
#include <lz4.h>
#endif

#define DOC_NATTS	4
#define CHUNK_NATTS 8

static const Oid doc_types[DOC_NATTS] =
{INT8OID, OIDOID, INT2OID, BOOLOID};
static const Oid chunk_types[CHUNK_NATTS] =
{INT8OID, INT4OID, INT8OID, INT8OID, INT4OID, INT4OID, INT4OID, JSONBOID};

/* The extension's tables, opened and checked */
static Relation
open_table(const char *name, LOCKMODE mode, const Oid *types, int natts)
{
	Relation	rel = table_open(hx_extension_relid(name), mode);
	TupleDesc	desc = RelationGetDescr(rel);
	int			i;
	bool		ok = (desc->natts == natts);

	for (i = 0; ok && i < natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		ok = !att->attisdropped && att->atttypid == types[i];
	}
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("relation \"%s\" is not laid out as hxstate made it", name),
				 errhint("Update the extension: ALTER EXTENSION hxstate UPDATE.")));
	return rel;
}

/* ---------------------------------------------------------------------
 * Reading
 * ---------------------------------------------------------------------
 */

static void
doc_from_slot(TupleTableSlot *slot, HxDocRow *row)
{
	slot_getallattrs(slot);
	row->doc = DatumGetInt64(slot->tts_values[0]);
	row->rel = DatumGetObjectId(slot->tts_values[1]);
	row->att = DatumGetInt16(slot->tts_values[2]);
	row->dropped = DatumGetBool(slot->tts_values[3]);
	row->tid = slot->tts_tid;
}

/*
 * During logical decoding: is the index's file, as the historic snapshot
 * names it, its file now?
 */
static bool
index_is_current(Oid indexid)
{
	Relation	index = index_open(indexid, AccessShareLock);
	Relation	classrel = table_open(RelationRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	Snapshot	snapshot;
	HeapTuple	tup;
	bool		current = false;

	ScanKeyInit(&key, Anum_pg_class_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(indexid));
	snapshot = RegisterSnapshot(GetNonHistoricCatalogSnapshot(RelationRelationId));
	scan = systable_beginscan(classrel, ClassOidIndexId, true, snapshot, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		current = ((Form_pg_class) GETSTRUCT(tup))->relfilenode == index->rd_rel->relfilenode;
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(classrel, AccessShareLock);
	index_close(index, AccessShareLock);
	return current;
}

static int
segment_cmp(const ListCell *a, const ListCell *b)
{
	HxSegId    *x = &((HxSegment *) lfirst(a))->id;
	HxSegId    *y = &((HxSegment *) lfirst(b))->id;

	if (x->node != y->node)
		return (x->node < y->node) ? -1 : 1;
	if (x->seg != y->seg)
		return (x->seg < y->seg) ? -1 : 1;
	return (x->gen < y->gen) ? -1 : (x->gen > y->gen);
}

/*
 * Scans of the side tables through their primary keys, by systable_*:
 * what PostgreSQL allows while logical decoding reads them for a value of
 * a transaction still in progress (it watches for that transaction
 * aborting).  During decoding, an index that was rebuilt since the change
 * being decoded (REINDEX, VACUUM FULL, CLUSTER of the table) is not read
 * (the historic snapshot names its old file, which is gone): the table is
 * scanned instead, which PostgreSQL reads at its current file.
 */
static SysScanDesc
scan_by_doc(Relation heap, Snapshot snapshot, int64 doc, ScanKey key)
{
	Oid			pk = hx_primary_key_index(heap);
	bool		indexok = OidIsValid(pk);

	if (indexok && HistoricSnapshotActive())
		indexok = index_is_current(pk);
	ScanKeyInit(key, 1, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(doc));
	return systable_beginscan(heap, pk, indexok, snapshot, 1, key);
}

/* hx_doc's row of doc, as snapshot sees it; false when there is none */
bool
hx_chunk_read_doc(int64 doc, Snapshot snapshot, HxDocRow *row)
{
	Relation	heap = open_table("hx_doc", AccessShareLock, doc_types, DOC_NATTS);
	ScanKeyData key;
	SysScanDesc scan = scan_by_doc(heap, snapshot, doc, &key);
	HeapTuple	tup = systable_getnext(scan);
	bool		found = HeapTupleIsValid(tup);

	if (found)
	{
		Datum		values[DOC_NATTS];
		bool		nulls[DOC_NATTS];

		heap_deform_tuple(tup, RelationGetDescr(heap), values, nulls);
		row->doc = DatumGetInt64(values[0]);
		row->rel = DatumGetObjectId(values[1]);
		row->att = DatumGetInt16(values[2]);
		row->dropped = DatumGetBool(values[3]);
		row->tid = tup->t_self;
	}
	systable_endscan(scan);
	table_close(heap, AccessShareLock);
	return found;
}

/* A stored datum, copied (fetched from TOAST, still compressed, if out of line) */
static struct varlena *
copy_stored(Datum d)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(d);
	struct varlena *copy;

	if (VARATT_IS_EXTERNAL(v))
		return detoast_external_attr(v);
	copy = palloc(VARSIZE_ANY(v));
	memcpy(copy, v, VARSIZE_ANY(v));
	return copy;
}

static void
error_segment(HxSegment *s)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("segment (%d, %lld, %lld) of an hxdoc document cannot be read",
					s->id.node, (long long) s->id.seg, (long long) s->id.gen),
			 errdetail("Its bytes are not the %d bytes of jsonb, holding %d elements or members, that its row of hx_chunk says.",
					   s->rawlen, s->n)));
}

/*
 * A segment's body is what its row says: s->rawlen bytes of jsonb whose
 * root holds s->n elements or members (1: a string's piece).  Readers size
 * what they build from the row, so a row of hx_chunk changed by hand must
 * not reach them.
 */
static void
check_body(HxSegment *s, Jsonb *body)
{
	if (VARSIZE(body) != (Size) s->rawlen ||
		VARSIZE(body) < VARHDRSZ + sizeof(uint32) ||
		JB_ROOT_COUNT(body) != (uint32) s->n)
		error_segment(s);
}

/*
 * Every segment of doc that snapshot sees, in key order (node, seg, gen),
 * with its body (detoasted and decompressed into the current memory
 * context) as mode says.
 */
List *
hx_chunk_read_segments(int64 doc, Snapshot snapshot, HxReadMode mode)
{
	Relation	heap = open_table("hx_chunk", AccessShareLock, chunk_types, CHUNK_NATTS);
	TupleDesc	desc = RelationGetDescr(heap);
	ScanKeyData key;
	SysScanDesc scan = scan_by_doc(heap, snapshot, doc, &key);
	HeapTuple	tup;
	List	   *segs = NIL;
	int			count = 0;

	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		HxSegment  *s = palloc(sizeof(HxSegment));
		Datum		values[CHUNK_NATTS];
		bool		nulls[CHUNK_NATTS];

		if ((++count & 255) == 0)
			CHECK_FOR_INTERRUPTS();
		heap_deform_tuple(tup, desc, values, nulls);
		s->id.node = DatumGetInt32(values[1]);
		s->id.seg = DatumGetInt64(values[2]);
		s->id.gen = DatumGetInt64(values[3]);
		s->n = DatumGetInt32(values[4]);
		s->rawlen = DatumGetInt32(values[5]);
		s->refs = DatumGetInt32(values[6]);
		s->stored = (int32) toast_datum_size(values[7]);
		s->body = NULL;
		s->datum = NULL;
		if (mode == HX_READ_BODIES || (mode == HX_READ_LAZY && s->refs > 0))
		{
			/*
			 * A body stored in line and not compressed detoasts to a
			 * pointer into the scan's buffer, which is released at the
			 * scan's end: copy it.
			 */
			s->body = hx_detoast_jsonb(values[7]);
			if ((Pointer) s->body == DatumGetPointer(values[7]))
				s->body = (Jsonb *) copy_stored(values[7]);
			check_body(s, s->body);
		}
		else if (mode == HX_READ_LAZY)
			s->datum = copy_stored(values[7]);
		s->tid = tup->t_self;
		segs = lappend(segs, s);
	}

	/*
	 * The index gives segments in key order; the table scan of a rebuilt
	 * index (decoding only) in the table's
	 */
	if (list_length(segs) > 1)
		list_sort(segs, segment_cmp);
	systable_endscan(scan);
	table_close(heap, AccessShareLock);
	return segs;
}

/*
 * Load a segment read lazily (an HxSegment *, as HxPartLoad takes it):
 * its jsonb datum, s->rawlen bytes, decompressed into dest, without an
 * allocation of its own (the encoder loads one segment after another into
 * one buffer)
 */
void
hx_segment_load(void *segment, char *dest)
{
	HxSegment  *s = (HxSegment *) segment;
	struct varlena *v = s->datum;

	if (v == NULL)
	{
		/* read whole already */
		if (s->body == NULL || VARSIZE(s->body) != (Size) s->rawlen)
			error_segment(s);
		memcpy(dest, s->body, s->rawlen);
		return;
	}
	if (VARATT_IS_COMPRESSED(v))
	{
		int32		rawsize = (int32) VARDATA_COMPRESSED_GET_EXTSIZE(v);
		const char *src = (const char *) v + VARHDRSZ_COMPRESSED;
		int32		slen = (int32) (VARSIZE(v) - VARHDRSZ_COMPRESSED);
		int32		got = -1;

		if ((Size) rawsize + VARHDRSZ != (Size) s->rawlen)
			error_segment(s);
		switch (VARDATA_COMPRESSED_GET_COMPRESS_METHOD(v))
		{
			case TOAST_PGLZ_COMPRESSION_ID:
				got = pglz_decompress(src, slen, dest + VARHDRSZ, rawsize, true);
				break;
			case TOAST_LZ4_COMPRESSION_ID:
#ifdef USE_LZ4
				got = LZ4_decompress_safe(src, dest + VARHDRSZ, slen, rawsize);
#else
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("compression method lz4 not supported"),
						 errdetail("This functionality requires the server to be built with lz4 support.")));
#endif
				break;
			default:
				error_segment(s);
		}
		if (got != rawsize)
			error_segment(s);
		SET_VARSIZE(dest, rawsize + VARHDRSZ);
	}
	else if (VARATT_IS_SHORT(v))
	{
		Size		len = VARSIZE_SHORT(v) - VARHDRSZ_SHORT;

		if (len + VARHDRSZ != (Size) s->rawlen)
			error_segment(s);
		memcpy(dest + VARHDRSZ, VARDATA_SHORT(v), len);
		SET_VARSIZE(dest, len + VARHDRSZ);
	}
	else
	{
		if (VARSIZE(v) != (Size) s->rawlen)
			error_segment(s);
		memcpy(dest, v, s->rawlen);
	}
	check_body(s, (Jsonb *) dest);
}

/* A segment's body, decompressed now if it was read lazily */
Jsonb *
hx_segment_body(HxSegment *s)
{
	if (s->body == NULL)
	{
		char	   *dest;

		if (s->datum == NULL || s->rawlen < (int32) (VARHDRSZ + sizeof(uint32)))
			error_segment(s);
		dest = palloc(s->rawlen);
		hx_segment_load(s, dest);
		s->body = (Jsonb *) dest;
	}
	return s->body;
}

/*
 * The documents of rel marked dropped by transactions other than this one,
 * up to limit of them (their numbers, as int64 *), by the latest snapshot
 */
List *
hx_chunk_dropped_docs(Oid rel, int limit)
{
	Relation	heap = open_table("hx_doc", AccessShareLock, doc_types, DOC_NATTS);
	Relation	index = index_open(hx_extension_relid("hx_doc_dropped"), AccessShareLock);
	TupleTableSlot *slot = table_slot_create(heap, NULL);
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	IndexScanDesc scan;
	ScanKeyData key;
	List	   *docs = NIL;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(rel));
	scan = hx_index_beginscan(heap, index, snapshot, 1, 0);
	index_rescan(scan, &key, 1, NULL, 0);
	while (list_length(docs) < limit &&
		   index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		bool		should_free;
		HeapTuple	tup = ExecFetchSlotHeapTuple(slot, false, &should_free);
		TransactionId xmin = HeapTupleHeaderGetXmin(tup->t_data);
		HxDocRow	row;

		doc_from_slot(slot, &row);
		if (row.dropped && !TransactionIdIsCurrentTransactionId(xmin))
		{
			int64	   *doc = palloc(sizeof(int64));

			*doc = row.doc;
			docs = lappend(docs, doc);
		}
		if (should_free)
			heap_freetuple(tup);
	}
	index_endscan(scan);
	index_close(index, AccessShareLock);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);
	table_close(heap, AccessShareLock);
	return docs;
}

static int
doc_row_cmp(const ListCell *a, const ListCell *b)
{
	HxDocRow   *x = (HxDocRow *) lfirst(a);
	HxDocRow   *y = (HxDocRow *) lfirst(b);

	if (x->rel != y->rel)
		return (x->rel < y->rel) ? -1 : 1;
	if (x->att != y->att)
		return (x->att < y->att) ? -1 : 1;
	return (x->doc < y->doc) ? -1 : (x->doc > y->doc);
}

/*
 * The documents (HxDocRow *) of a table's column, of all its columns when
 * att is 0, or of every table when rel is InvalidOid, in (rel, att, doc)
 * order, by snapshot (the latest when NULL)
 */
List *
hx_chunk_docs_of(Oid rel, int16 att, Snapshot given)
{
	Relation	heap = open_table("hx_doc", AccessShareLock, doc_types, DOC_NATTS);
	TupleTableSlot *slot = table_slot_create(heap, NULL);
	Snapshot	snapshot = RegisterSnapshot(given ? given : GetLatestSnapshot());
	List	   *docs = NIL;

	if (OidIsValid(rel))
	{
		Relation	index = index_open(hx_extension_relid("hx_doc_rel"), AccessShareLock);
		IndexScanDesc scan;
		ScanKeyData keys[2];

		ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(rel));
		ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT2EQ, Int16GetDatum(att));
		scan = hx_index_beginscan(heap, index, snapshot, att ? 2 : 1, 0);
		index_rescan(scan, keys, att ? 2 : 1, NULL, 0);
		while (index_getnext_slot(scan, ForwardScanDirection, slot))
		{
			HxDocRow   *row = palloc(sizeof(HxDocRow));

			CHECK_FOR_INTERRUPTS();
			doc_from_slot(slot, row);
			docs = lappend(docs, row);
		}
		index_endscan(scan);
		index_close(index, AccessShareLock);
	}
	else
	{
		TableScanDesc scan = table_beginscan(heap, snapshot, 0, NULL);

		while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
		{
			HxDocRow   *row = palloc(sizeof(HxDocRow));

			CHECK_FOR_INTERRUPTS();
			doc_from_slot(slot, row);
			docs = lappend(docs, row);
		}
		table_endscan(scan);
	}
	list_sort(docs, doc_row_cmp);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);
	table_close(heap, AccessShareLock);
	return docs;
}

/* ---------------------------------------------------------------------
 * Writing
 * ---------------------------------------------------------------------
 */

/* One table being written: its executor state, as a replication worker's */
typedef struct TableWriter
{
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
	TupleTableSlot *oldslot;
} TableWriter;

struct HxChunkWriter
{
	TableWriter doc;
	TableWriter chunk;
};

static void
writer_open(TableWriter *tw, const char *name, const Oid *types, int natts)
{
	RangeTblEntry *rte;

	tw->rel = open_table(name, RowExclusiveLock, types, natts);
	tw->estate = CreateExecutorState();
	rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(tw->rel);
	rte->relkind = tw->rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	hx_exec_init_range_table(tw->estate, rte);
	tw->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(tw->rri, tw->rel, 1, NULL, 0);
	tw->estate->es_output_cid = GetCurrentCommandId(true);
	tw->estate->es_snapshot = GetLatestSnapshot();
	ExecOpenIndices(tw->rri, false);
	tw->slot = ExecInitExtraTupleSlot(tw->estate, RelationGetDescr(tw->rel),
									  &TTSOpsVirtual);
	tw->oldslot = table_slot_create(tw->rel, &tw->estate->es_tupleTable);
}

static void
writer_close(TableWriter *tw)
{
	ExecCloseIndices(tw->rri);
	ExecResetTupleTable(tw->estate->es_tupleTable, false);
	FreeExecutorState(tw->estate);
	table_close(tw->rel, NoLock);
}

HxChunkWriter *
hx_chunk_writer_open(void)
{
	HxChunkWriter *w = palloc0(sizeof(HxChunkWriter));

	/* the read-only check that an INSERT's executor makes */
	PreventCommandIfReadOnly("writing an hxdoc value");
	writer_open(&w->doc, "hx_doc", doc_types, DOC_NATTS);
	writer_open(&w->chunk, "hx_chunk", chunk_types, CHUNK_NATTS);
	return w;
}

void
hx_chunk_writer_close(HxChunkWriter *w)
{
	writer_close(&w->chunk);
	writer_close(&w->doc);
	pfree(w);
}

/*
 * A new document's number, from hx_doc_seq, for whoever writes a table
 * with an hxdoc column (no role has privileges on the sequence)
 */
int64
hx_chunk_new_doc_id(void)
{
	return nextval_internal(hx_extension_relid("hx_doc_seq"), false);
}

static void
doc_to_slot(TupleTableSlot *slot, HxDocRow *row)
{
	ExecClearTuple(slot);
	slot->tts_values[0] = Int64GetDatum(row->doc);
	slot->tts_values[1] = ObjectIdGetDatum(row->rel);
	slot->tts_values[2] = Int16GetDatum(row->att);
	slot->tts_values[3] = BoolGetDatum(row->dropped);
	memset(slot->tts_isnull, false, DOC_NATTS * sizeof(bool));
	ExecStoreVirtualTuple(slot);
}

void
hx_chunk_insert_doc(HxChunkWriter *w, HxDocRow *row)
{
	doc_to_slot(w->doc.slot, row);
	ExecSimpleRelationInsert(w->doc.rri, w->doc.estate, w->doc.slot);
	row->tid = w->doc.slot->tts_tid;
}

/* The row of hx_doc at tid, into the writer's old-row slot */
static TupleTableSlot *
fetch_old(TableWriter *tw, ItemPointer tid)
{
	if (!table_tuple_fetch_row_version(tw->rel, tid, SnapshotAny, tw->oldslot))
		elog(ERROR, "could not find the row (%u,%u) of relation \"%s\"",
			 ItemPointerGetBlockNumber(tid), ItemPointerGetOffsetNumber(tid),
			 RelationGetRelationName(tw->rel));
	return tw->oldslot;
}

void
hx_chunk_update_doc(HxChunkWriter *w, HxDocRow *row)
{
	TupleTableSlot *old = fetch_old(&w->doc, &row->tid);

	doc_to_slot(w->doc.slot, row);
	ExecSimpleRelationUpdate(w->doc.rri, w->doc.estate, NULL, old, w->doc.slot);
	row->tid = w->doc.slot->tts_tid;
}

void
hx_chunk_delete_doc(HxChunkWriter *w, HxDocRow *row)
{
	simple_heap_delete(w->doc.rel, &row->tid);
}

/*
 * Insert a segment of doc, its body compressed in line when that saves
 * anything (a large one still goes out of line, compressed, as TOAST
 * would store it).
 */
void
hx_chunk_insert_segment(HxChunkWriter *w, int64 doc, HxSegId *id, int32 n,
						int32 refs, Jsonb *body)
{
	TupleTableSlot *slot = w->chunk.slot;
	Datum		stored = hx_compress_stored((struct varlena *) body, HX_COMPRESS_MIN);

	ExecClearTuple(slot);
	slot->tts_values[0] = Int64GetDatum(doc);
	slot->tts_values[1] = Int32GetDatum(id->node);
	slot->tts_values[2] = Int64GetDatum(id->seg);
	slot->tts_values[3] = Int64GetDatum(id->gen);
	slot->tts_values[4] = Int32GetDatum(n);
	slot->tts_values[5] = Int32GetDatum((int32) VARSIZE(body));
	slot->tts_values[6] = Int32GetDatum(refs);
	slot->tts_values[7] = stored;
	memset(slot->tts_isnull, false, CHUNK_NATTS * sizeof(bool));
	ExecStoreVirtualTuple(slot);
	ExecSimpleRelationInsert(w->chunk.rri, w->chunk.estate, slot);
}

void
hx_chunk_delete_segment(HxChunkWriter *w, ItemPointer tid)
{
	simple_heap_delete(w->chunk.rel, tid);
}

/*
 * Delete a document whole (a dropped one, or any when any is true): its
 * row of hx_doc first, without waiting (another transaction that deletes
 * or changes it wins, and this one leaves it), then its segments.  Whether
 * it deleted it.
 */
bool
hx_chunk_purge_doc(HxChunkWriter *w, int64 doc, bool any)
{
	HxDocRow	row;
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	TM_FailureData tmfd;
	TM_Result	result;
	List	   *segs;
	ListCell   *lc;

	if (!hx_chunk_read_doc(doc, snapshot, &row) || !(row.dropped || any))
	{
		UnregisterSnapshot(snapshot);
		return false;
	}
	result = table_tuple_delete(w->doc.rel, &row.tid, GetCurrentCommandId(true),
								snapshot, InvalidSnapshot, false, &tmfd, false);
	if (result != TM_Ok)
	{
		UnregisterSnapshot(snapshot);
		return false;
	}
	segs = hx_chunk_read_segments(doc, snapshot, HX_READ_KEYS);
	foreach(lc, segs)
	{
		HxSegment  *s = (HxSegment *) lfirst(lc);

		CHECK_FOR_INTERRUPTS();
		simple_heap_delete(w->chunk.rel, &s->tid);
	}
	UnregisterSnapshot(snapshot);
	return true;
}
