#!/usr/bin/env node
'use strict';
// The hxstate-gateway command: serve, or mint a token.  See README.md.
const { main } = require('../lib/cli');

main(process.argv.slice(2)).then((code) => {
  if (typeof code === 'number') process.exitCode = code;
}, (err) => {
  console.error(`hxstate-gateway: ${err.message}`);
  process.exitCode = 1;
});
