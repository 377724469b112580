/*-------------------------------------------------------------------------
 *
 * message.c
 *	  What every error message of hxstate shares: user values quoted in a
 *	  message are clipped, so that a 2 MB pointer or key does not make a
 *	  2 MB message (HX_MESSAGE_CLIP, hxstate.h).
 *
 * src/message.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "hxstate.h"

/*
 * A user string (a pointer, a key) for a message: cut to HX_MESSAGE_CLIP
 * bytes, on a character boundary, with "..." when cut.
 */
const char *
hx_clip(const char *s)
{
	int			len = strlen(s);
	int			keep;

	if (len <= HX_MESSAGE_CLIP)
		return s;
	keep = pg_mbcliplen(s, len, HX_MESSAGE_CLIP);
	return psprintf("%.*s...", keep, s);
}
