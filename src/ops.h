/*-------------------------------------------------------------------------
 *
 * ops.h
 *	  The op-list engine that hx_patch and hx_merge share (ops.c): applying
 *	  a JSON array of operations to a tree, in order, with the operation's
 *	  index, name and pointers as the error context, memory and result size
 *	  kept in bounds, and the operations whose semantics both functions
 *	  share (test, move, copy).
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
extern Jsonb *hx_ops_end(HxOpList *ops, MemoryContext resultcxt);

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

/* patch.c: RFC 6902 on an op list's tree, and a patch's form alone */
extern void hx_patch_apply(HxOpList *ops, JsonbContainer *patch);
extern void hx_patch_check(Jsonb *patch);

#endif							/* HX_OPS_H */
