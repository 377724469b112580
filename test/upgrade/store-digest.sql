-- test/upgrade/store-digest.sql: what pg_upgrade must carry over unchanged
-- in a cluster with hxdoc tables in use (test/upgrade/run), one line each:
-- the tables' rows with each value as jsonb and how it is stored
-- (hx_doc_info: format, document, generation, nodes, segments), the side
-- tables row by row (hx_doc names each table by its OID), hx_doc_seq, and
-- the log.  (A segment's placeholders are objects whose key is the NUL
-- character: PostgreSQL 15's jsonb output prints that key as "", 18's as
-- "\u0000"; the same bytes, so the digest prints both as "".)
\set ON_ERROR_STOP on
\pset format unaligned
\pset tuples_only on
SELECT 'sessions ' || count(*) || ' ' ||
       md5(string_agg(s.session_id || ' ' || s.state::jsonb::text || ' ' || i::text, E'\n' ORDER BY s.session_id))
  FROM sessions s, hx_doc_info(s.state) i;
SELECT 'notes ' || count(*) || ' ' ||
       md5(string_agg(n.id || ' ' || coalesce(n.a::jsonb::text, '-') || ' ' || coalesce(n.b::jsonb::text, '-') || ' ' ||
                      coalesce((hx_doc_info(n.a))::text, '-') || ' ' || coalesce((hx_doc_info(n.b))::text, '-'), E'\n' ORDER BY n.id))
  FROM notes n;
SELECT 'held ' || count(*) || ' ' || md5(string_agg(h.state::jsonb::text || ' ' || (hx_doc_info(h.state))::text, E'\n'))
  FROM held h;
SELECT 'hx_doc ' || count(*) || ' ' ||
       md5(string_agg(d.doc || ' ' || d.rel || ' ' || d.rel::regclass || ' ' || d.att || ' ' || d.dropped,
                      E'\n' ORDER BY d.doc))
  FROM hx_doc d;
SELECT 'hx_chunk ' || count(*) || ' ' ||
       md5(string_agg(c.doc || ' ' || c.node || ' ' || c.seg || ' ' || c.gen || ' ' || c.n || ' ' || c.len || ' ' ||
                      c.refs || ' ' || replace(c.body::text, '"\u0000": ', '"": '), E'\n' ORDER BY c.doc, c.node, c.seg, c.gen))
  FROM hx_chunk c;
SELECT 'hx_doc_seq ' || last_value || ' ' || is_called FROM hx_doc_seq;
SELECT 'hx_event ' || count(*) || ' ' ||
       md5(string_agg(e.stream || ' ' || e.seq || ' ' || e.event::text, E'\n' ORDER BY e.stream, e.seq))
  FROM hx_event e;
