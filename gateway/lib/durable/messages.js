'use strict';
// The messages of a request body.  A JSON stream keeps each JSON value as
// one message, and a body that is an array is that many messages (one
// level flattened, as the protocol says: [[1,2],[3]] is two messages); any
// other content type keeps the body, as it came, as one message.
const { HttpError } = require('../limits');

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The messages of a JSON body, each as its JSON text.  An empty array is
 * no message: refused in an append (400), an empty stream in a create.
 */
function jsonMessages(body, { create = false } = {}) {
  let value;
  try {
    value = JSON.parse(utf8.decode(body));
  } catch (err) {
    throw new HttpError(400, `the body is not JSON: ${err instanceof RangeError ? 'nested too deeply' : err.message}`);
  }
  const values = Array.isArray(value) ? value : [value];
  if (values.length === 0 && !create) throw new HttpError(400, 'an append of an empty JSON array appends nothing: refused');
  try {
    return values.map((v) => JSON.stringify(v));
  } catch (err) {
    throw new HttpError(400, 'the body is JSON nested too deeply');
  }
}

/** A JSON stream's response body: its messages as one array. */
function jsonArray(texts) {
  return `[${texts.join(',')}]`;
}

module.exports = { jsonMessages, jsonArray };
