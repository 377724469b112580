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
 * whole reads the document's row of hx_doc and its segments, through the
 * primary keys, with the snapshot of the statement that reads it (so that
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
	bool		ok;

	if (size < HXDOC_HEADER_SIZE + VARHDRSZ)
		ok = false;
	else if (head->format == HXDOC_INLINE)
		ok = VARSIZE(head->data) == size - HXDOC_HEADER_SIZE;
	else if (head->format == HXDOC_CHUNKED)
		ok = size >= HXDOC_HEADER_SIZE + HXDOC_CHUNKED_IDS_SIZE + VARHDRSZ &&
			VARSIZE(head->data + HXDOC_CHUNKED_IDS_SIZE) ==
			size - HXDOC_HEADER_SIZE - HXDOC_CHUNKED_IDS_SIZE;
	else
		ok = false;
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

int64
hx_doc_id(HxDocHead *head)
{
	int64		doc;

	Assert(head->format == HXDOC_CHUNKED);
	memcpy(&doc, head->data, sizeof(int64));
	return doc;
}

int64
hx_doc_gen(HxDocHead *head)
{
	int64		gen;

	Assert(head->format == HXDOC_CHUNKED);
	memcpy(&gen, head->data + sizeof(int64), sizeof(int64));
	return gen;
}

Jsonb *
hx_doc_skeleton(HxDocHead *head)
{
	Assert(head->format == HXDOC_CHUNKED);
	return (Jsonb *) (head->data + HXDOC_CHUNKED_IDS_SIZE);
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

HxDocHead *
hx_doc_make_chunked(int64 doc, int64 gen, Jsonb *skeleton)
{
	Size		size = HXDOC_HEADER_SIZE + HXDOC_CHUNKED_IDS_SIZE + VARSIZE(skeleton);
	HxDocHead  *head = palloc0(size);

	SET_VARSIZE(head, size);
	head->format = HXDOC_CHUNKED;
	memcpy(head->data, &doc, sizeof(int64));
	memcpy(head->data + sizeof(int64), &gen, sizeof(int64));
	memcpy(head->data + HXDOC_CHUNKED_IDS_SIZE, skeleton, VARSIZE(skeleton));
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

/* jsonb's binary format: a version byte, then the JSON text */
Datum
hxdoc_recv(PG_FUNCTION_ARGS)
{
	Jsonb	   *jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_recv, PG_GETARG_DATUM(0)));

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
error_stale(int64 doc, int64 gen, int64 stored, bool gone)
{
	ereport(ERROR,
			(errcode(ERRCODE_HX_STALE_DOCUMENT),
			 gone ?
			 errmsg("hxdoc value of document %lld no longer exists", (long long) doc) :
			 errmsg("hxdoc value of document %lld, generation %lld, is no longer stored",
					(long long) doc, (long long) gen),
			 gone ?
			 errdetail("Its row was deleted, or its column changed, and its pieces were removed.") :
			 errdetail("The document is at generation %lld; a value one generation behind it can still be read.",
					   (long long) stored),
			 errhint("A value read from a table with an hxdoc column belongs to its row: cast it to jsonb (value::jsonb) to keep it.")));
}

static bool
is_dead(HxDocRow *row, HxSegId *id)
{
	int			i;

	for (i = 0; i < row->ndead; i++)
		if (row->dead[i].node == id->node && row->dead[i].seg == id->seg &&
			row->dead[i].gen == id->gen)
			return true;
	return false;
}

/*
 * Load the segments of generation gen of doc, by snapshot: those written
 * by generations up to gen that gen has not replaced (the segments the
 * stored generation replaced, which gen == stored - 1 still reads, go to
 * img->dead too).
 */
HxImageStatus
hx_image_load(int64 doc, int64 gen, Snapshot snapshot, HxDocImage *img)
{
	List	   *segs;
	ListCell   *lc;
	int			cap = 8;

	memset(img, 0, sizeof(HxDocImage));
	img->doc = doc;
	img->gen = gen;
	if (!hx_chunk_read_doc(doc, snapshot, &img->row))
		return HX_IMAGE_GONE;
	if (gen > img->row.gen)
		return HX_IMAGE_NEWER;
	if (gen < img->row.gen - 1)
		return HX_IMAGE_GONE;

	segs = hx_chunk_read_segments(doc, snapshot, true);
	img->nodes = palloc(sizeof(HxNodeSegs) * cap);
	foreach(lc, segs)
	{
		HxSegment  *s = (HxSegment *) lfirst(lc);
		HxNodeSegs *ns;
		bool		dead = is_dead(&img->row, &s->id);

		if (dead)
			img->dead = lappend(img->dead, s);
		/* written after gen, or replaced by gen */
		if (s->id.gen > gen || (gen == img->row.gen && dead))
			continue;
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
			ns->segs = palloc(sizeof(HxSegment *) * Max(list_length(segs), 1));
		}
		if (ns->nsegs > 0 && ns->segs[ns->nsegs - 1]->id.seg == s->id.seg)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("document %lld has two versions of segment %lld of node %d at generation %lld",
							(long long) doc, (long long) s->id.seg, s->id.node,
							(long long) gen)));
		ns->segs[ns->nsegs++] = s;
	}
	return HX_IMAGE_OK;
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
 * Load generation gen of doc as a reader sees it: by the reader's
 * snapshot, or when that cannot see it, by the latest; an error when it is
 * gone.
 */
void
hx_image_load_any(int64 doc, int64 gen, HxDocImage *img)
{
	HxImageStatus status = hx_image_load(doc, gen, reading_snapshot(), img);

	/*
	 * Newer than the snapshot, or made after it: a row version an UPDATE
	 * found after waiting for its writer, or one this statement wrote (an
	 * AFTER trigger reads NEW)
	 */
	if (status != HX_IMAGE_OK && !HistoricSnapshotActive())
	{
		Snapshot	latest = RegisterSnapshot(GetLatestSnapshot());

		status = hx_image_load(doc, gen, latest, img);
		UnregisterSnapshot(latest);
	}
	if (status != HX_IMAGE_OK)
		error_stale(doc, gen, img->row.gen, status == HX_IMAGE_GONE && img->row.doc == 0);
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

static HxNode *value_tree(HxDocImage *img, const JsonbValue *v, bool refs);

/* A node of the image, whole, as a tree */
static HxNode *
node_tree(HxDocImage *img, int32 node)
{
	HxNodeSegs *ns = hx_image_node(img, node);
	HxNode	   *result = NULL;
	int			i;

	check_stack_depth();
	if (ns == NULL || ns->nsegs == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("document %lld has no segments of node %d at generation %lld",
						(long long) img->doc, node, (long long) img->gen)));
	for (i = 0; i < ns->nsegs; i++)
	{
		Jsonb	   *body = ns->segs[i]->body;
		bool		refs = ns->segs[i]->refs > 0;
		HxContainerIter it;
		JsonbValue	v;
		int			n;
		int			j;

		CHECK_FOR_INTERRUPTS();
		if (JB_ROOT_IS_SCALAR(body))
		{
			hx_jsonb_root_value(body, &v);
			return hx_node_from_value(&v);
		}
		n = JB_ROOT_COUNT(body);
		if (result == NULL)
			result = JB_ROOT_IS_ARRAY(body) ? hx_node_new_array(n) : hx_node_new_object(n);
		if (JB_ROOT_IS_ARRAY(body) != (result->kind == HX_ARRAY))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("node %d of document %lld mixes arrays and objects",
							node, (long long) img->doc)));
		if (result->kind == HX_ARRAY)
		{
			hx_citer_init(&it, &body->root, 0);
			for (j = 0; j < n; j++)
			{
				hx_citer_next(&it, &v);
				hx_array_append(result, value_tree(img, &v, refs));
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
							  value_tree(img, &v, refs));
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
	int64		doc;
	int64		gen;

	if (head->format == HXDOC_INLINE)
		return hx_doc_inline_jsonb(head);

	doc = hx_doc_id(head);
	gen = hx_doc_gen(head);
	/* the segments and the tree: freed once the result is encoded */
	workcxt = AllocSetContextCreate(callcxt, "hxdoc read", ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(workcxt);
	if (snapshot == NULL)
		hx_image_load_any(doc, gen, &img);
	else if (hx_image_load(doc, gen, snapshot, &img) != HX_IMAGE_OK)
		error_stale(doc, gen, img.row.gen, img.row.doc == 0);
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
		int64		segments = 0;
		int64		stored = toast_datum_size(PG_GETARG_DATUM(0));
		int			i;
		int			j;
		Jsonb	   *whole = hx_doc_materialize(head, NULL);

		hx_image_load_any(hx_doc_id(head), hx_doc_gen(head), &img);
		for (i = 0; i < img.nnodes; i++)
			for (j = 0; j < img.nodes[i].nsegs; j++)
			{
				segments++;
				stored += img.nodes[i].segs[j]->stored;
			}
		values[0] = CStringGetTextDatum("chunked");
		values[1] = Int64GetDatum(hx_doc_id(head));
		values[2] = Int64GetDatum(hx_doc_gen(head));
		values[3] = Int32GetDatum(img.nnodes);
		values[4] = Int32GetDatum((int32) segments);
		values[5] = Int64GetDatum(stored);
		values[6] = Int64GetDatum((int64) VARSIZE(whole) - VARHDRSZ);
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
