'use strict';
// POST /agents/<table>/<key>: a row's stream as one AG-UI run, for
// @ag-ui/client's HttpAgent, and the application's own work behind it.
//
//   RUN_STARTED {threadId, runId (the input's), protocolVersion}
//   the prelude and the events (follow.js)
//   RUN_FINISHED {outcome, result: {stream, seq, reason, ...}}, or RUN_ERROR
//
// Without a run hook the run follows the row until it ends (reason
// stream_end), its longest duration passes (max_duration) or the gateway
// closes (gateway_closed): outcome success.  Pending interrupts do not end
// it: it reports them (CUSTOM hx.interrupts, when they change) and goes on.
//
// With createGateway({run}), once the prelude is queued the gateway calls
//
//   run(input, target, {signal, json})
//
// with the RunAgentInput (input.js checked its depth and its shape, with
// @ag-ui/core's schema: threadId, runId, messages, tools, context, state,
// forwardedProps, resume), the target {table, key, stream}, an
// AbortSignal, and the input as JSON text (serialised before the hook is
// called, so that a hook that hands it to a process it starts never fails
// to serialise it afterwards).  The signal aborts whenever the run ends,
// however it ends, its reason saying how ("completed", "interrupt",
// "stream_end", "error", "client_closed", "max_duration",
// "gateway_closed"): whatever the hook started with it ends with its run.
// (After an interrupt, whose work has paused, only if the hook has not
// settled within INTERRUPT_GRACE_MS: its process is finishing.)
// A run that calls the hook holds a place of its thread, its token and of
// all runs until it has ended and the hook's promise has settled
// (runs.js).  The hook starts the
// application's work for the input (a row to insert, a job to queue, a
// call to an agent runtime that writes the row's state) and returns a
// promise that resolves once that work has committed what it writes.
// Meanwhile the run streams what the work writes.  Then:
//
//   the promise resolves      the run waits until it has sent the stream's
//                             head as of then, and finishes: outcome success,
//                             result.reason "completed" (and result.output,
//                             what the promise resolved to, when not undefined),
//                             or outcome interrupt if interrupts are pending
//   the state shows an        outcome interrupt with interrupts[], at once
//   interrupt not answered    (the work has paused; its promise is not
//   by this run's resume[]    waited for)
//   the promise rejects       RUN_ERROR: code err.code (a string) or
//                             "hxstate_run_failed"; message err.message if
//                             err.expose is true, else "the run failed"
//   the row ends              outcome success, reason stream_end
//   max duration, or the      outcome cancelled
//   gateway closes
//   the client goes away      nothing more is sent
//
// Interrupts (AG-UI 1.0): the row's pending interrupts are at the table's
// interrupt path.  A POST on a row with pending interrupts must answer
// every one in resume[] (the hook then gets them, to resume the work);
// otherwise, with a hook, RUN_ERROR code "hxstate_interrupt_pending"
// before the hook is called; a resume[] naming an interrupt that is not
// pending gets RUN_ERROR "hxstate_resume_unknown".  A gateway without a
// hook cannot take resume[] (400): ending a run with outcome interrupt
// would leave @ag-ui/client refusing its next run, so it reports pending
// interrupts as CUSTOM hx.interrupts events instead, and the application
// that runs the agent answers them.  A reconnect (Last-Event-ID) on a
// gateway with a hook ends with outcome interrupt, which the next run's
// resume[] answers through the hook.
//
// Once the hook's promise resolves, the run reads the stream's head (a
// subscription of its own, stopped once ready) and finishes once it has
// sent it; state and messages go out before the RUN_FINISHED (follow.js
// queues the conversation before it hands over interrupts).
//
// A POST with Last-Event-ID reconnects to a run's stream: it resumes as a
// GET does, and does not call the hook again.
const { SseResponse } = require('./sse');
const { Follower } = require('./follow');
const { frameFor } = require('./frames');
const { statusOf, finishedEntry, PROTOCOL_VERSION } = require('./stream');
const { MAX_TIMER_MS } = require('./timers');

// How long a hook whose run ended with an interrupt has to settle before
// its signal aborts.
const INTERRUPT_GRACE_MS = 5000;

function serveRun(ctx, req, res, { target, table, clientId, release, after, input, json, maxDurationMs, slot, scopes, connect = false }) {
  const conn = new SseResponse(ctx, req, res, { kind: 'run', clientId, release, seq: after });
  const { threadId, runId } = input;
  const hook = after === null && !connect ? ctx.config.run : null;
  const answered = new Set((input.resume || []).map((r) => r.interruptId));
  const controller = new AbortController();
  let hookState = hook ? 'waiting' : 'none'; // waiting | running | done
  let doneAt = null;   // the head once the hook resolved
  let output;
  let finished = false;
  let timer = null;

  // the hook's signal aborts whenever the run ends, however it ends: a
  // process the hook started (execFile with the signal) ends with its run.
  // But for an interrupt: the work has paused (the interrupt is
  // committed), and its process is finishing (a LangGraph graph prints
  // its report and exits); it gets INTERRUPT_GRACE_MS to settle first
  let grace = null;
  const abort = (reason) => {
    if (slot) slot.ended();
    if (controller.signal.aborted || grace) return;
    if (reason === 'interrupt' && hookState === 'running') {
      grace = setTimeout(() => { if (!controller.signal.aborted) controller.abort(reason); }, INTERRUPT_GRACE_MS);
      grace.unref();
      return;
    }
    controller.abort(reason);
  };
  let probe = null; // the subscription that reads the head once the hook resolved
  const stopProbe = () => {
    const sub = probe;
    probe = null;
    if (sub) sub.stop();
  };
  const end = (entry, reason) => {
    finished = true;
    clearTimeout(timer);
    f.stop();
    stopProbe();
    abort(reason);
    f.preface();
    f.closeAll(); // AG-UI: a run finishes with nothing open
    conn.push(entry);
    conn.end();
  };
  const finish = (outcome, reason, extra) => {
    if (finished || conn.closed) return;
    end(finishedEntry(threadId, runId, outcome,
      { stream: f.stream || target.stream, seq: f.sent === null ? (after || 0) : f.sent, reason, ...(extra || {}) }), reason);
  };
  const error = (message, code) => {
    if (finished || conn.closed) return;
    end({ ...frameFor({ type: 'RUN_ERROR', message, code, timestamp: Date.now() }), keep: true }, 'error');
  };
  const interrupted = (list) => finish({ type: 'interrupt', interrupts: list }, 'interrupt');
  const started = () => ({ ...frameFor({ type: 'RUN_STARTED', threadId, runId, protocolVersion: PROTOCOL_VERSION, timestamp: Date.now() }), keep: true });
  const unanswered = (list) => list.filter((i) => !answered.has(i.id));
  // A gateway without a run hook cannot take resume[]: ending a run with
  // outcome interrupt would leave HttpAgent refusing its next run (pending
  // interrupts block new input).  So it reports them instead, as a CUSTOM
  // hx.interrupts event, in the prelude when there are and whenever they
  // change, and the run goes on: the application that runs the agent
  // answers them, and the run shows the agent going on.
  const reports = !ctx.config.run;
  let reported = '[]';
  const report = (list) => {
    const text = JSON.stringify(list);
    if (text === reported) return;
    reported = text;
    const entry = frameFor({ type: 'CUSTOM', name: 'hx.interrupts', value: { interrupts: list }, timestamp: Date.now() });
    if (entry.ok) f.send(entry);
  };
  // connect: the run in progress (its marker started and not yet
  // finished or failed), if any, is followed to its end
  const inProgress = () => f.open.run !== null && f.open.run.status === 'started';
  const checkDone = () => {
    if (connect && !finished && f.preluded && !inProgress()) finish({ type: 'success' }, 'run_ended');
    if (doneAt === null || finished || f.sent === null || f.sent < doneAt) return;
    if (f.interrupts.length > 0) interrupted(f.interrupts);
    else finish({ type: 'success' }, 'completed', output === undefined ? undefined : { output });
  };

  const callHook = () => {
    hookState = 'running';
    let p;
    try {
      p = Promise.resolve(hook(input, { table: target.table, key: target.key, stream: target.stream, scopes }, { signal: controller.signal, json }));
    } catch (err) {
      p = Promise.reject(err);
    }
    if (slot) slot.hook(p);
    p.finally(() => clearTimeout(grace)).catch(() => {});
    p.then((value) => {
      hookState = 'done';
      output = value;
      if (finished) return;
      // the stream's head now: once sent, the run is complete.  The probe
      // is stopped once it is ready (its snapshot handed out), not in its
      // listener: stopping it there would reject its ready
      const sub = ctx.hub.follow({ table: target.table, key: target.key }, { state: false });
      probe = sub;
      let head = null;
      sub.once('event', (event) => { head = event.metadata.seq; });
      sub.ready.then(() => {
        sub.stop();
        if (finished || head === null) return;
        doneAt = head;
        checkDone();
      }, (err) => {
        if (probe === sub) error(`the stream could not be read: ${err.message}`, 'hxstate_failed');
      });
    }, (err) => {
      hookState = 'done';
      if (finished) {
        ctx.log('warn', `${target.stream}: run ${runId} failed after it finished: ${err && err.message}`);
        return;
      }
      ctx.log('warn', `${target.stream}: run ${runId} failed: ${err && (err.stack || err.message)}`);
      error(err && err.expose === true ? String(err.message) : 'the run failed',
        err && typeof err.code === 'string' && err.code !== '' ? err.code : 'hxstate_run_failed');
    });
  };

  const f = new Follower(ctx, target, table, conn, {
    preface: started,
    prelude: () => {
      const pending = f.interrupts;
      const open = unanswered(pending);
      const stale = [...answered].filter((id) => !pending.some((i) => i.id === id));
      if (hook && stale.length > 0) {
        error(`resume[] answers interrupt(s) that are not pending: ${stale.join(', ')}`, 'hxstate_resume_unknown');
      } else if (hook && open.length > 0) {
        error(`the thread waits on interrupt(s) ${open.map((i) => i.id).join(', ')}: answer each in resume[]`, 'hxstate_interrupt_pending');
      } else if (reports) {
        report(pending);
      } else if (!hook && pending.length > 0) {
        interrupted(pending);
      } else if (hook) {
        callHook();
      }
      if (connect && !finished && !inProgress()) finish({ type: 'success' }, 'idle');
    },
    interrupts: (list) => {
      if (!f.preluded || finished) return;
      if (reports) report(list);
      else if (hookState !== 'none' ? unanswered(list).length > 0 : list.length > 0) interrupted(list);
    },
    event: checkDone,
    end: (event) => finish({ type: 'success' }, 'stream_end', { end: event.value === undefined ? null : event.value }),
    gone: () => finish({ type: 'success' }, 'stream_end'),
    fail: (err) => {
      // a subscription that could not start: a status; anything later (or
      // a state past maxStateBytes, err.agui) ends the run with RUN_ERROR
      if (!f.started && !err.agui) {
        f.stop();
        finished = true;
        abort('error');
        conn.end(statusOf(err), err.message);
        return;
      }
      error(err.message, err.agui || 'hxstate_failed');
    },
  });
  const limits = [ctx.config.maxRunMs, maxDurationMs].filter((ms) => ms > 0);
  const cancelled = hook ? { type: 'cancelled' } : { type: 'success' };
  // a timer's delay is at most 2^31 - 1 ms (Node fires a longer one at once):
  // a longer limit is that long
  if (limits.length > 0) timer = setTimeout(() => finish(hookState === 'done' ? { type: 'success' } : cancelled, 'max_duration'), Math.min(...limits, MAX_TIMER_MS));
  conn.onClosed(() => {
    clearTimeout(timer);
    f.stop();
    stopProbe();
    abort('client_closed'); // the client went away (or, after the run's end, a no-op)
    finished = true;
  });
  conn.onFinish(() => finish(hookState === 'done' ? { type: 'success' } : cancelled, 'gateway_closed'));
  f.start(after);
}

module.exports = { serveRun };
