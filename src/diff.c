/*-------------------------------------------------------------------------
 *
 * diff.c
 *	  hx_diff(old jsonb, new jsonb, arrays text) -> jsonb: the RFC 6902
 *	  patch P with hx_patch(old, P) = new.
 *
 * Objects are compared key by key, walking both in jsonb's key order (a
 * merge join): a key only in old gives "remove", a key only in new gives
 * "add", a key in both recurses when both values are objects and gives
 * "replace" when they differ.  Arrays follow the arrays mode:
 *
 *	append	new is old plus items at the end: one "add /path/-" per item,
 *			so that deltas from parallel writers compose (each writer's
 *			appends stay appends); any other change replaces the array
 *	replace	any change replaces the array
 *	index	element by element: replace or recurse per index, "add" at
 *			the tail for new elements, "remove" from the end for old ones
 *
 * Cost is linear: there is no edit-distance search, and a subtree that is
 * byte-identical in both documents (as everything hx_merge did not touch
 * is) is recognised with one memcmp and skipped.  Values in the patch are
 * the new document's bytes, copied, never re-encoded.
 *
 * Ops come out in a deterministic order: depth first, members in jsonb's
 * key order, array elements by index (removals from the end first).
 *
 * src/diff.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "diff.h"
#include "pointer.h"

/*
 * Below this depth a differing subtree is replaced whole instead of being
 * descended into: the patch stays valid and the output deterministic, and
 * documents nested as deep as jsonb allows diff without running out of
 * stack.  Agent states are nowhere near it.
 */
#define HX_DIFF_MAX_DEPTH	1024

typedef struct DiffState
{
	HxNode	   *ops;			/* the patch being built: an array of ops */
	StringInfoData path;		/* pointer of the values being compared */
	HxArrayMode mode;
	int			depth;			/* of the values being compared */
	uint32		steps;
} DiffState;

static void diff_values(DiffState *st, JsonbValue *a, JsonbValue *b);

HxArrayMode
hx_parse_array_mode(const char *s)
{
	if (strcmp(s, "append") == 0)
		return HX_ARRAYS_APPEND;
	if (strcmp(s, "replace") == 0)
		return HX_ARRAYS_REPLACE;
	if (strcmp(s, "index") == 0)
		return HX_ARRAYS_INDEX;
	ereport(ERROR,
			(errcode(ERRCODE_HX_MALFORMED),
			 errmsg("unrecognized arrays mode \"%s\"", s),
			 errhint("The arrays mode must be append, replace or index.")));
	return HX_ARRAYS_APPEND;	/* keep compiler quiet */
}

/* Emit {"op": opname, "path": <current path + suffix>, "value": value} */
static void
emit(DiffState *st, const char *opname, const char *suffix, JsonbValue *value)
{
	HxNode	   *op = hx_node_new_object(3);
	int			len = st->path.len + (suffix ? strlen(suffix) : 0);
	char	   *path = palloc(len + 1);

	memcpy(path, st->path.data, st->path.len);
	if (suffix)
		strcpy(path + st->path.len, suffix);
	path[len] = '\0';

	/* inserted in jsonb key order, so the object stays sorted */
	hx_object_set(op, "op", 2, hx_node_new_string(opname, strlen(opname)));
	hx_object_set(op, "path", 4, hx_node_new_string(path, len));
	if (value)
		hx_object_set(op, "value", 5, hx_node_from_value(value));
	hx_array_append(st->ops, op);
}

static inline int
path_push_key(DiffState *st, const char *key, int keylen)
{
	int			saved = st->path.len;

	appendStringInfoChar(&st->path, '/');
	hx_pointer_append_escaped(&st->path, key, keylen);
	return saved;
}

static inline int
path_push_index(DiffState *st, int i)
{
	int			saved = st->path.len;

	appendStringInfo(&st->path, "/%d", i);
	return saved;
}

static inline void
path_pop(DiffState *st, int saved)
{
	st->path.len = saved;
	st->path.data[saved] = '\0';
}

static inline void
tick(DiffState *st)
{
	if ((++st->steps & 1023) == 0)
		CHECK_FOR_INTERRUPTS();
}

static bool
values_equal(JsonbValue *a, JsonbValue *b)
{
	if (a->type != b->type)
		return false;
	if (a->type == jbvBinary)
		return hx_container_equal(a->val.binary.data, a->val.binary.len,
								  b->val.binary.data, b->val.binary.len);
	return hx_scalar_equal(a, b);
}

static void
diff_objects(DiffState *st, JsonbContainer *a, JsonbContainer *b)
{
	int			na = JsonContainerSize(a);
	int			nb = JsonContainerSize(b);
	HxContainerIter ak,
				av,
				bk,
				bv;
	JsonbValue	ka,
				va,
				kb,
				vb;
	int			i = 0;
	int			j = 0;

	hx_citer_init(&ak, a, 0);
	hx_citer_init(&av, a, na);
	hx_citer_init(&bk, b, 0);
	hx_citer_init(&bv, b, nb);
	if (na > 0)
	{
		hx_citer_next(&ak, &ka);
		hx_citer_next(&av, &va);
	}
	if (nb > 0)
	{
		hx_citer_next(&bk, &kb);
		hx_citer_next(&bv, &vb);
	}

	while (i < na || j < nb)
	{
		int			cmp;
		int			saved;

		tick(st);
		if (i >= na)
			cmp = 1;
		else if (j >= nb)
			cmp = -1;
		else
			cmp = hx_key_compare(ka.val.string.val, ka.val.string.len,
								 kb.val.string.val, kb.val.string.len);

		if (cmp < 0)
		{
			saved = path_push_key(st, ka.val.string.val, ka.val.string.len);
			emit(st, "remove", NULL, NULL);
			path_pop(st, saved);
		}
		else if (cmp > 0)
		{
			saved = path_push_key(st, kb.val.string.val, kb.val.string.len);
			emit(st, "add", NULL, &vb);
			path_pop(st, saved);
		}
		else
		{
			saved = path_push_key(st, ka.val.string.val, ka.val.string.len);
			diff_values(st, &va, &vb);
			path_pop(st, saved);
		}

		if (cmp <= 0 && ++i < na)
		{
			hx_citer_next(&ak, &ka);
			hx_citer_next(&av, &va);
		}
		if (cmp >= 0 && ++j < nb)
		{
			hx_citer_next(&bk, &kb);
			hx_citer_next(&bv, &vb);
		}
	}
}

/*
 * Are the first n elements of arrays a and b equal?  When their JEntries
 * and data are byte-identical (an untouched prefix) one memcmp says so.
 */
static bool
array_prefix_equal(DiffState *st, JsonbContainer *a, JsonbContainer *b, int n)
{
	HxContainerIter ia;
	HxContainerIter ib;
	int			i;

	if (n == 0)
		return true;
	if (memcmp(a->children, b->children, sizeof(JEntry) * n) == 0)
	{
		char	   *da = (char *) &a->children[JsonContainerSize(a)];
		char	   *db = (char *) &b->children[JsonContainerSize(b)];
		uint32		end = getJsonbOffset(a, n - 1) + getJsonbLength(a, n - 1);

		if (memcmp(da, db, end) == 0)
			return true;
	}
	hx_citer_init(&ia, a, 0);
	hx_citer_init(&ib, b, 0);
	for (i = 0; i < n; i++)
	{
		JsonbValue	va;
		JsonbValue	vb;

		tick(st);
		hx_citer_next(&ia, &va);
		hx_citer_next(&ib, &vb);
		if (!values_equal(&va, &vb))
			return false;
	}
	return true;
}

static void
replace_whole(DiffState *st, JsonbContainer *b, uint32 blen)
{
	JsonbValue	v;

	v.type = jbvBinary;
	v.val.binary.data = b;
	v.val.binary.len = blen;
	emit(st, "replace", NULL, &v);
}

static void
diff_arrays(DiffState *st, JsonbContainer *a, uint32 alen,
			JsonbContainer *b, uint32 blen)
{
	int			na = JsonContainerSize(a);
	int			nb = JsonContainerSize(b);
	HxContainerIter ia;
	HxContainerIter ib;
	int			i;

	switch (st->mode)
	{
		case HX_ARRAYS_REPLACE:
			if (!hx_container_equal(a, alen, b, blen))
				replace_whole(st, b, blen);
			break;

		case HX_ARRAYS_APPEND:
			if (nb >= na && array_prefix_equal(st, a, b, na))
			{
				hx_citer_init(&ib, b, na);
				for (i = na; i < nb; i++)
				{
					JsonbValue	vb;

					tick(st);
					hx_citer_next(&ib, &vb);
					emit(st, "add", "/-", &vb);
				}
			}
			else
				replace_whole(st, b, blen);
			break;

		case HX_ARRAYS_INDEX:
			hx_citer_init(&ia, a, 0);
			hx_citer_init(&ib, b, 0);
			for (i = 0; i < Min(na, nb); i++)
			{
				JsonbValue	va;
				JsonbValue	vb;
				int			saved;

				hx_citer_next(&ia, &va);
				hx_citer_next(&ib, &vb);
				saved = path_push_index(st, i);
				diff_values(st, &va, &vb);
				path_pop(st, saved);
			}
			for (i = na; i < nb; i++)
			{
				JsonbValue	vb;

				tick(st);
				hx_citer_next(&ib, &vb);
				emit(st, "add", "/-", &vb);
			}
			for (i = na - 1; i >= nb; i--)
			{
				int			saved = path_push_index(st, i);

				tick(st);
				emit(st, "remove", NULL, NULL);
				path_pop(st, saved);
			}
			break;
	}
}

static void
diff_values(DiffState *st, JsonbValue *a, JsonbValue *b)
{
	check_stack_depth();
	tick(st);

	if (a->type == jbvBinary && b->type == jbvBinary)
	{
		JsonbContainer *ca = a->val.binary.data;
		JsonbContainer *cb = b->val.binary.data;

		/* identical subtrees: one memcmp */
		if (a->val.binary.len == b->val.binary.len &&
			memcmp(ca, cb, a->val.binary.len) == 0)
			return;
		if (st->depth >= HX_DIFF_MAX_DEPTH)
		{
			if (!hx_container_equal(ca, a->val.binary.len, cb, b->val.binary.len))
				emit(st, "replace", NULL, b);
			return;
		}
		st->depth++;
		if (JsonContainerIsObject(ca) && JsonContainerIsObject(cb))
			diff_objects(st, ca, cb);
		else if (JsonContainerIsArray(ca) && JsonContainerIsArray(cb))
			diff_arrays(st, ca, a->val.binary.len, cb, b->val.binary.len);
		else
			emit(st, "replace", NULL, b);
		st->depth--;
		return;
	}
	else if (a->type == b->type && hx_scalar_equal(a, b))
		return;
	emit(st, "replace", NULL, b);
}

/*
 * The patch from oldjb to newjb, as an array node in the current memory
 * context; its values point into newjb.  Used by hx_diff and hx_stream.
 */
HxNode *
hx_diff_nodes(Jsonb *oldjb, Jsonb *newjb, HxArrayMode mode)
{
	DiffState	st;
	JsonbValue	a;
	JsonbValue	b;

	st.ops = hx_node_new_array(8);
	initStringInfo(&st.path);
	st.mode = mode;
	st.depth = 0;
	st.steps = 0;

	hx_jsonb_root_value(oldjb, &a);
	hx_jsonb_root_value(newjb, &b);
	diff_values(&st, &a, &b);
	return st.ops;
}

PG_FUNCTION_INFO_V1(hx_diff);

Datum
hx_diff(PG_FUNCTION_ARGS)
{
	Jsonb	   *oldjb = hx_detoast_jsonb(PG_GETARG_DATUM(0));
	Jsonb	   *newjb = hx_detoast_jsonb(PG_GETARG_DATUM(1));
	char	   *modename = text_to_cstring(PG_GETARG_TEXT_PP(2));
	HxArrayMode mode = hx_parse_array_mode(modename);
	MemoryContext workcxt;
	MemoryContext oldcxt;
	HxNode	   *ops;
	Jsonb	   *result;

	workcxt = AllocSetContextCreate(CurrentMemoryContext, "hx_diff",
									ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(workcxt);
	ops = hx_diff_nodes(oldjb, newjb, mode);
	result = hx_node_to_jsonb(ops, oldcxt);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(workcxt);

	PG_FREE_IF_COPY(oldjb, 0);
	PG_FREE_IF_COPY(newjb, 1);
	PG_RETURN_JSONB_P(result);
}
