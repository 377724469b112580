/*-------------------------------------------------------------------------
 *
 * backfill.c
 *	  hx_store_backfill(table, column [, start [, blocks]]): one batch of
 *	  moving a table's jsonb states to an hxdoc column while its writers
 *	  write (docs/upgrading.md).
 *
 * The hxdoc column is kept by an hx_store trigger with the option
 * from=<jsonb column>: every write of a row sets it from the jsonb one.
 * A row that no write has touched since the trigger was made has it NULL;
 * a batch writes the rows of a range of the table's blocks that still do,
 * with an UPDATE that sets the jsonb column to itself (the trigger does
 * the rest, and the stream trigger logs nothing for it).  Its rows are
 * locked as any UPDATE locks them: a batch waits for a writer of one of
 * them and then sees the row the writer left.  One statement per batch,
 * as the caller, who needs UPDATE on the table.
 *
 * src/backfill.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/objectaddress.h"
#include "miscadmin.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "storage/bufmgr.h"
#include "storage/itemptr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "hxstate.h"

/*
 * The jsonb column that an hx_store trigger of rel takes column col from
 * (its option from=), or NULL when no trigger does
 */
static char *
from_column(Relation rel, const char *col)
{
	TriggerDesc *trigdesc = rel->trigdesc;
	Oid			store = hx_extension_function("hx_store");
	int			t;

	if (trigdesc == NULL || !OidIsValid(store))
		return NULL;
	for (t = 0; t < trigdesc->numtriggers; t++)
	{
		Trigger    *tg = &trigdesc->triggers[t];
		const char *from = NULL;
		bool		names = false;
		int			i;

		if (tg->tgfoid != store || tg->tgenabled == TRIGGER_DISABLED)
			continue;
		for (i = 0; i < tg->tgnargs; i++)
		{
			if (strncmp(tg->tgargs[i], "from=", 5) == 0)
				from = tg->tgargs[i] + 5;
			else if (strcmp(tg->tgargs[i], col) == 0)
				names = true;
		}
		if (names && from != NULL)
			return pstrdup(from);
	}
	return NULL;
}

PG_FUNCTION_INFO_V1(hx_store_backfill);

/*
 * hx_store_backfill(rel regclass, col name, start int8 DEFAULT 0,
 * blocks int4 DEFAULT 64) -> int8: the rows of blocks [start, start +
 * blocks) whose hxdoc column col is still NULL get it from their jsonb
 * column.  The block the next batch starts at, or NULL when this one
 * reached the table's end.
 */
Datum
hx_store_backfill(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *col;
	int64		start;
	int32		blocks;
	Relation	rel;
	char	   *from;
	char	   *relname;
	BlockNumber nblocks;
	int64		end;
	ItemPointerData lo;
	ItemPointerData hi;
	Oid			argtypes[2] = {TIDOID, TIDOID};
	Datum		args[2];
	char	   *query;

	/* not strict: NULL is this function's "done", never an answer to NULL */
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("hx_store_backfill() takes no NULL argument")));
	relid = PG_GETARG_OID(0);
	col = NameStr(*PG_GETARG_NAME(1));
	start = PG_GETARG_INT64(2);
	blocks = PG_GETARG_INT32(3);
	if (start < 0 || start > (int64) MaxBlockNumber)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("start block %lld is out of range", (long long) start)));
	if (blocks < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a batch must be at least one block, not %d", blocks)));

	/* the batch is an UPDATE as the caller: a caller who may not is told so at once */
	if (pg_class_aclcheck(relid, GetUserId(), ACL_UPDATE) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
	rel = table_open(relid, AccessShareLock);
	if (rel->rd_rel->relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", RelationGetRelationName(rel))));
	from = from_column(rel, col);
	if (from == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("relation \"%s\" has no enabled hx_store trigger that takes column \"%s\" from a jsonb column",
						RelationGetRelationName(rel), hx_clip(col)),
				 errhint("CREATE TRIGGER ... BEFORE INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION hx_store('%s', 'from=state').",
						 RelationGetRelationName(rel), hx_clip(col))));
	nblocks = RelationGetNumberOfBlocks(rel);
	relname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
										 RelationGetRelationName(rel));
	table_close(rel, AccessShareLock);
	if (start >= (int64) nblocks)
		PG_RETURN_NULL();
	end = Min(start + (int64) blocks, (int64) nblocks);

	ItemPointerSet(&lo, (BlockNumber) start, 0);
	ItemPointerSet(&hi, (BlockNumber) Min(end, (int64) MaxBlockNumber), 0);
	args[0] = PointerGetDatum(&lo);
	args[1] = PointerGetDatum(&hi);
	query = psprintf("UPDATE %s SET %s = %s"
					 " WHERE ctid OPERATOR(pg_catalog.>=) $1 AND ctid OPERATOR(pg_catalog.<) $2"
					 " AND %s IS NULL AND %s IS NOT NULL",
					 relname, quote_identifier(from), quote_identifier(from),
					 quote_identifier(col), quote_identifier(from));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(query, 2, argtypes, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not backfill relation %s", relname);
	SPI_finish();
	if (end >= (int64) nblocks)
		PG_RETURN_NULL();
	PG_RETURN_INT64(end);
}
