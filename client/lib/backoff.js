'use strict';
// Backoff: how long to wait before trying again.  Pure rules (no timers,
// no I/O), used for reconnects.
//
// The delay doubles with each failed attempt, from min up to max, and is
// jittered over its upper half (so that many clients that lost one server
// do not come back in step).

/**
 * The delay before attempt number attempt (0 for the first retry), in ms:
 * uniform in [base / 2, base], base = min(max, min * 2^attempt).
 * @param {number} attempt
 * @param {{min: number, max: number}} bounds
 * @param {() => number} [random] uniform in [0, 1)
 */
function backoffDelay(attempt, bounds, random = Math.random) {
  const base = Math.min(bounds.max, bounds.min * 2 ** Math.min(Math.max(0, attempt), 30));
  return base / 2 + (random() * base) / 2;
}

/**
 * The attempt counter of one thing that is retried.  Its fields are its
 * own; the caller asks for the next delay, and says when it succeeded.
 */
class Backoff {
  /** @param {{min: number, max: number}} bounds */
  constructor(bounds) {
    this.bounds = bounds;
    this.attempt = 0;
  }

  /** The delay before the next attempt (and count it). */
  next(random) {
    const delay = backoffDelay(this.attempt, this.bounds, random);
    this.attempt++;
    return delay;
  }

  /** It succeeded: the backoff starts over. */
  reset() {
    this.attempt = 0;
  }
}

module.exports = { backoffDelay, Backoff };
