/*-------------------------------------------------------------------------
 *
 * tree.c
 *	  The lazily unpacked jsonb tree (see tree.h): reading on-disk
 *	  containers, making and unpacking nodes, and editing arrays and
 *	  objects.
 *
 * Unpacking follows jsonb's on-disk format (utils/jsonb.h): a container is
 * a header word (count and kind), one JEntry per child (every
 * JB_OFFSET_STRIDE'th one holding an offset, the others a length; objects
 * list all keys, then all values), then the children's data, with
 * numerics and containers aligned to 4 bytes.  A child that is itself a
 * container stays on disk (HX_BINARY) until an operation descends into it.
 *
 * src/tree.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "tree.h"

/* Below this many members an object is kept sorted on every insert */
#define OBJ_SORTED_INSERT_MAX	32
/* Unsorted tails longer than this get a hash index */
#define OBJ_TAIL_SCAN_MAX		8
/* Unpacking checks for interrupts once per this many children */
#define EXPAND_INTERRUPT_STRIDE	4096

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

/* The root of a jsonb datum as a JsonbValue (a raw scalar unwrapped) */
void
hx_jsonb_root_value(Jsonb *jb, JsonbValue *v)
{
	if (JB_ROOT_IS_SCALAR(jb))
	{
		HxContainerIter it;

		hx_citer_init(&it, &jb->root, 0);
		hx_citer_next(&it, v);
	}
	else
	{
		v->type = jbvBinary;
		v->val.binary.data = &jb->root;
		v->val.binary.len = VARSIZE(jb) - VARHDRSZ;
	}
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
	n->u.arr.edits = 0;
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

HxNode *
hx_node_new_null(void)
{
	HxNode	   *n = palloc(sizeof(HxNode));

	n->kind = HX_SCALAR;
	n->u.scalar.type = jbvNull;
	return n;
}

/*
 * A node whose children are those of parts[0..nparts), on-disk arrays (or
 * objects whose keys are in key order across them), which must outlive it
 */
HxNode *
hx_node_new_spliced(bool object, JsonbContainer **parts, int nparts)
{
	HxNode	   *n = palloc(sizeof(HxNode));
	int			i;

	n->kind = HX_SPLICED;
	n->u.spl.parts = parts;
	n->u.spl.lazy = NULL;
	n->u.spl.rawlens = NULL;
	n->u.spl.counts = NULL;
	n->u.spl.load = NULL;
	n->u.spl.nparts = nparts;
	n->u.spl.object = object;
	n->u.spl.n = 0;
	for (i = 0; i < nparts; i++)
	{
		Assert(JsonContainerIsObject(parts[i]) == object);
		n->u.spl.n += JsonContainerSize(parts[i]);
	}
	if (object && n->u.spl.n > (int) JB_CMASK)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("number of jsonb object pairs exceeds the maximum allowed (%zu)",
						(size_t) JB_CMASK)));
	if (!object && n->u.spl.n > (int) JB_CMASK)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("number of jsonb array elements exceeds the maximum allowed (%zu)",
						(size_t) JB_CMASK)));
	return n;
}

/*
 * An array node whose parts are parts[i], or when that is NULL the array
 * that load(lazy[i]) gives, of rawlens[i] bytes and counts[i] elements;
 * the arrays must outlive it
 */
HxNode *
hx_node_new_spliced_lazy(JsonbContainer **parts, void **lazy,
						 const int32 *rawlens, const int32 *counts,
						 int nparts, HxPartLoad load)
{
	HxNode	   *n = palloc(sizeof(HxNode));
	int64		total = 0;
	int			i;

	n->kind = HX_SPLICED;
	n->u.spl.parts = parts;
	n->u.spl.lazy = lazy;
	n->u.spl.rawlens = rawlens;
	n->u.spl.counts = counts;
	n->u.spl.load = load;
	n->u.spl.nparts = nparts;
	n->u.spl.object = false;
	for (i = 0; i < nparts; i++)
	{
		Assert(parts[i] != NULL || (counts[i] >= 0 && rawlens[i] >= (int32) (VARHDRSZ + sizeof(uint32))));
		total += parts[i] ? (int64) JsonContainerSize(parts[i]) : (int64) counts[i];
	}
	if (total > (int64) JB_CMASK)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("number of jsonb array elements exceeds the maximum allowed (%zu)",
						(size_t) JB_CMASK)));
	n->u.spl.n = (int) total;
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
		case HX_SPLICED:
			return n->u.spl.object ? HXS_OBJECT : HXS_ARRAY;
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

/* The JSON type of a JsonbValue, as messages name it */
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

	if (n->kind == HX_SPLICED)
		elog(ERROR, "a spliced node cannot be unpacked");
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

			if ((i % EXPAND_INTERRUPT_STRIDE) == 0)
				CHECK_FOR_INTERRUPTS();
			hx_citer_next(&it, &v);
			node_set_value(&block[i], &v);
			elems[i] = &block[i];
		}
		n->kind = HX_ARRAY;
		n->u.arr.elems = elems;
		n->u.arr.n = count;
		n->u.arr.cap = cap;
		n->u.arr.edits = 0;
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

			if ((i % EXPAND_INTERRUPT_STRIDE) == 0)
				CHECK_FOR_INTERRUPTS();
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
	if (i < arr->u.arr.n)
		arr->u.arr.edits++;		/* elements move: not an append */
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
	arr->u.arr.edits++;
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
	arr->u.arr.edits++;
	child = arr->u.arr.elems[i];
	memmove(&arr->u.arr.elems[i], &arr->u.arr.elems[i + 1],
			sizeof(HxNode *) * (arr->u.arr.n - i - 1));
	arr->u.arr.n--;
	return child;
}

/*
 * Keep only the elements for which keep[i] is true, in order, in one pass
 * (keep NULL keeps none: the array becomes empty).
 */
void
hx_array_retain(HxNode *arr, const bool *keep)
{
	int			i;
	int			n = 0;

	Assert(arr->kind == HX_ARRAY);
	for (i = 0; i < arr->u.arr.n; i++)
	{
		if (keep && keep[i])
			arr->u.arr.elems[n++] = arr->u.arr.elems[i];
	}
	if (n != arr->u.arr.n)
		arr->u.arr.edits++;
	arr->u.arr.n = n;
}

/*
 * Element i, to be edited in place (or below): from here on the array's
 * edits counter says that its elements may have changed.
 */
HxNode *
hx_array_edit_elem(HxNode *arr, int i)
{
	Assert(arr->kind == HX_ARRAY);
	Assert(i >= 0 && i < arr->u.arr.n);
	arr->u.arr.edits++;
	return arr->u.arr.elems[i];
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
	child = obj->u.obj.pairs[pos].value;
	obj->u.obj.pairs[pos].value = NULL;
	obj->u.obj.nlive--;
	return child;
}

/*
 * Bring an object into jsonb key order with no removed members: sort the
 * unsorted tail and merge it into the sorted prefix, O(n + t log t).
 */
void
hx_object_normalize(HxNode *obj)
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
		case HX_SPLICED:
			return n->u.spl.n;
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

