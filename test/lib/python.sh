# test/lib/python.sh: the Python suite's virtual environment, built once per
# lock file and reused.
#
#   . test/lib/python.sh
#   hx_python_venv python/requirements-test.txt    # exports HX_VENV (its bin/)
#   "$HX_VENV/python" -m pytest ...
#
# The venv lives in $HX_CACHE (default /var/cache/hxstate) under a name made
# of the lock file's SHA-256 and the interpreter's version, so a changed lock
# or Python builds a new one.  Its marker file, .hxstate-complete, is
# written last, after pip has installed everything and the packages import;
# a venv without the marker (an install that was killed, a full disk, no
# network) is removed and built again, so a half-finished install never
# poisons a later run.  Builds of one venv take turns (flock).  pip installs
# with --require-hashes and --no-deps exactly what the lock names.  The
# package under test is not installed: the suite puts python/src on
# PYTHONPATH.

hx_python_venv() {					# lock file
	local lock=$1 py key dir
	py=${HX_PYTHON:-python3}
	command -v "$py" >/dev/null || {
		echo "hx_python_venv: no $py (Debian: apt-get install python3 python3-venv)" >&2
		return 1
	}
	[ -f "$lock" ] || {
		echo "hx_python_venv: no lock file $lock" >&2
		return 1
	}
	key=$(sha256sum "$lock" | cut -c1-16)-$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || return 1
	dir=${HX_CACHE:-/var/cache/hxstate}/python-venv-$key
	mkdir -p "$(dirname "$dir")" || return 1
	(
		flock 9
		[ -f "$dir/.hxstate-complete" ] && [ -x "$dir/bin/python" ] && exit 0
		rm -rf "$dir"
		"$py" -m venv "$dir" &&
			"$dir/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
				--require-hashes -r "$lock" &&
			"$dir/bin/python" -c 'import langgraph.checkpoint.conformance, langgraph.checkpoint.postgres, psycopg, pytest' &&
			date -u +%FT%TZ >"$dir/.hxstate-complete"
	) 9>"$dir.lock" || {
		echo "hx_python_venv: could not build the venv for $lock in $dir" >&2
		rm -rf "$dir"
		return 1
	}
	export HX_VENV=$dir/bin
}
