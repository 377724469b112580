'use strict';
// What the Durable Streams endpoint keeps in PostgreSQL, and how it reads
// it.  Two kinds of stream (names.js says which a name is):
//
//   'bytes'  a stream of the endpoint's own tables (sql/durable.sql): any
//            content type, created with PUT, closed, deleted, forked
//   'log'    a log stream of hxstate ("@<name>"): its events in hx_event,
//            appended with hx_stream_send; a row in the endpoint's stream
//            table keeps its Stream-Seq and its producers
//   'table'  a table's stream ("<prefix>:<key>"): read only, from hx_event
//
// Every write is one transaction that first locks the stream's row (FOR
// UPDATE), so the appends of a stream, and the decisions on each
// producer's (epoch, seq), go one at a time, and the producer's new state
// commits with the append it admitted, or not at all.
const { HttpError } = require('../limits');
const { decide, tupleOf } = require('./producer');
const { mediaType, isJson } = require('./headers');
const { jsonMessages } = require('./messages');
const { parseOffset, encodeOffset } = require('./offsets');
const { quoteIdent } = require('../ident');

/** How long producer state may sit unused before a new producer may take its place on a full stream (seconds). */
const PRODUCER_IDLE_S = 7 * 24 * 3600;

/** A PostgreSQL error as the client's HTTP error (or 503 when the database is away), or null when it is the server's. */
function httpErrorOf(err) {
  const code = err && err.code;
  if (typeof code !== 'string') return null;
  if (code.startsWith('22') || code === '23514') return new HttpError(400, `refused by the database: ${err.message}`);
  if (code === '42501') return new HttpError(403, `refused by the database: ${err.message}`);
  if (code === '54000' || code === '54001') return new HttpError(413, `refused by the database: ${err.message}`);
  // the database is away, restarting or full: try again later
  if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || code === '53300' ||
      code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'ENOENT') {
    return new HttpError(503, 'the database is not reachable now: try again', { 'retry-after': '2' });
  }
  return null;
}

class Store {
  /**
   * pool: a pg.Pool; schema: the endpoint's schema; hx: hxstate's schema
   * (quoted); maxStreamBytes, maxProducers: the bounds of a byte stream and
   * of the producers of any stream.
   */
  constructor({ pool, schema, hx, maxStreamBytes, maxProducers }) {
    this.pool = pool;
    this.s = quoteIdent(schema);
    this.hx = hx;
    this.maxStreamBytes = maxStreamBytes;
    this.maxProducers = maxProducers;
    this.live = `(NOT (s.ttl IS NOT NULL AND s.touched_at + s.ttl * interval '1 second' <= pg_catalog.now())
                  AND NOT (s.expires IS NOT NULL AND s.expires <= pg_catalog.now()))`;
  }

  async tx(fn) {
    let c;
    try {
      c = await this.pool.connect();
    } catch (err) {
      throw httpErrorOf(err) || err;
    }
    try {
      await c.query('BEGIN');
      const r = await fn(c);
      await c.query('COMMIT');
      return r;
    } catch (err) {
      await c.query('ROLLBACK').catch(() => {});
      throw httpErrorOf(err) || err;
    } finally {
      c.release();
    }
  }

  async query(text, values) {
    try {
      return await this.pool.query(text, values);
    } catch (err) {
      throw httpErrorOf(err) || err;
    }
  }

  // -- the state of a stream ---------------------------------------------------

  /** A byte stream's row (lock: 'FOR UPDATE', 'FOR SHARE' or ''), with live (not expired) and forks; null if none. */
  async row(c, name, lock = '') {
    const { rows } = await c.query(
      `SELECT s.*, ${this.live} AS live,
              EXISTS (SELECT 1 FROM ${this.s}.stream f WHERE f.forked_from = s.name) AS forks
         FROM ${this.s}.stream s WHERE s.name = $1 ${lock}`, [name]);
    return rows[0] || null;
  }

  /**
   * The row of a byte stream that a request may use: 404 when there is
   * none (an expired one without forks is deleted on the way), 410 when it
   * was deleted with forks left (or expired with forks).
   */
  async usable(c, name, lock) {
    const r = await this.row(c, name, lock);
    if (!r || r.kind !== 'bytes') throw new HttpError(404, 'no such stream');
    if (r.deleted) throw new HttpError(410, 'the stream was deleted (its forks remain)');
    if (!r.live) {
      if (r.forks) throw new HttpError(410, 'the stream has expired (its forks remain)');
      await this.dropExpired(name);
      throw new HttpError(404, 'no such stream (it expired)');
    }
    return r;
  }

  async dropExpired(name) {
    await this.tx(async (c) => {
      const r = await this.row(c, name, 'FOR UPDATE');
      if (r && r.kind === 'bytes' && !r.live && !r.forks) await this.deleteCascade(c, r);
    });
  }

  /** The last seq of each of hxstate's streams named (0 before any event). */
  async heads(names) {
    const { rows } = await this.query(`SELECT stream, seq FROM ${this.hx}.hx_stream_heads($1::text[])`, [names]);
    return new Map(rows.map((r) => [r.stream, Number(r.seq)]));
  }

  /**
   * What HEAD and reads need: {contentType, tail, closed, ttl, expiresAt}
   * of a stream; 404/410 as usable() says.  A read resets a sliding TTL
   * (touch), a HEAD does not.  A table's stream exists once
   * it has an event in the log; a log stream once it has one, or was
   * created through the endpoint.
   */
  async meta(t, { touch = true } = {}) {
    if (t.kind === 'bytes') {
      const r = await this.usable({ query: (text, values) => this.query(text, values) }, t.name, '');
      if (touch && r.ttl !== null) await this.touch(t.name);
      return {
        contentType: r.content_type, tail: Number(r.tail), closed: r.closed,
        ttl: r.ttl === null ? null : Number(r.ttl), expiresAt: r.expires_at,
      };
    }
    const tail = (await this.heads([t.name])).get(t.name) || 0;
    if (tail === 0) {
      const known = t.kind === 'log' && (await this.query(`SELECT 1 FROM ${this.s}.stream WHERE name = $1`, [t.name])).rows.length > 0;
      if (!known) throw new HttpError(404, 'no such stream (no event in the log)');
    }
    return { contentType: 'application/json', tail, closed: false, ttl: null, expiresAt: null };
  }

  /** A read or write resets a stream's sliding TTL (not more often than once a second). */
  async touch(name) {
    await this.query(`UPDATE ${this.s}.stream SET touched_at = pg_catalog.now()
                       WHERE name = $1 AND ttl IS NOT NULL AND touched_at < pg_catalog.now() - interval '1 second'`, [name]);
  }

  // -- reading ---------------------------------------------------------------

  /**
   * The messages after seq `after`, up to seq `tail`, of at most maxBytes
   * (the first message always, however large: an append is at most the
   * gateway's maxBody; an event of the log, at most what the log holds).
   * The log's events are chosen by their stored (perhaps compressed) size,
   * then cut to maxBytes of their text.  [{seq, data}]: data a Buffer for a byte stream,
   * the event's JSON text for hxstate's log.  An hxstate stream whose log
   * no longer holds the event after `after` (the ring dropped its day)
   * is 410, unless start is set (offset -1: from the oldest event held).
   */
  async read(t, after, tail, maxBytes, start = false) {
    if (tail <= after) return [];
    if (t.kind === 'bytes') {
      const { rows } = await this.query(
        `SELECT seq, data FROM (
           SELECT seq, data, sum(octet_length(data)) OVER (ORDER BY seq) - octet_length(data) AS before
             FROM ${this.s}.chunk WHERE stream = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT 10000) c
          WHERE before < $4 ORDER BY seq`, [t.name, after, tail, maxBytes]);
      return rows.map((r) => ({ seq: Number(r.seq), data: r.data }));
    }
    const { rows } = await this.query(
      `SELECT seq, event::text AS data FROM (
         SELECT seq, event, sum(pg_catalog.pg_column_size(event)) OVER (ORDER BY seq) - pg_catalog.pg_column_size(event) AS before
           FROM ${this.hx}.hx_event WHERE stream = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT 1000) e
        WHERE before < $4 ORDER BY seq`, [t.name, after, tail, maxBytes]);
    // (with start, an empty read means the log dropped the whole stream since its tail was read)
    if (rows.length === 0 || (!start && Number(rows[0].seq) !== after + 1)) {
      throw new HttpError(410, `the log no longer holds the events after this offset (its oldest is past seq ${after + 1}): read from offset -1`);
    }
    // the log's sizes are as stored (compressed, perhaps): the text's own bytes decide what goes out
    const out = [];
    let bytes = 0;
    for (const r of rows) {
      const n = Buffer.byteLength(r.data);
      if (out.length > 0 && bytes + n > maxBytes) break;
      out.push({ seq: Number(r.seq), data: r.data });
      bytes += n;
    }
    return out;
  }

  /** The tails and closures of byte streams (for waiting readers): Map(name -> {tail, closed}); a stream gone is absent. */
  async tails(names) {
    const { rows } = await this.query(
      `SELECT name, tail, closed FROM ${this.s}.stream s WHERE name = ANY($1::text[]) AND kind = 'bytes' AND NOT deleted AND ${this.live}`, [names]);
    return new Map(rows.map((r) => [r.name, { tail: Number(r.tail), closed: r.closed }]));
  }

  // -- creating ----------------------------------------------------------------

  /**
   * PUT of a byte stream: {status: 201 or 200, contentType, tail, closed}.
   * o: {contentType, ttl, expiresAt, expires, closed, body, fork: {from (a
   * name), offset (text or null), sub}}.
   */
  async create(t, o) {
    return this.tx(async (c) => {
      let r = await this.row(c, t.name, 'FOR UPDATE');
      if (r && r.kind === 'bytes' && !r.deleted && !r.live && !r.forks) {
        await this.deleteCascade(c, r);
        r = null;
      }
      if (r) {
        if (r.kind !== 'bytes' || r.deleted || !r.live) throw new HttpError(409, 'the stream was deleted, and its forks remain: its name cannot be used again until they are deleted');
        if (this.sameConfig(r, o)) return { status: 200, contentType: r.content_type, tail: Number(r.tail), closed: r.closed };
        throw new HttpError(409, 'the stream exists with another configuration (content type, TTL, expiry, closure or fork)');
      }
      let contentType = o.contentType;
      let ttl = o.ttl;
      let expiresAt = o.expiresAt;
      let expires = o.expires;
      let tail = 0;
      let bytes = 0;
      let forkOffset = null;
      if (o.fork) {
        const src = await this.row(c, o.fork.from, 'FOR SHARE');
        if (!src || src.kind !== 'bytes') throw new HttpError(404, 'the stream to fork does not exist');
        if (src.deleted) throw new HttpError(409, 'the stream to fork was deleted (its forks remain)');
        if (!src.live) throw new HttpError(404, 'the stream to fork has expired');
        if (contentType !== undefined && mediaType(contentType) !== mediaType(src.content_type)) {
          throw new HttpError(409, `a fork has its source's content type (${src.content_type})`);
        }
        if (contentType === undefined) contentType = src.content_type;
        const srcTail = Number(src.tail);
        let off = srcTail;
        if (o.fork.offset !== null) {
          const p = parseOffset(o.fork.offset);
          if (!p || p.start || p.now) throw new HttpError(400, 'Stream-Fork-Offset is not an offset of this server');
          off = p.seq;
        }
        if (off > srcTail) throw new HttpError(400, 'Stream-Fork-Offset is past the end of the stream to fork');
        forkOffset = off;
        await c.query(`INSERT INTO ${this.s}.stream (name, kind, content_type) VALUES ($1, 'bytes', $2)`, [t.name, contentType]);
        await c.query(`INSERT INTO ${this.s}.chunk (stream, seq, data) SELECT $1, seq, data FROM ${this.s}.chunk WHERE stream = $2 AND seq <= $3`,
          [t.name, o.fork.from, off]);
        tail = off;
        if (o.fork.sub > 0) {
          if (isJson(src.content_type)) {
            if (off + o.fork.sub > srcTail) throw new HttpError(400, 'Stream-Fork-Sub-Offset is past the end of the stream to fork');
            await c.query(`INSERT INTO ${this.s}.chunk (stream, seq, data) SELECT $1, seq, data FROM ${this.s}.chunk WHERE stream = $2 AND seq > $3 AND seq <= $4`,
              [t.name, o.fork.from, off, off + o.fork.sub]);
            tail = off + o.fork.sub;
          } else {
            const { rows: [next] } = await c.query(`SELECT octet_length(data) AS n FROM ${this.s}.chunk WHERE stream = $1 AND seq = $2`, [o.fork.from, off + 1]);
            if (!next || Number(next.n) < o.fork.sub) throw new HttpError(400, 'Stream-Fork-Sub-Offset is past the next message of the stream to fork');
            await c.query(`INSERT INTO ${this.s}.chunk (stream, seq, data) SELECT $1, seq, substring(data FROM 1 FOR $4) FROM ${this.s}.chunk WHERE stream = $2 AND seq = $3`,
              [t.name, o.fork.from, off + 1, o.fork.sub]);
            tail = off + 1;
          }
        }
        const { rows: [sum] } = await c.query(`SELECT coalesce(sum(octet_length(data)), 0) AS n FROM ${this.s}.chunk WHERE stream = $1`, [t.name]);
        bytes = Number(sum.n);
        // a fork's expiry: its own if it asks, else its source's
        if (ttl === null && expiresAt === null) {
          ttl = src.ttl === null ? null : Number(src.ttl);
          expiresAt = src.expires_at;
          expires = src.expires;
        }
      } else {
        if (contentType === undefined) contentType = 'application/octet-stream';
        await c.query(`INSERT INTO ${this.s}.stream (name, kind, content_type) VALUES ($1, 'bytes', $2)`, [t.name, contentType]);
      }
      if (o.body.length > 0) {
        const msgs = isJson(contentType) ? jsonMessages(o.body, { create: true }).map((m) => Buffer.from(m)) : [o.body];
        const n = msgs.reduce((a, m) => a + m.length, 0);
        if (bytes + n > this.maxStreamBytes) throw new HttpError(413, `a stream holds at most ${this.maxStreamBytes} bytes`);
        await this.insertChunks(c, t.name, tail, msgs);
        tail += msgs.length;
        bytes += n;
      }
      await c.query(
        `UPDATE ${this.s}.stream SET tail = $2, bytes = $3, closed = $4, ttl = $5, expires_at = $6, expires = $7,
                forked_from = $8, fork_offset = $9, fork_sub = $10 WHERE name = $1`,
        [t.name, tail, bytes, o.closed, ttl, expiresAt, expires, o.fork ? o.fork.from : null, forkOffset, o.fork ? o.fork.sub : 0]);
      return { status: 201, contentType, tail, closed: o.closed };
    });
  }

  sameConfig(r, o) {
    const want = mediaType(o.contentType === undefined ? (o.fork ? r.content_type : 'application/octet-stream') : o.contentType);
    if (want !== mediaType(r.content_type)) return false;
    if (o.closed !== r.closed) return false;
    if ((o.fork ? o.fork.from : null) !== r.forked_from) return false;
    if (o.fork) {
      if (o.fork.offset !== null) {
        const p = parseOffset(o.fork.offset);
        if (!p || p.seq !== Number(r.fork_offset)) return false;
      }
      if (o.fork.sub !== Number(r.fork_sub)) return false;
      // a fork that asked for no expiry inherited its source's
      if (o.ttl === null && o.expiresAt === null) return true;
    }
    return o.ttl === (r.ttl === null ? null : Number(r.ttl)) && o.expiresAt === r.expires_at;
  }

  async insertChunks(c, name, tail, msgs) {
    const seqs = msgs.map((_, i) => tail + 1 + i);
    await c.query(`INSERT INTO ${this.s}.chunk (stream, seq, data) SELECT $1, s, d FROM unnest($2::bigint[], $3::bytea[]) AS u(s, d)`,
      [name, seqs, msgs]);
  }

  /**
   * PUT of a log stream: its row in the endpoint's table (for its
   * Stream-Seq and producers); 201 when neither the row nor an event
   * existed, else 200.  A body's events are appended as by POST.
   */
  async createLog(t, o) {
    return this.tx(async (c) => {
      const { rowCount } = await c.query(
        `INSERT INTO ${this.s}.stream (name, kind, content_type) VALUES ($1, 'log', 'application/json') ON CONFLICT (name) DO NOTHING`, [t.name]);
      const tail = await this.logTail(c, t.name);
      const fresh = rowCount === 1 && tail === 0;
      let last = tail;
      if (fresh && o.body.length > 0) last = await this.sendEvents(c, t.name, jsonMessages(o.body, { create: true }), tail);
      return { status: fresh ? 201 : 200, contentType: 'application/json', tail: last, closed: false };
    });
  }

  async logTail(c, name) {
    const { rows } = await c.query(`SELECT seq FROM ${this.hx}.hx_stream_heads(ARRAY[$1]::text[])`, [name]);
    return rows.length ? Number(rows[0].seq) : 0;
  }

  /** Append events to a log stream with hx_stream_send, in order; the last seq. */
  async sendEvents(c, name, texts, tail) {
    if (texts.length === 0) return tail;
    const { rows } = await c.query(
      `SELECT ${this.hx}.hx_stream_send($1, e.value) AS seq
         FROM jsonb_array_elements($2::jsonb) WITH ORDINALITY AS e(value, i)`, [name, `[${texts.join(',')}]`]);
    return Math.max(...rows.map((r) => Number(r.seq)));
  }

  // -- appending -------------------------------------------------------------

  /**
   * POST: o = {contentType, body, close, producer, streamSeq}.  Returns
   * {status, headers-worthy fields: tail, closed, producer, ...}; throws
   * HttpError for a refusal.
   */
  async append(t, o) {
    return this.tx(async (c) => {
      const p = o.producer;
      // the stream's row, locked, with the producer's state: one statement
      let r = await this.appendRow(c, t.name, p);
      if (t.kind === 'log') {
        if (!r) {
          if ((await this.logTail(c, t.name)) === 0) throw new HttpError(404, 'no such stream (no event in the log): create it with PUT');
          await c.query(`INSERT INTO ${this.s}.stream (name, kind, content_type) VALUES ($1, 'log', 'application/json') ON CONFLICT (name) DO NOTHING`, [t.name]);
          r = await this.appendRow(c, t.name, p);
        }
      } else if (!r || r.kind !== 'bytes' || r.deleted || !r.live) {
        r = await this.usable(c, t.name, 'FOR UPDATE'); // says 404 or 410
      }
      // a log stream's tail is the log's, read only where it is answered without an append
      const tail = t.kind === 'log' ? null : Number(r.tail);
      const tailNow = async () => (tail === null ? this.logTail(c, t.name) : tail);
      // 1. a closed stream
      if (r.closed) {
        if (p && r.closed_by === tupleOf(p)) return { status: 204, tail: await tailNow(), closed: true, producer: p, lastSeq: p.seq };
        if (!p && o.body.length === 0 && o.close) return { status: 204, tail: await tailNow(), closed: true };
        throw new HttpError(409, 'the stream is closed', { 'stream-closed': 'true', 'stream-next-offset': encodeOffset(await tailNow()) });
      }
      // 2. the content type of a body
      if (o.body.length > 0 && mediaType(o.contentType) !== mediaType(r.content_type)) {
        throw new HttpError(409, `the stream's content type is ${r.content_type}`);
      }
      // 3. the producer's (epoch, seq)
      const state = p && r.p_epoch !== null ? { epoch: Number(r.p_epoch), seq: Number(r.p_seq) } : null;
      if (p) {
        const d = decide(state, p.epoch, p.seq);
        if (d.status === 'duplicate') return { status: 204, tail: await tailNow(), closed: false, producer: p, lastSeq: d.lastSeq };
        if (d.status === 'stale') throw new HttpError(403, 'a newer epoch of this producer has written: this one is fenced off', { 'producer-epoch': String(d.currentEpoch) });
        if (d.status === 'badEpochSeq') throw new HttpError(400, 'a new epoch begins at Producer-Seq 0');
        if (d.status === 'gap') {
          throw new HttpError(409, `Producer-Seq ${d.receivedSeq} is not the next (${d.expectedSeq})`,
            { 'producer-expected-seq': String(d.expectedSeq), 'producer-received-seq': String(d.receivedSeq) });
        }
        if (state === null) await this.roomForProducer(c, t.name);
      }
      // 4. the writer's Stream-Seq
      if (o.streamSeq !== null && r.writer_seq !== null && Buffer.compare(Buffer.from(o.streamSeq), Buffer.from(r.writer_seq)) <= 0) {
        throw new HttpError(409, `Stream-Seq ${o.streamSeq} is not after the last one (${r.writer_seq})`);
      }
      // the messages, the producer's state and the stream's row: one statement
      const keep = `keep AS (
             INSERT INTO ${this.s}.producer (stream, producer, epoch, seq) SELECT $1, $3, $4, $5 WHERE $3::text IS NOT NULL
             ON CONFLICT (stream, producer) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq, updated_at = pg_catalog.now())`;
      const pv = p ? [p.id, p.epoch, p.seq] : [null, null, null];
      const rowChange = o.streamSeq !== null || o.close;
      let last;
      if (t.kind === 'log') {
        const texts = o.body.length > 0 ? jsonMessages(o.body) : [];
        const { rows: [w] } = await c.query({
          name: 'hx_durable_append_log',
          text: `WITH sent AS (SELECT ${this.hx}.hx_stream_send($1, e.value) AS seq FROM jsonb_array_elements($2::jsonb) WITH ORDINALITY AS e(value, i)),
                      ${keep},
                      row AS (UPDATE ${this.s}.stream SET writer_seq = coalesce($6, writer_seq) WHERE name = $1 AND $7)
                 SELECT max(seq) AS last FROM sent`,
          values: [t.name, `[${texts.join(',')}]`, ...pv, o.streamSeq, rowChange],
        });
        last = w.last === null ? await tailNow() : Number(w.last);
      } else {
        const msgs = o.body.length === 0 ? [] : isJson(r.content_type) ? jsonMessages(o.body).map((m) => Buffer.from(m)) : [o.body];
        const n = msgs.reduce((a, m) => a + m.length, 0);
        if (Number(r.bytes) + n > this.maxStreamBytes) throw new HttpError(413, `a stream holds at most ${this.maxStreamBytes} bytes`);
        last = tail + msgs.length;
        await c.query({
          name: 'hx_durable_append_bytes',
          text: `WITH sent AS (INSERT INTO ${this.s}.chunk (stream, seq, data) SELECT $1, s, d FROM unnest($8::bigint[], $9::bytea[]) AS u(s, d)),
                      ${keep},
                      row AS (UPDATE ${this.s}.stream SET tail = $10, bytes = bytes + $11, writer_seq = coalesce($6, writer_seq),
                                     closed = closed OR $7, closed_by = CASE WHEN $7 THEN $2 ELSE closed_by END,
                                     touched_at = pg_catalog.now() WHERE name = $1)
                 SELECT 1`,
          values: [t.name, tupleOf(p), ...pv, o.streamSeq, o.close, msgs.map((_, i) => tail + 1 + i), msgs, last, n],
        });
      }
      return { status: p && o.body.length > 0 ? 200 : 204, tail: last, closed: o.close, producer: p, lastSeq: p ? p.seq : null, appended: last > (tail || 0) || t.kind === 'log' };
    });
  }

  /** A stream's row for an append, locked, with the state of producer p on it (p_epoch, p_seq: null for none); null if no row. */
  async appendRow(c, name, p) {
    const { rows } = await c.query({
      name: 'hx_durable_append_row',
      text: `SELECT s.*, ${this.live} AS live, p.epoch AS p_epoch, p.seq AS p_seq
               FROM ${this.s}.stream s LEFT JOIN ${this.s}.producer p ON p.stream = s.name AND p.producer = $2
              WHERE s.name = $1 FOR UPDATE OF s`,
      values: [name, p ? p.id : null],
    });
    return rows[0] || null;
  }

  /** Room for a new producer on a stream: it takes the place of one idle for a week, or is refused (429) when the stream has maxProducers. */
  async roomForProducer(c, name) {
    const { rows: [n] } = await c.query(`SELECT count(*) AS n FROM (SELECT 1 FROM ${this.s}.producer WHERE stream = $1 LIMIT $2) p`, [name, this.maxProducers]);
    if (Number(n.n) < this.maxProducers) return;
    const { rowCount } = await c.query(
      `DELETE FROM ${this.s}.producer WHERE (stream, producer) IN (
         SELECT stream, producer FROM ${this.s}.producer WHERE stream = $1 AND updated_at < pg_catalog.now() - $2 * interval '1 second'
          ORDER BY updated_at LIMIT 1)`, [name, PRODUCER_IDLE_S]);
    if (rowCount === 0) throw new HttpError(429, `the stream has ${this.maxProducers} producers, none idle for a week: no room for another`, { 'retry-after': '60' });
  }

  // -- deleting ----------------------------------------------------------------

  /** DELETE of a byte stream: gone at once, or kept (soft-deleted, 410) while forks of it remain. */
  async remove(t) {
    await this.tx(async (c) => {
      const r = await this.row(c, t.name, 'FOR UPDATE');
      if (!r || r.kind !== 'bytes') throw new HttpError(404, 'no such stream');
      if (r.deleted) throw new HttpError(410, 'the stream was deleted (its forks remain)');
      if (!r.live && !r.forks) {
        await this.deleteCascade(c, r);
        throw new HttpError(404, 'no such stream (it expired)');
      }
      if (r.forks) await c.query(`UPDATE ${this.s}.stream SET deleted = true WHERE name = $1`, [t.name]);
      else await this.deleteCascade(c, r);
    });
  }

  /** Delete a stream, then each source up its fork chain that was deleted and has no fork left. */
  async deleteCascade(c, r) {
    let from = r.forked_from;
    await c.query(`DELETE FROM ${this.s}.stream WHERE name = $1`, [r.name]);
    while (from !== null) {
      const src = await this.row(c, from, 'FOR UPDATE');
      if (!src || src.forks || !(src.deleted || !src.live)) break;
      from = src.forked_from;
      await c.query(`DELETE FROM ${this.s}.stream WHERE name = $1`, [src.name]);
    }
  }
}

module.exports = { Store, httpErrorOf };
