/*-------------------------------------------------------------------------
 *
 * detoast.c
 *	  Reading a jsonb argument or column that may be stored out of line,
 *	  in slices, checking for interrupts between them.
 *
 * A state of tens of megabytes is stored in its table's TOAST relation, in
 * chunks of about 2 kB.  Core's detoasting fetches all of them in one
 * index scan, without looking at interrupts: on this project's machine a
 * 68 MB state takes about 230 ms to fetch, during which a cancel or a
 * statement_timeout waits.  Fetching it here, one slice of about 1 MB at a
 * time with an interrupt check before each, lets a cancel land within a
 * slice.  Decompression (pglz or lz4) is core's, in one call, as before.
 * Values stored inline, or small, take core's path.
 *
 * src/detoast.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/heaptoast.h"
#include "access/table.h"
#include "access/tableam.h"
#include "miscadmin.h"

#include "tree.h"

/* Chunks fetched per slice: about 1 MB */
#define SLICE_CHUNKS		512
#define SLICE_BYTES			((int32) (SLICE_CHUNKS * TOAST_MAX_CHUNK_SIZE))

/* The stored bytes of an on-disk TOAST value, fetched slice by slice */
static struct varlena *
fetch_in_slices(struct varlena *attr)
{
	struct varatt_external toast_pointer;
	struct varlena *result;
	Relation	toastrel;
	int32		attrsize;
	int32		offset;

	VARATT_EXTERNAL_GET_POINTER(toast_pointer, attr);
	attrsize = VARATT_EXTERNAL_GET_EXTSIZE(toast_pointer);
	result = (struct varlena *) palloc(attrsize + VARHDRSZ);
	/* compressed when stored smaller than it is (VARATT_EXTERNAL_IS_COMPRESSED) */
	if (attrsize < toast_pointer.va_rawsize - VARHDRSZ)
		SET_VARSIZE_COMPRESSED(result, attrsize + VARHDRSZ);
	else
		SET_VARSIZE(result, attrsize + VARHDRSZ);

	toastrel = table_open(toast_pointer.va_toastrelid, AccessShareLock);
	for (offset = 0; offset < attrsize; offset += SLICE_BYTES)
	{
		/*
		 * A slice's bytes land at VARDATA(dest) + (position - offset): dest
		 * is result moved forward by offset, so that they land in place.
		 */
		struct varlena *dest = (struct varlena *) ((char *) result + offset);

		CHECK_FOR_INTERRUPTS();
		table_relation_fetch_toast_slice(toastrel, toast_pointer.va_valueid,
										 attrsize, offset,
										 Min(SLICE_BYTES, attrsize - offset),
										 dest);
	}
	table_close(toastrel, AccessShareLock);
	return result;
}

/*
 * The jsonb value of datum, detoasted: the datum itself when it is plain,
 * else a copy in the current memory context.
 */
Jsonb *
hx_detoast_jsonb(Datum datum)
{
	struct varlena *attr = (struct varlena *) DatumGetPointer(datum);
	struct varatt_external toast_pointer;
	struct varlena *stored;
	struct varlena *result;

	if (!VARATT_IS_EXTERNAL_ONDISK(attr))
		return DatumGetJsonbP(datum);
	VARATT_EXTERNAL_GET_POINTER(toast_pointer, attr);
	if (VARATT_EXTERNAL_GET_EXTSIZE(toast_pointer) < (uint32) (2 * SLICE_BYTES))
		return DatumGetJsonbP(datum);

	stored = fetch_in_slices(attr);
	if (!VARATT_IS_COMPRESSED(stored))
		return (Jsonb *) stored;
	CHECK_FOR_INTERRUPTS();
	result = detoast_attr(stored);
	pfree(stored);
	return (Jsonb *) result;
}
