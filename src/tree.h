/*-------------------------------------------------------------------------
 *
 * tree.h
 *	  The lazily unpacked jsonb tree that hx_patch, hx_merge, hx_diff and
 *	  the stream trigger work on (tree.c), its equality and hashing by JSON
 *	  value (equal.c), and its encoder (encode.c).
 *
 * A node is a scalar, an on-disk container that has not been touched
 * (HX_BINARY: a pointer into a detoasted datum and its length), or an
 * unpacked array or object whose children are nodes again.  Operations
 * unpack only the containers on the paths they edit, one level at a time,
 * and the encoder copies the bytes of every container that was never
 * unpacked.  That is what makes a one-leaf edit of a large document cost
 * little more than copying its bytes.
 *
 * A spliced node (HX_SPLICED) is an array or object whose children are the
 * children of several on-disk containers, one after the other (objects:
 * their keys are in key order across them): an hxdoc value read whole
 * (doc.c) is made of its segments so, and the encoder copies each child's
 * bytes without unpacking anything.  Only the encoder and the read-only
 * accessors take one; nothing edits it.  The parts of an array may be
 * lazy: loaded (decompressed) by the encoder one at a time, into one
 * buffer, as it writes them, so that reading a large document holds its
 * compressed segments and the result, not every segment decompressed;
 * the encoded size of such a node is an upper bound (its children's
 * padding is not known before they are read), and the result is as long
 * as what was written.  Such a node goes to the encoder only.
 *
 * Invariants:
 *	- a node has at most one parent: nodes are never shared, so unpacking
 *	  and editing in place is safe (an on-disk container's bytes may be
 *	  shared, as they are never written);
 *	- an unpacked object's pairs[0..nsorted) are in jsonb key order
 *	  (shorter keys first, then bytewise); later pairs are in insertion
 *	  order and found through a hash index; a removed member keeps its
 *	  slot, with value NULL, until the object is normalized;
 *	- an unpacked array's "edits" counter moves whenever one of its
 *	  elements may change, except by an append: a value derived from the
 *	  elements (merge.c's membership indexes) stays valid while it has not
 *	  moved, and needs only the new tail indexed.
 *
 * src/tree.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef HX_TREE_H
#define HX_TREE_H

#include "hxstate.h"

#include "utils/jsonb.h"
#include "utils/numeric.h"

typedef enum HxKind
{
	HX_SCALAR,					/* jbvNull, jbvString, jbvNumeric, jbvBool */
	HX_BINARY,					/* array or object still in on-disk format */
	HX_ARRAY,					/* unpacked array */
	HX_OBJECT,					/* unpacked object */
	HX_SPLICED					/* the children of on-disk containers, in order */
} HxKind;

typedef struct HxNode HxNode;

/*
 * Loads a part of a spliced node that is not in memory yet (lazy): its
 * jsonb datum, rawlen bytes, into dest, which the encoder reuses for the
 * next part.  It raises an error when the part is not what it was said to
 * be (an array of count elements).
 */
typedef void (*HxPartLoad) (void *part, char *dest);

typedef struct HxPair
{
	const char *key;
	int			keylen;
	HxNode	   *value;			/* NULL marks a removed member */
} HxPair;

struct HxNode
{
	HxKind		kind;
	union
	{
		JsonbValue	scalar;
		struct
		{
			JsonbContainer *data;
			uint32		len;
		}			bin;
		struct
		{
			HxNode	  **elems;
			int			n;
			int			cap;
			uint32		edits;	/* moves when an element may change */
		}			arr;
		struct
		{
			HxPair	   *pairs;
			int			n;		/* pairs used, including removed ones */
			int			cap;
			int			nsorted;	/* pairs[0..nsorted) are in jsonb order */
			int			nlive;	/* members that are not removed */
			int		   *index;	/* open-addressing hash of pair positions */
			int			indexsize;
		}			obj;
		struct
		{
			JsonbContainer **parts; /* arrays, or objects in key order;
									 * NULL: a part to load (lazy) */
			void	  **lazy;	/* what load() takes, for a part to load */
			const int32 *rawlens;	/* its jsonb datum's bytes */
			const int32 *counts;	/* its children */
			HxPartLoad	load;
			int			nparts;
			int			n;		/* children of all the parts */
			bool		object;
		}			spl;
	}			u;
};

/* Shape of a node, whatever its representation */
typedef enum HxShape
{
	HXS_NULL,
	HXS_STRING,
	HXS_NUMBER,
	HXS_BOOL,
	HXS_ARRAY,
	HXS_OBJECT
} HxShape;

/* ---------------------------------------------------------------------
 * tree.c: making, unpacking and editing nodes
 * ---------------------------------------------------------------------
 */
extern HxNode *hx_node_from_jsonb(Jsonb *jb);
extern HxNode *hx_node_from_value(const JsonbValue *v);
extern HxNode *hx_node_new_array(int cap);
extern HxNode *hx_node_new_object(int cap);
extern HxNode *hx_node_new_string(const char *s, int len);
extern HxNode *hx_node_new_numeric(Numeric num);
extern HxNode *hx_node_new_null(void);
extern HxNode *hx_node_new_spliced(bool object, JsonbContainer **parts, int nparts);
extern HxNode *hx_node_new_spliced_lazy(JsonbContainer **parts, void **lazy,
										const int32 *rawlens, const int32 *counts,
										int nparts, HxPartLoad load);
extern HxShape hx_node_shape(const HxNode *n);
extern const char *hx_shape_name(HxShape s);
extern const char *hx_value_type_name(const JsonbValue *v);
extern void hx_node_expand(HxNode *n);

static inline bool
hx_node_is_null(const HxNode *n)
{
	return n->kind == HX_SCALAR && n->u.scalar.type == jbvNull;
}

/* Arrays and objects: the node must be unpacked (hx_node_expand) */
extern void hx_array_insert(HxNode *arr, int i, HxNode *child);
extern void hx_array_append(HxNode *arr, HxNode *child);
extern void hx_array_set(HxNode *arr, int i, HxNode *child);
extern HxNode *hx_array_remove(HxNode *arr, int i);
extern HxNode *hx_array_edit_elem(HxNode *arr, int i);
extern void hx_array_retain(HxNode *arr, const bool *keep);
extern HxNode **hx_object_find(HxNode *obj, const char *key, int keylen);
extern void hx_object_set(HxNode *obj, const char *key, int keylen,
						  HxNode *child);
extern HxNode *hx_object_remove(HxNode *obj, const char *key, int keylen);
extern void hx_object_normalize(HxNode *obj);

/* Read-only access that does not unpack on-disk containers */
extern int	hx_node_size(const HxNode *n);
extern HxNode *hx_node_get_member(HxNode *n, const char *key, int keylen);
extern HxNode *hx_node_get_elem(HxNode *n, int i);

/* Sequential access to the children of an on-disk container */
typedef struct HxContainerIter
{
	JsonbContainer *c;
	char	   *base;			/* start of the data area */
	int			next;			/* next JEntry to read */
	uint32		offset;			/* its start offset in the data area */
} HxContainerIter;

extern void hx_citer_init(HxContainerIter *it, JsonbContainer *c, int first);
extern void hx_citer_next(HxContainerIter *it, JsonbValue *v);
extern void hx_jsonb_root_value(Jsonb *jb, JsonbValue *v);
extern int	hx_key_compare(const char *a, int alen, const char *b, int blen);

/* detoast.c: reading a value stored out of line, interruptibly */
extern Jsonb *hx_detoast_jsonb(Datum datum);

/* ---------------------------------------------------------------------
 * equal.c: equality and hashing by JSON value
 * ---------------------------------------------------------------------
 */
extern bool hx_scalar_equal(const JsonbValue *a, const JsonbValue *b);
extern bool hx_container_equal(JsonbContainer *a, uint32 alen,
							   JsonbContainer *b, uint32 blen);
extern bool hx_node_equal(HxNode *a, HxNode *b);
extern uint32 hx_node_hash(HxNode *n);

/* ---------------------------------------------------------------------
 * encode.c: the encoder
 * ---------------------------------------------------------------------
 */

/*
 * The largest container jsonb can hold: its length must fit a JEntry's
 * offset field.
 */
#define HX_JSONB_MAX_SIZE	((Size) JENTRY_OFFLENMASK)

extern Jsonb *hx_node_to_jsonb(HxNode *root, MemoryContext resultcxt);
extern Size hx_node_encoded_size(HxNode *n);
extern HxNode *hx_node_copy(HxNode *n);
pg_noreturn extern void hx_error_too_large(Size size);

#endif							/* HX_TREE_H */
