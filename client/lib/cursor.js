'use strict';
// The cursor rules, as pure functions.  A subscription's cursor is the seq
// of the last event it accepted (with the state after it); these say what
// to do with what comes in, given the cursor, and nothing else: no I/O, no
// state of their own.
//
//   - an event at seq n from the transport (classify): n <= cursor is old
//     news, n == cursor + 1 is the next event, anything higher means the
//     log has events the subscription has not seen (read it after the
//     cursor);
//   - a page of the log read after seq `after` (planPage): the run of
//     events that continues the cursor, and whether the log skips a seq
//     after it (a hole: the events were trimmed or deleted, so only a
//     fresh snapshot can continue: a resync);
//   - a hint (a notification's {stream, seq}, or a head read from the log):
//     only says that seq exists; the content is always read from the log
//     (wantsRead);
//   - the queue's bounds (hasRoom, isLow): a subscription accepts an event
//     while its queue holds fewer than maxQueue events and fewer than
//     maxQueueBytes bytes with it (an empty queue takes any one event, so
//     an event larger than the byte bound still goes through, alone), and
//     reads the log again once its consumer has brought the queue down to
//     half of both.

/**
 * A seq a caller gives (follow()'s after): a safe integer >= 0, as a
 * number, a bigint or a string of decimal digits (int8 as pg gives it, a
 * Last-Event-ID); null for anything else (a string JavaScript would read
 * as another number, '' or ' 7 ' or '0x10' or '1e3', a boolean, an array).
 */
function parseSeq(v) {
  let n;
  if (typeof v === 'number') n = v;
  else if (typeof v === 'bigint') n = v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : -1;
  else if (typeof v === 'string' && /^[0-9]{1,16}$/.test(v)) n = Number(v);
  else return null;
  return Number.isSafeInteger(n) && n >= 0 ? n : null;
}

/** 'old' | 'next' | 'ahead': an event at seq, given the cursor. */
function classify(cursor, seq) {
  if (seq <= cursor) return 'old';
  return seq === cursor + 1 ? 'next' : 'ahead';
}

/**
 * A page of the log, read after seq `after`, against the cursor now (which
 * may have moved since the read was sent).
 * @param {number} cursor
 * @param {number} after the seq the read started after
 * @param {number[]} seqs the page's seqs, ascending
 * @returns {{reread: boolean, start: number, run: number, hole: boolean}}
 *   reread: the cursor went back below the read (a resync older than the
 *   read): read again; else rows start .. start + run - 1 continue the
 *   cursor, and hole says that the row after them skips a seq.
 */
function planPage(cursor, after, seqs) {
  if (cursor < after) return { reread: true, start: 0, run: 0, hole: false };
  let start = 0;
  while (start < seqs.length && seqs[start] <= cursor) start++;
  let run = 0;
  while (start + run < seqs.length && seqs[start + run] === cursor + run + 1) run++;
  return { reread: false, start, run, hole: start + run < seqs.length };
}

/**
 * After a page: is there more to read right away?  Yes when the queue
 * stopped it (full), or when the page was as long as the limit and the
 * cursor reached its last seq (the log may go on).
 */
function moreAfterPage(full, pageLength, limit, cursor, top) {
  return full || (pageLength >= limit && cursor >= top);
}

/**
 * Does a live subscription want to read the log after its cursor?  When
 * told to (force: it does not know the head), when the last page stopped
 * short (more), or when a seq above its cursor is known to exist (seen:
 * from a hint, a head, a gap).
 */
function wantsRead(cursor, seen, force, more) {
  return force || more || seen > cursor;
}

/** May a queue of `events` events and `bytes` bytes take one more of `size` bytes? */
function hasRoom(events, bytes, size, maxEvents, maxBytes) {
  if (events === 0) return true;
  return events < maxEvents && bytes + size <= maxBytes;
}

/** Is the queue at or below its low-water mark (half of both bounds)? */
function isLow(events, bytes, maxEvents, maxBytes) {
  return events <= Math.floor(maxEvents / 2) && bytes <= maxBytes / 2;
}

/**
 * A hint read from a notification's payload, or null.  The payload is
 * whatever the sender wrote (any role that can connect can NOTIFY any
 * channel), so it is only a hint: {stream, seq}, taken from an event
 * ({..., metadata: {stream, seq}}) or a reference ({ref: true, stream,
 * seq}); anything else (not JSON, no safe integer seq, another shape) is
 * null.  Never the content: that is read from the log.
 * @returns {{stream: string, seq: number, ref: boolean} | null}
 */
function parseHint(payload) {
  let p;
  try {
    p = JSON.parse(payload);
  } catch (err) {
    return null;
  }
  if (p === null || typeof p !== 'object') return null;
  const ref = p.ref === true;
  const src = ref ? p : p.metadata;
  if (src === null || typeof src !== 'object') return null;
  const { stream, seq } = src;
  if (typeof stream !== 'string' || !Number.isSafeInteger(seq) || seq < 1) return null;
  return { stream, seq, ref };
}

module.exports = { parseSeq, classify, planPage, moreAfterPage, wantsRead, hasRoom, isLow, parseHint };
