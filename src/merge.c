/*-------------------------------------------------------------------------
 *
 * merge.c
 *	  hx_merge(state jsonb, writes jsonb) -> jsonb: the composing merge of
 *	  one tool's step writes into an agent's state.
 *
 * writes is an op list applied in order (DESIGN.md section 2):
 *
 *	append		items		appends; creates the array
 *	replace		value		sets (last write wins); null removes a member
 *	delete					removes; a missing path is no error
 *	increment	by			adds to a number; missing counts as 0
 *	union		items		appends the items not yet present (JSON equality)
 *	upsert		items, key	replaces the element with the same key in
 *							place, appends the others (default key "id")
 *	merge		value		RFC 7386 merge patch at the path
 *
 * and the RFC 6902 ops, forgiving where RFC 6902 is strict so that patches
 * of other producers merge instead of failing: add at ".../-" appends and
 * creates the array, add and replace of a member create it, remove of a
 * missing path is no error, move and copy need their "from" to exist, and
 * test is strict (a failure aborts the write: optimistic concurrency).
 * Missing parent objects are created; array elements never are.  A JSON
 * object instead of an op list is an RFC 7386 merge patch of the state.
 *
 * Composition: append, increment, union, upsert of distinct keys, delete
 * and merge of distinct members give the same result whichever order two
 * writers' op lists are applied in (up to the order of appended items).
 *
 * src/merge.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "hxstate.h"

typedef enum MergeOp
{
	M_APPEND,
	M_REPLACE,
	M_DELETE,
	M_INCREMENT,
	M_UNION,
	M_UPSERT,
	M_MERGE,
	M_ADD,
	M_REMOVE,
	M_MOVE,
	M_COPY,
	M_TEST
} MergeOp;

static const char *const merge_op_names[] = {
	"append", "replace", "delete", "increment", "union", "upsert", "merge",
	"add", "remove", "move", "copy", "test"
};

#define MERGE_OP_HINT \
	"The op must be one of append, replace, delete, increment, union, upsert, merge, add, remove, move, copy and test."

/* ---------------------------------------------------------------------
 * Reading operations
 * ---------------------------------------------------------------------
 */

/* The required "items" member, which must be an array */
static HxNode *
get_items(JsonbContainer *op, const HxOpCtx *ctx)
{
	HxNode	   *items = hx_op_get_value(op, "items", ctx, true);

	if (hx_node_shape(items) != HXS_ARRAY)
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("%s has a non-array \"items\" member", hx_op_label(ctx)),
				 errdetail("It is of type %s.",
						   hx_shape_name(hx_node_shape(items)))));
	hx_node_expand(items);
	return items;
}

static void
error_type_conflict(const HxOpCtx *ctx, const char *verb, const HxPointer *ptr,
					HxNode *found, const char *wanted)
{
	ereport(ERROR,
			(errcode(ERRCODE_HX_TYPE_CONFLICT),
			 errmsg("%s failed: cannot %s \"%s\"", hx_op_label(ctx), verb,
					ptr->text),
			 errdetail("The value at \"%s\" is %s, not %s.", ptr->text,
					   hx_shape_article(hx_node_shape(found)), wanted)));
}

/* ---------------------------------------------------------------------
 * Locations
 * ---------------------------------------------------------------------
 */

/*
 * Where an op writes: the container that holds the target (NULL for the
 * root) and, for an array, the target's index.
 */
typedef struct Target
{
	HxNode	  **rootp;
	const HxPointer *ptr;
	HxNode	   *parent;			/* unpacked object or array, or NULL */
	int			index;			/* when parent is an array */
} Target;

/*
 * Find the target of ptr, creating missing parent objects.  The parent of
 * an existing array element is fine; a new member of an array is not
 * (arrays grow by append, union, upsert and "add .../-").
 */
static void
target_locate(Target *t, HxNode **rootp, const HxPointer *ptr,
			  const HxOpCtx *ctx)
{
	t->rootp = rootp;
	t->ptr = ptr;
	t->parent = NULL;
	t->index = -1;
	if (ptr->ntokens == 0)
		return;
	t->parent = hx_walk(rootp, ptr, ptr->ntokens - 1, HX_WALK_CREATE, ctx);
	if (t->parent->kind == HX_ARRAY)
		t->index = hx_array_position(t->parent, ptr, ptr->ntokens - 1,
									 false, false, ctx);
	else if (t->parent->kind != HX_OBJECT)
		ereport(ERROR,
				(errcode(ERRCODE_HX_TYPE_CONFLICT),
				 errmsg("%s failed: cannot create %s \"%s\"",
						hx_op_label(ctx), ptr->member, ptr->text),
				 errdetail("The value at \"%s\" is %s, not an object or array.",
						   hx_pointer_prefix(ptr, ptr->ntokens - 1),
						   hx_shape_article(hx_node_shape(t->parent)))));
}

/* The node at the target, or NULL when the member does not exist */
static HxNode *
target_get(Target *t)
{
	const HxToken *last;
	HxNode	  **slot;

	if (t->parent == NULL)
		return *t->rootp;
	if (t->parent->kind == HX_ARRAY)
		return t->parent->u.arr.elems[t->index];
	last = &t->ptr->tokens[t->ptr->ntokens - 1];
	slot = hx_object_find(t->parent, last->s, last->len);
	return slot ? *slot : NULL;
}

static void
target_set(Target *t, HxNode *value)
{
	const HxToken *last;

	if (t->parent == NULL)
		*t->rootp = value;
	else if (t->parent->kind == HX_ARRAY)
		hx_array_set(t->parent, t->index, value);
	else
	{
		last = &t->ptr->tokens[t->ptr->ntokens - 1];
		hx_object_set(t->parent, last->s, last->len, value);
	}
}

/*
 * The array at the target, unpacked, created empty when missing; verb
 * names the op for a type conflict.
 */
static HxNode *
target_array(Target *t, const HxOpCtx *ctx, const char *verb)
{
	HxNode	   *arr = target_get(t);

	if (arr == NULL)
	{
		arr = hx_node_new_array(0);
		target_set(t, arr);
	}
	else if (hx_node_shape(arr) != HXS_ARRAY)
		error_type_conflict(ctx, verb, t->ptr, arr, "an array");
	hx_node_expand(arr);
	return arr;
}

/* ---------------------------------------------------------------------
 * Membership by JSON value: a small open-addressing table of element
 * positions, keyed by hx_node_hash of the element (union) or of its key
 * member (upsert).  The table is kept on the array node and reused by the
 * next union or upsert of the same kind as long as nothing else edited the
 * tree in between (hx_tree_epoch), so that an op list of many unions into
 * one set stays linear.
 * ---------------------------------------------------------------------
 */
typedef struct ElemSet
{
	const char *key;			/* upsert's key member; NULL for union */
	int			keylen;
	uint32	   *hashes;
	int		   *positions;		/* position + 1; 0 is empty */
	uint32		mask;
	int			used;
} ElemSet;

static void
elemset_init(ElemSet *set, int expected)
{
	uint32		size = 16;

	while (size < (uint32) expected * 2)
		size *= 2;
	set->hashes = MemoryContextAllocHuge(CurrentMemoryContext,
										 sizeof(uint32) * size);
	set->positions = MemoryContextAllocHuge(CurrentMemoryContext,
											sizeof(int) * size);
	memset(set->positions, 0, sizeof(int) * size);
	set->mask = size - 1;
	set->used = 0;
}

static void elemset_add(ElemSet *set, uint32 hash, int pos);

static void
elemset_grow(ElemSet *set)
{
	uint32		oldsize = set->mask + 1;
	uint32	   *hashes = set->hashes;
	int		   *positions = set->positions;
	uint32		i;

	elemset_init(set, oldsize);
	for (i = 0; i < oldsize; i++)
		if (positions[i])
			elemset_add(set, hashes[i], positions[i] - 1);
	pfree(hashes);
	pfree(positions);
}

static void
elemset_add(ElemSet *set, uint32 hash, int pos)
{
	uint32		h;

	if ((uint32) (set->used + 1) * 2 > set->mask + 1)
		elemset_grow(set);
	h = hash & set->mask;
	while (set->positions[h])
		h = (h + 1) & set->mask;
	set->hashes[h] = hash;
	set->positions[h] = pos + 1;
	set->used++;
}

/*
 * The position of an element whose key (what keyof gives for it) equals
 * key, or -1.  keyof NULL means the element itself.
 */
static int
elemset_find(ElemSet *set, uint32 hash, HxNode *key, HxNode *arr,
			 HxNode *(*keyof) (HxNode *elem, void *arg), void *arg)
{
	uint32		h = hash & set->mask;

	while (set->positions[h])
	{
		if (set->hashes[h] == hash)
		{
			int			pos = set->positions[h] - 1;
			HxNode	   *elem = arr->u.arr.elems[pos];
			HxNode	   *ekey = keyof ? keyof(elem, arg) : elem;

			if (ekey && hx_node_equal(ekey, key))
				return pos;
		}
		h = (h + 1) & set->mask;
	}
	return -1;
}

/* ---------------------------------------------------------------------
 * The operations
 * ---------------------------------------------------------------------
 */

static void
op_append(Target *t, HxNode *items, const HxOpCtx *ctx)
{
	HxNode	   *arr = target_get(t);
	int			i;

	if (arr == NULL)
	{
		/* a new array: the items themselves */
		target_set(t, items);
		return;
	}
	arr = target_array(t, ctx, "append to");
	for (i = 0; i < items->u.arr.n; i++)
		hx_array_append(arr, items->u.arr.elems[i]);
}

/*
 * The membership index of arr for key (NULL: the elements themselves),
 * reused from the last union or upsert when still valid, else built.
 */
static ElemSet *
elemset_for(HxNode *arr, const char *key, int keylen, int extra,
			HxNode *(*keyof) (HxNode *elem, void *arg), void *arg)
{
	ElemSet    *set = arr->u.arr.memo;
	int			i;

	if (set && arr->u.arr.memo_epoch == hx_tree_epoch &&
		set->keylen == keylen &&
		(key == NULL ? set->key == NULL :
		 (set->key != NULL && memcmp(set->key, key, keylen) == 0)))
		return set;

	set = palloc(sizeof(ElemSet));
	set->key = key;
	set->keylen = keylen;
	elemset_init(set, arr->u.arr.n + extra);
	for (i = 0; i < arr->u.arr.n; i++)
	{
		HxNode	   *k = keyof ? keyof(arr->u.arr.elems[i], arg) : arr->u.arr.elems[i];

		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		if (k)
			elemset_add(set, hx_node_hash(k), i);
	}
	arr->u.arr.memo = set;
	return set;
}

static void
op_union(Target *t, HxNode *items, const HxOpCtx *ctx)
{
	HxNode	   *arr = target_array(t, ctx, "union into");
	ElemSet    *set = elemset_for(arr, NULL, 0, items->u.arr.n, NULL, NULL);
	int			i;

	for (i = 0; i < items->u.arr.n; i++)
	{
		HxNode	   *item = items->u.arr.elems[i];
		uint32		hash = hx_node_hash(item);

		if (elemset_find(set, hash, item, arr, NULL, NULL) < 0)
		{
			hx_array_append(arr, item);
			elemset_add(set, hash, arr->u.arr.n - 1);
		}
	}
	arr->u.arr.memo_epoch = hx_tree_epoch;
}

typedef struct UpsertKey
{
	const char *key;
	int			keylen;
} UpsertKey;

static HxNode *
upsert_keyof(HxNode *elem, void *arg)
{
	UpsertKey  *k = arg;

	if (hx_node_shape(elem) != HXS_OBJECT)
		return NULL;
	return hx_node_get_member(elem, k->key, k->keylen);
}

static void
op_upsert(Target *t, HxNode *items, JsonbContainer *op, const HxOpCtx *ctx)
{
	UpsertKey	k;
	HxNode	   *arr;
	ElemSet    *set;
	int			i;

	k.key = hx_op_get_string(op, "key", ctx, false, &k.keylen);
	if (k.key == NULL)
	{
		k.key = "id";
		k.keylen = 2;
	}
	for (i = 0; i < items->u.arr.n; i++)
	{
		if (hx_node_shape(items->u.arr.elems[i]) != HXS_OBJECT)
			ereport(ERROR,
					(errcode(ERRCODE_HX_MALFORMED),
					 errmsg("%s has an item that is not an object",
							hx_op_label(ctx)),
					 errdetail("Item %d is of type %s.", i,
							   hx_shape_name(hx_node_shape(items->u.arr.elems[i])))));
	}

	arr = target_array(t, ctx, "upsert into");
	set = elemset_for(arr, k.key, k.keylen, items->u.arr.n, upsert_keyof, &k);
	for (i = 0; i < items->u.arr.n; i++)
	{
		HxNode	   *item = items->u.arr.elems[i];
		HxNode	   *key = upsert_keyof(item, &k);
		uint32		hash;
		int			pos;

		if (key == NULL)
		{
			hx_array_append(arr, item);
			continue;
		}
		hash = hx_node_hash(key);
		pos = elemset_find(set, hash, key, arr, upsert_keyof, &k);
		if (pos >= 0)
			hx_array_set(arr, pos, item);
		else
		{
			hx_array_append(arr, item);
			elemset_add(set, hash, arr->u.arr.n - 1);
		}
	}
	arr->u.arr.memo_epoch = hx_tree_epoch;
}

static void
op_increment(Target *t, JsonbContainer *op, const HxOpCtx *ctx)
{
	HxNode	   *by = hx_op_get_value(op, "by", ctx, true);
	HxNode	   *cur;
	Datum		sum;

	if (hx_node_shape(by) != HXS_NUMBER)
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("%s has a non-numeric \"by\" member", hx_op_label(ctx)),
				 errdetail("It is of type %s.", hx_shape_name(hx_node_shape(by)))));

	cur = target_get(t);
	if (cur == NULL)
	{
		target_set(t, by);
		return;
	}
	if (hx_node_shape(cur) != HXS_NUMBER)
		error_type_conflict(ctx, "increment", t->ptr, cur, "a number");
	sum = DirectFunctionCall2(numeric_add,
							  NumericGetDatum(cur->u.scalar.val.numeric),
							  NumericGetDatum(by->u.scalar.val.numeric));
	target_set(t, hx_node_new_numeric(DatumGetNumeric(sum)));
}

static HxNode *merge_patch(HxNode *target, HxNode *patch);

/* One member of an RFC 7386 merge patch: null removes, others merge */
static void
merge_member(HxNode *target, const char *key, int keylen, HxNode *value)
{
	if (value->kind == HX_SCALAR && value->u.scalar.type == jbvNull)
		(void) hx_object_remove(target, key, keylen);
	else
	{
		HxNode	  **slot = hx_object_find(target, key, keylen);

		hx_object_set(target, key, keylen,
					  merge_patch(slot ? *slot : NULL, value));
	}
}

/*
 * RFC 7386: the result of merging patch into target (NULL when missing).
 * A patch that is not an object replaces the target; an object patch
 * merges member by member, null removing a member.
 */
static HxNode *
merge_patch(HxNode *target, HxNode *patch)
{
	HxContainerIter kit;
	HxContainerIter vit;
	int			n;
	int			i;

	check_stack_depth();

	if (hx_node_shape(patch) != HXS_OBJECT)
		return patch;
	if (target == NULL || hx_node_shape(target) != HXS_OBJECT)
		target = hx_node_new_object(0);
	hx_node_expand(target);

	if (patch->kind == HX_OBJECT)
	{
		for (i = 0; i < patch->u.obj.n; i++)
		{
			HxPair	   *p = &patch->u.obj.pairs[i];

			if (p->value)
				merge_member(target, p->key, p->keylen, p->value);
		}
		return target;
	}

	n = JsonContainerSize(patch->u.bin.data);
	hx_citer_init(&kit, patch->u.bin.data, 0);
	hx_citer_init(&vit, patch->u.bin.data, n);
	for (i = 0; i < n; i++)
	{
		JsonbValue	k;
		JsonbValue	v;

		hx_citer_next(&kit, &k);
		hx_citer_next(&vit, &v);
		merge_member(target, k.val.string.val, k.val.string.len,
					 hx_node_from_value(&v));
	}
	return target;
}

static bool
is_null(HxNode *n)
{
	return n->kind == HX_SCALAR && n->u.scalar.type == jbvNull;
}

/* delete and remove: a missing path is no error */
static void
op_delete(HxNode **rootp, const HxPointer *path, const HxOpCtx *ctx)
{
	if (path->ntokens == 0)
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("%s failed: cannot delete the whole state",
						hx_op_label(ctx)),
				 errhint("Use \"replace\" with path \"\" to change the whole state.")));
	(void) hx_remove_at(rootp, path, true, ctx);
}

/*
 * replace and merge with a null value remove an object member (Helix's
 * mergeCustomState, RFC 7386), missing or not; an array element and the
 * root become null instead.  True when the op is done.
 */
static bool
null_removes(HxNode **rootp, const HxPointer *path, HxNode *value,
			 const HxOpCtx *ctx)
{
	HxNode	   *parent;

	if (!is_null(value) || path->ntokens == 0)
		return false;
	parent = hx_lookup(*rootp, path, path->ntokens - 1, ctx);
	if (parent != NULL && hx_node_shape(parent) == HXS_ARRAY)
		return false;
	op_delete(rootp, path, ctx);
	return true;
}

/* RFC 6902 add, forgiving: missing parents are created, "-" creates an array */
static void
op_add(HxNode **rootp, const HxPointer *path, HxNode *value,
	   const HxOpCtx *ctx)
{
	int			n = path->ntokens;

	if (n >= 2 &&
		hx_parse_index(&path->tokens[n - 1]) == HX_INDEX_END &&
		hx_lookup(*rootp, path, n - 1, ctx) == NULL)
	{
		HxNode	   *grandparent = hx_walk(rootp, path, n - 2, HX_WALK_CREATE, ctx);

		if (grandparent->kind == HX_OBJECT)
		{
			HxNode	   *arr = hx_node_new_array(1);
			const HxToken *tok = &path->tokens[n - 2];

			hx_array_append(arr, value);
			hx_object_set(grandparent, tok->s, tok->len, arr);
			return;
		}
		/* otherwise hx_add_at reports what is wrong */
	}
	hx_add_at(rootp, path, value, HX_WALK_CREATE, ctx);
}

static void
apply_merge_op(HxNode **rootp, JsonbContainer *op, HxOpCtx *ctx, void *arg)
{
	MergeOp		kind;
	HxPointer	path;
	Target		t;
	HxNode	   *value;

	kind = (MergeOp) hx_parse_op_name(op, ctx, merge_op_names,
									  lengthof(merge_op_names),
									  MERGE_OP_HINT);
	hx_op_get_pointer(op, "path", ctx, &path);

	switch (kind)
	{
		case M_APPEND:
			value = get_items(op, ctx);
			target_locate(&t, rootp, &path, ctx);
			op_append(&t, value, ctx);
			break;

		case M_UNION:
			value = get_items(op, ctx);
			target_locate(&t, rootp, &path, ctx);
			op_union(&t, value, ctx);
			break;

		case M_UPSERT:
			value = get_items(op, ctx);
			target_locate(&t, rootp, &path, ctx);
			op_upsert(&t, value, op, ctx);
			break;

		case M_INCREMENT:
			target_locate(&t, rootp, &path, ctx);
			op_increment(&t, op, ctx);
			break;

		case M_REPLACE:
			value = hx_op_get_value(op, "value", ctx, true);
			if (null_removes(rootp, &path, value, ctx))
				break;
			target_locate(&t, rootp, &path, ctx);
			target_set(&t, value);
			break;

		case M_MERGE:
			value = hx_op_get_value(op, "value", ctx, true);
			if (null_removes(rootp, &path, value, ctx))
				break;
			target_locate(&t, rootp, &path, ctx);
			target_set(&t, merge_patch(target_get(&t), value));
			break;

		case M_DELETE:
		case M_REMOVE:
			op_delete(rootp, &path, ctx);
			break;

		case M_ADD:
			value = hx_op_get_value(op, "value", ctx, true);
			op_add(rootp, &path, value, ctx);
			break;

		case M_MOVE:
		case M_COPY:
			hx_op_move_copy(rootp, op, &path, kind == M_MOVE, op_add, ctx);
			break;

		case M_TEST:
			hx_op_test(*rootp, op, &path, ctx);
			break;
	}
}

PG_FUNCTION_INFO_V1(hx_merge);

Datum
hx_merge(PG_FUNCTION_ARGS)
{
	Jsonb	   *state = PG_GETARG_JSONB_P(0);
	Jsonb	   *writes = PG_GETARG_JSONB_P(1);
	MemoryContext workcxt;
	MemoryContext oldcxt;
	HxNode	   *root;
	HxNode	   *original;
	Jsonb	   *result;

	if (JB_ROOT_IS_SCALAR(writes))
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("hx_merge writes must be an array of operations or an object"),
				 errdetail("The writes are of type %s.",
						   hx_value_type_name(getIthJsonbValueFromContainer(&writes->root, 0)))));

	workcxt = AllocSetContextCreate(CurrentMemoryContext, "hx_merge",
									ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(workcxt);

	root = original = hx_node_from_jsonb(state);
	if (JB_ROOT_IS_ARRAY(writes))
		hx_apply_ops(&root, &writes->root, "hx_merge operation",
					 apply_merge_op, NULL);
	else
		root = merge_patch(root, hx_node_from_jsonb(writes));

	/* writes that change nothing give back the state itself */
	if (root == original && root->kind == HX_BINARY)
		result = state;
	else
		result = hx_node_to_jsonb(root, VARSIZE(state) + VARSIZE(writes),
								  oldcxt);

	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(workcxt);
	PG_FREE_IF_COPY(writes, 1);
	PG_RETURN_JSONB_P(result);
}
