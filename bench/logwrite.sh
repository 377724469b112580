#!/usr/bin/env bash
# bench/logwrite.sh: what writing an event straight into its day's
# partition saves against the prepared INSERT into the log, on each
# PostgreSQL version hxstate is tested on.
#
# hx_stream writes each event to hx_event directly (the tuple formed, its
# constraints checked and inserted with its index entries, as logical
# replication's apply worker writes a row), unless the owner configured
# more on the log; then through an INSERT prepared once per backend.  The
# direct path uses executor internals that change between major versions
# (src/compat.h); this measures what it buys.  Row-level security enabled
# on hx_event switches a backend to the prepared INSERT (the superuser
# that pgbench runs as bypasses it, so it costs nothing itself).
#
# Per version (Debian's PostgreSQL 15, and PostgreSQL 18 as a release build:
# test/provision --bench), in a throwaway cluster of its own (fsync on,
# synchronous_commit off so that commits do not hide the trigger's cost):
# pgbench, 1 client, one UPDATE per transaction of a random one of 100 rows
# merging a counter, its stream logging every change (payload=none); three
# contenders alternating over HX_BENCH_PG_REPS rounds of HX_BENCH_PG_SECONDS
# seconds: no stream, the stream with the direct write, the stream with the
# prepared INSERT.  Prints the medians and the time per event each path
# takes, and checks that every contender logged what it should.  Then, as
# the transactions' commits (fsync) make those rounds noisy on a small
# machine, the same three contenders once more inside one transaction:
# 20,000 such UPDATEs in a DO block, timed by the server, alternating over
# the rounds; the difference per event between the two paths, round by
# round (paired), and its median.
#
# Run by bench/run (part logwrite) or alone after test/provision --bench.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=test/lib/common.sh
. "$top/test/lib/common.sh"
# shellcheck source=test/lib/cluster.sh
. "$top/test/lib/cluster.sh"

seconds=${HX_BENCH_PG_SECONDS:-8}
reps=${HX_BENCH_PG_REPS:-5}
work=$(mktemp -d "${TMPDIR:-/tmp}/hxstate-logwrite.XXXXXX")
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT

cat >"$work/update.sql" <<'EOF'
\set k random(1, 100)
UPDATE t SET st = hx_merge(st, '[{"op": "increment", "path": "/n", "by": 1}]') WHERE k = :k;
EOF
cat >"$work/bare.sql" <<'EOF'
\set k random(1, 100)
UPDATE bare SET st = hx_merge(st, '[{"op": "increment", "path": "/n", "by": 1}]') WHERE k = :k;
EOF

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

measure() {						# label pg_config
	local label=$1 pgc=$2 round mode tps
	(
		hx_cluster_start "$("$pgc" --bindir)" fsync=on synchronous_commit=off >/dev/null
		psql -X -q -v ON_ERROR_STOP=1 <<-'EOF'
			CREATE EXTENSION hxstate;
			CREATE TABLE t (k int PRIMARY KEY, st jsonb NOT NULL DEFAULT '{}');
			CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON t
			    FOR EACH ROW EXECUTE FUNCTION hx_stream('st', 'k', 'payload=none');
			CREATE TABLE bare (k int PRIMARY KEY, st jsonb NOT NULL DEFAULT '{}');
			INSERT INTO t SELECT i FROM generate_series(1, 100) i;
			INSERT INTO bare SELECT i FROM generate_series(1, 100) i;
			VACUUM ANALYZE;
		EOF
		: >"$work/$label.tps"
		for round in $(seq 1 "$reps"); do
			for mode in none direct statement; do
				case $mode in
					direct) psql -X -q -c 'ALTER TABLE hx_event DISABLE ROW LEVEL SECURITY' ;;
					statement) psql -X -q -c 'ALTER TABLE hx_event ENABLE ROW LEVEL SECURITY' ;;
				esac
				before=$(psql -X -At -c 'SELECT count(*) FROM hx_event')
				script=$work/update.sql
				[ "$mode" = none ] && script=$work/bare.sql
				out=$("$("$pgc" --bindir)/pgbench" -n -M prepared -c 1 -T "$seconds" -f "$script" 2>&1)
				tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out" | tail -1)
				tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
				after=$(psql -X -At -c 'SELECT count(*) FROM hx_event')
				want=$tx
				[ "$mode" = none ] && want=0
				if [ "$((after - before))" -ne "$want" ]; then
					echo "$label $mode: $tx transactions logged $((after - before)) events, not $want" >&2
					exit 1
				fi
				echo "$mode $tps" >>"$work/$label.tps"
				printf '%s round %d %-9s %9.0f tps  (%d events logged)\n' "$label" "$round" "$mode" "$tps" "$((after - before))"
			done
		done
		# inside one transaction: no commit, no fsync; µs per UPDATE
		: >"$work/$label.loop"
		# round 0 warms the caches up (the first DO of a session plans and
		# reads what the next ones find ready); it is not counted
		for round in $(seq 0 "$reps"); do
			line=$round
			for mode in none direct statement; do
				case $mode in
					direct) psql -X -q -c 'ALTER TABLE hx_event DISABLE ROW LEVEL SECURITY' ;;
					statement) psql -X -q -c 'ALTER TABLE hx_event ENABLE ROW LEVEL SECURITY' ;;
				esac
				table=t
				[ "$mode" = none ] && table=bare
				us=$(psql -X -At -v ON_ERROR_STOP=1 2>&1 <<-EOF | sed -n 's/.*us=//p'
					DO \$\$
					DECLARE t0 timestamptz := clock_timestamp();
					BEGIN
					    FOR i IN 1..20000 LOOP
					        UPDATE $table SET st = hx_merge(st, '[{"op": "increment", "path": "/n", "by": 1}]')
					         WHERE k = 1 + i % 100;
					    END LOOP;
					    RAISE NOTICE 'us=%', extract(epoch FROM clock_timestamp() - t0) * 1e6 / 20000;
					END \$\$;
				EOF
				)
				line="$line $(printf '%.1f' "$us")"
			done
			[ "$round" -gt 0 ] && echo "$line" >>"$work/$label.loop"
			printf '%s in one transaction, round %d%s: none/direct/statement %s µs per UPDATE\n' "$label" "$round" \
				"$([ "$round" = 0 ] && echo ' (warm-up)')" "${line#* }"
		done
	)
}

report() {						# label version
	local label=$1 version=$2 none direct statement
	none=$(awk '$1 == "none" {print $2}' "$work/$label.tps" | median)
	direct=$(awk '$1 == "direct" {print $2}' "$work/$label.tps" | median)
	statement=$(awk '$1 == "statement" {print $2}' "$work/$label.tps" | median)
	awk -v v="$version" -v n="$none" -v d="$direct" -v s="$statement" 'BEGIN {
		printf "%-16s | %9.0f | %9.0f | %9.0f | %8.1f | %8.1f | %8.1f\n", v, n, d, s,
			1e6 / d - 1e6 / n, 1e6 / s - 1e6 / n, 1e6 / s - 1e6 / d
	}'
}

hx_log "the log's two write paths, PostgreSQL 15 ($("$HX_PG_CONFIG" --version))"
measure pg15 "$HX_PG_CONFIG"
if [ -x "$HX_PG18_RELEASE_PG_CONFIG" ]; then
	hx_log "the log's two write paths, PostgreSQL 18 ($("$HX_PG18_RELEASE_PG_CONFIG" --version), release build)"
	measure pg18 "$HX_PG18_RELEASE_PG_CONFIG"
else
	echo "PostgreSQL 18's release build is missing (bash test/provision --bench): measuring 15 only" >&2
fi

echo
echo "The log's write paths: pgbench, 1 client, a streamed UPDATE per transaction (medians of $reps rounds of $seconds s)"
echo "version          | none tps  | direct tps| stmt tps  | direct µs| stmt µs  | saved µs"
echo "-----------------+-----------+-----------+-----------+----------+----------+---------"
report pg15 "$("$HX_PG_CONFIG" --version | awk '{print $2}')"
[ -f "$work/pg18.tps" ] && report pg18 "$("$HX_PG18_RELEASE_PG_CONFIG" --version | awk '{print $2}')"
echo "(direct µs and stmt µs: the time a streamed UPDATE takes beyond an unstreamed one, per event;"
echo " saved µs: what the direct write saves per event against the prepared INSERT)"
echo
echo "Inside one transaction: 20,000 streamed UPDATEs in a DO block, µs per UPDATE (medians of $reps rounds)"
echo "version          |  none µs | direct µs|  stmt µs | saved µs (paired by round)"
echo "-----------------+----------+----------+----------+---------------------------"
loop_report() {						# label version
	awk -v v="$2" '{n[NR] = $2; d[NR] = $3; s[NR] = $4; g[NR] = $4 - $3}
		function med(a, k,   i, j, t, b) { for (i = 1; i <= k; i++) b[i] = a[i];
			for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (b[j] < b[i]) { t = b[i]; b[i] = b[j]; b[j] = t }
			return (k % 2) ? b[(k + 1) / 2] : (b[k / 2] + b[k / 2 + 1]) / 2 }
		END { printf "%-16s | %8.1f | %8.1f | %8.1f | %8.1f\n", v, med(n, NR), med(d, NR), med(s, NR), med(g, NR) }' "$work/$1.loop"
}
loop_report pg15 "$("$HX_PG_CONFIG" --version | awk '{print $2}')"
[ -f "$work/pg18.loop" ] && loop_report pg18 "$("$HX_PG18_RELEASE_PG_CONFIG" --version | awk '{print $2}')"
