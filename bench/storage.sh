#!/usr/bin/env bash
# bench/storage.sh: a session's state stored as jsonb (whole: PostgreSQL
# rewrites a TOASTed value whole on every UPDATE) against hxdoc (in pieces,
# hx_store writing what a change changed), on one table definition, in one
# run of one server: docs/sessions.sql's, its guards and stream trigger on.
#
#   bash bench/storage.sh             # in a cluster of its own (fsync on)
#
# At 3, 60, 920, 14,000 and 50,000 messages of about 200 bytes
# (HX_BENCH_STORE_SIZES), per layout:
#   - the WAL of an append of one message, of a tool step of ten ops, and of
#     a replace of one scalar: each write a transaction of its own, the
#     server otherwise idle (autovacuum off, full_page_writes off, so that
#     the figure is the write's own WAL); mean and largest;
#   - the state's stored bytes, and the table's (heap, TOAST, side tables,
#     indexes);
#   - reading the whole state: (state::jsonb) -> 'stats' (jsonb: detoasted
#     and decompressed whole; hxdoc: read from its segments), p50 of 30;
#   - hx_merge appends per second, from 1 and 8 connections, to one session
#     and to 1,000 sessions of that size (pgbench, HX_BENCH_STORE_SECONDS
#     each; 1,000 sessions up to 920 messages);
#   - the walsender's CPU per event while a follower decodes the log
#     (pg_recvlogical, pgoutput): it reads all the WAL, the state's too.
# Then the dead space: 14,000 appends to one new session, one by one, then
# VACUUM, twice: in one procedure with autovacuum off (no vacuum at all
# until the end), and from a client, a statement each, with autovacuum on
# (PostgreSQL's default), as an application writes; each time the bytes
# of the table and its side tables after VACUUM against the state's.
# Prints the tables bench/README.md shows.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=test/lib/common.sh
. "$top/test/lib/common.sh"
# shellcheck source=test/lib/cluster.sh
. "$top/test/lib/cluster.sh"

SIZES=${HX_BENCH_STORE_SIZES:-3 60 920 14000 50000}
SECONDS_EACH=${HX_BENCH_STORE_SECONDS:-5}
DEAD_APPENDS=${HX_BENCH_STORE_DEAD:-14000}
BIN=$(hx_bindir "$HX_PG_CONFIG")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

hx_log "a cluster of its own: fsync on, full_page_writes off, autovacuum off"
hx_cluster_start "$BIN" fsync=on full_page_writes=off autovacuum=off \
	checkpoint_timeout=1h max_wal_size=20GB shared_buffers=512MB wal_level=logical >/dev/null
q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
qv() { psql -X -q -t -A -v ON_ERROR_STOP=1 "$@"; }

q -c 'CREATE EXTENSION hxstate'
# the two layouts: docs/sessions.sql as it is (hxdoc), and with the state
# as jsonb, as before 0.7.0 (no hx_store)
for layout in hxdoc jsonb; do
	{
		echo "CREATE SCHEMA layout_$layout; SET search_path = layout_$layout, public;"
		if [ "$layout" = jsonb ]; then
			sed -e "s/^    state        hxdoc NOT NULL DEFAULT '{}',.*$/    state        jsonb COMPRESSION lz4 NOT NULL DEFAULT '{}',/" \
				-e '/^CREATE TRIGGER state_store/,+1d' "$top/docs/sessions.sql"
		else
			cat "$top/docs/sessions.sql"
		fi
	} | q
done
q -f "$top/bench/storage/setup.sql"
[ "$(qv -c "SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'layout_jsonb.sessions'::regclass AND attname = 'state'")" = jsonb ] ||
	{ echo "the jsonb table was not made" >&2; exit 1; }

# one session s-0 of n messages, the log and the side tables emptied first
reset() {							# layout n [rows]
	local layout=$1 n=$2 rows=${3:-1}
	# the side tables emptied whole, so that their files hold this run only
	q -c "TRUNCATE layout_$layout.sessions; TRUNCATE hx_event; TRUNCATE hx_doc, hx_chunk;" >/dev/null
	q -c "INSERT INTO layout_$layout.sessions (session_id, user_id, state)
		  SELECT 's-' || g, 'u-7', bench_state($n) FROM generate_series(0, $rows - 1) g" \
		-c "VACUUM ANALYZE layout_$layout.sessions" -c 'CHECKPOINT' >/dev/null
}

# table bytes: heap, TOAST and indexes, and for hxdoc the side tables
table_bytes() {						# layout
	qv -c "SELECT pg_total_relation_size('layout_$1.sessions')
	          + CASE WHEN '$1' = 'hxdoc' THEN pg_total_relation_size('hx_doc') + pg_total_relation_size('hx_chunk') ELSE 0 END"
}

state_bytes() {						# layout
	if [ "$1" = hxdoc ]; then
		qv -c "SELECT (hx_doc_info(state)).stored_bytes FROM layout_hxdoc.sessions WHERE session_id = 's-0'"
	else
		qv -c "SELECT pg_column_size(state) FROM layout_jsonb.sessions WHERE session_id = 's-0'"
	fi
}

# appends per second over SECONDS_EACH (pgbench), clients c, sessions rows
tps() {								# layout clients rows
	local script=$work/append.sql
	cat >"$script" <<-EOF
		\\set i random(1, 1000000000)
		\\set s random(0, $3 - 1)
		UPDATE layout_$1.sessions SET state = hx_merge(state, bench_ops('append', :i)) WHERE session_id = 's-' || :s;
	EOF
	"$BIN/pgbench" -n -f "$script" -c "$2" -j "$(($2 < 2 ? 1 : 2))" -T "$SECONDS_EACH" 2>/dev/null |
		sed -n 's/^tps = \([0-9.]*\).*/\1/p' | cut -d. -f1
}

# the walsender's CPU per event, in microseconds, while pg_recvlogical
# follows the log and 200 appends run
walsender_us() {					# layout
	local layout=$1 pid before after
	q -c "SELECT hx_stream_publication()" -c "SELECT pg_create_logical_replication_slot('bench_$layout', 'pgoutput')" >/dev/null
	"$BIN/pg_recvlogical" -d postgres -S "bench_$layout" --start -f /dev/null \
		-o proto_version=1 -o publication_names=hxstate_events >/dev/null 2>&1 &
	local recv=$!
	for _ in $(seq 1 100); do
		pid=$(qv -c "SELECT pid FROM pg_stat_replication WHERE application_name = 'pg_recvlogical' LIMIT 1")
		[ -n "$pid" ] && break
		sleep 0.1
	done
	# nanoseconds on a CPU (schedstat), not clock ticks
	cpu() { awk '{print $1}' "/proc/$1/schedstat"; }
	before=$(cpu "$pid")
	q -c "CALL bench_measure_wal('$layout', -1, 'append', 200, 900000000)"
	# until the walsender has sent it all
	for _ in $(seq 1 600); do
		[ "$(qv -c "SELECT sent_lsn >= pg_current_wal_insert_lsn() FROM pg_stat_replication WHERE pid = $pid")" = t ] && break
		sleep 0.1
	done
	after=$(cpu "$pid")
	kill "$recv"; wait "$recv" 2>/dev/null || true
	q -c "SELECT pg_drop_replication_slot('bench_$layout')" >/dev/null
	echo $(( (after - before) / 1000 / 200 ))
}

declare -A R
for n in $SIZES; do
	for layout in jsonb hxdoc; do
		hx_log "$n messages, $layout"
		reset "$layout" "$n"
		q -c "CALL bench_measure_wal('$layout', $n, 'append', 40, $n + 1)"
		q -c "CALL bench_measure_wal('$layout', $n, 'merge10', 20, $n + 100)"
		q -c "CALL bench_measure_wal('$layout', $n, 'replace', 20, $n + 200)"
		q -c "CALL bench_measure_read('$layout', $n, 30)"
		R[$layout,$n,stored]=$(state_bytes "$layout")
		R[$layout,$n,table]=$(table_bytes "$layout")
		R[$layout,$n,tps1]=$(tps "$layout" 1 1)
		R[$layout,$n,tps8]=$(tps "$layout" 8 1)
		if [ "$n" -le 920 ]; then
			reset "$layout" "$n" 1000
			R[$layout,$n,tps1k1]=$(tps "$layout" 1 1000)
			R[$layout,$n,tps1k8]=$(tps "$layout" 8 1000)
			reset "$layout" "$n"
		else
			R[$layout,$n,tps1k1]=-
			R[$layout,$n,tps1k8]=-
		fi
		R[$layout,$n,ws]=$(walsender_us "$layout")
	done
done

# the plan of a whole-state read at 14,000 messages, as EXPLAIN ANALYZE
# shows it, each in a connection of its own, median of 5: as the
# connection's first use of hxstate (its library loaded by the cast,
# within the statement: about 0.7 ms), and in a connection that has
# loaded it (LOAD 'hxstate', as any connection that wrote through
# hxstate, or session_preload_libraries, has)
explain_ms() {						# layout [LOAD]
	local i
	for i in 1 2 3 4 5; do
		qv ${2:+-c "LOAD 'hxstate'"} -c "EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) SELECT (state::jsonb) -> 'stats' FROM layout_$1.sessions WHERE session_id = 's-0'" |
			sed -n 's/^Execution Time: \([0-9.]*\).*/\1/p'
	done | sort -n | sed -n 3p
}
if [[ " $SIZES " == *" 14000 "* ]]; then
	for layout in jsonb hxdoc; do
		reset "$layout" 14000
		for _ in 1 2 3; do q -c "SELECT (state::jsonb) -> 'stats' FROM layout_$layout.sessions" >/dev/null; done
		R[$layout,explain]=$(explain_ms "$layout")
		R[$layout,explainl]=$(explain_ms "$layout" load)
	done
fi

# dead space: appends to one new session, one by one, then VACUUM
for layout in hxdoc jsonb; do
	hx_log "dead space: $DEAD_APPENDS appends, $layout"
	reset "$layout" 0
	q -c "CALL bench_measure_wal('$layout', 0, 'append', $DEAD_APPENDS, 1)"
	R[$layout,dead_before]=$(table_bytes "$layout")
	q -c "VACUUM layout_$layout.sessions" -c "VACUUM hx_doc" -c "VACUUM hx_chunk" >/dev/null
	R[$layout,dead_after]=$(table_bytes "$layout")
	R[$layout,dead_state]=$(state_bytes "$layout")
	R[$layout,dead_wal]=$(qv -c "SELECT round(sum(bytes)) FROM bench_wal WHERE layout = '$layout' AND size = 0")
	# each append against the bound of 2 kB plus twice its event's bytes
	# (append i is the session's event i + 1: its first is the INSERT's)
	R[$layout,dead_over]=$(qv -F ' ' -c "SELECT round(avg(w.bytes)), max(w.bytes),
	    count(*) FILTER (WHERE w.bytes > 2048 + 2 * octet_length(e.event::text)), count(e.seq)
	  FROM bench_wal w LEFT JOIN hx_event e ON e.stream LIKE '%:s-0' AND e.seq = w.i + 1
	 WHERE w.layout = '$layout' AND w.size = 0")
done

# and as an application writes them: each append a statement of its own
# from a client (pgbench, one connection), autovacuum on as PostgreSQL's
# default has it (a procedure's appends are not seen by autovacuum until it
# returns: a backend reports its tables' dead rows when it goes idle)
q -c "ALTER SYSTEM SET autovacuum = on" -c "SELECT pg_reload_conf()" >/dev/null
for layout in hxdoc jsonb; do
	hx_log "dead space: $DEAD_APPENDS appends from a client, autovacuum on, $layout"
	reset "$layout" 0
	printf '%s\n' '\set i random(1, 1000000000)' \
		"UPDATE layout_$layout.sessions SET state = hx_merge(state, bench_ops('append', :i)) WHERE session_id = 's-0';" \
		>"$work/dead.sql"
	"$BIN/pgbench" -n -c 1 -t "$DEAD_APPENDS" -f "$work/dead.sql" >/dev/null 2>&1
	q -c "VACUUM layout_$layout.sessions" -c "VACUUM hx_doc" -c "VACUUM hx_chunk" >/dev/null
	R[$layout,dead_client]=$(table_bytes "$layout")
	R[$layout,dead_client_state]=$(state_bytes "$layout")
done
q -c "ALTER SYSTEM RESET autovacuum" -c "SELECT pg_reload_conf()" >/dev/null

echo
echo "PostgreSQL $("$HX_PG_CONFIG" --version | awk '{print $2}'), fsync on, full_page_writes off; messages of $(qv -c "SELECT round(avg(length(bench_msg(i)::text))) FROM generate_series(1, 100) i") bytes"
echo
echo "| messages | layout | WAL per append (mean / max) | per 10-op step | per scalar replace | state stored | table on disk | whole-state read p50 | appends/s 1 conn / 8 conn (1 session) | appends/s 1 / 8 conn (1,000 sessions) | walsender CPU per event |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in $SIZES; do
	for layout in jsonb hxdoc; do
		read -r am ax mm rm rd < <(qv -F ' ' -c "SELECT
			(SELECT round(avg(bytes)) FROM bench_wal WHERE layout = '$layout' AND size = $n AND kind = 'append'),
			(SELECT round(max(bytes)) FROM bench_wal WHERE layout = '$layout' AND size = $n AND kind = 'append'),
			(SELECT round(avg(bytes)) FROM bench_wal WHERE layout = '$layout' AND size = $n AND kind = 'merge10'),
			(SELECT round(avg(bytes)) FROM bench_wal WHERE layout = '$layout' AND size = $n AND kind = 'replace'),
			(SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 3) FROM bench_read WHERE layout = '$layout' AND size = $n)")
		printf '| %s | %s | %s / %s B | %s B | %s B | %s B | %s B | %s ms | %s / %s | %s / %s | %s µs |\n' \
			"$n" "$layout" "$am" "$ax" "$mm" "$rm" "${R[$layout,$n,stored]}" "${R[$layout,$n,table]}" "$rd" \
			"${R[$layout,$n,tps1]}" "${R[$layout,$n,tps8]}" "${R[$layout,$n,tps1k1]}" "${R[$layout,$n,tps1k8]}" "${R[$layout,$n,ws]}"
	done
done
echo
if [ -n "${R[hxdoc,explain]:-}" ]; then
	echo "EXPLAIN ANALYZE of a whole-state read at 14,000 messages, a connection's first use of hxstate: jsonb ${R[jsonb,explain]} ms, hxdoc ${R[hxdoc,explain]} ms ($(awk -v a="${R[hxdoc,explain]}" -v b="${R[jsonb,explain]}" 'BEGIN { printf "%.2f", a / b }')x)"
	echo "EXPLAIN ANALYZE of a whole-state read at 14,000 messages, hxstate's library loaded: jsonb ${R[jsonb,explainl]} ms, hxdoc ${R[hxdoc,explainl]} ms ($(awk -v a="${R[hxdoc,explainl]}" -v b="${R[jsonb,explainl]}" 'BEGIN { printf "%.2f", a / b }')x)"
	echo
fi
echo "| $DEAD_APPENDS appends to a new session | WAL in all | state stored | table on disk before VACUUM | after VACUUM | after / state | from a client, autovacuum on: state stored | after VACUUM | after / state |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for layout in jsonb hxdoc; do
	printf '| %s | %s B | %s B | %s B | %s B | %s | %s B | %s B | %s |\n' "$layout" "${R[$layout,dead_wal]}" "${R[$layout,dead_state]}" \
		"${R[$layout,dead_before]}" "${R[$layout,dead_after]}" \
		"$(awk -v a="${R[$layout,dead_after]}" -v b="${R[$layout,dead_state]}" 'BEGIN { printf "%.2f", a / b }')" \
		"${R[$layout,dead_client_state]}" "${R[$layout,dead_client]}" \
		"$(awk -v a="${R[$layout,dead_client]}" -v b="${R[$layout,dead_client_state]}" 'BEGIN { printf "%.2f", a / b }')"
done
echo
for layout in jsonb hxdoc; do
	read -r mean max over matched <<<"${R[$layout,dead_over]}"
	echo "$layout, the $DEAD_APPENDS appends to a new session: WAL per append mean $mean B, largest $max B; over 2 kB plus twice the event's bytes: $over of $matched"
done
