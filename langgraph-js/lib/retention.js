'use strict';
// Deleting a thread: its checkpoints and pending writes, in one
// transaction; its log stream ends (a CUSTOM hx.stream_end, once, as a
// deleted row's stream ends), as the Python package's retention.py does.

const { readKeyOrNull } = require('./keys');

/**
 * @param {import('./db').Database} db
 * @param {import('./put').Context} ctx
 * @param {import('./sql').Server} server
 * @param {unknown} threadId
 */
async function deleteThread(db, ctx, server, threadId) {
  const id = readKeyOrNull('thread id', threadId);
  if (id === null) return;
  await db.transaction(async (client) => {
    await client.query(ctx.sql.DELETE_WRITES_SQL, [id]);
    const gone = (await client.query(ctx.sql.DELETE_CHECKPOINTS_SQL, [id])).rows;
    if (server.publishing && ctx.sealer === null) {
      await client.query(ctx.sql.REPUBLISH_SQL, [[id], gone.map((r) => r.thread_id)]);
    }
  });
  ctx.heads.forget([id]);
}

module.exports = { deleteThread };
