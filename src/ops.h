/*-------------------------------------------------------------------------
 *
 * ops.h
 *	  The op-list engine that hx_patch, hx_merge and the replay of a
 *	  stream's history share (ops.c): applying JSON arrays of operations
 *	  to a tree, in order, with the operation's index, name and pointers as
 *	  the error context, memory and result size kept in bounds, and the
 *	  operations whose semantics both functions share (test, move, copy).
 *
 * The memory contract
 *
 * Three kinds of memory meet while op lists are applied:
 *
 *	- the caller's: the document given to hx_ops_begin, and each op list
 *	  given to hx_ops_apply.  The engine never writes or frees them.  The
 *	  tree points into them (containers are unpacked lazily, values are
 *	  taken from the op list without a copy), so the document must stay
 *	  valid until hx_ops_end, and so must every op list applied with
 *	  hx_ops_apply.  A caller that cannot keep an op list that long (the
 *	  replay of a log, one event at a time) applies it with
 *	  hx_ops_apply_copy: the engine copies it into the tree's memory, and
 *	  the caller may free its own as soon as the call returns.
 *
 *	- the engine's: the tree's context, a child of the context current at
 *	  hx_ops_begin.  It holds the tree, everything the operations allocate
 *	  (it is CurrentMemoryContext while apply_op runs), and the engine's
 *	  copies of op lists.  Between two operations, never during one, the
 *	  engine may compact it: the tree is encoded into a fresh context and
 *	  decoded from there, the op list being applied (when it is the
 *	  engine's copy) is moved there too, and the old context is deleted
 *	  with everything else in it.  reset is then called.  hx_ops_end
 *	  (or hx_ops_abandon, which makes no result) deletes the tree's
 *	  context.
 *
 *	- the result's: hx_ops_end encodes the result into the context it is
 *	  given (or returns the document itself when nothing changed it).
 *
 * So what may be held across an operation:
 *	- the caller's own memory, the document and the op lists: always;
 *	- ops->root, nodes of the tree and anything in the tree's context:
 *	  only until the operation ends.  Whoever keeps such pointers across
 *	  operations (hx_merge's array indexes) drops them in reset; nothing
 *	  else may allocate in the tree's context or point into it.
 *	- after hx_ops_apply returns, ops->root is valid until the next
 *	  hx_ops_apply or hx_ops_end.
 *
 * src/ops.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef HX_OPS_H
#define HX_OPS_H

#include "pointer.h"

/* Whose operations: names them in error contexts and hints */
typedef enum HxOpsKind
{
	HX_OPS_PATCH,				/* hx_patch: RFC 6902, strict */
	HX_OPS_MERGE				/* hx_merge: composing writes */
} HxOpsKind;

typedef struct HxOpList HxOpList;

/* Apply one operation (an object) to ops->root; arg is the caller's */
typedef void (*HxApplyOpFn) (HxOpList *ops, JsonbContainer *op, void *arg);

/* Called when the tree was rebuilt: drop whatever points into it */
typedef void (*HxResetFn) (void *arg);

struct HxOpList
{
	HxOpsKind	kind;
	HxNode	   *root;			/* the document being edited */

	/* the operation being applied, for the error context */
	int			index;			/* 0-based; -1 between operations */
	const char *opname;
	const HxPointer *path;
	const HxPointer *from;

	/* private to ops.c: the tree's memory and the result's size */
	Jsonb	   *doc;			/* the input document */
	HxNode	   *original;		/* root as it came from doc, or NULL */
	MemoryContext parentcxt;
	MemoryContext treecxt;		/* holds the tree; replaced by compaction */
	JsonbContainer *copy;		/* the engine's copy of the op list being
								 * applied, or NULL; moved by compaction */
	uint32		copylen;
	Size		input_size;		/* bytes of the op list */
	Size		known_size;		/* the tree's encoded size, last measured */
	Size		growth;			/* bytes copies added since */
	Size		compact_floor;
	int			since_compaction;	/* operations since the last one */
	HxResetFn	reset;
	void	   *reset_arg;
};

extern void hx_ops_begin(HxOpList *ops, HxOpsKind kind, Jsonb *doc,
						 Size input_size, HxResetFn reset, void *reset_arg);
extern void hx_ops_apply(HxOpList *ops, JsonbContainer *list,
						 HxApplyOpFn apply_op, void *arg);
extern void hx_ops_apply_copy(HxOpList *ops, JsonbContainer *list,
							  uint32 len, HxApplyOpFn apply_op, void *arg);
extern Jsonb *hx_ops_end(HxOpList *ops, MemoryContext resultcxt);
extern void hx_ops_abandon(HxOpList *ops);

/* Reading an operation's members */
extern int	hx_op_name(HxOpList *ops, JsonbContainer *op,
					   const char *const *names, int nnames);
extern const char *hx_op_get_string(JsonbContainer *op, const char *member,
									bool required, int *len);
extern HxNode *hx_op_get_value(JsonbContainer *op, const char *member,
							   bool required);
extern void hx_op_get_pointer(HxOpList *ops, JsonbContainer *op,
							  HxPointerRole role, HxPointer *ptr);

/* Operations both functions share */
typedef void (*HxAddFn) (HxNode **rootp, const HxPointer *path,
						 HxNode *value);
extern void hx_op_test(HxOpList *ops, const HxPointer *path, HxNode *value);
extern void hx_op_get_from(HxOpList *ops, JsonbContainer *op,
						   const HxPointer *path, bool is_move,
						   HxPointer *from);
extern void hx_op_move_copy(HxOpList *ops, const HxPointer *from,
							const HxPointer *path, bool is_move, HxAddFn add);

/*
 * patch.c: RFC 6902 on an op list's tree, the patch copied (see above);
 * and a patch's form alone
 */
extern void hx_patch_apply_copy(HxOpList *ops, JsonbContainer *patch,
								uint32 len);
extern void hx_patch_check(Jsonb *patch);

#endif							/* HX_OPS_H */
