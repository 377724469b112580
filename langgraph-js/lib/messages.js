'use strict';
// LangChain messages as the Python package stores them: a message's own
// pydantic `model_dump()`, its fields in the Python class's order (`type`
// human/ai/system/tool/function/chat/remove, or a chunk's class name,
// `content`, `additional_kwargs`, `response_metadata`, `name`, `id`, and
// the fields of its kind).  A JS message is written in that form, and a
// stored one is built back as the @langchain/core class of its `type`,
// from that closed list only: nothing a row names is imported or called.

const messages = require('@langchain/core/messages');

/** The fields of the Python classes, by the `type` their dumps carry, in their order. */
const BASE = ['content', 'additional_kwargs', 'response_metadata', 'type', 'name', 'id'];
const AI = [...BASE, 'tool_calls', 'invalid_tool_calls', 'usage_metadata'];
const TOOL = [...BASE, 'tool_call_id', 'artifact', 'status'];
const CHAT = [...BASE, 'role'];
/** @type {Record<string, { fields: string[], make: (fields: any) => import('@langchain/core/messages').BaseMessage }>} */
const KINDS = {
  human: { fields: BASE, make: (f) => new messages.HumanMessage(f) },
  HumanMessageChunk: { fields: BASE, make: (f) => new messages.HumanMessageChunk(f) },
  ai: { fields: AI, make: (f) => new messages.AIMessage(f) },
  AIMessageChunk: { fields: [...AI, 'tool_call_chunks', 'chunk_position'], make: (f) => new messages.AIMessageChunk(f) },
  system: { fields: BASE, make: (f) => new messages.SystemMessage(f) },
  SystemMessageChunk: { fields: BASE, make: (f) => new messages.SystemMessageChunk(f) },
  tool: { fields: TOOL, make: (f) => new messages.ToolMessage(f) },
  ToolMessageChunk: { fields: TOOL, make: (f) => new messages.ToolMessageChunk(f) },
  function: { fields: BASE, make: (f) => new messages.FunctionMessage(f) },
  FunctionMessageChunk: { fields: BASE, make: (f) => new messages.FunctionMessageChunk(f) },
  chat: { fields: CHAT, make: (f) => new messages.ChatMessage(f) },
  ChatMessageChunk: { fields: CHAT, make: (f) => new messages.ChatMessageChunk(f) },
  remove: { fields: BASE, make: (f) => new messages.RemoveMessage(f) },
};
/** A JS message's type (its `_getType()`) -> [the Python type, its chunk's]. */
const PY_TYPE = {
  human: ['human', 'HumanMessageChunk'],
  ai: ['ai', 'AIMessageChunk'],
  system: ['system', 'SystemMessageChunk'],
  tool: ['tool', 'ToolMessageChunk'],
  function: ['function', 'FunctionMessageChunk'],
  generic: ['chat', 'ChatMessageChunk'],
  remove: ['remove', 'remove'],
};
/** Keys every message dump has. */
const MESSAGE_KEYS = ['type', 'content', 'additional_kwargs', 'response_metadata'];

/**
 * Whether a value is a LangChain message.
 * @param {unknown} v
 * @returns {v is import('@langchain/core/messages').BaseMessage}
 */
function isMessage(v) {
  return messages.isBaseMessage(v);
}

/**
 * Whether a stored object reads back as a message: its `type` is one of
 * KINDS and it has the keys every message dump has (Python's rule).
 * @param {Record<string, unknown>} d
 */
function looksLikeMessage(d) {
  const t = d.type;
  return (
    typeof t === 'string' &&
    Object.prototype.hasOwnProperty.call(KINDS, t) &&
    MESSAGE_KEYS.every((k) => Object.prototype.hasOwnProperty.call(d, k))
  );
}

/**
 * The Python type a JS message is stored as; undefined for a kind Python
 * does not have.
 * @param {import('@langchain/core/messages').BaseMessage} m
 * @returns {string | undefined}
 */
function pythonType(m) {
  const pair = /** @type {Record<string, string[]>} */ (PY_TYPE)[m._getType()];
  if (pair === undefined) return undefined;
  return messages.isBaseMessageChunk(m) ? pair[1] : pair[0];
}

/**
 * A message's fields as the Python package stores them (not yet encoded:
 * the codec encodes the values), in its class's order.
 * @param {import('@langchain/core/messages').BaseMessage} m
 * @param {string} type the Python type (pythonType)
 * @returns {[string, unknown][]}
 */
function dumpFields(m, type) {
  const a = /** @type {any} */ (m);
  /** @type {Record<string, () => unknown>} */
  const get = {
    content: () => a.content,
    additional_kwargs: () => a.additional_kwargs ?? {},
    response_metadata: () => a.response_metadata ?? {},
    type: () => type,
    name: () => a.name ?? null,
    id: () => a.id ?? null,
    tool_calls: () =>
      (a.tool_calls ?? []).map((/** @type {any} */ c) => ({ name: c.name, args: c.args, id: c.id ?? null, type: 'tool_call' })),
    invalid_tool_calls: () =>
      (a.invalid_tool_calls ?? []).map((/** @type {any} */ c) => ({
        name: c.name ?? null,
        args: c.args ?? null,
        id: c.id ?? null,
        error: c.error ?? null,
        type: 'invalid_tool_call',
      })),
    usage_metadata: () => a.usage_metadata ?? null,
    tool_call_chunks: () => a.tool_call_chunks ?? [],
    chunk_position: () => a.chunk_position ?? null,
    tool_call_id: () => a.tool_call_id,
    artifact: () => a.artifact ?? null,
    status: () => a.status ?? 'success',
    role: () => a.role,
  };
  return KINDS[type].fields.map((f) => [f, get[f]()]);
}

/**
 * The message a stored dump was made from (its values decoded already):
 * the class of its `type`, with its fields; null for JSON's null where
 * JS has undefined.  Throws what the class's constructor throws.
 * @param {Record<string, any>} d
 * @returns {import('@langchain/core/messages').BaseMessage}
 */
function makeMessage(d) {
  const kind = KINDS[d.type];
  /** @type {Record<string, unknown>} */
  const fields = {};
  for (const f of kind.fields) {
    if (f === 'type' || !Object.prototype.hasOwnProperty.call(d, f)) continue;
    const v = d[f];
    if (v === null && f !== 'content') continue;
    fields[f] = v;
  }
  return kind.make(fields);
}

module.exports = { KINDS, isMessage, looksLikeMessage, pythonType, dumpFields, makeMessage };
