/*-------------------------------------------------------------------------
 *
 * snapshot.c
 *	  Reading a stream's state and seq, consistently, for a follower that
 *	  then applies the events after that seq:
 *
 *	  hx_stream_snapshot(table, key)		one row's (stream, seq, state)
 *	  hx_stream_snapshots(table, keys)	many rows', in one statement
 *
 * A row's state and the seq of its stream's last event are read in one
 * statement, so in one snapshot: applying the events after seq to state
 * gives the current state, always.  The queries run with the caller's
 * privileges, so that row-level security on the table and on the log
 * applies to what a reader gets.
 *
 * src/snapshot.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "stream.h"

/* "OPERATOR(schema.=)": the key type's equality, whatever the search_path */
char *
hx_equality_operator(Oid typid)
{
	TypeCacheEntry *tce = lookup_type_cache(typid, TYPECACHE_EQ_OPR);
	HeapTuple	tup;
	Form_pg_operator op;
	char	   *result;

	if (!OidIsValid(tce->eq_opr))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("could not identify an equality operator for type %s",
						format_type_be(typid))));
	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(tce->eq_opr));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", tce->eq_opr);
	op = (Form_pg_operator) GETSTRUCT(tup);
	result = psprintf("OPERATOR(%s.%s)",
					  quote_identifier(get_namespace_name(op->oprnamespace)),
					  NameStr(op->oprname));
	ReleaseSysCache(tup);
	return result;
}

/*
 * The snapshots of keys (n C strings) of rel, a table with the hx_stream
 * trigger args: for each key that is not NULL, in order, its stream, the
 * seq of the stream's last event (0 before any) and the row's state (NULL
 * when the row does not exist), read in one statement and so in one
 * snapshot, so that applying the events after seq to state always gives
 * the current state.  Runs with the caller's privileges: row-level
 * security on the table and on the log applies.  emit is called for each,
 * in the caller's memory context, before the query's memory is freed.
 */
typedef void (*SnapshotEmitFn) (void *arg, const char *key, Datum stream,
								int64 seq, Datum state, bool state_isnull);

static void
read_snapshots(Relation rel, StreamArgs *args, char **keys, int n,
			   SnapshotEmitFn emit, void *arg)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Datum	   *streams = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *keyvalues = palloc(sizeof(Datum) * Max(n, 1));
	Oid			typinput;
	Oid			typioparam;
	Oid			arraytype = get_array_type(args->key_typid);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Oid			argtypes[2];
	Datum		values[2];
	char	   *query;
	MemoryContext callcxt = CurrentMemoryContext;
	uint64		i;

	if (!OidIsValid(arraytype))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("type %s has no array type", format_type_be(args->key_typid))));

	/* each key as its type reads and prints it, as the trigger names streams */
	getTypeInputInfo(args->key_typid, &typinput, &typioparam);
	for (i = 0; i < (uint64) n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		keyvalues[i] = OidInputFunctionCall(typinput, keys[i], typioparam, -1);
		streams[i] = CStringGetTextDatum(psprintf("%s:%s", args->prefix,
												  OidOutputFunctionCall(args->key_typoutput,
																		keyvalues[i])));
	}
	get_typlenbyvalalign(args->key_typid, &typlen, &typbyval, &typalign);
	values[0] = PointerGetDatum(construct_array(streams, n, TEXTOID, -1, false, TYPALIGN_INT));
	values[1] = PointerGetDatum(construct_array(keyvalues, n, args->key_typid,
												typlen, typbyval, typalign));
	argtypes[0] = TEXTARRAYOID;
	argtypes[1] = arraytype;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	query = psprintf("SELECT u.ord,"
					 "       (SELECT pg_catalog.max(e.seq) FROM %s.hx_event e"
					 "         WHERE e.stream OPERATOR(pg_catalog.=) u.stream),"
					 "       (SELECT t.%s FROM %s.%s t WHERE t.%s %s u.key)"
					 "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2))"
					 "       WITH ORDINALITY u(stream, key, ord)",
					 quote_identifier(get_namespace_name(hx_extension_namespace())),
					 quote_identifier(NameStr(TupleDescAttr(desc, args->state_attnum - 1)->attname)),
					 quote_identifier(get_namespace_name(RelationGetNamespace(rel))),
					 quote_identifier(RelationGetRelationName(rel)),
					 quote_identifier(NameStr(TupleDescAttr(desc, args->key_attnum - 1)->attname)),
					 hx_equality_operator(args->key_typid));

	/* one statement, one snapshot: the states and the seqs that match */
	if (SPI_execute_with_args(query, 2, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the streams of relation \"%s\"",
			 RelationGetRelationName(rel));

	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	rdesc = SPI_tuptable->tupdesc;
		bool		isnull;
		int64		ord = DatumGetInt64(SPI_getbinval(tup, rdesc, 1, &isnull));
		Datum		seq = SPI_getbinval(tup, rdesc, 2, &isnull);
		int64		lastseq = isnull ? 0 : DatumGetInt64(seq);
		Datum		state = SPI_getbinval(tup, rdesc, 3, &isnull);
		MemoryContext oldcxt;

		CHECK_FOR_INTERRUPTS();
		oldcxt = MemoryContextSwitchTo(callcxt);
		emit(arg, keys[ord - 1], streams[ord - 1], lastseq, state, isnull);
		MemoryContextSwitchTo(oldcxt);
	}
	SPI_finish();
}

/* hx_stream_snapshot's one row, copied out of the query's memory */
typedef struct OneSnapshot
{
	Datum		stream;
	int64		seq;
	Datum		state;
	bool		state_isnull;
} OneSnapshot;

static void
keep_snapshot(void *arg, const char *key, Datum stream, int64 seq,
			  Datum state, bool state_isnull)
{
	OneSnapshot *one = (OneSnapshot *) arg;

	one->stream = stream;
	one->seq = seq;
	one->state_isnull = state_isnull;
	if (!state_isnull)
		one->state = datumCopy(state, false, -1);
}

PG_FUNCTION_INFO_V1(hx_stream_snapshot);

/*
 * hx_stream_snapshot(source regclass, key text) -> (stream, seq, state):
 * the row's state and the seq of the stream's last event, in one snapshot.
 */
Datum
hx_stream_snapshot(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *key = text_to_cstring(PG_GETARG_TEXT_PP(1));
	TupleDesc	resultdesc;
	Relation	rel;
	StreamArgs *args;
	OneSnapshot one = {0};
	Datum		result[3];
	bool		nulls[3] = {false, false, false};

	if (get_call_result_type(fcinfo, NULL, &resultdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	rel = table_open(relid, AccessShareLock);
	args = hx_stream_args(rel, hx_stream_trigger_of(rel), CurrentMemoryContext);
	read_snapshots(rel, args, &key, 1, keep_snapshot, &one);
	table_close(rel, AccessShareLock);

	result[0] = one.stream;
	result[1] = Int64GetDatum(one.seq);
	result[2] = one.state;
	nulls[2] = one.state_isnull;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(resultdesc),
													  result, nulls)));
}

/* hx_stream_snapshots' rows, into its tuplestore */
static void
put_snapshot(void *arg, const char *key, Datum stream, int64 seq,
			 Datum state, bool state_isnull)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	values[0] = CStringGetTextDatum(key);
	values[1] = stream;
	values[2] = Int64GetDatum(seq);
	values[3] = state;
	nulls[3] = state_isnull;
	/* the tuplestore copies the values */
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

PG_FUNCTION_INFO_V1(hx_stream_snapshots);

/*
 * hx_stream_snapshots(source regclass, keys text[]) -> SETOF (key, stream,
 * seq, state): hx_stream_snapshot() of many keys of one table, in one
 * statement and so in one snapshot, with one query: what a process that
 * follows thousands of streams needs when it starts or resyncs many of
 * them at once.  A NULL key gives no row.
 */
Datum
hx_stream_snapshots(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	ArrayType  *keyarray = PG_GETARG_ARRAYTYPE_P(1);
	Datum	   *keytexts;
	bool	   *keynulls;
	int			nkeys;
	char	  **keys;
	int			n = 0;
	int			i;
	Relation	rel;
	StreamArgs *args;

	InitMaterializedSRF(fcinfo, 0);
	deconstruct_array(keyarray, TEXTOID, -1, false, TYPALIGN_INT,
					  &keytexts, &keynulls, &nkeys);
	keys = palloc(sizeof(char *) * Max(nkeys, 1));
	for (i = 0; i < nkeys; i++)
		if (!keynulls[i])
			keys[n++] = TextDatumGetCString(keytexts[i]);

	rel = table_open(relid, AccessShareLock);
	args = hx_stream_args(rel, hx_stream_trigger_of(rel), CurrentMemoryContext);
	read_snapshots(rel, args, keys, n, put_snapshot, fcinfo->resultinfo);
	table_close(rel, AccessShareLock);
	return (Datum) 0;
}
