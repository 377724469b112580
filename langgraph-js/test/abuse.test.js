'use strict';
// What a role with UPDATE on the saver's tables can plant, and what
// hostile keys can do: every planted row is refused with a clear error
// (DataCorrupted or Tampered XX001, TypeNotAllowed 22023), never a
// TypeError, a stack overflow, a hang, a changed prototype or a value
// the saver did not write; keys that look like SQL, paths or prototypes
// are stored and read as the text they are.

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const zlib = require('node:zlib');
const { uuid6, emptyCheckpoint } = require('@langchain/langgraph-checkpoint');
const { HxSaver } = require('..');
const { setupSchema, pool } = require('./helpers');

const SCHEMA = 'lgjs_abuse';
const PLANTER = 'lgjs_planter';

/** @param {Record<string, unknown>} values */
function checkpoint(values) {
  const versions = Object.fromEntries(Object.keys(values).map((k) => [k, 1]));
  return { ...emptyCheckpoint(), id: uuid6(-1), channel_values: values, channel_versions: versions };
}
const md = { source: 'input', step: -1, parents: {} };

test('rows planted by a role with UPDATE on the tables', { timeout: 120000 }, async (t) => {
  await setupSchema(SCHEMA);
  const p = pool();
  t.after(() => p.end());
  await p.query(`DO $$ BEGIN CREATE ROLE ${PLANTER}; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
  await p.query(`GRANT USAGE ON SCHEMA ${SCHEMA} TO ${PLANTER}; GRANT SELECT, UPDATE ON ${SCHEMA}.checkpoints, ${SCHEMA}.writes TO ${PLANTER}`);
  const saver = new HxSaver(p, { schema: SCHEMA });

  /**
   * A thread of two checkpoints (a snapshot, a delta) with a pending write,
   * then `set` planted by the role into one of its rows.
   * @param {'root' | 'child' | 'write'} where
   * @param {string} set  SQL SET clause
   * @param {unknown[]} [params]
   */
  async function plant(where, set, params = []) {
    const thread = `abuse-${crypto.randomBytes(6).toString('hex')}`;
    const c1 = await saver.put({ configurable: { thread_id: thread } }, checkpoint({ messages: [{ id: 'a', t: 1 }], n: 1 }), md, { messages: 1, n: 1 });
    const cp2 = checkpoint({ messages: [{ id: 'a', t: 1 }, { id: 'b' }], n: 1 });
    const c2 = await saver.put(c1, cp2, { ...md, source: 'loop', step: 0 }, { messages: 2 });
    await saver.putWrites(c2, [['x', { ok: 1 }]], 'task');
    const table = where === 'write' ? 'writes' : 'checkpoints';
    const id = where === 'root' ? c1.configurable.checkpoint_id : c2.configurable.checkpoint_id;
    const client = await p.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL ROLE ${PLANTER}`);
      const n = params.length;
      await client.query(`UPDATE ${SCHEMA}.${table} SET ${set} WHERE thread_id = $${n + 1} AND checkpoint_id = $${n + 2}`, [...params, thread, id]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    return { thread, c2 };
  }

  /**
   * A fresh saver's get and list of the planted thread fail with `code`.
   * @param {{ thread: string, c2: any }} planted
   * @param {string} code
   * @param {RegExp} message
   */
  async function refused(planted, code, message) {
    const fresh = new HxSaver(p, { schema: SCHEMA });
    const check = (/** @type {any} */ err) => {
      assert.equal(err.code, code, `${err.name} ${err.code}: ${err.message}`);
      assert.match(err.message, message);
      return true;
    };
    await assert.rejects(fresh.getTuple({ configurable: { thread_id: planted.thread } }), check);
    await assert.rejects(async () => {
      for await (const _ of new HxSaver(p, { schema: SCHEMA }).list({ configurable: { thread_id: planted.thread } }));
    }, check);
  }

  const cases = /** @type {[string, 'root' | 'child' | 'write', string, unknown[], string, RegExp][]} */ ([
    ['a delta that is not an array', 'child', `delta = '{"op": "add"}'`, [], 'XX001', /is not an array/],
    ['an op of no kind the saver writes', 'child', `delta = '[{"op": "move", "path": "/n"}]'`, [], 'XX001', /unknown op/],
    ['an op below a channel', 'child', `delta = '[{"op": "add", "path": "/n/x", "value": 1}]'`, [], 'XX001', /not a channel's path/],
    ['an upsert without items', 'child', `delta = '[{"op": "upsert", "path": "/messages"}]'`, [], 'XX001', /without items/],
    ['a copy of the list into itself (a cycle)', 'child', `delta = '[{"op": "copy", "from": "/messages", "path": "/messages/-"}]'`, [], 'XX001', /LangGraph's own channels/],
    ['a copy through the prototype', 'child', `delta = '[{"op": "copy", "from": "/__proto__/constructor", "path": "/messages/-"}]'`, [], 'XX001', /does not hold/],
    ['a snapshot that is not an object', 'root', `snapshot = '[1, 2]'`, [], 'XX001', /not an object/],
    ['a snapshot nested 5,000 levels deep', 'root', `snapshot = $1::json`, [`{"n": ${'['.repeat(5000)}${']'.repeat(5000)}}`], 'XX001', /nested deeper/],
    ['a message whose content is a number', 'root', `snapshot = '{"messages": [{"type": "human", "content": 5, "additional_kwargs": {}, "response_metadata": {}}]}'`, [], 'XX001', /content/],
    ['a Python object (msgpack) naming os.system', 'root', `snapshot = $1::json`, [JSON.stringify({ n: { $hx: 'serde', type: 'msgpack', data: Buffer.from('\xc7\x1b\x00\x93\xa2os\xa6system\x91\xa2id', 'latin1').toString('base64') } })], '22023', /Python object/],
    ['a tag the saver never writes', 'root', `snapshot = '{"n": {"$hx": "eval", "code": "process.exit()"}}'`, [], 'XX001', /unknown \$hx tag/],
    ['an envelope in a plain thread', 'child', `delta = '{"$hx": "sealed", "k": "k1", "c": {}, "d": "AAAA"}'`, [], 'XX001', /no key/],
    ['bookkeeping that is not zlib', 'child', `packed = '\\x00010203'`, [], 'XX001', /does not inflate/],
    ['bookkeeping under another dictionary', 'child', `packed = $1`, [Buffer.from([0x78, 0xbb, 0, 0, 0, 1, 0])], 'XX001', /dictionary/],
    ['a parent cycle without a snapshot', 'child', `snapshot = NULL, base_id = 'zzz', parent_checkpoint_id = checkpoint_id`, [], 'XX001', /cannot be rebuilt/],
    ['a write referring outside its state', 'write', `value = '{"$hx": "state", "path": "/__proto__/polluted"}'`, [], 'XX001', /does not hold/],
    ['a write packed as garbage', 'write', `value = NULL, packed = '\\xdeadbeef'`, [], 'XX001', /does not inflate/],
    ['a stored message that is no class (lc constructor) stays data', 'root', `snapshot = '{"n": {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "AIMessage"], "kwargs": {}}, "messages": []}'`, [], '', /./],
  ]);
  for (const [what, where, set, params, code, message] of cases) {
    await t.test(what, async () => {
      const planted = await plant(where, set, params);
      if (code) {
        await refused(planted, code, message);
        return;
      }
      const tuple = await new HxSaver(p, { schema: SCHEMA }).getTuple({ configurable: { thread_id: planted.thread, checkpoint_id: (await p.query(`SELECT min(checkpoint_id) AS id FROM ${SCHEMA}.checkpoints WHERE thread_id = $1`, [planted.thread])).rows[0].id } });
      const n = /** @type {any} */ (tuple?.checkpoint.channel_values.n);
      assert.equal(Object.getPrototypeOf(n), Object.prototype, 'a plain object, not a message');
      assert.deepEqual(n.id, ['langchain_core', 'messages', 'AIMessage']);
    });
  }

  await t.test('keys named __proto__ or constructor are data, and no prototype changes', async () => {
    const planted = await plant('root', `snapshot = '{"__proto__": {"polluted": 1}, "n": {"__proto__": {"polluted": 2}, "constructor": 3}, "messages": []}'`);
    const tuple = await new HxSaver(p, { schema: SCHEMA }).getTuple({ configurable: { thread_id: planted.thread, checkpoint_id: (await p.query(`SELECT min(checkpoint_id) AS id FROM ${SCHEMA}.checkpoints WHERE thread_id = $1`, [planted.thread])).rows[0].id } });
    const values = /** @type {any} */ (tuple?.checkpoint.channel_values);
    assert.equal(/** @type {any} */ ({}).polluted, undefined);
    assert.equal(Object.getPrototypeOf(values), Object.prototype);
    assert.deepEqual(Object.getOwnPropertyDescriptor(values, '__proto__')?.value, { polluted: 1 });
    assert.deepEqual(Object.getOwnPropertyDescriptor(values.n, '__proto__')?.value, { polluted: 2 });
    assert.equal(values.n.constructor, 3);
    // and such a state is written back as it was
    const thread = `proto-${crypto.randomBytes(4).toString('hex')}`;
    const back = await saver.put({ configurable: { thread_id: thread } }, { ...checkpoint({}), channel_values: values, channel_versions: { __proto__: 1, n: 1, messages: 1 } }, md, { n: 1, messages: 1 });
    const again = /** @type {any} */ ((await new HxSaver(p, { schema: SCHEMA }).getTuple(back))?.checkpoint.channel_values);
    assert.deepEqual(again.n, values.n);
  });

  await t.test('a packed value that inflates past 1 GiB is refused, not inflated whole', async () => {
    const bomb = zlib.deflateSync(Buffer.alloc(1100 * 1024 * 1024, 0x20), { level: 9 });
    const planted = await plant('write', `value = NULL, packed = $1`, [bomb]);
    await refused(planted, 'XX001', /does not inflate/);
  });

  await t.test('hostile keys are text: SQL, paths, prototypes, JSON, the stream prefix', async () => {
    for (const thread of ["'); DROP TABLE x; --", '../../etc/passwd', '__proto__', 'constructor', '{"$hx": "state"}', '@langgraph:other', '%s%n', ' ', 'é🚀']) {
      const c = await saver.put({ configurable: { thread_id: thread, checkpoint_ns: thread } }, checkpoint({ k: thread }), md, { k: 1 });
      const got = await new HxSaver(p, { schema: SCHEMA }).getTuple({ configurable: { thread_id: thread, checkpoint_ns: thread } });
      assert.equal(got?.checkpoint.channel_values.k, thread);
      assert.equal(got?.config.configurable?.thread_id, thread);
      await saver.putWrites(c, [[thread, thread]], thread.slice(0, 200) || 't');
      await saver.deleteThread(thread);
      assert.equal(await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: thread } }), undefined);
    }
  });
});
