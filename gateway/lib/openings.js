'use strict';
// What a stream's runs have open at a seq (hxstate-client's constructs:
// the messages, tool calls, reasoning and steps begun and not ended), for
// the prelude of a response that joins there: each response reopens them
// (follow.js).
//
// Two ways to know it, the cheaper first:
//   - hot: the responses that follow a stream live tell this cache the
//     state after each run event they apply (note()); a response that
//     joins at that seq takes it, with no read;
//   - cold: read back from the log (hxstate-client's openAt: a window of
//     seqs at a time, to the run's start marker, at most maxScan seqs),
//     through read (the hub's HxHub.read: its reader connection, between
//     its own reads; no connection of its own); reads of one stream at one
//     seq share one.  A hub with no read() (HxShardedHub: a stream's
//     shard is its own hub's) has no cold state: nothing is reopened, and
//     the later events of what was open are dropped as opening nothing.
//     An event of the log the gateway would not send (it does not parse as
//     an AG-UI event) is not applied: what it opened is not open for the
//     gateway's clients, and its later events are dropped.
// What it keeps is bounded: the state at one seq per stream, for at most
// maxStreams streams, and maxHotBytes (four times maxStateBytes) of
// constructs in all (the oldest forgotten first): a state is at most
// maxStateBytes, but ten thousand of them, kept for streams nobody follows
// any more, would be 160 GB.
const { openAt, constructs } = require('hxstate-client');
const { refusal } = require('./frames');

// a construct event the gateway would not send (frames.js) opens nothing
// for its responses: a live follower drops it (and starts again from a
// snapshot), so the log's read drops it too
const sendable = (event) => refusal(event) === null;

const EXTENSION = `SELECT n.nspname FROM pg_catalog.pg_extension e
                     JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'hxstate'`;

class Openings {
  /**
   * read: fn(query) run on a connection, query(text, values) resolving to
   * rows (HxHub.read), or null; maxScan, maxBytes: openAt's bounds; maxStreams:
   * streams whose state is kept, maxHotBytes: the bytes of all they hold;
   * log(level, message).
   */
  constructor({ read, maxScan = 10000, maxBytes = Infinity, maxStreams = 10000, maxHotBytes = 4 * maxBytes, log = () => {} }) {
    if (read !== null && typeof read !== 'function') throw new TypeError('Openings: read is a function (fn), or null');
    this._read1 = read;
    this._schema = null;
    this._o = { maxScan, maxBytes, maxStreams, maxHotBytes };
    this._hotBytes = 0;         // what the states kept hold (constructs' bytes)
    this._log = log;
    this._hot = new Map();      // stream -> {seq, state}, oldest first
    this._reads = new Map();    // "<stream>\0<seq>" -> promise of a state
    this.stats = { hot: 0, cold: 0, scanned: 0, incomplete: 0 };
  }

  /** A live follower applied the event at seq: state is what is open after it. */
  note(stream, seq, state) {
    const had = this._hot.get(stream);
    if (had && had.seq >= seq) return;
    if (had) this._forget(stream, had);
    // a state larger than all that is kept is not kept (a response that joins there reads it)
    if (state.bytes > this._o.maxHotBytes) return;
    this._hot.set(stream, { seq, state });
    this._hotBytes += state.bytes;
    // the oldest forgotten first, past maxStreams streams or maxHotBytes in all
    while (this._hot.size > this._o.maxStreams || this._hotBytes > this._o.maxHotBytes) {
      const oldest = this._hot.keys().next().value;
      this._forget(oldest, this._hot.get(oldest));
    }
  }

  _forget(stream, had) {
    this._hot.delete(stream);
    this._hotBytes -= had.state.bytes;
  }

  /** What is open in stream right after its event seq (a promise; seq 0: nothing). */
  at(stream, seq) {
    if (seq <= 0 || this._read1 === null) return Promise.resolve(constructs.emptyConstructs());
    const had = this._hot.get(stream);
    if (had && had.seq === seq) {
      this.stats.hot++;
      return Promise.resolve(had.state);
    }
    const key = `${stream}\u0000${seq}`;
    let p = this._reads.get(key);
    if (!p) {
      p = this._read(stream, seq);
      this._reads.set(key, p);
      p.then(() => this._reads.delete(key), () => this._reads.delete(key));
    }
    return p;
  }

  async _read(stream, seq) {
    const r = await this._read1(async (query) => {
      if (this._schema === null) {
        const rows = await query(EXTENSION);
        if (rows.length === 0) throw new Error('the database has no hxstate extension');
        this._schema = `"${rows[0].nspname.replace(/"/g, '""')}"`;
      }
      return openAt(query, stream, seq, { schema: this._schema, maxScan: this._o.maxScan, maxBytes: this._o.maxBytes, accept: sendable });
    });
    this.stats.cold++;
    this.stats.scanned += r.scanned;
    if (!r.complete && r.state.open.length === 0) this.stats.incomplete++;
    if (r.refused > 0) this._log('warn', `${stream}: ${r.refused} run event(s) before seq ${seq} open or close nothing that is open (dropped)`);
    this.note(stream, seq, r.state);
    return r.state;
  }

  /** Nothing to release: its reads are the hub's. */
  async close() {}
}

module.exports = { Openings };
