'use strict';
// What a gateway's modules and request handlers share, in one object they
// are given (never the Gateway itself):
//
//   config     the options, checked and frozen (createGateway's, with
//              their defaults)
//   log        (level, message)
//   hub        the HxHub that follows the streams
//   tables     the tables served (config.js's Tables)
//   frames     what responses share: frames, snapshots, projections
//              (frames.js's FrameCache, this gateway's own)
//   openings   what the streams' runs have open at a seq (openings.js)
//   machines   the live view's phase machines and polls (machines.js)
//   assets     the live view's page, script and style (views.js)
//   counters   the gateway's stats (Counters, below)
//   responses  the SSE responses open now (Responses, below)
//   slots      open responses per client (limits.js's ClientSlots)
//   bodies     the request bodies being read (limits.js's BodyReader)
//   runs       the runs of the run hook (runs.js's RunSlots)
//   clientId   (req) => who a request is from
//   closing    () => whether the gateway is closing
//
// Each of these changes only its own fields: a module that counts calls
// counters.add(), one that opens a response calls responses.add().

const STATUSES = [204, 400, 401, 403, 404, 405, 408, 409, 413, 429, 500, 503];
const OPEN = { run: 'runs', stream: 'streams', view: 'views' };

/** The gateway's counters (gateway.stats is their values). */
class Counters {
  constructor() {
    this.values = {
      streams: 0, runs: 0, views: 0, // open now
      frames: 0, heartbeats: 0, refused_events: 0,
      overflows: 0, stalled: 0, crossed_ends: 0, dropped_messages: 0, dropped_run_events: 0,
      status: Object.fromEntries(STATUSES.map((s) => [s, 0])),
    };
  }

  add(name, n = 1) {
    this.values[name] += n;
  }

  /** A refusal with status (counted when it is one the stats name). */
  status(code) {
    if (this.values.status[code] !== undefined) this.values.status[code]++;
  }
}

/** The SSE responses open now, each with what gives its client's place back. */
class Responses {
  constructor(counters) {
    this._open = new Map(); // response -> release
    this._counters = counters;
  }

  add(conn, release) {
    this._open.set(conn, release);
    this._counters.add(OPEN[conn.kind]);
  }

  /** The response has ended: its client's place is given back. */
  remove(conn) {
    const release = this._open.get(conn);
    if (release === undefined) return;
    this._open.delete(conn);
    release();
    this._counters.add(OPEN[conn.kind], -1);
  }

  get size() { return this._open.size; }

  [Symbol.iterator]() { return this._open.keys(); }
}

/** The context object: parts is everything but counters and responses, which it makes. */
function createContext(parts) {
  const counters = new Counters();
  return Object.freeze({ ...parts, counters, responses: new Responses(counters) });
}

module.exports = { createContext, Counters, Responses };
