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

#include "datatype/timestamp.h"
#include "utils/jsonb.h"

/*
 * The ring, defined here once: the log is partitioned into HX_LOG_BUCKETS
 * partitions, hx_event_0 .. hx_event_<n-1>, by the day of created_at (days
 * of HX_LOG_BUCKET_SECONDS since the Unix epoch, modulo HX_LOG_BUCKETS), so
 * that whole days are trimmed with TRUNCATE.  Everything else derives from
 * it: the trigger picks an event's partition and finds a stream's last seq
 * with it (eventlog.c), and hx_stream_trim reads the ring through
 * hx_event_ring().  The install script's partition key cannot call C (nor
 * change once the log exists), so it spells the same arithmetic out, and
 * check_ring() verifies at run time that it agrees, by evaluating it;
 * test/sql/stream.sql compares the partitions that routing picks with the ring.
 */
#define HX_LOG_BUCKETS			8
#define HX_LOG_BUCKET_SECONDS	86400

extern void hx_log_init(void);
extern void hx_log_prepare(void);
extern Oid	hx_log_relid(void);
extern int64 hx_log_next_seq(const char *stream);
extern void hx_log_last(const char *stream, int64 *last_seq,
						TimestampTz *last_at);
extern bool hx_log_inserting(const char *stream, int64 seq);
extern void hx_log_insert(const char *stream, int64 seq, const char *type,
						  Jsonb *event);

#endif							/* HX_EVENTLOG_H */
