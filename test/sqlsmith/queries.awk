# test/sqlsmith/queries.awk: counts what SQLsmith generated, from its
# --dump-all-queries output (each query followed by ";" and a newline),
# without keeping the queries (an hour makes gigabytes of them).
#
#   sqlsmith --dump-all-queries ... | awk -f test/sqlsmith/queries.awk
#
# Prints "name count" lines:
#   queries N            queries generated
#   hx_queries N         queries that call one of hxstate's functions
#   fn:<function> N      queries that call that function (a query calling
#                        two counts for both)
#   dml:<stmt>:<table> N statements that write a table (insert, upsert,
#                        update, delete, merge); those on sessions, tickets
#                        and deploys fire hxstate's guard and stream triggers
#   reads:<relation> N   queries that name hx_event or one of the views
#                        smith_* (setup.sql), which call hxstate's functions
BEGIN {
	RS = ";\n"
}

{
	queries++
	q = $0
	seen_any = 0
	delete seen
	rest = q
	while (match(rest, /hx_[a-z_]+\(/)) {
		name = substr(rest, RSTART, RLENGTH - 1)
		if (!(name in seen)) {
			seen[name] = 1
			fn[name]++
			seen_any = 1
		}
		rest = substr(rest, RSTART + RLENGTH)
	}
	if (seen_any)
		hx_queries++

	# the statement's first words name what it writes
	head = q
	sub(/^[ \t\n]+/, "", head)
	if (match(head, /^(insert into|update|delete from|MERGE INTO) public\.[a-z_]+/)) {
		stmt = substr(head, 1, RLENGTH)
		table = stmt
		sub(/^.* public\./, "", table)
		kind = tolower(stmt)
		sub(/ .*$/, "", kind)
		if (kind == "insert" && q ~ /on conflict/)
			kind = "upsert"
		dml[kind ":" table]++
	}
	rest = q
	delete seen
	while (match(rest, /public\.(hx_event|smith_[a-z]+)[ \n]/)) {
		name = substr(rest, RSTART + 7, RLENGTH - 8)
		if (!(name in seen)) {
			seen[name] = 1
			reads[name]++
		}
		rest = substr(rest, RSTART + RLENGTH)
	}
}

END {
	printf "queries %d\n", queries
	printf "hx_queries %d\n", hx_queries
	for (k in fn)
		printf "fn:%s %d\n", k, fn[k]
	for (k in dml)
		printf "dml:%s %d\n", k, dml[k]
	for (k in reads)
		printf "reads:%s %d\n", k, reads[k]
}
