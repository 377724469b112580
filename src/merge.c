/*-------------------------------------------------------------------------
 *
 * merge.c
 *	  hx_merge(state jsonb, writes jsonb) -> jsonb: the composing merge of
 *	  one tool's step writes into an agent's state.
 *
 * writes is an op list applied in order by the op-list engine (ops.c):
 *
 *	append		items		appends; creates the array
 *	replace		value		sets (last write wins); null removes a member
 *	delete					removes; a missing path is no error
 *	increment	by			adds to a number; missing counts as 0
 *	union		items		appends the items not yet present (JSON equality)
 *	upsert		items, key	replaces the first element with the same key in
 *							place, appends the others (default key "id"; an
 *							item whose key is missing or null is appended)
 *	discard		items		removes every element equal to one of the items
 *				or keys, key	... or whose key is one of the keys
 *	clear					makes the array empty; creates it
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
 * Composition: append, increment, union, upsert of distinct keys, discard,
 * delete and merge of distinct members give the same result whichever
 * order two writers' op lists are applied in (up to the order of appended
 * items).
 *
 * Membership (union, upsert, discard by key) is found through hash
 * indexes of an array's elements, kept for the whole op list and brought
 * up to date incrementally: appends are indexed as they come, an upsert's
 * replacement updates every index of its array, and only an edit of the
 * array by another op (its edits counter, tree.h) makes an index be
 * rebuilt.  So repeated unions and upserts stay linear in time and
 * memory, whatever ops come between them.
 *
 * src/merge.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "ops.h"

typedef enum MergeOp
{
	M_APPEND,
	M_REPLACE,
	M_DELETE,
	M_INCREMENT,
	M_UNION,
	M_UPSERT,
	M_DISCARD,
	M_CLEAR,
	M_MERGE,
	M_ADD,
	M_REMOVE,
	M_MOVE,
	M_COPY,
	M_TEST,
	NUM_MERGE_OPS
} MergeOp;

static const char *const merge_op_names[] = {
	"append", "replace", "delete", "increment", "union", "upsert", "discard",
	"clear", "merge", "add", "remove", "move", "copy", "test"
};

StaticAssertDecl(lengthof(merge_op_names) == NUM_MERGE_OPS,
				 "merge_op_names must name every MergeOp");

/* Loops over an array's elements check for interrupts this often */
#define MERGE_INTERRUPT_STRIDE	1024

/* ---------------------------------------------------------------------
 * Membership indexes
 *
 * An ElemSet is an open-addressing table with one slot per distinct key
 * of an array's elements: the element itself (a union's set) or its key
 * member (upsert and discard by key).  A slot holds the key's hash, the
 * first position at which the key occurs, and, when it occurs more than
 * once, all its positions in ascending order.  Finding a key therefore
 * compares it with one element per distinct key of equal hash, however
 * many elements repeat it.  Every ElemSet of an array hangs off one entry
 * of a hash table keyed by the array node, in the tree's memory context.
 * ---------------------------------------------------------------------
 */
#define POS_EMPTY		0		/* firsts[] holds position + 1 */
#define POS_DELETED		(-1)

/* Every position of a key that occurs more than once, ascending */
typedef struct PosList
{
	int			n;
	int			cap;
	int			pos[FLEXIBLE_ARRAY_MEMBER];
} PosList;

typedef struct ElemSet
{
	struct ElemSet *next;		/* the array's other indexes */
	MemoryContext cxt;			/* the tree's: where the table lives */
	MemoryContext scratch;		/* where keys are read and compared */
	const char *key;			/* the key member; NULL: the element itself */
	int			keylen;
	uint32		edits;			/* the array's edits counter when in sync */
	int			nindexed;		/* elements [0, nindexed) are indexed */
	uint32	   *hashes;
	int		   *firsts;			/* first position + 1, or POS_EMPTY/DELETED */
	PosList   **dups;			/* a repeated key's positions, or NULL */
	uint32		mask;
	int			used;			/* slots, including deleted ones */
} ElemSet;

typedef struct MemoEntry
{
	HxNode	   *arr;			/* hash key */
	ElemSet    *sets;
} MemoEntry;

/* The state of one hx_merge call, kept across its operations */
typedef struct MergeState
{
	HTAB	   *memos;			/* MemoEntry by array; NULL until needed */
	MemoryContext scratch;		/* lookups' temporary nodes; reset per op */
} MergeState;

/* The tree was rebuilt (ops.c): its arrays and their indexes are gone */
static void
merge_reset(void *arg)
{
	MergeState *ms = (MergeState *) arg;

	ms->memos = NULL;
	ms->scratch = NULL;
}

/* The key of an element: the element itself, or its key member */
static HxNode *
elem_key(const ElemSet *set, HxNode *elem)
{
	HxNode	   *k;

	if (set->key == NULL)
		return elem;
	if (hx_node_shape(elem) != HXS_OBJECT)
		return NULL;
	k = hx_node_get_member(elem, set->key, set->keylen);
	if (k == NULL || hx_node_is_null(k))
		return NULL;			/* no key: never matches */
	return k;
}

static void
elemset_alloc(ElemSet *set, int expected)
{
	uint32		size = 16;

	while (size < (uint32) expected * 2)
		size *= 2;
	set->hashes = MemoryContextAllocHuge(set->cxt, sizeof(uint32) * size);
	set->firsts = MemoryContextAllocHuge(set->cxt, sizeof(int) * size);
	set->dups = MemoryContextAllocHuge(set->cxt, sizeof(PosList *) * size);
	memset(set->firsts, 0, sizeof(int) * size);
	memset(set->dups, 0, sizeof(PosList *) * size);
	set->mask = size - 1;
	set->used = 0;
}

/* Free the table, and the position lists it points to */
static void
elemset_free(ElemSet *set)
{
	uint32		i;

	for (i = 0; i <= set->mask; i++)
		if (set->dups[i])
			pfree(set->dups[i]);
	pfree(set->hashes);
	pfree(set->firsts);
	pfree(set->dups);
}

/*
 * Put a slot for a key not in the table into the first free place of its
 * probe sequence, reusing a deleted slot there: a key deleted and added
 * again and again (an upsert replacing the same element) keeps one slot.
 */
static void
slot_put(ElemSet *set, uint32 hash, int first, PosList *dups)
{
	uint32		h = hash & set->mask;

	while (set->firsts[h] > 0)
		h = (h + 1) & set->mask;
	if (set->firsts[h] == POS_EMPTY)
		set->used++;
	else if (set->dups[h])
		pfree(set->dups[h]);	/* left by discard */
	set->hashes[h] = hash;
	set->firsts[h] = first;
	set->dups[h] = dups;
}

/* Make room for one more slot: a table twice as big, or as big without
 * its deleted slots */
static void
elemset_reserve(ElemSet *set)
{
	uint32		oldsize = set->mask + 1;
	uint32	   *hashes = set->hashes;
	int		   *firsts = set->firsts;
	PosList   **dups = set->dups;
	int			live = 0;
	uint32		i;

	if ((uint32) (set->used + 1) * 2 <= oldsize)
		return;
	for (i = 0; i < oldsize; i++)
		if (firsts[i] > 0)
			live++;
	elemset_alloc(set, live + 1);
	for (i = 0; i < oldsize; i++)
	{
		if (firsts[i] > 0)
			slot_put(set, hashes[i], firsts[i], dups[i]);
		else if (dups[i])
			pfree(dups[i]);
	}
	pfree(hashes);
	pfree(firsts);
	pfree(dups);
}

/*
 * The slot of key, or -1.  Keys of on-disk elements are read into
 * temporary nodes: call in the scratch context.
 */
static int
elemset_slot(ElemSet *set, uint32 hash, HxNode *key, HxNode *arr)
{
	uint32		h = hash & set->mask;

	while (set->firsts[h] != POS_EMPTY)
	{
		if (set->firsts[h] > 0 && set->hashes[h] == hash)
		{
			HxNode	   *ekey = elem_key(set, arr->u.arr.elems[set->firsts[h] - 1]);

			if (ekey && hx_node_equal(ekey, key))
				return (int) h;
		}
		h = (h + 1) & set->mask;
	}
	return -1;
}

/* The first (lowest) position of an element whose key equals key, or -1 */
static int
elemset_find(ElemSet *set, uint32 hash, HxNode *key, HxNode *arr)
{
	int			h = elemset_slot(set, hash, key, arr);

	return h < 0 ? -1 : set->firsts[h] - 1;
}

/* The index of pos in a position list, or where it would go */
static int
poslist_search(const PosList *l, int pos)
{
	int			lo = 0;
	int			hi = l->n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (l->pos[mid] < pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Record that the element at pos (not yet recorded) has key key */
static void
elemset_add(ElemSet *set, uint32 hash, HxNode *key, int pos, HxNode *arr)
{
	int			h = elemset_slot(set, hash, key, arr);
	PosList    *l;
	int			at;

	if (h < 0)
	{
		elemset_reserve(set);
		slot_put(set, hash, pos + 1, NULL);
		return;
	}
	l = set->dups[h];
	if (l == NULL)
	{
		l = MemoryContextAlloc(set->cxt, offsetof(PosList, pos) + sizeof(int) * 4);
		l->n = 1;
		l->cap = 4;
		l->pos[0] = set->firsts[h] - 1;
	}
	else if (l->n == l->cap)
	{
		l->cap *= 2;
		l = repalloc_huge(l, offsetof(PosList, pos) + sizeof(int) * (Size) l->cap);
	}
	at = poslist_search(l, pos);
	Assert(at == l->n || l->pos[at] != pos);
	memmove(&l->pos[at + 1], &l->pos[at], sizeof(int) * (l->n - at));
	l->pos[at] = pos;
	l->n++;
	set->dups[h] = l;
	set->firsts[h] = l->pos[0] + 1;
}

/*
 * Forget that the element at pos has key key.  Call before the element
 * changes: it may be the one that key is compared with.
 */
static void
elemset_delete(ElemSet *set, uint32 hash, HxNode *key, int pos, HxNode *arr)
{
	int			h = elemset_slot(set, hash, key, arr);
	PosList    *l;
	int			at;

	if (h < 0)
		elog(ERROR, "hx_merge: element %d is missing from its membership index", pos);
	l = set->dups[h];
	if (l == NULL)
	{
		Assert(set->firsts[h] == pos + 1);
		set->firsts[h] = POS_DELETED;
		return;
	}
	at = poslist_search(l, pos);
	if (at == l->n || l->pos[at] != pos)
		elog(ERROR, "hx_merge: element %d is missing from its membership index", pos);
	memmove(&l->pos[at], &l->pos[at + 1], sizeof(int) * (l->n - at - 1));
	l->n--;
	set->firsts[h] = l->pos[0] + 1;
	if (l->n == 1)
	{
		pfree(l);
		set->dups[h] = NULL;
	}
}

/* Index elements [nindexed, n) of arr: the appends since the last sync */
static void
elemset_index_tail(ElemSet *set, HxNode *arr)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(set->scratch);
	int			i;

	for (i = set->nindexed; i < arr->u.arr.n; i++)
	{
		HxNode	   *k = elem_key(set, arr->u.arr.elems[i]);

		if ((i % MERGE_INTERRUPT_STRIDE) == 0)
			CHECK_FOR_INTERRUPTS();
		if (k)
			elemset_add(set, hx_node_hash(k), k, i, arr);
	}
	set->nindexed = arr->u.arr.n;
	MemoryContextSwitchTo(oldcxt);
}

static MemoEntry *
memo_entry(MergeState *ms, MemoryContext treecxt, HxNode *arr)
{
	bool		found;
	MemoEntry  *entry;

	if (ms->memos == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(HxNode *);
		ctl.entrysize = sizeof(MemoEntry);
		ctl.hcxt = treecxt;
		ms->memos = hash_create("hx_merge membership indexes", 16, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(ms->memos, &arr, HASH_ENTER, &found);
	if (!found)
		entry->sets = NULL;
	return entry;
}

/*
 * The index of arr by key (NULL: by the elements themselves), in sync
 * with arr: reused, with the appends since indexed, while the array's
 * edits counter has not moved; rebuilt otherwise.  Allocated in the
 * tree's context.
 */
static ElemSet *
elemset_for(MergeState *ms, MemoryContext treecxt, HxNode *arr,
			const char *key, int keylen)
{
	MemoEntry  *entry = memo_entry(ms, treecxt, arr);
	ElemSet    *set;

	for (set = entry->sets; set; set = set->next)
	{
		if (set->keylen == keylen &&
			(key == NULL ? set->key == NULL :
			 (set->key != NULL && memcmp(set->key, key, keylen) == 0)))
			break;
	}
	if (set == NULL)
	{
		set = MemoryContextAllocZero(treecxt, sizeof(ElemSet));
		set->cxt = treecxt;
		set->scratch = ms->scratch;
		set->key = key;
		set->keylen = keylen;
		set->edits = arr->u.arr.edits;
		elemset_alloc(set, arr->u.arr.n);
		set->next = entry->sets;
		entry->sets = set;
	}
	else if (set->edits != arr->u.arr.edits)
	{
		elemset_free(set);
		elemset_alloc(set, arr->u.arr.n);
		set->nindexed = 0;
		set->edits = arr->u.arr.edits;
	}
	elemset_index_tail(set, arr);
	return set;
}

/*
 * Replace element pos of arr by item, keeping every index of arr that is
 * in sync in sync (the replacement moves the array's edits counter).
 */
static void
replace_elem(MergeState *ms, HxNode *arr, int pos, HxNode *item)
{
	MemoEntry  *entry = hash_search(ms->memos, &arr, HASH_FIND, NULL);
	uint32		before = arr->u.arr.edits;
	HxNode	   *old = arr->u.arr.elems[pos];
	ElemSet    *set;
	MemoryContext oldcxt = MemoryContextSwitchTo(ms->scratch);

	for (set = entry ? entry->sets : NULL; set; set = set->next)
	{
		HxNode	   *k;

		if (set->edits != before || pos >= set->nindexed)
			continue;
		if ((k = elem_key(set, old)) != NULL)
			elemset_delete(set, hx_node_hash(k), k, pos, arr);
	}
	MemoryContextSwitchTo(oldcxt);
	hx_array_set(arr, pos, item);
	MemoryContextSwitchTo(ms->scratch);
	for (set = entry ? entry->sets : NULL; set; set = set->next)
	{
		HxNode	   *k;

		if (set->edits != before)
			continue;
		if (pos < set->nindexed && (k = elem_key(set, item)) != NULL)
			elemset_add(set, hx_node_hash(k), k, pos, arr);
		set->edits = arr->u.arr.edits;
	}
	MemoryContextSwitchTo(oldcxt);
}

/* ---------------------------------------------------------------------
 * Reading operations
 * ---------------------------------------------------------------------
 */

/* The "items" member, which must be an array; unpacked */
static HxNode *
get_items(JsonbContainer *op, bool required)
{
	HxNode	   *items = hx_op_get_value(op, "items", required);

	if (items == NULL)
		return NULL;
	if (hx_node_shape(items) != HXS_ARRAY)
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("the \"items\" member of the operation is not an array"),
				 errdetail("It is of type %s.",
						   hx_shape_name(hx_node_shape(items)))));
	hx_node_expand(items);
	return items;
}

/* The "key" member of upsert and discard, "id" when absent */
static const char *
get_key(JsonbContainer *op, int *keylen)
{
	const char *key = hx_op_get_string(op, "key", false, keylen);

	if (key == NULL)
	{
		*keylen = 2;
		return "id";
	}
	return key;
}

/*
 * An operation as read from the op list: everything it needs that does
 * not depend on the state, checked once.  Reading an op list without
 * applying it (hx_check_writes) is reading every op this way.
 */
typedef struct MergeArgs
{
	MergeOp		kind;
	HxPointer	path;
	HxPointer	from;			/* move, copy */
	HxNode	   *value;			/* replace, merge, add, test */
	HxNode	   *items;			/* append, union, upsert, discard: unpacked */
	HxNode	   *keys;			/* discard by key: unpacked */
	HxNode	  **itemkeys;		/* upsert: each item's key, or NULL */
	const char *key;			/* upsert, discard by key */
	int			keylen;
	HxNode	   *by;				/* increment */
} MergeArgs;

/* What an op that failed on a type conflict was doing */
typedef enum Verb
{
	V_APPEND,
	V_UNION,
	V_UPSERT,
	V_DISCARD,
	V_CLEAR,
	V_INCREMENT
} Verb;

static void
error_type_conflict(Verb verb, const HxPointer *ptr, HxNode *found)
{
	const char *p = hx_clip(ptr->text);
	const char *type = hx_shape_name(hx_node_shape(found));

	switch (verb)
	{
		case V_APPEND:
			ereport(ERROR,
					(errcode(ERRCODE_HX_TYPE_CONFLICT),
					 errmsg("cannot append to \"%s\"", p),
					 errdetail("The value at \"%s\" is of type %s, not an array.", p, type)));
			break;
		case V_UNION:
			ereport(ERROR,
					(errcode(ERRCODE_HX_TYPE_CONFLICT),
					 errmsg("cannot union into \"%s\"", p),
					 errdetail("The value at \"%s\" is of type %s, not an array.", p, type)));
			break;
		case V_UPSERT:
			ereport(ERROR,
					(errcode(ERRCODE_HX_TYPE_CONFLICT),
					 errmsg("cannot upsert into \"%s\"", p),
					 errdetail("The value at \"%s\" is of type %s, not an array.", p, type)));
			break;
		case V_DISCARD:
			ereport(ERROR,
					(errcode(ERRCODE_HX_TYPE_CONFLICT),
					 errmsg("cannot discard from \"%s\"", p),
					 errdetail("The value at \"%s\" is of type %s, not an array.", p, type)));
			break;
		case V_CLEAR:
			ereport(ERROR,
					(errcode(ERRCODE_HX_TYPE_CONFLICT),
					 errmsg("cannot clear \"%s\"", p),
					 errdetail("The value at \"%s\" is of type %s, not an array.", p, type)));
			break;
		case V_INCREMENT:
			ereport(ERROR,
					(errcode(ERRCODE_HX_TYPE_CONFLICT),
					 errmsg("cannot increment \"%s\"", p),
					 errdetail("The value at \"%s\" is of type %s, not a number.", p, type)));
			break;
	}
}

/* ---------------------------------------------------------------------
 * Locations
 * ---------------------------------------------------------------------
 */

/*
 * Find the target of ptr (pointer.c), creating missing parent objects.
 * The parent of an existing array element is fine; a new member of an
 * array is not (arrays grow by append, union, upsert and "add .../-").
 */
static void
target_locate(HxTarget *t, HxNode **rootp, const HxPointer *ptr)
{
	hx_target_locate(t, rootp, ptr, HX_WALK_CREATE, HX_TARGET_SET);
}

/*
 * The array at the target, unpacked, or NULL when missing (created empty
 * when create); verb names the op for a type conflict.
 */
static HxNode *
target_array(HxTarget *t, Verb verb, bool create)
{
	HxNode	   *arr = hx_target_get(t, true);

	if (arr == NULL)
	{
		if (!create)
			return NULL;
		arr = hx_node_new_array(0);
		hx_target_put(t, arr, false);
	}
	else if (hx_node_shape(arr) != HXS_ARRAY)
		error_type_conflict(verb, t->ptr, arr);
	hx_node_expand(arr);
	return arr;
}

/* ---------------------------------------------------------------------
 * The array operations
 * ---------------------------------------------------------------------
 */

static void
op_append(HxTarget *t, HxNode *items)
{
	HxNode	   *arr = hx_target_get(t, false);
	int			i;

	if (arr == NULL)
	{
		/* a new array: the items themselves */
		hx_target_put(t, items, false);
		return;
	}
	arr = target_array(t, V_APPEND, true);
	for (i = 0; i < items->u.arr.n; i++)
		hx_array_append(arr, items->u.arr.elems[i]);
}

static void
op_union(HxOpList *ops, MergeState *ms, HxTarget *t, HxNode *items)
{
	HxNode	   *arr = target_array(t, V_UNION, true);
	ElemSet    *set = elemset_for(ms, ops->treecxt, arr, NULL, 0);
	int			i;

	for (i = 0; i < items->u.arr.n; i++)
	{
		HxNode	   *item = items->u.arr.elems[i];
		uint32		hash = hx_node_hash(item);
		int			found;
		MemoryContext oldcxt = MemoryContextSwitchTo(ms->scratch);

		found = elemset_find(set, hash, item, arr);
		MemoryContextSwitchTo(oldcxt);
		if (found < 0)
			hx_array_append(arr, item);
		/* the item is indexed with the other appends, at the next sync */
		elemset_index_tail(set, arr);
	}
}

/* The items of upsert: objects; their keys (NULL: no key) in keys[] */
static HxNode **
upsert_keys(HxNode *items, const char *key, int keylen)
{
	HxNode	  **keys = palloc(sizeof(HxNode *) * Max(items->u.arr.n, 1));
	int			i;

	for (i = 0; i < items->u.arr.n; i++)
	{
		HxNode	   *item = items->u.arr.elems[i];
		HxNode	   *k;

		if (hx_node_shape(item) != HXS_OBJECT)
			ereport(ERROR,
					(errcode(ERRCODE_HX_MALFORMED),
					 errmsg("item %d of the operation is not an object", i),
					 errdetail("It is of type %s.",
							   hx_shape_name(hx_node_shape(item)))));
		k = hx_node_get_member(item, key, keylen);
		keys[i] = (k == NULL || hx_node_is_null(k)) ? NULL : k;
	}
	return keys;
}

static void
op_upsert(HxOpList *ops, MergeState *ms, HxTarget *t, MergeArgs *a)
{
	HxNode	   *items = a->items;
	HxNode	  **keys = a->itemkeys;
	HxNode	   *arr = target_array(t, V_UPSERT, true);
	ElemSet    *set = elemset_for(ms, ops->treecxt, arr, a->key, a->keylen);
	int			i;

	for (i = 0; i < items->u.arr.n; i++)
	{
		HxNode	   *item = items->u.arr.elems[i];
		int			found = -1;

		if (keys[i] != NULL)
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(ms->scratch);

			found = elemset_find(set, hx_node_hash(keys[i]), keys[i], arr);
			MemoryContextSwitchTo(oldcxt);
		}
		if (found >= 0)
			replace_elem(ms, arr, found, item);
		else
		{
			hx_array_append(arr, item);
			elemset_index_tail(set, arr);
		}
	}
}

/*
 * discard: remove every element equal to one of "items", or whose key
 * member equals one of "keys".  A missing array is no error: there is
 * nothing to discard, and nothing is created.
 */
static void
op_discard(HxOpList *ops, MergeState *ms, MergeArgs *a)
{
	HxNode	   *wanted = a->items ? a->items : a->keys;
	const char *key = a->items ? NULL : a->key;
	int			keylen = a->items ? 0 : a->keylen;
	HxTarget	t;
	HxNode	   *arr;
	ElemSet    *set;
	bool	   *keep;
	int			i;

	if (hx_lookup(ops->root, &a->path, a->path.ntokens, true) == NULL)
		return;
	target_locate(&t, &ops->root, &a->path);
	arr = target_array(&t, V_DISCARD, false);
	if (arr->u.arr.n == 0 || wanted->u.arr.n == 0)
		return;

	/* mark the positions of the elements to discard, then drop them */
	set = elemset_for(ms, ops->treecxt, arr, key, keylen);
	keep = MemoryContextAllocHuge(ms->scratch, sizeof(bool) * arr->u.arr.n);
	memset(keep, true, sizeof(bool) * arr->u.arr.n);
	for (i = 0; i < wanted->u.arr.n; i++)
	{
		HxNode	   *w = wanted->u.arr.elems[i];
		MemoryContext oldcxt;
		int			h;

		if (key != NULL && hx_node_is_null(w))
			continue;			/* a null key matches nothing */
		oldcxt = MemoryContextSwitchTo(ms->scratch);
		h = elemset_slot(set, hx_node_hash(w), w, arr);
		MemoryContextSwitchTo(oldcxt);
		if (h < 0)
			continue;
		if (set->dups[h])
		{
			PosList    *l = set->dups[h];
			int			j;

			for (j = 0; j < l->n; j++)
				keep[l->pos[j]] = false;
		}
		else
			keep[set->firsts[h] - 1] = false;

		/*
		 * Done with this key: a repeated wanted value finds nothing more.
		 * The array loses an element, so the index is rebuilt before its
		 * next use anyway.
		 */
		set->firsts[h] = POS_DELETED;
	}
	hx_array_retain(arr, keep);
}

static void
op_clear(HxTarget *t)
{
	HxNode	   *arr = target_array(t, V_CLEAR, true);

	hx_array_retain(arr, NULL);
}

static void
op_increment(HxTarget *t, HxNode *by)
{
	HxNode	   *cur;
	Datum		sum;

	cur = hx_target_get(t, false);
	if (cur == NULL)
	{
		hx_target_put(t, by, false);
		return;
	}
	if (hx_node_shape(cur) != HXS_NUMBER)
		error_type_conflict(V_INCREMENT, t->ptr, cur);
	sum = DirectFunctionCall2(numeric_add,
							  NumericGetDatum(cur->u.scalar.val.numeric),
							  NumericGetDatum(by->u.scalar.val.numeric));
	hx_target_put(t, hx_node_new_numeric(DatumGetNumeric(sum)), false);
}

/* ---------------------------------------------------------------------
 * RFC 7386 merge patches
 * ---------------------------------------------------------------------
 */

/*
 * Does an object patch hold a null member, in itself or in an object it
 * holds (arrays are values, not patches)?  Iterative, like the merge
 * itself.  An unpacked patch is assumed to.
 */
static bool
patch_has_null(HxNode *patch)
{
	JsonbContainer **stack;
	int			depth = 0;
	int			cap = 16;
	bool		found = false;

	if (patch->kind != HX_BINARY)
		return true;
	stack = palloc(sizeof(JsonbContainer *) * cap);
	stack[depth++] = patch->u.bin.data;
	while (depth > 0 && !found)
	{
		JsonbContainer *c = stack[--depth];
		int			n = JsonContainerSize(c);
		HxContainerIter vit;
		int			i;

		CHECK_FOR_INTERRUPTS();
		hx_citer_init(&vit, c, n);
		for (i = 0; i < n && !found; i++)
		{
			JsonbValue	v;

			hx_citer_next(&vit, &v);
			if (v.type == jbvNull)
				found = true;
			else if (v.type == jbvBinary && JsonContainerIsObject(v.val.binary.data))
			{
				if (depth == cap)
				{
					cap *= 2;
					stack = repalloc_huge(stack, sizeof(JsonbContainer *) * cap);
				}
				stack[depth++] = v.val.binary.data;
			}
		}
	}
	pfree(stack);
	return found;
}

/* One level of a merge in progress: target, and the patch's members */
typedef struct MergeFrame
{
	HxNode	   *target;			/* unpacked object */
	HxNode	   *patch;			/* object: on disk or unpacked */
	HxContainerIter kit;		/* on disk: its keys and values */
	HxContainerIter vit;
	int			i;
	int			n;
} MergeFrame;

static void
frame_init(MergeFrame *f, HxNode *target, HxNode *patch)
{
	f->target = target;
	f->patch = patch;
	f->i = 0;
	if (patch->kind == HX_BINARY)
	{
		f->n = JsonContainerSize(patch->u.bin.data);
		hx_citer_init(&f->kit, patch->u.bin.data, 0);
		hx_citer_init(&f->vit, patch->u.bin.data, f->n);
	}
	else
		f->n = patch->u.obj.n;
}

/* The frame's next member; false when there is none left */
static bool
frame_next(MergeFrame *f, const char **key, int *keylen, HxNode **value)
{
	while (f->i < f->n)
	{
		if (f->patch->kind == HX_BINARY)
		{
			JsonbValue	k;
			JsonbValue	v;

			hx_citer_next(&f->kit, &k);
			hx_citer_next(&f->vit, &v);
			f->i++;
			*key = k.val.string.val;
			*keylen = k.val.string.len;
			*value = hx_node_from_value(&v);
			return true;
		}
		else
		{
			HxPair	   *p = &f->patch->u.obj.pairs[f->i++];

			if (p->value == NULL)
				continue;
			*key = p->key;
			*keylen = p->keylen;
			*value = p->value;
			return true;
		}
	}
	return false;
}

/*
 * RFC 7386: the result of merging patch into target (NULL when missing).
 * A patch that is not an object replaces the target; an object patch
 * merges member by member, null removing a member and objects merging
 * into objects.  A patch member with no null anywhere in it is the result
 * itself wherever the target has no object to merge into, so only the
 * levels that both hold are unpacked.  Iterative: patches as deep as jsonb
 * allows merge without running out of stack.
 */
static HxNode *
merge_patch(HxNode *target, HxNode *patch)
{
	MergeFrame *stack;
	int			depth = 0;
	int			cap = 16;
	uint32		steps = 0;

	if (hx_node_shape(patch) != HXS_OBJECT)
		return patch;
	if (target == NULL || hx_node_shape(target) != HXS_OBJECT)
	{
		if (!patch_has_null(patch))
			return patch;
		target = hx_node_new_object(0);
	}
	hx_node_expand(target);

	stack = palloc(sizeof(MergeFrame) * cap);
	frame_init(&stack[depth++], target, patch);
	while (depth > 0)
	{
		MergeFrame *f = &stack[depth - 1];
		const char *key;
		int			keylen;
		HxNode	   *value;
		HxNode	   *child;
		HxNode	  **slot;

		if (!frame_next(f, &key, &keylen, &value))
		{
			depth--;
			continue;
		}
		if ((++steps % MERGE_INTERRUPT_STRIDE) == 0)
			CHECK_FOR_INTERRUPTS();

		if (hx_node_is_null(value))
		{
			(void) hx_object_remove(f->target, key, keylen);
			continue;
		}
		if (hx_node_shape(value) != HXS_OBJECT)
		{
			hx_object_set(f->target, key, keylen, value);
			continue;
		}
		slot = hx_object_find(f->target, key, keylen);
		child = slot ? *slot : NULL;
		if (child == NULL || hx_node_shape(child) != HXS_OBJECT)
		{
			if (!patch_has_null(value))
			{
				hx_object_set(f->target, key, keylen, value);
				continue;
			}
			child = hx_node_new_object(0);
			hx_object_set(f->target, key, keylen, child);
		}
		else
			hx_node_expand(child);

		if (depth == cap)
		{
			cap *= 2;
			stack = repalloc_huge(stack, sizeof(MergeFrame) * cap);
		}
		frame_init(&stack[depth++], child, value);
	}
	pfree(stack);
	return target;
}

/* ---------------------------------------------------------------------
 * The other operations
 * ---------------------------------------------------------------------
 */

/* delete and remove: a missing path is no error */
static void
op_delete(HxNode **rootp, const HxPointer *path)
{
	if (path->ntokens == 0)
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("cannot delete the whole state"),
				 errhint("Use \"replace\" with path \"\" to change the whole state.")));
	(void) hx_remove_at(rootp, path, true);
}

/*
 * replace and merge with a null value remove an object member (RFC 7386:
 * null means delete), missing or not; an array element and the root
 * become null instead.  True when the op is done.
 */
static bool
null_removes(HxNode **rootp, const HxPointer *path, HxNode *value)
{
	HxNode	   *parent;

	if (!hx_node_is_null(value) || path->ntokens == 0)
		return false;
	parent = hx_lookup(*rootp, path, path->ntokens - 1, true);
	if (parent != NULL && hx_node_shape(parent) == HXS_ARRAY)
		return false;
	op_delete(rootp, path);
	return true;
}

/* RFC 6902 add, forgiving: missing parents are created, "-" creates an array */
static void
op_add(HxNode **rootp, const HxPointer *path, HxNode *value)
{
	int			n = path->ntokens;

	if (n >= 2 &&
		hx_parse_index(&path->tokens[n - 1]) == HX_INDEX_END &&
		hx_lookup(*rootp, path, n - 1, true) == NULL)
	{
		HxNode	   *grandparent = hx_walk(rootp, path, n - 2, HX_WALK_CREATE);

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
	hx_add_at(rootp, path, value, HX_WALK_CREATE);
}

/* The "keys" member of discard: an array, unpacked */
static HxNode *
get_keys(JsonbContainer *op)
{
	HxNode	   *keys = hx_op_get_value(op, "keys", false);

	if (keys == NULL)
		return NULL;
	if (hx_node_shape(keys) != HXS_ARRAY)
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("the \"keys\" member of the operation is not an array"),
				 errdetail("It is of type %s.",
						   hx_shape_name(hx_node_shape(keys)))));
	hx_node_expand(keys);
	return keys;
}

/* Read an operation into a: everything that does not need the state */
static void
parse_merge_op(HxOpList *ops, JsonbContainer *op, MergeArgs *a)
{
	memset(a, 0, sizeof(MergeArgs));
	a->kind = (MergeOp) hx_op_name(ops, op, merge_op_names,
								   lengthof(merge_op_names));
	hx_op_get_pointer(ops, op, HX_PTR_PATH, &a->path);

	switch (a->kind)
	{
		case M_APPEND:
		case M_UNION:
			a->items = get_items(op, true);
			break;

		case M_UPSERT:
			a->items = get_items(op, true);
			a->key = get_key(op, &a->keylen);
			a->itemkeys = upsert_keys(a->items, a->key, a->keylen);
			break;

		case M_DISCARD:
			a->items = get_items(op, false);
			a->keys = get_keys(op);
			if ((a->items == NULL) == (a->keys == NULL))
				ereport(ERROR,
						(errcode(ERRCODE_HX_MALFORMED),
						 errmsg("operation must have exactly one of the \"items\" and \"keys\" members")));
			if (a->keys)
				a->key = get_key(op, &a->keylen);
			break;

		case M_INCREMENT:
			a->by = hx_op_get_value(op, "by", true);
			if (hx_node_shape(a->by) != HXS_NUMBER)
				ereport(ERROR,
						(errcode(ERRCODE_HX_MALFORMED),
						 errmsg("the \"by\" member of the operation is not a number"),
						 errdetail("It is of type %s.",
								   hx_shape_name(hx_node_shape(a->by)))));
			break;

		case M_REPLACE:
		case M_MERGE:
		case M_ADD:
		case M_TEST:
			a->value = hx_op_get_value(op, "value", true);
			break;

		case M_DELETE:
		case M_REMOVE:
			if (a->path.ntokens == 0)
				ereport(ERROR,
						(errcode(ERRCODE_HX_MALFORMED),
						 errmsg("cannot delete the whole state"),
						 errhint("Use \"replace\" with path \"\" to change the whole state.")));
			break;

		case M_MOVE:
		case M_COPY:
			hx_op_get_from(ops, op, &a->path, a->kind == M_MOVE, &a->from);
			break;

		case M_CLEAR:
			break;

		case NUM_MERGE_OPS:
			pg_unreachable();
	}
}

static void
apply_merge_op(HxOpList *ops, JsonbContainer *op, void *arg)
{
	MergeState *ms = (MergeState *) arg;
	MergeArgs	a;
	HxTarget	t;

	if (ms->scratch == NULL)
		ms->scratch = AllocSetContextCreate(ops->treecxt, "hx_merge lookups",
											ALLOCSET_DEFAULT_SIZES);
	else
		MemoryContextReset(ms->scratch);

	parse_merge_op(ops, op, &a);
	switch (a.kind)
	{
		case M_APPEND:
			target_locate(&t, &ops->root, &a.path);
			op_append(&t, a.items);
			break;

		case M_UNION:
			target_locate(&t, &ops->root, &a.path);
			op_union(ops, ms, &t, a.items);
			break;

		case M_UPSERT:
			target_locate(&t, &ops->root, &a.path);
			op_upsert(ops, ms, &t, &a);
			break;

		case M_DISCARD:
			op_discard(ops, ms, &a);
			break;

		case M_CLEAR:
			target_locate(&t, &ops->root, &a.path);
			op_clear(&t);
			break;

		case M_INCREMENT:
			target_locate(&t, &ops->root, &a.path);
			op_increment(&t, a.by);
			break;

		case M_REPLACE:
			if (null_removes(&ops->root, &a.path, a.value))
				break;
			target_locate(&t, &ops->root, &a.path);
			hx_target_put(&t, a.value, false);
			break;

		case M_MERGE:
			if (null_removes(&ops->root, &a.path, a.value))
				break;
			target_locate(&t, &ops->root, &a.path);
			hx_target_put(&t, merge_patch(hx_target_get(&t, true), a.value), false);
			break;

		case M_DELETE:
		case M_REMOVE:
			(void) hx_remove_at(&ops->root, &a.path, true);
			break;

		case M_ADD:
			op_add(&ops->root, &a.path, a.value);
			break;

		case M_MOVE:
		case M_COPY:
			hx_op_move_copy(ops, &a.from, &a.path, a.kind == M_MOVE, op_add);
			break;

		case M_TEST:
			hx_op_test(ops, &a.path, a.value);
			break;

		case NUM_MERGE_OPS:
			pg_unreachable();
	}
}

/* Read an operation without applying it (for hx_check_writes) */
static void
check_merge_op(HxOpList *ops, JsonbContainer *op, void *arg)
{
	MergeArgs	a;

	parse_merge_op(ops, op, &a);
}

/* Writes are an op list or an RFC 7386 merge patch (an object) */
static void
check_writes_shape(Jsonb *writes)
{
	if (JB_ROOT_IS_SCALAR(writes))
	{
		JsonbValue	v;

		hx_jsonb_root_value(writes, &v);
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("writes must be an array of operations or an object"),
				 errdetail("The writes are of type %s.", hx_value_type_name(&v))));
	}
}

PG_FUNCTION_INFO_V1(hx_merge);

Datum
hx_merge(PG_FUNCTION_ARGS)
{
	Jsonb	   *state = hx_detoast_jsonb(PG_GETARG_DATUM(0));
	Jsonb	   *writes = hx_detoast_jsonb(PG_GETARG_DATUM(1));
	MergeState	ms = {0};
	HxOpList	ops;
	Jsonb	   *result;

	check_writes_shape(writes);
	hx_ops_begin(&ops, HX_OPS_MERGE, state, VARSIZE(writes), merge_reset, &ms);
	if (JB_ROOT_IS_ARRAY(writes))
		hx_ops_apply(&ops, &writes->root, apply_merge_op, &ms);
	else
	{
		/* an RFC 7386 merge patch of the whole state */
		MemoryContext oldcxt = MemoryContextSwitchTo(ops.treecxt);

		ops.root = merge_patch(ops.root, hx_node_from_jsonb(writes));
		MemoryContextSwitchTo(oldcxt);
	}
	result = hx_ops_end(&ops, CurrentMemoryContext);

	PG_FREE_IF_COPY(writes, 1);
	PG_RETURN_JSONB_P(result);
}

PG_FUNCTION_INFO_V1(hx_check_writes);

/*
 * hx_check_writes(writes jsonb): raise the error hx_merge would raise for
 * writes whatever the state: a malformed op list, an unknown op, a missing
 * or mistyped member, a malformed pointer.  What depends on the state (a
 * type conflict, a failed test, a missing "from") is left to hx_merge.
 */
Datum
hx_check_writes(PG_FUNCTION_ARGS)
{
	Jsonb	   *writes = hx_detoast_jsonb(PG_GETARG_DATUM(0));
	HxOpList	ops;

	check_writes_shape(writes);
	if (JB_ROOT_IS_ARRAY(writes))
	{
		hx_ops_begin(&ops, HX_OPS_MERGE,
					 hx_node_to_jsonb(hx_node_new_object(0), CurrentMemoryContext),
					 VARSIZE(writes), NULL, NULL);
		hx_ops_apply(&ops, &writes->root, check_merge_op, NULL);
		(void) hx_ops_end(&ops, CurrentMemoryContext);
	}
	PG_FREE_IF_COPY(writes, 0);
	PG_RETURN_VOID();
}
