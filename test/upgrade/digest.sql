-- test/upgrade/digest.sql: what must survive pg_upgrade unchanged, one
-- line per table: its row count and an MD5 of its rows in key order (the
-- log with each event's partition, so that no event changes day).
\set ON_ERROR_STOP on
\pset format unaligned
\pset tuples_only on
SELECT 'sessions ' || count(*) || ' ' || md5(string_agg(s::text, E'\n' ORDER BY session_id)) FROM sessions s;
SELECT 'tickets ' || count(*) || ' ' || md5(string_agg(t::text, E'\n' ORDER BY id)) FROM tickets t;
SELECT 'tenant_b.runs ' || count(*) || ' ' || md5(string_agg(r::text, E'\n' ORDER BY id)) FROM tenant_b.runs r;
SELECT 'hx_event ' || count(*) || ' ' ||
       md5(string_agg(e.stream || ' ' || e.seq || ' ' || e.type || ' ' || e.event::text || ' ' ||
                      e.created_at::text || ' ' || e.tableoid::regclass::text, E'\n' ORDER BY e.stream, e.seq))
  FROM hx_event e;
SELECT 'hx_machine ' || count(*) || ' ' || md5(string_agg(m::text, E'\n' ORDER BY machine)) FROM hx_machine m;
SELECT 'hx_transition ' || count(*) || ' ' ||
       md5(string_agg(t::text, E'\n' ORDER BY machine, from_phase, event)) FROM hx_transition t;
SELECT 'hx_step ' || count(*) || ' ' || md5(string_agg(s::text, E'\n' ORDER BY stream, step)) FROM hx_step s;
SELECT 'hx_step_call ' || count(*) || ' ' ||
       md5(string_agg(c::text, E'\n' ORDER BY stream, step, call)) FROM hx_step_call c;
SELECT 'heads ' || count(*) || ' ' || md5(string_agg(stream || '=' || seq, ',' ORDER BY stream))
  FROM (SELECT stream, max(seq) AS seq FROM hx_event GROUP BY stream) h;
