/*-------------------------------------------------------------------------
 *
 * tree.c
 *	  The lazily expanded jsonb tree that hx_patch, hx_merge, hx_diff and
 *	  the stream trigger edit, and the encoder that turns it back into a
 *	  jsonb datum.
 *
 * A node is a scalar, an on-disk container that has not been touched
 * (HX_BINARY: a pointer into a detoasted datum and its length), or an
 * unpacked array or object whose children are nodes again.  Operations
 * unpack only the containers on the paths they edit, one level at a time;
 * the encoder writes unpacked containers in jsonb's on-disk format
 * (jsonb.h: a header word, one JEntry per child with every
 * JB_OFFSET_STRIDE'th one an offset, then the children's data with
 * containers and numerics aligned to 4 bytes) and copies every untouched
 * container's bytes as they are.  A container's bytes do not depend on
 * where it sits, as long as it starts 4-byte aligned, so the copy is
 * exactly the encoding core's convertToJsonb() would produce.
 *
 * Invariants:
 *	- nodes are never shared between two parents (copy is deep down to the
 *	  untouched containers, which are immutable), so unpacking in place is
 *	  safe;
 *	- an unpacked object's pairs[0..nsorted) are in jsonb key order
 *	  (shorter keys first, then bytewise), later pairs are in insertion
 *	  order and found through a small hash index; removed members keep
 *	  their slot with value NULL until the object is normalized.
 *
 * src/tree.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "hxstate.h"

/* Below this many members an object is kept sorted on every insert */
#define OBJ_SORTED_INSERT_MAX	32
/* Unsorted tails longer than this get a hash index */
#define OBJ_TAIL_SCAN_MAX		8

uint64		hx_tree_epoch = 0;

static void *
alloc_huge(Size size)
{
	return MemoryContextAllocHuge(CurrentMemoryContext, size);
}

/* ---------------------------------------------------------------------
 * Reading on-disk containers
 * ---------------------------------------------------------------------
 */

/* jsonb's key order: shorter keys first, then bytewise */
int
hx_key_compare(const char *a, int alen, const char *b, int blen)
{
	if (alen != blen)
		return (alen > blen) ? 1 : -1;
	return memcmp(a, b, alen);
}

void
hx_citer_init(HxContainerIter *it, JsonbContainer *c, int first)
{
	int			nentries = JsonContainerSize(c);

	if (JsonContainerIsObject(c))
		nentries *= 2;
	it->c = c;
	it->base = (char *) &c->children[nentries];
	it->next = first;
	it->offset = (first == 0) ? 0 : getJsonbOffset(c, first);
}

/*
 * Read the next child of the container as a JsonbValue (containers come
 * back as jbvBinary).
 */
void
hx_citer_next(HxContainerIter *it, JsonbValue *v)
{
	JEntry		e = it->c->children[it->next];
	uint32		start = it->offset;
	uint32		end;

	if (JBE_HAS_OFF(e))
		end = JBE_OFFLENFLD(e);
	else
		end = start + JBE_OFFLENFLD(e);

	if (JBE_ISNULL(e))
		v->type = jbvNull;
	else if (JBE_ISSTRING(e))
	{
		v->type = jbvString;
		v->val.string.val = it->base + start;
		v->val.string.len = end - start;
	}
	else if (JBE_ISNUMERIC(e))
	{
		v->type = jbvNumeric;
		v->val.numeric = (Numeric) (it->base + INTALIGN(start));
	}
	else if (JBE_ISBOOL_TRUE(e))
	{
		v->type = jbvBool;
		v->val.boolean = true;
	}
	else if (JBE_ISBOOL_FALSE(e))
	{
		v->type = jbvBool;
		v->val.boolean = false;
	}
	else
	{
		Assert(JBE_ISCONTAINER(e));
		v->type = jbvBinary;
		v->val.binary.data = (JsonbContainer *) (it->base + INTALIGN(start));
		v->val.binary.len = end - INTALIGN(start);
	}
	it->offset = end;
	it->next++;
}

/* ---------------------------------------------------------------------
 * Making nodes
 * ---------------------------------------------------------------------
 */

static inline void
node_set_value(HxNode *n, const JsonbValue *v)
{
	if (v->type == jbvBinary)
	{
		n->kind = HX_BINARY;
		n->u.bin.data = v->val.binary.data;
		n->u.bin.len = v->val.binary.len;
	}
	else
	{
		Assert(v->type == jbvNull || v->type == jbvString ||
			   v->type == jbvNumeric || v->type == jbvBool);
		n->kind = HX_SCALAR;
		n->u.scalar = *v;
	}
}

HxNode *
hx_node_from_value(const JsonbValue *v)
{
	HxNode	   *n = palloc(sizeof(HxNode));

	node_set_value(n, v);
	return n;
}

HxNode *
hx_node_from_jsonb(Jsonb *jb)
{
	if (JB_ROOT_IS_SCALAR(jb))
	{
		HxContainerIter it;
		JsonbValue	v;

		hx_citer_init(&it, &jb->root, 0);
		hx_citer_next(&it, &v);
		return hx_node_from_value(&v);
	}
	else
	{
		HxNode	   *n = palloc(sizeof(HxNode));

		n->kind = HX_BINARY;
		n->u.bin.data = &jb->root;
		n->u.bin.len = VARSIZE(jb) - VARHDRSZ;
		return n;
	}
}

HxNode *
hx_node_new_array(int cap)
{
	HxNode	   *n = palloc(sizeof(HxNode));

	n->kind = HX_ARRAY;
	n->u.arr.cap = Max(cap, 4);
	n->u.arr.n = 0;
	n->u.arr.memo = NULL;
	n->u.arr.memo_epoch = 0;
	n->u.arr.elems = alloc_huge(sizeof(HxNode *) * n->u.arr.cap);
	return n;
}

HxNode *
hx_node_new_object(int cap)
{
	HxNode	   *n = palloc(sizeof(HxNode));

	n->kind = HX_OBJECT;
	n->u.obj.cap = Max(cap, 4);
	n->u.obj.n = 0;
	n->u.obj.nsorted = 0;
	n->u.obj.nlive = 0;
	n->u.obj.index = NULL;
	n->u.obj.indexsize = 0;
	n->u.obj.pairs = alloc_huge(sizeof(HxPair) * n->u.obj.cap);
	return n;
}

HxNode *
hx_node_new_string(const char *s, int len)
{
	HxNode	   *n = palloc(sizeof(HxNode));

	n->kind = HX_SCALAR;
	n->u.scalar.type = jbvString;
	n->u.scalar.val.string.val = (char *) s;
	n->u.scalar.val.string.len = len;
	return n;
}

HxNode *
hx_node_new_numeric(Numeric num)
{
	HxNode	   *n = palloc(sizeof(HxNode));

	n->kind = HX_SCALAR;
	n->u.scalar.type = jbvNumeric;
	n->u.scalar.val.numeric = num;
	return n;
}

HxShape
hx_node_shape(const HxNode *n)
{
	switch (n->kind)
	{
		case HX_SCALAR:
			switch (n->u.scalar.type)
			{
				case jbvNull:
					return HXS_NULL;
				case jbvString:
					return HXS_STRING;
				case jbvNumeric:
					return HXS_NUMBER;
				case jbvBool:
					return HXS_BOOL;
				default:
					elog(ERROR, "unexpected jsonb scalar type %d",
						 (int) n->u.scalar.type);
			}
			break;
		case HX_BINARY:
			return JsonContainerIsObject(n->u.bin.data) ? HXS_OBJECT : HXS_ARRAY;
		case HX_ARRAY:
			return HXS_ARRAY;
		case HX_OBJECT:
			return HXS_OBJECT;
	}
	return HXS_NULL;			/* keep compiler quiet */
}

const char *
hx_shape_name(HxShape s)
{
	switch (s)
	{
		case HXS_NULL:
			return "null";
		case HXS_STRING:
			return "string";
		case HXS_NUMBER:
			return "number";
		case HXS_BOOL:
			return "boolean";
		case HXS_ARRAY:
			return "array";
		case HXS_OBJECT:
			return "object";
	}
	return "unknown";
}

/* The shape with its article, for "the value at "/a" is an object" */
const char *
hx_shape_article(HxShape s)
{
	switch (s)
	{
		case HXS_NULL:
			return "null";
		case HXS_STRING:
			return "a string";
		case HXS_NUMBER:
			return "a number";
		case HXS_BOOL:
			return "a boolean";
		case HXS_ARRAY:
			return "an array";
		case HXS_OBJECT:
			return "an object";
	}
	return "unknown";
}

/*
 * Unpack one level of an on-disk container in place.  The children stay
 * on disk: containers become HX_BINARY nodes, scalars point into the
 * container's data.
 */
void
hx_node_expand(HxNode *n)
{
	JsonbContainer *c;
	int			count;
	HxNode	   *block = NULL;
	HxContainerIter it;
	int			i;

	if (n->kind != HX_BINARY)
		return;

	c = n->u.bin.data;
	count = JsonContainerSize(c);
	if (count > 0)
		block = alloc_huge(sizeof(HxNode) * count);

	if (JsonContainerIsArray(c))
	{
		HxNode	  **elems;
		int			cap = count + Max(4, count / 8);

		elems = alloc_huge(sizeof(HxNode *) * cap);
		hx_citer_init(&it, c, 0);
		for (i = 0; i < count; i++)
		{
			JsonbValue	v;

			hx_citer_next(&it, &v);
			node_set_value(&block[i], &v);
			elems[i] = &block[i];
		}
		n->kind = HX_ARRAY;
		n->u.arr.elems = elems;
		n->u.arr.n = count;
		n->u.arr.cap = cap;
		n->u.arr.memo = NULL;
		n->u.arr.memo_epoch = 0;
	}
	else
	{
		HxPair	   *pairs;
		HxContainerIter vit;
		int			cap = count + 4;

		Assert(JsonContainerIsObject(c));
		pairs = alloc_huge(sizeof(HxPair) * cap);
		hx_citer_init(&it, c, 0);
		hx_citer_init(&vit, c, count);
		for (i = 0; i < count; i++)
		{
			JsonbValue	k;
			JsonbValue	v;

			hx_citer_next(&it, &k);
			hx_citer_next(&vit, &v);
			pairs[i].key = k.val.string.val;
			pairs[i].keylen = k.val.string.len;
			node_set_value(&block[i], &v);
			pairs[i].value = &block[i];
		}
		n->kind = HX_OBJECT;
		n->u.obj.pairs = pairs;
		n->u.obj.n = count;
		n->u.obj.cap = cap;
		n->u.obj.nsorted = count;
		n->u.obj.nlive = count;
		n->u.obj.index = NULL;
		n->u.obj.indexsize = 0;
	}
}

/* A deep copy of the unpacked part; untouched containers are shared */
HxNode *
hx_node_copy(const HxNode *n)
{
	HxNode	   *c;
	int			i;

	check_stack_depth();

	switch (n->kind)
	{
		case HX_SCALAR:
		case HX_BINARY:
			c = palloc(sizeof(HxNode));
			*c = *n;
			return c;
		case HX_ARRAY:
			c = hx_node_new_array(n->u.arr.n);
			for (i = 0; i < n->u.arr.n; i++)
				c->u.arr.elems[i] = hx_node_copy(n->u.arr.elems[i]);
			c->u.arr.n = n->u.arr.n;
			return c;
		case HX_OBJECT:
			c = hx_node_new_object(n->u.obj.nlive);
			for (i = 0; i < n->u.obj.n; i++)
			{
				const HxPair *p = &n->u.obj.pairs[i];

				if (p->value)
					hx_object_set(c, p->key, p->keylen, hx_node_copy(p->value));
			}
			return c;
	}
	return NULL;				/* keep compiler quiet */
}

/* ---------------------------------------------------------------------
 * Arrays
 * ---------------------------------------------------------------------
 */

static void
array_reserve(HxNode *arr, int extra)
{
	if (arr->u.arr.n + extra > arr->u.arr.cap)
	{
		int			cap = Max(arr->u.arr.cap * 2, arr->u.arr.n + extra);

		arr->u.arr.elems = repalloc_huge(arr->u.arr.elems,
										 sizeof(HxNode *) * cap);
		arr->u.arr.cap = cap;
	}
}

void
hx_array_insert(HxNode *arr, int i, HxNode *child)
{
	Assert(arr->kind == HX_ARRAY);
	Assert(i >= 0 && i <= arr->u.arr.n);
	if (arr->u.arr.n >= (int) JB_CMASK)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("number of jsonb array elements exceeds the maximum allowed (%zu)",
						(size_t) JB_CMASK)));
	hx_tree_epoch++;
	array_reserve(arr, 1);
	if (i < arr->u.arr.n)
		memmove(&arr->u.arr.elems[i + 1], &arr->u.arr.elems[i],
				sizeof(HxNode *) * (arr->u.arr.n - i));
	arr->u.arr.elems[i] = child;
	arr->u.arr.n++;
}

void
hx_array_set(HxNode *arr, int i, HxNode *child)
{
	Assert(arr->kind == HX_ARRAY);
	Assert(i >= 0 && i < arr->u.arr.n);
	hx_tree_epoch++;
	arr->u.arr.elems[i] = child;
}

void
hx_array_append(HxNode *arr, HxNode *child)
{
	hx_array_insert(arr, arr->u.arr.n, child);
}

HxNode *
hx_array_remove(HxNode *arr, int i)
{
	HxNode	   *child;

	Assert(arr->kind == HX_ARRAY);
	Assert(i >= 0 && i < arr->u.arr.n);
	hx_tree_epoch++;
	child = arr->u.arr.elems[i];
	memmove(&arr->u.arr.elems[i], &arr->u.arr.elems[i + 1],
			sizeof(HxNode *) * (arr->u.arr.n - i - 1));
	arr->u.arr.n--;
	return child;
}

/* ---------------------------------------------------------------------
 * Objects
 * ---------------------------------------------------------------------
 */

static int
pair_cmp(const void *a, const void *b)
{
	const HxPair *pa = a;
	const HxPair *pb = b;

	return hx_key_compare(pa->key, pa->keylen, pb->key, pb->keylen);
}

static void
obj_index_add(HxNode *obj, int pos)
{
	const HxPair *p = &obj->u.obj.pairs[pos];
	uint32		mask = obj->u.obj.indexsize - 1;
	uint32		h = hash_bytes((const unsigned char *) p->key, p->keylen) & mask;

	while (obj->u.obj.index[h] != 0)
		h = (h + 1) & mask;
	obj->u.obj.index[h] = pos + 1;
}

/* (Re)build the hash index over the unsorted tail */
static void
obj_index_build(HxNode *obj)
{
	int			tail = obj->u.obj.n - obj->u.obj.nsorted;
	int			size = 64;
	int			i;

	while (size < tail * 2)
		size *= 2;
	if (obj->u.obj.index)
		pfree(obj->u.obj.index);
	obj->u.obj.index = alloc_huge(sizeof(int) * size);
	memset(obj->u.obj.index, 0, sizeof(int) * size);
	obj->u.obj.indexsize = size;
	for (i = obj->u.obj.nsorted; i < obj->u.obj.n; i++)
		obj_index_add(obj, i);
}

/* Position of key in pairs (live or removed), or -1 */
static int
obj_find_pos(HxNode *obj, const char *key, int keylen)
{
	HxPair	   *pairs = obj->u.obj.pairs;
	int			lo = 0;
	int			hi = obj->u.obj.nsorted;
	int			tail;
	int			i;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;
		int			d = hx_key_compare(pairs[mid].key, pairs[mid].keylen,
									   key, keylen);

		if (d == 0)
			return mid;
		if (d < 0)
			lo = mid + 1;
		else
			hi = mid;
	}

	tail = obj->u.obj.n - obj->u.obj.nsorted;
	if (tail == 0)
		return -1;
	if (tail <= OBJ_TAIL_SCAN_MAX)
	{
		for (i = obj->u.obj.nsorted; i < obj->u.obj.n; i++)
			if (pairs[i].keylen == keylen &&
				memcmp(pairs[i].key, key, keylen) == 0)
				return i;
		return -1;
	}
	else
	{
		uint32		mask;
		uint32		h;

		if (obj->u.obj.index == NULL)
			obj_index_build(obj);
		mask = obj->u.obj.indexsize - 1;
		h = hash_bytes((const unsigned char *) key, keylen) & mask;
		while (obj->u.obj.index[h] != 0)
		{
			i = obj->u.obj.index[h] - 1;
			if (pairs[i].keylen == keylen &&
				memcmp(pairs[i].key, key, keylen) == 0)
				return i;
			h = (h + 1) & mask;
		}
		return -1;
	}
}

HxNode **
hx_object_find(HxNode *obj, const char *key, int keylen)
{
	int			pos;

	Assert(obj->kind == HX_OBJECT);
	pos = obj_find_pos(obj, key, keylen);
	if (pos < 0 || obj->u.obj.pairs[pos].value == NULL)
		return NULL;
	return &obj->u.obj.pairs[pos].value;
}

void
hx_object_set(HxNode *obj, const char *key, int keylen, HxNode *child)
{
	HxPair	   *pairs;
	int			pos;
	int			n;

	Assert(obj->kind == HX_OBJECT);
	hx_tree_epoch++;
	pos = obj_find_pos(obj, key, keylen);
	if (pos >= 0)
	{
		if (obj->u.obj.pairs[pos].value == NULL)
			obj->u.obj.nlive++;
		obj->u.obj.pairs[pos].value = child;
		return;
	}

	if (obj->u.obj.nlive >= (int) JB_CMASK)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("number of jsonb object pairs exceeds the maximum allowed (%zu)",
						(size_t) JB_CMASK)));

	if (obj->u.obj.n >= obj->u.obj.cap)
	{
		obj->u.obj.cap *= 2;
		obj->u.obj.pairs = repalloc_huge(obj->u.obj.pairs,
										 sizeof(HxPair) * obj->u.obj.cap);
	}
	pairs = obj->u.obj.pairs;
	n = obj->u.obj.n;

	if (n == obj->u.obj.nsorted &&
		(n == 0 || hx_key_compare(pairs[n - 1].key, pairs[n - 1].keylen,
								  key, keylen) < 0))
	{
		/* goes at the end of a sorted object: stays sorted */
		pos = n;
		obj->u.obj.nsorted++;
	}
	else if (n == obj->u.obj.nsorted && n < OBJ_SORTED_INSERT_MAX)
	{
		/* small sorted object: insert in place */
		for (pos = 0; pos < n; pos++)
			if (hx_key_compare(pairs[pos].key, pairs[pos].keylen,
							   key, keylen) > 0)
				break;
		memmove(&pairs[pos + 1], &pairs[pos], sizeof(HxPair) * (n - pos));
		obj->u.obj.nsorted++;
	}
	else
		pos = n;				/* unsorted tail */

	pairs[pos].key = key;
	pairs[pos].keylen = keylen;
	pairs[pos].value = child;
	obj->u.obj.n++;
	obj->u.obj.nlive++;

	if (pos >= obj->u.obj.nsorted)
	{
		int			tail = obj->u.obj.n - obj->u.obj.nsorted;

		if (obj->u.obj.index && tail * 2 <= obj->u.obj.indexsize)
			obj_index_add(obj, pos);
		else if (tail > OBJ_TAIL_SCAN_MAX)
			obj_index_build(obj);
	}
}

HxNode *
hx_object_remove(HxNode *obj, const char *key, int keylen)
{
	int			pos;
	HxNode	   *child;

	Assert(obj->kind == HX_OBJECT);
	pos = obj_find_pos(obj, key, keylen);
	if (pos < 0 || obj->u.obj.pairs[pos].value == NULL)
		return NULL;
	hx_tree_epoch++;
	child = obj->u.obj.pairs[pos].value;
	obj->u.obj.pairs[pos].value = NULL;
	obj->u.obj.nlive--;
	return child;
}

/*
 * Bring an object into jsonb key order with no removed members: sort the
 * unsorted tail and merge it into the sorted prefix, O(n + t log t).
 */
static void
obj_normalize(HxNode *obj)
{
	HxPair	   *pairs = obj->u.obj.pairs;
	HxPair	   *out;
	int			n = obj->u.obj.n;
	int			ns = obj->u.obj.nsorted;
	int			i,
				j,
				k;

	if (ns == n && obj->u.obj.nlive == n)
		return;

	if (ns < n)
		qsort(pairs + ns, n - ns, sizeof(HxPair), pair_cmp);

	out = alloc_huge(sizeof(HxPair) * Max(obj->u.obj.cap, 4));
	i = 0;
	j = ns;
	k = 0;
	while (i < ns || j < n)
	{
		HxPair	   *p;

		if (j >= n ||
			(i < ns && pair_cmp(&pairs[i], &pairs[j]) < 0))
			p = &pairs[i++];
		else
			p = &pairs[j++];
		if (p->value)
			out[k++] = *p;
	}
	pfree(pairs);
	obj->u.obj.pairs = out;
	obj->u.obj.n = obj->u.obj.nsorted = obj->u.obj.nlive = k;
	if (obj->u.obj.index)
		pfree(obj->u.obj.index);
	obj->u.obj.index = NULL;
	obj->u.obj.indexsize = 0;
}

/* ---------------------------------------------------------------------
 * Read-only access
 * ---------------------------------------------------------------------
 */

int
hx_node_size(const HxNode *n)
{
	switch (n->kind)
	{
		case HX_BINARY:
			return JsonContainerSize(n->u.bin.data);
		case HX_ARRAY:
			return n->u.arr.n;
		case HX_OBJECT:
			return n->u.obj.nlive;
		default:
			return 0;
	}
}

/* The member of an object node, or NULL; never unpacks n */
HxNode *
hx_node_get_member(HxNode *n, const char *key, int keylen)
{
	if (n->kind == HX_OBJECT)
	{
		HxNode	  **slot = hx_object_find(n, key, keylen);

		return slot ? *slot : NULL;
	}
	if (n->kind == HX_BINARY && JsonContainerIsObject(n->u.bin.data))
	{
		JsonbValue	v;

		if (!getKeyJsonValueFromContainer(n->u.bin.data, key, keylen, &v))
			return NULL;
		return hx_node_from_value(&v);
	}
	return NULL;
}

/* Element i of an array node (i must be in range); never unpacks n */
HxNode *
hx_node_get_elem(HxNode *n, int i)
{
	if (n->kind == HX_ARRAY)
		return n->u.arr.elems[i];
	else
	{
		JsonbValue *v;

		Assert(n->kind == HX_BINARY && JsonContainerIsArray(n->u.bin.data));
		v = getIthJsonbValueFromContainer(n->u.bin.data, i);
		return hx_node_from_value(v);
	}
}

/* ---------------------------------------------------------------------
 * Equality and hashing by JSON value
 *
 * Numbers compare numerically (1.0 equals 1), objects regardless of the
 * order in which their members were added.  Byte-identical containers are
 * recognised with one memcmp.
 * ---------------------------------------------------------------------
 */

bool
hx_scalar_equal(const JsonbValue *a, const JsonbValue *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type)
	{
		case jbvNull:
			return true;
		case jbvBool:
			return a->val.boolean == b->val.boolean;
		case jbvString:
			return a->val.string.len == b->val.string.len &&
				memcmp(a->val.string.val, b->val.string.val,
					   a->val.string.len) == 0;
		case jbvNumeric:
			if (VARSIZE_ANY(a->val.numeric) == VARSIZE_ANY(b->val.numeric) &&
				memcmp(a->val.numeric, b->val.numeric,
					   VARSIZE_ANY(a->val.numeric)) == 0)
				return true;
			return DatumGetBool(DirectFunctionCall2(numeric_eq,
													NumericGetDatum(a->val.numeric),
													NumericGetDatum(b->val.numeric)));
		default:
			elog(ERROR, "unexpected jsonb scalar type %d", (int) a->type);
	}
	return false;				/* keep compiler quiet */
}

/*
 * Equality of two on-disk containers.  Iterative, with its own stack, so
 * that documents nested deeper than the C stack allows still compare (as
 * they do with jsonb's "=").
 */
typedef struct EqFrame
{
	HxContainerIter a;
	HxContainerIter b;
	int			remaining;		/* children left to compare */
} EqFrame;

static void
eq_push(EqFrame **stack, int *depth, int *cap,
		JsonbContainer *a, JsonbContainer *b)
{
	EqFrame    *f;

	if (*depth == *cap)
	{
		*cap *= 2;
		*stack = repalloc(*stack, sizeof(EqFrame) * *cap);
	}
	f = &(*stack)[(*depth)++];
	hx_citer_init(&f->a, a, 0);
	hx_citer_init(&f->b, b, 0);
	f->remaining = JsonContainerSize(a) * (JsonContainerIsObject(a) ? 2 : 1);
}

bool
hx_container_equal(JsonbContainer *a, uint32 alen,
				   JsonbContainer *b, uint32 blen)
{
	EqFrame    *stack;
	int			depth = 0;
	int			cap = 16;
	bool		equal = true;
	uint32		steps = 0;

	if (alen == blen && memcmp(a, b, alen) == 0)
		return true;
	if (a->header != b->header)
		return false;			/* kind or size differ */

	stack = palloc(sizeof(EqFrame) * cap);
	eq_push(&stack, &depth, &cap, a, b);
	while (depth > 0 && equal)
	{
		EqFrame    *f = &stack[depth - 1];
		JsonbValue	va;
		JsonbValue	vb;

		if (f->remaining == 0)
		{
			depth--;
			continue;
		}
		f->remaining--;
		if ((++steps & 4095) == 0)
			CHECK_FOR_INTERRUPTS();

		hx_citer_next(&f->a, &va);
		hx_citer_next(&f->b, &vb);
		if (va.type != vb.type)
			equal = false;
		else if (va.type != jbvBinary)
			equal = hx_scalar_equal(&va, &vb);
		else if (va.val.binary.len == vb.val.binary.len &&
				 memcmp(va.val.binary.data, vb.val.binary.data,
						va.val.binary.len) == 0)
			continue;
		else if (va.val.binary.data->header != vb.val.binary.data->header)
			equal = false;
		else
			eq_push(&stack, &depth, &cap,
					va.val.binary.data, vb.val.binary.data);
	}
	pfree(stack);
	return equal;
}

bool
hx_node_equal(HxNode *a, HxNode *b)
{
	HxShape		shape;
	int			n;
	int			i;

	check_stack_depth();

	if (a->kind == HX_BINARY && b->kind == HX_BINARY)
		return hx_container_equal(a->u.bin.data, a->u.bin.len,
								  b->u.bin.data, b->u.bin.len);
	shape = hx_node_shape(a);
	if (shape != hx_node_shape(b))
		return false;
	if (shape != HXS_ARRAY && shape != HXS_OBJECT)
		return hx_scalar_equal(&a->u.scalar, &b->u.scalar);

	n = hx_node_size(a);
	if (n != hx_node_size(b))
		return false;

	/* at least one side is unpacked; walk that one */
	if (a->kind == HX_BINARY)
	{
		HxNode	   *t = a;

		a = b;
		b = t;
	}
	if (shape == HXS_ARRAY)
	{
		for (i = 0; i < n; i++)
		{
			if (!hx_node_equal(a->u.arr.elems[i], hx_node_get_elem(b, i)))
				return false;
		}
	}
	else
	{
		for (i = 0; i < a->u.obj.n; i++)
		{
			HxPair	   *p = &a->u.obj.pairs[i];
			HxNode	   *bm;

			if (p->value == NULL)
				continue;
			bm = hx_node_get_member(b, p->key, p->keylen);
			if (bm == NULL || !hx_node_equal(p->value, bm))
				return false;
		}
	}
	return true;
}

static uint32
scalar_hash(const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return 0x2f6b1d3au;
		case jbvBool:
			return v->val.boolean ? 0x6c8e9cf5u : 0x1b873593u;
		case jbvString:
			return hash_bytes((const unsigned char *) v->val.string.val,
							  v->val.string.len);
		case jbvNumeric:
			/* hash_numeric gives equal numbers equal hashes, as 1.0 and 1 */
			return DatumGetUInt32(DirectFunctionCall1(hash_numeric,
													  NumericGetDatum(v->val.numeric)));
		default:
			elog(ERROR, "unexpected jsonb scalar type %d", (int) v->type);
	}
	return 0;					/* keep compiler quiet */
}

#define HASH_ARRAY_SEED		0x9e3779b9u
#define HASH_OBJECT_SEED	0x85ebca6bu

/*
 * Hashes look this deep into a value and no deeper: a deeper container
 * hashes by its kind and size alone.  Equal values still hash equal, and
 * equality (which is iterative) settles collisions, so values nested as
 * deep as jsonb allows can be hashed without deep recursion.
 */
#define HASH_MAX_DEPTH		32

static uint32
container_hash(JsonbContainer *c, int depth)
{
	HxContainerIter it;
	HxContainerIter vit;
	int			count = JsonContainerSize(c);
	uint32		h;
	int			i;

	check_stack_depth();

	if (JsonContainerIsArray(c))
	{
		h = HASH_ARRAY_SEED ^ count;
		if (depth >= HASH_MAX_DEPTH)
			return h;
		hx_citer_init(&it, c, 0);
		for (i = 0; i < count; i++)
		{
			JsonbValue	v;

			hx_citer_next(&it, &v);
			h = hash_combine(h, v.type == jbvBinary ?
							 container_hash(v.val.binary.data, depth + 1) :
							 scalar_hash(&v));
		}
	}
	else
	{
		h = HASH_OBJECT_SEED ^ count;
		if (depth >= HASH_MAX_DEPTH)
			return h;
		hx_citer_init(&it, c, 0);
		hx_citer_init(&vit, c, count);
		for (i = 0; i < count; i++)
		{
			JsonbValue	k;
			JsonbValue	v;

			hx_citer_next(&it, &k);
			hx_citer_next(&vit, &v);
			h += hash_combine(scalar_hash(&k), v.type == jbvBinary ?
							  container_hash(v.val.binary.data, depth + 1) :
							  scalar_hash(&v));
		}
	}
	return h;
}

static uint32
node_hash(HxNode *n, int depth)
{
	uint32		h;
	int			i;

	check_stack_depth();

	switch (n->kind)
	{
		case HX_SCALAR:
			return scalar_hash(&n->u.scalar);
		case HX_BINARY:
			return container_hash(n->u.bin.data, depth);
		case HX_ARRAY:
			h = HASH_ARRAY_SEED ^ n->u.arr.n;
			if (depth >= HASH_MAX_DEPTH)
				return h;
			for (i = 0; i < n->u.arr.n; i++)
				h = hash_combine(h, node_hash(n->u.arr.elems[i], depth + 1));
			return h;
		case HX_OBJECT:
			h = HASH_OBJECT_SEED ^ n->u.obj.nlive;
			if (depth >= HASH_MAX_DEPTH)
				return h;
			for (i = 0; i < n->u.obj.n; i++)
			{
				HxPair	   *p = &n->u.obj.pairs[i];

				if (p->value)
					h += hash_combine(hash_bytes((const unsigned char *) p->key,
												 p->keylen),
									  node_hash(p->value, depth + 1));
			}
			return h;
	}
	return 0;					/* keep compiler quiet */
}

/* A hash consistent with hx_node_equal */
uint32
hx_node_hash(HxNode *n)
{
	return node_hash(n, 0);
}

/* ---------------------------------------------------------------------
 * The encoder
 * ---------------------------------------------------------------------
 */

/* Room for n more bytes; the common case stays inline */
static inline void
buf_room(StringInfo buf, int n)
{
	if (buf->len + n >= buf->maxlen)
		enlargeStringInfo(buf, n);
}

/* Append n bytes without the trailing NUL that appendBinaryStringInfo adds */
static inline void
buf_append(StringInfo buf, const void *data, int n)
{
	buf_room(buf, n);
	memcpy(buf->data + buf->len, data, n);
	buf->len += n;
}

static inline int
buf_reserve(StringInfo buf, int n)
{
	int			offset = buf->len;

	buf_room(buf, n);
	buf->len += n;
	return offset;
}

static inline int
buf_pad_to_int(StringInfo buf)
{
	int			padlen = INTALIGN(buf->len) - buf->len;

	if (padlen > 0)
	{
		buf_room(buf, padlen);
		memset(buf->data + buf->len, 0, padlen);
		buf->len += padlen;
	}
	return padlen;
}

static inline void
check_container_len(uint32 totallen)
{
	if (totallen > JENTRY_OFFLENMASK)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("total size of jsonb container exceeds the maximum of %u bytes",
						JENTRY_OFFLENMASK)));
}

static JEntry encode_node(StringInfo buf, HxNode *n);

static JEntry
encode_scalar(StringInfo buf, const JsonbValue *v)
{
	int			numlen;
	int			padlen;

	switch (v->type)
	{
		case jbvNull:
			return JENTRY_ISNULL;
		case jbvBool:
			return v->val.boolean ? JENTRY_ISBOOL_TRUE : JENTRY_ISBOOL_FALSE;
		case jbvString:
			check_container_len(v->val.string.len);
			buf_append(buf, v->val.string.val, v->val.string.len);
			return JENTRY_ISSTRING | v->val.string.len;
		case jbvNumeric:
			numlen = VARSIZE_ANY(v->val.numeric);
			padlen = buf_pad_to_int(buf);
			buf_append(buf, v->val.numeric, numlen);
			return JENTRY_ISNUMERIC | (padlen + numlen);
		default:
			elog(ERROR, "unexpected jsonb scalar type %d", (int) v->type);
	}
	return 0;					/* keep compiler quiet */
}

/* Store child i's JEntry, turning every JB_OFFSET_STRIDE'th into an offset */
static inline void
store_jentry(StringInfo buf, int jentry_offset, int i, JEntry meta,
			 uint32 *totallen)
{
	*totallen += JBE_OFFLENFLD(meta);
	check_container_len(*totallen);
	if ((i % JB_OFFSET_STRIDE) == 0)
		meta = (meta & JENTRY_TYPEMASK) | *totallen | JENTRY_HAS_OFF;
	memcpy(buf->data + jentry_offset + i * sizeof(JEntry), &meta, sizeof(JEntry));
}

static JEntry
encode_array(StringInfo buf, HxNode **elems, int n, bool rawscalar)
{
	int			base_offset = buf->len;
	int			jentry_offset;
	uint32		header = n | JB_FARRAY;
	uint32		totallen = 0;
	int			i;

	buf_pad_to_int(buf);
	if (rawscalar)
		header |= JB_FSCALAR;
	buf_append(buf, &header, sizeof(uint32));
	jentry_offset = buf_reserve(buf, sizeof(JEntry) * n);

	for (i = 0; i < n; i++)
	{
		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		store_jentry(buf, jentry_offset, i, encode_node(buf, elems[i]),
					 &totallen);
	}

	totallen = buf->len - base_offset;
	check_container_len(totallen);
	return JENTRY_ISCONTAINER | totallen;
}

static JEntry
encode_object(StringInfo buf, HxNode *obj)
{
	int			base_offset = buf->len;
	int			jentry_offset;
	uint32		header;
	uint32		totallen = 0;
	HxPair	   *pairs;
	int			n;
	int			i;

	obj_normalize(obj);
	pairs = obj->u.obj.pairs;
	n = obj->u.obj.n;

	buf_pad_to_int(buf);
	header = n | JB_FOBJECT;
	buf_append(buf, &header, sizeof(uint32));
	jentry_offset = buf_reserve(buf, sizeof(JEntry) * n * 2);

	for (i = 0; i < n; i++)
	{
		check_container_len(pairs[i].keylen);
		buf_append(buf, pairs[i].key, pairs[i].keylen);
		store_jentry(buf, jentry_offset, i,
					 JENTRY_ISSTRING | pairs[i].keylen, &totallen);
	}
	for (i = 0; i < n; i++)
	{
		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		store_jentry(buf, jentry_offset, n + i,
					 encode_node(buf, pairs[i].value), &totallen);
	}

	totallen = buf->len - base_offset;
	check_container_len(totallen);
	return JENTRY_ISCONTAINER | totallen;
}

static JEntry
encode_node(StringInfo buf, HxNode *n)
{
	int			padlen;

	check_stack_depth();

	switch (n->kind)
	{
		case HX_SCALAR:
			return encode_scalar(buf, &n->u.scalar);
		case HX_BINARY:
			padlen = buf_pad_to_int(buf);
			buf_append(buf, n->u.bin.data, n->u.bin.len);
			return JENTRY_ISCONTAINER | (padlen + n->u.bin.len);
		case HX_ARRAY:
			return encode_array(buf, n->u.arr.elems, n->u.arr.n, false);
		case HX_OBJECT:
			return encode_object(buf, n);
	}
	return 0;					/* keep compiler quiet */
}

/*
 * Encode a tree as a jsonb datum allocated in resultcxt; the work of
 * normalizing objects is done in the current context.  estimate is the
 * expected size: a good one saves the buffer's regrowth.
 */
Jsonb *
hx_node_to_jsonb(HxNode *root, Size estimate, MemoryContext resultcxt)
{
	StringInfoData buf;
	MemoryContext oldcxt;

	/* the buffer lives in resultcxt; repalloc keeps it there */
	oldcxt = MemoryContextSwitchTo(resultcxt);
	initStringInfo(&buf);
	MemoryContextSwitchTo(oldcxt);

	estimate = Min(estimate + 64, MaxAllocSize - 1024);
	if (estimate > (Size) buf.maxlen)
		enlargeStringInfo(&buf, (int) estimate);

	buf_reserve(&buf, VARHDRSZ);
	if (root->kind == HX_SCALAR)
		(void) encode_array(&buf, &root, 1, true);
	else
		(void) encode_node(&buf, root);

	SET_VARSIZE(buf.data, buf.len);
	return (Jsonb *) buf.data;
}
