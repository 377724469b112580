'use strict';
// A hub in a process of its own, for hub-faults.test.js, which kills it
// with kill -9.  It follows the keys it is given, each from its resume
// point when it has one (the events after that seq, from the log) or from
// a snapshot, and appends every event it hands out to a file as one JSON
// line, written synchronously (one write(2) each) as it hands it out: so
// the file holds exactly the events handed out, whenever the process dies.
//
//   node hub-child.js '{"pg": {...}, "table": "t", "keys": [...], "resume": {"k": 7}, "out": "/tmp/x"}'
const fs = require('node:fs');
const { HxHub } = require('..');

// `node --test client/test/` runs every file under a test directory, this
// one too: without its configuration there is nothing to do.
if (process.argv[2] === undefined) process.exit(0);
const cfg = JSON.parse(process.argv[2]);
const fd = fs.openSync(cfg.out, 'a');
const hub = new HxHub({ pg: cfg.pg, transport: cfg.transport || 'auto', pollInterval: 500, reconnect: { min: 50, max: 500 } });

hub.start().then(async () => {
  const subs = cfg.keys.map((key) => {
    const after = cfg.resume[key];
    const sub = hub.follow({ table: cfg.table, key }, after === undefined ? {} : { after });
    sub.on('resync', (info) => fs.writeSync(fd, `${JSON.stringify({ k: key, resync: info.seq })}\n`));
    sub.on('event', (event) => fs.writeSync(fd, `${JSON.stringify({ k: key, e: event })}\n`));
    return sub;
  });
  await Promise.all(subs.map((s) => s.ready));
  process.stdout.write(`ready ${hub.transport} ${hub.slot || '-'}\n`);
}, (err) => {
  process.stderr.write(`hub-child: ${err.stack}\n`);
  process.exit(1);
});
