/*-------------------------------------------------------------------------
 *
 * names.h
 *	  The names of streams (names.c): the prefix a table's rows stream
 *	  under, and the registry of every hx_stream trigger of the database
 *	  that keeps two tables from streaming under one name.
 *
 * src/names.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef HX_NAMES_H
#define HX_NAMES_H

#include "hxstate.h"

/*
 * Log streams (hx_stream_send) are named with this first character, which
 * no table's stream name can begin with.
 */
#define HX_LOG_STREAM_MARK		'@'

extern void hx_names_init(void);
extern char *hx_table_stream_prefix(Oid relid);
extern char *hx_stream_trigger_prefix(Oid tgoid, bool legacy, Oid *source);
extern uint64 hx_stream_names_generation(void);

#endif							/* HX_NAMES_H */
