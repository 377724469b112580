# test/lib/common.sh: what the test, demo and benchmark commands share:
# where the servers are, logging, and provisioning (called only by
# test/provision).
#
# HX_PG_CONFIG is Debian's PostgreSQL 15; HX_CASSERT_PG_CONFIG the
# assert-enabled build that test/provision --cassert makes, cached under
# HX_CACHE (/var/cache/hxstate unless set).  Every other path comes from
# pg_config.

HX_PG_VERSION=15
HX_PG_CONFIG=${HX_PG_CONFIG:-/usr/lib/postgresql/$HX_PG_VERSION/bin/pg_config}
HX_CACHE=${HX_CACHE:-/var/cache/hxstate}
HX_CASSERT_PREFIX=$HX_CACHE/pg$HX_PG_VERSION-cassert
HX_CASSERT_PG_CONFIG=$HX_CASSERT_PREFIX/bin/pg_config
# the flags the assert-enabled server is built with; a change rebuilds it
HX_CASSERT_CONFIGURE="--enable-cassert --enable-debug --with-lz4 --without-icu --without-readline"
HX_CASSERT_CFLAGS="-O2 -g -DUSE_VALGRIND"

hx_log() {
	printf '\n== %s\n' "$*"
}

hx_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

hx_bindir() {						# pg_config
	"$1" --bindir
}

# ---------------------------------------------------------------------
# Debian packages
# ---------------------------------------------------------------------

# The packages of a set that are missing, by a file each one provides.
# Sets: base (always), cassert, ci, long.
hx_missing_packages() {
	local set missing=()
	for set in base "$@"; do
		case $set in
			base)
				[ -x /usr/lib/postgresql/$HX_PG_VERSION/bin/postgres ] ||
					missing+=(postgresql-$HX_PG_VERSION)
				[ -f /usr/include/postgresql/$HX_PG_VERSION/server/postgres.h ] ||
					missing+=(postgresql-server-dev-$HX_PG_VERSION)
				[ -f /usr/share/postgresql/$HX_PG_VERSION/extension/pgtap.control ] ||
					missing+=(postgresql-$HX_PG_VERSION-pgtap)
				command -v pg_prove >/dev/null || missing+=(libtap-parser-sourcehandler-pgtap-perl)
				perl -MIPC::Run -e 1 2>/dev/null || missing+=(libipc-run-perl)
				command -v node >/dev/null || missing+=(nodejs)
				command -v npm >/dev/null || missing+=(npm)
				command -v make >/dev/null || missing+=(make)
				command -v gcc >/dev/null || missing+=(gcc)
				;;
			cassert)
				command -v bison >/dev/null || missing+=(bison)
				command -v flex >/dev/null || missing+=(flex)
				[ -f /usr/include/lz4.h ] || missing+=(liblz4-dev)
				[ -f /usr/include/zlib.h ] || missing+=(zlib1g-dev)
				command -v dpkg-source >/dev/null || missing+=(dpkg-dev)
				[ -f /usr/include/valgrind/memcheck.h ] || missing+=(valgrind)
				;;
			ci)
				command -v sqlsmith >/dev/null || missing+=(sqlsmith)
				command -v valgrind >/dev/null || missing+=(valgrind)
				# the gateway's browser test drives Debian's chromium (playwright-core)
				[ -x /usr/bin/chromium ] || missing+=(chromium)
				# test/failover: the monitor's extension; pg_autoctl
				# (/usr/bin) comes with it, from pg-auto-failover-cli
				[ -f /usr/lib/postgresql/$HX_PG_VERSION/lib/pgautofailover.so ] &&
					command -v pg_autoctl >/dev/null ||
					missing+=(postgresql-$HX_PG_VERSION-auto-failover)
				;;
			long)
				# nothing beyond the CI set
				;;
		esac
	done
	echo "${missing[@]}"
}

hx_install_packages() {
	local missing
	missing=$(hx_missing_packages "$@")
	if [ -n "$missing" ]; then
		hx_log "installing Debian packages: $missing"
		hx_root apt-get update -q
		# shellcheck disable=SC2086
		hx_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
	fi
}

# npm packages, exactly as package-lock.json pins them
hx_install_npm() {
	local top=$1
	if [ ! -f "$top/node_modules/.package-lock.json" ] ||
		[ "$top/package-lock.json" -nt "$top/node_modules/.package-lock.json" ]; then
		hx_log "installing npm packages (npm ci)"
		(cd "$top" && npm ci --no-audit --no-fund --loglevel=error)
	fi
}

# ---------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------

# Build hxstate and install it into the server of pg_config.  Debian's
# server is built in the source tree; any other in a copy of it, so that
# the two builds' objects never mix.
hx_build_extension() {
	local top=$1 pgc=$2 dir=$top
	hx_log "building and installing hxstate into $("$pgc" --bindir)"
	if [ "$pgc" != "$HX_PG_CONFIG" ]; then
		dir=$(mktemp -d "${TMPDIR:-/tmp}/hxstate-build.XXXXXX")
		mkdir "$dir/src"
		(cd "$top" && cp -r Makefile hxstate.control sql expected "$dir/" &&
			cp src/*.c src/*.h "$dir/src/")
	fi
	make -C "$dir" -s PG_CONFIG="$pgc" ${PG_CFLAGS:+PG_CFLAGS="$PG_CFLAGS"}
	hx_root make -C "$dir" -s PG_CONFIG="$pgc" install
	[ "$dir" = "$top" ] || rm -rf "$dir"
}

# Unpack Debian's source of postgresql-15 into $1/postgresql-15-<version>:
# the candidate version, or else the newest whose source the mirror still
# has.  Upstream's tarball as Debian ships it, without Debian's patches:
# those install the server's modules into Debian's own directories,
# whatever the prefix, which would overwrite the release server's.
hx_fetch_pg_source() {
	local into=$1 version got=
	if ! grep -qs '^Types:.*deb-src' /etc/apt/sources.list.d/debian.sources &&
		! grep -qs '^deb-src' /etc/apt/sources.list 2>/dev/null; then
		hx_log "enabling Debian source packages (deb-src)"
		hx_root sed -i 's/^Types: deb$/Types: deb deb-src/' /etc/apt/sources.list.d/debian.sources
		hx_root apt-get update -q
	fi
	for version in "" $(apt-cache showsrc postgresql-$HX_PG_VERSION | sed -n 's/^Version: //p' | sort -rV); do
		if (cd "$into" && apt-get source -q --download-only \
			"postgresql-$HX_PG_VERSION${version:+=$version}" >/dev/null 2>&1); then
			got=1
			break
		fi
	done
	[ -n "$got" ] || { echo "could not fetch the source of postgresql-$HX_PG_VERSION" >&2; return 1; }
	version=$(find "$into" -maxdepth 1 -name "postgresql-${HX_PG_VERSION}_*.orig.tar.*" | sort -V | tail -1)
	mkdir -p "$into/src"
	tar -C "$into/src" -xf "$version"
}

# PostgreSQL 15 with assertions, debugging symbols and Valgrind support,
# from Debian's source package, into HX_CASSERT_PREFIX; skipped when the
# cached build was made with the same flags.
hx_build_cassert_server() {
	local stamp="$HX_CASSERT_CONFIGURE CFLAGS=$HX_CASSERT_CFLAGS"
	local src jobs
	if [ -x "$HX_CASSERT_PREFIX/bin/postgres" ] &&
		[ "$(cat "$HX_CASSERT_PREFIX/.hxstate-stamp" 2>/dev/null)" = "$stamp" ]; then
		return 0
	fi
	hx_log "building PostgreSQL $HX_PG_VERSION with assertions into $HX_CASSERT_PREFIX (once per machine)"
	hx_root rm -rf "$HX_CACHE/src" "$HX_CASSERT_PREFIX"
	hx_root mkdir -p "$HX_CACHE/src"
	hx_root chown "$(id -u)" "$HX_CACHE/src"
	hx_fetch_pg_source "$HX_CACHE/src"
	src=$(find "$HX_CACHE/src/src" -maxdepth 1 -type d -name "postgresql-$HX_PG_VERSION*" | head -1)
	jobs=$(nproc)
	(
		cd "$src"
		# shellcheck disable=SC2086
		./configure --prefix="$HX_CASSERT_PREFIX" $HX_CASSERT_CONFIGURE \
			CFLAGS="$HX_CASSERT_CFLAGS" >"$src/hxstate-configure.log" 2>&1 ||
			{ tail -30 "$src/hxstate-configure.log"; exit 1; }
		# every directory the build installs into must be under the prefix
		make -s -C src/port pg_config_paths.h >/dev/null
		if grep -E '^#define (PGBINDIR|PGSHAREDIR|LIBDIR|PKGLIBDIR|INCLUDEDIR|PKGINCLUDEDIR) ' \
			src/port/pg_config_paths.h | grep -qv "\"$HX_CASSERT_PREFIX"; then
			echo "the build would install outside $HX_CASSERT_PREFIX" >&2
			exit 1
		fi
		make -s -j"$jobs" >"$src/hxstate-make.log" 2>&1 ||
			{ tail -30 "$src/hxstate-make.log"; exit 1; }
		hx_root make -s install >/dev/null
		hx_root make -s -C src/test/isolation install >/dev/null
		hx_root make -s -C contrib/amcheck install >/dev/null
		# Valgrind's suppressions for core, for test/valgrind
		hx_root cp src/tools/valgrind.supp "$HX_CASSERT_PREFIX/valgrind.supp"
	)
	echo "$stamp" | hx_root tee "$HX_CASSERT_PREFIX/.hxstate-stamp" >/dev/null
}

# pgTAP is SQL only: Debian's copy serves any PostgreSQL 15
hx_install_pgtap() {
	local pgc=$1 ext
	ext=$("$pgc" --sharedir)/extension
	[ -f "$ext/pgtap.control" ] && return 0
	hx_root cp /usr/share/postgresql/$HX_PG_VERSION/extension/pgtap* "$ext/"
}
