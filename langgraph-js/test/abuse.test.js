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

  await t.test("a run's input planted 5,000 levels deep is refused when read (XX001), and its prototype keys are data", async () => {
    await p.query(`GRANT SELECT, UPDATE ON ${SCHEMA}.runs TO ${PLANTER}`);
    const thread = `runs-${crypto.randomBytes(4).toString('hex')}`;
    await saver.admit(thread, 'deep', { ask: 1 });
    await saver.admit(thread, 'proto', { ask: 2 });
    const client = await p.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL ROLE ${PLANTER}`);
      await client.query(`UPDATE ${SCHEMA}.runs SET input = $1::json WHERE thread_id = $2 AND run_id = 'deep'`, [`${'['.repeat(5000)}${']'.repeat(5000)}`, thread]);
      await client.query(`UPDATE ${SCHEMA}.runs SET input = '{"__proto__": {"polluted": 1}}' WHERE thread_id = $1 AND run_id = 'proto'`, [thread]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const deep = { name: 'DataCorrupted', code: 'XX001', message: /nested deeper/ };
    await assert.rejects(saver.admissions(thread, { unfinished: false }), deep);
    await assert.rejects(saver.admit(thread, 'deep', { ask: 1 }), deep);
    await p.query(`DELETE FROM ${SCHEMA}.runs WHERE thread_id = $1 AND run_id = 'deep'`, [thread]);
    const [proto] = await saver.admissions(thread, { unfinished: false });
    assert.equal(/** @type {any} */ ({}).polluted, undefined);
    assert.deepEqual(Object.getOwnPropertyDescriptor(proto.input, '__proto__')?.value, { polluted: 1 });
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

test('hostile arguments of every type are InvalidParameterValue (22023), TypeNotAllowed (22023) or ProgramLimitExceeded (54000), before the server is asked', { timeout: 120000 }, async (t) => {
  const schema = 'lgjs_abuse_args';
  await setupSchema(schema);
  const p = pool();
  t.after(() => p.end());
  const saver = new HxSaver(p, { schema });
  // a thread of this run's own: the schema stays from a run before on the
  // same cluster, and list() below counts the thread's checkpoints
  const thread = `args.${crypto.randomBytes(6).toString('hex')}`;
  const base = await saver.put({ configurable: { thread_id: thread } }, checkpoint({ n: 1 }), md, { n: 1 });
  const throwing = { toString() { throw new Error('toString ran'); } };
  // values that are no key: each has its own way of failing when it is
  // turned into text or JSON (a NUL the server refuses with 22021, a
  // toString that throws, no prototype to convert with, a BigInt)
  const notKeys = /** @type {[string, unknown][]} */ ([
    ['a NUL', 'a\u0000b'],
    ['a lone surrogate', 'a\ud800'],
    ['an object', { a: 1 }],
    ['an object without a prototype', Object.create(null)],
    ['an object whose toString throws', throwing],
    ['an array', ['a']],
    ['a BigInt', 10n],
    ['a boolean', true],
    ['a symbol', Symbol('s')],
    ['a function', () => 1],
    ['NaN', NaN],
  ]);
  const collect = async (/** @type {AsyncIterable<unknown>} */ it) => {
    const out = [];
    for await (const x of it) out.push(x);
    return out;
  };
  /** @type {[string, (v: any) => Promise<unknown>][]} */
  const uses = [
    ['getTuple checkpoint_id', (v) => saver.getTuple({ configurable: { thread_id: thread, checkpoint_id: v } })],
    ['list checkpoint_id', (v) => collect(saver.list({ configurable: { thread_id: thread, checkpoint_id: v } }))],
    ["list's before", (v) => collect(saver.list({ configurable: { thread_id: thread } }, { before: { configurable: { checkpoint_id: v } } }))],
    ['put hx_fork_of', (v) => saver.put({ configurable: { thread_id: 'args-fork', hx_fork_of: v } }, checkpoint({ n: 1 }), md, { n: 1 })],
    ['put hx_owner', (v) => saver.put({ configurable: { thread_id: 'args-owner', hx_owner: v } }, checkpoint({ n: 1 }), md, { n: 1 })],
    ['putWrites checkpoint_id', (v) => saver.putWrites({ configurable: { thread_id: thread, checkpoint_id: v } }, [['c', 1]], 'task')],
    ['release thread id', (v) => saver.release(v, 'token')],
    ['release token', (v) => saver.release(thread, v)],
    ['ownerEpoch', (v) => saver.ownerEpoch(v)],
    ['finish thread id', (v) => saver.finish(v, 'run', 'success')],
    ['finish run id', (v) => saver.finish(thread, v, 'success')],
    ['finish detail', (v) => saver.finish(thread, 'run', 'error', v)],
    ['admissions', (v) => saver.admissions(v)],
  ];
  for (const [where, use] of uses) {
    await t.test(where, async () => {
      for (const [what, value] of notKeys) {
        await assert.rejects(use(value), (/** @type {any} */ err) => {
          assert.equal(err.name, 'InvalidParameterValue', `${what}: ${err.name} ${err.code}: ${err.message}`);
          assert.equal(err.code, '22023');
          return true;
        });
      }
    });
  }

  /** @type {[string, () => unknown, string, RegExp][]} */
  const calls = [
    ['put without a config', () => saver.put(/** @type {any} */ (null), checkpoint({}), md, {}), 'InvalidParameterValue', /config object/],
    ['put without a thread id', () => saver.put({ configurable: {} }, checkpoint({}), md, {}), 'InvalidParameterValue', /thread_id/],
    ['put of no checkpoint', () => saver.put({ configurable: { thread_id: thread } }, /** @type {any} */ (undefined), md, {}), 'InvalidParameterValue', /checkpoint is an object/],
    // a string spread into an object would be metadata of ten million keys
    ['put of metadata that is a string', () => saver.put({ configurable: { thread_id: 'args-md' } }, checkpoint({ n: 1 }), /** @type {any} */ ('x'.repeat(10_000_000)), { n: 1 }), 'InvalidParameterValue', /metadata is an object/],
    ['put of channel_values that are a string', () => saver.put({ configurable: { thread_id: 'args-cv' } }, { ...checkpoint({}), channel_values: /** @type {any} */ ('abc') }, md, {}), 'InvalidParameterValue', /channel_values/],
    ['put of a version that is a BigInt', () => saver.put({ configurable: { thread_id: 'args-v' } }, { ...checkpoint({ n: 1 }), channel_versions: { n: /** @type {any} */ (1n) } }, md, { n: 1 }), 'InvalidParameterValue', /channel_versions/],
    ['put of a new version that is NaN', () => saver.put({ configurable: { thread_id: 'args-nv' } }, checkpoint({ n: 1 }), md, { n: NaN }), 'InvalidParameterValue', /newVersions/],
    ['putWrites of writes that are no array', () => saver.putWrites(base, /** @type {any} */ ('xy'), 'task'), 'InvalidParameterValue', /\[channel, value\] pairs/],
    ['putWrites of a write that is no pair', () => saver.putWrites(base, /** @type {any} */ ([null]), 'task'), 'InvalidParameterValue', /\[channel, value\] pairs/],
    ["list's filter of a string", () => collect(saver.list({ configurable: { thread_id: thread } }, { filter: /** @type {any} */ ('x'.repeat(100_000)) })), 'InvalidParameterValue', /filter is an object/],
    ["list's limit of an object", () => collect(saver.list({ configurable: { thread_id: thread } }, { limit: /** @type {any} */ (throwing) })), 'InvalidParameterValue', /limit is a number/],
    ['a run that ends in no outcome', () => saver.finish(thread, 'run', /** @type {any} */ (10n)), 'InvalidParameterValue', /ends in one of/],
    ["a run's input that JSON cannot hold", () => saver.admit(thread, 'run-big', { n: 10n }), 'TypeNotAllowed', /input is JSON/],
    ["a run's input that is a function", () => saver.admit(thread, 'run-fn', () => 1), 'TypeNotAllowed', /input is JSON/],
    ['a channel version the saver did not write', () => saver.getNextVersion(/** @type {any} */ ('abc.1')), 'InvalidParameterValue', /channel version/],
    ['a schema that is no string', () => new HxSaver(p, { schema: /** @type {any} */ (5) }), 'InvalidParameterValue', /schema/],
    ['a schema with a NUL', () => new HxSaver(p, { schema: 'a\u0000b' }), 'InvalidParameterValue', /schema/],
    ['a cache of NaN threads', () => new HxSaver(p, { schema, cacheThreads: NaN }), 'InvalidParameterValue', /cacheThreads/],
    ['a chain of -1 deltas', () => new HxSaver(p, { schema, maxChain: -1 }), 'InvalidParameterValue', /maxChain/],
    ['snapshots from "64k" bytes', () => new HxSaver(p, { schema, snapshotMinBytes: /** @type {any} */ ('64k') }), 'InvalidParameterValue', /snapshotMinBytes/],
    ['a rebuild factor below 1', () => new HxSaver(p, { schema, rebuildFactor: 0.5 }), 'InvalidParameterValue', /rebuildFactor/],
  ];
  for (const [what, call, name, message] of calls) {
    await t.test(what, async () => {
      await assert.rejects(async () => call(), (/** @type {any} */ err) => {
        assert.equal(err.name, name, `${err.name} ${err.code}: ${err.message}`);
        assert.equal(err.code, '22023');
        assert.match(err.message, message);
        return true;
      });
    });
  }

  await t.test('keys longer than any stored are no row to a read, and too long to a write', async () => {
    const long = 'x'.repeat(300);
    assert.equal(await saver.getTuple({ configurable: { thread_id: thread, checkpoint_id: long } }), undefined);
    assert.deepEqual(await collect(saver.list({ configurable: { thread_id: thread, checkpoint_id: long } })), []);
    assert.equal(await saver.ownerEpoch('t'.repeat(2000)), null);
    assert.equal(await saver.release('t'.repeat(2000), 'token'), false);
    assert.deepEqual(await saver.admissions('t'.repeat(2000)), []);
    await assert.rejects(saver.put({ configurable: { thread_id: thread, hx_fork_of: long } }, checkpoint({ n: 1 }), md, { n: 1 }), { name: 'ProgramLimitExceeded', code: '54000' });
    await assert.rejects(saver.finish(thread, long, 'success'), { name: 'ProgramLimitExceeded', code: '54000' });
    // a bound of list() is compared, not stored: any length
    assert.equal((await collect(saver.list({ configurable: { thread_id: thread } }, { before: { configurable: { checkpoint_id: 'z'.repeat(100_000) } } }))).length, 1);
    // and nothing of the refused calls was written
    const { rows } = await p.query(`SELECT thread_id FROM ${schema}.checkpoints WHERE thread_id LIKE 'args-%'`);
    assert.deepEqual(rows, []);
  });
});
