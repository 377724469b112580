#!/usr/bin/env bash
# bench/steps.sh: what exactly-once costs, the steps part of bench/run, in
# the throwaway cluster bench/run starts (PGHOST etc. set; fsync on).
#
# A step of four tool calls on the README's sessions table
# (docs/sessions.sql: its guards and its hx_stream trigger), on a random
# one of 1,000 sessions, 8 pgbench clients, with the table's stream
# trigger as the README has it (NOTIFY), then with payload=none (the log
# only, as the WAL transport has it):
#   A. staged: each call staged by hx_stage in a transaction of its own, as
#      parallel tools finish, then one UPDATE that merges hx_promote's
#      writes (bench/pgbench/step_staged.sql): 5 commits, 1 event;
#   A'. staged, last call with the promote: three calls staged apart, the
#      last one staged in the transaction that promotes, as a runtime does
#      that promotes when the step's last call comes in
#      (bench/pgbench/step_staged_last.sql): 4 commits, 1 event;
#   B. direct: each call merged by an UPDATE of its own, as runtimes do
#      without staging (bench/pgbench/step_direct.sql): 4 commits, 4
#      events, and a retried call would apply twice.
# Steps per second (pgbench's tps: one script run is one step), medians of
# HX_BENCH_PG_REPS runs of HX_BENCH_PG_SECONDS each (defaults 5 and 8),
# the three taking turns; A/B is the ratio of the medians, and "paired"
# the median of the ratios of runs of the same round (the disk's commit
# latency drifts over minutes on a shared machine, and moves the runs of
# a round alike); target A/B >= 0.8.  Figures only: never asserted by
# tests.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=test/lib/common.sh
. "$top/test/lib/common.sh"

DB=hxstate_steps
T=${HX_BENCH_PG_SECONDS:-8}
REPS=${HX_BENCH_PG_REPS:-5}
ROWS=1000
CLIENTS=8
PGBENCH=$(hx_bindir "$HX_PG_CONFIG")/pgbench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

sql() {
	psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$DB" -c "$1"
}

hx_log "steps: the README's sessions table, $ROWS sessions"
dropdb --if-exists "$DB" >/dev/null 2>&1
createdb "$DB"
sql "CREATE EXTENSION hxstate" >/dev/null

reset() {			# payload
	sql "SET client_min_messages = warning; DROP TABLE IF EXISTS sessions; TRUNCATE hx_event, hx_step, hx_step_call" >/dev/null
	psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -f "$top/docs/sessions.sql" >/dev/null
	if [ "$1" = none ]; then
		sql "DROP TRIGGER stream ON sessions;
		     CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON sessions
		         FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'session_id', 'payload=none')" >/dev/null
	fi
	sql "INSERT INTO sessions (session_id, user_id, state)
	     SELECT 's-' || lpad(i::text, 4, '0'), 'u-' || i, '{\"log\": [], \"stats\": {\"tool_calls\": 0}}'
	       FROM generate_series(1, $ROWS) i" >/dev/null
	sql "VACUUM ANALYZE" >/dev/null
	sql "CHECKPOINT" >/dev/null
}

run() {			# key script payload
	reset "$3"
	if ! "$PGBENCH" -n -M prepared -c "$CLIENTS" -j 2 -T "$T" -D rows=$ROWS \
		-f "$top/bench/pgbench/$2" "$DB" >"$work/out" 2>&1; then
		cat "$work/out" >&2
		exit 1
	fi
	local tps n calls events
	tps=$(awk '/^tps = / { print $3; exit }' "$work/out")
	n=$(awk -F': ' '/number of transactions actually processed/ { print $2; exit }' "$work/out")
	calls=$(sql "SELECT sum((state->'stats'->>'tool_calls')::int) FROM sessions")
	events=$(sql "SELECT count(*) FROM hx_event WHERE type = 'STATE_DELTA'")
	# every step's four calls landed once
	if [ "$calls" != $((n * 4)) ]; then
		echo "bench/steps: $1: $n steps but $calls calls counted" >&2
		exit 1
	fi
	printf '%s\t%s\t%s\n' "$3" "$1" "$tps" >>"$work/results"
	printf '  %-7s %-7s %8.1f steps/s, %6s steps, %7s STATE_DELTA events\n' "$3" "$1" "$tps" "$n" "$events"
}

fsync=$(sql "SHOW fsync")
[ "$fsync" = on ] || { echo "bench/steps: fsync is $fsync, not on" >&2; exit 1; }
hx_log "steps: $T s per run, $REPS rounds, $CLIENTS clients, taking turns"
: >"$work/results"
keys=(staged last direct)
for payload in notify none; do
	for ((r = 0; r < REPS; r++)); do
		# the order rotates every round
		for ((i = 0; i < 3; i++)); do
			k=${keys[(i + r) % 3]}
			case $k in
				staged) run staged step_staged.sql $payload ;;
				last) run last step_staged_last.sql $payload ;;
				direct) run direct step_direct.sql $payload ;;
			esac
		done
	done
done

median() {
	sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
echo
printf 'scenario (8 clients)                           | A steps/s | B steps/s |   A/B | paired | target | met?\n'
printf '%s\n' '-----------------------------------------------+-----------+-----------+-------+--------+--------+-----'
for payload in notify none; do
	b=$(awk -F'\t' -v p=$payload '$1 == p && $2 == "direct" { print $3 }' "$work/results" | median)
	for a_key in staged last; do
		a=$(awk -F'\t' -v p=$payload -v k=$a_key '$1 == p && $2 == k { print $3 }' "$work/results" | median)
		# runs come in rounds of three, one of each, in the order they ran
		paired=$(awk -F'\t' -v p=$payload -v k=$a_key '$1 == p { v[$2] = $3; n++; if (n % 3 == 0) print v[k] / v["direct"] }' \
			"$work/results" | median)
		ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", a / b }')
		paired=$(awk -v r="$paired" 'BEGIN { printf "%.3f", r }')
		met=$(awk -v r="$ratio" -v q="$paired" 'BEGIN { print (r >= 0.8 && q >= 0.8) ? "yes" : "NO" }')
		case $a_key in
			staged) label="4 staged + promote (5 commits)" ;;
			last) label="3 staged, 1 + promote (4 commits)" ;;
		esac
		case $payload in
			notify) label="$label, NOTIFY" ;;
			none) label="$label, log only" ;;
		esac
		printf '%-46s | %9.0f | %9.0f | %5s | %6s | >= 0.8 | %4s\n' "$label" "$a" "$b" "$ratio" "$paired" "$met"
	done
done
echo "B: 4 direct merges (4 commits); NOTIFY: the README's sessions table; log only: its stream trigger with payload=none"
