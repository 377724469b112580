#!/usr/bin/env bash
# bench/shard.sh: sessions past one node, measured in one run (the table
# of bench/README.md, "Past one node"):
#
#   bash bench/shard.sh [part ...]      # parts of bench/shard.js, then hubcpu
#
# bench/shard.js starts loopback servers of its own (PostgreSQL 15 with
# PL/Proxy and pg_auto_failover; the release build of 18 for the standby
# part) and measures a routed hx_merge against a direct one, throughput
# at 1, 2 and 4 shards, the writers' pause in a live move, the other
# shards' commit-to-client latency during one shard's failover, and the
# primary's CPU per transaction for streaming with the hub decoding on the
# primary and on a standby; then bench/hubcpu.sh measures the hub's own
# CPU per event against the branch point's hub (BASE, default: the merge
# base with main) and pg_recvlogical.  Needs test/provision --ci --bench
# (bench/run provisions; HX_BENCH_SKIP_SETUP=1 as there).  Parts: route
# scale moves failover standby hubcpu (default all).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=test/lib/common.sh
. "$top/test/lib/common.sh"

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(route scale moves failover standby hubcpu)
js=()
hubcpu=
for p in "${parts[@]}"; do
	case $p in
		route | scale | moves | failover | standby) js+=("$p") ;;
		hubcpu) hubcpu=1 ;;
		*) echo "usage: bench/shard.sh [route|scale|moves|failover|standby|hubcpu ...]" >&2; exit 2 ;;
	esac
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/hxstate-bench-shard.XXXXXX")
chmod 755 "$dir"
[ "$(id -u)" = 0 ] && chown postgres: "$dir"
trap 'rm -rf "$dir"' EXIT
echo "$(nproc) cores; $("$HX_PG_CONFIG" --version); fsync on"
if [ ${#js[@]} -gt 0 ]; then
	HX_PG_CONFIG=$HX_PG_CONFIG HX_PG18_BINDIR=$(dirname "$HX_PG18_RELEASE_PG_CONFIG") HX_DIR=$dir/run \
		node "$top/bench/shard.js" "${js[@]}"
fi
if [ -n "$hubcpu" ]; then
	bash "$top/bench/hubcpu.sh" "${HX_BENCH_BASE:-$(git -C "$top" merge-base HEAD main 2>/dev/null || echo main)}"
fi
echo
echo "command: ${HX_BENCH_BASE:+HX_BENCH_BASE=$HX_BENCH_BASE }bash bench/shard.sh ${*}"
