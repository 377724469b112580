'use strict';
// Reads a run's events (a JSON array, on standard input) as a thread's log
// holds them, and checks them with @ag-ui/client's verifier: the whole run,
// and, for every cut, the prelude that reopens what is open there
// (client/lib/constructs.js, what the gateway and RunFollower send to a
// follower that joins or comes back there) followed by the rest.  Prints
// {"cuts": N} and exits 0, or prints the refusal and exits 1.
const { from, lastValueFrom, toArray } = require('rxjs');
const { verifyEvents } = require('@ag-ui/client');
const C = require('../../client/lib/constructs');

const verify = (events) => lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
const RUN = (events) => [{ type: 'RUN_STARTED', threadId: 't', runId: 'r' }, ...events, { type: 'RUN_FINISHED', threadId: 't', runId: 'r' }];

(async () => {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const log = JSON.parse(Buffer.concat(chunks).toString());
  const events = log.filter((e) => !/^STATE_|^CUSTOM$|^MESSAGES_SNAPSHOT$/.test(e.type));
  let state = C.emptyConstructs();
  let cuts = 0;
  for (let cut = 0; cut <= log.length; cut++) {
    const rest = log.slice(cut).filter((e) => !/^STATE_|^CUSTOM$|^MESSAGES_SNAPSHOT$/.test(e.type));
    await verify(RUN([...C.reopen(state), ...rest]));
    cuts++;
    if (cut < log.length) {
      const r = C.applyConstruct(state, log[cut]);
      if (!r.ok) throw new Error(`event ${cut} (${log[cut].type}) is refused: ${r.reason}`);
      state = r.state;
    }
  }
  await verify(RUN(events));
  console.log(JSON.stringify({ cuts }));
})().catch((err) => {
  console.log(String(err && err.stack ? err.stack : err));
  process.exit(1);
});
