#!/usr/bin/env bash
# test/lib/provision.test.sh: what test/provision installs for whom
# (test/lib/common.sh).  The demo's set (test/provision --demo, which
# demo/run uses) is what the demo needs and nothing of the tests' (no pgTAP,
# no pg_prove, no IPC::Run, no Python venv), and no Debian server when
# HX_PG_CONFIG names another; the tests' set has the demo's and their
# tools.  npm: the demo's install (npm ci --omit=dev) serves the demo, and
# a later test run that needs every package installs them all, once.
# Installs nothing: the machine's packages are looked for where no
# program is (an empty PATH, a PostgreSQL version that does not exist),
# and npm is a stand-in that records its calls.
#
#   bash test/lib/provision.test.sh
#
# Prints a line per check and appends "provision-sets <passed> <failed>"
# to HX_RESULTS when set.
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/hxstate-provision-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=test/lib/common.sh
. "$top/test/lib/common.sh"

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

# the words of a list, sorted, one line
sorted() { tr ' ' '\n' <<<"$*" | sed '/^$/d' | sort | tr '\n' ' '; }
same() { [ "$(sorted "$1")" = "$(sorted "$2")" ] || { echo "  got: $1" >&2; echo "  expected: $2" >&2; return 1; }; }

# ---------------------------------------------------------------------
# Debian packages: a machine with nothing (no such PostgreSQL, no program
# on the PATH)
# ---------------------------------------------------------------------

missing() {						# HX_PG_CONFIG set...
	(
		HX_PG_VERSION=99
		HX_DEBIAN_PG_CONFIG=/usr/lib/postgresql/99/bin/pg_config
		HX_PG_CONFIG=$1
		shift
		PATH=$work/empty
		hx_missing_packages "$@"
	)
}
mkdir "$work/empty"
demo_needs="postgresql-99 postgresql-server-dev-99 nodejs npm make gcc"
tests_own="postgresql-99-pgtap libtap-parser-sourcehandler-pgtap-perl libipc-run-perl python3-venv"

check "the demo's set: Debian's server and headers, Node.js, npm, a compiler" \
	same "$(missing /usr/lib/postgresql/99/bin/pg_config demo)" "$demo_needs"
check "the demo's set on a server of one's own: no Debian server" \
	same "$(missing /opt/pg/bin/pg_config demo)" "nodejs npm make gcc"
check "the tests' set: the demo's and the tests' own tools" \
	same "$(missing /usr/lib/postgresql/99/bin/pg_config)" "$demo_needs $tests_own"
check "the tests' set has Debian's server whatever HX_PG_CONFIG names" \
	same "$(missing /opt/pg/bin/pg_config)" "$demo_needs $tests_own"
check "the tests' set with ci: still every base package" \
	bash -c '[[ " $1 " == *" python3-venv "* && " $1 " == *" postgresql-99-pgtap "* ]]' _ \
	"$(missing /usr/lib/postgresql/99/bin/pg_config ci)"
check "the sharding set: PL/Proxy for Debian's server, pg_auto_failover, bison and flex (PL/Proxy's build for 18)" \
	bash -c 'for p in postgresql-99-plproxy postgresql-99-auto-failover bison flex; do
		[[ " $1 " == *" $p "* ]] || exit 1; done' _ \
	"$(missing /usr/lib/postgresql/99/bin/pg_config shard)"

# ---------------------------------------------------------------------
# npm: a stand-in that records its arguments and installs a hidden
# lockfile as npm ci does (after emptying node_modules)
# ---------------------------------------------------------------------

repo=$work/repo
mkdir -p "$repo" "$work/bin"
echo '{}' >"$repo/package-lock.json"
cat >"$work/bin/npm" <<EOF
#!/bin/sh
echo "\$*" >>"$work/npm-calls"
rm -rf node_modules && mkdir node_modules && echo '{}' >node_modules/.package-lock.json
EOF
chmod +x "$work/bin/npm"
npm_calls() { [ "$(wc -l <"$work/npm-calls" 2>/dev/null || echo 0)" -eq "$1" ]; }
last_call() { [[ "$(tail -1 "$work/npm-calls")" == $1 ]]; }
install() { PATH=$work/bin:$PATH hx_install_npm "$repo" "$@" >/dev/null; }

install runtime
check "the demo installs the runtime packages: npm ci --omit=dev" last_call "ci --omit=dev *"
check "(one npm ci)" npm_calls 1
install runtime
check "a second demo installs nothing" npm_calls 1
install
check "the tests then install every package: npm ci" last_call "ci --no-audit*"
check "(a second npm ci)" npm_calls 2
install
install runtime
check "then neither the tests nor the demo install anything" npm_calls 2
rm "$repo/node_modules/.hxstate-npm"
install runtime
check "an npm ci by hand serves the demo" npm_calls 2
install
check "but the tests install every package once more (which set it was is unknown)" npm_calls 3
install
check "(and then no more)" npm_calls 3
install dev 2>/dev/null
rc=$?
check "a set that is neither all nor runtime is refused" [ $rc -eq 2 ]
check "(and nothing installed)" npm_calls 3
touch -d '+1 minute' "$repo/package-lock.json"
install runtime
check "a newer package-lock.json is installed again" npm_calls 4

echo "-- provision-sets: $passed passed, $failed failed"
[ -n "${HX_RESULTS:-}" ] && echo "provision-sets $passed $failed" >>"$HX_RESULTS"
[ "$failed" -eq 0 ]
