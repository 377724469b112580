/*-------------------------------------------------------------------------
 *
 * hxstate.c
 *	  Module entry: the magic block, and the set-up each module does once
 *	  per backend when the library is loaded.
 *
 * src/hxstate.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "hxstate.h"
#include "trigger.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	hx_catalog_init();
	hx_trigger_init();
	hx_ops_init();
	hx_phase_init();
	hx_stream_init();
	hx_step_init();
}
