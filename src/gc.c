/*-------------------------------------------------------------------------
 *
 * gc.c
 *	  Deleting the stored hxdoc documents that no row holds any more:
 *
 *	  hx_store_gc([table])		the documents of dropped rows, and of rows
 *			that no longer hold them (TRUNCATE, a trigger disabled, a
 *			column changed): of one table, or of every table; how many
 *	  hx_store_dropped()			event trigger: a dropped table's or
 *			column's documents go with it
 *
 * A write of a table with hx_store deletes a few documents that its
 * deleted rows left (store.c); these find the rest.  A document is kept
 * while a row holds it, by the snapshot that scans the table: a document
 * made by a transaction in progress is not seen by that snapshot either
 * (its hx_doc row is as new), and a reader whose snapshot is older than
 * the deletion still reads the segments it deletes.
 *
 * src/gc.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "doc.h"

/* The documents the rows of a table's column hold (doc ids, as int64) */
static HTAB *
held_docs(Oid rel, int16 att)
{
	HASHCTL		ctl;
	HTAB	   *held;
	char	   *query;
	Portal		portal;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(int64);
	ctl.entrysize = sizeof(int64);
	ctl.hcxt = CurrentMemoryContext;
	held = hash_create("hx_store_gc held", 1024, &ctl,
					   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	/*
	 * A table scan as the function's caller, whose privileges it needs;
	 * rows that row-level security hides from it would look as if they
	 * held nothing
	 */
	if (check_enable_rls(rel, InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("hx_store_gc() cannot see every row of relation \"%s\"", get_rel_name(rel)),
				 errdetail("Row-level security applies to role \"%s\" on it.",
						   GetUserNameFromId(GetUserId(), false)),
				 errhint("Run it as the table's owner, or as a role with BYPASSRLS.")));
	query = psprintf("SELECT t.%s FROM %s.%s t",
					 quote_identifier(get_attname(rel, att, false)),
					 quote_identifier(get_namespace_name(get_rel_namespace(rel))),
					 quote_identifier(get_rel_name(rel)));
	portal = SPI_cursor_open_with_args(NULL, query, 0, NULL, NULL, NULL, true, 0);
	for (;;)
	{
		uint64		i;

		SPI_cursor_fetch(portal, true, 1000);
		if (SPI_processed == 0)
			break;
		for (i = 0; i < SPI_processed; i++)
		{
			bool		isnull;
			Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
			HxDocHead  *head;

			CHECK_FOR_INTERRUPTS();
			if (isnull)
				continue;
			head = hx_doc_detoast(d);
			if (head->format == HXDOC_CHUNKED)
			{
				HxDocChunked c;
				bool		found;

				hx_doc_chunked(head, &c);
				(void) hash_search(held, &c.doc, HASH_ENTER, &found);
				if (found)
					ereport(WARNING,
							(errcode(ERRCODE_DATA_CORRUPTED),
							 errmsg("hxdoc document %lld is held by more than one row of relation \"%s\"",
									(long long) c.doc, get_rel_name(rel)),
							 errdetail("A row got a copy of another row's value while the hx_store trigger did not fire for it; writes of either damage the other."),
							 errhint("Put their values in line while the trigger is disabled (UPDATE ... SET %s = %s::jsonb), then run hx_store_gc() again.",
									 quote_identifier(get_attname(rel, att, false)),
									 quote_identifier(get_attname(rel, att, false)))));
			}
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	return held;
}

/* Is (rel, att) still a column of type hxdoc? */
static bool
column_exists(Oid rel, int16 att)
{
	HeapTuple	tup = SearchSysCache2(ATTNUM, ObjectIdGetDatum(rel), Int16GetDatum(att));
	bool		ok = false;

	if (HeapTupleIsValid(tup))
	{
		Form_pg_attribute a = (Form_pg_attribute) GETSTRUCT(tup);

		ok = !a->attisdropped && hx_doc_is_type(a->atttypid);
		ReleaseSysCache(tup);
	}
	return ok;
}

/*
 * Delete the documents of rel (every table when InvalidOid) that no row
 * holds, and those marked dropped; how many.
 */
static int64
collect(Oid only)
{
	HxChunkWriter *w;
	List	   *docs;
	ListCell   *lc;
	int64		deleted = 0;
	Oid			lastrel = InvalidOid;
	int16		lastatt = 0;
	bool		lastexists = false;
	HTAB	   *held = NULL;
	Snapshot	snapshot;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	w = hx_chunk_writer_open();

	/*
	 * One snapshot for the documents and the rows that hold them: a
	 * document that it does not show is not looked at, one it shows is
	 * held by a row it shows, or by none (its row's deletion may be newer:
	 * then the row holds it, and it is kept).  The scans run as the
	 * caller, read-only, with it as their snapshot.
	 */
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	PushActiveSnapshot(snapshot);
	docs = hx_chunk_docs_of(only, 0, snapshot);
	foreach(lc, docs)
	{
		HxDocRow   *row = (HxDocRow *) lfirst(lc);
		bool		orphan;

		CHECK_FOR_INTERRUPTS();
		if (row->rel != lastrel || row->att != lastatt)
		{
			lastrel = row->rel;
			lastatt = row->att;
			lastexists = column_exists(row->rel, row->att);
			held = lastexists ? held_docs(row->rel, row->att) : NULL;
		}
		orphan = row->dropped || !lastexists ||
			hash_search(held, &row->doc, HASH_FIND, NULL) == NULL;
		if (orphan && hx_chunk_purge_doc(w, row->doc, true))
			deleted++;
	}
	PopActiveSnapshot();
	UnregisterSnapshot(snapshot);
	hx_chunk_writer_close(w);
	SPI_finish();
	return deleted;
}

PG_FUNCTION_INFO_V1(hx_store_gc);

/*
 * hx_store_gc(table regclass DEFAULT NULL) -> bigint: the documents of the
 * table (of each of its partitions, for a partitioned table), or of every
 * table (NULL), that no row holds, deleted; how many.
 */
Datum
hx_store_gc(PG_FUNCTION_ARGS)
{
	Oid			rel;
	char		relkind;

	PreventCommandIfReadOnly("hx_store_gc()");
	if (PG_ARGISNULL(0))
		PG_RETURN_INT64(collect(InvalidOid));
	rel = PG_GETARG_OID(0);
	relkind = get_rel_relkind(rel);
	if (relkind == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", rel),
				 errhint("hx_store_gc() takes a table, or NULL for every table.")));
	if (relkind == RELKIND_PARTITIONED_TABLE)
	{
		List	   *parts = find_all_inheritors(rel, AccessShareLock, NULL);
		ListCell   *lc;
		int64		deleted = 0;

		foreach(lc, parts)
			if (get_rel_relkind(lfirst_oid(lc)) == RELKIND_RELATION)
				deleted += collect(lfirst_oid(lc));
		PG_RETURN_INT64(deleted);
	}
	if (relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", get_rel_name(rel)),
				 errdetail("hx_store_gc() collects the documents that hx_store stored for the rows of a table.")));
	PG_RETURN_INT64(collect(rel));
}

PG_FUNCTION_INFO_V1(hx_store_dropped);

/*
 * hx_store_dropped(): ON sql_drop.  The documents of the tables and
 * columns the command dropped: a table dropped whole is gone from the
 * catalogs already, so each of its documents is an orphan.
 */
Datum
hx_store_dropped(PG_FUNCTION_ARGS)
{
	HxChunkWriter *w;
	uint64		i;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"%s\" was not called by event trigger manager",
						"hx_store_dropped")));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute("SELECT DISTINCT objid, objsubid FROM pg_catalog.pg_event_trigger_dropped_objects()"
					" WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
					"   AND object_type IN ('table', 'table column')",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the dropped objects");
	if (SPI_processed > 0)
	{
		SPITupleTable *tuptable = SPI_tuptable;
		uint64		n = SPI_processed;

		w = hx_chunk_writer_open();
		for (i = 0; i < n; i++)
		{
			bool		isnull;
			Oid			rel = DatumGetObjectId(SPI_getbinval(tuptable->vals[i], tuptable->tupdesc, 1, &isnull));
			int32		att = DatumGetInt32(SPI_getbinval(tuptable->vals[i], tuptable->tupdesc, 2, &isnull));
			List	   *docs = hx_chunk_docs_of(rel, (int16) att, NULL);
			ListCell   *lc;

			foreach(lc, docs)
			{
				CHECK_FOR_INTERRUPTS();
				(void) hx_chunk_purge_doc(w, ((HxDocRow *) lfirst(lc))->doc, true);
			}
		}
		hx_chunk_writer_close(w);
	}
	SPI_finish();
	PG_RETURN_VOID();
}
