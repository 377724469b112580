'use strict';
// A run's events waiting for their commit, and the rule that says when
// they go.  Pure: no I/O, no timers (writer.js keeps the clock).
//
// The rule (writer.js's options):
//
//   - a token (a TEXT_MESSAGE_CONTENT, TOOL_CALL_ARGS or
//     REASONING_MESSAGE_CONTENT) waits at most flushMs (50) for its commit:
//     a batch is due flushMs after its first event came;
//   - a batch is due at once when it holds maxBatchBytes (64 kB) of event
//     text, or an event that ends something (TEXT_MESSAGE_END,
//     TOOL_CALL_END, TOOL_CALL_RESULT, REASONING_MESSAGE_END,
//     REASONING_END, STEP_FINISHED, a run marker), or when its run asks
//     (flush(), close());
//   - consecutive fragments of one construct are one event: "Hel" and "lo"
//     of message m, written within one batch, are logged as one
//     TEXT_MESSAGE_CONTENT "Hello" (a reader that resumes in the middle of
//     a message resumes at the next logged fragment).
//
// So a token costs no commit of its own: a writer commits each run at most
// once per flushMs while it streams, and every run of a writer that is due
// at once shares one transaction (writer.js).

const URGENT = new Set([
  'TEXT_MESSAGE_END', 'TOOL_CALL_END', 'TOOL_CALL_RESULT', 'REASONING_MESSAGE_END', 'REASONING_END', 'STEP_FINISHED', 'CUSTOM',
]);
// the fragments that coalesce, and the member that names their construct
const FRAGMENTS = { TEXT_MESSAGE_CONTENT: 'messageId', TOOL_CALL_ARGS: 'toolCallId', REASONING_MESSAGE_CONTENT: 'messageId' };

/** The bytes an event's JSON text takes (what the batch bound counts). */
function eventBytes(event) {
  return Buffer.byteLength(JSON.stringify(event));
}

class Batch {
  constructor() {
    this.events = [];
    this.bytes = 0;
    this.since = null;    // when its first event came (ms)
    this.urgent = false;  // it holds an event that ends something, or its run asked
    this.pushes = 0;      // the events pushed into it (a fragment that joined another counts)
  }

  get empty() { return this.events.length === 0; }

  /** Add an event at time now (a fragment of the construct of the last event joins it). */
  push(event, now) {
    const idMember = FRAGMENTS[event.type];
    const last = this.events[this.events.length - 1];
    if (idMember && last && last.type === event.type && last[idMember] === event[idMember]) {
      const joined = { ...last, delta: last.delta + event.delta };
      this.bytes += Buffer.byteLength(JSON.stringify(event.delta)) - 2;
      this.events[this.events.length - 1] = joined;
    } else {
      this.events.push(event);
      this.bytes += eventBytes(event);
    }
    this.pushes++;
    if (this.since === null) this.since = now;
    if (URGENT.has(event.type)) this.urgent = true;
  }

  /** Its run asks for it to go now. */
  hurry() {
    if (!this.empty) this.urgent = true;
  }

  /** When it is due (ms), given the rule's bounds; null when empty. */
  dueAt({ flushMs, maxBatchBytes }) {
    if (this.empty) return null;
    if (this.urgent || this.bytes >= maxBatchBytes) return this.since;
    return this.since + flushMs;
  }

  /** Its events, and it empty again. */
  take() {
    const events = this.events;
    this.events = [];
    this.bytes = 0;
    this.since = null;
    this.urgent = false;
    this.pushes = 0;
    return events;
  }
}

module.exports = { Batch, eventBytes, URGENT };
