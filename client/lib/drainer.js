'use strict';
// One microtask for every subscription of a hub that has something to hand
// out, instead of one a subscription (and so one an event: under a load
// spread over many streams, each event is the only one its subscription
// holds when it comes).  What the hub accepts from one message of its
// transport (a transaction's inserts, a page of the log) is handed out
// after the hub's own bookkeeping of that message, as a microtask of each
// subscription would, in the order the subscriptions asked.
//
// Items are objects with a drain() method (a SubscriptionCore): drain()
// hands out what the item holds, and may add items (its own listeners may
// make another subscription accept something), which this same turn
// drains.  A drain() that throws (it must not: listeners' failures are
// caught below it) does not strand the items after it: they are drained in
// a microtask of their own, and the error propagates.
class Drainer {
  constructor() {
    this._items = [];
    this._queued = false;
    this._run = () => this._drainAll();
  }

  /** item has something to hand out: drain it in this turn's microtask. */
  add(item) {
    this._items.push(item);
    if (!this._queued) {
      this._queued = true;
      queueMicrotask(this._run);
    }
  }

  _drainAll() {
    const items = this._items;
    let i = 0;
    try {
      for (; i < items.length; i++) items[i].drain();
    } finally {
      if (i < items.length) {
        // drain() threw: the rest in a microtask of their own
        items.splice(0, i + 1);
        queueMicrotask(this._run);
      } else {
        items.length = 0;
        this._queued = false;
      }
    }
  }
}

module.exports = { Drainer };
