#!/usr/bin/env bash
# bench/pgbench.sh: the pgbench part of bench/run, in the throwaway cluster
# that bench/run starts (test/lib/cluster.sh sets PGHOST, PGPORT, PGUSER and
# PGDATABASE; fsync is on).  It measures what the row triggers cost an
# UPDATE under concurrency, in transactions per second:
#   1. guards: the README's sessions table with its three guards
#      (hx_lock_once, hx_slot_guard, hx_phase_guard, as constraint
#      triggers) vs the same table without them; 8 clients; target >= 0.9;
#   2. streaming: the table with the hx_stream trigger (STATE_DELTA logged
#      to hx_event and NOTIFYed) vs the same UPDATE with no trigger and a
#      bare pg_notify of a payload as long as the typical event, in the same
#      statement; 8 clients; target >= 0.9;
#   3. NOTIFY itself: the UPDATE with that bare pg_notify vs with no
#      notification; 1, 8 and 32 clients; no target;
#   4. the transports, at 1, 8 and 32 clients: hx_stream with
#      payload=none (log only) vs no trigger; the same with a hub following
#      every stream over the WAL (bench/pgbench/follow.js) vs no trigger,
#      target >= 0.7 at 32, and vs hx_stream over NOTIFY, target >= 2.5
#      at 32; and at 32, for reference, PostgreSQL's own pg_recvlogical
#      decoding the same publication in the hub's place (no target): the
#      CPU that the walsender and its client take per transaction is
#      printed for both.
# Every transaction is the one statement of bench/pgbench/update.sql (or
# update_notify.sql, the same plus pg_notify), autocommit, on a random one
# of 1000 sessions (pgbench -n -M prepared -j 2).  The table is made anew
# (bench/pgbench/setup.sql, docs/sessions.sql), VACUUM ANALYZEd and CHECKPOINTed before every
# run.  One listener (bench/pgbench/listen.js) stays connected throughout,
# LISTENing on every session's channel and discarding what it gets; after
# every run the script checks that it got one notification per notifying
# transaction and that the NOTIFY queue stayed empty.  Each run lasts
# HX_BENCH_PG_SECONDS (default 8); the contenders take turns for
# HX_BENCH_PG_REPS rounds (default 5), and the table shows the median tps.
# HX_BENCH_PG_ONLY=transports32 runs only scenario 4 at 32 clients (none,
# log only, WAL + hub, WAL + pg_recvlogical and NOTIFY rotating every
# round); HX_BENCH_PG_ONLY=log32 only none and log only at 32 clients,
# alternating (the event log's own cost, in half the time of a round of
# transports32), and prints each round's ratio.
# Short runs and many turns, rather than long runs, because throughput on a
# shared virtual machine drifts by tens of percent over seconds (one 12 s
# run went from 6,000 to 15,000 tps and back): alternating often keeps the
# drift out of the ratios.  The
# 8-client runs serve every scenario at once: one round runs guarded, bare,
# stream and bare + pg_notify, so scenario 3 at 8 clients reuses the "bare"
# runs of 1 and the pg_notify runs of 2.  93 runs: about 15 minutes.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=test/lib/common.sh
. "$top/test/lib/common.sh"

export HX_BENCH_PG_DB=hxstate_pgbench
DB=$HX_BENCH_PG_DB
T=${HX_BENCH_PG_SECONDS:-8}
REPS=${HX_BENCH_PG_REPS:-5}
ROWS=1000
THREADS=2
PGBENCH=$(hx_bindir "$HX_PG_CONFIG")/pgbench
RECVLOGICAL=$(hx_bindir "$HX_PG_CONFIG")/pg_recvlogical
CLK_TCK=$(getconf CLK_TCK)
SCRIPTS=$top/bench/pgbench

work=$(mktemp -d)
listener_pid=
cleanup() {
	if [ -n "$listener_pid" ]; then kill "$listener_pid" 2>/dev/null || true; fi
	if [ -n "${follower_pid:-}" ]; then kill "$follower_pid" 2>/dev/null || true; fi
	if [ -n "${recv_pid:-}" ]; then kill "$recv_pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

sql() {
	psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$DB" -c "$1"
}

hx_log "pgbench: building the database (bench/pgbench/setup.sql)"
dropdb --if-exists "$DB" >/dev/null 2>&1
createdb "$DB"
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -f "$SCRIPTS/setup.sql"
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -f "$top/docs/sessions.sql" >/dev/null
sql "SELECT bench_pg_keep_triggers()" >/dev/null
sql "SELECT hx_stream_publication()" >/dev/null

# update_notify.sql must be update.sql with only its select list changed
if ! diff <(grep -v '^--' "$SCRIPTS/update.sql" | sed '$d') \
	<(grep -v '^--' "$SCRIPTS/update_notify.sql" | sed '$d') >/dev/null; then
	echo "bench/pgbench: update.sql and update_notify.sql differ in more than their last line" >&2
	exit 1
fi

fsync=$(sql "SHOW fsync")
echo "PostgreSQL: $(sql "SELECT version()")"
settings=$(sql "SELECT format('synchronous_commit=%s, wal_sync_method=%s, shared_buffers=%s, hxstate %s',
	current_setting('synchronous_commit'), current_setting('wal_sync_method'),
	current_setting('shared_buffers'), (SELECT extversion FROM pg_extension WHERE extname = 'hxstate'))")
# whether shared memory is on huge pages: huge_pages = try says only that
# it may be, so look at the postmaster's mappings (2 MB kernel pages)
hp="huge_pages=$(sql "SHOW huge_pages")"
pm_pid=$(head -1 "$(sql "SHOW data_directory")/postmaster.pid" 2>/dev/null || true)
if [ -n "$pm_pid" ] && [ -r "/proc/$pm_pid/smaps" ]; then
	if grep -q '^KernelPageSize: *2048 kB' "/proc/$pm_pid/smaps"; then
		hp="$hp (shared memory on 2 MB pages)"
	else
		hp="$hp (shared memory on 4 kB pages)"
	fi
fi
echo "SHOW fsync: $fsync; $settings; $hp"
echo "pgbench: $("$PGBENCH" --version); CPU: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
if [ "$fsync" != on ]; then
	echo "bench/pgbench: fsync is $fsync, not on" >&2
	exit 1
fi

# A fresh table of configuration $1, vacuumed, analyzed and checkpointed
reset_table() {
	sql "SELECT bench_pg_reset('$1', $ROWS)" >/dev/null
	sql "VACUUM ANALYZE sessions" >/dev/null
	sql "VACUUM ANALYZE hx_event" >/dev/null
	sql "CHECKPOINT" >/dev/null
	local got
	got=$(sql "SELECT bench_pg_config()")
	if [ "$got" != "$1" ]; then
		echo "bench/pgbench: the table has configuration $got, not $1" >&2
		exit 1
	fi
}

# pgbench -n -M prepared -j 2: clients $1, seconds $2, script $3; output to $work/pgbench.out
pgbench_run() {
	if ! "$PGBENCH" -n -M prepared -c "$1" -j "$THREADS" -T "$2" -D rows=$ROWS -D plen="${PLEN:-0}" \
		-f "$3" "$DB" >"$work/pgbench.out" 2>&1 ||
		grep -q 'aborted' "$work/pgbench.out"; then
		cat "$work/pgbench.out" >&2
		echo "bench/pgbench: pgbench failed" >&2
		exit 1
	fi
}

pgbench_value() {		# the value of the output line starting with $1
	awk -v k="$1" 'index($0, k) == 1 { sub(k, ""); print $1; exit }' "$work/pgbench.out"
}

# ---------------------------------------------------------------------
# The listener, open from here to the end
# ---------------------------------------------------------------------
node "$SCRIPTS/listen.js" "$ROWS" "$work/expect" >"$work/listen.out" 2>"$work/listen.err" &
listener_pid=$!

# Runs command $5... every 20 ms until it succeeds; gives up after $1
# tries, or as soon as process $2 (if any) has ended, printing file $3 (if
# any) and then "bench/pgbench: $4"
poll_until() {
	local tries=$1 pid=$2 errfile=$3 what=$4 waited=0
	shift 4
	until "$@"; do
		if { [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; } || [ "$waited" -gt "$tries" ]; then
			if [ -n "$errfile" ]; then cat "$errfile" >&2; fi
			echo "bench/pgbench: $what" >&2
			exit 1
		fi
		sleep 0.02
		waited=$((waited + 1))
	done
}
# true when file $1 has more than $2 lines
more_lines() { [ "$(wc -l <"$1")" -gt "$2" ]; }
# true when query $1 returns $2
sql_is() { [ "$(sql "$1")" = "$2" ]; }

listener_wait() {	# until listen.out has more than $1 lines
	poll_until 1000 "$listener_pid" "$work/listen.err" "the listener did not answer" \
		more_lines "$work/listen.out" "$1"
}

listener_signal() {	# send signal $1, wait for the listener's answer
	local lines
	lines=$(wc -l <"$work/listen.out")
	kill "-$1" "$listener_pid"
	listener_wait "$lines"
}

listener_wait 0

# ---------------------------------------------------------------------
# The typical event: a few seconds of the UPDATE on the stream table
# ---------------------------------------------------------------------
hx_log "pgbench: measuring the STATE_DELTA event of one UPDATE (3 s, 8 clients, hx_stream)"
reset_table stream
pgbench_run 8 3 "$SCRIPTS/update.sql"
read -r PLEN emin emax nev < <(sql "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY octet_length(event::text)),
	min(octet_length(event::text)), max(octet_length(event::text)), count(*)
	FROM hx_event WHERE type = 'STATE_DELTA'" | tr '|' ' ')
if [ -z "$PLEN" ] || [ "$nev" -lt 100 ]; then
	echo "bench/pgbench: the stream run logged $nev STATE_DELTA events" >&2
	exit 1
fi
state_bytes=$(sql "SELECT round(avg(pg_column_size(state))) FROM sessions")
echo "state per session: about $state_bytes B (pg_column_size); STATE_DELTA events: $nev," \
	"text length median $PLEN B (min $emin, max $emax): the bare pg_notify payload is $PLEN bytes"
echo "an event: $(sql "SELECT event::text FROM hx_event WHERE type = 'STATE_DELTA' ORDER BY seq DESC LIMIT 1")"
export PLEN

# ---------------------------------------------------------------------
# One run: configuration, script, clients
# ---------------------------------------------------------------------
# key: guarded | bare | stream | notify (bare table + update_notify.sql)
#      | log (hx_stream payload=none) | wal (log, and a hub following every
#      stream over the WAL: bench/pgbench/follow.js) | recv (log, and
#      PostgreSQL's own pg_recvlogical decoding the same publication with
#      pgoutput, its output discarded: what the walsender costs whatever the
#      client)
start=$(date +%s)
lost=0
notified=0
follower_pid=
walfollowed=0
walexpected=0
follower_start() {	# transport $1; waits for "ready"
	node "$SCRIPTS/follow.js" "$ROWS" "$1" "$work/expect" >"$work/follow.out" 2>"$work/follow.err" &
	follower_pid=$!
	poll_until 3000 "$follower_pid" "$work/follow.err" "the follower did not start" \
		grep -q '^ready' "$work/follow.out"
}
# pg_recvlogical on a slot of its own (it cannot make temporary ones),
# writing nothing (-F 0: no fsync of /dev/null) and
# confirming what it has received every second (-s 1)
recv_pid=
recv_start() {
	"$RECVLOGICAL" -d "$DB" --slot=hx_bench_recv --create-slot -P pgoutput
	"$RECVLOGICAL" -d "$DB" --slot=hx_bench_recv --start -s 1 -F 0 --no-loop \
		-o proto_version=1 -o publication_names=hxstate_events -f /dev/null 2>"$work/recv.err" &
	recv_pid=$!
	poll_until 500 "$recv_pid" "$work/recv.err" "pg_recvlogical did not start" \
		sql_is "SELECT count(*) FROM pg_stat_replication WHERE application_name = 'pg_recvlogical' AND state = 'streaming'" 1
}
# waits until the slot has confirmed the WAL up to $1 (every transaction
# of the run decoded and received; the ms waited go to recv_drain), then
# stops pg_recvlogical and drops the slot once its walsender has let go
recv_drain=
recv_stop() {
	local t0
	t0=$(date +%s%N)
	poll_until 1000 "" "$work/recv.err" "pg_recvlogical did not confirm $1 within 20 s" \
		sql_is "SELECT confirmed_flush_lsn >= '$1' FROM pg_replication_slots WHERE slot_name = 'hx_bench_recv'" t
	recv_drain=$((($(date +%s%N) - t0) / 1000000))
	kill "$recv_pid"
	wait "$recv_pid" 2>/dev/null || true
	recv_pid=
	poll_until 500 "" "" "the slot hx_bench_recv stayed active after pg_recvlogical ended" \
		sql_is "SELECT active FROM pg_replication_slots WHERE slot_name = 'hx_bench_recv'" f
	sql "SELECT pg_drop_replication_slot('hx_bench_recv')" >/dev/null
}
cputicks() {	# user + system clock ticks of process $1
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}
run() {
	local key=$1 clients=$2 config script
	case $key in
		guarded | bare | stream | log) config=$key script=$SCRIPTS/update.sql ;;
		wal | recv) config=log script=$SCRIPTS/update.sql ;;
		notify) config=bare script=$SCRIPTS/update_notify.sql ;;
	esac
	reset_table "$config"
	listener_signal USR2		# the INSERTs' snapshots delivered, counters zeroed
	local consumer='' sender='' c0=0 s0=0 cpu=''
	if [ "$key" = wal ]; then follower_start wal; consumer=$follower_pid; fi
	if [ "$key" = recv ]; then recv_start; consumer=$recv_pid; fi
	if [ -n "$consumer" ]; then
		# the CPU the walsender and its client take during the run
		# the walsender shows in pg_stat_replication a moment after its
		# client says it is ready
		poll_until 500 "$consumer" "" "no walsender for the run's client" \
			sql_is "SELECT count(*) FROM pg_stat_replication WHERE application_name IN ('hx_bench_follower', 'pg_recvlogical')" 1
		sender=$(sql "SELECT pid FROM pg_stat_replication WHERE application_name IN ('hx_bench_follower', 'pg_recvlogical')")
		s0=$(cputicks "$sender")
		c0=$(cputicks "$consumer")
	fi

	pgbench_run "$clients" "$T" "$script"
	if [ -n "$consumer" ]; then
		cpu=$(awk -v s=$(($(cputicks "$sender") - s0)) -v c=$(($(cputicks "$consumer") - c0)) -v hz="$CLK_TCK" \
			-v n="$(pgbench_value 'number of transactions actually processed: ')" \
			'BEGIN { printf "%.1f\t%.1f", s / hz * 1e6 / n, c / hz * 1e6 / n }')
	fi
	local endlsn
	endlsn=$(sql "SELECT pg_current_wal_lsn()")

	local tps n lat failed received drain maxq events=- expect=0
	tps=$(pgbench_value 'tps = ')
	n=$(pgbench_value 'number of transactions actually processed: ')
	lat=$(pgbench_value 'latency average = ')
	failed=$(pgbench_value 'number of failed transactions: ')
	if [ -z "$tps" ] || [ -z "$n" ] || [ "${failed:-0}" != 0 ]; then
		cat "$work/pgbench.out" >&2
		echo "bench/pgbench: no tps, or failed transactions" >&2
		exit 1
	fi

	# every notifying transaction must reach the listener (and, for
	# hx_stream, the log); the others must notify nothing
	if [ "$key" = stream ] || [ "$key" = notify ]; then expect=$n; fi
	echo "$expect" >"$work/expect"
	listener_signal HUP
	# shellcheck disable=SC2016
	read -r received drain maxq < <(tail -n 1 "$work/listen.out" | node -e '
		const s = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
		console.log(s.received, s.drain_ms, `${(s.max_queue_usage * 100).toPrecision(2)}%`)')
	if [ "$key" = wal ]; then
		local got
		echo "$n" >"$work/expect"
		kill -HUP "$follower_pid"
		wait "$follower_pid" || true
		follower_pid=
		got=$(tail -n 1 "$work/follow.out")
		read -r fgot fdrain ftransport fconn < <(echo "$got" | node -e '
			const s = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
			console.log(s.received, s.drain_ms, s.transport, s.connections)')
		if [ "$ftransport" != wal ] || [ "$fgot" != "$n" ]; then
			cat "$work/follow.err" >&2
			echo "bench/pgbench: wal, $clients clients: $n transactions, the hub handed out $fgot deltas over $ftransport" >&2
			exit 1
		fi
		walfollowed=$((walfollowed + fgot))
		walexpected=$((walexpected + n))
	fi
	if [ "$key" = recv ]; then recv_stop "$endlsn"; fi
	if [ "$key" = stream ] || [ "$key" = log ] || [ "$key" = wal ] || [ "$key" = recv ]; then
		events=$(sql "SELECT count(*) FROM hx_event WHERE type = 'STATE_DELTA'")
		if [ "$events" != "$n" ]; then
			echo "bench/pgbench: $key, $clients clients: $n transactions but $events events logged" >&2
			exit 1
		fi
	fi
	if [ "$received" -gt "$expect" ] || { [ "$expect" = 0 ] && [ "$received" != 0 ]; }; then
		echo "bench/pgbench: $key, $clients clients: $n transactions, $received notifications received" >&2
		exit 1
	fi
	lost=$((lost + expect - received))
	notified=$((notified + expect))
	printf '%s\t%s\t%s\t%s\n' "$key" "$clients" "$tps" "$maxq" >>"$work/results.tsv"
	if [ -n "$cpu" ]; then printf '%s\t%s\t%s\n' "$key" "$clients" "$cpu" >>"$work/cpu.tsv"; fi
	printf '  %-8s %2s clients: %8.1f tps, latency %6s ms, %7s transactions; listener got %6s notifications' \
		"$key" "$clients" "$tps" "$lat" "$n" "$received"
	if [ "$expect" = 0 ]; then
		:
	elif [ "$received" = "$expect" ]; then
		printf ' (the last %s ms after pgbench)' "$drain"
	else
		printf ' (%s MISSING, waited %s ms)' $((expect - received)) "$drain"
	fi
	printf ', NOTIFY queue at most %s full' "$maxq"
	if [ "$key" = stream ] || [ "$key" = log ] || [ "$key" = wal ] || [ "$key" = recv ]; then printf '; %s events logged' "$events"; fi
	if [ "$key" = wal ]; then
		printf '; the hub got all %s over the WAL (%s connections, the last %s ms after pgbench)' "$fgot" "$fconn" "$fdrain"
	fi
	if [ "$key" = recv ]; then
		printf '; pg_recvlogical confirmed the last commit %s ms after pgbench' "$recv_drain"
	fi
	if [ -n "$cpu" ]; then
		printf '; CPU per transaction: walsender %s us, %s %s us' "${cpu%%$'\t'*}" \
			"$([ "$key" = wal ] && echo hub || echo pg_recvlogical)" "${cpu##*$'\t'}"
	fi
	printf ' (%s s so far)\n' $(($(date +%s) - start))
}

hx_log "pgbench: $T s per run, $REPS rounds, contenders taking turns"
: >"$work/results.tsv"
: >"$work/cpu.tsv"

case "${HX_BENCH_PG_ONLY:-}" in
	'' | transports32 | log32) ;;
	*)
		echo "bench/pgbench: HX_BENCH_PG_ONLY is transports32 or log32, not $HX_BENCH_PG_ONLY" >&2
		exit 1
		;;
esac
if [ "${HX_BENCH_PG_ONLY:-}" = transports32 ]; then
	# only what the transports' targets compare, at 32 clients, and
	# pg_recvlogical for reference: the five rotating every round
	keys=(bare log wal recv stream)
	for ((r = 0; r < REPS; r++)); do
		for ((i = 0; i < 5; i++)); do run "${keys[(i + r) % 5]}" 32; done
	done
elif [ "${HX_BENCH_PG_ONLY:-}" = log32 ]; then
	# the log alone against no trigger, alternating, the order reversing
	# every other round
	for ((r = 0; r < REPS; r++)); do
		if ((r % 2)); then run log 32; run bare 32; else run bare 32; run log 32; fi
	done
else
	# 8 clients: every configuration, the order rotating every round and
	# reversing every other one
	keys=(guarded bare stream notify)
	for ((r = 0; r < REPS; r++)); do
		order=("${keys[@]:r % 4}" "${keys[@]:0:r % 4}")
		if ((r % 2)); then order=("${order[3]}" "${order[2]}" "${order[1]}" "${order[0]}"); fi
		for k in "${order[@]}"; do run "$k" 8; done
	done
	# 1 and 32 clients: NOTIFY vs none, alternating
	for c in 1 32; do
		for ((r = 0; r < REPS; r++)); do
			if ((r % 2)); then run notify "$c"; run bare "$c"; else run bare "$c"; run notify "$c"; fi
		done
	done
	# the transports at 1, 8 and 32 clients: log only, and the WAL transport
	# with a hub attached, in turn with hx_stream over NOTIFY (the 8-client
	# bare and stream runs above serve as theirs)
	for c in 1 8 32; do
		for ((r = 0; r < REPS; r++)); do
			case $c in
				8) tkeys=(log wal) ;;
				32) tkeys=(log wal recv stream) ;;
				*) tkeys=(log wal stream) ;;
			esac
			if ((r % 2)); then
				for ((i = ${#tkeys[@]} - 1; i >= 0; i--)); do run "${tkeys[i]}" "$c"; done
			else
				for k in "${tkeys[@]}"; do run "$k" "$c"; done
			fi
		done
	done
fi

# ---------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------
median() {		# median tps of key $1 at $2 clients
	awk -F'\t' -v k="$1" -v c="$2" '$1 == k && $2 == c { print $3 }' "$work/results.tsv" | sort -g |
		awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
samples() {
	awk -F'\t' -v k="$1" -v c="$2" '$1 == k && $2 == c { printf "%s%.0f", (n++ ? " " : ""), $3 }' "$work/results.tsv"
}

met=0
total=0
missed=()
rows=()
row() {		# scenario clients A B target
	local a b ratio ok=- tgt=${5:-}
	a=$(median "$3" "$2")
	b=$(median "$4" "$2")
	ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", a / b }')
	if [ -n "$tgt" ]; then
		total=$((total + 1))
		if awk -v r="$ratio" -v t="$tgt" 'BEGIN { exit !(r >= t) }'; then
			ok=yes
			met=$((met + 1))
		else
			ok=NO
			missed+=("$1 at $2 clients: $ratio (target >= $tgt)")
		fi
		tgt=">= $tgt"
	else
		tgt="(none)"
	fi
	rows+=("$(printf '%s\t%s\t%.0f\t%.0f\t%s\t%s\t%s' "$1" "$2" "$a" "$b" "$ratio" "$tgt" "$ok")")
}
if [ "${HX_BENCH_PG_ONLY:-}" = log32 ]; then
	clients=()
	row "4 log only vs none" 32 log bare
	# each round's ratio (its two runs were next to each other)
	paste <(awk -F'\t' '$1 == "bare" && $2 == 32 { print $3 }' "$work/results.tsv") \
		<(awk -F'\t' '$1 == "log" && $2 == 32 { print $3 }' "$work/results.tsv") |
		awk '{ r[NR] = $2 / $1; printf "%s%.3f", (NR > 1 ? " " : "log only / none, each round: "), r[NR] }
			END { print "" }'
elif [ "${HX_BENCH_PG_ONLY:-}" = transports32 ]; then
	clients=(32)
else
	clients=(1 8 32)
	row "1 guards vs none" 8 guarded bare 0.9
	row "2 hx_stream vs pg_notify" 8 stream notify 0.9
	row "3 pg_notify vs none" 1 notify bare
	row "3 pg_notify vs none" 8 notify bare
	row "3 pg_notify vs none" 32 notify bare
fi
for c in "${clients[@]}"; do
	row "4 log only vs none" "$c" log bare
	row "4 WAL + hub vs none" "$c" wal bare "$([ "$c" = 32 ] && echo 0.7)"
	row "4 WAL + hub vs NOTIFY" "$c" wal stream "$([ "$c" = 32 ] && echo 2.5)"
done
if [ "${HX_BENCH_PG_ONLY:-}" != log32 ]; then
	row "4 WAL + pg_recvlogical vs none" 32 recv bare
fi

cpu_median() {	# median of column $3 of cpu.tsv for key $1 at $2 clients
	awk -F'\t' -v k="$1" -v c="$2" -v f="$3" '$1 == k && $2 == c { print $f }' "$work/cpu.tsv" | sort -g |
		awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

cat <<EOF

What each transaction does (one autocommit statement, pgbench -n -M prepared
-j $THREADS, on a random one of $ROWS sessions; bench/pgbench/update.sql):
  UPDATE sessions SET updated_at = now(),
    state = hx_merge(state, /stats/tool_calls + 1, /last_tool := one of 4 names),
    pending_tool = a new tool_use if free, else NULL (set and cleared in turn),
    phase = hx_next_phase('agent_session', phase, the event of its next edge)
  (chatting -> building -> verifying -> done -> chatting)
  WHERE session_id = the random key, written WITH u AS (UPDATE ... RETURNING
  session_id) SELECT ... FROM u, the select list being session_id, or for
  "bare pg_notify" (update_notify.sql) pg_notify(hx_stream_channel(
  'sessions:' || session_id), a payload of $PLEN bytes).
The contenders (A vs B; ratio = A tps / B tps):
  1 guards     A: the table with hx_lock_once('project_id'),
                  hx_slot_guard('pending_tool') and hx_phase_guard(
                  'agent_session') as CREATE CONSTRAINT TRIGGER ... AFTER
                  INSERT OR UPDATE ... FOR EACH ROW; every UPDATE runs all
                  three through their full check (the slot and the phase
                  change every time);
               B: the same table, the same UPDATE, no trigger.
  2 streaming  A: the table with hx_stream('state', 'session_id') (AFTER
                  INSERT OR UPDATE OR DELETE ... FOR EACH ROW): per UPDATE,
                  hx_diff of the old and new state, the stream's last seq
                  read from hx_event (an index lookup), the STATE_DELTA
                  event inserted into hx_event, and NOTIFY of the event
                  ($PLEN bytes typical) on hx:sessions:<key>;
               B: no trigger, the UPDATE plus a bare pg_notify of $PLEN bytes
                  on the same channel, in the same statement.
  3 NOTIFY     A: the UPDATE plus that bare pg_notify (no trigger);
               B: the UPDATE alone (no trigger, no notification).
  4 transports A: the table with hx_stream('state', 'session_id',
                  'payload=none'): events logged, no NOTIFY ("log only");
                  or the same with a hub (HxHub, bench/pgbench/follow.js)
                  following all $ROWS streams over the WAL ("WAL + hub":
                  pgoutput of the publication hxstate_events, a temporary
                  slot, every delta handed out and counted); at 32
                  clients also "WAL + pg_recvlogical": PostgreSQL's own
                  client in the hub's place (pgoutput, the same
                  publication, a slot of its own, its output discarded;
                  the run waits until the slot has confirmed the last
                  commit), to tell the walsender's cost from the hub's;
               B: no trigger, or hx_stream over NOTIFY (scenario 2's A).
  The 8-client runs serve all three: B of 1 is B of 3, B of 2 is A of 3.
  PostgreSQL takes one database-wide lock from queueing a transaction's
  notifications until its commit record is flushed, so notifying commits
  run one at a time and share no fsync (no group commit): scenario 3 shows
  what that costs as clients grow, and scenario 2 compares hx_stream with
  a bare pg_notify that pays the same.
Every run: the table made anew ($ROWS rows; hx_event emptied, then holding
the stream's $ROWS STATE_SNAPSHOTs when hx_stream is attached), VACUUM
ANALYZE, CHECKPOINT, $T s of pgbench.  Throughout, one listener
(bench/pgbench/listen.js, Node, one connection) LISTENs on all $ROWS
channels and discards what arrives, as an application server would; after
each run it is checked to have received one notification per notifying
transaction (and hx_stream to have logged one event per transaction).
Notifications that never reached the listener, over all runs: $lost of $notified.
Deltas the WAL hub handed out, over all "WAL + hub" runs: $walfollowed of $walexpected committed.
CPU per transaction at 32 clients (medians; user + system time of the
process over the run, divided by the transactions committed):
  WAL + hub:            walsender $(cpu_median wal 32 3) us, the hub (Node) $(cpu_median wal 32 4) us
  WAL + pg_recvlogical: walsender $(cpu_median recv 32 3) us, pg_recvlogical $(cpu_median recv 32 4) us
Highest pg_notification_queue_usage() seen (sampled every 100 ms): $(cut -f4 "$work/results.tsv" | sort -g | tail -n 1)
(one 8 kB page of the 8 GB queue is 0.0001%: the listener kept up).
tps are medians of $REPS runs of $T s; every run's tps, in the order run:
$(for kc in "guarded 8" "bare 8" "stream 8" "notify 8" "log 8" "wal 8" "bare 1" "notify 1" "log 1" "wal 1" "stream 1" \
	"bare 32" "notify 32" "log 32" "wal 32" "recv 32" "stream 32"; do
	# shellcheck disable=SC2086
	printf '  %-7s %2s clients: %s\n' $kc "$(samples $kc)"
done)

EOF
{
	printf 'scenario\tclients\tA tps\tB tps\tA/B\ttarget\tmet?\n'
	printf '%s\n' "${rows[@]}"
} | awk -F'\t' '
	{ for (i = 1; i <= NF; i++) { c[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } n = NF }
	END {
		for (r = 1; r <= NR; r++) {
			line = ""
			for (i = 1; i <= n; i++) {
				f = (i == 1) ? "%-" w[i] "s" : "%" w[i] "s"
				line = line (i > 1 ? " | " : "") sprintf(f, c[r, i])
			}
			print line
			if (r == 1) {
				line = ""
				for (i = 1; i <= n; i++) { s = ""; for (j = 0; j < w[i]; j++) s = s "-"; line = line (i > 1 ? "-+-" : "") s }
				print line
			}
		}
	}'

echo
echo "pgbench targets met: $met of $total."
if [ "${#missed[@]}" -gt 0 ]; then
	echo "Missed:"
	for m in "${missed[@]}"; do echo "  $m"; done
fi
