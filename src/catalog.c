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
 * Every write of a streamed or stored table asks several times, so the
 * answer is kept per backend where the server says when pg_extension
 * changes: PostgreSQL 18, and the minor releases of 15 to 17 whose
 * headers have it, keep a catalog cache on pg_extension's OIDs
 * (EXTENSIONOID), and every change of a row of pg_extension (CREATE, ALTER
 * and DROP EXTENSION, in any backend) sends its invalidation to every
 * backend, which a callback here receives.  The invalidations of another
 * backend arrive when this one next takes a lock it did not hold (as
 * before it reads the log) or starts a transaction, which is when a scan
 * would first see the change too; a change made by this backend's own
 * transaction arrives at its next command, and, if the transaction (or a
 * subtransaction) rolls back, once more, so that what it saw is dropped.
 * The callback only marks the answer stale (it may run in the middle of
 * anything); the next caller reads pg_extension again.  Where the cache
 * is missing (a library built against older headers, or loaded by an
 * older minor release than it was built against), every call reads
 * pg_extension, as before.
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
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "hxstate.h"

/*
 * The catalog cache on pg_extension's OIDs: always in PostgreSQL 18; in
 * 15 to 17, in the minor releases whose headers the Makefile found it in
 * (it defines HX_HAVE_EXTENSIONOID).
 */
#if PG_VERSION_NUM >= 180000 || defined(HX_HAVE_EXTENSIONOID)
#define HX_EXTENSION_SYSCACHE 1
#endif

/*
 * What pg_extension says of hxstate, kept while valid: the row of this
 * backend's last read, and a count of the invalidations received, so that
 * one that arrives while pg_extension is being read (opening it may
 * process invalidations) leaves the answer stale.  Plain values, no
 * memory to free.
 */
typedef struct ExtensionCache
{
	bool		tracked;		/* the callback is registered */
	bool		valid;
	uint64		invals;			/* invalidations received so far */
	Oid			nspoid;
	int			version;
} ExtensionCache;

static ExtensionCache ext_cache = {false, false, 0, InvalidOid, 0};

#ifdef HX_EXTENSION_SYSCACHE
/* Any change of any row of pg_extension, or a reset of the caches */
static void
extension_syscache_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	ext_cache.valid = false;
	ext_cache.invals++;
}
#endif

/*
 * Register the callback, where the server has the cache.  A library built
 * against the headers of a minor release that added it (15 to 17) may be
 * loaded by an older server of the same major version, whose catalog
 * caches end before it: there, nothing is kept.
 */
void
hx_catalog_init(void)
{
#ifdef HX_EXTENSION_SYSCACHE
#if PG_VERSION_NUM < 180000
	const char *server = GetConfigOption("server_version_num", false, false);

	if (server == NULL || atoi(server) < PG_VERSION_NUM)
		return;
#endif
	CacheRegisterSyscacheCallback(EXTENSIONOID, extension_syscache_callback,
								  (Datum) 0);
	ext_cache.tracked = true;
#endif
}

/*
 * A count that changes whenever what pg_extension says of hxstate may have
 * changed (read the extension again, and what was derived from it), or 0
 * when this backend cannot tell (then anything derived from it holds for
 * the current command only).
 */
uint64
hx_extension_invals(void)
{
	return ext_cache.tracked ? ext_cache.invals + 1 : 0;
}

/*
 * The installed extension's row of pg_extension: its schema, and its
 * version as a number (0.6.0 is 600, 1.2.3 would be 10203).
 */
static void
scan_extension(Oid *nspoid, int *version, bool missing_ok)
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

	if (!OidIsValid(*nspoid) && !missing_ok)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"hxstate\" is not installed")));
}

/* The same, from the cache when it holds */
static void
read_extension(Oid *nspoid, int *version)
{
	uint64		invals = ext_cache.invals;

	if (!ext_cache.valid)
	{
		scan_extension(&ext_cache.nspoid, &ext_cache.version, false);
		/* kept only if nothing changed while it was read */
		ext_cache.valid = ext_cache.tracked && invals == ext_cache.invals;
	}
	*nspoid = ext_cache.nspoid;
	*version = ext_cache.version;
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
 * The schema the extension lives in, or InvalidOid where it is not
 * installed (logical decoding reads transactions of before CREATE
 * EXTENSION as well).  Not kept: the decoder asks once per relation.
 */
Oid
hx_extension_namespace_if_installed(void)
{
	Oid			nspoid;
	int			version;

	scan_extension(&nspoid, &version, true);
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
