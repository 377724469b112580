'use strict';
// bench/hub/deliver.js: the CPU per event of the hub's delivery path
// alone, out of the machine's noise (bench/hubdeliver.sh runs it).
//
//   node bench/hub/deliver.js LIBDIR [parse|noparse] [state|nostate]
//
// LIBDIR is a client's lib/ directory.  1,000 subscriptions (one a stream,
// as bench/pgbench/follow.js has them), each live from a snapshot at seq 1,
// with one 'event' listener that counts STATE_DELTA events; 400,000
// events of bench/pgbench/update.sql's shape (two replace ops, 240 bytes
// of JSON text), each to a stream picked in a fixed scattered order, four
// to a macrotask (setImmediate: what a socket read brings), handed to the
// subscriptions through their named interface (entry.saw, noticed, offer,
// need) as the hub's _onWalInsert and _onLogEvent do, the delivery
// through the host callbacks of the hub's (delivered, schedule).  "parse"
// includes each event's JSON text decoded from a Buffer and JSON.parse;
// "state" follows with state: true (the delta applied, as a follower that
// keeps the state does).  Prints {us_per_event, received} as JSON; fails
// unless every event was handed out.
const path = require('node:path');

const lib = path.resolve(process.argv[2]);
const parse = (process.argv[3] || 'parse') === 'parse';
const keepState = (process.argv[4] || 'nostate') === 'state';
const { SubscriptionCore } = require(path.join(lib, 'subscription'));
const { StreamEntry } = require(path.join(lib, 'entry'));
let Drainer = null;
try {
  ({ Drainer } = require(path.join(lib, 'drainer')));
} catch (err) {
  // a client from before drainer.js: its subscriptions queue their own microtasks
}
const drainer = Drainer ? new Drainer() : null;

const STREAMS = 1000;
const TOTAL = 400000;
const PER_TASK = 4;

const host = {
  unfollow() {},
  listenerFailed(err) { throw err; },
  delivered: (core) => { core.need(core.entry); },
  schedule: (core) => drainer.add(core),
};

let received = 0;
const streams = [];
for (let i = 0; i < STREAMS; i++) {
  const key = `s-${String(i + 1).padStart(4, '0')}`;
  const name = `sessions:${key}`;
  const entry = new StreamEntry(name, 'hx_sessions', 'sessions', key);
  const core = new SubscriptionCore(host, { table: 'sessions', key }, { state: keepState },
    { maxQueue: 1000, maxQueueBytes: 8 * 1024 * 1024, maxStateBytes: 8 * 1024 * 1024, tick: 1 });
  core.attach(entry);
  entry.join(core);
  entry.arm();
  const state = { stats: { tool_calls: 0 }, last_tool: 'search', phase: 'chatting' };
  core.takeSnapshot(1, state, null, JSON.stringify(state).length);
  core.subscription.on('event', (event) => {
    if (event.type === 'STATE_DELTA') received++;
  });
  streams.push({ name, nameBytes: Buffer.from(name), entry, seq: 1 });
}
const byName = new Map(streams.map((s) => [s.name, s]));
const TOOLS = ['search', 'read_file', 'run_tests', 'edit'];
const texts = [];
for (let i = 0; i < 64; i++) {
  texts.push(Buffer.from(JSON.stringify({
    type: 'STATE_DELTA',
    delta: [{ op: 'replace', path: '/stats/tool_calls', value: i + 1 }, { op: 'replace', path: '/last_tool', value: TOOLS[i % 4] }],
    metadata: { seq: i + 2, stream: 'sessions:s-0342' },
    timestamp: 1795837726672 + i,
  }).replace(/":/g, '": ').replace(/,"/g, ', "')));
}
const parsed = texts.map((t) => JSON.parse(t.toString()));

let k = 0;
function one() {
  const s0 = streams[(k * 7919) % STREAMS];
  const t = k & 63;
  k++;
  const name = s0.nameBytes.toString('utf8', 0, s0.nameBytes.length);
  const s = byName.get(name);
  const buf = texts[t];
  const event = parse ? JSON.parse(buf.toString('utf8', 0, buf.length)) : parsed[t];
  const seq = ++s.seq;
  s.entry.saw(seq);
  for (const core of s.entry.subs) {
    core.noticed('wal');
    const r = core.offer(seq, event, buf.length);
    if (r !== 'accepted') throw new Error(`bench/hub/deliver.js: event ${seq} of ${s.name}: ${r}`);
    core.need(s.entry);
  }
}

function run(n) {
  return new Promise((resolve) => {
    let done = 0;
    const task = () => {
      for (let j = 0; j < PER_TASK; j++) one();
      done += PER_TASK;
      setImmediate(done < n ? task : resolve);
    };
    task();
  });
}

(async () => {
  await run(TOTAL / 4); // warm up
  const before = received;
  const cpu0 = process.cpuUsage();
  await run(TOTAL);
  const cpu = process.cpuUsage(cpu0);
  const got = received - before;
  if (got !== TOTAL) throw new Error(`bench/hub/deliver.js: ${got} of ${TOTAL} events handed out`);
  process.stdout.write(`${JSON.stringify({ us_per_event: (cpu.user + cpu.system) / TOTAL, received: got })}\n`);
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
