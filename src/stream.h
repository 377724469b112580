/*-------------------------------------------------------------------------
 *
 * stream.h
 *	  What stream.c shares: the trigger function (names.c registers its
 *	  triggers), and logging an event as the trigger does (send.c writes
 *	  the log streams with it).
 *
 * src/stream.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef HX_STREAM_H
#define HX_STREAM_H

#include "hxstate.h"

#include "tree.h"

extern PGDLLEXPORT Datum hx_stream(PG_FUNCTION_ARGS);

extern int64 hx_stream_emit_ref(const char *stream, const char *type,
								HxNode *body);

#endif							/* HX_STREAM_H */
