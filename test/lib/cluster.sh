# test/lib/cluster.sh: throwaway PostgreSQL clusters for hxstate's tests.
#
# Sourced by the test, demo and benchmark commands.  A cluster lives in a
# fresh directory under ${TMPDIR:-/tmp}, belongs to the "postgres" user
# (the server refuses to run as root), listens only on a Unix socket in
# that directory, and is removed when the calling shell exits.  The same
# functions drive Debian's release server and the assert-enabled build,
# by its bin directory:
#
#   hx_cluster_start "$(pg_config --bindir)" fsync=on wal_level=logical
#   psql -c 'SELECT 1'           # PGHOST, PGPORT, PGUSER, PGDATABASE are set
#   hx_cluster_kill              # a power cut: kill -9 of every server process
#   hx_cluster_up                # crash recovery, then running again
#   hx_cluster_stop
#
# Settings given as name=value go to postgresql.conf (later ones win).
# HX_CLUSTER_WRAPPER, when set, is passed to pg_ctl -p: the program that
# runs the postgres binary (test/valgrind runs the server under Valgrind
# with it).  HX_KEEP_CLUSTER=1 keeps the directory for a post-mortem.

# Run a command as the cluster's owner
hx_as_postgres() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# Create (initdb) and start a cluster; exports PGHOST PGPORT PGUSER
# PGDATABASE and sets HX_CLUSTER (its directory) and HX_CLUSTER_BIN.
hx_cluster_start() {
	local bindir=$1 dir
	shift
	dir=$(mktemp -d "${TMPDIR:-/tmp}/hxstate-pg.XXXXXX")
	chmod 755 "$dir"
	[ "$(id -u)" = 0 ] && chown postgres: "$dir"
	HX_CLUSTER=$dir
	HX_CLUSTER_BIN=$bindir
	trap 'hx_cluster_cleanup' EXIT
	hx_as_postgres "$bindir/initdb" -D "$dir/data" -U postgres -A trust \
		-E UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1 || {
		cat "$dir/initdb.log" >&2
		return 1
	}
	hx_cluster_conf "$dir/data" "$@"
	export PGHOST=$dir PGPORT=5432 PGUSER=postgres PGDATABASE=postgres
	unset PGPASSWORD PGSERVICE
	hx_cluster_up
}

# The settings of a test cluster, appended to the postgresql.conf of data
# (a directory of HX_CLUSTER), then those given as name=value
hx_cluster_conf() {					# data [name=value ...]
	local data=$1 setting
	shift
	{
		echo "# hxstate test cluster"
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$HX_CLUSTER'"
		echo "port = 5432"
		echo "fsync = off"
		echo "max_connections = 200"
		echo "wal_level = logical"
		echo "max_wal_senders = 10"
		echo "max_replication_slots = 10"
		echo "log_line_prefix = '%m [%p] %q%a '"
		echo "lc_messages = 'C'"
		# hxstate's output plugin (src/decode.c), where the server has
		# the list of trusted ones (15.20, 18.6 and later)
		if "$HX_CLUSTER_BIN/postgres" --describe-config 2>/dev/null | grep '^output_plugin_libraries' >/dev/null; then
			echo "output_plugin_libraries = 'pgoutput, test_decoding, hxstate'"
		fi
		for setting in "$@"; do
			echo "${setting%%=*} = '${setting#*=}'"
		done
	} >>"$data/postgresql.conf"
}

# Start the cluster's server (again), waiting until it accepts connections
hx_cluster_up() {
	local wrapper=()
	[ -n "${HX_CLUSTER_WRAPPER:-}" ] && wrapper=(-p "$HX_CLUSTER_WRAPPER")
	hx_as_postgres "$HX_CLUSTER_BIN/pg_ctl" -D "$HX_CLUSTER/data" \
		-l "$HX_CLUSTER/server.log" "${wrapper[@]}" -t 600 -w start >/dev/null || {
		tail -40 "$HX_CLUSTER/server.log" >&2
		return 1
	}
}

# Change settings of the running cluster and restart it
hx_cluster_reconfigure() {
	local setting
	for setting in "$@"; do
		echo "${setting%%=*} = '${setting#*=}'" >>"$HX_CLUSTER/data/postgresql.conf"
	done
	hx_cluster_restart
}

hx_cluster_restart() {
	hx_cluster_stop
	hx_cluster_up
}

# The postmaster's pid
hx_cluster_pid() {
	head -1 "$HX_CLUSTER/data/postmaster.pid" 2>/dev/null
}

# kill -9 of the postmaster and of every process it started, as a power
# cut would stop them (run with fsync=on for that to mean anything); the
# next hx_cluster_up runs crash recovery.
hx_cluster_kill() {
	local pid children i
	pid=$(hx_cluster_pid)
	[ -n "$pid" ] || return 0
	children=$(pgrep -P "$pid" | tr '\n' ' ' || true)
	# shellcheck disable=SC2086
	kill -9 "$pid" $children 2>/dev/null || true
	for i in $(seq 1 100); do
		# shellcheck disable=SC2086
		kill -0 "$pid" $children 2>/dev/null || break
		sleep 0.1
	done
}

hx_cluster_stop() {
	[ -n "${HX_CLUSTER:-}" ] || return 0
	hx_as_postgres "$HX_CLUSTER_BIN/pg_ctl" -D "$HX_CLUSTER/data" -m fast -t 600 -w stop >/dev/null 2>&1 || true
}

# What the server log says went wrong: crashes, failed assertions, PANICs.
# Prints the lines and returns 1 when there are any.
hx_cluster_check_log() {
	local log=${1:-$HX_CLUSTER/server.log}
	local bad
	bad=$(grep -E 'terminated by signal|TRAP:|PANIC:|was terminated by exception|exited with exit code [2-9]' "$log" 2>/dev/null || true)
	if [ -n "$bad" ]; then
		echo "$bad"
		return 1
	fi
	return 0
}

hx_cluster_cleanup() {
	[ -n "${HX_CLUSTER:-}" ] || return 0
	hx_cluster_stop
	if [ -n "${HX_KEEP_CLUSTER:-}" ]; then
		echo "kept the cluster in $HX_CLUSTER" >&2
	else
		rm -rf "$HX_CLUSTER"
	fi
	HX_CLUSTER=
}
