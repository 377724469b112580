'use strict';
// Offsets of the Durable Streams endpoint.
//
// Every stream the endpoint serves is a sequence of messages numbered
// 1, 2, 3, ... without gaps: a stream of hxstate's log by the seq of its
// events (hx_event.seq), a byte stream by the seq of its chunks.  The
// offset of a position is the seq of the last message before it, in 16
// decimal digits, zero-padded, after sixteen zeros and an underscore:
//
//   0000000000000000_0000000000000000   the start, before seq 1
//   0000000000000000_0000000000000042   after the event of seq 42 (a read from it begins at 43)
//
// (the form of the protocol's reference servers, whose zero offset
// clients in the wild, and its conformance suite, write out).  16 digits
// hold every seq up to 2^53 - 1 (the largest the endpoint takes), so
// offsets compare as their seqs do, byte by byte (the protocol's
// lexicographic order), and contain none of "," "&" "=" "?" "/".  The
// protocol's sentinels are read as it says: "-1", the stream's beginning
// (for hxstate's log: the oldest event the log still holds), and "now",
// the stream's tail.
const HEAD = '0000000000000000_';
const PATTERN = /^0000000000000000_[0-9]{16}$/;

/** The offset after seq. */
function encodeOffset(seq) {
  return HEAD + String(seq).padStart(16, '0');
}

/**
 * What an offset query parameter asks for: {start: true} (-1 or none),
 * {now: true}, or {seq}; null when it is none of them (a 400).
 */
function parseOffset(text) {
  if (text === null || text === undefined || text === '-1') return { start: true };
  if (text === 'now') return { now: true };
  if (!PATTERN.test(text)) return null;
  const seq = Number(text.slice(HEAD.length));
  if (!Number.isSafeInteger(seq)) return null;
  return { seq };
}

module.exports = { encodeOffset, parseOffset };
