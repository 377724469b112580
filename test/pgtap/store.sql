--
-- test/pgtap/store.sql: hxdoc stored in pieces gives what jsonb gives.
--
-- Two tables get the same writes: one keeps its state as jsonb, the other
-- as hxdoc with hx_store, with a threshold and a segment size small enough
-- (256 and 1024 bytes) that the generated documents are cut into many
-- nodes and segments: arrays and objects of large members, large strings,
-- nested large values, a root that is a node itself.  The writes are
-- chains of mutations (changed leaves, members added and removed, arrays
-- grown, shrunk, reversed, cut at the front, an element replaced), appends
-- to the large arrays, whole documents replaced, and documents that shrink
-- below the threshold and grow past it again.  (Rolled-back writes are in
-- test/sql/store.sql.)
-- After every write the hxdoc value reads as the jsonb one; an AFTER
-- trigger reads OLD and NEW as the jsonb table's; the two streams carry
-- the same events; and the segments a write replaced are gone after the
-- next one.
--
\ir include/preamble.sql

BEGIN;
SELECT plan(9);

\ir include/gen.sql

SELECT setseed(0.20261127);

-- a large document: a generated one, with large members of every kind
CREATE FUNCTION pg_temp.big_doc() RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v jsonb := pg_temp.gen_doc();
BEGIN
  IF jsonb_typeof(v) <> 'object' THEN
    v := jsonb_build_object('root', v);
  END IF;
  v := v || jsonb_build_object('messages',
    (SELECT jsonb_agg(pg_temp.gen_value(2)) FROM generate_series(0, 10 + pg_temp.rint(120))));
  IF random() < 0.6 THEN
    v := v || jsonb_build_object('files',
      (SELECT jsonb_object_agg('f' || g, pg_temp.gen_value(2)) FROM generate_series(0, pg_temp.rint(90)) g));
  END IF;
  IF random() < 0.5 THEN
    v := v || jsonb_build_object('log', repeat(md5(random()::text), 10 + pg_temp.rint(40)));
  END IF;
  IF random() < 0.3 THEN
    -- large values inside large values
    v := v || jsonb_build_object('runs',
      (SELECT jsonb_agg(jsonb_build_object('id', g, 'steps',
          (SELECT jsonb_agg(pg_temp.gen_value(2)) FROM generate_series(0, 20 + pg_temp.rint(40)))))
         FROM generate_series(0, pg_temp.rint(6)) g));
  END IF;
  IF random() < 0.15 THEN
    -- a root of many small members
    v := v || (SELECT jsonb_object_agg('k' || g, g) FROM generate_series(0, 200) g);
  END IF;
  RETURN v;
END $$;

-- the next version of a document
CREATE FUNCTION pg_temp.next_doc(v jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF jsonb_typeof(v) <> 'object' OR jsonb_typeof(v -> 'messages') IS DISTINCT FROM 'array' THEN
    RETURN CASE WHEN random() < 0.5 THEN pg_temp.mutate(v, 0.3) ELSE pg_temp.big_doc() END;
  END IF;
  CASE pg_temp.rint(12)
    WHEN 0, 1, 2 THEN
      RETURN pg_temp.mutate(v, 0.05);
    WHEN 3 THEN
      RETURN pg_temp.mutate(v, 0.3);
    WHEN 4, 5, 6 THEN
      -- an append to the messages, as a tool's writes
      RETURN hx_merge(v, jsonb_build_array(jsonb_build_object('op', 'append', 'path', '/messages',
        'items', (SELECT jsonb_agg(pg_temp.gen_value(2)) FROM generate_series(0, pg_temp.rint(3))))));
    WHEN 7 THEN
      RETURN hx_merge(v, jsonb_build_array(
        CASE WHEN coalesce(jsonb_typeof(v -> 'counter'), 'number') = 'number'
             THEN jsonb_build_object('op', 'increment', 'path', '/counter', 'by', 1)
             ELSE jsonb_build_object('op', 'delete', 'path', '/counter') END,
        jsonb_build_object('op', 'replace', 'path', '/phase', 'value', pg_temp.gen_scalar())));
    WHEN 8 THEN
      RETURN v || jsonb_build_object('log', repeat(md5(random()::text), pg_temp.rint(50)));
    WHEN 9 THEN
      RETURN CASE WHEN random() < 0.5 THEN pg_temp.gen_doc() ELSE pg_temp.big_doc() END;
    WHEN 10 THEN
      RETURN v - 'files' - 'runs';
    ELSE
      RETURN jsonb_set(v, '{messages}', pg_temp.slice(v -> 'messages', pg_temp.rint(5),
                                                       jsonb_array_length(v -> 'messages')));
  END CASE;
END $$;

CREATE TABLE pg_temp.tj (k int PRIMARY KEY, state jsonb NOT NULL);
CREATE TABLE pg_temp.td (k int PRIMARY KEY, state hxdoc NOT NULL);
CREATE TRIGGER td_store BEFORE INSERT OR UPDATE OR DELETE ON pg_temp.td
  FOR EACH ROW EXECUTE FUNCTION hx_store('state', 'threshold=256', 'segment=1024');
CREATE TRIGGER tj_stream AFTER INSERT OR UPDATE OR DELETE ON pg_temp.tj
  FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'k', 'stream=tj');
CREATE TRIGGER td_stream AFTER INSERT OR UPDATE OR DELETE ON pg_temp.td
  FOR EACH ROW EXECUTE FUNCTION hx_stream('state', 'k', 'stream=td');

-- what an AFTER trigger reads of OLD and NEW, in both tables
CREATE TABLE pg_temp.seen (tbl text, k int, step int, old jsonb, new jsonb);
CREATE FUNCTION pg_temp.see() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pg_temp.seen VALUES (TG_TABLE_NAME, NEW.k, (SELECT count(*) FROM pg_temp.seen
    WHERE tbl = TG_TABLE_NAME AND k = NEW.k), OLD.state::jsonb, NEW.state::jsonb);
  RETURN NULL;
END $$;
CREATE TRIGGER tj_see AFTER UPDATE ON pg_temp.tj FOR EACH ROW EXECUTE FUNCTION pg_temp.see();
CREATE TRIGGER td_see AFTER UPDATE ON pg_temp.td FOR EACH ROW EXECUTE FUNCTION pg_temp.see();

CREATE TABLE pg_temp.result (k int, step int, failure text, chunked bool, segments int);

DO $$
DECLARE
  v jsonb;
  w jsonb;
  got jsonb;
  info record;
BEGIN
  FOR n IN 1 .. 40 LOOP
    v := pg_temp.big_doc();
    INSERT INTO pg_temp.tj VALUES (n, v);
    INSERT INTO pg_temp.td VALUES (n, v);
    FOR step IN 1 .. 12 LOOP
      w := pg_temp.next_doc(v);
      UPDATE pg_temp.tj SET state = w WHERE tj.k = n;
      -- the new value as a jsonb value, or through the implicit cast
      UPDATE pg_temp.td SET state = CASE WHEN step % 2 = 0 THEN w ELSE hx_patch(state, hx_diff(state, w)) END
       WHERE td.k = n;
      v := w;
      SELECT state::jsonb INTO got FROM pg_temp.td WHERE td.k = n;
      SELECT * INTO info FROM pg_temp.td, hx_doc_info(state) WHERE td.k = n;
      INSERT INTO pg_temp.result VALUES (n, step,
        CASE WHEN got IS DISTINCT FROM v THEN format('stored %s, read %s', v, got) END,
        info.format = 'chunked', info.segments);
    END LOOP;
  END LOOP;
END $$;

SELECT pg_temp.holds('every hxdoc value reads as the jsonb value written (480 writes of 40 documents)',
  (SELECT format('document %s, write %s: %s', k, step, failure)
     FROM pg_temp.result WHERE failure IS NOT NULL ORDER BY k, step LIMIT 1));

SELECT pg_temp.holds('the documents were stored in pieces, in many segments, and in line',
  (SELECT CASE WHEN count(*) FILTER (WHERE chunked) < 200 THEN format('only %s of %s in pieces', count(*) FILTER (WHERE chunked), count(*))
               WHEN count(*) FILTER (WHERE NOT chunked) < 5 THEN format('only %s in line', count(*) FILTER (WHERE NOT chunked))
               WHEN max(segments) < 20 THEN format('at most %s segments', max(segments)) END
     FROM pg_temp.result));

SELECT pg_temp.holds('an AFTER trigger reads OLD and NEW of an hxdoc column as of a jsonb one',
  (SELECT format('document %s, write %s', j.k, j.step)
     FROM pg_temp.seen j FULL JOIN pg_temp.seen d
       ON d.tbl = 'td' AND j.k = d.k AND j.step = d.step
    WHERE (j.tbl = 'tj' OR j.tbl IS NULL) AND (d.tbl = 'td' OR d.tbl IS NULL)
      AND (j.old IS DISTINCT FROM d.old OR j.new IS DISTINCT FROM d.new)
    ORDER BY 1 LIMIT 1));

SELECT pg_temp.holds('the two streams carry the same events',
  (SELECT format('stream %s, seq %s: %s against %s', j.stream, coalesce(j.seq, d.seq), j.event, d.event)
     FROM (SELECT split_part(stream, ':', 2) AS k, stream, seq, event - 'metadata' - 'timestamp' AS event
             FROM hx_event WHERE stream LIKE 'tj:%') j
     FULL JOIN (SELECT split_part(stream, ':', 2) AS k, seq, event - 'metadata' - 'timestamp' AS event
                  FROM hx_event WHERE stream LIKE 'td:%') d ON j.k = d.k AND j.seq = d.seq
    WHERE j.event IS DISTINCT FROM d.event ORDER BY 1 LIMIT 1));

SELECT pg_temp.holds('a stream of an hxdoc column replays to its state at every seq',
  (SELECT format('%s at seq %s', stream, seq)
     FROM (SELECT stream, max(seq) AS seq FROM hx_event WHERE stream LIKE 'td:%' GROUP BY stream) h
     JOIN pg_temp.td ON 'td:' || td.k = h.stream
    WHERE hx_stream_state_at(h.stream, h.seq) IS DISTINCT FROM td.state::jsonb
    ORDER BY 1 LIMIT 1));

SELECT pg_temp.holds('after a write, only its own generation''s replaced segments are kept',
  (SELECT format('document %s keeps %s segments that %s replaced', d.doc, count(*), c.gen)
     FROM pg_temp.td t, hx_doc_info(t.state) d JOIN hx_chunk c ON c.doc = d.doc
    WHERE EXISTS (SELECT 1 FROM hx_chunk x WHERE x.doc = c.doc AND x.node = c.node AND x.seg = c.seg AND x.gen > c.gen
                    AND x.gen < d.gen)
    GROUP BY d.doc, c.gen ORDER BY 1 LIMIT 1));

SELECT pg_temp.holds('every document of the table is one its rows hold, or dropped',
  (SELECT format('document %s', d.doc)
     FROM hx_doc d
    WHERE NOT d.dropped AND NOT EXISTS (SELECT 1 FROM pg_temp.td, hx_doc_info(state) i WHERE i.doc = d.doc)
    ORDER BY 1 LIMIT 1));

DELETE FROM pg_temp.td WHERE k % 2 = 0;
DELETE FROM pg_temp.tj WHERE k % 2 = 0;
UPDATE pg_temp.td SET state = '{"small": true}' WHERE k % 3 = 0;
UPDATE pg_temp.tj SET state = '{"small": true}' WHERE k % 3 = 0;
SELECT is(hx_store_gc('pg_temp.td'::regclass) > 0, true,
  'hx_store_gc deletes the documents of deleted rows and of values put back in line');
SELECT pg_temp.holds('and leaves the documents the rows hold, whole',
  (SELECT CASE WHEN count(*) <> (SELECT count(*) FROM pg_temp.tj) THEN format('%s rows, not %s', count(*), (SELECT count(*) FROM pg_temp.tj))
               WHEN count(*) FILTER (WHERE td.state::jsonb IS DISTINCT FROM tj.state) > 0 THEN 'a row differs'
               WHEN (SELECT count(*) FROM hx_doc) = 0 THEN 'no documents left' END
     FROM pg_temp.td JOIN pg_temp.tj USING (k)));

SELECT * FROM finish();
ROLLBACK;
