/*-------------------------------------------------------------------------
 *
 * pointer.c
 *	  RFC 6901 JSON Pointer: parsing, escaping and array indexes, and
 *	  walking an HxNode tree by a pointer; shared by hx_patch, hx_merge,
 *	  hx_diff and the triggers.
 *
 * A pointer is either empty (the whole document) or a sequence of
 * reference tokens, each introduced by "/".  In a token "~1" stands for
 * "/" and "~0" for "~"; a "~" followed by anything else is a syntax error
 * (RFC 6901 section 3).  An array index is "0" or a decimal number without
 * leading zeros (section 4); "-" names the position after the last element
 * and exists only where RFC 6902 allows it (the target of "add").
 *
 * Errors here say what is wrong with a pointer; which operation it
 * belongs to is the op-list engine's error context (ops.c).
 *
 * src/pointer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "pointer.h"

static void
error_syntax(const HxPointer *ptr, bool tilde)
{
	const char *member = (ptr->role == HX_PTR_FROM) ? "from" : "path";

	if (ptr->role == HX_PTR_ARGUMENT)
		ereport(ERROR,
				(errcode(ERRCODE_HX_BAD_POINTER),
				 errmsg("invalid JSON pointer \"%s\"", hx_clip(ptr->text)),
				 tilde ?
				 errdetail("In a JSON pointer, \"~\" must be followed by \"0\" or \"1\".") :
				 errdetail("A JSON pointer must be empty or start with \"/\".")));
	ereport(ERROR,
			(errcode(ERRCODE_HX_BAD_POINTER),
			 errmsg("invalid JSON pointer \"%s\"", hx_clip(ptr->text)),
			 tilde ?
			 errdetail("In the \"%s\" member, \"~\" must be followed by \"0\" or \"1\".",
					   member) :
			 errdetail("The \"%s\" member must be empty or start with \"/\".",
					   member)));
}

/*
 * Parse "text" (len bytes, not necessarily NUL-terminated) into ptr; role
 * says where it was read, for messages.
 */
void
hx_pointer_parse(HxPointer *ptr, const char *text, int len, HxPointerRole role)
{
	int			ntokens = 0;
	int			i;
	char	   *copy;

	copy = palloc(len + 1);
	memcpy(copy, text, len);
	copy[len] = '\0';
	ptr->role = role;
	ptr->text = copy;
	ptr->textlen = len;
	ptr->ntokens = 0;
	ptr->tokens = NULL;
	ptr->starts = NULL;

	if (len == 0)
		return;
	if (text[0] != '/')
		error_syntax(ptr, false);

	for (i = 0; i < len; i++)
		if (text[i] == '/')
			ntokens++;

	ptr->tokens = palloc(sizeof(HxToken) * ntokens);
	ptr->starts = palloc(sizeof(int) * (ntokens + 1));

	i = 0;
	while (i < len)
	{
		HxToken    *tok = &ptr->tokens[ptr->ntokens];
		char	   *out;
		int			j;

		Assert(text[i] == '/');
		ptr->starts[ptr->ntokens] = i;
		i++;
		for (j = i; j < len && text[j] != '/'; j++)
			;
		out = tok->s = palloc(j - i + 1);
		for (; i < j; i++)
		{
			if (text[i] == '~')
			{
				if (i + 1 < j && text[i + 1] == '0')
					*out++ = '~';
				else if (i + 1 < j && text[i + 1] == '1')
					*out++ = '/';
				else
					error_syntax(ptr, true);
				i++;
			}
			else
				*out++ = text[i];
		}
		*out = '\0';
		tok->len = out - tok->s;
		ptr->ntokens++;
	}
	Assert(ptr->ntokens == ntokens);
	ptr->starts[ptr->ntokens] = len;
}

/* The text of the pointer made of the first ntokens tokens of ptr */
char *
hx_pointer_prefix(const HxPointer *ptr, int ntokens)
{
	Assert(ntokens >= 0 && ntokens <= ptr->ntokens);
	if (ntokens == ptr->ntokens)
		return pstrdup(ptr->text);
	return pnstrdup(ptr->text, ptr->starts[ntokens]);
}

/* Do a and b have the same first n tokens? */
static bool
tokens_match(const HxPointer *a, const HxPointer *b, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		if (a->tokens[i].len != b->tokens[i].len ||
			memcmp(a->tokens[i].s, b->tokens[i].s, a->tokens[i].len) != 0)
			return false;
	return true;
}

/* Is a a proper prefix of b, token by token ("/a" of "/a/b", not of "/ab")? */
bool
hx_pointer_is_proper_prefix(const HxPointer *a, const HxPointer *b)
{
	return a->ntokens < b->ntokens && tokens_match(a, b, a->ntokens);
}

bool
hx_pointer_equal(const HxPointer *a, const HxPointer *b)
{
	return a->ntokens == b->ntokens && tokens_match(a, b, a->ntokens);
}

/*
 * The array index a token names: a non-negative number, or HX_INDEX_END
 * for "-", HX_INDEX_INVALID when the token is not an index at all, and
 * HX_INDEX_HUGE when it is well formed but larger than any jsonb array.
 */
int
hx_parse_index(const HxToken *tok)
{
	int64		v = 0;
	int			i;

	if (tok->len == 1 && tok->s[0] == '-')
		return HX_INDEX_END;
	if (tok->len == 0 || (tok->s[0] == '0' && tok->len > 1))
		return HX_INDEX_INVALID;
	for (i = 0; i < tok->len; i++)
	{
		if (tok->s[i] < '0' || tok->s[i] > '9')
			return HX_INDEX_INVALID;
	}
	for (i = 0; i < tok->len; i++)
	{
		v = v * 10 + (tok->s[i] - '0');
		if (v > JB_CMASK)
			return HX_INDEX_HUGE;
	}
	return (int) v;
}

/* Append s as one escaped reference token (without the leading "/") */
void
hx_pointer_append_escaped(StringInfo buf, const char *s, int len)
{
	int			i;
	int			run = 0;

	for (i = 0; i < len; i++)
	{
		if (s[i] == '~' || s[i] == '/')
		{
			appendBinaryStringInfo(buf, s + run, i - run);
			appendBinaryStringInfo(buf, s[i] == '~' ? "~0" : "~1", 2);
			run = i + 1;
		}
	}
	appendBinaryStringInfo(buf, s + run, len - run);
}

/* ---------------------------------------------------------------------
 * Resolving pointers in an HxNode tree
 * ---------------------------------------------------------------------
 */

/*
 * Report that ptr's first depth+1 tokens name nothing: token "depth" is
 * missing from container, the node at ptr's first depth tokens.
 */
void
hx_error_missing(const HxPointer *ptr, int depth, HxNode *container)
{
	const char *text = hx_clip(ptr->text);
	const char *at = hx_clip(hx_pointer_prefix(ptr, depth));
	const HxToken *tok = &ptr->tokens[depth];
	HxShape		shape = hx_node_shape(container);
	int			size;

	if (shape == HXS_OBJECT)
		ereport(ERROR,
				(errcode(ERRCODE_HX_PATH_NOT_FOUND),
				 ptr->role == HX_PTR_FROM ?
				 errmsg("\"from\" location \"%s\" does not exist", text) :
				 errmsg("path \"%s\" does not exist", text),
				 errdetail("The object at \"%s\" has no member \"%s\".",
						   at, hx_clip(tok->s))));
	if (shape != HXS_ARRAY)
		ereport(ERROR,
				(errcode(ERRCODE_HX_PATH_NOT_FOUND),
				 ptr->role == HX_PTR_FROM ?
				 errmsg("\"from\" location \"%s\" does not exist", text) :
				 errmsg("path \"%s\" does not exist", text),
				 errdetail("The value at \"%s\" is of type %s, not an object or array.",
						   at, hx_shape_name(shape))));
	if (hx_parse_index(tok) == HX_INDEX_END)
		ereport(ERROR,
				(errcode(ERRCODE_HX_PATH_NOT_FOUND),
				 ptr->role == HX_PTR_FROM ?
				 errmsg("\"from\" location \"%s\" does not exist", text) :
				 errmsg("path \"%s\" does not exist", text),
				 errdetail("\"-\" refers to the nonexistent element after the last element of the array at \"%s\".",
						   at)));
	size = hx_node_size(container);
	ereport(ERROR,
			(errcode(ERRCODE_HX_PATH_NOT_FOUND),
			 ptr->role == HX_PTR_FROM ?
			 errmsg("\"from\" location \"%s\" does not exist", text) :
			 errmsg("path \"%s\" does not exist", text),
			 errdetail_plural("Index %s is out of range for the array at \"%s\", which has %d element.",
							  "Index %s is out of range for the array at \"%s\", which has %d elements.",
							  size, hx_clip(tok->s), at, size)));
	pg_unreachable();
}

static void
error_bad_index(const HxPointer *ptr, int depth)
{
	ereport(ERROR,
			(errcode(ERRCODE_HX_BAD_INDEX),
			 errmsg("invalid array index \"%s\" in JSON pointer \"%s\"",
					hx_clip(ptr->tokens[depth].s), hx_clip(ptr->text)),
			 errdetail("An array index is \"0\" or a decimal number without leading zeros.")));
}

/* Report that ptr cannot be created through node, the value at its first depth tokens */
void
hx_error_cannot_create(const HxPointer *ptr, int depth, HxNode *node)
{
	ereport(ERROR,
			(errcode(ERRCODE_HX_TYPE_CONFLICT),
			 errmsg("cannot create path \"%s\"", hx_clip(ptr->text)),
			 errdetail("The value at \"%s\" is of type %s, not an object or array.",
					   hx_clip(hx_pointer_prefix(ptr, depth)),
					   hx_shape_name(hx_node_shape(node)))));
}

/*
 * The position that token "depth" of ptr names in array arr.  allow_end
 * accepts "-" (returned as the array's size), allow_size accepts an index
 * equal to the size (both for "add").  Anything else out of range is
 * reported as a missing path.
 */
int
hx_array_position(HxNode *arr, const HxPointer *ptr, int depth,
				  bool allow_end, bool allow_size)
{
	int			size = hx_node_size(arr);
	int			idx = hx_parse_index(&ptr->tokens[depth]);

	if (idx == HX_INDEX_INVALID)
		error_bad_index(ptr, depth);
	if (idx == HX_INDEX_END && allow_end)
		return size;
	if (idx >= 0 && (idx < size || (allow_size && idx == size)))
		return idx;
	hx_error_missing(ptr, depth, arr);
}

/*
 * Walk the first ntokens tokens of ptr from *rootp for an edit, unpacking
 * every container on the way, and return the node reached, unpacked.
 * HX_WALK_CREATE creates missing object members as empty objects;
 * HX_WALK_STRICT reports them.  Array elements are never created.  Every
 * array passed through is marked as having an element that may change
 * (hx_array_edit_elem): the caller edits below it.
 */
HxNode *
hx_walk(HxNode **rootp, const HxPointer *ptr, int ntokens, HxWalkMode mode)
{
	HxNode	   *node = *rootp;
	int			depth;

	for (depth = 0; depth < ntokens; depth++)
	{
		const HxToken *tok = &ptr->tokens[depth];

		hx_node_expand(node);
		if (node->kind == HX_OBJECT)
		{
			HxNode	  **slot = hx_object_find(node, tok->s, tok->len);

			if (slot)
				node = *slot;
			else if (mode == HX_WALK_CREATE)
			{
				HxNode	   *child = hx_node_new_object(4);

				hx_object_set(node, tok->s, tok->len, child);
				node = child;
			}
			else
				hx_error_missing(ptr, depth, node);
		}
		else if (node->kind == HX_ARRAY)
			node = hx_array_edit_elem(node,
									  hx_array_position(node, ptr, depth,
														false, false));
		else if (mode == HX_WALK_CREATE)
			hx_error_cannot_create(ptr, depth, node);
		else
			hx_error_missing(ptr, depth, node);
	}
	hx_node_expand(node);
	return node;
}

/*
 * The node that the first ntokens tokens of ptr name, or NULL when there
 * is none; nothing is unpacked.  A token that cannot be an array index
 * where an array is met is an error when strict_index (an operation's
 * path), or names nothing (a trigger's argument).
 */
HxNode *
hx_lookup(HxNode *root, const HxPointer *ptr, int ntokens, bool strict_index)
{
	HxNode	   *node = root;
	int			depth;

	for (depth = 0; depth < ntokens; depth++)
	{
		const HxToken *tok = &ptr->tokens[depth];
		HxShape		shape = hx_node_shape(node);

		if (shape == HXS_OBJECT)
			node = hx_node_get_member(node, tok->s, tok->len);
		else if (shape == HXS_ARRAY)
		{
			int			idx = hx_parse_index(tok);

			if (idx == HX_INDEX_INVALID && strict_index)
				error_bad_index(ptr, depth);
			if (idx < 0 || idx >= hx_node_size(node))
				return NULL;
			node = hx_node_get_elem(node, idx);
		}
		else
			return NULL;
		if (node == NULL)
			return NULL;
	}
	return node;
}

/*
 * Locate the target of ptr for an edit: walk to its parent (unpacking, and
 * creating missing objects in HX_WALK_CREATE mode), then check what its
 * last token names there against mode.  What cannot be a target is
 * reported: a path through a scalar (missing, or cannot be created), a
 * missing member or an index out of range where one must exist, an
 * invalid index.
 */
void
hx_target_locate(HxTarget *t, HxNode **rootp, const HxPointer *ptr,
				 HxWalkMode walk, HxTargetMode mode)
{
	int			depth = ptr->ntokens - 1;

	t->rootp = rootp;
	t->ptr = ptr;
	t->parent = NULL;
	t->key = NULL;
	t->index = -1;
	if (ptr->ntokens == 0)
		return;
	t->parent = hx_walk(rootp, ptr, depth, walk);
	t->key = &ptr->tokens[depth];
	if (t->parent->kind == HX_ARRAY)
		t->index = hx_array_position(t->parent, ptr, depth,
									 mode == HX_TARGET_INSERT,
									 mode == HX_TARGET_INSERT);
	else if (t->parent->kind != HX_OBJECT)
	{
		if (walk == HX_WALK_CREATE)
			hx_error_cannot_create(ptr, depth, t->parent);
		hx_error_missing(ptr, depth, t->parent);
	}
	else if (mode == HX_TARGET_EXISTING &&
			 hx_object_find(t->parent, t->key->s, t->key->len) == NULL)
		hx_error_missing(ptr, depth, t->parent);
}

/*
 * The node at the target, or NULL when the member does not exist; for_edit
 * when the caller may change it in place.
 */
HxNode *
hx_target_get(const HxTarget *t, bool for_edit)
{
	HxNode	  **slot;

	if (t->parent == NULL)
		return *t->rootp;
	if (t->parent->kind == HX_ARRAY)
		return for_edit ? hx_array_edit_elem(t->parent, t->index) :
			t->parent->u.arr.elems[t->index];
	slot = hx_object_find(t->parent, t->key->s, t->key->len);
	return slot ? *slot : NULL;
}

/*
 * Put value at the target: the root or an object member is replaced; in
 * an array, value goes in before the element at the position (insert) or
 * in its place.
 */
void
hx_target_put(const HxTarget *t, HxNode *value, bool insert)
{
	if (t->parent == NULL)
		*t->rootp = value;
	else if (t->parent->kind == HX_OBJECT)
		hx_object_set(t->parent, t->key->s, t->key->len, value);
	else if (insert)
		hx_array_insert(t->parent, t->index, value);
	else
		hx_array_set(t->parent, t->index, value);
}

/* Remove and return the node at an existing target other than the root */
HxNode *
hx_target_remove(const HxTarget *t)
{
	Assert(t->parent != NULL);
	if (t->parent->kind == HX_OBJECT)
		return hx_object_remove(t->parent, t->key->s, t->key->len);
	return hx_array_remove(t->parent, t->index);
}

/*
 * RFC 6902 "add" of value at ptr: replaces the root or an object member,
 * inserts into an array ("-" appends).  The parent must exist in
 * HX_WALK_STRICT mode; HX_WALK_CREATE creates missing parent objects.
 */
void
hx_add_at(HxNode **rootp, const HxPointer *ptr, HxNode *value, HxWalkMode mode)
{
	HxTarget	t;

	hx_target_locate(&t, rootp, ptr, mode, HX_TARGET_INSERT);
	hx_target_put(&t, value, true);
}

/*
 * Remove and return the node at ptr.  With missing_ok, a path that names
 * nothing (however deep the miss) returns NULL instead of an error; a
 * malformed array index is an error either way.
 */
HxNode *
hx_remove_at(HxNode **rootp, const HxPointer *ptr, bool missing_ok)
{
	HxTarget	t;

	Assert(ptr->ntokens > 0);
	if (missing_ok && hx_lookup(*rootp, ptr, ptr->ntokens, true) == NULL)
		return NULL;
	hx_target_locate(&t, rootp, ptr, HX_WALK_STRICT, HX_TARGET_EXISTING);
	return hx_target_remove(&t);
}
