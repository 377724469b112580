'use strict';
// @ag-ui/client's HttpAgent runs a thread's stream from hxstate-gateway as
// an AG-UI run, as an application would, and prints the state it ends with
// (for test_gateway.py).   node agui_client.js PORT PATH MS
const { HttpAgent } = require('@ag-ui/client');

const [port, path, ms] = process.argv.slice(2);
const agent = new HttpAgent({ url: `http://127.0.0.1:${port}${path}` });
let state;
let types = [];
agent
  .runAgent({ forwardedProps: { hxstate: { maxDurationMs: Number(ms || 500) } } }, {
    onEvent: ({ event }) => { types.push(event.type); },
    onStateChanged: ({ state: s }) => { state = s; },
  })
  .then(() => console.log(JSON.stringify({ state, types })))
  .catch((err) => {
    console.error(err.message);
    process.exitCode = 1;
  });
