'use strict';
// The body of POST /agents: a RunAgentInput, checked and serialised before
// anything acts on it.
//
//   - its size: at most maxBody bytes (limits.js reads it);
//   - its depth: at most maxInputDepth nested arrays and objects (64 by
//     default), counted on the bytes before they are parsed.  JSON.parse
//     takes a value nested 5,000 deep, but JSON.stringify and every
//     recursive reader after it (a run hook's child process, Python's json,
//     a database driver) overflow their stack on it;
//   - its shape: @ag-ui/core's RunAgentInputSchema;
//   - its JSON text: serialised here, once, so that a run hook that hands
//     the input to another process (on standard input, say) never has to
//     serialise it itself after it has started that process.
// A body that fails any of these gets 400, and no run hook is called.
const { RunAgentInputSchema } = require('@ag-ui/core/schemas');
const { HttpError } = require('./limits');

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN = new Set([0x5b, 0x7b]);   // [ {
const CLOSE = new Set([0x5d, 0x7d]);  // ] }

/**
 * Does the JSON text in buf nest arrays and objects deeper than max?  A
 * scan of the bytes, outside strings (a byte of a multi-byte UTF-8
 * character is never an ASCII bracket or quote), that stops as soon as it
 * knows.
 */
function deeperThan(buf, max) {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i];
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (OPEN.has(c)) {
      if (++depth > max) return true;
    } else if (CLOSE.has(c)) {
      depth--;
    }
  }
  return false;
}

/**
 * The RunAgentInput of a body (a Buffer): {input, json, maxDurationMs};
 * HttpError 400 when it is not one (or, for a run without a hook or a
 * connect, when it has a resume[]).  json is the input (as the schema
 * parsed it) as JSON text.
 */
function parseInput(body, { hook, maxDepth, connect = false }) {
  if (deeperThan(body, maxDepth)) {
    throw new HttpError(400, `the body nests deeper than ${maxDepth} arrays and objects`);
  }
  let value;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new HttpError(400, 'the body is not JSON');
  }
  const r = RunAgentInputSchema.safeParse(value);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new HttpError(400, `the body is not a RunAgentInput: ${issue.path.join('.')}: ${issue.message}`);
  }
  const input = r.data;
  if (input.resume && input.resume.length > 0 && connect) {
    throw new HttpError(400, 'a connect takes no resume[]: it joins the thread; answer its interrupts in a run (POST /agents/<table>/<key>)');
  }
  if (input.resume && input.resume.length > 0 && !hook) {
    throw new HttpError(400, 'this gateway has no run hook: it reports interrupts as hx.interrupts events and takes no resume[]; ' +
      'answer them through the application that runs the agent');
  }
  let json;
  try {
    json = JSON.stringify(input);
  } catch (err) {
    throw new HttpError(400, `the body cannot be serialised again: ${err.message}`);
  }
  const props = input.forwardedProps && input.forwardedProps.hxstate;
  const maxMs = props && Number.isFinite(props.maxDurationMs) && props.maxDurationMs > 0 ? props.maxDurationMs : 0;
  return { input, json, maxDurationMs: maxMs };
}

module.exports = { parseInput, deeperThan };
