/*-------------------------------------------------------------------------
 *
 * doc.h
 *	  hxdoc, a jsonb document stored in pieces (doc.c: the type and reading
 *	  it whole; chunk.c: its side tables; store.c: the hx_store trigger that
 *	  writes only what a change changed).  docs/storage.md is the design.
 *
 * An hxdoc value is one of:
 *	- in line (HXDOC_INLINE): a jsonb datum, whole, after the header, as a
 *	  small state is stored, and as every value is before hx_store has
 *	  stored it (a cast from jsonb, the type's input);
 *	- in pieces (HXDOC_CHUNKED): the document's id and generation, the
 *	  number of its segments and the sum of their generations, the number
 *	  its next new node gets, the
 *	  segments its generation replaced, then its skeleton, a jsonb datum in
 *	  which each large member is a placeholder for a node of the side table
 *	  hx_chunk.
 *
 * A placeholder is a one-member object whose key is the single byte NUL and
 * whose value is the node's number: jsonb's input refuses NUL in a string
 * (text cannot hold it), so no JSON text, and no SQL value, can spell one.
 * A node is an array, an object or a large string; its segments (rows of
 * hx_chunk) each hold a run of its elements as a jsonb array, a run of its
 * members (in jsonb key order) as a jsonb object, or the string as a jsonb
 * scalar; their members may be placeholders again.
 *
 * Generations: every write of a document makes its next generation.  A
 * segment carries the generation that wrote it; a value lists the segments
 * its generation replaced ("dead"), which are kept, so that the value
 * before the write (one generation back) can still be read, and deleted by
 * the next write.  A value of generation h is read from the segments of
 * generation at most h that it does not list as dead; it knows how many
 * those are and the sum of their generations, so that a reader whose
 * snapshot does not show exactly them knows it: one whose segments later
 * writes deleted shows fewer; one older than the value shows, instead of
 * some of the value's, older segments its writes deleted, which have
 * smaller generations.  hx_doc holds what does not change with every write: the
 * table and column a document belongs to, and whether its row is gone.
 *
 * src/doc.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef HX_DOC_H
#define HX_DOC_H

#include "hxstate.h"

#include "nodes/pg_list.h"
#include "storage/itemptr.h"
#include "utils/jsonb.h"
#include "utils/snapshot.h"

#include "tree.h"

/* The formats of a value */
#define HXDOC_INLINE	1
#define HXDOC_CHUNKED	2

/*
 * The header of a value, as stored (4-byte aligned, as jsonb): the
 * embedded jsonb datum follows it, with its own varlena header, so that
 * its root container is 4-byte aligned too.
 */
typedef struct HxDocHead
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	uint8		format;			/* HXDOC_INLINE or HXDOC_CHUNKED */
	uint8		reserved[3];
	/* HXDOC_INLINE: the jsonb datum; HXDOC_CHUNKED: doc, gen, skeleton */
	char		data[FLEXIBLE_ARRAY_MEMBER];
} HxDocHead;

#define HXDOC_HEADER_SIZE		offsetof(HxDocHead, data)

/*
 * The fixed part of a value in pieces, after the header; then ndead dead
 * segments' keys (node, seg, gen); then the skeleton, a jsonb datum.  Every size is a
 * multiple of 4, so that the skeleton starts 4-byte aligned; fields are
 * read and written with memcpy (the datum is only 4-byte aligned).
 */
typedef struct HxDocChunked
{
	int64		doc;
	int64		gen;
	int64		gensum;			/* the sum of its segments' generations */
	int32		nsegs;			/* segments of this generation */
	int32		next_node;		/* the number the next new node gets */
	int32		ndead;			/* segments this generation replaced */
} HxDocChunked;

/* the fixed part's bytes as stored, and each dead segment's: node, seg, gen */
#define HXDOC_CHUNKED_SIZE		(sizeof(int64) * 3 + sizeof(int32) * 3)
#define HXDOC_DEAD_SIZE			(sizeof(int32) + sizeof(int64) * 2)

/* A segment's key in hx_chunk */
typedef struct HxSegId
{
	int32		node;
	int64		seg;			/* its place among the node's segments */
	int64		gen;			/* the generation that wrote it */
} HxSegId;

/* A document's row of hx_doc */
typedef struct HxDocRow
{
	int64		doc;
	Oid			rel;			/* the table and column it belongs to */
	int16		att;
	bool		dropped;		/* its row is gone; the next writes delete it */
	ItemPointerData tid;
} HxDocRow;

/* A segment as read: its key, what it holds, and its bytes */
typedef struct HxSegment
{
	HxSegId		id;
	int32		n;				/* elements or members (1 for a string) */
	int32		rawlen;			/* bytes of its jsonb, uncompressed */
	int32		refs;			/* placeholders in it */
	int32		stored;			/* bytes as stored (compressed) */
	Jsonb	   *body;			/* detoasted and decompressed, if read */
	struct varlena *datum;		/* else as stored (compressed), if read lazily */
	ItemPointerData tid;
} HxSegment;

/* The segments of one node, in order */
typedef struct HxNodeSegs
{
	int32		node;
	int			nsegs;
	HxSegment **segs;
	bool		placed;			/* a read has put it in the tree it builds */
} HxNodeSegs;

/* A document's segments, as one generation of it sees them */
typedef struct HxDocImage
{
	int64		doc;
	int64		gen;
	int			nnodes;
	HxNodeSegs *nodes;			/* sorted by node */
	int			nsegs;			/* segments found */
	int64		gensum;			/* the sum of their generations */
	int			newer;			/* segments of later generations */
	List	   *dead;			/* HxSegment *: those the value lists as dead */
} HxDocImage;

typedef enum HxReadMode
{
	HX_READ_KEYS,				/* the segments' keys and sizes */
	HX_READ_BODIES,				/* and their bodies, decompressed */
	HX_READ_LAZY				/* bodies of those with placeholders; the
								 * others as stored, to load later */
} HxReadMode;

/* doc.c: the type */
extern Oid	hx_doc_typid(void);
extern bool hx_doc_is_type(Oid typid);
extern HxDocHead *hx_doc_detoast(Datum d);
extern Jsonb *hx_doc_inline_jsonb(HxDocHead *head);
extern void hx_doc_chunked(HxDocHead *head, HxDocChunked *c);
extern void hx_doc_dead(HxDocHead *head, int i, HxSegId *id);
extern Jsonb *hx_doc_skeleton(HxDocHead *head);
extern HxDocHead *hx_doc_make_inline(Jsonb *jb);
extern HxDocHead *hx_doc_make_chunked(HxDocChunked *c, List *dead, Jsonb *skeleton);
extern Jsonb *hx_doc_to_jsonb(Datum value);
extern Jsonb *hx_doc_materialize(HxDocHead *head, Snapshot snapshot);

/* doc.c: placeholders and reading a document's image */
extern bool hx_is_placeholder(const JsonbValue *v, int32 *node);
extern HxNode *hx_placeholder(int32 node);
extern HxNodeSegs *hx_image_node(HxDocImage *img, int32 node);
extern HxNode *hx_image_tree(HxDocImage *img, const JsonbValue *v);
extern bool hx_image_load(HxDocHead *head, Snapshot snapshot, HxDocImage *img, HxReadMode mode);
extern void hx_image_load_any(HxDocHead *head, HxDocImage *img, HxReadMode mode);

/* chunk.c: the side tables */

extern bool hx_chunk_read_doc(int64 doc, Snapshot snapshot, HxDocRow *row);
extern List *hx_chunk_read_segments(int64 doc, Snapshot snapshot, HxReadMode mode);
extern void hx_segment_load(void *segment, char *dest);
extern Jsonb *hx_segment_body(HxSegment *s);

typedef struct HxChunkWriter HxChunkWriter;

extern HxChunkWriter *hx_chunk_writer_open(void);
extern void hx_chunk_writer_close(HxChunkWriter *w);
extern int64 hx_chunk_new_doc_id(void);
extern void hx_chunk_insert_doc(HxChunkWriter *w, HxDocRow *row);
extern void hx_chunk_update_doc(HxChunkWriter *w, HxDocRow *row);
extern void hx_chunk_delete_doc(HxChunkWriter *w, HxDocRow *row);
extern void hx_chunk_insert_segment(HxChunkWriter *w, int64 doc, HxSegId *id,
									int32 n, int32 refs, Jsonb *body);
extern void hx_chunk_delete_segment(HxChunkWriter *w, ItemPointer tid);
extern List *hx_chunk_dropped_docs(Oid rel, int limit);
extern List *hx_chunk_docs_of(Oid rel, int16 att, Snapshot snapshot);
extern bool hx_chunk_purge_doc(HxChunkWriter *w, int64 doc, bool any);

#endif							/* HX_DOC_H */
