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

			if ((i % EQUAL_INTERRUPT_STRIDE) == 0)
				CHECK_FOR_INTERRUPTS();
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

			if ((i % EQUAL_INTERRUPT_STRIDE) == 0)
				CHECK_FOR_INTERRUPTS();
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

