'use strict';
// GET of a Durable Stream: catch-up, long-poll and SSE.
//
// A response holds at most maxReadBytes of messages (the first message
// always: an append is at most the gateway's maxBody), read from the
// database in one statement; a reader that wants more asks again from the
// offset it was given.  SSE writes one data event at a time, and reads
// the next only once the socket has taken the last (write() returned true,
// or 'drain'): what a reader that does not read holds of the gateway is
// one event and its socket's buffer, and after stallTimeout without
// progress its connection is closed.
const { HttpError } = require('../limits');
const { parseOffset, encodeOffset } = require('./offsets');
const { isJson, isText } = require('./headers');
const { jsonArray } = require('./messages');
const { cursorFor } = require('./cursor');
const { baseHeaders } = require('./respond');

/** {offset, live, cursor} of the query; 400 for a malformed one. */
function readParams(url) {
  const offsets = url.searchParams.getAll('offset');
  if (offsets.length > 1) throw new HttpError(400, 'give one offset');
  const text = offsets.length ? offsets[0] : null;
  if (text === '') throw new HttpError(400, 'the offset is empty');
  const offset = parseOffset(text);
  if (!offset) throw new HttpError(400, 'malformed offset: -1, now, or an offset this server gave');
  const live = url.searchParams.get('live');
  if (live !== null && live !== 'long-poll' && live !== 'sse') throw new HttpError(400, 'live is long-poll or sse');
  if (live !== null && text === null) throw new HttpError(400, `a ${live} read needs an offset`);
  const cursor = url.searchParams.get('cursor');
  return { offset, live, cursor, given: text };
}

function etagOf(t, after, next, closed) {
  return `"${Buffer.from(t.name).toString('base64url')}:${encodeOffset(after)}:${encodeOffset(next)}${closed ? ':c' : ''}"`;
}

/** The seq a read starts after; 400 for an offset past the stream's tail. */
function startOf(offset, meta) {
  if (offset.start) return 0;
  if (offset.now) return meta.tail;
  if (offset.seq > meta.tail) throw new HttpError(400, `the offset is past the stream's end (${encodeOffset(meta.tail)})`);
  return offset.seq;
}

function bodyOf(meta, items) {
  if (isJson(meta.contentType)) return jsonArray(items.map((m) => (typeof m.data === 'string' ? m.data : m.data.toString('utf8'))));
  return Buffer.concat(items.map((m) => (typeof m.data === 'string' ? Buffer.from(m.data) : m.data)));
}

/** A 200 with messages (or none), as catch-up and long-poll send it. */
function sendMessages(ctx, req, res, t, { meta, after, items, live, cursor, start }) {
  const next = items.length ? items[items.length - 1].seq : after;
  const upToDate = next >= meta.tail;
  const closed = meta.closed && upToDate;
  const headers = {
    ...baseHeaders(ctx.cors),
    'content-type': meta.contentType,
    'stream-next-offset': encodeOffset(next),
    'cache-control': items.length > 0 && !start ? 'private, max-age=60, stale-while-revalidate=300' : 'no-store',
  };
  if (upToDate) headers['stream-up-to-date'] = 'true';
  if (closed) headers['stream-closed'] = 'true';
  if (live) headers['stream-cursor'] = cursorFor(cursor);
  const etag = etagOf(t, after, next, closed);
  headers.etag = etag;
  if (!live && req.headers['if-none-match'] === etag) {
    res.writeHead(304, { ...baseHeaders(ctx.cors), etag, 'cache-control': headers['cache-control'] });
    res.end();
    return;
  }
  res.writeHead(200, headers);
  res.end(bodyOf(meta, items));
}

/** A 204 at the tail: a long-poll that timed out, or reached the end of a closed stream. */
function sendTail(ctx, res, { meta, after, cursor }) {
  const headers = {
    ...baseHeaders(ctx.cors), 'stream-next-offset': encodeOffset(after), 'stream-up-to-date': 'true', 'cache-control': 'no-store',
  };
  if (meta.closed) headers['stream-closed'] = 'true';
  else headers['stream-cursor'] = cursorFor(cursor);
  res.writeHead(204, headers);
  res.end();
}

async function serveRead(ctx, req, res, t, url) {
  const p = readParams(url);
  if (p.live === 'sse') return serveSse(ctx, req, res, t, p);
  let meta = await ctx.store.meta(t);
  let after = startOf(p.offset, meta);
  if (p.offset.now && !p.live) {
    const headers = {
      ...baseHeaders(ctx.cors), 'content-type': meta.contentType, 'stream-next-offset': encodeOffset(meta.tail),
      'stream-up-to-date': 'true', 'cache-control': 'no-store',
    };
    if (meta.closed) headers['stream-closed'] = 'true';
    res.writeHead(200, headers);
    res.end(isJson(meta.contentType) ? '[]' : '');
    return;
  }
  let items = await ctx.store.read(t, after, meta.tail, ctx.maxReadBytes, p.offset.start);
  if (p.offset.start && items.length) after = items[0].seq - 1;
  if (p.live !== 'long-poll' || items.length > 0) {
    sendMessages(ctx, req, res, t, { meta, after, items, live: p.live, cursor: p.cursor, start: p.offset.start });
    return;
  }
  if (meta.closed) {
    sendTail(ctx, res, { meta, after, cursor: p.cursor });
    return;
  }
  // long-poll: wait for the next message, in a client slot
  const release = ctx.takeSlot(req);
  const ac = new AbortController();
  const onClose = () => ac.abort();
  res.on('close', onClose);
  // a gateway that closes answers its long-polls at once: 204 at the offset, and the client polls again (elsewhere)
  const stopOnClosing = ctx.onClosing(() => ac.abort());
  try {
    const deadline = Date.now() + ctx.longPollMs;
    for (;;) {
      const left = deadline - Date.now();
      const why = left > 0 ? await ctx.waiter.wait(t, after, left, ac.signal) : 'timeout';
      if (why === 'abort') {
        if (!res.destroyed && !res.headersSent) sendTail(ctx, res, { meta: { ...meta, closed: false }, after, cursor: p.cursor });
        return;
      }
      meta = await ctx.store.meta(t);
      items = await ctx.store.read(t, after, meta.tail, ctx.maxReadBytes, false);
      if (items.length > 0) {
        sendMessages(ctx, req, res, t, { meta, after, items, live: 'long-poll', cursor: p.cursor });
        return;
      }
      if (meta.closed || why === 'timeout' || ctx.closing()) {
        sendTail(ctx, res, { meta, after, cursor: p.cursor });
        return;
      }
    }
  } finally {
    res.removeListener('close', onClose);
    stopOnClosing();
    release();
  }
}

/**
 * An SSE event's data lines: one "data:" line per line of the payload (a
 * parser drops one space after the colon, so a line that begins with one
 * gets another).
 */
function dataLines(payload) {
  return `${payload.split(/\r\n|\r|\n/).map((l) => (l.startsWith(' ') ? `data: ${l}` : `data:${l}`)).join('\n')}\n\n`;
}

async function serveSse(ctx, req, res, t, p) {
  let meta = await ctx.store.meta(t);
  let after = startOf(p.offset, meta);
  const base64 = !isText(meta.contentType);
  const json = isJson(meta.contentType);
  const release = ctx.takeSlot(req);
  const ac = new AbortController();
  let gone = false;
  const onClose = () => {
    gone = true;
    ac.abort();
  };
  res.on('close', onClose);
  const stopOnClosing = ctx.onClosing(() => ac.abort());
  const headers = {
    ...baseHeaders(ctx.cors), 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-store', 'x-accel-buffering': 'no',
  };
  if (base64) headers['stream-sse-data-encoding'] = 'base64';
  res.writeHead(200, headers);
  if (res.socket) res.socket.setNoDelay(true);
  // write, and wait until the socket has taken it (or the reader stalled past stallTimeout: cut off)
  const write = (text) => new Promise((resolve) => {
    if (gone) {
      resolve(false);
      return;
    }
    if (res.write(text)) {
      resolve(true);
      return;
    }
    const timer = setTimeout(() => {
      ctx.stats.stalled++;
      res.destroy();
      resolve(false);
    }, ctx.stallTimeout);
    const done = () => {
      clearTimeout(timer);
      res.removeListener('drain', done);
      res.removeListener('close', done);
      resolve(!gone);
    };
    res.once('drain', done);
    res.once('close', done);
  });
  const control = (c) => write(`event: control\n${dataLines(JSON.stringify(c))}`);
  const endAt = Date.now() + ctx.sseMs;
  let start = p.offset.start;
  try {
    for (;;) {
      const items = await ctx.store.read(t, after, meta.tail, ctx.maxReadBytes, start);
      start = false;
      if (items.length > 0) {
        let payload;
        if (base64) payload = Buffer.concat(items.map((m) => m.data)).toString('base64');
        else if (json) payload = jsonArray(items.map((m) => (typeof m.data === 'string' ? m.data : m.data.toString('utf8'))));
        else payload = Buffer.concat(items.map((m) => m.data)).toString('utf8');
        if (!(await write(`event: data\n${dataLines(payload)}`))) return;
        after = items[items.length - 1].seq;
      }
      const upToDate = after >= meta.tail;
      if (meta.closed && upToDate) {
        await control({ streamNextOffset: encodeOffset(after), streamClosed: true, upToDate: true });
        return;
      }
      const c = { streamNextOffset: encodeOffset(after), streamCursor: cursorFor(p.cursor) };
      if (upToDate) c.upToDate = true;
      if (!(await control(c))) return;
      if (!upToDate) {
        meta = await ctx.store.meta(t);
        continue;
      }
      // caught up: wait for more, with a control event at least every heartbeat
      for (;;) {
        const left = endAt - Date.now();
        if (left <= 0 || ctx.closing()) return;
        const why = await ctx.waiter.wait(t, after, Math.min(left, ctx.heartbeat), ac.signal);
        if (why === 'abort') return;
        meta = await ctx.store.meta(t);
        if (meta.tail > after || meta.closed) break;
        if (!(await control({ streamNextOffset: encodeOffset(after), streamCursor: cursorFor(p.cursor), upToDate: true }))) return;
      }
    }
  } catch (err) {
    // the stream went away (deleted, expired, trimmed) or the database failed: the reader reconnects and is told
    if (!(err instanceof HttpError)) ctx.log('warn', `durable sse ${t.name}: ${err.message}`);
  } finally {
    res.removeListener('close', onClose);
    stopOnClosing();
    release();
    if (!res.writableEnded && !res.destroyed) res.end();
  }
}

module.exports = { serveRead, readParams, dataLines };
