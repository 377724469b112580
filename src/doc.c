/*-------------------------------------------------------------------------
 *
 * doc.c
 *	  hxdoc: a jsonb document stored in pieces (doc.h), as a type: its
 *	  input and output (JSON text, as jsonb's), its casts to and from
 *	  jsonb, and reading a value whole.
 *
 *	  hxdoc_in / hxdoc_out / hxdoc_recv / hxdoc_send
 *	  hxdoc_from_jsonb(jsonb) -> hxdoc		(assignment cast)
 *	  hxdoc_to_jsonb(hxdoc) -> jsonb		(implicit cast)
 *	  hx_doc_info(hxdoc)					how a value is stored
 *
 * A value in line is a jsonb datum behind a header; every value that SQL
 * makes (input, a cast) is in line.  Only the hx_store trigger makes a
 * value in pieces, when it stores a large one into its row.  Reading one
 * whole reads the document's segments, through the primary key, with the snapshot of the statement that reads it (so that
 * a value and the segments it is made of are read as of the same moment),
 * and encodes one jsonb: the encoder copies each element and member of a
 * segment as bytes.
 *
 * The snapshot: the active one (a statement's, or a trigger's), so that a
 * reader sees the document as it was when it read the row; the historic
 * one during logical decoding (the side tables are user catalog tables);
 * and when the value is newer than the active snapshot (a row version that
 * an UPDATE or a row lock found after waiting for its writer, which a
 * trigger then reads), the latest one.  A value older than one generation
 * behind its document's, by the snapshot it is read with, is refused
 * (XH401): its segments are gone.
 *
 * src/doc.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "lib/stringinfo.h"

#include "doc.h"

/* ---------------------------------------------------------------------
 * The type
 * ---------------------------------------------------------------------
 */

/* hxdoc's OID, where the installed scripts have it (InvalidOid before 0.7.0) */
Oid
hx_doc_typid(void)
{
	return GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
						   CStringGetDatum("hxdoc"),
						   ObjectIdGetDatum(hx_extension_namespace()));
}

/* Is typid hxdoc, or a domain over it? */
bool
hx_doc_is_type(Oid typid)
{
	Oid			doc;

	if (typid == JSONBOID || typid == InvalidOid)
		return false;
	doc = hx_doc_typid();
	return OidIsValid(doc) && getBaseType(typid) == doc;
}

/* A value, detoasted, its format checked */
HxDocHead *
hx_doc_detoast(Datum d)
{
	HxDocHead  *head = (HxDocHead *) PG_DETOAST_DATUM(d);
	Size		size = VARSIZE(head);
	bool		ok = false;

	if (size < HXDOC_HEADER_SIZE + VARHDRSZ)
		ok = false;
	else if (head->format == HXDOC_INLINE)
		ok = VARSIZE(head->data) == size - HXDOC_HEADER_SIZE;
	else if (head->format == HXDOC_CHUNKED &&
			 size >= HXDOC_HEADER_SIZE + HXDOC_CHUNKED_SIZE + VARHDRSZ)
	{
		HxDocChunked c;
		Size		fixed;

		hx_doc_chunked(head, &c);
		fixed = HXDOC_HEADER_SIZE + HXDOC_CHUNKED_SIZE + (Size) c.ndead * HXDOC_DEAD_SIZE;
		ok = c.ndead >= 0 && c.nsegs >= 0 && c.ndead <= (int32) (size / HXDOC_DEAD_SIZE) &&
			size >= fixed + VARHDRSZ && VARSIZE(head->data + (fixed - HXDOC_HEADER_SIZE)) == size - fixed;
	}
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("hxdoc value is corrupted"),
				 errdetail("Its header says format %d and %zu bytes.",
						   (int) head->format, size)));
	return head;
}

Jsonb *
hx_doc_inline_jsonb(HxDocHead *head)
{
	Assert(head->format == HXDOC_INLINE);
	return (Jsonb *) head->data;
}

/* The fixed part of a value in pieces */
void
hx_doc_chunked(HxDocHead *head, HxDocChunked *c)
{
	const char *p = head->data;

	Assert(head->format == HXDOC_CHUNKED);
	memcpy(&c->doc, p, sizeof(int64));
	memcpy(&c->gen, p + 8, sizeof(int64));
	memcpy(&c->gensum, p + 16, sizeof(int64));
	memcpy(&c->nsegs, p + 24, sizeof(int32));
	memcpy(&c->next_node, p + 28, sizeof(int32));
	memcpy(&c->ndead, p + 32, sizeof(int32));
}

/* The i'th segment a value in pieces lists as dead */
void
hx_doc_dead(HxDocHead *head, int i, HxSegId *id)
{
	const char *p = head->data + HXDOC_CHUNKED_SIZE + (Size) i * HXDOC_DEAD_SIZE;

	memcpy(&id->node, p, sizeof(int32));
	memcpy(&id->seg, p + 4, sizeof(int64));
	memcpy(&id->gen, p + 12, sizeof(int64));
}

Jsonb *
hx_doc_skeleton(HxDocHead *head)
{
	HxDocChunked c;

	hx_doc_chunked(head, &c);
	return (Jsonb *) (head->data + HXDOC_CHUNKED_SIZE + (Size) c.ndead * HXDOC_DEAD_SIZE);
}

HxDocHead *
hx_doc_make_inline(Jsonb *jb)
{
	Size		size = HXDOC_HEADER_SIZE + VARSIZE(jb);
	HxDocHead  *head = palloc0(size);

	SET_VARSIZE(head, size);
	head->format = HXDOC_INLINE;
	memcpy(head->data, jb, VARSIZE(jb));
	return head;
}

/* A value in pieces: c (its ndead set from dead, HxSegId *), and skeleton */
HxDocHead *
hx_doc_make_chunked(HxDocChunked *c, List *dead, Jsonb *skeleton)
{
	int32		ndead = list_length(dead);
	Size		fixed = HXDOC_HEADER_SIZE + HXDOC_CHUNKED_SIZE + (Size) ndead * HXDOC_DEAD_SIZE;
	Size		size = fixed + VARSIZE(skeleton);
	HxDocHead  *head = palloc0(size);
	char	   *p = head->data;
	ListCell   *lc;

	SET_VARSIZE(head, size);
	head->format = HXDOC_CHUNKED;
	memcpy(p, &c->doc, sizeof(int64));
	memcpy(p + 8, &c->gen, sizeof(int64));
	memcpy(p + 16, &c->gensum, sizeof(int64));
	memcpy(p + 24, &c->nsegs, sizeof(int32));
	memcpy(p + 28, &c->next_node, sizeof(int32));
	memcpy(p + 32, &ndead, sizeof(int32));
	p += HXDOC_CHUNKED_SIZE;
	foreach(lc, dead)
	{
		HxSegId    *id = (HxSegId *) lfirst(lc);

		memcpy(p, &id->node, sizeof(int32));
		memcpy(p + 4, &id->seg, sizeof(int64));
		memcpy(p + 12, &id->gen, sizeof(int64));
		p += HXDOC_DEAD_SIZE;
	}
	memcpy(head->data + (fixed - HXDOC_HEADER_SIZE), skeleton, VARSIZE(skeleton));
	return head;
}

/* A value of hxdoc as a jsonb datum of its own */
Jsonb *
hx_doc_to_jsonb(Datum value)
{
	HxDocHead  *head = hx_doc_detoast(value);

	if (head->format == HXDOC_INLINE)
	{
		Jsonb	   *jb = hx_doc_inline_jsonb(head);
		Jsonb	   *copy = palloc(VARSIZE(jb));

		memcpy(copy, jb, VARSIZE(jb));
		return copy;
	}
	return hx_doc_materialize(head, NULL);
}

PG_FUNCTION_INFO_V1(hxdoc_in);

Datum
hxdoc_in(PG_FUNCTION_ARGS)
{
	Jsonb	   *jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, PG_GETARG_DATUM(0)));

	PG_RETURN_POINTER(hx_doc_make_inline(jb));
}

PG_FUNCTION_INFO_V1(hxdoc_out);

Datum
hxdoc_out(PG_FUNCTION_ARGS)
{
	Jsonb	   *jb = hx_doc_to_jsonb(PG_GETARG_DATUM(0));

	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_out, JsonbPGetDatum(jb)));
}

PG_FUNCTION_INFO_V1(hxdoc_recv);

/*
 * jsonb's binary format: a version byte, then the JSON text.  jsonb_recv
 * refuses another version with an internal error; this says what it is.
 */
Datum
hxdoc_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	Jsonb	   *jb;

	if (buf->cursor >= buf->len)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("hxdoc binary value is empty"),
				 errdetail("Its binary format is jsonb's: version 1, then the JSON text.")));
	if (buf->data[buf->cursor] != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("unsupported hxdoc binary format version %d",
						(int) (unsigned char) buf->data[buf->cursor]),
				 errdetail("Its binary format is jsonb's: version 1, then the JSON text.")));
	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_recv, PointerGetDatum(buf)));
	PG_RETURN_POINTER(hx_doc_make_inline(jb));
}

PG_FUNCTION_INFO_V1(hxdoc_send);

Datum
hxdoc_send(PG_FUNCTION_ARGS)
{
	Jsonb	   *jb = hx_doc_to_jsonb(PG_GETARG_DATUM(0));

	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_send, JsonbPGetDatum(jb)));
}

PG_FUNCTION_INFO_V1(hxdoc_from_jsonb);

Datum
hxdoc_from_jsonb(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(hx_doc_make_inline(hx_detoast_jsonb(PG_GETARG_DATUM(0))));
}

PG_FUNCTION_INFO_V1(hxdoc_to_jsonb);

Datum
hxdoc_to_jsonb(PG_FUNCTION_ARGS)
{
	PG_RETURN_JSONB_P(hx_doc_to_jsonb(PG_GETARG_DATUM(0)));
}

/* ---------------------------------------------------------------------
 * Placeholders
 * ---------------------------------------------------------------------
 */

/* Is v a placeholder {"\0": node}?  Its node when it is */
bool
hx_is_placeholder(const JsonbValue *v, int32 *node)
{
	JsonbContainer *c;
	HxContainerIter it;
	JsonbValue	key;
	JsonbValue	val;

	if (v->type != jbvBinary)
		return false;
	c = v->val.binary.data;
	if (!JsonContainerIsObject(c) || JsonContainerSize(c) != 1)
		return false;
	hx_citer_init(&it, c, 0);
	hx_citer_next(&it, &key);
	if (key.val.string.len != 1 || key.val.string.val[0] != '\0')
		return false;
	hx_citer_next(&it, &val);
	if (val.type != jbvNumeric)
		return false;
	*node = DatumGetInt32(DirectFunctionCall1(numeric_int4,
											  NumericGetDatum(val.val.numeric)));
	return true;
}

HxNode *
hx_placeholder(int32 node)
{
	HxNode	   *obj = hx_node_new_object(1);

	hx_object_set(obj, "\0", 1,
				  hx_node_new_numeric(int64_to_numeric((int64) node)));
	return obj;
}

/* Does the container hold a placeholder, at any depth? */
static bool
holds_placeholder(JsonbContainer *c)
{
	HxContainerIter it;
	JsonbValue	v;
	int			n = JsonContainerSize(c);
	int			first = JsonContainerIsObject(c) ? n : 0;
	int			i;
	int32		node;

	check_stack_depth();
	hx_citer_init(&it, c, first);
	for (i = 0; i < n; i++)
	{
		hx_citer_next(&it, &v);
		if (v.type != jbvBinary)
			continue;
		if (hx_is_placeholder(&v, &node) || holds_placeholder(v.val.binary.data))
			return true;
	}
	return false;
}

/* ---------------------------------------------------------------------
 * A document's image: its segments as one generation sees them
 * ---------------------------------------------------------------------
 */

static void
error_stale(HxDocChunked *c)
{
	ereport(ERROR,
			(errcode(ERRCODE_HX_STALE_DOCUMENT),
			 errmsg("hxdoc value of document %lld, generation %lld, is no longer stored",
					(long long) c->doc, (long long) c->gen),
			 errdetail("Later writes of its row replaced its pieces, or its row was deleted; a value one generation behind its row's can still be read."),
			 errhint("A value read from a table with an hxdoc column belongs to its row: cast it to jsonb (value::jsonb) to keep it, or to copy it into a table or column without the hx_store trigger.")));
}

/* Does the value list the segment as dead? */
static bool
is_dead(HxDocHead *head, int32 ndead, HxSegId *id)
{
	int			i;
	HxSegId		d;

	for (i = 0; i < ndead; i++)
	{
		hx_doc_dead(head, i, &d);
		if (d.node == id->node && d.seg == id->seg && d.gen == id->gen)
			return true;
	}
	return false;
}

/*
 * Load the segments of a value in pieces, by snapshot: those written by
 * its generation or before that it does not list as dead (which go to
 * img->dead).  False when the snapshot does not show exactly the value's
 * (their number and the sum of their generations, doc.h): it is older
 * than the value, or later writes deleted some.
 */
bool
hx_image_load(HxDocHead *head, Snapshot snapshot, HxDocImage *img, HxReadMode mode)
{
	HxDocChunked c;
	List	   *segs;
	ListCell   *lc;
	int			cap = 8;

	hx_doc_chunked(head, &c);
	memset(img, 0, sizeof(HxDocImage));
	img->doc = c.doc;
	img->gen = c.gen;
	segs = hx_chunk_read_segments(c.doc, snapshot, mode);
	img->nodes = palloc(sizeof(HxNodeSegs) * cap);
	foreach(lc, segs)
	{
		HxSegment  *s = (HxSegment *) lfirst(lc);
		HxNodeSegs *ns;

		if (s->id.gen > c.gen)
		{
			img->newer++;
			continue;			/* written after this generation */
		}
		if (is_dead(head, c.ndead, &s->id))
		{
			img->dead = lappend(img->dead, s);
			continue;			/* replaced by it */
		}
		ns = (img->nnodes > 0) ? &img->nodes[img->nnodes - 1] : NULL;
		if (ns == NULL || ns->node != s->id.node)
		{
			if (img->nnodes == cap)
			{
				cap *= 2;
				img->nodes = repalloc(img->nodes, sizeof(HxNodeSegs) * cap);
			}
			ns = &img->nodes[img->nnodes++];
			ns->node = s->id.node;
			ns->nsegs = 0;
			ns->placed = false;
			ns->segs = palloc(sizeof(HxSegment *) * Max(list_length(segs), 1));
		}
		/* two versions of a segment: the older one is one a later write purged */
		if (ns->nsegs > 0 && ns->segs[ns->nsegs - 1]->id.seg == s->id.seg)
			return false;
		ns->segs[ns->nsegs++] = s;
		img->nsegs++;
		img->gensum += s->id.gen;
	}
	return img->nsegs == c.nsegs && img->gensum == c.gensum;
}

/*
 * The snapshot a value is read with: the historic one in logical
 * decoding, else the active one (a statement's), else the transaction's
 */
static Snapshot
reading_snapshot(void)
{
	if (HistoricSnapshotActive())
		return GetCatalogSnapshot(hx_extension_relid("hx_chunk"));
	if (ActiveSnapshotSet())
		return GetActiveSnapshot();
	return GetTransactionSnapshot();
}

/*
 * Load a value in pieces as a reader sees it: by the reader's snapshot, or
 * when that does not show all its segments (a row version that an UPDATE
 * found after waiting for its writer, or one this statement wrote: an
 * AFTER trigger reads NEW), by the latest; an error when they are gone.
 */
void
hx_image_load_any(HxDocHead *head, HxDocImage *img, HxReadMode mode)
{
	Snapshot	snapshot = reading_snapshot();
	bool		ok;

	/* registered: a scan takes only a registered or active snapshot */
	if (!HistoricSnapshotActive())
		snapshot = RegisterSnapshot(snapshot);
	ok = hx_image_load(head, snapshot, img, mode);
	if (!HistoricSnapshotActive())
		UnregisterSnapshot(snapshot);

	if (!ok && !HistoricSnapshotActive())
	{
		Snapshot	latest = RegisterSnapshot(GetLatestSnapshot());

		ok = hx_image_load(head, latest, img, mode);
		UnregisterSnapshot(latest);
	}
	if (!ok)
	{
		HxDocChunked c;

		hx_doc_chunked(head, &c);
		error_stale(&c);
	}
}

/* The segments of node in the image; NULL when it has none */
HxNodeSegs *
hx_image_node(HxDocImage *img, int32 node)
{
	int			lo = 0;
	int			hi = img->nnodes - 1;

	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;

		if (img->nodes[mid].node == node)
			return &img->nodes[mid];
		if (img->nodes[mid].node < node)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

/* A segment of a node: an array, or an object, as the node's first is */
static void
check_part(HxDocImage *img, int32 node, Jsonb *body, bool object)
{
	if (JB_ROOT_IS_SCALAR(body) || (bool) JB_ROOT_IS_OBJECT(body) != object)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("node %d of document %lld mixes arrays, objects and strings",
						node, (long long) img->doc)));
}

/* A string node: its pieces (scalars), one after the other */
static HxNode *
string_tree(HxDocImage *img, int32 node, HxNodeSegs *ns)
{
	StringInfoData str;
	JsonbValue	v;
	int			i;

	initStringInfo(&str);
	for (i = 0; i < ns->nsegs; i++)
	{
		Jsonb	   *body = hx_segment_body(ns->segs[i]);

		if (JB_ROOT_IS_SCALAR(body))
			hx_jsonb_root_value(body, &v);
		if (!JB_ROOT_IS_SCALAR(body) || v.type != jbvString)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("node %d of document %lld mixes strings with other values",
							node, (long long) img->doc)));
		appendBinaryStringInfo(&str, v.val.string.val, v.val.string.len);
	}
	v.type = jbvString;
	v.val.string.val = str.data;
	v.val.string.len = str.len;
	return hx_node_from_value(&v);
}

static HxNode *value_tree(HxDocImage *img, const JsonbValue *v, bool refs);

/*
 * A node of the image, whole, as a tree: spliced from its segments (their
 * children copied as bytes by the encoder) when none holds a placeholder,
 * else unpacked, its placeholders replaced by their nodes
 */
static HxNode *
node_tree(HxDocImage *img, int32 node)
{
	HxNodeSegs *ns = hx_image_node(img, node);
	HxNode	   *result = NULL;
	JsonbContainer **parts;
	Jsonb	   *first;
	bool		refs = false;
	bool		object;
	int			i;

	check_stack_depth();
	if (ns == NULL || ns->nsegs == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("document %lld has no segments of node %d at generation %lld",
						(long long) img->doc, node, (long long) img->gen)));
	/* each node has one place in its document: one held twice is damage */
	if (ns->placed)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("node %d of document %lld is held by two placeholders, or by one inside itself",
						node, (long long) img->doc)));
	ns->placed = true;
	first = hx_segment_body(ns->segs[0]);
	if (JB_ROOT_IS_SCALAR(first))
		return string_tree(img, node, ns);
	object = JB_ROOT_IS_OBJECT(first);
	for (i = 0; i < ns->nsegs; i++)
		refs |= ns->segs[i]->refs > 0;
	parts = palloc(sizeof(JsonbContainer *) * ns->nsegs);

	/* an array without placeholders: its segments loaded as it is encoded */
	if (!refs && !object)
	{
		void	  **lazy = palloc(sizeof(void *) * ns->nsegs);
		int32	   *rawlens = palloc(sizeof(int32) * ns->nsegs);
		int32	   *counts = palloc(sizeof(int32) * ns->nsegs);

		for (i = 0; i < ns->nsegs; i++)
		{
			HxSegment  *s = ns->segs[i];

			if (s->body != NULL)
			{
				check_part(img, node, s->body, false);
				parts[i] = &s->body->root;
				continue;
			}
			if (s->n < 0 || s->n > (int32) JB_CMASK ||
				(int64) s->rawlen < (int64) (VARHDRSZ + sizeof(uint32) + sizeof(JEntry) * (int64) s->n))
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("segment (%d, %lld, %lld) of document %lld says it holds %d elements in %d bytes",
								node, (long long) s->id.seg, (long long) s->id.gen,
								(long long) img->doc, s->n, s->rawlen)));
			parts[i] = NULL;
			lazy[i] = s;
			rawlens[i] = s->rawlen;
			counts[i] = s->n;
		}
		return hx_node_new_spliced_lazy(parts, lazy, rawlens, counts, ns->nsegs,
										hx_segment_load);
	}

	for (i = 0; i < ns->nsegs; i++)
	{
		Jsonb	   *body = hx_segment_body(ns->segs[i]);

		check_part(img, node, body, object);
		parts[i] = &body->root;
	}
	if (!refs)
		return hx_node_new_spliced(object, parts, ns->nsegs);

	for (i = 0; i < ns->nsegs; i++)
	{
		Jsonb	   *body = ns->segs[i]->body;
		bool		segrefs = ns->segs[i]->refs > 0;
		HxContainerIter it;
		JsonbValue	v;
		int			n = JB_ROOT_COUNT(body);
		int			j;

		CHECK_FOR_INTERRUPTS();
		if (result == NULL)
			result = object ? hx_node_new_object(n) : hx_node_new_array(n);
		if (!object)
		{
			hx_citer_init(&it, &body->root, 0);
			for (j = 0; j < n; j++)
			{
				hx_citer_next(&it, &v);
				hx_array_append(result, value_tree(img, &v, segrefs));
			}
		}
		else
		{
			HxContainerIter kit;
			JsonbValue	k;

			hx_citer_init(&kit, &body->root, 0);
			hx_citer_init(&it, &body->root, n);
			for (j = 0; j < n; j++)
			{
				hx_citer_next(&kit, &k);
				hx_citer_next(&it, &v);
				hx_object_set(result, k.val.string.val, k.val.string.len,
							  value_tree(img, &v, segrefs));
			}
		}
	}
	return result;
}

/*
 * A value of a skeleton or segment as a tree: its bytes, but where it
 * holds placeholders (refs), with each replaced by its node.
 */
static HxNode *
value_tree(HxDocImage *img, const JsonbValue *v, bool refs)
{
	int32		node;
	HxNode	   *n;
	HxContainerIter it;
	JsonbValue	child;
	int			count;
	int			i;

	check_stack_depth();
	if (!refs || v->type != jbvBinary)
		return hx_node_from_value(v);
	if (hx_is_placeholder(v, &node))
		return node_tree(img, node);
	if (!holds_placeholder(v->val.binary.data))
		return hx_node_from_value(v);

	count = JsonContainerSize(v->val.binary.data);
	if (JsonContainerIsArray(v->val.binary.data))
	{
		n = hx_node_new_array(count);
		hx_citer_init(&it, v->val.binary.data, 0);
		for (i = 0; i < count; i++)
		{
			hx_citer_next(&it, &child);
			hx_array_append(n, value_tree(img, &child, true));
		}
	}
	else
	{
		HxContainerIter kit;
		JsonbValue	k;

		n = hx_node_new_object(count);
		hx_citer_init(&kit, v->val.binary.data, 0);
		hx_citer_init(&it, v->val.binary.data, count);
		for (i = 0; i < count; i++)
		{
			hx_citer_next(&kit, &k);
			hx_citer_next(&it, &child);
			hx_object_set(n, k.val.string.val, k.val.string.len,
						  value_tree(img, &child, true));
		}
	}
	return n;
}

HxNode *
hx_image_tree(HxDocImage *img, const JsonbValue *v)
{
	return value_tree(img, v, true);
}

/*
 * A value in pieces, whole, as a jsonb datum: by snapshot (NULL: the
 * statement's), or by the latest one when it is newer than that.
 */
Jsonb *
hx_doc_materialize(HxDocHead *head, Snapshot snapshot)
{
	HxDocImage	img;
	JsonbValue	root;
	MemoryContext callcxt = CurrentMemoryContext;
	MemoryContext workcxt;
	MemoryContext oldcxt;
	Jsonb	   *result;

	if (head->format == HXDOC_INLINE)
		return hx_doc_inline_jsonb(head);

	/* the segments and the tree: freed once the result is encoded */
	workcxt = AllocSetContextCreate(callcxt, "hxdoc read", ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(workcxt);
	if (snapshot == NULL)
		hx_image_load_any(head, &img, HX_READ_LAZY);
	else if (!hx_image_load(head, snapshot, &img, HX_READ_LAZY))
	{
		HxDocChunked c;

		hx_doc_chunked(head, &c);
		error_stale(&c);
	}
	hx_jsonb_root_value(hx_doc_skeleton(head), &root);
	result = hx_node_to_jsonb(hx_image_tree(&img, &root), callcxt);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(workcxt);
	return result;
}

/* ---------------------------------------------------------------------
 * hx_doc_info
 * ---------------------------------------------------------------------
 */

PG_FUNCTION_INFO_V1(hx_doc_info);

/*
 * hx_doc_info(value hxdoc) -> (format, doc, gen, nodes, segments,
 * stored_bytes, json_bytes): how a value is stored.  For a value in
 * pieces: its document and generation, and the nodes and segments of that
 * generation, with their stored (compressed) bytes and the skeleton's.
 */
Datum
hx_doc_info(PG_FUNCTION_ARGS)
{
	HxDocHead  *head = hx_doc_detoast(PG_GETARG_DATUM(0));
	TupleDesc	desc;
	Datum		values[7];
	bool		nulls[7] = {false, false, false, false, false, false, false};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (head->format == HXDOC_INLINE)
	{
		Jsonb	   *jb = hx_doc_inline_jsonb(head);

		values[0] = CStringGetTextDatum("inline");
		nulls[1] = nulls[2] = true;
		values[3] = Int32GetDatum(0);
		values[4] = Int32GetDatum(0);
		values[5] = Int64GetDatum((int64) toast_datum_size(PG_GETARG_DATUM(0)));
		values[6] = Int64GetDatum((int64) VARSIZE(jb) - VARHDRSZ);
	}
	else
	{
		HxDocImage	img;
		HxDocChunked c;
		int64		segments = 0;
		int64		stored = toast_datum_size(PG_GETARG_DATUM(0));
		int			i;
		int			j;
		Jsonb	   *whole = hx_doc_materialize(head, NULL);

		hx_doc_chunked(head, &c);
		hx_image_load_any(head, &img, HX_READ_KEYS);
		for (i = 0; i < img.nnodes; i++)
			for (j = 0; j < img.nodes[i].nsegs; j++)
			{
				segments++;
				stored += img.nodes[i].segs[j]->stored;
			}
		values[0] = CStringGetTextDatum("chunked");
		values[1] = Int64GetDatum(c.doc);
		values[2] = Int64GetDatum(c.gen);
		values[3] = Int32GetDatum(img.nnodes);
		values[4] = Int32GetDatum((int32) segments);
		values[5] = Int64GetDatum(stored);
		values[6] = Int64GetDatum((int64) VARSIZE(whole) - VARHDRSZ);
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
