'use strict';
// The gateway on a sharded hxstate: given an HxShardedHub as its hub, it
// serves every shard's sessions at the same URLs, with the same tokens and
// Last-Event-ID resume as on one server, and a session that moves between
// shards while a browser follows it goes on without a gap or a duplicate.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const t = require('./helpers');
const { mintToken } = require('..');
const { HxShardedHub } = require('hxstate-client');
const { makeCluster, shardOf } = require('../../client/test/shard-helpers');

let c;
let hub;
let g;

const auth = (key) => ({ authorization: `Bearer ${mintToken(t.SECRET, `sessions:${key}`)}` });
const url = (key) => `${g.base}/streams/sessions/${encodeURIComponent(key)}`;
const append = (items) => JSON.stringify([{ op: 'append', path: '/todos', items }]);

before(async () => {
  c = await makeCluster('hxsh_gw', 3);
  hub = new HxShardedHub({ router: { database: c.routerDb }, routeInterval: 500 });
  await hub.start();
  // the gateway's own reads (the tables' stream prefixes, the phases) go to
  // a shard: every shard has the same tables and machines
  g = await t.startGateway(c.shards[0], { hub });
});
after(async () => {
  await g.close();
  await hub.stop();
  await c.router.end();
});

test('every shard\'s sessions at the same URLs and tokens; a move under a browser: no gap, no duplicate', async () => {
  const keys = t.range(1, 9).map((i) => `g-${i}`);
  for (const k of keys) await c.router.query("SELECT hxshard.create($1, 'u', NULL, '{\"todos\": []}')", [k]);
  const shards = new Set();
  for (const k of keys) shards.add(await shardOf(c.router, k));
  assert.equal(shards.size, 3, 'the sessions live on three shards');
  const clients = keys.map((k) => t.sse(url(k), { headers: auth(k) }));
  await t.waitFor(() => clients.every((x) => x.seqEvents().length === 1), 'every snapshot');
  for (const x of clients) assert.equal(x.status, 200);
  const moved = keys[0];
  for (let i = 0; i < 6; i++) {
    for (const k of keys) await c.router.query('SELECT hxshard.merge($1, $2)', [k, append([`${k}-${i}`])]);
    if (i === 2 || i === 4) {
      const to = (await shardOf(c.router, moved) + 1) % 3;
      await c.router.query('CALL hxshard.move($1, $2)', [moved, to]);
    }
  }
  await t.waitFor(() => clients.every((x) => x.seqEvents().length === 7), 'every event');
  for (const [i, x] of clients.entries()) {
    const ids = x.messages.filter((m) => m.id !== undefined).map((m) => Number(m.id));
    assert.deepEqual(ids, [1, 2, 3, 4, 5, 6, 7], `${keys[i]}: every seq once, in order`);
    assert.deepEqual(t.stateOf(x.seqEvents()).todos, t.range(0, 5).map((j) => `${keys[i]}-${j}`));
    x.close();
  }
  // Last-Event-ID resume, on the session's new shard
  const r = t.sse(url(moved), { headers: { ...auth(moved), 'last-event-id': '4' } });
  await t.waitFor(() => r.seqEvents().length === 3, 'the events after 4');
  assert.deepEqual(r.messages.filter((m) => m.id !== undefined).map((m) => Number(m.id)), [5, 6, 7]);
  r.close();
  // a token for another session is refused, as on one server
  const bad = t.sse(url(keys[1]), { headers: auth(keys[2]) });
  await t.ended(bad);
  assert.equal(bad.status, 403);
});
