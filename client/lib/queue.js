'use strict';
// A subscription's queue: what it accepted and has not handed out yet.
// Items are events ({kind: 'event', bytes, ...}) and markers ({kind:
// 'ready'}); the queue counts the events and their bytes (the size of
// their JSON text, and of the state kept with each, as the subscription
// measured them), and remembers the most it ever held of each.
class EventQueue {
  constructor() {
    this.items = [];
    this.events = 0;
    this.bytes = 0;
    this.maxEvents = 0;
    this.maxBytes = 0;
  }

  get length() { return this.items.length; }

  push(item) {
    this.items.push(item);
    if (item.kind !== 'event') return;
    this.events++;
    this.bytes += item.bytes;
    if (this.events > this.maxEvents) this.maxEvents = this.events;
    if (this.bytes > this.maxBytes) this.maxBytes = this.bytes;
  }

  shift() {
    const item = this.items.shift();
    if (item && item.kind === 'event') {
      this.events--;
      this.bytes -= item.bytes;
    }
    return item;
  }

  /** Drop the items of a kind (every item without one). */
  drop(kind) {
    if (kind === undefined) {
      this.items = [];
    } else {
      this.items = this.items.filter((item) => item.kind !== kind);
    }
    if (kind === undefined || kind === 'event') {
      this.events = 0;
      this.bytes = 0;
    }
  }
}

module.exports = { EventQueue };
