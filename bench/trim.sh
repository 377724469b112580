#!/usr/bin/env bash
# bench/trim.sh: hx_stream_trim on a log of 10^7 events while writers run,
# the trim part of bench/run, in the throwaway cluster bench/run starts
# (PGHOST etc. set; fsync on).
#
# The log: HX_BENCH_TRIM_EVENTS events (default 10,000,000) over 10,000
# streams of the README's sessions table (docs/sessions.sql), spread evenly
# over the seven days before now, so that seven of the ring's eight
# partitions hold old days and each stream's last event is an hour old.  The writers:
# 8 pgbench clients, each transaction one hx_merge UPDATE of a random one of
# 1,000 of those sessions (bench/pgbench/update.sql), whose hx_stream
# trigger numbers its event after the stream's last seq in an old partition.
# After HX_BENCH_TRIM_BEFORE seconds (default 10) of writing, one session
# runs hx_stream_trim('2 days'), which empties the partitions of the days
# older than that by TRUNCATE (carrying each stream's last event over to
# today's partition first) and deletes row by row what is older in the
# partition of the cutoff's own day.  Printed:
#   - the trim's duration and the events it trimmed;
#   - the writers' throughput per second (pgbench -P 1) before, during and
#     after the trim, and the slowest write of each period: whether the trim
#     locked writers out;
#   - the log's size (pg_total_relation_size over the partitions) and its
#     dead rows (pg_stat_user_tables after ANALYZE) before and after: whether
#     it left the table bloated.
# Figures only: never asserted by tests.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=test/lib/common.sh
. "$top/test/lib/common.sh"

DB=hxstate_trim
EVENTS=${HX_BENCH_TRIM_EVENTS:-10000000}
STREAMS=10000
ROWS=1000
CLIENTS=8
BEFORE=${HX_BENCH_TRIM_BEFORE:-10}
AFTER=10
PGBENCH=$(hx_bindir "$HX_PG_CONFIG")/pgbench
work=$(mktemp -d)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT

sql() {
	psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$DB" -c "$1"
}

size_line() {
	sql "ANALYZE hx_event" >/dev/null
	sql "SELECT pg_size_pretty(sum(pg_total_relation_size(c.oid))) || ', ' ||
	            sum(s.n_live_tup) || ' live rows, ' || sum(s.n_dead_tup) || ' dead'
	       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
	       JOIN pg_stat_user_tables s ON s.relid = c.oid
	      WHERE i.inhparent = 'hx_event'::regclass"
}

fsync=$(sql "SHOW fsync" 2>/dev/null || psql -X -A -t -d postgres -c "SHOW fsync")
[ "$fsync" = on ] || { echo "bench/trim: fsync is $fsync, not on" >&2; exit 1; }

hx_log "trim: a log of $EVENTS events over $STREAMS streams, the seven days before now"
dropdb --if-exists "$DB" >/dev/null 2>&1
createdb "$DB"
sql "CREATE EXTENSION hxstate" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -f "$top/docs/sessions.sql" >/dev/null
per=$((EVENTS / STREAMS))
t0=$(date +%s)
# Each stream's events 1..per, oldest first, spread evenly over the seven
# days before now: the bulk load of the log a fleet wrote over a week, as a
# daily hx_stream_trim with a retention under a week keeps it (an eighth
# day would wrap the ring into today's partition).  The state of each
# session is the one its last event leaves, so the writers' deltas continue
# it.
sql "SET synchronous_commit = off;
     INSERT INTO hx_event (stream, seq, type, event, created_at)
     SELECT 'sessions:s-' || lpad(s::text, 5, '0'), q, 'STATE_DELTA',
            jsonb_build_object('type', 'STATE_DELTA',
                               'delta', jsonb_build_array(jsonb_build_object('op', 'replace', 'path', '/stats/tool_calls', 'value', q)),
                               'metadata', jsonb_build_object('stream', 'sessions:s-' || lpad(s::text, 5, '0'), 'seq', q)),
            now() - interval '7 days' + (q - 1) * (interval '7 days' - interval '1 hour') / $per
       FROM generate_series(1, $STREAMS) s, generate_series(1, $per) q" >/dev/null
sql "INSERT INTO sessions (session_id, user_id, state)
     SELECT 's-' || lpad(i::text, 5, '0'), 'u-' || i,
            jsonb_build_object('log', '[]'::jsonb, 'stats', jsonb_build_object('tool_calls', $per))
       FROM generate_series(1, $STREAMS) i" >/dev/null
# the sessions' own INSERT events: drop them, so that each written
# stream's last event is the loaded one
sql "DELETE FROM hx_event WHERE type = 'STATE_SNAPSHOT'" >/dev/null
sql "VACUUM ANALYZE" >/dev/null
sql "CHECKPOINT" >/dev/null
hx_log "trim: loaded in $(($(date +%s) - t0)) s"
before=$(size_line)
echo "  the log before: $before"

# pgbench's update.sql names sessions s-0001..; these are s-00001..: a
# copy with five digits
sed 's/lpad(:id::text, 4/lpad(:id::text, 5/' "$top/bench/pgbench/update.sql" >"$work/update.sql"
total=$((BEFORE + AFTER + 60))
hx_log "trim: $CLIENTS writers for up to $total s; the trim after $BEFORE s"
"$PGBENCH" -n -M prepared -c "$CLIENTS" -j 2 -T "$total" -P 1 -D rows=$ROWS \
	-f "$work/update.sql" "$DB" >"$work/pgbench.out" 2>"$work/progress" &
bench=$!
sleep "$BEFORE"
start=$(date +%s.%N)
trimmed=$(sql "SELECT hx_stream_trim('2 days')")
end=$(date +%s.%N)
sleep "$AFTER"
kill -TERM "$bench" 2>/dev/null || true
wait "$bench" 2>/dev/null || true

after=$(size_line)
elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
# progress lines: "progress: 12.0 s, 1234.5 tps, lat 6.4 ms stddev 2.1, 0 failed"
awk '/^progress: / { print $2 + 0, $4 + 0, $7 + 0 }' "$work/progress" >"$work/series"
# the progress clock starts with pgbench, about when the writers' first
# second does; the trim ran from BEFORE to BEFORE + its duration
awk -v b="$BEFORE" -v d="$elapsed" -v a="$AFTER" '
	function add(k, tps, lat) {
		s[k] += tps; c[k]++
		if (lat > m[k]) m[k] = lat
		if (c[k] == 1 || tps < lo[k]) lo[k] = tps
	}
	{
		t = $1; k = (t <= b) ? "before" : (t <= b + d + 1) ? "during" : (t <= b + d + 1 + a) ? "after" : ""
		if (k != "") add(k, $2, $3)
	}
	END {
		printf "  %-7s %7s %11s %19s %26s\n", "period", "seconds", "mean tps", "lowest second, tps", "highest second, mean lat"
		split("before during after", ks, " ")
		for (i = 1; i <= 3; i++) {
			k = ks[i]
			if (c[k]) printf "  %-7s %7d %11.0f %19.0f %23.1f ms\n", k, c[k], s[k] / c[k], lo[k], m[k]
		}
	}' "$work/series"
echo "  hx_stream_trim('2 days'): $trimmed events trimmed in $elapsed s"
echo "  the log after: $after"
seconds=$(wc -l <"$work/series")
zero=$(awk '$2 == 0' "$work/series" | wc -l)
echo "  seconds of pgbench progress: $seconds, of which with no write committed: $zero"
