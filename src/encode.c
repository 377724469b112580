/*-------------------------------------------------------------------------
 *
 * encode.c
 *	  The encoder: an HxNode tree back into a jsonb datum, byte for byte as
 *	  core's convertToJsonb() would write it.
 *
 * jsonb's on-disk format (utils/jsonb.h): a container is a header word
 * (count and kind), one JEntry per child, every JB_OFFSET_STRIDE'th of
 * them holding the end offset of its child's data and the others its
 * length, then the children's data; numerics and containers start 4-byte
 * aligned, with zero padding before them counted in the JEntry of the
 * child they precede; an object lists its keys, in jsonb key order, before
 * its values.  A container's bytes do not depend on where it sits, as long
 * as it starts 4-byte aligned, so an untouched (HX_BINARY) container is
 * copied as it is, and the result equals core's encoding of the same value
 * (test/pgtap/encoding.sql compares the bytes).
 *
 * The encoder first computes the exact size of the result, which is also
 * the place where a result larger than jsonb can hold is refused (54000)
 * before any memory is spent on it, and then writes into a buffer of
 * exactly that size.
 *
 * src/encode.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "tree.h"

/* The encoder checks for interrupts once per this many children */
#define ENCODE_INTERRUPT_STRIDE	1024

/* ---------------------------------------------------------------------
 * Sizes
 * ---------------------------------------------------------------------
 */

void
hx_error_too_large(Size size)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("jsonb value would exceed the maximum size of %zu bytes",
					HX_JSONB_MAX_SIZE),
			 errdetail("The result would take at least %zu bytes.", size)));
}

/* Padding that brings offset to the next multiple of 4 */
static inline Size
pad_to_int(Size offset)
{
	return INTALIGN(offset) - offset;
}

/* Does a child of this kind start 4-byte aligned? */
static inline bool
is_aligned(const HxNode *n)
{
	return n->kind != HX_SCALAR || n->u.scalar.type == jbvNumeric;
}

static Size node_size(HxNode *n);

/*
 * Set by a size pass (hx_node_encoded_size): whether the size is an upper
 * bound (a spliced node has lazy parts, whose children's padding is not
 * known), and the nodes it counted: each pads at most 3 bytes more than
 * its offset in the bound says.
 */
static bool size_inexact;
static Size size_nodes;

/* The bytes of an on-disk child as the encoder writes it (no padding) */
static inline Size
value_data_size(const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvString:
			return v->val.string.len;
		case jbvNumeric:
			return VARSIZE_ANY(v->val.numeric);
		case jbvBinary:
			return v->val.binary.len;
		default:
			return 0;
	}
}

/*
 * The size of a spliced node's data area from offset: its parts' children
 * (objects: every key, then every value), each padded as it will be.  Not
 * inlined: its locals would grow the frame of every level of node_size()'s
 * recursion.
 */
static pg_noinline Size
spliced_size(HxNode *n, Size offset)
{
	bool		exact = true;
	int			values;
	int			p;

	/* an object's keys: strings, never padded */
	for (values = n->u.spl.object ? 0 : 1; values < 2; values++)
		for (p = 0; p < n->u.spl.nparts && offset <= HX_JSONB_MAX_SIZE; p++)
		{
			JsonbContainer *c = n->u.spl.parts[p];
			int			count;
			HxContainerIter it;
			JsonbValue	v;
			int			i;

			CHECK_FOR_INTERRUPTS();
			if (c == NULL)
			{
				/*
				 * A lazy part (an array's): its children's bytes are at most
				 * its data area, each padded at most 3 bytes more than it is
				 * there
				 */
				count = n->u.spl.counts[p];
				offset += (Size) n->u.spl.rawlens[p] - VARHDRSZ - sizeof(uint32) -
					sizeof(JEntry) * (Size) count + 3 * (Size) count;
				exact = false;
				size_inexact = true;
				continue;
			}
			count = JsonContainerSize(c);
			hx_citer_init(&it, c, (n->u.spl.object && values) ? count : 0);
			for (i = 0; i < count; i++)
			{
				hx_citer_next(&it, &v);
				if (v.type == jbvNumeric || v.type == jbvBinary)
					offset += exact ? pad_to_int(offset) : 3;
				offset += value_data_size(&v);
			}
		}
	return offset;
}

/*
 * The size of a container's data area after its header and JEntries,
 * which end 4-byte aligned: each child's data, padded as it will be.
 * Stops early, with a size over the limit, once the limit is passed.
 */
static Size
children_size(HxNode **children, int n, Size offset)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		HxNode	   *child = children[i];

		if ((i % ENCODE_INTERRUPT_STRIDE) == 0)
			CHECK_FOR_INTERRUPTS();
		if (is_aligned(child))
			offset += pad_to_int(offset);
		offset += node_size(child);
		if (offset > HX_JSONB_MAX_SIZE)
			break;
	}
	return offset;
}

/* The number of bytes the encoder writes for n (after any padding) */
static Size
node_size(HxNode *n)
{
	Size		size;
	int			i;

	check_stack_depth();
	size_nodes++;

	switch (n->kind)
	{
		case HX_SCALAR:
			switch (n->u.scalar.type)
			{
				case jbvString:
					return n->u.scalar.val.string.len;
				case jbvNumeric:
					return VARSIZE_ANY(n->u.scalar.val.numeric);
				default:
					return 0;	/* null and booleans live in the JEntry */
			}
		case HX_BINARY:
			return n->u.bin.len;
		case HX_ARRAY:
			size = sizeof(uint32) + sizeof(JEntry) * (Size) n->u.arr.n;
			return children_size(n->u.arr.elems, n->u.arr.n, size);
		case HX_SPLICED:
			size = sizeof(uint32) + sizeof(JEntry) * (n->u.spl.object ? 2 : 1) * (Size) n->u.spl.n;
			return spliced_size(n, size);
		case HX_OBJECT:
			/* keys first, in key order: the padding depends on the order */
			hx_object_normalize(n);
			size = sizeof(uint32) + sizeof(JEntry) * 2 * (Size) n->u.obj.n;
			for (i = 0; i < n->u.obj.n; i++)
				size += n->u.obj.pairs[i].keylen;
			for (i = 0; i < n->u.obj.n && size <= HX_JSONB_MAX_SIZE; i++)
			{
				HxNode	   *child = n->u.obj.pairs[i].value;

				if ((i % ENCODE_INTERRUPT_STRIDE) == 0)
					CHECK_FOR_INTERRUPTS();
				if (is_aligned(child))
					size += pad_to_int(size);
				size += node_size(child);
			}
			return size;
	}
	return 0;					/* keep compiler quiet */
}

/*
 * The size of n's encoding as a container: a scalar becomes the one
 * element of a raw-scalar array, as at the root of a jsonb datum.  A
 * result over HX_JSONB_MAX_SIZE is only known to be over it.
 */
Size
hx_node_encoded_size(HxNode *n)
{
	Size		size;

	size_inexact = false;
	size_nodes = 0;
	if (n->kind == HX_SCALAR)
		size = children_size(&n, 1, sizeof(uint32) + sizeof(JEntry));
	else
		size = node_size(n);
	if (size_inexact)
		size += 3 * size_nodes;
	return size;
}

/* ---------------------------------------------------------------------
 * Writing
 * ---------------------------------------------------------------------
 */

/*
 * The output: a buffer of exactly the computed size, or of at most it
 * (bounded: lazy parts); and the buffer lazy parts are loaded into, one
 * at a time
 */
typedef struct EncodeBuf
{
	char	   *data;
	Size		len;
	Size		cap;
	bool		bounded;
	char	   *scratch;
	Size		scratchcap;
} EncodeBuf;

static inline void
buf_append(EncodeBuf *buf, const void *data, Size n)
{
	if (unlikely(buf->len + n > buf->cap))
		elog(ERROR, "jsonb encoding passes its computed size");
	memcpy(buf->data + buf->len, data, n);
	buf->len += n;
}

static inline Size
buf_reserve(EncodeBuf *buf, Size n)
{
	Size		offset = buf->len;

	if (unlikely(buf->len + n > buf->cap))
		elog(ERROR, "jsonb encoding passes its computed size");
	buf->len += n;
	return offset;
}

static inline uint32
buf_pad_to_int(EncodeBuf *buf)
{
	uint32		padlen = pad_to_int(buf->len);

	if (unlikely(buf->len + padlen > buf->cap))
		elog(ERROR, "jsonb encoding passes its computed size");
	memset(buf->data + buf->len, 0, padlen);
	buf->len += padlen;
	return padlen;
}

static JEntry encode_node(EncodeBuf *buf, HxNode *n);

static JEntry
encode_scalar(EncodeBuf *buf, const JsonbValue *v)
{
	uint32		numlen;
	uint32		padlen;

	switch (v->type)
	{
		case jbvNull:
			return JENTRY_ISNULL;
		case jbvBool:
			return v->val.boolean ? JENTRY_ISBOOL_TRUE : JENTRY_ISBOOL_FALSE;
		case jbvString:
			buf_append(buf, v->val.string.val, v->val.string.len);
			return JENTRY_ISSTRING | v->val.string.len;
		case jbvNumeric:
			numlen = VARSIZE_ANY(v->val.numeric);
			padlen = buf_pad_to_int(buf);
			buf_append(buf, v->val.numeric, numlen);
			return JENTRY_ISNUMERIC | (padlen + numlen);
		default:
			elog(ERROR, "unexpected jsonb scalar type %d", (int) v->type);
	}
	return 0;					/* keep compiler quiet */
}

/* Store child i's JEntry, turning every JB_OFFSET_STRIDE'th into an offset */
static inline void
store_jentry(EncodeBuf *buf, Size jentry_offset, int i, JEntry meta,
			 uint32 *totallen)
{
	*totallen += JBE_OFFLENFLD(meta);
	Assert(*totallen <= JENTRY_OFFLENMASK);
	if ((i % JB_OFFSET_STRIDE) == 0)
		meta = (meta & JENTRY_TYPEMASK) | *totallen | JENTRY_HAS_OFF;
	memcpy(buf->data + jentry_offset + i * sizeof(JEntry), &meta, sizeof(JEntry));
}

static JEntry
encode_array(EncodeBuf *buf, HxNode **elems, int n, bool rawscalar)
{
	Size		base_offset;
	Size		jentry_offset;
	uint32		header = n | JB_FARRAY;
	uint32		totallen = 0;
	uint32		padlen;
	int			i;

	padlen = buf_pad_to_int(buf);
	base_offset = buf->len;
	if (rawscalar)
		header |= JB_FSCALAR;
	buf_append(buf, &header, sizeof(uint32));
	jentry_offset = buf_reserve(buf, sizeof(JEntry) * n);

	for (i = 0; i < n; i++)
	{
		if ((i % ENCODE_INTERRUPT_STRIDE) == 0)
			CHECK_FOR_INTERRUPTS();
		store_jentry(buf, jentry_offset, i, encode_node(buf, elems[i]),
					 &totallen);
	}
	return JENTRY_ISCONTAINER | (padlen + (buf->len - base_offset));
}

static JEntry
encode_object(EncodeBuf *buf, HxNode *obj)
{
	Size		base_offset;
	Size		jentry_offset;
	uint32		header;
	uint32		totallen = 0;
	uint32		padlen;
	HxPair	   *pairs;
	int			n;
	int			i;

	hx_object_normalize(obj);
	pairs = obj->u.obj.pairs;
	n = obj->u.obj.n;

	padlen = buf_pad_to_int(buf);
	base_offset = buf->len;
	header = n | JB_FOBJECT;
	buf_append(buf, &header, sizeof(uint32));
	jentry_offset = buf_reserve(buf, sizeof(JEntry) * n * 2);

	for (i = 0; i < n; i++)
	{
		buf_append(buf, pairs[i].key, pairs[i].keylen);
		store_jentry(buf, jentry_offset, i,
					 JENTRY_ISSTRING | pairs[i].keylen, &totallen);
	}
	for (i = 0; i < n; i++)
	{
		if ((i % ENCODE_INTERRUPT_STRIDE) == 0)
			CHECK_FOR_INTERRUPTS();
		store_jentry(buf, jentry_offset, n + i,
					 encode_node(buf, pairs[i].value), &totallen);
	}
	return JENTRY_ISCONTAINER | (padlen + (buf->len - base_offset));
}

/* An on-disk child, copied: its bytes, after its padding; its JEntry */
static inline JEntry
encode_value(EncodeBuf *buf, const JsonbValue *v)
{
	uint32		padlen;

	if (v->type != jbvBinary)
		return encode_scalar(buf, v);
	padlen = buf_pad_to_int(buf);
	buf_append(buf, v->val.binary.data, v->val.binary.len);
	return JENTRY_ISCONTAINER | (padlen + v->val.binary.len);
}

/*
 * A lazy part of a spliced array, loaded into the scratch buffer (which
 * the next part reuses): an array of the count it was said to have, as
 * the JEntries reserved for it
 */
static JsonbContainer *
load_part(EncodeBuf *buf, HxNode *n, int p)
{
	Size		rawlen = (Size) n->u.spl.rawlens[p];
	Jsonb	   *jb;

	if (buf->scratchcap < rawlen)
	{
		if (buf->scratch)
			pfree(buf->scratch);
		buf->scratchcap = Max(rawlen, 2 * buf->scratchcap);
		buf->scratch = palloc(buf->scratchcap);
	}
	n->u.spl.load(n->u.spl.lazy[p], buf->scratch);
	jb = (Jsonb *) buf->scratch;
	if (VARSIZE(jb) != rawlen || !JB_ROOT_IS_ARRAY(jb) || JB_ROOT_IS_SCALAR(jb) ||
		JB_ROOT_COUNT(jb) != (uint32) n->u.spl.counts[p])
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("a part of a jsonb array is not what it was said to be"),
				 errdetail("It was said to be an array of %d elements in %zu bytes.",
						   n->u.spl.counts[p], rawlen)));
	return &jb->root;
}

/*
 * An array part's children as one block of bytes, their JEntries rewritten
 * (lengths and offsets, as store_jentry() lays them out): what copying them
 * one by one gives, when the part's data lands at the alignment it has in
 * its own datum (every datum starts int-aligned, and so does the data
 * after a container's JEntries), since each child's padding then stays
 * what it was.  That is the case when the buffer is int-aligned here, or
 * when the first child pads itself (a container or a number).  False,
 * with nothing written, otherwise.  end is where the part's datum ends
 * (its bytes are checked against it), or NULL for a part already checked.
 */
static bool
splice_array_part(EncodeBuf *buf, JsonbContainer *c, const char *end,
				  Size jentry_offset, int *k, uint32 *totallen)
{
	int			count = JsonContainerSize(c);
	const char *data = (const char *) &c->children[count];
	JEntry		first;
	uint32		padlen;
	uint32		off = 0;
	int			i;

	if (count == 0)
		return true;
	first = c->children[0];
	if (pad_to_int(buf->len) != 0 && !JBE_ISCONTAINER(first) && !JBE_ISNUMERIC(first))
		return false;
	padlen = buf_pad_to_int(buf);
	for (i = 0; i < count; i++)
	{
		JEntry		e = c->children[i];
		uint32		next = JBE_HAS_OFF(e) ? JBE_OFFLENFLD(e) : off + JBE_OFFLENFLD(e);

		if (next < off || (end != NULL && next > (Size) (end - data)))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("a part of a jsonb array is not what it was said to be"),
					 errdetail("Its element %d ends outside it.", i)));
		/* the first child's length takes the padding put before it */
		store_jentry(buf, jentry_offset, (*k)++,
					 (e & JENTRY_TYPEMASK) | (next - off + (i == 0 ? padlen : 0)),
					 totallen);
		off = next;
	}
	buf_append(buf, data, off);
	return true;
}

/*
 * A spliced node: its parts' children, one after the other, as bytes.  Not
 * inlined, as spliced_size().
 */
static pg_noinline JEntry
encode_spliced(EncodeBuf *buf, HxNode *n)
{
	Size		base_offset;
	Size		jentry_offset;
	uint32		header = n->u.spl.n | (n->u.spl.object ? JB_FOBJECT : JB_FARRAY);
	uint32		totallen = 0;
	uint32		padlen;
	int			k = 0;
	int			values;
	int			p;

	padlen = buf_pad_to_int(buf);
	base_offset = buf->len;
	buf_append(buf, &header, sizeof(uint32));
	jentry_offset = buf_reserve(buf, sizeof(JEntry) * (n->u.spl.object ? 2 : 1) * (Size) n->u.spl.n);
	for (values = n->u.spl.object ? 0 : 1; values < 2; values++)
		for (p = 0; p < n->u.spl.nparts; p++)
		{
			JsonbContainer *c = n->u.spl.parts[p];
			int			count;
			HxContainerIter it;
			JsonbValue	v;
			int			i;

			CHECK_FOR_INTERRUPTS();
			if (c == NULL)
			{
				c = load_part(buf, n, p);
				if (splice_array_part(buf, c, buf->scratch + n->u.spl.rawlens[p],
									  jentry_offset, &k, &totallen))
					continue;
			}
			else if (!n->u.spl.object &&
					 splice_array_part(buf, c, NULL, jentry_offset, &k, &totallen))
				continue;
			count = JsonContainerSize(c);
			hx_citer_init(&it, c, (n->u.spl.object && values) ? count : 0);
			for (i = 0; i < count; i++)
			{
				hx_citer_next(&it, &v);
				store_jentry(buf, jentry_offset, k++, encode_value(buf, &v), &totallen);
			}
		}
	Assert(k == (n->u.spl.object ? 2 : 1) * n->u.spl.n);
	return JENTRY_ISCONTAINER | (padlen + (buf->len - base_offset));
}

static JEntry
encode_node(EncodeBuf *buf, HxNode *n)
{
	uint32		padlen;

	check_stack_depth();

	switch (n->kind)
	{
		case HX_SCALAR:
			return encode_scalar(buf, &n->u.scalar);
		case HX_BINARY:
			padlen = buf_pad_to_int(buf);
			buf_append(buf, n->u.bin.data, n->u.bin.len);
			return JENTRY_ISCONTAINER | (padlen + n->u.bin.len);
		case HX_ARRAY:
			return encode_array(buf, n->u.arr.elems, n->u.arr.n, false);
		case HX_OBJECT:
			return encode_object(buf, n);
		case HX_SPLICED:
			return encode_spliced(buf, n);
	}
	return 0;					/* keep compiler quiet */
}

/*
 * Encode a tree as a jsonb datum allocated in resultcxt.  A result larger
 * than jsonb can hold is an error (54000), raised before the buffer is
 * allocated.
 */
Jsonb *
hx_node_to_jsonb(HxNode *root, MemoryContext resultcxt)
{
	Size		size = hx_node_encoded_size(root);
	EncodeBuf	buf;

	if (size > HX_JSONB_MAX_SIZE)
		hx_error_too_large(size);

	buf.cap = VARHDRSZ + size;
	buf.bounded = size_inexact;
	buf.scratch = NULL;
	buf.scratchcap = 0;
	buf.data = MemoryContextAllocHuge(resultcxt, buf.cap);
	buf.len = VARHDRSZ;
	if (root->kind == HX_SCALAR)
		(void) encode_array(&buf, &root, 1, true);
	else
		(void) encode_node(&buf, root);
	Assert(buf.bounded ? buf.len <= buf.cap : buf.len == buf.cap);
	if (buf.scratch)
		pfree(buf.scratch);

	SET_VARSIZE(buf.data, buf.len);
	return (Jsonb *) buf.data;
}

/*
 * A copy of n that shares nothing another node can change: scalars and
 * on-disk containers are copied as they are (the bytes of an on-disk
 * container are never written), an unpacked container is encoded, so that
 * the copy costs the bytes of its encoding, never more, however often it
 * is copied again.
 */
HxNode *
hx_node_copy(HxNode *n)
{
	HxNode	   *c;

	if (n->kind == HX_ARRAY || n->kind == HX_OBJECT)
		return hx_node_from_jsonb(hx_node_to_jsonb(n, CurrentMemoryContext));
	c = palloc(sizeof(HxNode));
	*c = *n;
	return c;
}
