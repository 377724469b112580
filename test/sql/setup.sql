--
-- setup: helpers shared by the regression tests that follow
--

-- err() runs one statement and shows what a client gets back from it:
-- the SQLSTATE, the message, the detail and the hint, the context that
-- hxstate adds (which operation of an op list failed), and the table,
-- column and constraint the error names, when it names them.
CREATE FUNCTION err(stmt text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
	st text; msg text; det text; hnt text; ctx text; tbl text; col text; con text;
BEGIN
	EXECUTE stmt;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT,
		ctx = PG_EXCEPTION_CONTEXT,
		tbl = TABLE_NAME, col = COLUMN_NAME, con = CONSTRAINT_NAME;
	RETURN st || ': ' || msg
		|| coalesce(E'\nDETAIL: ' || nullif(det, ''), '')
		|| coalesce(E'\nHINT: ' || nullif(hnt, ''), '')
		-- the first line of the context, unless it is PL/pgSQL's own
		|| coalesce(E'\nCONTEXT: ' || CASE WHEN split_part(ctx, E'\n', 1) NOT LIKE 'PL/pgSQL function %'
											  AND split_part(ctx, E'\n', 1) NOT LIKE 'SQL statement %'
										 THEN nullif(split_part(ctx, E'\n', 1), '') END, '')
		|| coalesce(E'\nFIELDS: table=' || nullif(tbl, '')
					|| coalesce(', column=' || nullif(col, ''), '')
					|| coalesce(', constraint=' || nullif(con, ''), ''), '');
END
$f$;
