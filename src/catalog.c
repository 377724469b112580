/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Where the extension's own tables are: the schema hxstate was created
 *	  in (it is not relocatable), and its relations there; and which
 *	  version of its scripts is installed.
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
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "hxstate.h"

/*
 * The installed extension's row of pg_extension: its schema, and its
 * version as a number (0.6.0 is 600, 1.2.3 would be 10203).
 */
static void
read_extension(Oid *nspoid, int *version)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;

	*nspoid = InvalidOid;
	*version = 0;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum("hxstate"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);
		int			major = 0;
		int			minor = 0;
		int			patch = 0;

		*nspoid = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
		if (!isnull &&
			sscanf(TextDatumGetCString(d), "%d.%d.%d", &major, &minor, &patch) >= 2)
			*version = major * 10000 + minor * 100 + patch;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	if (!OidIsValid(*nspoid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"hxstate\" is not installed")));
}

/* The schema the extension lives in */
Oid
hx_extension_namespace(void)
{
	Oid			nspoid;
	int			version;

	read_extension(&nspoid, &version);
	return nspoid;
}

/*
 * The installed version of the extension's scripts, as a number: the
 * library keeps the behaviour of an older version's scripts until ALTER
 * EXTENSION hxstate UPDATE brings the catalogs that go with the new one
 * (pg_upgrade, or a new package, installs the library first).
 */
int
hx_extension_version(void)
{
	Oid			nspoid;
	int			version;

	read_extension(&nspoid, &version);
	return version;
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

/*
 * The function name() of the extension's schema that takes no arguments,
 * or InvalidOid where the installed scripts have none (an older version)
 */
Oid
hx_extension_function(const char *name)
{
	Oid			nspoid = hx_extension_namespace();

	return LookupFuncName(list_make2(makeString(get_namespace_name(nspoid)),
									 makeString(pstrdup(name))),
						  0, NULL, true);
}
