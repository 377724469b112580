/*-------------------------------------------------------------------------
 *
 * diff.h
 *	  The RFC 6902 patch between two documents (diff.c), for hx_diff and
 *	  the stream trigger.
 *
 * src/diff.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef HX_DIFF_H
#define HX_DIFF_H

#include "tree.h"

/* How a patch describes a changed array */
typedef enum HxArrayMode
{
	HX_ARRAYS_APPEND,			/* "add .../-" per new item, else replace */
	HX_ARRAYS_REPLACE,			/* replace the whole array */
	HX_ARRAYS_INDEX				/* element by element */
} HxArrayMode;

extern HxArrayMode hx_parse_array_mode(const char *s);
extern HxNode *hx_diff_nodes(Jsonb *oldjb, Jsonb *newjb, HxArrayMode mode);

#endif							/* HX_DIFF_H */
