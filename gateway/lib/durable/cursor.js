'use strict';
// Stream-Cursor, for caches that collapse long-polls (the protocol's
// section on caching): the number of 20-second intervals since
// 2024-10-09T00:00:00Z, and never less than one past the cursor the
// client echoed (plus a jitter of 1 to 180 intervals when the client's is
// not behind), so that a cached response cannot loop forever.
const EPOCH_MS = Date.UTC(2024, 9, 9);
const INTERVAL_MS = 20000;
const MAX_JITTER = 180;

function cursorFor(echoed, now = Date.now()) {
  const current = Math.floor((now - EPOCH_MS) / INTERVAL_MS);
  if (typeof echoed === 'string' && /^[0-9]{1,15}$/.test(echoed)) {
    const c = Number(echoed);
    if (c >= current) return String(c + 1 + Math.floor(Math.random() * MAX_JITTER));
  }
  return String(current);
}

module.exports = { cursorFor };
