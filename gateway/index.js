'use strict';
// hxstate-gateway: hxstate streams for browsers and @ag-ui/client, over
// server-sent events, with a live view.  See README.md.
//
//   const { createGateway } = require('hxstate-gateway');
//   const gateway = createGateway({ pg: process.env.DATABASE_URL, tables: ['sessions'], secret });
//   await gateway.ready;
//   createServer(gateway).listen(8080);   // http.Server with the server's own bounds
const { createGateway, Gateway } = require('./lib/gateway');
const { createServer } = require('./lib/server');
const { mintToken, verifyToken, tokenAuthorizer, requestToken } = require('./lib/token');
const { refusal } = require('./lib/frames');
const { messagesOf, interruptsOf, capabilitiesOf } = require('./lib/agui');
const { setupDurable } = require('./lib/durable/setup');
const { durableToken } = require('./lib/durable/auth');

module.exports = {
  createGateway, Gateway, createServer, mintToken, verifyToken, tokenAuthorizer, requestToken, refusal,
  messagesOf, interruptsOf, capabilitiesOf, setupDurable, durableToken,
};
