/*-------------------------------------------------------------------------
 *
 * trigger.h
 *	  Trigger plumbing that every hxstate trigger function shares
 *	  (trigger.c): how it was called, its arguments resolved once and kept,
 *	  the columns they name, and how violations name them.
 *
 * src/trigger.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef HX_TRIGGER_H
#define HX_TRIGGER_H

#include "hxstate.h"

#include "commands/trigger.h"
#include "utils/rel.h"

extern TriggerData *hx_trigger_data(FunctionCallInfo fcinfo,
									const char *funcname);
extern TriggerData *hx_row_check_trigger_data(FunctionCallInfo fcinfo,
											  const char *funcname,
											  bool deletes);
extern Datum hx_trigger_return(TriggerData *trigdata);
extern AttrNumber hx_trigger_column(Relation rel, const char *name);

/*
 * A trigger's arguments, parsed by the trigger function's parser into
 * memory of cxt (its temporary allocations may go to the current context),
 * and kept while the catalogs they were read from hold (trigger.c).  A
 * parser must not fire triggers.  HxTriggerArgsValid, when given, says
 * whether kept arguments still hold in ways a relcache invalidation of
 * the trigger's table would not tell.
 */
typedef void *(*HxTriggerArgsParser) (TriggerData *trigdata,
									  MemoryContext cxt);
typedef bool (*HxTriggerArgsValid) (void *args);

extern void hx_trigger_init(void);
extern void *hx_trigger_args(FunctionCallInfo fcinfo, TriggerData *trigdata,
							 HxTriggerArgsParser parse);
extern void *hx_trigger_args_checked(FunctionCallInfo fcinfo,
									 TriggerData *trigdata,
									 HxTriggerArgsParser parse,
									 HxTriggerArgsValid valid);
extern void hx_trigger_args_depend_on(Oid relid);

extern int	hx_errtablecolconstraint(Relation rel, AttrNumber attnum,
									 const char *conname);
extern char *hx_value_text_for(Relation rel, AttrNumber attnum,
							   Oid typoutput, Datum datum, bool isnull);

#endif							/* HX_TRIGGER_H */
