-- test/upgrade/store-before.sql: after test/lib/hxdoc-fixture.sql, in the
-- old cluster (test/upgrade/run): what store-after.sql compares with once
-- the cluster is upgraded; the number hx_doc_seq is at, and the document
-- of each session's state.
\set ON_ERROR_STOP on
CREATE TABLE upgrade_marks AS
SELECT last_value AS doc_seq, (SELECT max(doc) FROM hx_doc) AS max_doc FROM hx_doc_seq;
CREATE TABLE upgrade_docs AS
SELECT s.session_id, i.doc, i.gen FROM sessions s, hx_doc_info(s.state) i WHERE i.format = 'chunked';
