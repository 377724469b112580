/*-------------------------------------------------------------------------
 *
 * compress.c
 *	  hx_compress(value [, method]): a value of a variable-length type,
 *	  compressed in line, for rows that PostgreSQL would store as they are.
 *
 * PostgreSQL compresses a row's values only when the row is wider than
 * TOAST_TUPLE_THRESHOLD (about 2 kB); a table's toast_tuple_target says
 * how far the compression goes once it starts, not when.  A log or a
 * history kept as many narrow rows (a checkpoint's delta of one message, an
 * event of one change) is therefore stored uncompressed, however well its
 * text would compress.  hx_compress hands back the same value compressed
 * with the column's methods (pglz or lz4), as the toaster would have
 * compressed it in a wider row: the heap stores a compressed datum in line
 * as it is, and every reader decompresses it as it decompresses a toasted
 * one.  A value that does not compress (by at least 2 bytes, pglz also by
 * its own thresholds), and one already compressed, comes back as it was.
 *
 * Only values of types that PostgreSQL compresses itself (storage
 * "extended" or "main") are taken: every function of such a type detoasts
 * its arguments.  A type of storage "plain" (tsquery, int2vector, ...) is
 * read raw by its functions, which would misread a compressed datum.
 *
 * The function is STABLE, not IMMUTABLE: without a method its result's
 * bytes follow default_toast_compression, and the planner would fold an
 * immutable call on constants into a Const, which it stores decompressed.
 *
 * src/compress.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/toast_compression.h"
#include "access/toast_internals.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "hxstate.h"

PG_FUNCTION_INFO_V1(hx_compress);

/*
 * A value the extension writes into a narrow row of its own tables (a
 * segment of hx_chunk, an event of hx_event), compressed in line when that
 * saves anything: lz4 where PostgreSQL was built with it, else pglz.  A
 * value below min bytes, or one that does not compress, comes back as it
 * was, and so does one that is not in memory whole with a 4-byte header.
 */
Datum
hx_compress_stored(struct varlena *value, Size min)
{
	Datum		compressed;

	/* one already compressed, toasted or with a short header: as it is */
	if (VARATT_IS_EXTENDED(value) || VARSIZE(value) < min)
		return PointerGetDatum(value);
#ifdef USE_LZ4
	compressed = toast_compress_datum(PointerGetDatum(value), TOAST_LZ4_COMPRESSION);
#else
	compressed = toast_compress_datum(PointerGetDatum(value), TOAST_PGLZ_COMPRESSION);
#endif
	return (DatumGetPointer(compressed) != NULL) ? compressed : PointerGetDatum(value);
}

Datum
hx_compress(PG_FUNCTION_ARGS)
{
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, 0);
	char		method = InvalidCompressionMethod;
	char		storage;
	struct varlena *value;
	Datum		compressed;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	if (!OidIsValid(typid) || get_typlen(typid) != -1)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("hx_compress takes a value of a variable-length type"),
				 errdetail("The value is of type %s.",
						   OidIsValid(typid) ? format_type_be(typid) : "unknown")));

	/*
	 * Only a type whose values PostgreSQL itself compresses may get one: its
	 * functions detoast what they read.  Those of storage "plain" (tsquery,
	 * int2vector, oidvector, ...) read their argument's bytes as they are,
	 * and would take a compressed datum's header and compressed bytes for
	 * their own; "external" ones are moved out of line, never compressed.
	 */
	storage = get_typstorage(typid);
	if (storage != TYPSTORAGE_EXTENDED && storage != TYPSTORAGE_MAIN)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("hx_compress cannot compress a value of type %s",
						format_type_be(typid)),
				 errdetail("PostgreSQL never compresses values of type %s (its storage is \"%s\"); only types of storage \"extended\" or \"main\" read compressed values.",
						   format_type_be(typid),
						   storage == TYPSTORAGE_PLAIN ? "plain" : "external")));
	if (!PG_ARGISNULL(1))
	{
		char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(1));

		method = CompressionNameToMethod(name);
		if (!CompressionMethodIsValid(method))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unrecognized compression method \"%s\"", hx_clip(name)),
					 errhint("The methods are \"pglz\" and, where PostgreSQL was built with it, \"lz4\".")));
	}

	value = (struct varlena *) DatumGetPointer(PG_GETARG_DATUM(0));
	if (VARATT_IS_COMPRESSED(value))
		PG_RETURN_POINTER(value);
	/* a toasted or short-header value: its bytes, whole, uncompressed */
	if (VARATT_IS_EXTENDED(value))
		value = detoast_attr(value);

	/* toast_compress_datum: NULL when compressing saves nothing */
	compressed = toast_compress_datum(PointerGetDatum(value), method);
	if (DatumGetPointer(compressed) == NULL)
		PG_RETURN_POINTER(value);
	PG_RETURN_DATUM(compressed);
}
