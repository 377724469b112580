/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Where the extension's own tables are: the schema hxstate was created
 *	  in (it is not relocatable), and its relations there.
 *
 * Read from pg_extension with a catalog scan, not SPI, so that any code
 * (trigger, cache loader, function) can ask without a connection of its
 * own.  (Core's get_extension_schema() is not exported in PostgreSQL 15.)
 *
 * src/catalog.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "hxstate.h"

/* The schema the extension lives in */
Oid
hx_extension_namespace(void)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	Oid			nspoid = InvalidOid;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum("hxstate"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		nspoid = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	if (!OidIsValid(nspoid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"hxstate\" is not installed")));
	return nspoid;
}

/* The relation relname of the extension's schema */
Oid
hx_extension_relid(const char *relname)
{
	Oid			nspoid = hx_extension_namespace();
	Oid			relid = get_relname_relid(relname, nspoid);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation \"%s.%s\" does not exist",
						get_namespace_name(nspoid), relname),
				 errhint("Update the extension: ALTER EXTENSION hxstate UPDATE.")));
	return relid;
}
