/*-------------------------------------------------------------------------
 *
 * equal.c
 *	  Equality and hashing of JSON values, as jsonb's "=" defines equality:
 *	  numbers compare numerically (1.0 equals 1), objects regardless of
 *	  the order in which their members were added, strings and keys
 *	  bytewise.  hx_patch's and hx_merge's "test", hx_merge's "union" and
 *	  "upsert", the guards and hx_diff use them.
 *
 * Byte-identical on-disk containers are recognised with one memcmp, and
 * equality of on-disk containers is iterative, with its own stack, so that
 * documents nested deeper than the C stack allows still compare.  A hash
 * is consistent with equality: equal values hash equal.
 *
 * src/equal.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"

#include "tree.h"

/* Equality of on-disk containers checks for interrupts this often */
#define EQUAL_INTERRUPT_STRIDE	4096

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
		if ((++steps % EQUAL_INTERRUPT_STRIDE) == 0)
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
			if ((i % EQUAL_INTERRUPT_STRIDE) == 0)
				CHECK_FOR_INTERRUPTS();
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

			if ((i % EQUAL_INTERRUPT_STRIDE) == 0)
				CHECK_FOR_INTERRUPTS();
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
 * Hashing walks the whole value, depth first, with its own stack of the
 * containers it is inside of: a value nested as deep as jsonb allows is
 * hashed without deep recursion, and values that differ only far down
 * still hash apart (a union of many such values stays linear).
 *
 * An array's hash folds its elements' in order; an object's adds up its
 * members', so that the order in which members were added (an unpacked
 * object keeps them unsorted) does not change it.
 */
typedef struct HashFrame
{
	HxNode	   *node;			/* an unpacked container; NULL: on disk */
	bool		isobj;
	int			next;			/* the next child to read */
	int			count;			/* children (pairs, slots for HxNode) */
	HxContainerIter it;			/* on disk: the keys, or the elements */
	HxContainerIter vit;		/* on disk: an object's values */
	uint32		h;				/* the hash so far */
	uint32		keyhash;		/* the member being hashed: its key's */
} HashFrame;

#define HASH_FRAMES_ON_STACK	8

static void
frame_init_binary(HashFrame *f, JsonbContainer *c)
{
	f->node = NULL;
	f->isobj = JsonContainerIsObject(c);
	f->next = 0;
	f->count = JsonContainerSize(c);
	f->h = (f->isobj ? HASH_OBJECT_SEED : HASH_ARRAY_SEED) ^ f->count;
	f->keyhash = 0;
	hx_citer_init(&f->it, c, 0);
	if (f->isobj)
		hx_citer_init(&f->vit, c, f->count);
}

static void
frame_init_node(HashFrame *f, HxNode *n)
{
	f->node = n;
	f->next = 0;
	f->keyhash = 0;
	if (n->kind == HX_ARRAY)
	{
		f->isobj = false;
		f->count = n->u.arr.n;
		f->h = HASH_ARRAY_SEED ^ n->u.arr.n;
	}
	else
	{
		Assert(n->kind == HX_OBJECT);
		f->isobj = true;
		f->count = n->u.obj.n;
		f->h = HASH_OBJECT_SEED ^ n->u.obj.nlive;
	}
}

/*
 * Read the next child of frame f (there is one: f->next < f->count).  A
 * scalar: its hash in *hash, and true.  A container: false, with it in
 * *node or *bin, to descend into.  A deleted member of an unpacked
 * object: true with *skip set.
 */
static bool
frame_next(HashFrame *f, uint32 *hash, HxNode **node, JsonbContainer **bin,
		   bool *skip)
{
	*skip = false;
	*node = NULL;
	*bin = NULL;
	if (f->node == NULL)
	{
		JsonbValue	v;

		if (f->isobj)
		{
			JsonbValue	k;

			hx_citer_next(&f->it, &k);
			f->keyhash = scalar_hash(&k);
			hx_citer_next(&f->vit, &v);
		}
		else
			hx_citer_next(&f->it, &v);
		f->next++;
		if (v.type == jbvBinary)
		{
			*bin = v.val.binary.data;
			return false;
		}
		*hash = scalar_hash(&v);
		return true;
	}
	else
	{
		HxNode	   *child;

		if (f->isobj)
		{
			HxPair	   *p = &f->node->u.obj.pairs[f->next++];

			if (p->value == NULL)
			{
				*skip = true;	/* a deleted member */
				return true;
			}
			f->keyhash = hash_bytes((const unsigned char *) p->key, p->keylen);
			child = p->value;
		}
		else
			child = f->node->u.arr.elems[f->next++];
		switch (child->kind)
		{
			case HX_SCALAR:
				*hash = scalar_hash(&child->u.scalar);
				return true;
			case HX_BINARY:
				*bin = child->u.bin.data;
				return false;
			default:
				*node = child;
				return false;
		}
	}
}

/* A hash consistent with hx_node_equal */
uint32
hx_node_hash(HxNode *n)
{
	HashFrame	local[HASH_FRAMES_ON_STACK];
	HashFrame  *stack = local;
	int			size = HASH_FRAMES_ON_STACK;
	int			depth = 1;
	uint64		steps = 0;

	if (n->kind == HX_SCALAR)
		return scalar_hash(&n->u.scalar);
	if (n->kind == HX_BINARY)
		frame_init_binary(&stack[0], n->u.bin.data);
	else
		frame_init_node(&stack[0], n);

	for (;;)
	{
		HashFrame  *f = &stack[depth - 1];
		uint32		hash;
		HxNode	   *cnode;
		JsonbContainer *cbin;
		bool		skip;

		if (f->next >= f->count)
		{
			/* f is done: fold its hash into its parent's */
			hash = f->h;
			if (--depth == 0)
			{
				if (stack != local)
					pfree(stack);
				return hash;
			}
			f = &stack[depth - 1];
		}
		else
		{
			if ((++steps % EQUAL_INTERRUPT_STRIDE) == 0)
				CHECK_FOR_INTERRUPTS();
			if (!frame_next(f, &hash, &cnode, &cbin, &skip))
			{
				/* descend */
				if (depth == size)
				{
					if (stack == local)
					{
						stack = palloc(sizeof(HashFrame) * size * 2);
						memcpy(stack, local, sizeof(HashFrame) * size);
					}
					else
						stack = repalloc(stack, sizeof(HashFrame) * size * 2);
					size *= 2;
				}
				if (cbin)
					frame_init_binary(&stack[depth], cbin);
				else
					frame_init_node(&stack[depth], cnode);
				depth++;
				continue;
			}
			if (skip)
				continue;
		}
		if (f->isobj)
			f->h += hash_combine(f->keyhash, hash);
		else
			f->h = hash_combine(f->h, hash);
	}
}

