'use strict';
// hxstate-gateway/copilotkit: CopilotKit's AgentRunner, its threads kept in
// hxstate (runner.js).  See README.md, "CopilotKit".
//
//   const { HxAgentRunner } = require('hxstate-gateway/copilotkit');
//   const runtime = new CopilotRuntime({ agents, runner: new HxAgentRunner({ pg: process.env.DATABASE_URL }) });
const { HxAgentRunner } = require('./runner');
const { encode, decode, CopilotKitInputError } = require('./events');
const { STREAM_PREFIX, TABLE } = require('./threads');

module.exports = { HxAgentRunner, CopilotKitInputError, encodeEvent: encode, decodeEvent: decode, STREAM_PREFIX, TABLE };
