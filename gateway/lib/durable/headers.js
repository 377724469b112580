'use strict';
// The request headers of the Durable Streams protocol, read strictly:
// every malformed value is a 400 with what was wrong.
const { HttpError } = require('../limits');

const MAX_CONTENT_TYPE = 256;
const MAX_PRODUCER_ID = 256;
const MAX_STREAM_SEQ = 256;
// the longest Stream-TTL: 2^31 - 1 seconds (68 years); PostgreSQL's intervals hold it with room
const MAX_TTL = 2147483647;
const MEDIA_TYPE = /^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+$/;
const DECIMAL = /^(0|[1-9][0-9]*)$/;
const DIGITS = /^[0-9]+$/;
// RFC 3339 date-time (section 5.6)
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

function one(req, name) {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The media type of a Content-Type, lower case, without parameters ("" for none). */
function mediaType(value) {
  if (typeof value !== 'string') return '';
  return value.split(';')[0].trim().toLowerCase();
}

/** Is a content type JSON mode's (application/json, whatever its parameters)? */
function isJson(contentType) {
  return mediaType(contentType) === 'application/json';
}

/** SSE sends data events of these types as text, and of every other type in base64. */
function isText(contentType) {
  const m = mediaType(contentType);
  return m.startsWith('text/') || m === 'application/json';
}

/** The request's Content-Type, checked; undefined when it has none. */
function contentTypeOf(req) {
  const v = one(req, 'content-type');
  if (v === undefined || v.trim() === '') return undefined;
  if (Buffer.byteLength(v) > MAX_CONTENT_TYPE) throw new HttpError(400, `Content-Type is longer than ${MAX_CONTENT_TYPE} bytes`);
  if (!MEDIA_TYPE.test(mediaType(v))) throw new HttpError(400, 'Content-Type is not a media type (type/subtype)');
  return v.trim();
}

/** Stream-Closed: present only when exactly "true", in any case (the protocol ignores every other value). */
function closedOf(req) {
  const v = one(req, 'stream-closed');
  return typeof v === 'string' && v.toLowerCase() === 'true';
}

/** {ttl, expiresAt, expires} of Stream-TTL and Stream-Expires-At (at most one of them). */
function expiryOf(req) {
  const ttlText = one(req, 'stream-ttl');
  const expText = one(req, 'stream-expires-at');
  if (ttlText !== undefined && expText !== undefined) throw new HttpError(400, 'give Stream-TTL or Stream-Expires-At, not both');
  const out = { ttl: null, expiresAt: null, expires: null };
  if (ttlText !== undefined) {
    const ttl = Number(ttlText);
    if (!DECIMAL.test(ttlText) || !Number.isSafeInteger(ttl)) {
      throw new HttpError(400, 'Stream-TTL is a number of seconds in decimal digits, without sign, point or leading zero');
    }
    if (ttl > MAX_TTL) throw new HttpError(400, `Stream-TTL is at most ${MAX_TTL} seconds`);
    out.ttl = ttl;
  }
  if (expText !== undefined) {
    const m = RFC3339.exec(expText);
    const t = m ? Date.parse(expText) : NaN;
    if (!m || Number.isNaN(t) || Number(m[1]) < 1 || Number(m[2]) > 12 || Number(m[3]) > 31 || Number(m[4]) > 23 || Number(m[5]) > 59 || Number(m[6]) > 60) {
      throw new HttpError(400, 'Stream-Expires-At is an RFC 3339 timestamp (2030-01-01T00:00:00Z)');
    }
    out.expiresAt = expText;
    out.expires = new Date(t);
  }
  return out;
}

/** {id, epoch, seq} of the producer headers, or null without them; all three or none. */
function producerOf(req) {
  const id = one(req, 'producer-id');
  const epoch = one(req, 'producer-epoch');
  const seq = one(req, 'producer-seq');
  if (id === undefined && epoch === undefined && seq === undefined) return null;
  if (id === undefined || epoch === undefined || seq === undefined) {
    throw new HttpError(400, 'Producer-Id, Producer-Epoch and Producer-Seq go together: give all three or none');
  }
  if (id === '') throw new HttpError(400, 'Producer-Id is empty');
  if (Buffer.byteLength(id) > MAX_PRODUCER_ID) throw new HttpError(400, `Producer-Id is longer than ${MAX_PRODUCER_ID} bytes`);
  const e = Number(epoch);
  const s = Number(seq);
  if (!DIGITS.test(epoch) || !Number.isSafeInteger(e)) throw new HttpError(400, 'Producer-Epoch is an integer from 0 to 2^53-1');
  if (!DIGITS.test(seq) || !Number.isSafeInteger(s)) throw new HttpError(400, 'Producer-Seq is an integer from 0 to 2^53-1');
  return { id, epoch: e, seq: s };
}

/** Stream-Seq, the writer's own lexicographic sequence, or null. */
function streamSeqOf(req) {
  const v = one(req, 'stream-seq');
  if (v === undefined) return null;
  if (v === '') throw new HttpError(400, 'Stream-Seq is empty');
  if (Buffer.byteLength(v) > MAX_STREAM_SEQ) throw new HttpError(400, `Stream-Seq is longer than ${MAX_STREAM_SEQ} bytes`);
  return v;
}

/** {from, offset, sub} of the fork headers, or null; from is the source's URL path as given. */
function forkOf(req) {
  const from = one(req, 'stream-forked-from');
  const offset = one(req, 'stream-fork-offset');
  const sub = one(req, 'stream-fork-sub-offset');
  if (from === undefined) {
    if (offset !== undefined || sub !== undefined) throw new HttpError(400, 'Stream-Fork-Offset and Stream-Fork-Sub-Offset need Stream-Forked-From');
    return null;
  }
  if (!from.startsWith('/') || from.startsWith('//')) throw new HttpError(400, 'Stream-Forked-From is the path of a stream of this server (/...)');
  let subN = 0;
  if (sub !== undefined) {
    subN = Number(sub);
    if (!DECIMAL.test(sub) || !Number.isSafeInteger(subN)) throw new HttpError(400, 'Stream-Fork-Sub-Offset is a non-negative integer');
  }
  return { from, offset: offset === undefined ? null : offset, sub: subN };
}

module.exports = {
  mediaType, isJson, isText, contentTypeOf, closedOf, expiryOf, producerOf, streamSeqOf, forkOf,
  MAX_PRODUCER_ID, MAX_STREAM_SEQ, MAX_TTL,
};
