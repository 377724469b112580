'use strict';
// What a row's state means in AG-UI 1.0's terms: its conversation as
// AG-UI messages, its pending interrupts as AG-UI interrupts, and what a
// table's configuration lets the gateway declare as capabilities.  Pure
// functions, tested without a server.
//
// Messages may be kept in AG-UI's own shape ({id, role, content, ...}) or
// in the shape LangGraph's add_messages keeps, LangChain message dicts:
//
//   {type: 'human' | 'ai' | 'system' | 'tool', id, content, tool_calls,
//    tool_call_id, name, status, ...}
//
// type gives the role (human: user, ai: assistant); content is a string or
// a list of content blocks (text blocks become text, image_url blocks
// image parts of a user or tool message); an ai message's tool_calls
// [{name, args, id}] become toolCalls [{id, type: 'function', function:
// {name, arguments: <args as JSON text>}}]; tool_call_id becomes
// toolCallId; other members are left out.  LangChain's serialised form
// ({lc: 1, type: 'constructor', id: [..., 'HumanMessage'], kwargs}) is
// read too.  A message that still is not one AG-UI accepts is left out,
// and counted: @ag-ui/client refuses a MESSAGES_SNAPSHOT with one.
//
// Interrupts: an array of LangGraph's pending interrupts, {id, value}
// (value what the graph passed to interrupt()), or of AG-UI interrupts
// ({id, reason, ...}).  A LangGraph interrupt becomes {id, reason, message,
// metadata: {value}}: reason and message from value's members of those
// names when it is an object (reason default "input_required"), message
// the value itself when it is a string.
const { MessageSchema, InterruptSchema, AgentCapabilitiesSchema } = require('@ag-ui/core/schemas');

const ROLE_OF_TYPE = { human: 'user', ai: 'assistant', system: 'system', tool: 'tool', developer: 'developer' };
const TYPE_OF_CLASS = {
  HumanMessage: 'human', AIMessage: 'ai', SystemMessage: 'system', ToolMessage: 'tool',
  HumanMessageChunk: 'human', AIMessageChunk: 'ai', SystemMessageChunk: 'system', ToolMessageChunk: 'tool',
};

/** The value at an RFC 6901 pointer of doc, or undefined. */
function getPointer(doc, pointer) {
  if (pointer === '') return doc;
  let v = doc;
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (v === null || typeof v !== 'object') return undefined;
    if (Array.isArray(v)) {
      if (!/^(0|[1-9][0-9]*)$/.test(key)) return undefined;
      v = v[Number(key)];
    } else {
      if (!Object.prototype.hasOwnProperty.call(v, key)) return undefined;
      v = v[key];
    }
  }
  return v;
}

function textOf(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return content === undefined || content === null ? '' : JSON.stringify(content);
  return content.map((b) => (typeof b === 'string' ? b : b && b.type === 'text' && typeof b.text === 'string' ? b.text : ''))
    .join('');
}

/** LangChain content blocks as AG-UI content parts (text and images), or a string. */
function partsOf(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return textOf(content);
  const parts = [];
  for (const b of content) {
    if (typeof b === 'string') parts.push({ type: 'text', text: b });
    else if (b && b.type === 'text' && typeof b.text === 'string') parts.push({ type: 'text', text: b.text });
    else if (b && b.type === 'image_url') {
      const url = typeof b.image_url === 'string' ? b.image_url : b.image_url && b.image_url.url;
      if (typeof url === 'string') parts.push({ type: 'image', source: { type: 'url', value: url } });
    }
  }
  return parts.every((p) => p.type === 'text') ? parts.map((p) => p.text).join('') : parts;
}

/** One LangChain message dict (or AG-UI message) as an AG-UI message; null if it is neither. */
function toAguiMessage(m, index) {
  if (!m || typeof m !== 'object' || Array.isArray(m)) return null;
  if (m.lc === 1 && m.type === 'constructor' && Array.isArray(m.id) && m.kwargs && typeof m.kwargs === 'object') {
    const type = TYPE_OF_CLASS[m.id[m.id.length - 1]];
    return type ? toAguiMessage({ ...m.kwargs, type }, index) : null;
  }
  if (typeof m.role === 'string' && m.type === undefined) return m; // AG-UI's own shape
  const role = m.type === 'chat' && typeof m.role === 'string' ? m.role : ROLE_OF_TYPE[m.type];
  if (!role) return null;
  const id = typeof m.id === 'string' && m.id !== '' ? m.id : `hx-${index}`;
  const out = { id, role };
  if (typeof m.name === 'string' && m.name !== '' && role !== 'tool') out.name = m.name;
  if (role === 'user' || role === 'tool') out.content = partsOf(m.content);
  else out.content = textOf(m.content);
  if (role === 'assistant') {
    const calls = Array.isArray(m.tool_calls) ? m.tool_calls : [];
    if (calls.length > 0) {
      out.toolCalls = calls.map((c, i) => ({
        id: typeof c.id === 'string' && c.id !== '' ? c.id : `${id}-call-${i}`,
        type: 'function',
        function: { name: String(c.name), arguments: typeof c.args === 'string' ? c.args : JSON.stringify(c.args === undefined ? {} : c.args) },
      }));
    }
  }
  if (role === 'tool') {
    out.toolCallId = String(m.tool_call_id === undefined ? '' : m.tool_call_id);
    if (m.status === 'error') out.error = textOf(m.content);
  }
  return out;
}

/**
 * The conversation at the state's messages path, as AG-UI messages:
 * {messages, dropped} (dropped: how many entries were left out).  A
 * missing path or a value that is not an array is no conversation ([]).
 */
function messagesOf(value) {
  if (!Array.isArray(value)) return { messages: [], dropped: 0 };
  const messages = [];
  let dropped = 0;
  value.forEach((m, i) => {
    const a = toAguiMessage(m, i);
    if (a && MessageSchema.safeParse(a).success) messages.push(a);
    else dropped++;
  });
  return { messages, dropped };
}

/** The pending interrupts at the state's interrupt path, as AG-UI interrupts (possibly []). */
function interruptsOf(value) {
  if (value === null || value === undefined) return [];
  const list = Array.isArray(value) ? value : [value];
  const out = [];
  list.forEach((it, i) => {
    if (!it || typeof it !== 'object' || Array.isArray(it)) return;
    let a;
    if (typeof it.reason === 'string' && it.value === undefined) {
      a = it; // AG-UI's own shape
    } else {
      const v = it.value;
      a = { id: it.id === undefined || it.id === null ? `interrupt-${i}` : String(it.id), reason: 'input_required' };
      if (v && typeof v === 'object' && !Array.isArray(v)) {
        if (typeof v.reason === 'string' && v.reason !== '') a.reason = v.reason;
        if (typeof v.message === 'string') a.message = v.message;
        if (typeof v.toolCallId === 'string') a.toolCallId = v.toolCallId;
        if (v.responseSchema && typeof v.responseSchema === 'object' && !Array.isArray(v.responseSchema)) a.responseSchema = v.responseSchema;
      } else if (typeof v === 'string') {
        a.message = v;
      }
      if (v !== undefined && v !== null) a.metadata = { value: v };
    }
    if (InterruptSchema.safeParse(a).success) out.push(a);
  });
  return out;
}

/**
 * The capabilities of a table's agent endpoint, in AG-UI 1.0's form
 * (AgentCapabilities), true to its configuration: what the gateway does
 * for every table (SSE, resumable by seq, state snapshots and deltas kept
 * in the database across runs), whether its conversation is served
 * (custom.hxstate.messages), and whether it takes part in interrupts (an
 * interrupt path, and a run hook to hand resume[] to).
 */
function capabilitiesOf(table, { hook, maxRunMs, version }) {
  const interrupts = table.interrupt !== null && hook;
  const caps = {
    identity: {
      name: `hxstate:${table.name}`,
      type: 'hxstate',
      description: `The rows of ${table.name}: each row's state and its changes, from the database's event log`,
      version,
    },
    transport: { streaming: true, websocket: false, httpBinary: false, pushNotifications: false, resumable: true },
    state: { snapshots: true, deltas: true, memory: false, persistentState: true },
    humanInTheLoop: { supported: interrupts, interrupts, approvals: false, approveWithEdits: false },
    custom: {
      hxstate: {
        messages: table.messages,                 // the conversation's path in the state, or null
        interrupt: table.interrupt,               // the pending interrupts' path, or null
        runHook: !!hook,                          // POST /agents starts the application's run
        resume: 'Last-Event-ID',                  // the header (or ?lastEventId=) a reconnect sends
        source: table.source,
      },
    },
  };
  if (maxRunMs > 0) caps.execution = { maxExecutionTime: maxRunMs };
  return AgentCapabilitiesSchema.parse(caps);
}

module.exports = { getPointer, toAguiMessage, messagesOf, interruptsOf, capabilitiesOf };
