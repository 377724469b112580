/*-------------------------------------------------------------------------
 *
 * hxstate.h
 *	  Shared declarations of the hxstate extension: SQLSTATEs, RFC 6901
 *	  pointers, the lazily expanded jsonb tree, and the entry points that
 *	  one source file offers to another.
 *
 * Every pure function (hx_patch, hx_merge, hx_diff) works on an HxNode
 * tree whose unchanged parts stay in jsonb's on-disk format.  A container
 * is unpacked one level at a time, only when an operation has to descend
 * into it, and the encoder copies the bytes of every container that was
 * never unpacked.  That is what makes a one-leaf edit of a large document
 * cost little more than copying its bytes.
 *
 * src/hxstate.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef HXSTATE_H
#define HXSTATE_H

#include "postgres.h"

#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/jsonb.h"

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

/* Core codes used with one meaning throughout hxstate */
#define ERRCODE_HX_MALFORMED			ERRCODE_INVALID_PARAMETER_VALUE /* 22023 */
#define ERRCODE_HX_BAD_POINTER			ERRCODE_INVALID_TEXT_REPRESENTATION /* 22P02 */
#define ERRCODE_HX_PATH_NOT_FOUND		ERRCODE_SQL_JSON_MEMBER_NOT_FOUND /* 2203A */
#define ERRCODE_HX_BAD_INDEX			ERRCODE_INVALID_SQL_JSON_SUBSCRIPT /* 22033 */

/*
 * Where an error happened, for messages of the form
 *	  JSON Patch operation 2 (remove) failed: path "/a/b" does not exist
 */
typedef struct HxOpCtx
{
	const char *what;			/* "JSON Patch operation", "hx_merge operation" */
	int			index;			/* 0-based position in the op list */
	const char *op;				/* op name, or NULL while still unknown */
} HxOpCtx;

/* ---------------------------------------------------------------------
 * pointer.c: RFC 6901 JSON Pointer
 * ---------------------------------------------------------------------
 */
typedef struct HxToken
{
	char	   *s;				/* unescaped, NUL-terminated */
	int			len;
} HxToken;

typedef struct HxPointer
{
	const char *member;			/* "path" or "from": where it was read */
	const char *text;			/* the pointer as written, NUL-terminated */
	int			textlen;
	int			ntokens;
	HxToken    *tokens;
	int		   *starts;			/* offset in text of each token's '/' */
} HxPointer;

extern void hx_pointer_parse(HxPointer *ptr, const char *text, int len,
							 const HxOpCtx *ctx, const char *member);
extern char *hx_pointer_prefix(const HxPointer *ptr, int ntokens);
extern bool hx_pointer_is_proper_prefix(const HxPointer *a, const HxPointer *b);
extern bool hx_pointer_equal(const HxPointer *a, const HxPointer *b);

#define HX_INDEX_INVALID	(-1)	/* not an RFC 6901 array index */
#define HX_INDEX_END		(-2)	/* the "-" token */
#define HX_INDEX_HUGE		(-3)	/* well-formed but beyond any jsonb array */
extern int	hx_parse_index(const HxToken *tok);
extern const char *hx_op_label(const HxOpCtx *ctx);

extern void hx_pointer_append_escaped(StringInfo buf, const char *s, int len);

/* ---------------------------------------------------------------------
 * tree.c: the lazily expanded jsonb tree and its encoder
 * ---------------------------------------------------------------------
 */
typedef enum HxKind
{
	HX_SCALAR,					/* jbvNull, jbvString, jbvNumeric, jbvBool */
	HX_BINARY,					/* array or object still in on-disk format */
	HX_ARRAY,					/* unpacked array */
	HX_OBJECT					/* unpacked object */
} HxKind;

typedef struct HxNode HxNode;

typedef struct HxPair
{
	const char *key;
	int			keylen;
	HxNode	   *value;			/* NULL marks a removed member */
} HxPair;

struct HxNode
{
	HxKind		kind;
	union
	{
		JsonbValue	scalar;
		struct
		{
			JsonbContainer *data;
			uint32		len;
		}			bin;
		struct
		{
			HxNode	  **elems;
			int			n;
			int			cap;
			void	   *memo;	/* merge.c's membership index, valid while
								 * memo_epoch == hx_tree_epoch */
			uint64		memo_epoch;
		}			arr;
		struct
		{
			HxPair	   *pairs;
			int			n;		/* pairs used, including removed ones */
			int			cap;
			int			nsorted;	/* pairs[0..nsorted) are in jsonb order */
			int			nlive;	/* members that are not removed */
			int		   *index;	/* open-addressing hash of pair positions */
			int			indexsize;
		}			obj;
	}			u;
};

/* Shape of a node, whatever its representation */
typedef enum HxShape
{
	HXS_NULL,
	HXS_STRING,
	HXS_NUMBER,
	HXS_BOOL,
	HXS_ARRAY,
	HXS_OBJECT
} HxShape;

extern HxNode *hx_node_from_jsonb(Jsonb *jb);
extern HxNode *hx_node_from_value(const JsonbValue *v);
extern HxNode *hx_node_new_array(int cap);
extern HxNode *hx_node_new_object(int cap);
extern HxNode *hx_node_new_string(const char *s, int len);
extern HxNode *hx_node_new_numeric(Numeric num);
extern HxShape hx_node_shape(const HxNode *n);
extern const char *hx_shape_name(HxShape s);
extern const char *hx_shape_article(HxShape s);
extern bool hx_scalar_equal(const JsonbValue *a, const JsonbValue *b);
extern void hx_node_expand(HxNode *n);
extern HxNode *hx_node_copy(const HxNode *n);
extern bool hx_node_equal(HxNode *a, HxNode *b);
extern uint32 hx_node_hash(HxNode *n);
extern bool hx_container_equal(JsonbContainer *a, uint32 alen,
							   JsonbContainer *b, uint32 blen);

/*
 * Arrays and objects; the node must already be expanded.  Every edit of a
 * tree goes through these functions, which advance hx_tree_epoch: a value
 * derived from a tree (merge.c's membership indexes) is valid while the
 * epoch has not moved.
 */
extern uint64 hx_tree_epoch;
extern void hx_array_insert(HxNode *arr, int i, HxNode *child);
extern void hx_array_set(HxNode *arr, int i, HxNode *child);
extern void hx_array_append(HxNode *arr, HxNode *child);
extern HxNode *hx_array_remove(HxNode *arr, int i);
extern HxNode **hx_object_find(HxNode *obj, const char *key, int keylen);
extern void hx_object_set(HxNode *obj, const char *key, int keylen,
						  HxNode *child);
extern HxNode *hx_object_remove(HxNode *obj, const char *key, int keylen);

/* Read-only access that does not unpack binary containers */
extern int	hx_node_size(const HxNode *n);
extern HxNode *hx_node_get_member(HxNode *n, const char *key, int keylen);
extern HxNode *hx_node_get_elem(HxNode *n, int i);

extern Jsonb *hx_node_to_jsonb(HxNode *root, Size estimate,
							   MemoryContext resultcxt);

/* Sequential access to the children of an on-disk container */
typedef struct HxContainerIter
{
	JsonbContainer *c;
	char	   *base;			/* start of the data area */
	int			next;			/* next JEntry to read */
	uint32		offset;			/* its start offset in the data area */
} HxContainerIter;

extern void hx_citer_init(HxContainerIter *it, JsonbContainer *c, int first);
extern void hx_citer_next(HxContainerIter *it, JsonbValue *v);
extern int	hx_key_compare(const char *a, int alen, const char *b, int blen);

/* ---------------------------------------------------------------------
 * patch.c, merge.c, diff.c
 * ---------------------------------------------------------------------
 */
typedef enum HxArrayMode
{
	HX_ARRAYS_APPEND,
	HX_ARRAYS_REPLACE,
	HX_ARRAYS_INDEX
} HxArrayMode;

extern HxArrayMode hx_parse_array_mode(const char *s);
extern HxNode *hx_diff_nodes(Jsonb *oldjb, Jsonb *newjb, HxArrayMode mode);

/* Shared by patch.c and merge.c: walking to a location */
typedef enum HxWalkMode
{
	HX_WALK_STRICT,				/* every step must exist (RFC 6902) */
	HX_WALK_CREATE				/* missing object members are created */
} HxWalkMode;

extern HxNode *hx_walk(HxNode **rootp, const HxPointer *ptr, int ntokens,
					   HxWalkMode mode, const HxOpCtx *ctx);
extern HxNode *hx_lookup(HxNode *root, const HxPointer *ptr, int ntokens,
						 const HxOpCtx *ctx);
extern int	hx_array_position(HxNode *arr, const HxPointer *ptr, int depth,
							  bool allow_end, bool allow_size,
							  const HxOpCtx *ctx);
extern void hx_add_at(HxNode **rootp, const HxPointer *ptr, HxNode *value,
					  HxWalkMode mode, const HxOpCtx *ctx);
extern HxNode *hx_remove_at(HxNode **rootp, const HxPointer *ptr,
							bool missing_ok, const HxOpCtx *ctx);
extern void hx_error_missing(const HxOpCtx *ctx, const HxPointer *ptr,
							 int depth, HxNode *container) pg_attribute_noreturn();

/* Shared by patch.c and merge.c: operations and their members */
typedef void (*HxApplyOpFn) (HxNode **rootp, JsonbContainer *op,
							 HxOpCtx *ctx, void *arg);
extern void hx_apply_ops(HxNode **rootp, JsonbContainer *ops,
						 const char *what, HxApplyOpFn apply_op, void *arg);
extern int	hx_parse_op_name(JsonbContainer *op, HxOpCtx *ctx,
							 const char *const *names, int nnames,
							 const char *hint);
extern const char *hx_value_type_name(const JsonbValue *v);
typedef void (*HxAddFn) (HxNode **rootp, const HxPointer *path,
						 HxNode *value, const HxOpCtx *ctx);
extern void hx_op_test(HxNode *root, JsonbContainer *op,
					   const HxPointer *path, const HxOpCtx *ctx);
extern void hx_op_move_copy(HxNode **rootp, JsonbContainer *op,
							const HxPointer *path, bool is_move,
							HxAddFn add, const HxOpCtx *ctx);
extern const char *hx_op_get_string(JsonbContainer *op, const char *member,
									const HxOpCtx *ctx, bool required,
									int *len);
extern HxNode *hx_op_get_value(JsonbContainer *op, const char *member,
							   const HxOpCtx *ctx, bool required);
extern void hx_op_get_pointer(JsonbContainer *op, const char *member,
							  const HxOpCtx *ctx, HxPointer *ptr);

/* ---------------------------------------------------------------------
 * guard.c: trigger plumbing shared by the triggers (guard.c, phase.c,
 * stream.c)
 * ---------------------------------------------------------------------
 */
extern TriggerData *hx_trigger_data(FunctionCallInfo fcinfo,
									const char *funcname);
extern TriggerData *hx_guard_trigger_data(FunctionCallInfo fcinfo,
										  const char *funcname);
extern Datum hx_guard_return(TriggerData *trigdata);
extern AttrNumber hx_guard_column(Relation rel, const char *name);
extern int	hx_errtablecolconstraint(Relation rel, AttrNumber attnum,
									 const char *conname);
extern char *hx_guard_value_text(Relation rel, AttrNumber attnum,
								 Oid typoutput, Datum datum, bool isnull);

/* phase.c */
extern void hx_phase_init(void);

/* stream.c */
extern void hx_stream_init(void);

/* hxstate.c, stream.c */
extern Oid	hx_extension_namespace(void);
extern double hx_notify_queue_threshold;

#endif							/* HXSTATE_H */
