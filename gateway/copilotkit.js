'use strict';
// hxstate-gateway/copilotkit: HxAgentRunner, CopilotKit's AgentRunner
// with its threads kept in hxstate (lib/copilotkit/).  See README.md,
// "CopilotKit".
//
//   const { HxAgentRunner } = require('hxstate-gateway/copilotkit');
//   const runtime = new CopilotRuntime({ agents, runner: new HxAgentRunner({ pg: process.env.DATABASE_URL }) });
//
// Needs rxjs (a dependency of @copilotkit/runtime), a peer dependency.
module.exports = require('./lib/copilotkit');
