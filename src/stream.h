/*-------------------------------------------------------------------------
 *
 * stream.h
 *	  What stream.c shares: the trigger function (names.c registers its
 *	  triggers), a table's stream trigger and its arguments (snapshot.c
 *	  reads rows by them, emit.c writes a row's run events), and logging an
 *	  event as the trigger does (send.c writes the log streams with it).
 *
 * src/stream.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef HX_STREAM_H
#define HX_STREAM_H

#include "hxstate.h"

#include "access/htup.h"
#include "utils/relcache.h"
#include "utils/reltrigger.h"

#include "diff.h"
#include "tree.h"

typedef enum PayloadMode
{
	PAYLOAD_AUTO,				/* the event if it fits, else a reference */
	PAYLOAD_REF,				/* references only */
	PAYLOAD_NONE				/* no NOTIFY; clients read the log */
} PayloadMode;

/* An hx_stream trigger's arguments, parsed */
typedef struct StreamArgs
{
	AttrNumber	state_attnum;
	AttrNumber	key_attnum;
	Oid			key_typid;
	Oid			key_typoutput;
	HxArrayMode mode;
	PayloadMode payload;
	char	   *prefix;			/* streams are "<prefix>:<key>" */
	Oid			source;			/* the table whose rows the streams are */
	uint64		names_generation;	/* hx_stream_names_generation() */
	bool		legacy;			/* under the scripts of 0.5.0 or before */
	bool		state_doc;		/* the state column is hxdoc, not jsonb */
} StreamArgs;

extern PGDLLEXPORT Datum hx_stream(PG_FUNCTION_ARGS);

extern Trigger *hx_stream_trigger_of(Relation rel);
extern StreamArgs *hx_stream_args(Relation rel, Trigger *tg, MemoryContext cxt);
extern char *hx_row_stream(StreamArgs *args, HeapTuple tuple, TupleDesc desc);
extern int64 hx_stream_emit_as(PayloadMode mode, const char *stream,
							   const char *type, HxNode *body);
extern int64 hx_stream_emit_ref(const char *stream, const char *type,
								HxNode *body);

/* send.c */
extern const char *hx_check_event(Jsonb *event, bool row);

/* snapshot.c */
extern char *hx_equality_operator(Oid typid);

#endif							/* HX_STREAM_H */
