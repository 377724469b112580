/*-------------------------------------------------------------------------
 *
 * store.c
 *	  hx_store(column [, option ...]): BEFORE INSERT OR UPDATE OR DELETE
 *	  FOR EACH ROW on a table with hxdoc columns, which stores each value so
 *	  that a write costs what it changed (docs/storage.md).
 *
 * A value SQL makes is in line (doc.h): hx_merge() computes the new state
 * whole, as ever.  This trigger, before the row is written, compares it
 * with the row's stored document, node by node and segment by segment, and
 * writes only the difference as the document's next generation: the
 * segments that changed, new segments for what was appended, and a new
 * skeleton for the row.  A value whose jsonb is at most the threshold is
 * stored in line, as a jsonb column stores it (and a stored document that
 * shrinks below half of it goes back in line).
 *
 * The layout of a document:
 *	- a container or string larger than the threshold is a node; a smaller
 *	  one is stored inside its parent (the skeleton, or a segment);
 *	- a node's elements (or members, in key order) are packed into
 *	  segments of about the segment size; what a write appends to an array
 *	  goes into new segments of its own, and a run of small segments at an
 *	  array's end is merged into full ones once it is eight long, one merge
 *	  of a bounded size per node and write;
 *	- the root's members are placed likewise; the root itself is the
 *	  skeleton, unless even with its large members placed it is larger than
 *	  the threshold, when it is a node and the skeleton a placeholder.
 *
 * Comparing an array node with the new array: the elements before the
 * first difference and after the last are kept; of the segments between,
 * only those whose elements changed are rewritten when the array did not
 * shrink and nothing moved (an element replaced, or appended to), else all
 * of them.  A kept element that is a node whose new value is again a large
 * container of its kind is compared in turn, after the plan is made.
 * Objects compare member by member within each segment's range of keys.
 *
 * Nothing is deleted that a reader may still need: a segment this write
 * replaces is listed as dead in the new value and deleted by the next write, so
 * that the value before this write stays readable (AFTER triggers read
 * OLD), and a row deleted (or a document put back in line) is marked
 * dropped, and deleted by a later write of the table (or hx_store_gc()).
 *
 * Everything here runs under the row's lock (a BEFORE row trigger fires
 * once the row version to replace is locked), so a document has one
 * writer at a time, and its stored generation is read with the latest
 * snapshot.
 *
 * Memory: the old document's segments, the new value and the plan live in
 * a context of the call, freed when it returns; the new row's value is
 * copied out.
 *
 * src/store.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "doc.h"
#include "trigger.h"

/* Defaults of the trigger's options */
#define DEFAULT_THRESHOLD	2048
#define DEFAULT_SEGMENT		7168

/*
 * A segment is at most SEGMENT_MAX bytes of jsonb, so that its row of
 * hx_chunk stays in the table's page (hx_chunk keeps a segment in its row,
 * compressed or not, up to toast_tuple_target, 8,160 bytes), never out of
 * line in its TOAST table: logical decoding reads the segments of a value
 * it decodes with a historic snapshot, which cannot fetch TOAST.  So a
 * member over ITEM_MAX bytes is a node of its own whatever the threshold,
 * a segment packs at most the segment size, and a large string is stored
 * in pieces of at most STRING_PIECE bytes.  (A member whose key alone is
 * larger is the one thing that still makes a larger segment.)
 */
#define SEGMENT_MAX			7680
#define ITEM_MAX			3840
#define STRING_PIECE		7168

/* Segment keys: new nodes and appended segments step by this much */
#define SEG_STEP			((int64) 1 << 32)

/* Keys of a node's segments closer than this: the node is laid out anew */
#define RELAYOUT_GAP		((int64) 1 << 16)

/* A run of this many small segments at an array's end is merged */
#define MERGE_RUN			8

/* Dropped documents a write of the table deletes, at most */
#define PURGE_PER_WRITE		2

/* The trigger's arguments, parsed once per statement */
typedef struct StoreArgs
{
	int			ncols;
	AttrNumber *attnums;
	int			threshold;		/* bytes: a larger value is a node */
	int			segment;		/* bytes: a segment's target size */
	AttrNumber	from;			/* a jsonb column the value is taken from */
	const char *fromname;
	char	   *later[2][3];	/* a BEFORE row trigger that fires after it,
								 * as the session's role is origin (or local)
								 * or replica, on INSERT, UPDATE, DELETE */
} StoreArgs;

/* A document being written */
typedef struct Store
{
	StoreArgs  *args;
	HxChunkWriter *w;
	Oid			rel;
	int16		att;
	const char *tgname;
	int64		doc;
	int64		gen;			/* the generation being written */
	HxDocImage	old;			/* the stored generation (doc.h) */
	bool		have_old;
	HxDocRow	row;			/* its row of hx_doc */
	int32		next_node;		/* the number the next new node gets */
	int32		nsegs;			/* the new generation's segments */
	int64		gensum;			/* and the sum of their generations */
	List	   *killed;			/* HxSegId *: replaced by this generation */
	List	   *later;			/* Deferred *: kept nodes to compare */
	int			written;		/* segments written */
	bool		own_version;	/* the old row version is this transaction's */
} Store;

/* A kept node whose new value is compared once the plan is made */
typedef struct Deferred
{
	int32		node;
	JsonbValue	value;
} Deferred;

static HxNode *place(Store *st, const JsonbValue *v, const JsonbValue *oldv,
					 bool *ref);
static void diff_node(Store *st, int32 node, const JsonbValue *v);

/* ---------------------------------------------------------------------
 * Arguments
 * ---------------------------------------------------------------------
 */

static int
parse_bytes(Trigger *tg, const char *opt, const char *value, int min, int max)
{
	char	   *end;
	long		n = strtol(value, &end, 10);

	if (*value == '\0' || *end != '\0' || n < min || n > max)
		ereport(ERROR,
				(errcode(ERRCODE_HX_MALFORMED),
				 errmsg("invalid value \"%s\" of option \"%s\" in trigger \"%s\"",
						hx_clip(value), opt, tg->tgname),
				 errdetail("It must be a number of bytes from %d to %d.", min, max)));
	return (int) n;
}

/*
 * hx_store fires last among the table's BEFORE row triggers of an event:
 * what it stores is what the row gets, and a trigger after it could give
 * the row another value (another row's, whose document two rows would
 * then share) or skip the row (after its document was written over, or
 * marked dropped).  Triggers fire in the order of their names.  Another
 * hx_store trigger of the table may follow it, if the two store different
 * columns.  The triggers that follow it, by event, go to args->later[]
 * (checked as each row fires: an INSERT ... ON CONFLICT DO UPDATE fires
 * both INSERT and UPDATE triggers in one statement), for each value of
 * session_replication_role: a trigger enabled for replicas only counts
 * where the session replicates (an apply worker), one enabled for the
 * origin only where it does not, and hx_store is only checked where it
 * fires itself.
 */
static void
check_trigger_order(Trigger *tg, Relation rel, StoreArgs *args, MemoryContext cxt)
{
	static const int16 events[3] = {TRIGGER_TYPE_INSERT, TRIGGER_TYPE_UPDATE, TRIGGER_TYPE_DELETE};
	TriggerDesc *td = rel->trigdesc;
	bool		after = false;
	int			t;

	if (td == NULL)
		return;
	for (t = 0; t < td->numtriggers; t++)
	{
		Trigger    *other = &td->triggers[t];

		if (other->tgoid == tg->tgoid)
		{
			after = true;
			continue;
		}
		if (other->tgenabled == TRIGGER_DISABLED ||
			!TRIGGER_FOR_ROW(other->tgtype) || !TRIGGER_FOR_BEFORE(other->tgtype) ||
			(other->tgtype & tg->tgtype &
			 (TRIGGER_TYPE_INSERT | TRIGGER_TYPE_UPDATE | TRIGGER_TYPE_DELETE)) == 0)
			continue;
		if (other->tgfoid == tg->tgfoid)
		{
			/* another hx_store: not of the same column */
			for (int i = 0; i < other->tgnargs; i++)
			{
				AttrNumber	attnum;

				if (strchr(other->tgargs[i], '=') != NULL)
					continue;
				attnum = SPI_fnumber(RelationGetDescr(rel), other->tgargs[i]);
				for (int k = 0; k < args->ncols; k++)
					if (args->attnums[k] == attnum)
						ereport(ERROR,
								(errcode(ERRCODE_DUPLICATE_COLUMN),
								 errmsg("column \"%s\" of relation \"%s\" is stored by two triggers, \"%s\" and \"%s\"",
										other->tgargs[i], RelationGetRelationName(rel),
										tg->tgname, other->tgname),
								 errhint("Drop one of them (a partition keeps the triggers of its parent).")));
			}
			continue;
		}
		for (int r = 0; after && r < 2; r++)
		{
			/* whether it fires as PostgreSQL's trigger code decides */
			if (r == 0 ? other->tgenabled == TRIGGER_FIRES_ON_REPLICA
				: other->tgenabled == TRIGGER_FIRES_ON_ORIGIN)
				continue;
			for (int e = 0; e < 3; e++)
				if ((other->tgtype & events[e]) && args->later[r][e] == NULL)
					args->later[r][e] = MemoryContextStrdup(cxt, other->tgname);
		}
	}
}

/* As a row fires: refuse it if a BEFORE trigger of its event follows */
static void
check_last(TriggerData *trigdata, StoreArgs *args)
{
	TriggerEvent ev = trigdata->tg_event;
	int			e = TRIGGER_FIRED_BY_INSERT(ev) ? 0 : TRIGGER_FIRED_BY_UPDATE(ev) ? 1 : 2;
	int			r = (SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA) ? 1 : 0;

	if (args->later[r][e] != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("trigger \"%s\" must fire after every other BEFORE %s row trigger of relation \"%s\"",
						trigdata->tg_trigger->tgname, e == 0 ? "INSERT" : e == 1 ? "UPDATE" : "DELETE",
						RelationGetRelationName(trigdata->tg_relation)),
				 errdetail("Trigger \"%s\" fires after it, and could change the value it stores or skip the row.",
						   args->later[r][e]),
				 errhint("Triggers fire in the order of their names: rename one of them.")));
}

static void *
parse_store_args(TriggerData *trigdata, MemoryContext cxt)
{
	Trigger    *tg = trigdata->tg_trigger;
	Relation	rel = trigdata->tg_relation;
	StoreArgs  *args = MemoryContextAllocZero(cxt, sizeof(StoreArgs));
	int			i;

	args->attnums = MemoryContextAlloc(cxt, sizeof(AttrNumber) * Max(tg->tgnargs, 1));
	args->threshold = DEFAULT_THRESHOLD;
	args->segment = DEFAULT_SEGMENT;
	for (i = 0; i < tg->tgnargs; i++)
	{
		const char *arg = tg->tgargs[i];
		const char *eq = strchr(arg, '=');

		if (eq)
		{
			int			namelen = (int) (eq - arg);

			/* an option given twice: which one was meant is not known */
			for (int k = 0; k < i; k++)
				if (strncmp(tg->tgargs[k], arg, namelen + 1) == 0)
					ereport(ERROR,
							(errcode(ERRCODE_HX_MALFORMED),
							 errmsg("option \"%.*s\" is given twice in trigger \"%s\"",
									Min(namelen, 64), arg, tg->tgname)));
			if (namelen == 9 && strncmp(arg, "threshold", 9) == 0)
				args->threshold = parse_bytes(tg, "threshold", eq + 1, 256, 1 << 20);
			else if (namelen == 7 && strncmp(arg, "segment", 7) == 0)
				args->segment = parse_bytes(tg, "segment", eq + 1, 1024, SEGMENT_MAX);
			else if (namelen == 4 && strncmp(arg, "from", 4) == 0)
			{
				AttrNumber	attnum = hx_trigger_column(rel, eq + 1);
				Oid			typid = TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid;

				if (typid != JSONBOID)
					ereport(ERROR,
							(errcode(ERRCODE_DATATYPE_MISMATCH),
							 errmsg("column \"%s\" of relation \"%s\" is of type %s, not jsonb",
									eq + 1, RelationGetRelationName(rel), format_type_be(typid)),
							 errdetail("Trigger \"%s\" takes its hxdoc value from it (option \"from\").",
									   tg->tgname)));
				args->from = attnum;
				args->fromname = MemoryContextStrdup(cxt, eq + 1);
			}
			else
				ereport(ERROR,
						(errcode(ERRCODE_HX_MALFORMED),
						 errmsg("unrecognized option \"%s\" in trigger \"%s\"",
								hx_clip(arg), tg->tgname),
						 errhint("Options are threshold=<bytes>, segment=<bytes> and from=<jsonb column>.")));
		}
		else
		{
			AttrNumber	attnum = hx_trigger_column(rel, arg);
			Oid			typid = TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid;

			if (!hx_doc_is_type(typid))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of relation \"%s\" is of type %s, not hxdoc",
								arg, RelationGetRelationName(rel), format_type_be(typid)),
						 errdetail("Trigger \"%s\" stores hxdoc values.", tg->tgname)));
			for (int k = 0; k < args->ncols; k++)
				if (args->attnums[k] == attnum)
					ereport(ERROR,
							(errcode(ERRCODE_DUPLICATE_COLUMN),
							 errmsg("column \"%s\" is named twice in trigger \"%s\"",
									arg, tg->tgname)));
			args->attnums[args->ncols++] = attnum;
		}
	}
	if (args->ncols == 0)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" must name at least one hxdoc column", tg->tgname),
				 errhint("EXECUTE FUNCTION hx_store('state') stores column \"state\".")));
	check_trigger_order(tg, rel, args, cxt);
	if (args->from != InvalidAttrNumber && args->ncols != 1)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" must name one hxdoc column to take it from column \"%s\"",
						tg->tgname, args->fromname)));
	return args;
}

/* ---------------------------------------------------------------------
 * Sizes and values
 * ---------------------------------------------------------------------
 */

/* The bytes a value takes in its parent, near enough to decide its place */
static Size
value_size(const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvBinary:
			return v->val.binary.len + sizeof(JEntry);
		case jbvString:
			return v->val.string.len + sizeof(JEntry);
		case jbvNumeric:
			return VARSIZE_ANY(v->val.numeric) + sizeof(JEntry) + 3;
		default:
			return sizeof(JEntry);
	}
}

static bool
is_large(Store *st, const JsonbValue *v)
{
	return (v->type == jbvBinary || v->type == jbvString) &&
		value_size(v) > (Size) Min(st->args->threshold, ITEM_MAX);
}

/* Same bytes (so the same value: jsonb's encoding of a value is one) */
static bool
same_bytes(const JsonbValue *a, const JsonbValue *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type)
	{
		case jbvBinary:
			return a->val.binary.len == b->val.binary.len &&
				memcmp(a->val.binary.data, b->val.binary.data, a->val.binary.len) == 0;
		case jbvString:
			return a->val.string.len == b->val.string.len &&
				memcmp(a->val.string.val, b->val.string.val, a->val.string.len) == 0;
		case jbvNumeric:
			return VARSIZE_ANY(a->val.numeric) == VARSIZE_ANY(b->val.numeric) &&
				memcmp(a->val.numeric, b->val.numeric, VARSIZE_ANY(a->val.numeric)) == 0;
		case jbvBool:
			return a->val.boolean == b->val.boolean;
		default:
			return true;
	}
}

/* The kind of a node of the old document: 'a'rray, 'o'bject, 's'calar */
static char
node_kind(Store *st, int32 node)
{
	HxNodeSegs *ns = st->have_old ? hx_image_node(&st->old, node) : NULL;
	Jsonb	   *body;

	if (ns == NULL || ns->nsegs == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("document %lld has no segments of node %d",
						(long long) st->doc, node)));
	body = ns->segs[0]->body;
	return JB_ROOT_IS_SCALAR(body) ? 's' : JB_ROOT_IS_ARRAY(body) ? 'a' : 'o';
}

/*
 * Is the string node of the old document (its pieces, in order) the new
 * string?
 */
static bool
same_string(HxNodeSegs *ns, const JsonbValue *newv)
{
	Size		off = 0;
	int			i;

	if (newv->type != jbvString)
		return false;
	for (i = 0; i < ns->nsegs; i++)
	{
		JsonbValue	piece;

		hx_jsonb_root_value(ns->segs[i]->body, &piece);
		if (piece.type != jbvString ||
			off + piece.val.string.len > (Size) newv->val.string.len ||
			memcmp(newv->val.string.val + off, piece.val.string.val, piece.val.string.len) != 0)
			return false;
		off += piece.val.string.len;
	}
	return off == (Size) newv->val.string.len;
}

static char
value_kind(const JsonbValue *v)
{
	if (v->type != jbvBinary)
		return 's';
	return JsonContainerIsArray(v->val.binary.data) ? 'a' : 'o';
}

/* What keeps() says of an old value and the new one at its place */
#define KEEP_NOT		0		/* replaced */
#define KEEP_AS_IS		1		/* the same: an inline value, or a string node */
#define KEEP_COMPARE	2		/* a node, to be compared with the new value */

/*
 * Does the old value (a placeholder or an inline value) stay for the new
 * one?  A node whose new value is a large container of its kind does, and
 * is compared in turn later (so that nothing is written while plans are
 * made); *node gets the node kept, or 0.
 */
static int
keeps(Store *st, const JsonbValue *oldv, const JsonbValue *newv, int32 *node)
{
	*node = 0;
	if (hx_is_placeholder(oldv, node))
	{
		char		kind;

		if (!is_large(st, newv))
			return KEEP_NOT;
		kind = node_kind(st, *node);
		if (kind != value_kind(newv))
			return KEEP_NOT;
		if (kind == 's')
			return same_string(hx_image_node(&st->old, *node), newv) ? KEEP_AS_IS : KEEP_NOT;
		return KEEP_COMPARE;
	}
	return (!is_large(st, newv) && same_bytes(oldv, newv)) ? KEEP_AS_IS : KEEP_NOT;
}

static void
defer_node(Store *st, int32 node, const JsonbValue *v)
{
	Deferred   *d = palloc(sizeof(Deferred));

	d->node = node;
	d->value = *v;
	st->later = lappend(st->later, d);
}

/* ---------------------------------------------------------------------
 * Killing: what this generation replaces
 * ---------------------------------------------------------------------
 */

static void kill_value(Store *st, const JsonbValue *v);

/*
 * A segment this generation replaces: its row only (what it held that is
 * not kept, the caller kills with kill_value())
 */
static void
kill_segment(Store *st, HxSegment *s)
{
	HxSegId    *id = palloc(sizeof(HxSegId));

	*id = s->id;
	st->killed = lappend(st->killed, id);
	st->nsegs--;
	st->gensum -= s->id.gen;
}

/* Write a segment of the new generation */
static void
put_segment(Store *st, int32 node, int64 seg, int32 n, int32 refs, Jsonb *body)
{
	HxSegId		id;

	id.node = node;
	id.seg = seg;
	id.gen = st->gen;
	hx_chunk_insert_segment(st->w, st->doc, &id, n, refs, body);
	st->written++;
	st->nsegs++;
	st->gensum += st->gen;
}

/* A node this generation replaces: its segments, and the nodes they hold */
static void
kill_node(Store *st, int32 node)
{
	HxNodeSegs *ns = hx_image_node(&st->old, node);
	int			i;

	check_stack_depth();
	if (ns == NULL)
		return;
	for (i = 0; i < ns->nsegs; i++)
	{
		HxSegment  *s = ns->segs[i];

		kill_segment(st, s);
		if (s->refs > 0 && !JB_ROOT_IS_SCALAR(s->body))
		{
			HxContainerIter it;
			JsonbValue	v;
			int			n = JB_ROOT_COUNT(s->body);
			int			j;

			hx_citer_init(&it, &s->body->root, JB_ROOT_IS_OBJECT(s->body) ? n : 0);
			for (j = 0; j < n; j++)
			{
				hx_citer_next(&it, &v);
				kill_value(st, &v);
			}
		}
	}
}

/* The nodes an old value (of a skeleton or a segment) holds die with it */
static void
kill_value(Store *st, const JsonbValue *v)
{
	int32		node;
	HxContainerIter it;
	JsonbValue	child;
	int			n;
	int			i;

	check_stack_depth();
	if (v->type != jbvBinary)
		return;
	if (hx_is_placeholder(v, &node))
	{
		kill_node(st, node);
		return;
	}
	n = JsonContainerSize(v->val.binary.data);
	hx_citer_init(&it, v->val.binary.data,
				  JsonContainerIsObject(v->val.binary.data) ? n : 0);
	for (i = 0; i < n; i++)
	{
		hx_citer_next(&it, &child);
		kill_value(st, &child);
	}
}

/* ---------------------------------------------------------------------
 * Writing segments
 * ---------------------------------------------------------------------
 */

/* A value placed in a segment or the skeleton */
typedef struct Placed
{
	const char *key;			/* objects: the member's key */
	int			keylen;
	HxNode	   *node;			/* the value, or a placeholder */
	bool		ref;			/* a placeholder */
	Size		size;
} Placed;

static Placed
placed(Store *st, const char *key, int keylen, const JsonbValue *v,
	   const JsonbValue *oldv)
{
	Placed		p;

	p.key = key;
	p.keylen = keylen;
	p.node = place(st, v, oldv, &p.ref);
	p.size = hx_node_encoded_size(p.node) + sizeof(JEntry) + keylen;
	return p;
}

/* An old element or member kept as it is */
static Placed
kept(const char *key, int keylen, const JsonbValue *v)
{
	Placed		p;
	int32		node;

	p.key = key;
	p.keylen = keylen;
	p.node = hx_node_from_value(v);
	p.ref = hx_is_placeholder(v, &node);
	p.size = value_size(v) + keylen;
	return p;
}

/* Write one segment of node holding items[0..n), as an array or object */
static void
write_segment(Store *st, int32 node, int64 seg, bool object, Placed *items, int n)
{
	HxNode	   *body = object ? hx_node_new_object(n) : hx_node_new_array(n);
	int32		refs = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		if (object)
			hx_object_set(body, items[i].key, items[i].keylen, items[i].node);
		else
			hx_array_append(body, items[i].node);
		if (items[i].ref)
			refs++;
	}
	put_segment(st, node, seg, n, refs, hx_node_to_jsonb(body, CurrentMemoryContext));
}

/* How many segments items[0..n) pack into, and where each starts */
static int
pack(Store *st, Placed *items, int n, int *starts)
{
	int			nsegs = 0;
	Size		size = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		if (i == 0 || size + items[i].size > (Size) st->args->segment)
		{
			starts[nsegs++] = i;
			size = 0;
		}
		size += items[i].size;
	}
	return nsegs;
}

/*
 * Write items as segments of node between the keys lo and hi (exclusive;
 * hi 0: no bound), reusing the keys in reuse[0..nreuse) first: their old
 * segments are being replaced.
 */
static void
write_run(Store *st, int32 node, bool object, Placed *items, int n,
		  int64 lo, int64 hi, int64 *reuse, int nreuse)
{
	int		   *starts = palloc(sizeof(int) * Max(n, 1));
	int			nsegs = pack(st, items, n, starts);
	int64		key = lo;
	int			i;

	for (i = 0; i < nsegs; i++)
	{
		int			end = (i + 1 < nsegs) ? starts[i + 1] : n;

		CHECK_FOR_INTERRUPTS();
		if (i < nreuse)
			key = reuse[i];
		else if (hi == 0)
			key = key + SEG_STEP;
		else
		{
			/* the keys left are spread evenly up to hi */
			int64		step = (hi - key) / (nsegs - i + 1);

			if (step < 1)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("node %d of document %lld has no room for another segment",
								node, (long long) st->doc)));
			key = key + step;
		}
		write_segment(st, node, key, object, items + starts[i], end - starts[i]);
	}
}

/* A new node for v (a large container or string): its number */
static int32
new_node(Store *st, const JsonbValue *v)
{
	int32		node = st->next_node++;
	HxContainerIter it;
	HxContainerIter kit;
	JsonbValue	child;
	JsonbValue	key;
	Placed	   *items;
	int			n;
	int			i;
	bool		object;

	if (v->type != jbvBinary)
	{
		/*
		 * A large string: segments that are its pieces, each a scalar of at
		 * most STRING_PIECE bytes, cut between characters
		 */
		const char *str = v->val.string.val;
		int			len = v->val.string.len;
		int			off = 0;
		int64		key = 0;

		Assert(v->type == jbvString);
		while (off < len)
		{
			int			end = off + pg_mbcliplen(str + off, len - off, STRING_PIECE);
			JsonbValue	piece;

			CHECK_FOR_INTERRUPTS();
			if (end == off)
				end = len;		/* cannot happen: a character is shorter */
			piece.type = jbvString;
			piece.val.string.val = (char *) str + off;
			piece.val.string.len = end - off;
			key += SEG_STEP;
			put_segment(st, node, key, 1, 0,
						hx_node_to_jsonb(hx_node_from_value(&piece), CurrentMemoryContext));
			off = end;
		}
		return node;
	}
	object = JsonContainerIsObject(v->val.binary.data);
	n = JsonContainerSize(v->val.binary.data);
	items = palloc(sizeof(Placed) * Max(n, 1));
	hx_citer_init(&kit, v->val.binary.data, 0);
	hx_citer_init(&it, v->val.binary.data, object ? n : 0);
	for (i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (object)
			hx_citer_next(&kit, &key);
		hx_citer_next(&it, &child);
		items[i] = placed(st, object ? key.val.string.val : NULL,
						  object ? key.val.string.len : 0, &child, NULL);
	}
	write_run(st, node, object, items, n, 0, 0, NULL, 0);
	return node;
}

/*
 * The place of v in its parent, given its old value there (oldv, or NULL):
 * itself when small, a placeholder of a node when large (*ref).
 */
static HxNode *
place(Store *st, const JsonbValue *v, const JsonbValue *oldv, bool *ref)
{
	int32		node = 0;
	int			keep = (oldv != NULL) ? keeps(st, oldv, v, &node) : KEEP_NOT;

	check_stack_depth();
	*ref = false;
	if (keep == KEEP_COMPARE)
		defer_node(st, node, v);
	if (keep != KEEP_NOT)
	{
		*ref = (node != 0);
		return (node != 0) ? hx_placeholder(node) : hx_node_from_value(v);
	}
	if (oldv != NULL)
		kill_value(st, oldv);
	if (!is_large(st, v))
		return hx_node_from_value(v);
	*ref = true;
	return hx_placeholder(new_node(st, v));
}

/* ---------------------------------------------------------------------
 * Comparing an array node
 * ---------------------------------------------------------------------
 */

/* An old element, and the index of its segment in the node's list */
typedef struct OldElem
{
	JsonbValue	v;
	int			seg;
} OldElem;

/* The index of the first old element of segment s */
static int
first_of(OldElem *oldv, int n, int s)
{
	int			i;

	for (i = 0; i < n && oldv[i].seg < s; i++)
		;
	return i;
}

/*
 * Append new elements at the array's end: into segments of their own,
 * or, when the run of small segments at the end is MERGE_RUN long with
 * them, merged with that run into full segments.
 */
static void
append_tail(Store *st, int32 node, HxNodeSegs *ns, bool *killed, OldElem *oldv,
			int n, Placed *items, int nitems)
{
	int			last = ns->nsegs - 1;
	int			run = last;
	int			first;
	Placed	   *all;
	int			cnt = 0;
	int64	   *reuse;
	int			i;

	while (run >= 0 && !killed[run] &&
		   ns->segs[run]->rawlen < st->args->segment / 2)
		run--;
	run++;						/* the first segment of the run */
	if (nitems == 0)
		return;
	if (last < 0 || killed[last] || (last - run + 1) + 1 < MERGE_RUN)
	{
		write_run(st, node, false, items, nitems,
				  (last >= 0) ? ns->segs[last]->id.seg : 0, 0, NULL, 0);
		return;
	}
	first = first_of(oldv, n, run);
	all = palloc(sizeof(Placed) * (n - first + nitems));
	for (i = first; i < n; i++)
		all[cnt++] = kept(NULL, 0, &oldv[i].v);
	for (i = 0; i < nitems; i++)
		all[cnt++] = items[i];
	reuse = palloc(sizeof(int64) * (last - run + 1));
	for (i = run; i <= last; i++)
	{
		reuse[i - run] = ns->segs[i]->id.seg;
		kill_segment(st, ns->segs[i]);
	}
	write_run(st, node, false, all, cnt,
			  (run > 0) ? ns->segs[run - 1]->id.seg : 0, 0, reuse, last - run + 1);
}

static void
diff_array(Store *st, int32 node, HxNodeSegs *ns, const JsonbValue *v)
{
	JsonbContainer *c = v->val.binary.data;
	int			m = JsonContainerSize(c);
	JsonbValue *newv = palloc(sizeof(JsonbValue) * Max(m, 1));
	OldElem    *oldv;
	bool	   *killed = palloc0(sizeof(bool) * ns->nsegs);
	bool	   *changed = palloc0(sizeof(bool) * ns->nsegs);
	int			n = 0;
	int			i;
	int			s;
	int			p;
	int			q;
	int			a;
	int			b;
	int			costB;
	int			costA = INT_MAX;
	HxContainerIter it;

	for (s = 0; s < ns->nsegs; s++)
		n += JB_ROOT_COUNT(ns->segs[s]->body);
	oldv = palloc(sizeof(OldElem) * Max(n, 1));
	n = 0;
	for (s = 0; s < ns->nsegs; s++)
	{
		Jsonb	   *body = ns->segs[s]->body;
		int			k = JB_ROOT_COUNT(body);

		hx_citer_init(&it, &body->root, 0);
		for (i = 0; i < k; i++)
		{
			hx_citer_next(&it, &oldv[n].v);
			oldv[n++].seg = s;
		}
	}
	hx_citer_init(&it, c, 0);
	for (i = 0; i < m; i++)
		hx_citer_next(&it, &newv[i]);

	/* the common prefix, then the common suffix after it */
	for (p = 0; p < Min(n, m); p++)
	{
		int32		d;

		if ((p & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		if (keeps(st, &oldv[p].v, &newv[p], &d) == KEEP_NOT)
			break;
	}
	for (q = 0; q < Min(n, m) - p; q++)
	{
		int32		d;

		if (keeps(st, &oldv[n - 1 - q].v, &newv[m - 1 - q], &d) == KEEP_NOT)
			break;
	}

	/*
	 * Plan B: rewrite the segments from the one holding the first
	 * difference to the one holding the last (none for an append).
	 */
	if (p == n && q == 0)
		a = b = -1, costB = 0;
	else
	{
		a = (p < n) ? oldv[p].seg : oldv[n - 1].seg;
		b = (n - q - 1 >= p) ? oldv[n - q - 1].seg : a;
		costB = b - a + 1;
	}

	/*
	 * Plan A, when the array did not shrink: rewrite the segments whose
	 * elements differ index by index, append the rest.
	 */
	if (m >= n && costB > 1)
	{
		costA = 0;
		for (i = p; i < n; i++)
		{
			int32		d;

			if ((i & 1023) == 0)
				CHECK_FOR_INTERRUPTS();
			if (!changed[oldv[i].seg] && keeps(st, &oldv[i].v, &newv[i], &d) == KEEP_NOT)
			{
				changed[oldv[i].seg] = true;
				costA++;
			}
		}
	}

	if (costA < costB)
	{
		for (s = 0; s < ns->nsegs; s++)
		{
			int			first = first_of(oldv, n, s);
			int			k = JB_ROOT_COUNT(ns->segs[s]->body);
			Placed	   *items;
			int64		reuse = ns->segs[s]->id.seg;

			if (!changed[s])
			{
				for (i = first; i < first + k; i++)
				{
					int32		d;

					if (keeps(st, &oldv[i].v, &newv[i], &d) == KEEP_COMPARE)
						defer_node(st, d, &newv[i]);
				}
				continue;
			}
			items = palloc(sizeof(Placed) * Max(k, 1));
			for (i = 0; i < k; i++)
				items[i] = placed(st, NULL, 0, &newv[first + i], &oldv[first + i].v);
			kill_segment(st, ns->segs[s]);
			killed[s] = true;
			write_run(st, node, false, items, k,
					  (s > 0) ? ns->segs[s - 1]->id.seg : 0,
					  (s + 1 < ns->nsegs) ? ns->segs[s + 1]->id.seg : PG_INT64_MAX,
					  &reuse, 1);
		}
		if (m > n)
		{
			Placed	   *items = palloc(sizeof(Placed) * (m - n));

			for (i = n; i < m; i++)
				items[i - n] = placed(st, NULL, 0, &newv[i], NULL);
			append_tail(st, node, ns, killed, oldv, n, items, m - n);
		}
		return;
	}

	/* plan B: what is kept before and after the span is compared in turn */
	for (i = 0; i < n; i++)
	{
		int32		d;
		int			j = (i < p) ? i : i - n + m;

		if ((i < p || i >= n - q) && keeps(st, &oldv[i].v, &newv[j], &d) == KEEP_COMPARE)
			defer_node(st, d, &newv[j]);
	}
	if (a < 0)
	{
		/* an append */
		Placed	   *items = palloc(sizeof(Placed) * Max(m - n, 1));

		for (i = n; i < m; i++)
			items[i - n] = placed(st, NULL, 0, &newv[i], NULL);
		append_tail(st, node, ns, killed, oldv, n, items, m - n);
	}
	else
	{
		int			afirst = first_of(oldv, n, a);
		int			bend = first_of(oldv, n, b + 1);
		int			cnt = 0;
		Placed	   *items = palloc(sizeof(Placed) * Max(bend - afirst + (m - n) + 1, 1));
		int64	   *reuse = palloc(sizeof(int64) * (b - a + 1));

		for (i = afirst; i < p; i++)
			items[cnt++] = kept(NULL, 0, &oldv[i].v);
		for (i = p; i < m - q; i++)
			items[cnt++] = placed(st, NULL, 0, &newv[i], NULL);
		for (i = Max(n - q, p); i < bend; i++)
			items[cnt++] = kept(NULL, 0, &oldv[i].v);
		for (i = p; i < n - q; i++)
			kill_value(st, &oldv[i].v);
		for (s = a; s <= b; s++)
		{
			reuse[s - a] = ns->segs[s]->id.seg;
			kill_segment(st, ns->segs[s]);
			killed[s] = true;
		}
		if (cnt > 0)
			write_run(st, node, false, items, cnt,
					  (a > 0) ? ns->segs[a - 1]->id.seg : 0,
					  (b + 1 < ns->nsegs) ? ns->segs[b + 1]->id.seg : PG_INT64_MAX,
					  reuse, b - a + 1);
	}
}

/* ---------------------------------------------------------------------
 * Comparing an object node
 * ---------------------------------------------------------------------
 */

static void
diff_object(Store *st, int32 node, HxNodeSegs *ns, const JsonbValue *v)
{
	JsonbContainer *c = v->val.binary.data;
	int			m = JsonContainerSize(c);
	JsonbValue *newk = palloc(sizeof(JsonbValue) * Max(m, 1));
	JsonbValue *newv = palloc(sizeof(JsonbValue) * Max(m, 1));
	HxContainerIter it;
	int			i;
	int			j = 0;			/* the next new member */
	int			s;

	hx_citer_init(&it, c, 0);
	for (i = 0; i < m; i++)
		hx_citer_next(&it, &newk[i]);
	hx_citer_init(&it, c, m);
	for (i = 0; i < m; i++)
		hx_citer_next(&it, &newv[i]);

	for (s = 0; s < ns->nsegs; s++)
	{
		Jsonb	   *body = ns->segs[s]->body;
		int			k = JB_ROOT_COUNT(body);
		JsonbValue *oldk = palloc(sizeof(JsonbValue) * Max(k, 1));
		JsonbValue *oldv = palloc(sizeof(JsonbValue) * Max(k, 1));
		int			end;		/* new members of this segment: [j, end) */
		bool		same;
		int64		reuse = ns->segs[s]->id.seg;
		Placed	   *items;
		int			cnt = 0;
		int			o;

		CHECK_FOR_INTERRUPTS();
		hx_citer_init(&it, &body->root, 0);
		for (i = 0; i < k; i++)
			hx_citer_next(&it, &oldk[i]);
		hx_citer_init(&it, &body->root, k);
		for (i = 0; i < k; i++)
			hx_citer_next(&it, &oldv[i]);

		/* up to the next segment's first key (the last takes the rest) */
		end = m;
		if (s + 1 < ns->nsegs)
		{
			JsonbValue	next;
			Jsonb	   *nb = ns->segs[s + 1]->body;

			hx_citer_init(&it, &nb->root, 0);
			hx_citer_next(&it, &next);
			for (end = j; end < m; end++)
				if (hx_key_compare(newk[end].val.string.val, newk[end].val.string.len,
								   next.val.string.val, next.val.string.len) >= 0)
					break;
		}

		same = (end - j == k);
		for (i = 0; same && i < k; i++)
		{
			int32		d;

			same = hx_key_compare(oldk[i].val.string.val, oldk[i].val.string.len,
								  newk[j + i].val.string.val, newk[j + i].val.string.len) == 0 &&
				keeps(st, &oldv[i], &newv[j + i], &d) != KEEP_NOT;
		}
		if (same)
		{
			for (i = 0; i < k; i++)
			{
				int32		d;

				if (keeps(st, &oldv[i], &newv[j + i], &d) == KEEP_COMPARE)
					defer_node(st, d, &newv[j + i]);
			}
			j = end;
			continue;
		}

		/* rewritten: each new member placed by its old value, if any */
		items = palloc(sizeof(Placed) * Max(end - j, 1));
		o = 0;
		for (i = j; i < end; i++)
		{
			int			cmp = 1;

			while (o < k &&
				   (cmp = hx_key_compare(oldk[o].val.string.val, oldk[o].val.string.len,
										 newk[i].val.string.val, newk[i].val.string.len)) < 0)
				kill_value(st, &oldv[o++]);
			items[cnt++] = placed(st, newk[i].val.string.val, newk[i].val.string.len,
								  &newv[i], (o < k && cmp == 0) ? &oldv[o] : NULL);
			if (o < k && cmp == 0)
				o++;
		}
		for (; o < k; o++)
			kill_value(st, &oldv[o]);
		kill_segment(st, ns->segs[s]);
		if (cnt > 0)
			write_run(st, node, true, items, cnt,
					  (s > 0) ? ns->segs[s - 1]->id.seg : 0,
					  (s + 1 < ns->nsegs) ? ns->segs[s + 1]->id.seg : PG_INT64_MAX,
					  &reuse, 1);
		j = end;
	}
}

/*
 * Are the keys of a node's segments too close for the splits to come?  A
 * segment that overflows takes keys between its own and the next one's,
 * evenly spread; the same place overflowing again and again (a list that
 * takes its newest item first) halves the room each time.  Below
 * RELAYOUT_GAP the node is laid out anew, with its keys SEG_STEP apart:
 * once in some thousands of such writes.
 */
static bool
too_dense(HxNodeSegs *ns)
{
	int64		prev = 0;
	int			i;

	for (i = 0; i < ns->nsegs; i++)
	{
		if (ns->segs[i]->id.seg - prev < RELAYOUT_GAP)
			return true;
		prev = ns->segs[i]->id.seg;
	}
	return false;
}

static void relayout(Store *st, int32 node, const JsonbValue *v);

/* Compare node with its new value, a large container of its kind */
static void
diff_node(Store *st, int32 node, const JsonbValue *v)
{
	HxNodeSegs *ns = hx_image_node(&st->old, node);

	check_stack_depth();
	if (too_dense(ns))
		relayout(st, node, v);
	else if (JsonContainerIsArray(v->val.binary.data))
		diff_array(st, node, ns, v);
	else
		diff_object(st, node, ns, v);
}

/* ---------------------------------------------------------------------
 * A document
 * ---------------------------------------------------------------------
 */

/* The members of an object container (keys and values), or elements */
static int
children(JsonbContainer *c, JsonbValue **keys, JsonbValue **vals)
{
	int			n = JsonContainerSize(c);
	bool		object = JsonContainerIsObject(c);
	HxContainerIter it;
	int			i;

	*keys = palloc(sizeof(JsonbValue) * Max(n, 1));
	*vals = palloc(sizeof(JsonbValue) * Max(n, 1));
	if (object)
	{
		hx_citer_init(&it, c, 0);
		for (i = 0; i < n; i++)
			hx_citer_next(&it, &(*keys)[i]);
	}
	hx_citer_init(&it, c, object ? n : 0);
	for (i = 0; i < n; i++)
		hx_citer_next(&it, &(*vals)[i]);
	return n;
}

/*
 * Lay a node out anew with its new value: every segment replaced, keys
 * SEG_STEP apart from the start, each child placed afresh (its old nodes
 * die with the old segments)
 */
static void
relayout(Store *st, int32 node, const JsonbValue *v)
{
	JsonbValue *keys;
	JsonbValue *vals;
	int			n = children(v->val.binary.data, &keys, &vals);
	bool		object = JsonContainerIsObject(v->val.binary.data);
	Placed	   *items = palloc(sizeof(Placed) * Max(n, 1));
	int			i;

	kill_node(st, node);
	for (i = 0; i < n; i++)
	{
		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		items[i] = placed(st, object ? keys[i].val.string.val : NULL,
						  object ? keys[i].val.string.len : 0, &vals[i], NULL);
	}
	write_run(st, node, object, items, n, 0, 0, NULL, 0);
}

/*
 * The skeleton of the new document's root: the root with its members
 * placed (by the old root's members of the same key, or index), or a
 * placeholder of the root as a node when even so it is larger than the
 * threshold.
 */
static Jsonb *
store_root(Store *st, const JsonbValue *root, const JsonbValue *oldroot)
{
	bool		object;
	JsonbValue *keys;
	JsonbValue *vals;
	JsonbValue *okeys = NULL;
	JsonbValue *ovals = NULL;
	int			n;
	int			on = 0;
	int			o = 0;
	Placed	   *items;
	HxNode	   *shallow;
	bool		ref;
	int32		node;
	int			i;

	/* a root that is a node, or a large string, is placed as any value */
	if (root->type != jbvBinary ||
		(oldroot != NULL && hx_is_placeholder(oldroot, &node)))
		return hx_node_to_jsonb(place(st, root, oldroot, &ref), CurrentMemoryContext);

	object = JsonContainerIsObject(root->val.binary.data);
	n = children(root->val.binary.data, &keys, &vals);
	if (oldroot != NULL && oldroot->type == jbvBinary &&
		JsonContainerIsObject(oldroot->val.binary.data) == object)
		on = children(oldroot->val.binary.data, &okeys, &ovals);
	else if (oldroot != NULL)
		kill_value(st, oldroot);

	items = palloc(sizeof(Placed) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		const JsonbValue *old = NULL;

		CHECK_FOR_INTERRUPTS();
		if (object)
		{
			int			cmp = 1;

			/* old members before this key are gone */
			while (o < on &&
				   (cmp = hx_key_compare(okeys[o].val.string.val, okeys[o].val.string.len,
										 keys[i].val.string.val, keys[i].val.string.len)) < 0)
				kill_value(st, &ovals[o++]);
			if (o < on && cmp == 0)
				old = &ovals[o++];
		}
		else if (i < on)
			old = &ovals[o++];
		items[i] = placed(st, object ? keys[i].val.string.val : NULL,
						  object ? keys[i].val.string.len : 0, &vals[i], old);
	}
	for (; o < on; o++)
		kill_value(st, &ovals[o]);

	shallow = object ? hx_node_new_object(n) : hx_node_new_array(n);
	for (i = 0; i < n; i++)
	{
		if (object)
			hx_object_set(shallow, items[i].key, items[i].keylen, items[i].node);
		else
			hx_array_append(shallow, items[i].node);
	}
	if (hx_node_encoded_size(shallow) <= (Size) st->args->threshold)
		return hx_node_to_jsonb(shallow, CurrentMemoryContext);

	/* too many small members: the root is a node of its own */
	node = st->next_node++;
	write_run(st, node, object, items, n, 0, 0, NULL, 0);
	return hx_node_to_jsonb(hx_placeholder(node), CurrentMemoryContext);
}

/* Compare the kept nodes, until there are none left */
static void
run_deferred(Store *st)
{
	while (st->later != NIL)
	{
		Deferred   *d = (Deferred *) linitial(st->later);

		st->later = list_delete_first(st->later);
		CHECK_FOR_INTERRUPTS();
		diff_node(st, d->node, &d->value);
	}
}

/*
 * Is the old value a document of this row's column, by the latest
 * snapshot?  Not when it is not in pieces, is another table's or column's
 * (a copy of which was stored without this trigger), or is dropped.
 * Its row of hx_doc goes to st->row.
 */
static bool
own_doc(Store *st, HxDocHead *old)
{
	HxDocChunked c;
	Snapshot	snapshot;
	bool		ok;

	if (old == NULL || old->format != HXDOC_CHUNKED)
		return false;
	hx_doc_chunked(old, &c);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ok = hx_chunk_read_doc(c.doc, snapshot, &st->row) &&
		!st->row.dropped && st->row.rel == st->rel && st->row.att == st->att;
	UnregisterSnapshot(snapshot);
	return ok;
}

/*
 * Open a document of this row's column (own_doc()) for writing: its
 * stored generation's segments, by the latest snapshot, which are all
 * there (the row is locked, and its value is the stored generation).
 */
static void
open_old(Store *st, HxDocHead *old)
{
	HxDocChunked c;
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	bool		ok = hx_image_load(old, snapshot, &st->old, HX_READ_BODIES);

	UnregisterSnapshot(snapshot);
	hx_doc_chunked(old, &c);
	if (!ok || st->old.newer > 0)
		ereport(ERROR,
				(errcode(ERRCODE_HX_STALE_DOCUMENT),
				 errmsg("hxdoc value of document %lld, generation %lld, is not its document's latest",
						(long long) c.doc, (long long) c.gen),
				 errdetail("A row holds a copy of another row's value, or of an older one, written while trigger \"%s\" did not fire.",
						   st->tgname),
				 errhint("hx_store_gc() names the documents that rows share.")));
	st->next_node = c.next_node;
	st->nsegs = c.nsegs;
	st->gensum = c.gensum;
	st->have_old = true;
}

/*
 * The segments the stored generation replaced (img->dead) go now, or, while
 * a pending trigger event may read them, are listed as dead in the new
 * generation too, to go with its own at the next write that does not keep
 * them.
 */
static void
purge_dead(Store *st)
{
	ListCell   *lc;
	bool		keep;

	if (st->old.dead == NIL)
		return;

	/*
	 * The value the stored one replaced (the old row's value's predecessor)
	 * is still read by a pending AFTER trigger event of this transaction
	 * when the old row version is this transaction's and the table has
	 * events pending: a deferred constraint trigger (hx_lock_once, say)
	 * reads at COMMIT the OLD row of this transaction's earlier update.
	 * Its segments are then kept, until a write of a later transaction.
	 */
	keep = st->own_version && AfterTriggerPendingOnRel(st->rel);
	foreach(lc, st->old.dead)
	{
		HxSegment  *s = (HxSegment *) lfirst(lc);

		if (keep)
		{
			HxSegId    *id = palloc(sizeof(HxSegId));

			*id = s->id;
			st->killed = lappend(st->killed, id);
		}
		else
			hx_chunk_delete_segment(st->w, &s->tid);
	}
}

static void
mark_dropped(Store *st)
{
	st->row.dropped = true;
	hx_chunk_update_doc(st->w, &st->row);
}

/* What store_value() gives the row */
typedef enum Stored
{
	STORED_AS_GIVEN,			/* the new value as the statement gave it */
	STORED_OLD,					/* the old value: nothing changed */
	STORED_NEW					/* a new value (in pieces, or in line) */
} Stored;

/*
 * Store the new value of a column, given the row's old one (NULL for an
 * INSERT): what the row gets (*result, for STORED_NEW).
 */
static Stored
store_value(Store *st, HxDocHead *newhead, HxDocHead *old, HxDocHead **result)
{
	Jsonb	   *jb;
	Size		size;
	bool		have_old;
	JsonbValue	root;
	JsonbValue	oldroot;
	Jsonb	   *skeleton;
	HxDocChunked c;

	/* the same value as stored: nothing to do */
	if (old != NULL && VARSIZE(old) == VARSIZE(newhead) &&
		memcmp(old, newhead, VARSIZE(old)) == 0)
		return STORED_OLD;

	have_old = own_doc(st, old);
	jb = (newhead->format == HXDOC_INLINE) ? hx_doc_inline_jsonb(newhead) :
		hx_doc_materialize(newhead, NULL);
	size = VARSIZE(jb) - VARHDRSZ;

	/* small: in line (a stored document back in line below half) */
	if (size <= (Size) (have_old ? st->args->threshold / 2 : st->args->threshold))
	{
		if (have_old)
			mark_dropped(st);
		if (newhead->format == HXDOC_INLINE)
			return STORED_AS_GIVEN;
		*result = hx_doc_make_inline(jb);
		return STORED_NEW;
	}

	hx_jsonb_root_value(jb, &root);
	if (have_old)
	{
		open_old(st, old);
		st->doc = st->old.doc;
		st->gen = st->old.gen + 1;
		hx_jsonb_root_value(hx_doc_skeleton(old), &oldroot);
		skeleton = store_root(st, &root, &oldroot);
		run_deferred(st);
		if (st->written == 0 && st->killed == NIL &&
			VARSIZE(skeleton) == VARSIZE(hx_doc_skeleton(old)) &&
			memcmp(skeleton, hx_doc_skeleton(old), VARSIZE(skeleton)) == 0)
			return STORED_OLD;	/* the same document */
		purge_dead(st);
	}
	else
	{
		st->doc = hx_chunk_new_doc_id();
		st->gen = 1;
		st->next_node = 1;
		skeleton = store_root(st, &root, NULL);
		run_deferred(st);
		st->row.doc = st->doc;
		st->row.rel = st->rel;
		st->row.att = st->att;
		st->row.dropped = false;
		hx_chunk_insert_doc(st->w, &st->row);
	}

	c.doc = st->doc;
	c.gen = st->gen;
	c.gensum = st->gensum;
	c.nsegs = st->nsegs;
	c.next_node = st->next_node;
	*result = hx_doc_make_chunked(&c, st->killed, skeleton);
	return STORED_NEW;
}

/* Delete a few documents of the table whose rows are gone */
static void
purge_dropped(HxChunkWriter *w, Oid rel)
{
	List	   *docs = hx_chunk_dropped_docs(rel, PURGE_PER_WRITE);
	ListCell   *lc;

	foreach(lc, docs)
		(void) hx_chunk_purge_doc(w, *(int64 *) lfirst(lc), false);
}

/*
 * Is the old row's value of attnum the datum the new row has, as stored
 * (an UPDATE that did not set the column keeps its TOAST pointer)?
 */
static bool
same_datum(HeapTuple oldtup, AttrNumber attnum, TupleDesc desc, Datum newd)
{
	bool		isnull;
	Datum		oldd = heap_getattr(oldtup, attnum, desc, &isnull);
	struct varlena *a = (struct varlena *) DatumGetPointer(oldd);
	struct varlena *b = (struct varlena *) DatumGetPointer(newd);

	if (isnull)
		return false;
	if (VARATT_IS_EXTERNAL(a) != VARATT_IS_EXTERNAL(b))
		return false;
	return VARSIZE_ANY(a) == VARSIZE_ANY(b) && memcmp(a, b, VARSIZE_ANY(a)) == 0;
}

/* ---------------------------------------------------------------------
 * The trigger
 * ---------------------------------------------------------------------
 */

PG_FUNCTION_INFO_V1(hx_store);

Datum
hx_store(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = hx_trigger_data(fcinfo, "hx_store");
	TriggerEvent ev = trigdata->tg_event;
	Relation	rel = trigdata->tg_relation;
	TupleDesc	desc = RelationGetDescr(rel);
	StoreArgs  *args;
	HeapTuple	newtup = NULL;
	HeapTuple	oldtup = NULL;
	MemoryContext callcxt = CurrentMemoryContext;
	MemoryContext workcxt;
	HxChunkWriter *w;
	Datum	   *values;
	bool	   *nulls;
	bool	   *replace;
	bool		changed = false;
	int			c;

	if (!TRIGGER_FIRED_FOR_ROW(ev) || !TRIGGER_FIRED_BEFORE(ev) ||
		TRIGGER_FIRED_BY_TRUNCATE(ev))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" must be BEFORE INSERT OR UPDATE OR DELETE FOR EACH ROW",
						trigdata->tg_trigger->tgname),
				 errdetail("It stores the row's hxdoc values before the row is written.")));
	args = hx_trigger_args(fcinfo, trigdata, parse_store_args);
	check_last(trigdata, args);

	/*
	 * It must see every write of its columns: an update it does not fire
	 * for (UPDATE OF other columns, a WHEN condition) could give a row
	 * another row's document, and a delete it does not fire for would
	 * leave the row's document behind.
	 */
	{
		int16		tgtype = trigdata->tg_trigger->tgtype;
		const char *why = NULL;

		if (!TRIGGER_FOR_INSERT(tgtype))
			why = "It does not fire on INSERT.";
		else if (!TRIGGER_FOR_UPDATE(tgtype))
			why = "It does not fire on UPDATE.";
		else if (!TRIGGER_FOR_DELETE(tgtype))
			why = "It does not fire on DELETE.";
		else if (trigdata->tg_trigger->tgnattr > 0)
			why = "It fires on UPDATE OF some columns only.";
		else if (trigdata->tg_trigger->tgqual != NULL)
			why = "It has a WHEN condition.";
		if (why != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
					 errmsg("trigger \"%s\" must be BEFORE INSERT OR UPDATE OR DELETE FOR EACH ROW",
							trigdata->tg_trigger->tgname),
					 errdetail_internal("%s", why),
					 errhint("It must see every write of its columns: one it does not see could leave two rows sharing a document, or a deleted row's document behind.")));
	}

	if (TRIGGER_FIRED_BY_INSERT(ev))
		newtup = trigdata->tg_trigtuple;
	else if (TRIGGER_FIRED_BY_UPDATE(ev))
	{
		oldtup = trigdata->tg_trigtuple;
		newtup = trigdata->tg_newtuple;
	}
	else
		oldtup = trigdata->tg_trigtuple;

	workcxt = AllocSetContextCreate(callcxt, "hx_store", ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(workcxt);
	w = hx_chunk_writer_open();
	purge_dropped(w, RelationGetRelid(rel));

	values = palloc(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	replace = palloc0(sizeof(bool) * desc->natts);
	for (c = 0; c < args->ncols; c++)
	{
		AttrNumber	attnum = args->attnums[c];
		bool		oldnull = true;
		bool		newnull = true;
		Datum		oldd = oldtup ? heap_getattr(oldtup, attnum, desc, &oldnull) : (Datum) 0;
		Datum		newd = newtup ? heap_getattr(newtup, attnum, desc, &newnull) : (Datum) 0;
		HxDocHead  *old;
		HxDocHead  *result = NULL;
		Store		st;

		if (args->from != InvalidAttrNumber && newtup != NULL)
		{
			/* the value is the from column's: unchanged, it is kept */
			bool		fromnull;
			Datum		from = heap_getattr(newtup, args->from, desc, &fromnull);

			if (oldtup != NULL && !oldnull && !fromnull && same_datum(oldtup, args->from, desc, from))
			{
				values[attnum - 1] = oldd;
				nulls[attnum - 1] = false;
				replace[attnum - 1] = true;
				changed = true;
				continue;
			}
			newnull = fromnull;
			newd = fromnull ? (Datum) 0 :
				PointerGetDatum(hx_doc_make_inline(DatumGetJsonbP(from)));
			if (fromnull)
			{
				/* the column's value goes with the from column's */
				values[attnum - 1] = (Datum) 0;
				nulls[attnum - 1] = true;
				replace[attnum - 1] = true;
				changed = true;
			}
		}
		old = oldnull ? NULL : hx_doc_detoast(oldd);

		CHECK_FOR_INTERRUPTS();
		memset(&st, 0, sizeof(Store));
		st.args = args;
		st.w = w;
		st.rel = RelationGetRelid(rel);
		st.att = attnum;
		st.tgname = trigdata->tg_trigger->tgname;

		/* (purge_dead() keeps what a pending trigger event may read) */
		st.own_version = oldtup != NULL &&
			TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(oldtup->t_data));

		if (newtup == NULL || newnull)
		{
			/* the row, or its value, is gone: its document too, later */
			if (own_doc(&st, old))
				mark_dropped(&st);
			continue;
		}
		switch (store_value(&st, hx_doc_detoast(newd), old, &result))
		{
			case STORED_AS_GIVEN:
				if (args->from != InvalidAttrNumber)
				{
					values[attnum - 1] = newd;
					nulls[attnum - 1] = false;
					replace[attnum - 1] = true;
					changed = true;
				}
				break;
			case STORED_OLD:
				/* the old datum as it is stored: an update does not rewrite it */
				values[attnum - 1] = oldd;
				nulls[attnum - 1] = false;
				replace[attnum - 1] = true;
				changed = true;
				break;
			case STORED_NEW:
				{
					MemoryContext oldcxt = MemoryContextSwitchTo(callcxt);
					HxDocHead  *copy = palloc(VARSIZE(result));

					memcpy(copy, result, VARSIZE(result));
					MemoryContextSwitchTo(oldcxt);
					values[attnum - 1] = PointerGetDatum(copy);
					nulls[attnum - 1] = false;
					replace[attnum - 1] = true;
					changed = true;
				}
				break;
		}
	}
	hx_chunk_writer_close(w);
	/* what was written is read by the AFTER triggers of this statement */
	CommandCounterIncrement();
	MemoryContextSwitchTo(callcxt);
	if (changed)
		newtup = heap_modify_tuple(newtup, desc, values, nulls, replace);
	MemoryContextDelete(workcxt);
	return PointerGetDatum(TRIGGER_FIRED_BY_DELETE(ev) ? oldtup : newtup);
}
