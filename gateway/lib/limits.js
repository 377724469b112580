'use strict';
// What one client, and all of them, may make the gateway spend on requests.
//
//   - open responses per client (clientId), counted from the moment a
//     request is authorised, before its body is read: a POST whose body
//     has not arrived holds its place as an open stream does;
//   - a request body: at most maxBody bytes, all of them within bodyMs
//     (else 408), and at most maxBodyTotal bytes of bodies in all being
//     read at once (else 503 with Retry-After): what bodies cost is
//     bounded in bytes whoever sends them.  A body is parsed once it has
//     all arrived: JSON.parse and @ag-ui/core's schema on at most maxBody
//     bytes (1 MiB by default: a few milliseconds of the event loop).
class HttpError extends Error {
  /** status, message, extra headers (or null), and a code for the JSON body (or none). */
  constructor(status, message, headers, code) {
    super(message);
    this.status = status;
    this.headers = headers || null;
    if (code !== undefined) this.code = code;
  }
}

/** Open responses per client. */
class ClientSlots {
  constructor(max) {
    this.max = max;
    this._n = new Map();
  }

  count(id) { return this._n.get(id) || 0; }

  /** Take a slot for id; HttpError 429 when it has max already.  Returns the release function (idempotent). */
  take(id) {
    const n = this.count(id);
    if (n >= this.max) {
      throw new HttpError(429, `too many open streams from this client (${this.max})`, { 'retry-after': '10' });
    }
    this._n.set(id, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = this.count(id) - 1;
      if (left > 0) this._n.set(id, left);
      else this._n.delete(id);
    };
  }
}

/** Reads request bodies within the per-request and total bounds. */
class BodyReader {
  constructor({ maxBody, maxBodyTotal, bodyMs }) {
    this.maxBody = maxBody;
    this.maxBodyTotal = maxBodyTotal;
    this.bodyMs = bodyMs;
    this.inFlight = 0; // bytes of bodies being read now
  }

  /** The body of req as a Buffer; HttpError 413, 408 or 503 (and the socket is closed) when over a bound. */
  read(req) {
    // the client went away while its request was checked: no 'close' will come
    if (req.destroyed) return Promise.reject(new HttpError(400, 'the client went away before its body arrived'));
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > this.maxBody) {
      req.resume(); // discard it as it comes; the response closes the connection
      return Promise.reject(new HttpError(413, `the request body is larger than ${this.maxBody} bytes`, { connection: 'close' }));
    }
    return new Promise((resolve, reject) => {
      const chunks = [];
      let size = 0;
      let done = false;
      const finish = (err, value) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.inFlight -= size;
        req.removeListener('data', onData);
        req.removeListener('end', onEnd);
        req.removeListener('error', onError);
        req.removeListener('close', onClose);
        if (err) {
          chunks.length = 0;
          req.resume(); // discard the rest; the response closes the connection
          reject(err);
        } else {
          resolve(value);
        }
      };
      const onData = (chunk) => {
        if (size + chunk.length > this.maxBody) {
          finish(new HttpError(413, `the request body is larger than ${this.maxBody} bytes`, { connection: 'close' }));
          return;
        }
        if (this.inFlight + chunk.length > this.maxBodyTotal) {
          finish(new HttpError(503, 'too many request bodies are being read: try again later', { 'retry-after': '5', connection: 'close' }));
          return;
        }
        size += chunk.length;
        this.inFlight += chunk.length;
        chunks.push(chunk);
      };
      const onEnd = () => finish(null, Buffer.concat(chunks, size));
      const onError = (err) => finish(new HttpError(400, `the request body could not be read: ${err.message}`));
      const onClose = () => finish(new HttpError(400, 'the client went away before its body arrived'));
      const timer = setTimeout(() => {
        finish(new HttpError(408, `the request body did not arrive within ${this.bodyMs} ms`, { connection: 'close' }));
      }, this.bodyMs);
      req.on('data', onData);
      req.on('end', onEnd);
      req.on('error', onError);
      req.on('close', onClose);
    });
  }
}

module.exports = { HttpError, ClientSlots, BodyReader };
