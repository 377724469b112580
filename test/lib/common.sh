# test/lib/common.sh: what the test, demo and benchmark commands share:
# where the servers are, logging, and provisioning (called only by
# test/provision).
#
# The servers hxstate is tested on:
#   HX_PG_CONFIG          Debian's PostgreSQL 15 (release build, from
#                         Debian's packages);
#   HX_PG18_PG_CONFIG     PostgreSQL 18, built by test/provision from
#                         Debian's source package with assertions,
#                         debugging symbols and Valgrind support, cached
#                         under HX_CACHE (/var/cache/hxstate unless set);
#   HX_CASSERT_PG_CONFIG  the assert-enabled server: that PostgreSQL 18.
# Every other path comes from pg_config.
#
# The sharding runs (test/shard) need PL/Proxy in every server: Debian's
# postgresql-15-plproxy for 15, and for the PostgreSQL 18 builds the
# source of Debian's postgresql-plproxy, built and installed into each
# cached build of 18 with it (hx_build_pg).

HX_PG_VERSION=15
HX_DEBIAN_PG_CONFIG=/usr/lib/postgresql/$HX_PG_VERSION/bin/pg_config
HX_PG_CONFIG=${HX_PG_CONFIG:-$HX_DEBIAN_PG_CONFIG}
HX_CACHE=${HX_CACHE:-/var/cache/hxstate}
HX_PG18_VERSION=18
HX_PG18_PREFIX=$HX_CACHE/pg$HX_PG18_VERSION-cassert
HX_PG18_PG_CONFIG=$HX_PG18_PREFIX/bin/pg_config
HX_CASSERT_PREFIX=$HX_PG18_PREFIX
HX_CASSERT_PG_CONFIG=$HX_PG18_PG_CONFIG
# how the assert-enabled server is built; a change rebuilds it
HX_CASSERT_CONFIGURE="--enable-cassert --enable-debug --with-lz4 --without-icu --without-readline"
HX_CASSERT_CFLAGS="-O2 -g -DUSE_VALGRIND"
# Debian source packages of extensions built into the cached 18 builds
# (in their stamps: a change rebuilds them)
HX_PG18_EXTRAS="postgresql-plproxy"
# PostgreSQL 18 as a release build, for the benchmark only (bench/run):
# timings on an assert-enabled server say little
HX_PG18_RELEASE_PREFIX=$HX_CACHE/pg$HX_PG18_VERSION-release
HX_PG18_RELEASE_PG_CONFIG=$HX_PG18_RELEASE_PREFIX/bin/pg_config
HX_RELEASE_CONFIGURE="--with-lz4 --without-icu --without-readline"
HX_RELEASE_CFLAGS="-O2"

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
# Sets: base (always, but for the demo), pg18 (building PostgreSQL 18 from
# source), ci (the reliability runs, the browser test, the Debian package
# and the PGXN zip), shard (the sharding runs and benchmark: PL/Proxy),
# long; demo, alone: what demo/run uses and nothing else (the server of
# HX_PG_CONFIG with its headers, a compiler, Node.js; Debian's PostgreSQL
# 15 only when HX_PG_CONFIG is Debian's).
hx_missing_packages() {
	local set sets missing=()
	if [ "${1:-}" = demo ]; then sets=(demo); else sets=(base "$@"); fi
	for set in "${sets[@]}"; do
		case $set in
			base | demo)
				if [ "$set" = base ] || [ "$HX_PG_CONFIG" = "$HX_DEBIAN_PG_CONFIG" ]; then
					[ -x /usr/lib/postgresql/$HX_PG_VERSION/bin/postgres ] ||
						missing+=(postgresql-$HX_PG_VERSION)
					[ -f /usr/include/postgresql/$HX_PG_VERSION/server/postgres.h ] ||
						missing+=(postgresql-server-dev-$HX_PG_VERSION)
				fi
				command -v node >/dev/null || missing+=(nodejs)
				command -v npm >/dev/null || missing+=(npm)
				command -v make >/dev/null || missing+=(make)
				command -v gcc >/dev/null || missing+=(gcc)
				[ "$set" = demo ] && continue
				# the tests' own tools
				[ -f /usr/share/postgresql/$HX_PG_VERSION/extension/pgtap.control ] ||
					missing+=(postgresql-$HX_PG_VERSION-pgtap)
				command -v pg_prove >/dev/null || missing+=(libtap-parser-sourcehandler-pgtap-perl)
				perl -MIPC::Run -e 1 2>/dev/null || missing+=(libipc-run-perl)
				# the Python suite's venv (test/lib/python.sh)
				python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
				;;
			pg18)
				command -v bison >/dev/null || missing+=(bison)
				command -v flex >/dev/null || missing+=(flex)
				command -v bzip2 >/dev/null || missing+=(bzip2)
				[ -f /usr/include/lz4.h ] || missing+=(liblz4-dev)
				[ -f /usr/include/zlib.h ] || missing+=(zlib1g-dev)
				[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] ||
					missing+=(debian-archive-keyring)
				[ -f /usr/include/valgrind/memcheck.h ] || missing+=(valgrind)
				;;
			shard)
				# test/shard and bench/shard.sh: PL/Proxy in Debian's 15
				# (the 18 builds have their own, built from source with
				# bison and flex)
				[ -f /usr/lib/postgresql/$HX_PG_VERSION/lib/plproxy.so ] ||
					missing+=(postgresql-$HX_PG_VERSION-plproxy)
				command -v bison >/dev/null || missing+=(bison)
				command -v flex >/dev/null || missing+=(flex)
				[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] ||
					missing+=(debian-archive-keyring)
				command -v pg_autoctl >/dev/null ||
					missing+=(postgresql-$HX_PG_VERSION-auto-failover)
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
				# test/package: the Debian package (pg_buildext, debhelper)
				# and the PGXN zip
				command -v dpkg-buildpackage >/dev/null || missing+=(dpkg-dev)
				# dpkg-checkbuilddeps asks it of every build (the compiler
				# being there is not enough)
				dpkg -s build-essential >/dev/null 2>&1 || missing+=(build-essential)
				command -v dh >/dev/null || missing+=(debhelper)
				[ -f /usr/share/perl5/Debian/Debhelper/Sequence/pgxs_loop.pm ] ||
					missing+=(postgresql-server-dev-all)
				command -v zip >/dev/null || missing+=(zip)
				command -v unzip >/dev/null || missing+=(unzip)
				command -v pgxn >/dev/null || missing+=(pgxnclient)
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

# npm packages, exactly as package-lock.json pins them: all of them, or
# with "runtime" only those the client and the gateway run on (npm ci
# --omit=dev: what the demo uses; not the tests' @ag-ui/client,
# playwright-core, ...).  node_modules/.hxstate-npm names the set installed;
# without it (an npm ci by hand, or one that did not finish) the whole set
# is installed again when it is asked for.
hx_install_npm() {					# top [all|runtime]
	local top=$1 want=${2:-all} have=
	local stamp=$top/node_modules/.hxstate-npm
	case $want in
		all | runtime) ;;
		*) echo "hx_install_npm: no npm set \"$want\" (all or runtime)" >&2; return 2 ;;
	esac
	[ -f "$stamp" ] && have=$(cat "$stamp")
	if [ -f "$top/node_modules/.package-lock.json" ] &&
		[ ! "$top/package-lock.json" -nt "$top/node_modules/.package-lock.json" ] &&
		{ [ "$want" = runtime ] || [ "$have" = all ]; }; then
		return 0
	fi
	if [ "$want" = runtime ]; then
		hx_log "installing the npm packages the client and the gateway run on (npm ci --omit=dev)"
		(cd "$top" && npm ci --omit=dev --no-audit --no-fund --loglevel=error) || return 1
	else
		hx_log "installing npm packages (npm ci)"
		(cd "$top" && npm ci --no-audit --no-fund --loglevel=error) || return 1
	fi
	echo "$want" >"$stamp"
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
		(cd "$top" && cp -r Makefile hxstate.control sql "$dir/" &&
			cp src/*.c src/*.h "$dir/src/")
	fi
	make -C "$dir" -s PG_CONFIG="$pgc" ${PG_CFLAGS:+PG_CFLAGS="$PG_CFLAGS"}
	hx_root make -C "$dir" -s PG_CONFIG="$pgc" install
	[ "$dir" = "$top" ] || rm -rf "$dir"
}

# ---------------------------------------------------------------------
# Cached builds
# ---------------------------------------------------------------------

# A cached build is a directory that holds its stamp (what it was built
# from, with which flags) in .hxstate-stamp, written last.  It is made in
# a staging directory beside it and moved into place whole, so that a
# build that fails or is interrupted (a power cut, a cancelled CI job)
# leaves no directory that a later run could take for a finished one.
hx_cache_valid() {					# dir stamp
	[ -f "$1/.hxstate-stamp" ] && [ "$(cat "$1/.hxstate-stamp")" = "$2" ]
}

# Make dir by calling build_fn with a fresh staging directory as its
# first argument (then args), unless dir already holds a build of stamp.
# A directory without the stamp, or with another one, is removed and
# built again.
hx_cached_build() {					# dir stamp build_fn [args ...]
	local dir=$1 stamp=$2 fn=$3 stage
	shift 3
	hx_cache_valid "$dir" "$stamp" && return 0
	stage=$dir.partial
	hx_root rm -rf "$dir" "$stage"
	hx_root mkdir -p "$stage"
	hx_root chown "$(id -u)" "$stage"
	if ! "$fn" "$stage" "$@"; then
		hx_root rm -rf "$stage"
		return 1
	fi
	echo "$stamp" >"$stage/.hxstate-stamp"
	hx_root mv "$stage" "$dir"
}

# The cache itself: readable by the postgres user, who runs the servers
# built into it (a directory made by mktemp is not)
hx_make_cache() {
	hx_root mkdir -p "$HX_CACHE"
	hx_root chmod 755 "$HX_CACHE"
}

# ---------------------------------------------------------------------
# PostgreSQL from Debian's source packages
# ---------------------------------------------------------------------

# Debian's source package <package> into dir: the newest version, of
# Debian's unstable suite or else of testing or stable, whose upstream
# tarball the mirror still serves (it has answered 404 for some:
# postgresql-plproxy 2.12.0 of unstable and testing, whose 2.11.0 of
# stable it serves; every version of pg-failover-slots).  apt reads a
# sources list of its own (deb-src lines only, for those suites only,
# with Debian's archive key), under HX_CACHE/apt-src, so the machine's
# own apt configuration never sees them: no binary package of them can be
# installed.  Only upstream's tarball as Debian ships it is unpacked, into
# dir/src, without Debian's patches: those install PostgreSQL's modules
# into Debian's own directories whatever the prefix.  Prints the
# directory the tarball unpacked into.
hx_fetch_source() {					# package dir
	local package=$1 into=$2 apt version got= tarball before
	local opts
	apt=$HX_CACHE/apt-src
	hx_root mkdir -p "$apt/sources.list.d" "$apt/lists/partial"
	cat <<-EOF | hx_root tee "$apt/sources.list.d/debian-unstable-src.sources" >/dev/null
		Types: deb-src
		URIs: http://deb.debian.org/debian
		Suites: unstable testing stable
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
	opts=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$apt/sources.list.d"
		-o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache"
		-o APT::Sandbox::User=root)
	hx_root apt-get "${opts[@]}" update -q >/dev/null || return 1
	for version in $(apt-cache "${opts[@]}" showsrc "$package" |
		sed -n 's/^Version: //p' | sort -rV); do
		if (cd "$into" && apt-get "${opts[@]}" source -q --download-only --tar-only \
			"$package=$version" >/dev/null 2>&1); then
			got=1
			break
		fi
	done
	[ -n "$got" ] || { echo "could not fetch the source of $package" >&2; return 1; }
	tarball=$(find "$into" -maxdepth 1 -name "${package}_*.orig.tar.*" | sort -V | tail -1)
	[ -n "$tarball" ] || { echo "no upstream tarball in the source of $package" >&2; return 1; }
	mkdir -p "$into/src"
	before=$(ls "$into/src")
	tar -C "$into/src" -xf "$tarball" || return 1
	# the directory the tarball made (its name is upstream's choice)
	comm -13 <(echo "$before") <(ls "$into/src") | head -1 | sed "s|^|$into/src/|"
}

# Debian's source package of postgresql-<major> into dir/src
hx_fetch_pg_source() {					# major dir
	hx_fetch_source "postgresql-$1" "$2" >/dev/null
}

# Build a PGXS extension from Debian unstable's source package <package>
# and install it into the server of pg_config; with destdir, under it
# (make install DESTDIR=...).  The build sees none of the flags meant for
# hxstate's builds.
hx_build_source_extension() {				# package pg_config [destdir]
	local package=$1 pgc=$2 destdir=${3:-} work src
	work=$(mktemp -d "${TMPDIR:-/tmp}/hxstate-$package.XXXXXX")
	src=$(hx_fetch_source "$package" "$work") && [ -n "$src" ] && [ -d "$src" ] || {
		rm -rf "$work"
		return 1
	}
	(
		set -e
		unset PG_CFLAGS PG_CPPFLAGS PG_CXXFLAGS PG_LDFLAGS PG_LIBS COPT PROFILE \
			CFLAGS CPPFLAGS CXXFLAGS LDFLAGS
		make -C "$src" -s USE_PGXS=1 PG_CONFIG="$pgc" >"$work/make.log" 2>&1 ||
			{ tail -30 "$work/make.log"; exit 1; }
		make -C "$src" -s USE_PGXS=1 PG_CONFIG="$pgc" ${destdir:+DESTDIR="$destdir"} install \
			>>"$work/make.log" 2>&1 || { tail -30 "$work/make.log"; exit 1; }
	)
	local rc=$?
	rm -rf "$work"
	return $rc
}

# Build PostgreSQL from source into prefix (configure's --prefix, with
# configure's flags and CFLAGS), and the extensions named by extras
# (Debian source packages) against it, then install it all into stage,
# which hx_cached_build moves to prefix.  The
# build sees none of the flags meant for the extension's builds: PGXS
# variables (PG_CFLAGS, which .ci/run sets to -Werror, PG_CPPFLAGS, COPT,
# PROFILE, ...) are read by contrib's makefiles too.
hx_build_pg() {						# stage major prefix configure cflags [extras]
	local stage=$1 major=$2 prefix=$3 configure=$4 cflags=$5 extras=${6:-} work src extra
	work=$(mktemp -d "${TMPDIR:-/tmp}/hxstate-pg$major.XXXXXX")
	hx_fetch_pg_source "$major" "$work" || { rm -rf "$work"; return 1; }
	src=$(find "$work/src" -maxdepth 1 -type d -name "postgresql-$major*" | head -1)
	(
		set -e
		cd "$src"
		unset PG_CFLAGS PG_CPPFLAGS PG_CXXFLAGS PG_LDFLAGS PG_LIBS COPT PROFILE \
			CFLAGS CPPFLAGS CXXFLAGS LDFLAGS
		# shellcheck disable=SC2086
		./configure --prefix="$prefix" $configure \
			CFLAGS="$cflags" >configure.log 2>&1 ||
			{ tail -30 configure.log; exit 1; }
		make -s -j"$(nproc)" >make.log 2>&1 || { tail -30 make.log; exit 1; }
		# installed with DESTDIR, then moved: nothing lands in prefix until
		# the build is whole
		make -s install DESTDIR="$work/dest" >/dev/null
		make -s -C src/test/isolation install DESTDIR="$work/dest" >/dev/null
		make -s -C contrib/amcheck install DESTDIR="$work/dest" >/dev/null
		[ -x "$work/dest$prefix/bin/postgres" ] ||
			{ echo "the build installed nothing under $prefix" >&2; exit 1; }
		# the extensions of HX_PG18_EXTRAS (PL/Proxy), built against the
		# server just installed (its pg_config finds its paths from where
		# it is) and installed beside it
		for extra in $extras; do
			hx_build_source_extension "$extra" "$work/dest$prefix/bin/pg_config" ||
				{ echo "building $extra for PostgreSQL $major failed" >&2; exit 1; }
		done
		cp -a "$work/dest$prefix/." "$stage/"
		# Valgrind's suppressions for core, for test/valgrind
		cp src/tools/valgrind.supp "$stage/valgrind.supp"
	)
	local rc=$?
	rm -rf "$work"
	return $rc
}

# PostgreSQL 18 with assertions, debugging symbols and Valgrind support,
# into HX_PG18_PREFIX, once per machine (or when the flags change)
hx_build_pg18() {
	local stamp="postgresql-$HX_PG18_VERSION $HX_CASSERT_CONFIGURE CFLAGS=$HX_CASSERT_CFLAGS + $HX_PG18_EXTRAS"
	hx_cache_valid "$HX_PG18_PREFIX" "$stamp" && return 0
	hx_log "building PostgreSQL $HX_PG18_VERSION with assertions, and $HX_PG18_EXTRAS, into $HX_PG18_PREFIX (once per machine)"
	hx_cached_build "$HX_PG18_PREFIX" "$stamp" hx_build_pg "$HX_PG18_VERSION" "$HX_PG18_PREFIX" \
		"$HX_CASSERT_CONFIGURE" "$HX_CASSERT_CFLAGS" "$HX_PG18_EXTRAS"
}

# PostgreSQL 18 as a release build, into HX_PG18_RELEASE_PREFIX, for the
# benchmark's comparison of versions
hx_build_pg18_release() {
	local stamp="postgresql-$HX_PG18_VERSION $HX_RELEASE_CONFIGURE CFLAGS=$HX_RELEASE_CFLAGS + $HX_PG18_EXTRAS"
	hx_cache_valid "$HX_PG18_RELEASE_PREFIX" "$stamp" && return 0
	hx_log "building PostgreSQL $HX_PG18_VERSION (release build), and $HX_PG18_EXTRAS, into $HX_PG18_RELEASE_PREFIX (once per machine)"
	hx_cached_build "$HX_PG18_RELEASE_PREFIX" "$stamp" hx_build_pg "$HX_PG18_VERSION" \
		"$HX_PG18_RELEASE_PREFIX" "$HX_RELEASE_CONFIGURE" "$HX_RELEASE_CFLAGS" "$HX_PG18_EXTRAS"
}

# pgTAP is SQL only: Debian's copy for PostgreSQL 15 serves the other
# servers too
hx_install_pgtap() {
	local pgc=$1 ext
	ext=$("$pgc" --sharedir)/extension
	[ -f "$ext/pgtap.control" ] && return 0
	hx_root cp /usr/share/postgresql/$HX_PG_VERSION/extension/pgtap* "$ext/"
}

# PL/Proxy for the server of pg_config: Debian's package installs it into
# Debian's 15; a copy of that server (a helper's private one) gets its
# files copied in.  The 18 builds have it built in (hx_build_pg).
hx_install_plproxy() {					# pg_config
	local pgc=$1 ext lib
	ext=$("$pgc" --sharedir)/extension
	lib=$("$pgc" --pkglibdir)
	[ -f "$ext/plproxy.control" ] && [ -f "$lib/plproxy.so" ] && return 0
	[ -f /usr/share/postgresql/$HX_PG_VERSION/extension/plproxy.control ] || {
		echo "PL/Proxy is not installed (postgresql-$HX_PG_VERSION-plproxy)" >&2
		return 1
	}
	hx_root cp /usr/share/postgresql/$HX_PG_VERSION/extension/plproxy* "$ext/"
	hx_root cp /usr/lib/postgresql/$HX_PG_VERSION/lib/plproxy.so "$lib/"
}
