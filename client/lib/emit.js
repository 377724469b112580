'use strict';
// Calling an emitter's listeners without letting them disturb the caller's
// bookkeeping: what HxHub, HxSubscription and HxStream share.
//
// A listener that throws, or returns a promise that rejects, has its error
// handed to onError (the emitter's 'error' route), and the caller goes on:
// an application's bug in one listener must neither stop a stream nor end
// the process (an unhandled rejection does, in Node 15 and later).

/**
 * Call every listener of name with args.  Returns null, or when any
 * listener returned a promise (a thenable), one promise that settles when
 * all of them have; it never rejects.  Each failure goes to onError.
 * @param {import('node:events').EventEmitter} emitter
 * @param {string} name
 * @param {any[]} args
 * @param {(err: Error) => void} onError
 * @returns {Promise<void> | null}
 */
function callListeners(emitter, name, args, onError) {
  let waits = null;
  for (const fn of emitter.rawListeners(name)) {
    let r;
    try {
      r = fn.apply(emitter, args);
    } catch (err) {
      onError(asError(err));
      continue;
    }
    if (r && typeof r.then === 'function') {
      const settled = Promise.resolve(r).then(noop, (err) => onError(asError(err)));
      (waits || (waits = [])).push(settled);
    }
  }
  if (!waits) return null;
  return waits.length === 1 ? waits[0] : Promise.all(waits).then(noop);
}

/**
 * callListeners for a list of listeners the caller already has (taken
 * before the first is called, as emit() does), with two arguments.
 */
function callEach(listeners, emitter, a, b, onError) {
  let waits = null;
  for (let i = 0; i < listeners.length; i++) {
    let r;
    try {
      r = listeners[i].call(emitter, a, b);
    } catch (err) {
      onError(asError(err));
      continue;
    }
    if (r && typeof r.then === 'function') {
      const settled = Promise.resolve(r).then(noop, (err) => onError(asError(err)));
      (waits || (waits = [])).push(settled);
    }
  }
  if (!waits) return null;
  return waits.length === 1 ? waits[0] : Promise.all(waits).then(noop);
}

/** emit(name, ...args), with a listener's failure handed to onError. */
function emitSafe(emitter, name, args, onError) {
  callListeners(emitter, name, args, onError);
}

/**
 * 'error' only when someone listens: an 'error' nobody listens to would
 * end the process, and these are errors the emitter recovers from.  A
 * listener of 'error' that fails itself is rethrown on its own tick, as
 * from any callback (there is no one left to tell).
 */
function emitError(emitter, err) {
  if (emitter.listenerCount('error') === 0) return false;
  callListeners(emitter, 'error', [err], (e) => process.nextTick(() => { throw e; }));
  return true;
}

/**
 * A listener failed and no one listens for 'error': say so on stderr (a
 * process warning) rather than end the process or drop it silently.
 */
function warnUnheard(err) {
  process.emitWarning(`a listener failed and nothing listens for 'error': ${err && err.stack ? err.stack : err}`,
    'HxStateWarning');
}

/** Wait for promise, at most ms (a hung statement must not hold a stop() forever). */
function settle(promise, ms) {
  let timer;
  return Promise.race([
    Promise.resolve(promise).then(noop, noop),
    new Promise((resolve) => { timer = setTimeout(resolve, ms); }),
  ]).finally(() => clearTimeout(timer));
}

function asError(err) {
  return err instanceof Error ? err : new Error(`a listener failed with ${String(err)}`);
}

function noop() {}

module.exports = { callListeners, callEach, emitSafe, emitError, warnUnheard, settle, noop };
