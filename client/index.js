'use strict';
// hxstate-client: follow hxstate streams (AG-UI state events, resumable
// from the event log without gaps), one (HxStream) or thousands (HxHub).
//
//   const { HxHub } = require('hxstate-client');
//   const hub = new HxHub({ pg: { database: 'app' } });
//   await hub.start();
//   const sub = hub.follow({ table: 'sessions', key: 's-42' });
//   sub.on('event', (event, state) => { ... });
//
//   const { HxStream } = require('hxstate-client');
//   const stream = new HxStream({ table: 'sessions', key: 's-42' });
//   stream.on('event', (event, state) => { ... });
//   await stream.start();
//
//   const { HxShardedHub } = require('hxstate-client');   // sessions on PL/Proxy shards
//   const hub = new HxShardedHub({ router: { database: 'router' } });
//
//   const { RunWriter } = require('hxstate-client');      // an agent's run, streamed to a stream
//   const run = new RunWriter({ pg }).open({ table: 'sessions', key: 's-42' });
//
// See README.md for the API and the protocol.
const { HxStream } = require('./lib/stream');
const { HxHub, HxSubscription } = require('./lib/hub');
const { HxShardedHub } = require('./lib/sharded');
const { applyEvent, isStreamEnd, STREAM_END } = require('./lib/apply');
const { RunWriter } = require('./lib/writer');
const constructs = require('./lib/constructs');
const { openAt } = require('./lib/runlog');
const { RunFollower } = require('./lib/runfollow');

module.exports = {
  HxHub, HxSubscription, HxStream, HxShardedHub, applyEvent, isStreamEnd, STREAM_END,
  RunWriter, RunFollower, constructs, openAt,
};
