# test/sqlsmith/errors.awk: the errors SQLsmith's queries raised, from the
# server log of a cluster run with log_error_verbosity = verbose (each
# ERROR line carries its SQLSTATE, and a LOCATION line follows it) and the
# log_line_prefix of test/lib/cluster.sh ('%m [%p] %q%a ').
#
#   awk -v app=sqlsmith::dut -v hxfuncs="$funcs" -v hxfiles="$files" \
#       -v internal=internal.txt -f test/sqlsmith/errors.awk server.log
#
# hxfuncs and hxfiles are space-separated: the functions defined in
# hxstate's sources and those sources' file names.  An error was raised by
# hxstate's code when its LOCATION names a function of hxfuncs in a file of
# hxfiles.  Prints "name count" lines:
#   errors N                  errors of the application app
#   state:<SQLSTATE> N        of them, by SQLSTATE
#   hxstate:<SQLSTATE> N      raised by hxstate's code, by SQLSTATE
#   hxstate_internal N        internal errors (class XX) raised by hxstate's code
#   jsonb_internal N          internal errors raised by PostgreSQL's jsonb code
#                             (jsonb*.c), which reads what hxstate writes
# and appends every internal error (class XX) and system error (class 58),
# whole (message, detail, context, location), to the file internal.
BEGIN {
	n = split(hxfuncs, a, " ")
	for (i = 1; i <= n; i++)
		isfunc[a[i]] = 1
	n = split(hxfiles, a, " ")
	for (i = 1; i <= n; i++)
		isfile[a[i]] = 1
	level = ""
}

# an entry ends where the next line with a prefix begins
function flush(    fname, file, loc) {
	if (level == "ERROR" && entry_app == app) {
		errors++
		state[sqlstate]++
		loc = location
		fname = loc
		sub(/,.*$/, "", fname)
		file = loc
		sub(/^.*, /, "", file)
		sub(/:[0-9]+$/, "", file)
		mine = (fname in isfunc) && (file in isfile)
		if (mine)
			hx[sqlstate]++
		if (sqlstate ~ /^(XX|58)/) {
			if (mine)
				hx_internal++
			else if (file ~ /^jsonb/ && sqlstate ~ /^XX/)
				jsonb_internal++
			print "---- " (mine ? "raised by hxstate's code" : "raised by PostgreSQL") >>internal
			print text >>internal
		}
	}
	level = ""
	text = ""
	location = ""
}

/^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9:.]+ [A-Z]+ \[[0-9]+\] / {
	if (match($0, / (ERROR|FATAL|PANIC|WARNING|LOG|LOCATION|DETAIL|HINT|CONTEXT|STATEMENT|QUERY):  /)) {
		field = substr($0, RSTART + 1, RLENGTH - 4)
		body = substr($0, RSTART + RLENGTH)
		if (field ~ /^(ERROR|FATAL|PANIC|WARNING|LOG)$/) {
			flush()
			level = field
			entry_app = substr($0, 1, RSTART - 1)
			sub(/^[^]]*\] /, "", entry_app)
			sqlstate = substr(body, 1, 5)
			text = field ":  " body
		} else {
			if (field == "LOCATION")
				location = body
			text = text "\n" field ":  " body
		}
		next
	}
}

# a line without a prefix continues the entry's last field
{
	if (level != "")
		text = text "\n" $0
}

END {
	flush()
	printf "errors %d\n", errors
	for (s in state)
		printf "state:%s %d\n", s, state[s]
	for (s in hx)
		printf "hxstate:%s %d\n", s, hx[s]
	printf "hxstate_internal %d\n", hx_internal
	printf "jsonb_internal %d\n", jsonb_internal
}
