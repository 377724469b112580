'use strict';
// One followed stream, shared by the subscriptions that follow it: its
// name and channel, its source (the table or source function that gives
// its snapshots, when known), what is known of its log, whether it is
// armed, and the last delta applied (so that several subscriptions at the
// same state apply it once).
const { applySized } = require('./apply');

class StreamEntry {
  constructor(stream, channel, source, key) {
    this.stream = stream;
    this.channel = channel;
    /** The source's name (a table, or a key of the hub's sources), or null: known by name only. */
    this.source = source;
    this.key = key;
    this.subs = new Set();
    /** The highest seq known to exist: from a hint, a head, a read, an event. */
    this.seen = 0;
    /** Events after now will come through the transport (or are in the log). */
    this.armed = false;
    /** No longer followed (its last subscription went). */
    this.dropped = false;
    this._memo = null; // {event, before, after, bytes}
  }

  /** A subscription follows it now. */
  join(sub) {
    this.subs.add(sub);
  }

  /** A subscription no longer follows it: how many still do. */
  leave(sub) {
    this.subs.delete(sub);
    return this.subs.size;
  }

  /** seq exists. */
  saw(seq) {
    if (seq > this.seen) this.seen = seq;
  }

  /**
   * A read of the log ended at top, below what was seen (a hint, a head),
   * and nothing was seen meanwhile (seen is still seenAtRead): take the
   * log's word for it.  Returns whether it did (then look again shortly:
   * decoding can announce a commit a moment before it is visible, and a
   * stray or forged notification can announce anything).
   */
  settle(top, seenAtRead) {
    if (this.seen <= top || this.seen !== seenAtRead) return false;
    this.seen = top;
    return true;
  }

  /** The subscription that named it by {table, key} tells where its snapshots come from. */
  learn(source, key) {
    if (this.source !== null || source === null) return;
    this.source = source;
    this.key = key;
  }

  arm() { this.armed = true; }
  disarm() { this.armed = false; }
  drop() {
    this.dropped = true;
    this._memo = null;
  }

  /** applySized, once for every subscription that applies event to the same state within the same bound. */
  apply(before, beforeBytes, event, eventBytes, maxBytes) {
    const m = this._memo;
    if (m && m.event === event && m.before === before && m.max === maxBytes) return m;
    const { state, bytes } = applySized(before, beforeBytes, event, eventBytes, maxBytes);
    this._memo = { event, before, max: maxBytes, state, bytes };
    return this._memo;
  }
}

module.exports = { StreamEntry };
