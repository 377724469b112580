/*-------------------------------------------------------------------------
 *
 * hxstate.c
 *	  Module entry: the magic block.
 *
 * src/hxstate.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "hxstate.h"

PG_MODULE_MAGIC;
