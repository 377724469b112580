--
-- replay: hx_stream_state_at over logs long enough that the op engine
-- rebuilds its tree (compaction) while it replays them, in the middle of
-- a delta
--
-- (err() is defined in setup.sql)
CREATE TABLE replay (k int PRIMARY KEY, st jsonb NOT NULL DEFAULT '{}');
CREATE TRIGGER stream AFTER INSERT OR UPDATE OR DELETE ON replay
	FOR EACH ROW EXECUTE FUNCTION hx_stream('st', 'k', 'payload=none', 'stream=replay');

-- the state after the last event of a row's stream, as the row has it
-- (JSON null once deleted), noted after each write
CREATE TABLE replay_seen (k int, seq bigint, st jsonb, PRIMARY KEY (k, seq));
CREATE FUNCTION replay_note(key int) RETURNS void LANGUAGE sql AS $$
	INSERT INTO replay_seen
	SELECT key, max(e.seq), coalesce((SELECT r.st FROM replay r WHERE r.k = key), 'null')
	  FROM hx_event e WHERE e.stream = 'replay:' || key
$$;

-- With the threshold lowered (a developer setting), 150 changes of a
-- 40 kB state rebuild the tree every few deltas: each delta replaces two
-- 20 kB members and changes small ones around them, so the rebuild comes
-- between two operations of one delta.  The row is deleted and inserted
-- again in between: the replay starts over from the new snapshot.
SET hxstate.compaction_threshold = '64kB';
SHOW hxstate.compaction_threshold;
DO $$
BEGIN
	INSERT INTO replay VALUES (1, '{"list": [], "n": 0}');
	PERFORM replay_note(1);
	FOR i IN 1..150 LOOP
		UPDATE replay
		   SET st = jsonb_set(st || jsonb_build_object(
						'a', repeat(chr(65 + i % 26), 20000) || i,
						'b', i,
						'c', repeat(chr(97 + i % 26), 20000) || i,
						'd' || i % 7, i,
						'o', jsonb_build_object('x', i, 'y' || i % 3, repeat('y', i))),
					  '{list}', (st -> 'list') || to_jsonb(i))
		 WHERE k = 1;
		PERFORM replay_note(1);
		IF i % 10 = 0 THEN
			UPDATE replay SET st = st #- ARRAY['d' || (i + 3) % 7] #- '{list,0}' WHERE k = 1;
			PERFORM replay_note(1);
		END IF;
		IF i = 75 THEN
			DELETE FROM replay WHERE k = 1;
			PERFORM replay_note(1);
			INSERT INTO replay VALUES (1, '{"list": [0], "again": true}');
			PERFORM replay_note(1);
		END IF;
	END LOOP;
END
$$;
-- every state of the stream, rebuilt from the log, is the row's
SELECT count(*) AS states,
	   count(*) FILTER (WHERE hx_stream_state_at('replay:1', seq) IS DISTINCT FROM st) AS differ
  FROM replay_seen WHERE k = 1;
SELECT hx_stream_state_at('replay:1', max(seq)) -> 'b' AS b,
	   hx_stream_state_at('replay:1', max(seq)) -> 'list' -> 0 AS first
  FROM replay_seen WHERE k = 1;
-- the state between the delete and the new row is null
SELECT seq, hx_stream_state_at('replay:1', seq) IS NOT DISTINCT FROM 'null' AS ended
  FROM replay_seen WHERE k = 1 AND st = 'null';
RESET hxstate.compaction_threshold;

-- At the real threshold (64 MB, plus three times the state and the
-- delta being replayed): 90 changes of a 1 MB member.  The last ones are
-- replayed in a rebuilt tree.
INSERT INTO replay VALUES (2, '{}');
DO $$
DECLARE
	big text := repeat('0123456789abcdef', 65536);
BEGIN
	FOR i IN 1..90 LOOP
		UPDATE replay SET st = jsonb_build_object('a', i || big, 'c', i) WHERE k = 2;
	END LOOP;
END
$$;
SELECT hx_stream_state_at('replay:2', 91) = st AS same, hx_stream_state_at('replay:2', 91) -> 'c' AS c
  FROM replay WHERE k = 2;

-- A delta that is not an array is reported, not applied
INSERT INTO hx_event (stream, seq, type, event) VALUES
	('forged:1', 1, 'STATE_SNAPSHOT', '{"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}}'),
	('forged:1', 2, 'STATE_DELTA', '{"type": "STATE_DELTA", "delta": {"op": "remove", "path": "/a"}}'),
	('forged:1', 3, 'STATE_DELTA', '{"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/b"}]}');
SELECT hx_stream_state_at('forged:1', 1);
SELECT err($$SELECT hx_stream_state_at('forged:1', 2)$$);
-- a delta that does not apply says which event it was
UPDATE hx_event SET event = '{"type": "STATE_DELTA", "delta": []}' WHERE stream = 'forged:1' AND seq = 2;
SELECT err($$SELECT hx_stream_state_at('forged:1', 3)$$);
-- an event the log marks as the snapshot (or the end) to start from, but
-- that is neither, is reported too, not replayed as nothing (nor a crash)
INSERT INTO hx_event (stream, seq, type, event) VALUES
	('forged:2', 1, 'STATE_SNAPSHOT', '{"type": "STATE_SNAPSHOT"}'),
	('forged:2', 2, 'STATE_DELTA', '{"type": "STATE_DELTA", "delta": []}'),
	('forged:3', 1, 'CUSTOM', '{"type": "STATE_DELTA", "name": "hx.stream_end"}');
SELECT err($$SELECT hx_stream_state_at('forged:2', 1)$$);
SELECT err($$SELECT hx_stream_state_at('forged:2', 2)$$);
SELECT err($$SELECT hx_stream_state_at('forged:3', 1)$$);

-- The log's aggregates are pg_catalog's, whatever the search_path
CREATE SCHEMA evil;
CREATE FUNCTION evil.bigint_larger(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
	RAISE NOTICE 'evil.max ran';
	RETURN greatest($1, $2);
END
$$;
CREATE AGGREGATE evil.max(bigint) (SFUNC = evil.bigint_larger, STYPE = bigint);
SET search_path = evil, public, pg_catalog;
SELECT hx_stream_state_at('forged:1', 1);
RESET search_path;
DROP SCHEMA evil CASCADE;

DELETE FROM hx_event WHERE stream IN ('forged:1', 'forged:2', 'forged:3', 'replay:1', 'replay:2');
DROP TABLE replay, replay_seen;
DROP FUNCTION replay_note(int);
