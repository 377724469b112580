/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  The differences between the PostgreSQL major versions hxstate builds
 *	  against (15 to 18), in one place: every other file is written against
 *	  the newest API and includes this header (through hxstate.h) for the
 *	  older ones.
 *
 * Each shim names the release that changed the API, so that it can go
 * when that release is the oldest one supported.
 *
 * src/compat.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef HXSTATE_COMPAT_H
#define HXSTATE_COMPAT_H

#include "postgres.h"

#include "executor/executor.h"
#include "nodes/pg_list.h"
#if PG_VERSION_NUM >= 160000
#include "parser/parse_relation.h"
#endif

#if PG_VERSION_NUM < 150000
#error "hxstate needs PostgreSQL 15 or later"
#endif

/*
 * PostgreSQL 18 marks functions that do not return with a prefix,
 * pg_noreturn, and removed the postfix pg_attribute_noreturn().  Before
 * 18, the attribute (a GCC attribute or MSVC's __declspec) may stand in
 * front of the declaration just as well.
 */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

/*
 * An executor state whose range table is one relation, for an insert made
 * without a plan.  ExecInitRangeTable() took the range table alone in 15;
 * 16 moved the permissions to be checked out of the range table entry into
 * a list of RTEPermissionInfo (the entry must point at one: error details
 * consult it), and 18 added the set of entries that partition pruning kept
 * (the one entry, here).
 */
static inline void
hx_exec_init_range_table(EState *estate, RangeTblEntry *rte)
{
#if PG_VERSION_NUM >= 160000
	List	   *perminfos = NIL;

	addRTEPermissionInfo(&perminfos, rte);
#endif
#if PG_VERSION_NUM >= 180000
	ExecInitRangeTable(estate, list_make1(rte), perminfos, bms_make_singleton(1));
#elif PG_VERSION_NUM >= 160000
	ExecInitRangeTable(estate, list_make1(rte), perminfos);
#else
	ExecInitRangeTable(estate, list_make1(rte));
#endif
}

/*
 * ExecInsertIndexTuples() gained onlySummarizing in 16 (false: an insert
 * updates every index).
 */
#if PG_VERSION_NUM >= 160000
#define hx_exec_insert_index_tuples(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL, false)
#else
#define hx_exec_insert_index_tuples(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL)
#endif

/*
 * 18 made CHECK constraints that are not enforced possible (NOT ENFORCED):
 * ExecConstraints() skips those whose compiled expression is NULL, and
 * ResultRelInfo's array of them was renamed.
 */
#if PG_VERSION_NUM >= 180000
#define hx_ri_check_exprs(rri) ((rri)->ri_CheckConstraintExprs)
#define hx_check_enforced(check) ((check)->ccenforced)
#else
#define hx_ri_check_exprs(rri) ((rri)->ri_ConstraintExprs)
#define hx_check_enforced(check) true
#endif

/*
 * 18 added the scan's instrumentation to index_beginscan() (NULL: none),
 * and to RelationGetPrimaryKeyIndex() whether a deferrable primary key
 * counts (the log's is not deferrable: either answer finds it).
 */
#if PG_VERSION_NUM >= 180000
#define hx_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#define hx_primary_key_index(rel) RelationGetPrimaryKeyIndex((rel), false)
#else
#define hx_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), (norderbys))
#define hx_primary_key_index(rel) RelationGetPrimaryKeyIndex(rel)
#endif

/*
 * The largest entry a btree of version 4 takes (a third of a page, less a
 * heap TID's room): 18 made BTMaxItemSize a constant, 15 computes it from
 * a page, whose size is BLCKSZ.
 */
#if PG_VERSION_NUM >= 180000
#define HX_BT_MAX_ITEM_SIZE BTMaxItemSize
#else
#define HX_BT_MAX_ITEM_SIZE \
	MAXALIGN_DOWN((BLCKSZ - \
				   MAXALIGN(SizeOfPageHeaderData + \
							3*sizeof(ItemIdData)  + \
							3*sizeof(ItemPointerData)) - \
				   MAXALIGN(sizeof(BTPageOpaqueData))) / 3)
#endif

/*
 * The new tuple of a decoded change: PostgreSQL 17 made it a HeapTuple,
 * where it was a ReorderBufferTupleBuf holding one.
 */
#include "replication/reorderbuffer.h"
static inline HeapTuple
hx_change_newtuple(ReorderBufferChange *change)
{
#if PG_VERSION_NUM >= 170000
	return change->data.tp.newtuple;
#else
	return change->data.tp.newtuple ? &change->data.tp.newtuple->tuple : NULL;
#endif
}

#endif							/* HXSTATE_COMPAT_H */
