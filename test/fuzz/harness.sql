-- test/fuzz/harness.sql: the fuzzer's server side, loaded by test/fuzz/fuzz.js
-- into the database it fuzzes.
--
-- hx_fuzz_batch(kinds, a, b, c) runs a batch of inputs in one statement and
-- returns one row per input (per statement, for 'sql' inputs):
--
--   kind 'patch' | 'merge'   hx_patch(a::jsonb, b::jsonb), hx_merge(...)
--   kind 'diff'              hx_diff(a::jsonb, b::jsonb [, c]); when it
--                            succeeds, the round trip hx_patch(a, diff) = b
--                            is checked too
--   kind 'sql'               a is a JSON array of statements, b one flag per
--                            statement ('s' setup: the rest is skipped when
--                            one fails); they run in order, each in a block
--                            of its own, and the whole input is undone at
--                            its end (RAISE of the harness's own 'HXFZ0')
--
-- Every input runs in its own BEGIN ... EXCEPTION block, so that an error
-- aborts that input only.  outcome is:
--   'ok'
--   'input'      jsonb's own input function refused a or b (code: SQLSTATE)
--   'error'      the function or statement raised (code: SQLSTATE)
--   'null'       a STRICT function returned NULL for non-NULL arguments
--   'roundtrip'  hx_patch(a, hx_diff(a, b)) is not b
--   'roundtrip-error'  hx_patch refused hx_diff's own patch (code)
-- ms is the input's (statement's) time, a figure only.
--
-- WHEN OTHERS does not catch query_canceled (57014): a statement timeout
-- ends the whole batch, and the driver then narrows it down to the input.
CREATE FUNCTION hx_fuzz_batch(kinds text[], a text[], b text[], c text[])
RETURNS TABLE (i int, j int, outcome text, code text, message text, ms float8)
LANGUAGE plpgsql AS $fn$
DECLARE
	kind text;
	ta text;
	tb text;
	tc text;
	x jsonb;
	y jsonb;
	r jsonb;
	back jsonb;
	t0 timestamptz;
	stage text;
	stmts jsonb;
	flags text;
BEGIN
	-- unnest, not a[k]: subscripting an array of texts walks it from the
	-- start, which would make a batch quadratic in its size
	FOR i, kind, ta, tb, tc IN
		SELECT u.n, u.kind, u.a, u.b, u.c
		  FROM unnest(kinds, a, b, c) WITH ORDINALITY AS u(kind, a, b, c, n)
	LOOP
		j := 0;
		t0 := clock_timestamp();
		IF kind = 'sql' THEN
			stmts := ta::jsonb;
			flags := tb;
			BEGIN
				FOR s IN 1..jsonb_array_length(stmts) LOOP
					j := s;
					t0 := clock_timestamp();
					BEGIN
						EXECUTE stmts->>(s - 1);
						outcome := 'ok';
						code := NULL;
						message := NULL;
					EXCEPTION WHEN OTHERS THEN
						GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
						outcome := 'error';
						message := left(message, 300);
					END;
					ms := 1000 * extract(epoch FROM clock_timestamp() - t0);
					RETURN NEXT;
					EXIT WHEN outcome <> 'ok' AND substr(flags, s, 1) = 's';
				END LOOP;
				RAISE SQLSTATE 'HXFZ0';
			EXCEPTION WHEN SQLSTATE 'HXFZ0' THEN
				NULL;
			END;
			CONTINUE;
		END IF;

		BEGIN
			stage := 'input';
			x := ta::jsonb;
			y := tb::jsonb;
			stage := 'call';
			IF kind = 'patch' THEN
				r := hx_patch(x, y);
			ELSIF kind = 'merge' THEN
				r := hx_merge(x, y);
			ELSIF tc IS NULL THEN
				r := hx_diff(x, y);
			ELSE
				r := hx_diff(x, y, tc);
			END IF;
			outcome := CASE WHEN r IS NULL THEN 'null' ELSE 'ok' END;
			code := NULL;
			message := NULL;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
			outcome := CASE stage WHEN 'input' THEN 'input' ELSE 'error' END;
			message := left(message, 300);
		END;

		IF kind = 'diff' AND outcome = 'ok' THEN
			BEGIN
				back := hx_patch(x, r);
				IF back IS DISTINCT FROM y THEN
					outcome := 'roundtrip';
					message := left('hx_patch(old, hx_diff(old, new)) = ' || back::text || ', not new', 300);
				END IF;
			EXCEPTION WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
				outcome := 'roundtrip-error';
				message := left(message, 300);
			END;
		END IF;
		ms := 1000 * extract(epoch FROM clock_timestamp() - t0);
		RETURN NEXT;
	END LOOP;
END
$fn$;
