/*-------------------------------------------------------------------------
 *
 * patch.c
 *	  hx_patch(doc jsonb, patch jsonb) -> jsonb: RFC 6902 JSON Patch, strict.
 *
 * All six operations (RFC 6902 section 4) are applied in order to one
 * HxNode tree; any failing operation raises an ERROR that names its index
 * and pointer, so a patch applies completely or not at all and the result
 * is never NULL.  "test" compares by JSON value (section 4.6: numbers
 * numerically, objects regardless of member order).  Members of an
 * operation that RFC 6902 does not define are ignored (section 4).
 *
 * The functions that read an operation's members are shared with merge.c.
 *
 * src/patch.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "hxstate.h"

typedef enum PatchOp
{
	OP_ADD,
	OP_REMOVE,
	OP_REPLACE,
	OP_MOVE,
	OP_COPY,
	OP_TEST
} PatchOp;

static const char *const patch_op_names[] = {
	"add", "remove", "replace", "move", "copy", "test"
};

/* ---------------------------------------------------------------------
 * Reading the members of one operation
 * ---------------------------------------------------------------------
 */

static bool
get_member(JsonbContainer *op, const char *member, JsonbValue *v)
{
	return getKeyJsonValueFromContainer(op, member, strlen(member), v) != NULL;
}

const char *
hx_value_type_name(const JsonbValue *v)
{
	HxNode		n;

	if (v->type == jbvBinary)
		return JsonContainerIsObject(v->val.binary.data) ? "object" : "array";
	n.kind = HX_SCALAR;
	n.u.scalar = *v;
	return hx_shape_name(hx_node_shape(&n));
}

static void
error_missing_member(const HxOpCtx *ctx, const char *member)
{
	ereport(ERROR,
			(errcode(ERRCODE_HX_MALFORMED),
			 errmsg("%s is missing the \"%s\" member",
					hx_op_label(ctx), member)));
}

/*
 * The string member "member" of op, or NULL when it is absent and not
 * required.  Its length goes to *len; the result is not NUL-terminated.
 */
const char *
hx_op_get_string(JsonbContainer *op, const char *member, const HxOpCtx *ctx,
				 bool required, int *len)
{
	JsonbValue	v;

	if (!get_member(op, member, &v))
	{
		if (required)
			error_missing_member(ctx, member);
		return NULL;
	}
	if (v.type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("%s has a non-string \"%s\" member",
						hx_op_label(ctx), member),
				 errdetail("It is of type %s.", hx_value_type_name(&v))));
	*len = v.val.string.len;
	return v.val.string.val;
}

/* The member "member" of op as a node, or NULL when absent and optional */
HxNode *
hx_op_get_value(JsonbContainer *op, const char *member, const HxOpCtx *ctx,
				bool required)
{
	JsonbValue	v;

	if (!get_member(op, member, &v))
	{
		if (required)
			error_missing_member(ctx, member);
		return NULL;
	}
	return hx_node_from_value(&v);
}

/* The required pointer member "member" ("path" or "from") of op */
void
hx_op_get_pointer(JsonbContainer *op, const char *member, const HxOpCtx *ctx,
				  HxPointer *ptr)
{
	int			len;
	const char *s = hx_op_get_string(op, member, ctx, true, &len);

	hx_pointer_parse(ptr, s, len, ctx, member);
}

/* The operations of a patch: the container of a jsonb array */
static JsonbContainer *
get_op_list(Jsonb *patch)
{
	if (JB_ROOT_IS_SCALAR(patch) || !JB_ROOT_IS_ARRAY(patch))
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("JSON Patch document must be an array of operations"),
				 errdetail("The patch is of type %s.",
						   JB_ROOT_IS_SCALAR(patch) ?
						   hx_value_type_name(getIthJsonbValueFromContainer(&patch->root, 0)) :
						   "object")));
	return &patch->root;
}

/* ---------------------------------------------------------------------
 * Applying one operation
 * ---------------------------------------------------------------------
 */

/*
 * The op of an operation, as its index in names[]; sets ctx->op.  hint
 * lists the valid ops for the message.
 */
int
hx_parse_op_name(JsonbContainer *op, HxOpCtx *ctx, const char *const *names,
				 int nnames, const char *hint)
{
	int			len;
	const char *name = hx_op_get_string(op, "op", ctx, true, &len);
	int			i;

	for (i = 0; i < nnames; i++)
	{
		if (strlen(names[i]) == (size_t) len && memcmp(names[i], name, len) == 0)
		{
			ctx->op = names[i];
			return i;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_HX_MALFORMED),
			 errmsg("%s has unrecognized op \"%s\"",
					hx_op_label(ctx), pnstrdup(name, len)),
			 errhint("%s", hint)));
	return -1;					/* keep compiler quiet */
}

/*
 * RFC 6902 "test": the value at path must equal the op's "value" (XH001,
 * also when the path does not exist).  Shared with hx_merge.
 */
void
hx_op_test(HxNode *root, JsonbContainer *op, const HxPointer *path,
		   const HxOpCtx *ctx)
{
	HxNode	   *value = hx_op_get_value(op, "value", ctx, true);
	HxNode	   *node = hx_lookup(root, path, path->ntokens, ctx);

	if (node == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_HX_TEST_FAILED),
				 errmsg("%s failed: path \"%s\" does not exist",
						hx_op_label(ctx), path->text)));
	if (!hx_node_equal(node, value))
		ereport(ERROR,
				(errcode(ERRCODE_HX_TEST_FAILED),
				 errmsg("%s failed: the value at path \"%s\" is not equal to \"value\"",
						hx_op_label(ctx), path->text)));
}

/*
 * RFC 6902 "move" (section 4.4: a remove at "from", then an add at path;
 * "from" may not be a proper prefix of path) and "copy" (4.5).  "from"
 * must exist; add is the caller's add, strict or forgiving.  Shared with
 * hx_merge.
 */
void
hx_op_move_copy(HxNode **rootp, JsonbContainer *op, const HxPointer *path,
				bool is_move, HxAddFn add, const HxOpCtx *ctx)
{
	HxPointer	from;
	HxNode	   *node;

	hx_op_get_pointer(op, "from", ctx, &from);
	if (is_move && hx_pointer_is_proper_prefix(&from, path))
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("%s failed: cannot move \"%s\" into its own child \"%s\"",
						hx_op_label(ctx), from.text, path->text)));
	node = hx_lookup(*rootp, &from, from.ntokens, ctx);
	if (node == NULL)
		(void) hx_walk(rootp, &from, from.ntokens, HX_WALK_STRICT, ctx);	/* reports */

	if (!is_move)
		node = hx_node_copy(node);
	else if (hx_pointer_equal(&from, path))
		return;					/* a no-op once "from" is known to exist */
	else if (from.ntokens > 0)
		node = hx_remove_at(rootp, &from, false, ctx);
	add(rootp, path, node, ctx);
}

static void
strict_add(HxNode **rootp, const HxPointer *path, HxNode *value,
		   const HxOpCtx *ctx)
{
	hx_add_at(rootp, path, value, HX_WALK_STRICT, ctx);
}

static void
apply_patch_op(HxNode **rootp, JsonbContainer *op, HxOpCtx *ctx, void *arg)
{
	PatchOp		kind;
	HxPointer	path;
	HxNode	   *value;

	kind = (PatchOp) hx_parse_op_name(op, ctx, patch_op_names,
									  lengthof(patch_op_names),
									  "The op must be one of add, remove, replace, move, copy and test.");
	hx_op_get_pointer(op, "path", ctx, &path);

	switch (kind)
	{
		case OP_ADD:
			value = hx_op_get_value(op, "value", ctx, true);
			hx_add_at(rootp, &path, value, HX_WALK_STRICT, ctx);
			break;

		case OP_REMOVE:
			if (path.ntokens == 0)
				ereport(ERROR,
						(errcode(ERRCODE_HX_MALFORMED),
						 errmsg("%s failed: cannot remove the whole document",
								hx_op_label(ctx)),
						 errhint("Use \"replace\" with path \"\" to change the whole document.")));
			(void) hx_remove_at(rootp, &path, false, ctx);
			break;

		case OP_REPLACE:
			value = hx_op_get_value(op, "value", ctx, true);
			if (path.ntokens == 0)
				*rootp = value;
			else
			{
				HxNode	   *parent;
				const HxToken *last = &path.tokens[path.ntokens - 1];

				parent = hx_walk(rootp, &path, path.ntokens - 1,
								 HX_WALK_STRICT, ctx);
				if (parent->kind == HX_OBJECT)
				{
					HxNode	  **slot = hx_object_find(parent, last->s, last->len);

					if (slot == NULL)
						hx_error_missing(ctx, &path, path.ntokens - 1, parent);
					hx_object_set(parent, last->s, last->len, value);
				}
				else if (parent->kind == HX_ARRAY)
					hx_array_set(parent,
								 hx_array_position(parent, &path,
												   path.ntokens - 1,
												   false, false, ctx),
								 value);
				else
					hx_error_missing(ctx, &path, path.ntokens - 1, parent);
			}
			break;

		case OP_MOVE:
		case OP_COPY:
			hx_op_move_copy(rootp, op, &path, kind == OP_MOVE, strict_add, ctx);
			break;

		case OP_TEST:
			hx_op_test(*rootp, op, &path, ctx);
			break;
	}
}

/*
 * Apply every operation of the op list ops to *rootp, in order, with
 * apply_op; what names an operation in messages.  Shared with hx_merge.
 */
void
hx_apply_ops(HxNode **rootp, JsonbContainer *ops, const char *what,
			 HxApplyOpFn apply_op, void *arg)
{
	HxContainerIter it;
	int			n = JsonContainerSize(ops);
	int			i;
	HxOpCtx		ctx;

	ctx.what = what;
	hx_citer_init(&it, ops, 0);
	for (i = 0; i < n; i++)
	{
		JsonbValue	v;

		CHECK_FOR_INTERRUPTS();
		ctx.index = i;
		ctx.op = NULL;
		hx_citer_next(&it, &v);
		if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_HX_MALFORMED),
					 errmsg("%s is not an object", hx_op_label(&ctx)),
					 errdetail("It is of type %s.", hx_value_type_name(&v))));
		apply_op(rootp, v.val.binary.data, &ctx, arg);
	}
}

PG_FUNCTION_INFO_V1(hx_patch);

Datum
hx_patch(PG_FUNCTION_ARGS)
{
	Jsonb	   *doc = PG_GETARG_JSONB_P(0);
	Jsonb	   *patch = PG_GETARG_JSONB_P(1);
	JsonbContainer *ops = get_op_list(patch);
	MemoryContext workcxt;
	MemoryContext oldcxt;
	HxNode	   *root;
	HxNode	   *original;
	Jsonb	   *result;

	workcxt = AllocSetContextCreate(CurrentMemoryContext, "hx_patch",
									ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(workcxt);

	root = original = hx_node_from_jsonb(doc);
	hx_apply_ops(&root, ops, "JSON Patch operation", apply_patch_op, NULL);

	/* a patch of tests only gives back the document itself */
	if (root == original && root->kind == HX_BINARY)
		result = doc;
	else
		result = hx_node_to_jsonb(root, VARSIZE(doc) + VARSIZE(patch), oldcxt);

	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(workcxt);
	PG_FREE_IF_COPY(patch, 1);
	PG_RETURN_JSONB_P(result);
}
