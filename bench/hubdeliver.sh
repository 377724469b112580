#!/usr/bin/env bash
# bench/hubdeliver.sh: the CPU per event of the hub's delivery path alone
# (bench/hub/deliver.js: an event offered to its subscription, queued, and
# handed to its listener), this tree's client against another revision's,
# with no server and no socket: the part of bench/hubcpu.sh's figure that
# the subscriptions' code decides, measured out of the machine's noise.
#
#   bash bench/hubdeliver.sh [BASE]    # BASE: a git revision (default: main)
#
# Three cases, each run by both clients in turn, HX_BENCH_ROUNDS (5)
# rotations, medians:
#   parse    the event's JSON text decoded and parsed (what the WAL brings),
#            state: false (as bench/pgbench/follow.js follows);
#   noparse  the parsed event given: the subscriptions' own part;
#   state    parse, with state: true (the delta applied: a follower that
#            keeps the state, as a gateway does).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
base=${1:-main}
ROUNDS=${HX_BENCH_ROUNDS:-5}
work=$(mktemp -d "${TMPDIR:-/tmp}/hxstate-hubdeliver.XXXXXX")
trap 'rm -rf "$work"' EXIT

# BASE's client beside this tree's node_modules (file by file, as bench/hubcpu.sh)
git -C "$top" ls-tree -r --name-only "$base" client/lib | while read -r f; do
	mkdir -p "$work/base/$(dirname "$f")"
	git -C "$top" show "$base:$f" >"$work/base/$f"
done
ln -s "$top/node_modules" "$work/base/node_modules"

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
one() {							# lib case -> us per event
	local args
	case $2 in
		parse) args=(parse nostate) ;;
		noparse) args=(noparse nostate) ;;
		state) args=(parse state) ;;
	esac
	node "$top/bench/hub/deliver.js" "$1" "${args[@]}" | node -e '
		const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
		process.stdout.write(r.us_per_event.toFixed(3))'
}

echo "hub delivery path, CPU per event: this tree against $base ($(git -C "$top" rev-parse --short "$base")); $ROUNDS rounds, node $(node --version), $(nproc) cores"
for c in parse noparse state; do
	new="" old="" line="$c:"
	for r in $(seq 1 "$ROUNDS"); do
		if [ $((r % 2)) = 1 ]; then
			a=$(one "$top/client/lib" "$c"); b=$(one "$work/base/client/lib" "$c")
		else
			b=$(one "$work/base/client/lib" "$c"); a=$(one "$top/client/lib" "$c")
		fi
		new+="$a " old+="$b "
		line+=" $a/$b"
	done
	m1=$(median <<<"$new") m2=$(median <<<"$old")
	echo "$line us (this tree/$base); medians $m1 / $m2 us = $(awk -v a="$m1" -v b="$m2" 'BEGIN { printf "%.2f", a / b }')x"
done
