/*-------------------------------------------------------------------------
 *
 * patch.c
 *	  hx_patch(doc jsonb, patch jsonb) -> jsonb: RFC 6902 JSON Patch, strict.
 *
 * All six operations (RFC 6902 section 4) are applied in order to one tree
 * by the op-list engine (ops.c); any failing operation raises an ERROR
 * whose context names its index and pointer, so a patch applies completely
 * or not at all and the result is never NULL.  "test" compares by JSON
 * value (section 4.6: numbers numerically, objects regardless of member
 * order).  Members of an operation that RFC 6902 does not define are
 * ignored (section 4).
 *
 * src/patch.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "ops.h"

typedef enum PatchOp
{
	OP_ADD,
	OP_REMOVE,
	OP_REPLACE,
	OP_MOVE,
	OP_COPY,
	OP_TEST,
	NUM_PATCH_OPS
} PatchOp;

static const char *const patch_op_names[] = {
	"add", "remove", "replace", "move", "copy", "test"
};

StaticAssertDecl(lengthof(patch_op_names) == NUM_PATCH_OPS,
				 "patch_op_names must name every PatchOp");

/* The operations of a patch: the container of a jsonb array */
static JsonbContainer *
get_op_list(Jsonb *patch)
{
	if (JB_ROOT_IS_SCALAR(patch) || !JB_ROOT_IS_ARRAY(patch))
	{
		JsonbValue	v;

		hx_jsonb_root_value(patch, &v);
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("JSON Patch document must be an array of operations"),
				 errdetail("The patch is of type %s.", hx_value_type_name(&v))));
	}
	return &patch->root;
}

static void
strict_add(HxNode **rootp, const HxPointer *path, HxNode *value)
{
	hx_add_at(rootp, path, value, HX_WALK_STRICT);
}

/* RFC 6902 "replace": the target must exist */
static void
strict_replace(HxNode **rootp, const HxPointer *path, HxNode *value)
{
	HxTarget	t;

	hx_target_locate(&t, rootp, path, HX_WALK_STRICT, HX_TARGET_EXISTING);
	hx_target_put(&t, value, false);
}

/* An operation, read */
typedef struct PatchArgs
{
	PatchOp		kind;
	HxPointer	path;
	HxPointer	from;			/* move, copy */
	HxNode	   *value;			/* add, replace, test */
} PatchArgs;

/*
 * Read an operation: its name, pointers and value, and what it may not do
 * whatever the document is (remove the whole document, move a value into
 * its own child).
 */
static void
parse_patch_op(HxOpList *ops, JsonbContainer *op, PatchArgs *a)
{
	a->kind = (PatchOp) hx_op_name(ops, op, patch_op_names,
								   lengthof(patch_op_names));
	hx_op_get_pointer(ops, op, HX_PTR_PATH, &a->path);
	a->value = NULL;
	switch (a->kind)
	{
		case OP_ADD:
		case OP_REPLACE:
		case OP_TEST:
			a->value = hx_op_get_value(op, "value", true);
			break;

		case OP_REMOVE:
			if (a->path.ntokens == 0)
				ereport(ERROR,
						(errcode(ERRCODE_HX_MALFORMED),
						 errmsg("cannot remove the whole document"),
						 errhint("Use \"replace\" with path \"\" to change the whole document.")));
			break;

		case OP_MOVE:
		case OP_COPY:
			hx_op_get_from(ops, op, &a->path, a->kind == OP_MOVE, &a->from);
			break;

		case NUM_PATCH_OPS:
			pg_unreachable();
	}
}

static void
apply_patch_op(HxOpList *ops, JsonbContainer *op, void *arg)
{
	PatchArgs	a;

	parse_patch_op(ops, op, &a);
	switch (a.kind)
	{
		case OP_ADD:
			strict_add(&ops->root, &a.path, a.value);
			break;

		case OP_REMOVE:
			(void) hx_remove_at(&ops->root, &a.path, false);
			break;

		case OP_REPLACE:
			strict_replace(&ops->root, &a.path, a.value);
			break;

		case OP_MOVE:
		case OP_COPY:
			hx_op_move_copy(ops, &a.from, &a.path, a.kind == OP_MOVE, strict_add);
			break;

		case OP_TEST:
			hx_op_test(ops, &a.path, a.value);
			break;

		case NUM_PATCH_OPS:
			pg_unreachable();
	}
}

/* Read an operation without applying it (for hx_patch_check) */
static void
check_patch_op(HxOpList *ops, JsonbContainer *op, void *arg)
{
	PatchArgs	a;

	parse_patch_op(ops, op, &a);
}

PG_FUNCTION_INFO_V1(hx_patch);

Datum
hx_patch(PG_FUNCTION_ARGS)
{
	Jsonb	   *doc = hx_detoast_jsonb(PG_GETARG_DATUM(0));
	Jsonb	   *patch = hx_detoast_jsonb(PG_GETARG_DATUM(1));
	JsonbContainer *list = get_op_list(patch);
	HxOpList	ops;
	Jsonb	   *result;

	hx_ops_begin(&ops, HX_OPS_PATCH, doc, VARSIZE(patch), NULL, NULL);
	hx_ops_apply(&ops, list, apply_patch_op, NULL);
	result = hx_ops_end(&ops, CurrentMemoryContext);

	PG_FREE_IF_COPY(patch, 1);
	PG_RETURN_JSONB_P(result);
}

/*
 * Apply an RFC 6902 patch (a JSON array of len bytes) to ops's tree,
 * strictly, as hx_patch does: for a caller that applies many patches to
 * one document, one at a time, and frees each once it is applied
 * (hx_stream_state_at replaying a stream's deltas).
 */
void
hx_patch_apply_copy(HxOpList *ops, JsonbContainer *patch, uint32 len)
{
	hx_ops_apply_copy(ops, patch, len, apply_patch_op, NULL);
}

/*
 * Raise the error hx_patch would raise for patch whatever the document:
 * a malformed patch, operation, member or pointer (hx_stream_send checks a
 * delta before logging it).  What depends on the document (a path that
 * does not exist, a failed test) is left to applying it.
 */
void
hx_patch_check(Jsonb *patch)
{
	JsonbContainer *list = get_op_list(patch);
	HxOpList	ops;

	hx_ops_begin(&ops, HX_OPS_PATCH,
				 hx_node_to_jsonb(hx_node_new_object(0), CurrentMemoryContext),
				 VARSIZE(patch), NULL, NULL);
	hx_ops_apply(&ops, list, check_patch_op, NULL);
	(void) hx_ops_end(&ops, CurrentMemoryContext);
}
