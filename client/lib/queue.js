'use strict';
// A subscription's queue: what it accepted and has not handed out yet.
// Items are events ({kind: 'event', ...}) and markers ({kind: 'ready'});
// the queue counts the events, and remembers the most it ever held.
class EventQueue {
  constructor() {
    this.items = [];
    this.events = 0;
    this.maxEvents = 0;
  }

  get length() { return this.items.length; }

  push(item) {
    this.items.push(item);
    if (item.kind !== 'event') return;
    this.events++;
    if (this.events > this.maxEvents) this.maxEvents = this.events;
  }

  shift() {
    const item = this.items.shift();
    if (item && item.kind === 'event') this.events--;
    return item;
  }

  /** Drop the items of a kind (every item without one). */
  drop(kind) {
    if (kind === undefined) {
      this.items = [];
    } else {
      this.items = this.items.filter((item) => item.kind !== kind);
    }
    if (kind === undefined || kind === 'event') this.events = 0;
  }
}

module.exports = { EventQueue };
