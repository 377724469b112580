'use strict';
// The longest delay a Node timer holds: Node fires a longer one after 1 ms
// (with a TimeoutOverflowWarning), so options and limits are checked or
// capped against it.
const MAX_TIMER_MS = 2 ** 31 - 1;

module.exports = { MAX_TIMER_MS };
