-- The Durable Streams endpoint's own tables (hxstate-gateway, lib/durable/).
--
-- Run once per database, by a role that may create a schema (the owner of
-- the database, say), before a gateway with the durable option starts:
--
--   psql -v schema=hx_durable -f gateway/sql/durable.sql
--
-- or setupDurable(pg, {schema}) from the gateway's package, which runs
-- this file.  It is idempotent: running it again changes nothing.  Then
-- grant the gateway's role what it needs (setupDurable's grantTo does it):
--
--   GRANT USAGE ON SCHEMA hx_durable TO gateway;
--   GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA hx_durable TO gateway;
--
-- stream     one row per stream the endpoint keeps state of: every byte
--            stream (created with PUT), and every log stream ("@<name>")
--            that was created or appended to through the endpoint (for its
--            Stream-Seq and its producers; its events are in hxstate's
--            log, hx_event, written with hx_stream_send)
-- chunk      the messages of byte streams: one row per message of a JSON
--            stream, one per append of any other content type; seq 1, 2, ...
-- producer   the idempotent producers of each stream: the last (epoch,
--            seq) accepted, written in the transaction of the append
--
-- Names are compared byte by byte (COLLATE "C"), as hx_event's streams are.
\if :{?schema}
\else
\set schema hx_durable
\endif
CREATE SCHEMA IF NOT EXISTS :"schema";

CREATE TABLE IF NOT EXISTS :"schema".stream (
    name         text COLLATE "C" PRIMARY KEY
                 CONSTRAINT stream_name_check CHECK (octet_length(name) BETWEEN 1 AND 1024),
    kind         text NOT NULL CONSTRAINT stream_kind_check CHECK (kind IN ('bytes', 'log')),
    content_type text NOT NULL,
    tail         bigint NOT NULL DEFAULT 0 CONSTRAINT stream_tail_check CHECK (tail >= 0),
    bytes        bigint NOT NULL DEFAULT 0 CONSTRAINT stream_bytes_check CHECK (bytes >= 0),
    closed       boolean NOT NULL DEFAULT false,
    closed_by    text,
    writer_seq   text COLLATE "C",
    ttl          bigint CONSTRAINT stream_ttl_check CHECK (ttl >= 0),
    expires_at   text,
    expires      timestamptz,
    touched_at   timestamptz NOT NULL DEFAULT pg_catalog.now(),
    forked_from  text COLLATE "C",
    fork_offset  bigint,
    fork_sub     bigint NOT NULL DEFAULT 0,
    deleted      boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT pg_catalog.now()
);

CREATE INDEX IF NOT EXISTS stream_forked_from ON :"schema".stream (forked_from) WHERE forked_from IS NOT NULL;

CREATE TABLE IF NOT EXISTS :"schema".chunk (
    stream text COLLATE "C" NOT NULL REFERENCES :"schema".stream (name) ON DELETE CASCADE,
    seq    bigint NOT NULL CONSTRAINT chunk_seq_check CHECK (seq > 0),
    data   bytea NOT NULL,
    PRIMARY KEY (stream, seq)
);

CREATE TABLE IF NOT EXISTS :"schema".producer (
    stream     text COLLATE "C" NOT NULL REFERENCES :"schema".stream (name) ON DELETE CASCADE,
    producer   text COLLATE "C" NOT NULL,
    epoch      bigint NOT NULL CONSTRAINT producer_epoch_check CHECK (epoch >= 0),
    seq        bigint NOT NULL CONSTRAINT producer_seq_check CHECK (seq >= 0),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (stream, producer)
);

COMMENT ON TABLE :"schema".stream IS 'hxstate-gateway Durable Streams: the streams the endpoint keeps state of';
COMMENT ON TABLE :"schema".chunk IS 'hxstate-gateway Durable Streams: the messages of byte streams, by stream and seq';
COMMENT ON TABLE :"schema".producer IS 'hxstate-gateway Durable Streams: each idempotent producer''s last accepted (epoch, seq), per stream';
