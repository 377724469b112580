'use strict';
// The rules the JS HxSaver keeps, as the Python one does, each with the
// SQLSTATE its error carries: key limits, one writer per parent and
// forks asked for, write ownership, writes stored once, the schema set up
// by the Python package, what values it stores and how strictly it
// reads them back.

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { uuid6, emptyCheckpoint } = require('@langchain/langgraph-checkpoint');
const { AIMessage } = require('@langchain/core/messages');
const { HxSaver, EncryptedSerializer } = require('..');
const { setupSchema, pool } = require('./helpers');

const SCHEMA = 'lgjs_rules';

/** @param {Record<string, unknown>} values @param {Record<string, number>} versions */
function checkpoint(values, versions) {
  return { ...emptyCheckpoint(), id: uuid6(-1), channel_values: values, channel_versions: versions };
}

const fresh = () => `rules-${crypto.randomBytes(6).toString('hex')}`;

/**
 * @param {Promise<unknown>} promise
 * @param {string | undefined} code its SQLSTATE (undefined: an error without one)
 * @param {RegExp} [message]
 */
async function rejects(promise, code, message) {
  await assert.rejects(promise, (/** @type {any} */ err) => {
    assert.equal(err.code, code, `${err.code}: ${err.message}`);
    if (message) assert.match(err.message, message);
    return true;
  });
}

test('the rules of a writer', { timeout: 120000 }, async (t) => {
  await setupSchema(SCHEMA);
  const p = pool();
  t.after(() => p.end());
  const saver = new HxSaver(p, { schema: SCHEMA });
  await saver.setup();
  const md = (/** @type {string} */ source) => ({ source, step: 0, parents: {} });

  await t.test('keys: over 1,024 bytes (thread, namespace) or 256 (checkpoint, task) is 54000, a NUL or a lone surrogate 22023', async () => {
    const ok = 'é'.repeat(512); // 1,024 bytes
    await saver.put({ configurable: { thread_id: ok } }, checkpoint({}, {}), md('input'), {});
    assert.ok(await saver.getTuple({ configurable: { thread_id: ok } }));
    await rejects(saver.put({ configurable: { thread_id: ok + 'x' } }, checkpoint({}, {}), md('input'), {}), '54000', /1025 bytes/);
    await rejects(saver.put({ configurable: { thread_id: 't', checkpoint_ns: 'n'.repeat(1025) } }, checkpoint({}, {}), md('input'), {}), '54000');
    await rejects(saver.put({ configurable: { thread_id: 't' } }, { ...checkpoint({}, {}), id: 'c'.repeat(257) }, md('input'), {}), '54000');
    await rejects(saver.put({ configurable: { thread_id: 'a\u0000b' } }, checkpoint({}, {}), md('input'), {}), '22023', /NUL/);
    await rejects(saver.put({ configurable: { thread_id: 'a\ud800' } }, checkpoint({}, {}), md('input'), {}), '22023', /Unicode/);
    await rejects(saver.putWrites({ configurable: { thread_id: 't', checkpoint_id: 'c' } }, [['x', 1]], 'k'.repeat(257)), '54000');
    await rejects(saver.getTuple({ configurable: { thread_id: 'a\u0000b' } }), '22023');
    assert.equal(await saver.getTuple({ configurable: { thread_id: 'x'.repeat(5000) } }), undefined);
    await rejects(saver.admit('t', 'r'.repeat(257), {}), '54000');
  });

  await t.test("one writer per parent: a run's second checkpoint on a continued parent is 40001, a fork asked for branches", async () => {
    const thread = fresh();
    const c1 = await saver.put({ configurable: { thread_id: thread } }, checkpoint({ n: 1 }, { n: 1 }), md('input'), { n: 1 });
    await saver.put(c1, checkpoint({ n: 2 }, { n: 2 }), md('loop'), { n: 2 });
    // another process, from the same parent
    const other = new HxSaver(p, { schema: SCHEMA });
    await rejects(other.put(c1, checkpoint({ n: 3 }, { n: 3 }), md('loop'), { n: 3 }), '40001', /moved on from checkpoint/);
    const fork = { configurable: { ...c1.configurable, hx_fork_of: c1.configurable.checkpoint_id } };
    const forked = await other.put(fork, checkpoint({ n: 4 }, { n: 4 }), md('loop'), { n: 4 });
    const head = await saver.getTuple({ configurable: { thread_id: thread } });
    assert.equal(head?.checkpoint.id, forked.configurable.checkpoint_id);
    assert.equal(head?.checkpoint.channel_values.n, 4);
    // an update (not a run) branches too
    await other.put(c1, checkpoint({ n: 5 }, { n: 5 }), md('update'), { n: 5 });
    // getTuple of an older checkpoint by id names it as a fork's base; of the head, not
    const old = await other.getTuple(c1);
    assert.equal(old?.config.configurable?.hx_fork_of, c1.configurable.checkpoint_id);
    assert.equal((await other.getTuple({ configurable: { thread_id: thread } }))?.config.configurable?.hx_fork_of, undefined);
    // the token and the fork key are the writer's, not the thread's
    const stored = await p.query(`SELECT metadata FROM ${SCHEMA}.checkpoints WHERE thread_id = $1 AND metadata ? 'hx_fork_of'`, [thread]);
    assert.equal(stored.rows.length, 0);
  });

  await t.test('ownership: a write without the owner\'s token, or with a superseded one, is 55000 and writes nothing', async () => {
    const thread = fresh();
    const c1 = await saver.put({ configurable: { thread_id: thread } }, checkpoint({ n: 1 }, { n: 1 }), md('input'), { n: 1 });
    const token = await saver.acquire(thread);
    assert.match(token, /^1-[0-9a-f]{32}$/);
    assert.equal(await saver.ownerEpoch(thread), 1);
    await rejects(saver.put(c1, checkpoint({ n: 2 }, { n: 2 }), md('loop'), { n: 2 }), '55000', /must carry its owner's token/);
    await rejects(saver.putWrites(c1, [['x', 1]], 'task'), '55000');
    await rejects(saver.putWrites(c1, [['__error__', 'boom']], 'task'), '55000');
    // (this saver's refused writes on c1 keep its next checkpoint from c1
    // from being stored: the owner is another process)
    await rejects(saver.put({ configurable: { ...c1.configurable, hx_owner: token } }, checkpoint({ n: 2 }, { n: 2 }), md('loop'), { n: 2 }), undefined);
    const owner = new HxSaver(p, { schema: SCHEMA });
    const owned = { configurable: { ...c1.configurable, hx_owner: token } };
    const c2 = await owner.put(owned, checkpoint({ n: 2 }, { n: 2 }), md('loop'), { n: 2 });
    await owner.putWrites({ configurable: { ...c2.configurable, hx_owner: token } }, [['x', 1]], 'task');
    const next = await new HxSaver(p, { schema: SCHEMA }).acquire(thread);
    assert.match(next, /^2-/);
    await rejects(
      saver.put({ configurable: { ...c2.configurable, hx_owner: token } }, checkpoint({ n: 3 }, { n: 3 }), md('loop'), { n: 3 }),
      '55000',
      /superseded/,
    );
    assert.equal(await saver.release(thread, token), false);
    assert.equal(await saver.release(thread, next), true);
    assert.equal(await saver.ownerEpoch(thread), null);
    await rejects(saver.putWrites({ configurable: { ...c2.configurable, hx_owner: next } }, [['y', 1]], 'task2'), '55000', /released/);
    const { rows } = await p.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.checkpoints WHERE thread_id = $1`, [thread]);
    assert.equal(rows[0].n, 2);
    assert.equal((await p.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.writes WHERE thread_id = $1`, [thread])).rows[0].n, 1);
  });

  await t.test("a task's writes are stored once: the same again is a no-op, others are XH201; an attempt's records are overwritten", async () => {
    const thread = fresh();
    const c1 = await saver.put({ configurable: { thread_id: thread } }, checkpoint({ n: 1 }, { n: 1 }), md('input'), { n: 1 });
    await saver.putWrites(c1, [['a', { x: 1, y: [2] }], ['b', 'z'.repeat(2000)]], 'task');
    await saver.putWrites(c1, [['a', { y: [2], x: 1 }], ['b', 'z'.repeat(2000)]], 'task');
    await new HxSaver(p, { schema: SCHEMA }).putWrites(c1, [['a', { x: 1, y: [2] }], ['b', 'z'.repeat(2000)]], 'task');
    await rejects(saver.putWrites(c1, [['a', { x: 2 }], ['b', 'z'.repeat(2000)]], 'task'), 'XH201', /other values/);
    await assert.rejects(saver.putWrites(c1, [['a', { x: 1, y: [2] }], ['b', 'w']], 'task'), { code: 'XH201', detail: 'The writes at index 1 differ from the ones stored.' });
    await saver.putWrites(c1, [['__error__', 'first']], 'task');
    await saver.putWrites(c1, [['__error__', 'last']], 'task');
    const tuple = await saver.getTuple(c1);
    assert.deepEqual(tuple?.pendingWrites, [
      ['task', '__error__', 'last'],
      ['task', 'a', { x: 1, y: [2] }],
      ['task', 'b', 'z'.repeat(2000)],
    ]);
  });

  await t.test('admissions: a run recorded before it runs, once; another input is XH201', async () => {
    const thread = fresh();
    const a = await saver.admit(thread, 'run-1', { messages: ['hi'] });
    assert.equal(a.isNew, true);
    assert.equal(a.lostBeforeFirstCheckpoint, true);
    assert.equal((await saver.admit(thread, 'run-1', { messages: ['hi'] })).isNew, false);
    await rejects(saver.admit(thread, 'run-1', { messages: ['other'] }), 'XH201');
    await saver.put({ configurable: { thread_id: thread } }, checkpoint({}, {}), { ...md('input'), run_id: 'run-1' }, {});
    const [found] = await saver.admissions(thread);
    assert.equal(found.checkpoints, 1);
    assert.equal(await saver.finish(thread, 'run-1', 'success'), true);
    assert.equal(await saver.finish(thread, 'run-1', 'error'), false);
    assert.deepEqual(await saver.admissions(thread), []);
  });

  await t.test('values: what it cannot read back as it was is 22023 when written', async () => {
    const thread = fresh();
    for (const [value, what] of /** @type {[unknown, RegExp][]} */ ([
      [new Map([[1, 2]]), /Map/],
      [new Set([1]), /Set/],
      [10n, /BigInt/],
      [Number.NaN, /NaN/],
      [Infinity, /Infinity/],
      ['a\u0000b', /NUL/],
      ['\udc00', /lone surrogate/],
      [{ $hx: 'state', path: '/__start__/x' }, /tagged/],
      [{ type: 'human', content: 'x', additional_kwargs: {}, response_metadata: {} }, /message/],
      [new Float32Array(2), /Float32Array/],
    ])) {
      await rejects(
        saver.put({ configurable: { thread_id: thread } }, checkpoint({ v: value }, { v: 1 }), md('input'), { v: 1 }),
        '22023',
        what,
      );
    }
    const cyclic = /** @type {any} */ ({});
    cyclic.self = cyclic;
    await rejects(saver.putWrites({ configurable: { thread_id: thread, checkpoint_id: 'c' } }, [['x', cyclic]], 't'), '22023', /cycle/);
    // what it stores: JSON, Dates as their ISO text (as LangGraph.js's own savers), bytes, messages
    const c = await saver.put(
      { configurable: { thread_id: thread } },
      checkpoint({ d: new Date(0), b: new Uint8Array([0, 255]), m: [new AIMessage({ content: 'x', id: 'a' })], u: [undefined] }, { d: 1, b: 1, m: 1, u: 1 }),
      md('input'),
      { d: 1, b: 1, m: 1, u: 1 },
    );
    const values = (await new HxSaver(p, { schema: SCHEMA }).getTuple(c))?.checkpoint.channel_values;
    assert.equal(values?.d, '1970-01-01T00:00:00.000Z');
    assert.deepEqual(values?.b, new Uint8Array([0, 255]));
    assert.ok(values?.m[0] instanceof AIMessage);
    assert.deepEqual(values?.u, [null]);
  });

  await t.test('encryption: a sealed thread needs its key; plaintext where ciphertext belongs is XX001', async () => {
    const thread = fresh();
    const key = crypto.randomBytes(32);
    const sealed = new HxSaver(p, { schema: SCHEMA, serde: new EncryptedSerializer({ k1: key }) });
    const c1 = await sealed.put({ configurable: { thread_id: thread } }, checkpoint({ secret: 's3cr3t' }, { secret: 1 }), md('input'), { secret: 1 });
    await sealed.putWrites(c1, [['w', 'hidden']], 'task');
    const raw = await p.query(`SELECT snapshot::text FROM ${SCHEMA}.checkpoints WHERE thread_id = $1`, [thread]);
    assert.doesNotMatch(raw.rows[0].snapshot, /s3cr3t/);
    assert.equal((await new HxSaver(p, { schema: SCHEMA, serde: new EncryptedSerializer({ k1: key }) }).getTuple(c1))?.checkpoint.channel_values.secret, 's3cr3t');
    await rejects(new HxSaver(p, { schema: SCHEMA }).getTuple(c1), 'XX001', /no key/);
    await rejects(new HxSaver(p, { schema: SCHEMA, serde: new EncryptedSerializer({ k1: crypto.randomBytes(32) }) }).getTuple(c1), 'XX001', /does not belong/);
    // plaintext planted where ciphertext belongs
    await p.query(`UPDATE ${SCHEMA}.checkpoints SET snapshot = '{"secret": "planted"}' WHERE thread_id = $1`, [thread]);
    await rejects(new HxSaver(p, { schema: SCHEMA, serde: new EncryptedSerializer({ k1: key }) }).getTuple(c1), 'XX001', /plaintext/);
    // rotation: a new key first, the old one still opens
    const thread2 = fresh();
    const c2 = await sealed.put({ configurable: { thread_id: thread2 } }, checkpoint({ s: 1 }, { s: 1 }), md('input'), { s: 1 });
    const rotated = new HxSaver(p, { schema: SCHEMA, serde: new EncryptedSerializer({ k2: crypto.randomBytes(16), k1: key }) });
    assert.equal((await rotated.getTuple(c2))?.checkpoint.channel_values.s, 1);
    assert.throws(() => new EncryptedSerializer({ k: Buffer.alloc(7) }), /16, 24 or 32 bytes/);
  });

  await t.test("versions: integers; a thread's string versions keep their form and grow", () => {
    assert.equal(saver.getNextVersion(undefined), 1);
    assert.equal(saver.getNextVersion(41), 42);
    const next = /** @type {any} */ (saver.getNextVersion(/** @type {any} */ ('00000000000000000000000000000009.0123')));
    assert.match(next, /^00000000000000000000000000000010\.[0-9]{16}$/);
    assert.ok(next > '00000000000000000000000000000009.9');
  });

  await t.test('the schema: one the Python package did not set up is 42P01, and the saver makes nothing', async () => {
    const none = new HxSaver(p, { schema: 'lgjs_nowhere' });
    await rejects(none.setup(), '42P01', /has not been set up/);
    await rejects(none.put({ configurable: { thread_id: 't' } }, checkpoint({}, {}), md('input'), {}), '42P01');
    const { rows } = await p.query("SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'lgjs_nowhere'");
    assert.equal(rows[0].n, 0);
  });
});
