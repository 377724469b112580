# test/lib.sh: shared by test/run, demo/run and bench/run.
#
# hx_setup installs what is missing on a Debian 12 machine (PostgreSQL 15
# server headers, pgTAP, pg_prove, IPC::Run, Node.js and the npm packages
# of package-lock.json), then builds and installs the extension.  Run as
# root, or as a user who may sudo.

HX_PG_VERSION=15
HX_PG_BIN=/usr/lib/postgresql/$HX_PG_VERSION/bin
export PG_CONFIG=$HX_PG_BIN/pg_config

hx_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

hx_log() {
	printf '\n== %s\n' "$*"
}

# Debian packages that are missing, by the file each one provides
hx_missing_packages() {
	local missing=()
	[ -f /usr/include/postgresql/$HX_PG_VERSION/server/postgres.h ] ||
		missing+=(postgresql-server-dev-$HX_PG_VERSION)
	[ -x $HX_PG_BIN/postgres ] || missing+=(postgresql-$HX_PG_VERSION)
	command -v pg_virtualenv >/dev/null || missing+=(postgresql-common)
	[ -f /usr/share/postgresql/$HX_PG_VERSION/extension/pgtap.control ] ||
		missing+=(postgresql-$HX_PG_VERSION-pgtap)
	command -v pg_prove >/dev/null ||
		missing+=(libtap-parser-sourcehandler-pgtap-perl)
	perl -MIPC::Run -e 1 2>/dev/null || missing+=(libipc-run-perl)
	command -v node >/dev/null || missing+=(nodejs)
	command -v npm >/dev/null || missing+=(npm)
	command -v make >/dev/null || missing+=(make)
	command -v gcc >/dev/null || missing+=(gcc)
	echo "${missing[@]}"
}

hx_install_packages() {
	local missing
	missing=$(hx_missing_packages)
	if [ -n "$missing" ]; then
		hx_log "installing Debian packages: $missing"
		hx_root apt-get update -q
		# shellcheck disable=SC2086
		hx_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing
	fi
}

# npm packages, exactly as package-lock.json pins them
hx_install_npm() {
	local top=$1
	if [ ! -d "$top/node_modules/pg" ] || [ ! -d "$top/node_modules/@ag-ui/core" ] ||
		[ "$top/package-lock.json" -nt "$top/node_modules/.package-lock.json" ]; then
		hx_log "installing npm packages (npm ci)"
		(cd "$top" && npm ci --no-audit --no-fund --loglevel=error)
	fi
}

hx_build_install() {
	local top=$1
	hx_log "building and installing hxstate"
	make -C "$top" -s PG_CONFIG="$PG_CONFIG" ${PG_CFLAGS:+PG_CFLAGS="$PG_CFLAGS"}
	hx_root make -C "$top" -s PG_CONFIG="$PG_CONFIG" install
}

hx_setup() {
	local top=$1
	hx_install_packages
	hx_install_npm "$top"
	hx_build_install "$top"
}

# pg_virtualenv -t keeps the throwaway cluster in a temporary directory
# (not /etc/postgresql), so an interrupted run leaves nothing behind and
# runs with different PGPORTs do not collide.
