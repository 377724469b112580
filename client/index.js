'use strict';
// hxstate-client: follow hxstate streams (AG-UI state events from
// PostgreSQL LISTEN/NOTIFY, resumable from the event log without gaps).
//
//   const { HxStream } = require('hxstate-client');
//   const stream = new HxStream({ table: 'sessions', key: 's-42' });
//   stream.on('event', (event, state) => { ... });
//   await stream.start();
//
// See README.md for the API and the protocol.
const { HxStream } = require('./lib/stream');
const { applyEvent, isStreamEnd, STREAM_END } = require('./lib/apply');

module.exports = { HxStream, applyEvent, isStreamEnd, STREAM_END };
