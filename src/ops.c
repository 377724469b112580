/*-------------------------------------------------------------------------
 *
 * ops.c
 *	  The op-list engine that hx_patch (RFC 6902) and hx_merge (composing
 *	  writes) share: a JSON array of operation objects, applied in order to
 *	  one tree, all or nothing.
 *
 * While an operation runs, an error context names it ("JSON Patch
 * operation 2 (remove) at path "/a/b""), so that the messages of the code
 * below (pointer.c, the operations themselves) say only what failed.
 *
 * Bounds, whatever the op list:
 *	- time: interrupts are checked before every operation and in every
 *	  loop over a container, so a cancel or statement_timeout lands;
 *	- result size: only "copy" can make a document grow faster than its op
 *	  list (each copy of the whole document doubles it).  Copies count the
 *	  bytes they add; once the document could be over jsonb's limit, its
 *	  exact size is measured, and a document over the limit stops with
 *	  54000 there, not gigabytes later;
 *	- memory: everything an op list allocates lives in one context, the
 *	  tree's.  When that holds several times what the document and the op
 *	  list need (copies and unpacked containers that were later removed,
 *	  op lists applied long ago), the tree is encoded into a fresh context
 *	  and the old one is freed, so peak memory stays within a small
 *	  multiple of the input and the result.  That rebuilding, compaction,
 *	  happens only between two operations, and frees only the engine's own
 *	  memory: the memory contract in ops.h says who owns what, and what a
 *	  caller may hold across an operation.
 *
 * src/ops.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "ops.h"

/*
 * The tree is rebuilt when its context passes hxstate.compaction_threshold
 * (kB), plus a few times the document and the input; the threshold is
 * doubled for the rest of the op list when rebuilding does not free much.
 */
#define COMPACT_THRESHOLD_DEFAULT	(64 * 1024)	/* kB: 64 MB */
#define COMPACT_THRESHOLD_MIN		64	/* kB */
#define COMPACT_FACTOR			3
/* Rebuilds closer together than this many operations mean a working set
 * larger than the threshold: raise it instead of rebuilding again */
#define COMPACT_MIN_DISTANCE	8

static int	compaction_threshold = COMPACT_THRESHOLD_DEFAULT;

/*
 * hxstate.compaction_threshold: a developer option, left out of
 * postgresql.conf.sample and SHOW ALL.  Tests set it low to exercise
 * compaction on small documents and short logs; it changes when memory is
 * given back, never a result.  Any role may set it: a low value costs only
 * that session's CPU (re-encoding its own documents more often, bounded by
 * the doubling above), a high one only its own memory, as work_mem does.
 */
void
hx_ops_init(void)
{
	DefineCustomIntVariable("hxstate.compaction_threshold",
							"Memory an op list's tree may hold, beyond three times its document and input, before it is rebuilt.",
							"A developer option: tests lower it to exercise the rebuilding of the tree on small inputs.",
							&compaction_threshold,
							COMPACT_THRESHOLD_DEFAULT, COMPACT_THRESHOLD_MIN,
							MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB | GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL,
							NULL, NULL, NULL);
}

/* ---------------------------------------------------------------------
 * The error context
 * ---------------------------------------------------------------------
 */

static void
ops_error_context(void *arg)
{
	HxOpList   *ops = (HxOpList *) arg;
	const char *path;
	const char *from;

	if (ops->index < 0)
		return;
	path = ops->path ? hx_clip(ops->path->text) : NULL;
	from = ops->from ? hx_clip(ops->from->text) : NULL;

	if (ops->kind == HX_OPS_PATCH)
	{
		if (ops->opname == NULL)
			errcontext("JSON Patch operation %d", ops->index);
		else if (path == NULL)
			errcontext("JSON Patch operation %d (%s)", ops->index, ops->opname);
		else if (from == NULL)
			errcontext("JSON Patch operation %d (%s) at path \"%s\"",
					   ops->index, ops->opname, path);
		else
			errcontext("JSON Patch operation %d (%s) from \"%s\" to path \"%s\"",
					   ops->index, ops->opname, from, path);
	}
	else
	{
		if (ops->opname == NULL)
			errcontext("hx_merge operation %d", ops->index);
		else if (path == NULL)
			errcontext("hx_merge operation %d (%s)", ops->index, ops->opname);
		else if (from == NULL)
			errcontext("hx_merge operation %d (%s) at path \"%s\"",
					   ops->index, ops->opname, path);
		else
			errcontext("hx_merge operation %d (%s) from \"%s\" to path \"%s\"",
					   ops->index, ops->opname, from, path);
	}
}

/* ---------------------------------------------------------------------
 * Applying an op list
 * ---------------------------------------------------------------------
 */

static void
set_compact_threshold(HxOpList *ops, Size *threshold)
{
	*threshold = ops->compact_floor +
		COMPACT_FACTOR * (ops->known_size + ops->input_size);
}

/*
 * Start editing doc, which stays the caller's and must stay valid until
 * hx_ops_end: the tree lives in a context of its own, under the current
 * one.  input_size is the size of the op list (or patch) that will be
 * applied; reset (if not NULL) is called with reset_arg when the tree is
 * rebuilt.
 */
void
hx_ops_begin(HxOpList *ops, HxOpsKind kind, Jsonb *doc, Size input_size,
			 HxResetFn reset, void *reset_arg)
{
	MemoryContext oldcxt;

	memset(ops, 0, sizeof(HxOpList));
	ops->kind = kind;
	ops->index = -1;
	ops->doc = doc;
	ops->parentcxt = CurrentMemoryContext;
	ops->treecxt = AllocSetContextCreate(CurrentMemoryContext, "hxstate tree",
										 ALLOCSET_DEFAULT_SIZES);
	ops->input_size = input_size;
	ops->known_size = VARSIZE(doc) - VARHDRSZ;
	ops->compact_floor = (Size) compaction_threshold * 1024;
	ops->reset = reset;
	ops->reset_arg = reset_arg;
	oldcxt = MemoryContextSwitchTo(ops->treecxt);
	ops->root = ops->original = hx_node_from_jsonb(doc);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * Rebuild the tree from its encoding in a fresh context, freeing
 * everything the old one held that the document no longer uses.  Called
 * between two operations only; the op list being applied, when it is the
 * engine's copy, moves to the new context.  Nothing outside the tree's
 * context is touched (ops.h: the memory contract).
 */
static void
compact(HxOpList *ops)
{
	MemoryContext newcxt;
	Jsonb	   *jb;

	newcxt = AllocSetContextCreate(ops->parentcxt, "hxstate tree",
								   ALLOCSET_DEFAULT_SIZES);
	jb = hx_node_to_jsonb(ops->root, newcxt);
	if (ops->copy != NULL)
	{
		JsonbContainer *moved = MemoryContextAllocHuge(newcxt, ops->copylen);

		memcpy(moved, ops->copy, ops->copylen);
		ops->copy = moved;
	}
	MemoryContextSwitchTo(newcxt);
	MemoryContextDelete(ops->treecxt);
	ops->treecxt = newcxt;
	ops->root = hx_node_from_jsonb(jb);
	ops->original = NULL;
	ops->known_size = VARSIZE(jb) - VARHDRSZ;
	ops->growth = 0;
	if (ops->since_compaction < COMPACT_MIN_DISTANCE)
		ops->compact_floor *= 2;
	ops->since_compaction = 0;
	if (ops->reset)
		ops->reset(ops->reset_arg);
}

/* After each operation: keep the result's size and the memory in bounds */
static void
check_bounds(HxOpList *ops, Size *threshold)
{
	ops->since_compaction++;

	/*
	 * Copies may have made the document larger than jsonb can hold: measure
	 * it once it could be, and again after each further eighth of growth.
	 */
	if (ops->growth > 0 &&
		ops->known_size + ops->growth > HX_JSONB_MAX_SIZE &&
		ops->growth >= ops->known_size / 8)
	{
		Size		size = hx_node_encoded_size(ops->root);

		if (size > HX_JSONB_MAX_SIZE)
			hx_error_too_large(size);
		ops->known_size = size;
		ops->growth = 0;
		set_compact_threshold(ops, threshold);
	}

	if (MemoryContextMemAllocated(ops->treecxt, true) > *threshold)
	{
		compact(ops);
		set_compact_threshold(ops, threshold);
	}
}

/*
 * Apply every operation of list (a JSON array) to ops->root, in order,
 * with apply_op; arg is passed on.  Everything is allocated in the tree's
 * context.  When list is the engine's copy (ops->copy), compaction may
 * move it between two operations: the loop follows it.
 */
static void
apply_list(HxOpList *ops, JsonbContainer *list, HxApplyOpFn apply_op,
		   void *arg)
{
	HxContainerIter it;
	int			n = JsonContainerSize(list);
	int			i;
	ErrorContextCallback errcallback;
	MemoryContext oldcxt;
	Size		threshold;

	Assert(JsonContainerIsArray(list));
	set_compact_threshold(ops, &threshold);
	errcallback.callback = ops_error_context;
	errcallback.arg = ops;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	oldcxt = MemoryContextSwitchTo(ops->treecxt);

	hx_citer_init(&it, list, 0);
	for (i = 0; i < n; i++)
	{
		JsonbValue	v;

		CHECK_FOR_INTERRUPTS();
		ops->index = i;
		ops->opname = NULL;
		ops->path = ops->from = NULL;
		hx_citer_next(&it, &v);
		if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_HX_MALFORMED),
					 errmsg("operation is not an object"),
					 errdetail("It is of type %s.", hx_value_type_name(&v))));
		apply_op(ops, v.val.binary.data, arg);

		/* what the operation parsed is not needed any more */
		ops->index = -1;
		ops->path = ops->from = NULL;
		check_bounds(ops, &threshold);
		if (ops->copy != NULL && ops->copy != list)
		{
			list = ops->copy;
			hx_citer_init(&it, list, i + 1);
		}
	}

	MemoryContextSwitchTo(oldcxt);
	error_context_stack = errcallback.previous;
}

/*
 * Apply list, which the caller keeps valid until hx_ops_end (the tree may
 * point into it).
 */
void
hx_ops_apply(HxOpList *ops, JsonbContainer *list, HxApplyOpFn apply_op,
			 void *arg)
{
	Assert(ops->copy == NULL);
	apply_list(ops, list, apply_op, arg);
}

/*
 * Apply list (len bytes), which the caller may free as soon as this
 * returns: the engine applies a copy of its own, in the tree's memory,
 * which compaction frees once the tree no longer points into it.  While
 * it is applied, the copy counts as the input, so that a list larger
 * than the threshold does not make every operation rebuild the tree.
 * (After an error, as after any, the HxOpList is not used again.)
 */
void
hx_ops_apply_copy(HxOpList *ops, JsonbContainer *list, uint32 len,
				  HxApplyOpFn apply_op, void *arg)
{
	Size		input_size = ops->input_size;

	Assert(ops->copy == NULL);
	ops->copy = MemoryContextAllocHuge(ops->treecxt, len);
	ops->copylen = len;
	memcpy(ops->copy, list, len);
	ops->input_size = Max(input_size, len);
	apply_list(ops, ops->copy, apply_op, arg);
	ops->input_size = input_size;
	ops->copy = NULL;
}

/*
 * The edited document, allocated in resultcxt (the input document itself
 * when nothing changed it), and the tree's memory freed.
 */
Jsonb *
hx_ops_end(HxOpList *ops, MemoryContext resultcxt)
{
	Jsonb	   *result;

	if (ops->root == ops->original && ops->root->kind == HX_BINARY)
		result = ops->doc;
	else
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(ops->treecxt);

		result = hx_node_to_jsonb(ops->root, resultcxt);
		MemoryContextSwitchTo(oldcxt);
	}
	MemoryContextDelete(ops->treecxt);
	ops->treecxt = NULL;
	ops->root = NULL;
	return result;
}

/* The tree's memory freed, without a result: the caller starts over */
void
hx_ops_abandon(HxOpList *ops)
{
	MemoryContextDelete(ops->treecxt);
	ops->treecxt = NULL;
	ops->root = NULL;
}

/* ---------------------------------------------------------------------
 * Reading the members of one operation
 * ---------------------------------------------------------------------
 */

static bool
get_member(JsonbContainer *op, const char *member, JsonbValue *v)
{
	return getKeyJsonValueFromContainer(op, member, strlen(member), v) != NULL;
}

static void
error_missing_member(const char *member)
{
	ereport(ERROR,
			(errcode(ERRCODE_HX_MALFORMED),
			 errmsg("operation is missing the \"%s\" member", member)));
}

/*
 * The op of an operation, as its index in names[]; records it for the
 * error context.
 */
int
hx_op_name(HxOpList *ops, JsonbContainer *op, const char *const *names,
		   int nnames)
{
	int			len;
	const char *name = hx_op_get_string(op, "op", true, &len);
	int			i;

	for (i = 0; i < nnames; i++)
	{
		if (strlen(names[i]) == (size_t) len && memcmp(names[i], name, len) == 0)
		{
			ops->opname = names[i];
			return i;
		}
	}
	if (ops->kind == HX_OPS_PATCH)
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("unrecognized operation \"%s\"",
						hx_clip(pnstrdup(name, len))),
				 errhint("The op must be one of add, remove, replace, move, copy and test.")));
	ereport(ERROR,
			(errcode(ERRCODE_HX_MALFORMED),
			 errmsg("unrecognized operation \"%s\"",
					hx_clip(pnstrdup(name, len))),
			 errhint("The op must be one of append, replace, delete, increment, union, upsert, discard, clear, merge, add, remove, move, copy and test.")));
	pg_unreachable();
}

/*
 * The string member "member" of op, or NULL when it is absent and not
 * required.  Its length goes to *len; the result is not NUL-terminated.
 */
const char *
hx_op_get_string(JsonbContainer *op, const char *member, bool required,
				 int *len)
{
	JsonbValue	v;

	if (!get_member(op, member, &v))
	{
		if (required)
			error_missing_member(member);
		return NULL;
	}
	if (v.type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("the \"%s\" member of the operation is not a string",
						member),
				 errdetail("It is of type %s.", hx_value_type_name(&v))));
	*len = v.val.string.len;
	return v.val.string.val;
}

/* The member "member" of op as a node, or NULL when absent and optional */
HxNode *
hx_op_get_value(JsonbContainer *op, const char *member, bool required)
{
	JsonbValue	v;

	if (!get_member(op, member, &v))
	{
		if (required)
			error_missing_member(member);
		return NULL;
	}
	return hx_node_from_value(&v);
}

/*
 * The required pointer member of op, "path" or "from" by role; recorded
 * for the error context.
 */
void
hx_op_get_pointer(HxOpList *ops, JsonbContainer *op, HxPointerRole role,
				  HxPointer *ptr)
{
	int			len;
	const char *s;

	Assert(role == HX_PTR_PATH || role == HX_PTR_FROM);
	s = hx_op_get_string(op, role == HX_PTR_PATH ? "path" : "from", true, &len);
	hx_pointer_parse(ptr, s, len, role);
	if (role == HX_PTR_PATH)
		ops->path = ptr;
	else
		ops->from = ptr;
}

/* ---------------------------------------------------------------------
 * Operations both functions share
 * ---------------------------------------------------------------------
 */

/*
 * RFC 6902 "test": the value at path must equal value (XH001, also when
 * the path does not exist).
 */
void
hx_op_test(HxOpList *ops, const HxPointer *path, HxNode *value)
{
	HxNode	   *node = hx_lookup(ops->root, path, path->ntokens, true);

	if (node == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_HX_TEST_FAILED),
				 errmsg("test failed: path \"%s\" does not exist",
						hx_clip(path->text))));
	if (!hx_node_equal(node, value))
		ereport(ERROR,
				(errcode(ERRCODE_HX_TEST_FAILED),
				 errmsg("test failed: the value at path \"%s\" is not equal to \"value\"",
						hx_clip(path->text))));
}

/*
 * The "from" member of a move or copy, recorded for the error context.  A
 * move's "from" may not be a proper prefix of its path (RFC 6902 section
 * 4.4): a value cannot move into its own child.
 */
void
hx_op_get_from(HxOpList *ops, JsonbContainer *op, const HxPointer *path,
			   bool is_move, HxPointer *from)
{
	hx_op_get_pointer(ops, op, HX_PTR_FROM, from);
	if (is_move && hx_pointer_is_proper_prefix(from, path))
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("cannot move \"%s\" into its own child \"%s\"",
						hx_clip(from->text), hx_clip(path->text))));
}

/*
 * RFC 6902 "move" (section 4.4: a remove at "from", then an add at path)
 * and "copy" (4.5).  "from" must exist; add is the caller's add, strict or
 * forgiving.  A copy counts the bytes it adds to the document.
 */
void
hx_op_move_copy(HxOpList *ops, const HxPointer *from, const HxPointer *path,
				bool is_move, HxAddFn add)
{
	HxNode	   *node = hx_lookup(ops->root, from, from->ntokens, true);

	if (node == NULL)
		(void) hx_walk(&ops->root, from, from->ntokens, HX_WALK_STRICT);	/* reports */

	if (!is_move)
	{
		node = hx_node_copy(node);
		ops->growth += (node->kind == HX_BINARY) ? node->u.bin.len :
			hx_node_encoded_size(node);
	}
	else if (hx_pointer_equal(from, path))
		return;					/* a no-op once "from" is known to exist */
	else if (from->ntokens > 0)
		node = hx_remove_at(&ops->root, from, false);
	add(&ops->root, path, node);
}
