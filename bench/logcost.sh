#!/usr/bin/env bash
# bench/logcost.sh: what logging an event costs a transaction, in
# instructions, counted by Valgrind's callgrind: a figure that the
# machine's load does not move, where pgbench's log32 ratios (bench/pgbench.sh)
# spread by a tenth from round to round on a shared 2-core machine.
#
# The statement is bench/pgbench/update.sql's, as it is (a tool call of an agent's
# session: hx_merge of a counter and a field, the pending tool, the phase)
# on the README's sessions table with 1,000 sessions, each UPDATE its own
# transaction, in two configurations of bench/pgbench/setup.sql:
#   bare  no trigger;
#   log   the stream trigger with payload=none (every change logged).
# For the log, 160,000 transactions from 8 pgbench clients first (about
# what a log32 round leaves: 160 events a session), so that the log's
# index is as deep and a session's events as many as the benchmark's.
# Then the server stops and the statements run in a single-user backend
# (postgres --single, fsync off) under callgrind: 300 of them, and 3,300,
# of random sessions (the same sequence each time).  Per transaction:
# (I(3,300) - I(300)) / 3,000, so that the backend's start is left out.
# A single-user backend parses and plans every statement (pgbench's
# prepared statements do not), so "bare" is larger than under pgbench; the
# difference log - bare is what the log costs either way.
#
# HX_BENCH_BASE=<git revision>: the same for that revision's build too, in
# a copy of the PostgreSQL installation of its own (as the helpers' private
# servers are made), and the two side by side.
#
# Run by bench/run (part logcost), or alone after test/provision --bench
# (it needs valgrind, which the Valgrind suite installs).  About 3 minutes
# a build.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=test/lib/common.sh
. "$top/test/lib/common.sh"
# shellcheck source=test/lib/cluster.sh
. "$top/test/lib/cluster.sh"

command -v valgrind >/dev/null || {
	echo "bench/logcost: valgrind is not installed (test/provision installs it)" >&2
	exit 1
}
work=$(mktemp -d "${TMPDIR:-/tmp}/hxstate-logcost.XXXXXX")
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT

# the statements: N of bench/pgbench/update.sql's, its \set variables
# drawn here (random sessions, seeded: the same sequence each time)
statements() {					# n
	python3 - "$1" "$top/bench/pgbench/update.sql" <<'EOF'
import random, re, sys
lines = open(sys.argv[2]).read().splitlines()
body = " ".join(l for l in lines if l.strip() and not l.startswith(("--", "\\"))).rstrip(";")
random.seed(7)
for i in range(int(sys.argv[1])):
    values = {"id": random.randint(1, 1000), "tool": random.randint(1, 4), "call": i}
    print(re.sub(r"(?<!:):(id|tool|call)\b", lambda m: str(values[m.group(1)]), body) + ";")
EOF
}
statements 300 >"$work/300.sql"
statements 3300 >"$work/3300.sql"
chmod 644 "$work"/*.sql

# instructions of n statements of config in a fresh cluster of bindir
count() {						# bindir config n
	local bindir=$1 config=$2 n=$3 data db out
	(
		hx_cluster_start "$bindir" fsync=off >/dev/null
		psql -X -q -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION hxstate' \
			-f "$top/bench/pgbench/setup.sql" -f "$top/docs/sessions.sql" \
			-c 'SELECT bench_pg_keep_triggers()' -c "SELECT bench_pg_reset('$config', 1000)" >/dev/null
		if [ "$config" = log ]; then
			"$bindir/pgbench" -n -M prepared -c 8 -j 2 -t 20000 -D rows=1000 -D plen=0 \
				-f "$top/bench/pgbench/update.sql" >/dev/null
		fi
		psql -X -q -c 'VACUUM ANALYZE' >/dev/null
		data=$(psql -X -At -c 'SHOW data_directory')
		db=$(psql -X -At -c 'SELECT current_database()')
		hx_as_postgres "$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null
		out=$work/$config.$n.callgrind
		touch "$out" && chmod 666 "$out"
		hx_as_postgres valgrind --tool=callgrind --callgrind-out-file="$out" \
			"$bindir/postgres" --single -D "$data" -c fsync=off "$db" \
			<"$work/$n.sql" >"$work/$config.$n.log" 2>&1
		if grep -q 'ERROR' "$work/$config.$n.log"; then
			grep -m 3 'ERROR' "$work/$config.$n.log" >&2
			exit 1
		fi
		hx_as_postgres "$bindir/pg_ctl" -D "$data" -w start -l "$data/../restart.log" >/dev/null
		hx_cluster_stop
	) >&2
	sed -n 's/^summary: //p' "$work/$config.$n.callgrind"
}

# instructions per transaction of config
per_txn() {						# bindir config
	local small large
	small=$(count "$1" "$2" 300)
	large=$(count "$1" "$2" 3300)
	echo $(((large - small) / 3000))
}

measure() {						# label pg_config
	local bindir bare log
	bindir=$(hx_bindir "$2")
	hx_log "$1: instructions a transaction, bare and log ($("$2" --version))"
	bare=$(per_txn "$bindir" bare)
	log=$(per_txn "$bindir" log)
	printf '%s\t%s\t%s\n' "$1" "$bare" "$log" >>"$work/results.tsv"
	printf '%s: bare %d, log %d, the log %d a transaction\n' "$1" "$bare" "$log" "$((log - bare))"
}

: >"$work/results.tsv"
measure "this tree" "$HX_PG_CONFIG"

if [ -n "${HX_BENCH_BASE:-}" ]; then
	# the base's build, in a copy of the installation of its own
	base=$work/base
	mkdir -p "$base/src" "$base/pg"
	# pg_config finds the other directories from where it is
	for d in "$("$HX_PG_CONFIG" --bindir)" "$("$HX_PG_CONFIG" --pkglibdir)" \
		"$("$HX_PG_CONFIG" --sharedir)" "$("$HX_PG_CONFIG" --includedir-server)"; do
		mkdir -p "$base/pg$(dirname "$d")"
		cp -a "$d" "$base/pg$(dirname "$d")/"
	done
	basepgc=$base/pg$("$HX_PG_CONFIG" --bindir)/pg_config
	git -C "$top" archive "$HX_BENCH_BASE" Makefile hxstate.control sql src | tar -x -C "$base/src"
	make -C "$base/src" -s PG_CONFIG="$basepgc" >/dev/null
	make -C "$base/src" -s PG_CONFIG="$basepgc" install >/dev/null
	chmod -R a+rX "$base"
	measure "$HX_BENCH_BASE" "$basepgc"
fi

echo
echo "instructions a transaction (callgrind, single-user backend, 3,000 UPDATEs of update.sql)"
echo
printf '%-12s | %9s | %9s | %9s | %s\n' build bare log 'log-bare' 'bare/log'
printf '%-12s-|-%9s-|-%9s-|-%9s-|-%s\n' ------------ --------- --------- --------- --------
while IFS=$'\t' read -r label bare log; do
	awk -v l="$label" -v b="$bare" -v g="$log" 'BEGIN {
		printf "%-12s | %9d | %9d | %9d | %.3f\n", l, b, g, g - b, b / g }'
done <"$work/results.tsv"
