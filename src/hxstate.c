/*-------------------------------------------------------------------------
 *
 * hxstate.c
 *	  Module entry: the magic block and the set-up done once per backend.
 *
 * src/hxstate.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/guc.h"

#include "hxstate.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	DefineCustomRealVariable("hxstate.notify_queue_threshold",
							 "Fill level of the NOTIFY queue above which hx_stream stops notifying.",
							 "Between 0 and 1, a fraction of the queue as pg_notification_queue_usage() reports it. "
							 "Above it, events still go to the event log, from which clients catch up, "
							 "but writers no longer risk commits that fail on a full queue.",
							 &hx_notify_queue_threshold,
							 0.5, 0.0, 1.0,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	MarkGUCPrefixReserved("hxstate");
	hx_phase_init();
	hx_stream_init();
}

/*
 * The schema the extension lives in, which holds its tables.  Must be
 * called under SPI.  (get_extension_schema() is not exported in 15.)
 */
Oid
hx_extension_namespace(void)
{
	bool		isnull;
	Datum		nsp;

	if (SPI_execute("SELECT e.extnamespace FROM pg_catalog.pg_extension e"
					" WHERE e.extname OPERATOR(pg_catalog.=) 'hxstate'",
					true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"hxstate\" is not installed")));
	nsp = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return DatumGetObjectId(nsp);
}
