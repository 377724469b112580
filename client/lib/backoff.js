'use strict';
// Backoff: how long to wait before trying again.  Pure rules (no timers,
// no I/O), used for reconnects and for statements that failed on a
// working connection.
//
// The delay doubles with each failed attempt, from min up to max, and is
// jittered over its upper half (so that many clients that lost one server
// do not come back in step).  It starts over only once what was retried
// has proved healthy: for a connection, that it stayed up for a while (a
// connection the server accepts and then drops at once, or one whose
// statements fail, must not be retried at the shortest delay forever).

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
 * own; the caller says what happened (failed, up, lost, healthy) and asks
 * for the next delay.
 */
class Backoff {
  /**
   * @param {{min: number, max: number}} bounds
   * @param {number} healthyAfter ms a connection must stay up to count as healthy
   */
  constructor(bounds, healthyAfter = bounds.max) {
    this.bounds = bounds;
    this.healthyAfter = healthyAfter;
    this.attempt = 0;
    this.upSince = null;
  }

  /** The delay before the next attempt (and count it). */
  next(random) {
    const delay = backoffDelay(this.attempt, this.bounds, random);
    this.attempt++;
    return delay;
  }

  /** What was retried is up again (connected, say) at time now: not yet healthy. */
  up(now) {
    this.upSince = now;
  }

  /**
   * It was lost at time now: if it had stayed up for healthyAfter ms, it
   * was healthy, and the backoff starts over.
   */
  lost(now) {
    if (this.upSince !== null && now - this.upSince >= this.healthyAfter) this.attempt = 0;
    this.upSince = null;
  }

  /** It proved healthy (a statement succeeded): the backoff starts over. */
  healthy() {
    this.attempt = 0;
  }
}

module.exports = { backoffDelay, Backoff };
