--
-- decode: the output plugin "hxstate" (src/decode.c), through the SQL
-- interface of logical decoding.  One message per transaction that
-- inserted events into the log ('C', or 'P' parts and a last 'C'), each
-- event its stream, seq, the length of its JSON text and the text (unless
-- the transaction's texts passed max_tx_bytes); nothing for the others.
--

-- The messages, read back: one row per event (or one per message without
-- events).  Integers are big-endian.
CREATE FUNCTION decode_u32(b bytea, o int) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
	SELECT (get_byte(b, o)::bigint << 24) | (get_byte(b, o + 1) << 16) | (get_byte(b, o + 2) << 8) | get_byte(b, o + 3)
$$;
CREATE FUNCTION decode_i64(b bytea, o int) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
	SELECT ('x' || encode(substring(b FROM o + 1 FOR 8), 'hex'))::bit(64)::bigint
$$;
CREATE FUNCTION decode_messages(msg bytea, lsn pg_lsn)
RETURNS TABLE (kind text, commit_ok boolean, n bigint, stream text, seq bigint, len bigint, has_text boolean, event jsonb)
LANGUAGE plpgsql AS $$
DECLARE
	o int := 1;
	k int;
	slen bigint;
BEGIN
	kind := chr(get_byte(msg, 0));
	commit_ok := NULL;
	IF kind = 'C' THEN
		-- the end LSN is past the commit record; the commit time is recent
		commit_ok := '0/0'::pg_lsn + decode_i64(msg, 1) >= lsn
			AND abs(extract(epoch FROM now()) - (decode_i64(msg, 9) / 1e6 + 946684800)) < 3600;
		o := 17;
	END IF;
	n := decode_u32(msg, o);
	o := o + 4;
	IF n = 0 THEN
		RETURN NEXT;
	END IF;
	FOR k IN 1 .. n LOOP
		slen := decode_u32(msg, o);
		stream := convert_from(substring(msg FROM o + 5 FOR slen::int), 'UTF8');
		o := o + 4 + slen::int;
		seq := decode_i64(msg, o);
		len := decode_u32(msg, o + 8);
		has_text := get_byte(msg, o + 12) = 1;
		o := o + 13;
		event := NULL;
		IF has_text THEN
			event := convert_from(substring(msg FROM o + 1 FOR len::int), 'UTF8')::jsonb;
			o := o + len::int;
		END IF;
		RETURN NEXT;
	END LOOP;
	IF o <> length(msg) THEN
		RAISE EXCEPTION 'message of % bytes, % read', length(msg), o;
	END IF;
END
$$;
CREATE FUNCTION decode_changes(opts text[] DEFAULT ARRAY['proto_version', '1'])
RETURNS TABLE (kind text, commit_ok boolean, n bigint, stream text, seq bigint, len bigint, has_text boolean, event jsonb)
LANGUAGE sql AS $$
	SELECT m.* FROM pg_logical_slot_get_binary_changes('hx_decode', NULL, NULL, VARIADIC opts) c,
	       LATERAL decode_messages(c.data, c.lsn) m
$$;

-- a library is an output plugin only where the server's
-- output_plugin_libraries names it (since 15.20 and 18.6; the default is
-- pgoutput and test_decoding): the test clusters name hxstate
-- (test/lib/cluster.sh)
SELECT coalesce(current_setting('output_plugin_libraries', true), 'hxstate') ~ '\mhxstate\M' AS allowed;
SELECT 'init' FROM pg_create_logical_replication_slot('hx_decode', 'hxstate');

-- a streamed table: its inserts and merges are logged
CREATE TABLE decode_t (k text PRIMARY KEY, state jsonb NOT NULL DEFAULT '{}');
CREATE TRIGGER s AFTER INSERT OR UPDATE OR DELETE ON decode_t
	FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'k');
-- and a table that is not the log, whatever its name and columns
CREATE SCHEMA decode_other;
CREATE TABLE decode_other.hx_event (stream text, seq bigint, event jsonb);
CREATE TABLE decode_other.hx_event_1 (stream text, seq bigint, event jsonb);
CREATE TABLE hx_event_9x (stream text, seq bigint, event jsonb);

INSERT INTO decode_t VALUES ('a', '{"n": 1}');
UPDATE decode_t SET state = hx_merge(state, '{"n": 2, "l": ["x"]}') WHERE k = 'a';
INSERT INTO decode_other.hx_event VALUES ('fake', 1, '{}');
INSERT INTO decode_other.hx_event_1 VALUES ('fake', 1, '{}');
INSERT INTO hx_event_9x VALUES ('fake', 1, '{}');
BEGIN;
UPDATE decode_t SET state = hx_merge(state, '{"n": 3}') WHERE k = 'a';
ROLLBACK;
-- two events in one transaction: one message
BEGIN;
INSERT INTO decode_t VALUES ('b', '{"s": "é \u2603"}');
SELECT hx_stream_send('@decode', '{"type": "CUSTOM", "name": "sent", "value": [1, 2.50, null]}');
COMMIT;

-- every event of those transactions, as the log has it (the text as jsonb's
-- output function writes it: the same bytes), and nothing else
SELECT d.kind, d.commit_ok, d.n, d.stream, d.seq, d.has_text,
       d.len = octet_length(e.event::text) AS len_ok,
       d.event::text = e.event::text AS text_ok
  FROM decode_changes() d
  LEFT JOIN hx_event e ON e.stream = d.stream AND e.seq = d.seq;

-- nothing committed since: nothing
SELECT count(*) FROM decode_changes();

-- max_tx_bytes: the texts of a transaction are sent while their sum stays
-- within that many bytes; the others go without (their length still given)
BEGIN;
SELECT hx_stream_send('@decode-big', jsonb_build_object('type', 'CUSTOM', 'name', 'one', 'value', repeat('x', 40)));
SELECT hx_stream_send('@decode-big', jsonb_build_object('type', 'CUSTOM', 'name', 'two', 'value', repeat('y', 40)));
SELECT hx_stream_send('@decode-big', '{"type": "CUSTOM", "name": "3"}');
COMMIT;
SELECT d.kind, d.n, d.stream, d.seq, d.len, d.has_text, d.len = octet_length(e.event::text) AS len_ok, d.event IS NULL AS no_text
  FROM decode_changes(ARRAY['proto_version', '1', 'max_tx_bytes', '300']) d
  LEFT JOIN hx_event e ON e.stream = d.stream AND e.seq = d.seq
 ORDER BY d.seq;

-- a transaction of more than a megabyte of events goes as parts: every
-- event once, in order, the last message the commit
BEGIN;
SELECT count(hx_stream_send('@decode-parts', jsonb_build_object('type', 'CUSTOM', 'name', 'part', 'i', i, 'pad', repeat('z', 3000))))
  FROM generate_series(1, 500) i;
COMMIT;
WITH d AS (SELECT row_number() OVER () AS r, * FROM decode_changes())
SELECT count(*) AS events,
       count(DISTINCT seq) AS seqs,
       bool_and(seq = r) AS in_order,
       count(*) FILTER (WHERE kind = 'P') > 0 AS has_parts,
       (array_agg(kind ORDER BY r DESC))[1] AS last_kind,
       bool_and(has_text AND (event->>'i')::bigint = seq) AS texts_ok
  FROM d;

-- the options: proto_version is required and must be 1; max_tx_bytes is a
-- number of bytes; nothing else is an option
SELECT count(*) FROM decode_changes(ARRAY[]::text[]);
SELECT count(*) FROM decode_changes(ARRAY['proto_version', '2']);
SELECT count(*) FROM decode_changes(ARRAY['proto_version', 'one']);
SELECT count(*) FROM decode_changes(ARRAY['proto_version', '1', 'max_tx_bytes', '-1']);
SELECT count(*) FROM decode_changes(ARRAY['proto_version', '1', 'max_tx_bytes', '12abc']);
SELECT count(*) FROM decode_changes(ARRAY['proto_version', '1', 'max_tx_bytes', '99999999999999999999']);
SELECT count(*) FROM decode_changes(ARRAY['proto_version', '1', 'publication_names', 'p']);
SELECT count(*) FROM decode_changes(ARRAY['proto_version', '1', 'max_tx_bytes']);
-- a text interface caller is refused: the output is binary
SELECT count(*) FROM pg_logical_slot_get_changes('hx_decode', NULL, NULL, 'proto_version', '1');

-- after those errors the slot decodes on, from where it was
INSERT INTO decode_t VALUES ('c', '{}');
SELECT kind, n, stream, seq FROM decode_changes();

SELECT pg_drop_replication_slot('hx_decode');

-- as every role: decoding is for roles that may replicate, as with
-- pgoutput (which decodes the log through the publication just the same);
-- a role without REPLICATION may not make the slot
CREATE ROLE decode_plain;
CREATE ROLE decode_repl REPLICATION;
SET ROLE decode_plain;
DO $$
BEGIN
	PERFORM pg_create_logical_replication_slot('hx_decode_role', 'hxstate');
	RAISE NOTICE 'made';
EXCEPTION WHEN insufficient_privilege THEN
	RAISE NOTICE 'refused: %', SQLSTATE;  -- its message differs from 16 on
END
$$;
RESET ROLE;
SET ROLE decode_repl;
SELECT 'made' FROM pg_create_logical_replication_slot('hx_decode_role', 'hxstate');
RESET ROLE;
INSERT INTO decode_t VALUES ('d', '{"by": "role"}');
SET ROLE decode_repl;
SELECT m.kind, m.n, m.stream, m.seq, m.event->'snapshot' AS snapshot
  FROM pg_logical_slot_get_binary_changes('hx_decode_role', NULL, NULL, 'proto_version', '1') c,
       LATERAL decode_messages(c.data, c.lsn) m;
SELECT pg_drop_replication_slot('hx_decode_role');
RESET ROLE;
DROP ROLE decode_plain, decode_repl;
DROP TABLE decode_t, decode_other.hx_event, decode_other.hx_event_1, hx_event_9x;
DROP SCHEMA decode_other;
DROP FUNCTION decode_changes(text[]), decode_messages(bytea, pg_lsn), decode_u32(bytea, int), decode_i64(bytea, int);
