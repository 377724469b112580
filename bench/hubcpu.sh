#!/usr/bin/env bash
# bench/hubcpu.sh: the hub's own CPU per event over the WAL, this tree's
# client against another revision's, and PostgreSQL's pg_recvlogical, in
# one rotation.
#
#   bash bench/hubcpu.sh [BASE]        # BASE: a git revision (default: main)
#
# In a throwaway cluster (PostgreSQL 15, fsync on), the database of
# bench/pgbench.sh (bench/pgbench/setup.sql, the 'log' configuration:
# hx_stream with payload=none, 1,000 sessions of about 1 kB), each round
# runs the same pgbench load (bench/pgbench/update.sql, 32 clients, -R
# HX_BENCH_RATE transactions a second, so that every contender sees the
# same batching) with one consumer following every session over the WAL:
#   new    bench/pgbench/follow.js on this tree's client/ as it comes:
#          decoding with hxstate's output plugin (one message per
#          transaction), reading as data comes;
#   co     the same, the replication socket left unread coalesceMs
#          (HX_BENCH_COALESCE, 5 ms) after each read;
#   pgo    the same as new, decoding with pgoutput (decoder: 'pgoutput'),
#          as 0.6.0 did;
#   base   the same file on BASE's client/ (git archive into a scratch
#          directory), as BASE decodes (before 0.7.0: pgoutput);
#   recv   pg_recvlogical on a slot of its own, output discarded (-F 0),
#          decoding the same publication with pgoutput;
#   recvhx pg_recvlogical decoding with hxstate's output plugin;
#   idle   with HX_BENCH_IDLE=1: follow.js on this tree's client (as co)
#          following
#          no session (its hub decodes every insert and drops it): what the
#          replication connection costs in Node (node-postgres, the socket,
#          the plugin's messages) before any delivery;
# the order rotating each round.  The consumer's user + system CPU time
# (/proc/<pid>/stat) during the load, over the transactions pgbench
# committed, is its CPU per event; the follower must have handed out
# every event (idle: decoded every insert), else the round fails.  Prints
# each round and the medians.
# HX_BENCH_ROUNDS (5), HX_BENCH_SECONDS (10), HX_BENCH_RATE (4000),
# HX_BENCH_IDLE (0).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
base=${1:-main}
# shellcheck source=test/lib/common.sh
. "$top/test/lib/common.sh"
# shellcheck source=test/lib/cluster.sh
. "$top/test/lib/cluster.sh"

ROUNDS=${HX_BENCH_ROUNDS:-5}
SECS=${HX_BENCH_SECONDS:-10}
RATE=${HX_BENCH_RATE:-4000}
ROWS=1000
BIN=$(hx_bindir "$HX_PG_CONFIG")
work=$(mktemp -d "${TMPDIR:-/tmp}/hxstate-hubcpu.XXXXXX")
trap 'hx_cluster_cleanup; rm -rf "$work"' EXIT

# BASE's client beside this tree's node_modules
mkdir -p "$work/base/bench/pgbench"
# (file by file: git archive leaves client/ out, .gitattributes's export-ignore)
git -C "$top" ls-tree -r --name-only "$base" client | while read -r f; do
	mkdir -p "$work/base/$(dirname "$f")"
	git -C "$top" show "$base:$f" >"$work/base/$f"
done
cp "$top/bench/pgbench/follow.js" "$work/base/bench/pgbench/"
ln -s "$top/node_modules" "$work/base/node_modules"
ln -s "$top/node_modules" "$work/base/client/node_modules"

hx_cluster_start "$BIN" fsync=on max_wal_senders=10 >/dev/null
export HX_BENCH_PG_DB=hxstate_pgbench
createdb "$HX_BENCH_PG_DB"
psql -X -q -v ON_ERROR_STOP=1 -d "$HX_BENCH_PG_DB" -f "$top/bench/pgbench/setup.sql" -f "$top/docs/sessions.sql" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d "$HX_BENCH_PG_DB" -c 'SELECT bench_pg_keep_triggers()' -c 'SELECT hx_stream_publication()' >/dev/null

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

one() {							# contender -> "us_per_event"
	local who=$1 pid n t0 t1
	psql -X -q -d "$HX_BENCH_PG_DB" -c "SELECT bench_pg_reset('log', $ROWS)" -c 'VACUUM ANALYZE sessions' -c 'CHECKPOINT' >/dev/null
	echo 0 >"$work/expect"
	case $who in
		new | co | pgo | base | idle)
			local dir=$top rows=$ROWS decoder=hxstate coalesce=
			[ "$who" = base ] && dir=$work/base
			[ "$who" = idle ] && { rows=0; coalesce=${HX_BENCH_COALESCE:-5}; }
			[ "$who" = pgo ] && decoder=pgoutput
			[ "$who" = co ] && coalesce=${HX_BENCH_COALESCE:-5}
			HX_BENCH_COALESCE_MS=$coalesce HX_BENCH_DECODER=$decoder node "$dir/bench/pgbench/follow.js" "$rows" wal "$work/expect" >"$work/follow.out" 2>"$work/follow.err" &
			pid=$!
			until grep -q '^ready' "$work/follow.out"; do
				kill -0 "$pid" 2>/dev/null || { cat "$work/follow.err" >&2; return 1; }
				sleep 0.1
			done
			# this tree's hub decodes as it was asked (BASE's as it does)
			if [ "$who" != base ] && ! grep -q "^ready wal .* $decoder\$" "$work/follow.out"; then
				echo "bench/hubcpu: $who decodes with $(sed -n 's/^ready wal [0-9]* //p' "$work/follow.out"), not $decoder" >&2
				kill "$pid"
				return 1
			fi
			;;
		recv | recvhx)
			local plugin=pgoutput opts=(-o proto_version=1 -o publication_names=hxstate_events)
			[ "$who" = recvhx ] && { plugin=hxstate; opts=(-o proto_version=1); }
			"$BIN/pg_recvlogical" -d "$HX_BENCH_PG_DB" --slot=hx_bench_cpu --create-slot -P "$plugin"
			"$BIN/pg_recvlogical" -d "$HX_BENCH_PG_DB" --slot=hx_bench_cpu --start -s 1 -F 0 --no-loop \
				"${opts[@]}" -f /dev/null 2>"$work/recv.err" &
			pid=$!
			until [ "$(psql -X -Atq -d "$HX_BENCH_PG_DB" -c "SELECT count(*) FROM pg_stat_replication WHERE application_name = 'pg_recvlogical'")" = 1 ]; do
				sleep 0.1
			done
			;;
	esac
	t0=$(ticks "$pid")
	"$BIN/pgbench" -n -M prepared -c 32 -j 2 -T "$SECS" -R "$RATE" -D rows=$ROWS \
		-f "$top/bench/pgbench/update.sql" "$HX_BENCH_PG_DB" >"$work/pgbench.out" 2>&1
	n=$(awk '/number of transactions actually processed/ { print $NF }' "$work/pgbench.out")
	if [ "$who" = recv ] || [ "$who" = recvhx ]; then
		local lsn
		lsn=$(psql -X -Atq -d "$HX_BENCH_PG_DB" -c 'SELECT pg_current_wal_lsn()')
		until [ "$(psql -X -Atq -d "$HX_BENCH_PG_DB" -c "SELECT confirmed_flush_lsn >= '$lsn' FROM pg_replication_slots WHERE slot_name = 'hx_bench_cpu'")" = t ]; do
			sleep 0.1
		done
		t1=$(ticks "$pid")
		kill "$pid"
		wait "$pid" 2>/dev/null || true
		until [ "$(psql -X -Atq -d "$HX_BENCH_PG_DB" -c "SELECT active FROM pg_replication_slots WHERE slot_name = 'hx_bench_cpu'")" = f ]; do sleep 0.1; done
		psql -X -q -d "$HX_BENCH_PG_DB" -c "SELECT pg_drop_replication_slot('hx_bench_cpu')" >/dev/null
	else
		echo "$n" >"$work/expect"
		kill -HUP "$pid"
		wait "$pid"
		local got cpu
		read -r got cpu < <(tail -1 "$work/follow.out" | node -e '
			const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
			process.stdout.write(`${r.received} ${r.cpu_us}`)')
		[ "$got" = "$n" ] || { echo "bench/hubcpu: $who handed out $got of $n events" >&2; return 1; }
		awk -v c="$cpu" -v n="$n" 'BEGIN { printf "%.2f", c / n }'
		return 0
	fi
	awk -v t=$((t1 - t0)) -v n="$n" -v hz="$hz" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }'
}

echo "hub CPU per event over the WAL: this tree against $base ($(git -C "$top" rev-parse --short "$base")) and pg_recvlogical; $ROUNDS rounds of ${SECS} s at $RATE transactions/s, 32 clients"
echo "$("$BIN/postgres" --version), $(nproc) cores"
declare -A all=()
order=(new co pgo base recv recvhx)
[ "${HX_BENCH_IDLE:-0}" = 1 ] && order+=(idle)
# HX_BENCH_CONTENDERS: a subset, in this order (new must be one)
[ -n "${HX_BENCH_CONTENDERS:-}" ] && read -r -a order <<<"$HX_BENCH_CONTENDERS"
for r in $(seq 1 "$ROUNDS"); do
	line="round $r:"
	for i in "${!order[@]}"; do
		who=${order[$(((i + r) % ${#order[@]}))]}
		v=$(one "$who")
		all[$who]+="$v "
		line+=" $who $v us"
	done
	echo "$line"
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) { print "-"; exit } print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
printf 'medians, CPU per event: this tree %s us (as it comes), %s us (coalesceMs %s), %s us (pgoutput), %s %s us, pg_recvlogical %s us (pgoutput), %s us (hxstate plugin)' \
	"$(median <<<"${all[new]:-}")" "$(median <<<"${all[co]:-}")" "${HX_BENCH_COALESCE:-5}" "$(median <<<"${all[pgo]:-}")" \
	"$base" "$(median <<<"${all[base]:-}")" "$(median <<<"${all[recv]:-}")" "$(median <<<"${all[recvhx]:-}")"
[ -n "${all[idle]:-}" ] && printf ', idle hub %s us' "$(median <<<"${all[idle]}")"
echo
