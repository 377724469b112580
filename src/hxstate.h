/*-------------------------------------------------------------------------
 *
 * hxstate.h
 *	  What every source file of the hxstate extension shares: its SQLSTATEs
 *	  and the few entry points that are not part of a narrower header.
 *
 * The headers, from the bottom up:
 *	  compat.h		the differences between PostgreSQL major versions
 *	  hxstate.h		SQLSTATEs, the catalog lookup, module set-up hooks
 *	  tree.h		the lazily unpacked jsonb tree, its equality, hashing and
 *					encoder (tree.c, equal.c, encode.c)
 *	  pointer.h		RFC 6901 pointers and walking a tree by them (pointer.c)
 *	  ops.h			the op-list engine that hx_patch and hx_merge share (ops.c)
 *	  diff.h		the patch between two documents (diff.c)
 *	  trigger.h		trigger plumbing shared by the trigger functions
 *					(trigger.c); the only header that pulls in commands/trigger.h
 *
 * src/hxstate.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef HXSTATE_H
#define HXSTATE_H

#include "postgres.h"

#include "fmgr.h"

#include "compat.h"

/*
 * hxstate's own SQLSTATEs, in class XH (classes starting with I-Z are left
 * to implementations by the SQL standard, and core PostgreSQL uses none in
 * XH).  Conditions that core already names reuse core's codes; see the
 * README's SQLSTATE table.
 */
#define ERRCODE_HX_TEST_FAILED			MAKE_SQLSTATE('X','H','0','0','1')
#define ERRCODE_HX_TYPE_CONFLICT		MAKE_SQLSTATE('X','H','0','0','2')
#define ERRCODE_HX_LOCKED				MAKE_SQLSTATE('X','H','1','0','1')
#define ERRCODE_HX_SLOT_BUSY			MAKE_SQLSTATE('X','H','1','0','2')
#define ERRCODE_HX_INVALID_TRANSITION	MAKE_SQLSTATE('X','H','1','0','3')
#define ERRCODE_HX_CALL_CHANGED			MAKE_SQLSTATE('X','H','2','0','1')
#define ERRCODE_HX_STEP_PROMOTED		MAKE_SQLSTATE('X','H','2','0','2')
#define ERRCODE_HX_WRONG_ROW			MAKE_SQLSTATE('X','H','2','0','3')
#define ERRCODE_HX_TRIMMED				MAKE_SQLSTATE('X','H','3','0','1')
#define ERRCODE_HX_OUT_OF_SEQUENCE		MAKE_SQLSTATE('X','H','3','0','2')
#define ERRCODE_HX_STALE_DOCUMENT		MAKE_SQLSTATE('X','H','4','0','1')

/* Core codes used with one meaning throughout hxstate */
#define ERRCODE_HX_MALFORMED			ERRCODE_INVALID_PARAMETER_VALUE /* 22023 */
#define ERRCODE_HX_BAD_POINTER			ERRCODE_INVALID_TEXT_REPRESENTATION /* 22P02 */
#define ERRCODE_HX_PATH_NOT_FOUND		ERRCODE_SQL_JSON_MEMBER_NOT_FOUND /* 2203A */
#define ERRCODE_HX_BAD_INDEX			ERRCODE_INVALID_SQL_JSON_SUBSCRIPT /* 22033 */

/*
 * Messages quote user values (pointers, keys) clipped to this many bytes,
 * so that a 2 MB pointer does not make a 2 MB message.
 */
#define HX_MESSAGE_CLIP		200
extern const char *hx_clip(const char *s);

/*
 * compress.c: below min bytes a stored value is kept uncompressed:
 * HX_COMPRESS_MIN for a segment of a state, HX_LOG_COMPRESS_MIN for an
 * event of the log.  Compressing costs a fixed 16 kB of lz4's table set up
 * whatever the value's size (16,000 instructions for a 282-byte event,
 * which it made 29 bytes smaller): an event, written once per change,
 * pays that only where it saves a share worth it.
 */
#define HX_COMPRESS_MIN		256
#define HX_LOG_COMPRESS_MIN	1024
extern Datum hx_compress_stored(struct varlena *value, Size min);

/* catalog.c */
extern void hx_catalog_init(void);
extern uint64 hx_extension_invals(void);
extern Oid	hx_extension_namespace(void);
extern Oid	hx_extension_namespace_if_installed(void);
extern int	hx_extension_version(void);
extern Oid	hx_extension_relid(const char *relname);
extern Oid	hx_extension_function(const char *name);

/*
 * step.c: which streams the statement with command id cid promoted steps
 * of (hx_stream checks that a row takes only its own stream's steps):
 * HX_PROMOTED_NONE when it promoted none, HX_PROMOTED_STREAM when stream
 * is one of them, HX_PROMOTED_OTHERS when it is not (*other: one that is).
 */
typedef enum HxPromoted
{
	HX_PROMOTED_NONE,
	HX_PROMOTED_STREAM,
	HX_PROMOTED_OTHERS
} HxPromoted;
extern HxPromoted hx_promoted(CommandId cid, const char *stream,
							  const char **other);

/* merge.c: raise the error hx_merge would raise for writes (hx_stage too) */
extern PGDLLEXPORT Datum hx_check_writes(PG_FUNCTION_ARGS);

/* Set-up at module load, each module registering its own settings */
extern void hx_ops_init(void);
extern void hx_phase_init(void);
extern void hx_stream_init(void);
extern void hx_step_init(void);

#endif							/* HXSTATE_H */
