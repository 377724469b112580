/*-------------------------------------------------------------------------
 *
 * eventlog.h
 *	  The event log, hx_event (eventlog.c): writing an event, and finding
 *	  a stream's last seq.
 *
 * src/eventlog.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef HX_EVENTLOG_H
#define HX_EVENTLOG_H

#include "hxstate.h"

#include "utils/jsonb.h"

/*
 * The log is partitioned into a ring of HX_LOG_BUCKETS partitions,
 * hx_event_0 .. hx_event_<n-1>, by the day of created_at (days since the
 * Unix epoch, modulo HX_LOG_BUCKETS), so that whole days are trimmed with
 * TRUNCATE (see hx_stream_trim in the install script).
 */
#define HX_LOG_BUCKETS			8
#define HX_LOG_BUCKET_SECONDS	86400

extern void hx_log_init(void);
extern void hx_log_prepare(void);
extern Oid	hx_log_relid(void);
extern int64 hx_log_next_seq(const char *stream);
extern void hx_log_insert(const char *stream, int64 seq, const char *type,
						  Jsonb *event);

#endif							/* HX_EVENTLOG_H */
