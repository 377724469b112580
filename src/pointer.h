/*-------------------------------------------------------------------------
 *
 * pointer.h
 *	  RFC 6901 JSON Pointers, and walking an HxNode tree by them (pointer.c).
 *
 * src/pointer.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef HX_POINTER_H
#define HX_POINTER_H

#include "lib/stringinfo.h"

#include "tree.h"

typedef struct HxToken
{
	char	   *s;				/* unescaped, NUL-terminated */
	int			len;
} HxToken;

/*
 * Where a pointer was read, for messages: an operation's "path" or "from"
 * member, or an argument of a trigger.
 */
typedef enum HxPointerRole
{
	HX_PTR_PATH,
	HX_PTR_FROM,
	HX_PTR_ARGUMENT
} HxPointerRole;

typedef struct HxPointer
{
	HxPointerRole role;
	const char *text;			/* the pointer as written, NUL-terminated */
	int			textlen;
	int			ntokens;
	HxToken    *tokens;
	int		   *starts;			/* offset in text of each token's '/' */
} HxPointer;

extern void hx_pointer_parse(HxPointer *ptr, const char *text, int len,
							 HxPointerRole role);
extern char *hx_pointer_prefix(const HxPointer *ptr, int ntokens);
extern bool hx_pointer_is_proper_prefix(const HxPointer *a, const HxPointer *b);
extern bool hx_pointer_equal(const HxPointer *a, const HxPointer *b);
extern void hx_pointer_append_escaped(StringInfo buf, const char *s, int len);

#define HX_INDEX_INVALID	(-1)	/* not an RFC 6901 array index */
#define HX_INDEX_END		(-2)	/* the "-" token */
#define HX_INDEX_HUGE		(-3)	/* well-formed but beyond any jsonb array */
extern int	hx_parse_index(const HxToken *tok);

/* Walking a tree: how to treat what is missing on the way */
typedef enum HxWalkMode
{
	HX_WALK_STRICT,				/* every step must exist (RFC 6902) */
	HX_WALK_CREATE				/* missing object members are created */
} HxWalkMode;

extern HxNode *hx_walk(HxNode **rootp, const HxPointer *ptr, int ntokens,
					   HxWalkMode mode);

/*
 * The place a pointer names, for an edit: the unpacked object or array
 * that holds (or is to hold) the value, and the member or position there;
 * the root itself when the pointer is empty.
 */
typedef struct HxTarget
{
	HxNode	  **rootp;
	const HxPointer *ptr;
	HxNode	   *parent;			/* unpacked object or array; NULL: the root */
	const HxToken *key;			/* the pointer's last token */
	int			index;			/* the position, when parent is an array */
} HxTarget;

/* What the last token of a target may name */
typedef enum HxTargetMode
{
	HX_TARGET_EXISTING,			/* an existing member or element (replace,
								 * remove) */
	HX_TARGET_SET,				/* any member, an existing element (hx_merge) */
	HX_TARGET_INSERT			/* any member, a position up to the array's
								 * size, or "-" (add) */
} HxTargetMode;

extern void hx_target_locate(HxTarget *t, HxNode **rootp, const HxPointer *ptr,
							 HxWalkMode walk, HxTargetMode mode);
extern HxNode *hx_target_get(const HxTarget *t, bool for_edit);
extern void hx_target_put(const HxTarget *t, HxNode *value, bool insert);
extern HxNode *hx_target_remove(const HxTarget *t);
extern HxNode *hx_lookup(HxNode *root, const HxPointer *ptr, int ntokens,
						 bool strict_index);
extern int	hx_array_position(HxNode *arr, const HxPointer *ptr, int depth,
							  bool allow_end, bool allow_size);
extern void hx_add_at(HxNode **rootp, const HxPointer *ptr, HxNode *value,
					  HxWalkMode mode);
extern HxNode *hx_remove_at(HxNode **rootp, const HxPointer *ptr,
							bool missing_ok);
pg_noreturn extern void hx_error_missing(const HxPointer *ptr, int depth,
										HxNode *container);
pg_noreturn extern void hx_error_cannot_create(const HxPointer *ptr, int depth,
											   HxNode *node);

#endif							/* HX_POINTER_H */
