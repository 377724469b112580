#!/usr/bin/env bash
# test/lib/cache.test.sh: the cached builds of test/lib/common.sh
# (hx_cached_build) are used only when whole.  A build that fails, or is
# killed half way (a cancelled CI job, a power cut), must leave nothing a
# later run takes for a finished build; a directory without the stamp, or
# with another stamp, is built again; a whole one is reused.  Uses a cache
# directory of its own and build functions that stand in for PostgreSQL's.
#
#   bash test/lib/cache.test.sh
#
# Prints a line per check and appends "provision-cache <passed> <failed>"
# to HX_RESULTS when set.
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
HX_CACHE=$(mktemp -d "${TMPDIR:-/tmp}/hxstate-cache-test.XXXXXX")
# shellcheck source=test/lib/common.sh
. "$top/test/lib/common.sh"
trap 'rm -rf "$HX_CACHE"' EXIT

passed=0
failed=0
check() {						# description command...
	local what=$1
	shift
	if "$@"; then
		passed=$((passed + 1))
		echo "ok: $what"
	else
		failed=$((failed + 1))
		echo "not ok: $what"
	fi
}

dir=$HX_CACHE/server
calls=$HX_CACHE/calls
built() { [ -x "$dir/bin/postgres" ] && hx_cache_valid "$dir" "$1"; }
gone() { [ ! -e "$dir" ]; }
calls() { [ "$(wc -l <"$calls" 2>/dev/null || echo 0)" -eq "$1" ]; }

# a build that writes part of its files, then fails
build_fails() {
	echo x >>"$calls"
	mkdir -p "$1/bin" && touch "$1/bin/postgres"
	return 1
}
# a build that writes part of its files, then hangs until killed
build_hangs() {
	echo x >>"$calls"
	mkdir -p "$1/bin" && touch "$1/bin/postgres"
	sleep 600 &
	echo $! >"$HX_CACHE/sleeper"
	touch "$HX_CACHE/started"
	wait
}
# a whole build
build_ok() {
	echo x >>"$calls"
	mkdir -p "$1/bin" && printf '#!/bin/sh\n' >"$1/bin/postgres" && chmod +x "$1/bin/postgres"
}

hx_cached_build "$dir" v1 build_fails
check "a failed build reports the failure" [ $? -ne 0 ]
check "a failed build leaves no directory behind" gone
check "nor a staging directory" [ ! -e "$dir.partial" ]

( hx_cached_build "$dir" v1 build_hangs ) &
pid=$!
for _ in $(seq 1 500); do [ -e "$HX_CACHE/started" ] && break; sleep 0.01; done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
kill -9 "$(cat "$HX_CACHE/sleeper")" 2>/dev/null
check "a build killed half way leaves no directory that could be reused" gone

: >"$calls"
hx_cached_build "$dir" v1 build_ok
check "the next run builds again, and the build is whole" built v1
check "(one build)" calls 1
check "the killed build's staging directory is gone" [ ! -e "$dir.partial" ]

hx_cached_build "$dir" v1 build_ok
check "a whole build with the same stamp is reused, not built again" calls 1

hx_cached_build "$dir" v2 build_ok
check "another stamp (other flags, another version) builds again" built v2
check "(a second build)" calls 2

rm "$dir/.hxstate-stamp"
hx_cached_build "$dir" v2 build_ok
check "a directory without its stamp is built again" built v2
check "(a third build)" calls 3

echo "-- provision-cache: $passed passed, $failed failed"
[ -n "${HX_RESULTS:-}" ] && echo "provision-cache $passed $failed" >>"$HX_RESULTS"
[ "$failed" -eq 0 ]
