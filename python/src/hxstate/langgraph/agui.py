"""An AG-UI run of a LangGraph graph: what hxstate-gateway's run hook calls.

The gateway serves a thread that HxSaver keeps (``@<schema>:<thread_id>``,
followed through the saver's ``<schema>.threads`` source) as AG-UI runs:
``POST /agents/threads/<thread_id>``.  For each POST it hands the request's
``RunAgentInput`` to the application's run hook, and streams what the graph
writes.  This module is what the hook calls, as a command (the console
script ``hxstate-agui``, or ``python -m hxstate.langgraph.agui``):

    hxstate-agui app.graph:builder --thread=<thread_id> < input.json

or, in a Python process, ``run(graph, input, thread_id=...)`` (``arun`` for
async graphs).  The command reads its whole input first, at most
``--max-input-bytes`` (1 MiB) of JSON nested at most ``MAX_INPUT_DEPTH``
(64) deep, and checks it, before it connects to the database.  It maps the
input onto the thread and runs the graph, on the saver, to its next stop:

- the input's new messages (AG-UI messages whose id the thread does not hold
  yet) become LangChain messages, the graph's input at ``messages_key``.  A
  client writes only what a user may: ``user`` messages, and ``tool``
  results for tool calls the thread's assistant made and that have no
  result yet (a tool the client runs).  Any other new message (``system``,
  ``developer``, ``assistant``, a tool result for a call the assistant did
  not make or that has its result) is refused (``hxstate_message_refused``);
  ``activity`` and ``reasoning`` messages, which only a client displays,
  are left out;
- ``resume[]`` (AG-UI 1.0's ``{interruptId, status, payload}``) becomes
  ``Command(resume={interrupt_id: value})``: ``interrupt()`` returns the
  entry's payload when its status is ``resolved``, and ``{"status":
  "cancelled"}`` (with the payload, if any) when the user abandoned it.
  Such a run may not bring new messages: the interrupted node runs again
  on the state it stopped on, which they would change under it;
- with neither, a thread that has steps left (a run cut short) goes on, and
  one that has none is left as it is.

It reports the stop, ``{"outcome": "success" | "interrupt", "interrupts":
[{"id", "value"}], "checkpoint_id"}``, or an error the gateway turns into
RUN_ERROR: a ``RunError`` with a ``code`` (``hxstate_input_invalid``,
``hxstate_input_too_large``, ``hxstate_message_refused``,
``hxstate_interrupt_pending``, ``hxstate_resume_unknown``,
``hxstate_thread_conflict``, or ``hxstate_run_failed`` for the graph's own
exceptions) and ``expose``, whether its message may be shown to the client.
The command prints that report as one line of JSON on standard output
(``{"error": {"code", "message", "expose"}}`` and exit status 1 for an
error; what the graph prints goes to standard error).

With ``--live``, as the graph runs, the command writes its messages to
the thread's log stream as they are made (``live.py``): the run's
start and end markers, its chat models' tokens, tool calls and reasoning
(LangGraph's ``stream_mode="messages"``) as AG-UI ``TEXT_MESSAGE_*``,
``TOOL_CALL_*`` and ``REASONING_*`` events, in batches that share commits
(a token waits at most 50 ms), and its tools' results as
``TOOL_CALL_RESULT``; each message's END before the checkpoint that holds
it, on a connection of the run's own.  The graph's chat models then
stream (LangChain streams a model a streaming callback listens to): one
that cannot (a test double that yields no chunk for a reply with only
tool calls) fails the run, hence a flag.

The thread is the gateway's target key, not the input's ``threadId`` (the
client's name for its conversation); the input's ``state``, ``tools``,
``context`` and ``forwardedProps`` are not used.  A message the thread
already holds is not sent again, even if the client changed it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import json
import os
import re
import sys
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from langgraph.types import Command, StateSnapshot

from hxstate.errors import HxError, NonDeterministicRetry, ThreadConflict
from hxstate.langgraph import HxSaver
from hxstate.langgraph.limits import check_thread_id
from hxstate.langgraph.live import LiveLog, LiveLogError, afeed_run, feed_run, run_marker

__all__ = [
    "MAX_INPUT_BYTES",
    "MAX_INPUT_DEPTH",
    "RunError",
    "RunResult",
    "arun",
    "check_input",
    "main",
    "read_input",
    "resume_value",
    "run",
    "to_langchain",
]

#: the largest input the command reads, in bytes (the gateway's maxBody)
MAX_INPUT_BYTES = 1 << 20
#: how deep the input's JSON may nest (a RunAgentInput needs 6)
MAX_INPUT_DEPTH = 64
# what a client may write: new messages of these roles (tool results only
# for the assistant's pending calls); these others are display-only and
# left out
_CLIENT_ROLES = frozenset({"user", "tool"})
_DISPLAY_ROLES = frozenset({"activity", "reasoning"})


class RunResult(TypedDict):
    """Where the graph stopped."""

    outcome: Literal["success", "interrupt"]
    #: the pending interrupts, as the thread's state shows them at /__interrupt__
    interrupts: list[dict[str, Any]]
    #: the thread's head after the run (None for a thread with no checkpoint)
    checkpoint_id: str | None


class RunError(Exception):
    """A run that cannot go on: ``code`` becomes RUN_ERROR's code, and
    ``message`` its message when ``expose`` is true."""

    def __init__(self, code: str, message: str, *, expose: bool = True) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.expose = expose

    def as_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "expose": self.expose}


def _invalid(message: str) -> RunError:
    return RunError("hxstate_input_invalid", message)


def resume_value(entry: Mapping[str, Any]) -> Any:
    """What ``interrupt()`` returns for a resume entry: its payload when
    resolved, ``{"status": "cancelled"}`` (and its payload, if any) when
    abandoned."""
    if entry.get("status") == "cancelled":
        return {"status": "cancelled", **({"payload": entry["payload"]} if "payload" in entry else {})}
    return entry.get("payload")


def _content(content: Any, where: str) -> str | list[str | dict[str, Any]]:
    """AG-UI content (a string, or text and image parts) as LangChain's."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _invalid(f"{where}: content is a string or a list of parts")
    out: list[str | dict[str, Any]] = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            out.append({"type": "text", "text": part["text"]})
            continue
        source = part.get("source") if kind == "image" else None
        if isinstance(source, dict) and source.get("type") == "url" and isinstance(source.get("value"), str):
            out.append({"type": "image_url", "image_url": {"url": source["value"]}})
            continue
        if isinstance(source, dict) and source.get("type") == "data" and isinstance(source.get("value"), str):
            mime = source.get("mimeType") if isinstance(source.get("mimeType"), str) else "application/octet-stream"
            out.append({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{source['value']}"}})
            continue
        raise _invalid(f"{where}: content part {i} ({kind!r}) is not text or an image")
    return out


def _tool_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise _invalid(f"{where}: toolCalls is a list")
    out = []
    for i, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(call.get("id"), str):
            raise _invalid(f"{where}: tool call {i} has no id or function name")
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except (TypeError, ValueError):
            raise _invalid(f"{where}: the arguments of tool call {call['id']} are not JSON") from None
        if not isinstance(args, dict):
            raise _invalid(f"{where}: the arguments of tool call {call['id']} are not a JSON object")
        out.append({"name": fn["name"], "args": args, "id": call["id"], "type": "tool_call"})
    return out


def to_langchain(message: Mapping[str, Any]) -> BaseMessage | None:
    """One AG-UI message as a LangChain message, with its id; None for the
    roles that are not conversation (``activity``, ``reasoning``)."""
    mid, role = message.get("id"), message.get("role")
    where = f"message {mid!r}"
    if not isinstance(mid, str) or mid == "":
        raise _invalid("a message has no id")
    name = message.get("name") if isinstance(message.get("name"), str) else None
    if role == "user":
        return HumanMessage(content=_content(message.get("content"), where), id=mid, name=name)
    if role == "assistant":
        return AIMessage(
            content=_content(message.get("content"), where),
            id=mid,
            name=name,
            tool_calls=_tool_calls(message.get("toolCalls"), where),
        )
    if role == "tool":
        call = message.get("toolCallId")
        if not isinstance(call, str) or call == "":
            raise _invalid(f"{where}: a tool message has no toolCallId")
        error = message.get("error")
        return ToolMessage(
            content=_content(message.get("content"), where),
            id=mid,
            tool_call_id=call,
            status="error" if error else "success",
        )
    if role == "system":
        return SystemMessage(content=_content(message.get("content"), where), id=mid, name=name)
    if role == "developer":
        # LangChain's own spelling of a developer message (convert_to_messages)
        return SystemMessage(
            content=_content(message.get("content"), where),
            id=mid,
            name=name,
            additional_kwargs={"__openai_role__": "developer"},
        )
    if role in ("activity", "reasoning"):
        return None
    raise _invalid(f"{where}: unknown role {role!r}")


def _entries(input: Any) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The input's messages and resume entries, checked for shape."""
    if not isinstance(input, Mapping):
        raise _invalid("the input is not a RunAgentInput (a JSON object)")
    messages = input.get("messages", [])
    resume = input.get("resume") or []
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        raise _invalid("messages is a list of messages")
    if not isinstance(resume, list) or not all(
        isinstance(r, Mapping) and isinstance(r.get("interruptId"), str) and r.get("status") in ("resolved", "cancelled")
        for r in resume
    ):
        raise _invalid('resume is a list of {interruptId, status: "resolved" | "cancelled", payload}')
    return messages, resume


def check_input(input: Any) -> None:
    """Check a RunAgentInput's shape, and that every message maps to a
    LangChain message, without the thread (the command does so before it
    connects to the database).  Raises RunError (hxstate_input_invalid)."""
    messages, _ = _entries(input)
    for m in messages:
        to_langchain(m)


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def _depth(text: str) -> int:
    """How deep JSON text nests (its strings left out)."""
    depth = deepest = 0
    for b in _BRACKET.finditer(_STRING.sub("", text)):
        if b.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def read_input(data: bytes, *, max_bytes: int = MAX_INPUT_BYTES, max_depth: int = MAX_INPUT_DEPTH) -> Any:
    """A RunAgentInput's JSON text (UTF-8), parsed within bounds: at most
    ``max_bytes`` bytes (else hxstate_input_too_large) nested at most
    ``max_depth`` deep (else hxstate_input_invalid).  ``data`` may be one
    byte longer than the bound: the command reads that much to tell."""
    if len(data) > max_bytes:
        raise RunError("hxstate_input_too_large", f"the input is larger than {max_bytes} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid("the input is not UTF-8") from None
    if _depth(text) > max_depth:
        raise _invalid(f"the input nests deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except ValueError as bad:
        raise _invalid(f"the input is not JSON: {bad}") from None


def _new_messages(messages: list[Mapping[str, Any]], held: Sequence[Any]) -> list[BaseMessage]:
    """The input's messages that the thread does not hold yet, as LangChain
    messages: the user's, and results of the assistant's pending tool
    calls (a tool the client runs).  Anything else a client could write
    (a system prompt, an assistant's words or tool calls, the result of a
    call the assistant never made or that has its result) would speak for
    the graph: refused."""
    held_ids = {getattr(m, "id", None) for m in held}
    pending: set[str] = set()
    for m in held:
        if isinstance(m, AIMessage):
            pending.update(c["id"] for c in m.tool_calls if c["id"])
    for m in held:
        if isinstance(m, ToolMessage):
            pending.discard(m.tool_call_id)
    out: list[BaseMessage] = []
    for m in messages:
        mid, role = m.get("id"), m.get("role")
        if mid in held_ids or role in _DISPLAY_ROLES:
            continue
        if role not in _CLIENT_ROLES:
            raise RunError(
                "hxstate_message_refused",
                f"message {mid!r}: a client may not write {role} messages, only user messages "
                "and the results of the assistant's pending tool calls",
            )
        if role == "tool":
            call = m.get("toolCallId")
            if call not in pending:
                raise RunError(
                    "hxstate_message_refused",
                    f"message {mid!r}: tool call {call!r} is not one the assistant made and awaits a result for",
                )
            pending.discard(call)
        lc = to_langchain(m)
        assert lc is not None
        out.append(lc)
    return out


def _plan(
    state: StateSnapshot,
    input: Mapping[str, Any],
    messages_key: str,
    value_of: Callable[[Mapping[str, Any]], Any],
) -> tuple[bool, Any]:
    """What to run for the input on the thread as it is: (run?, the graph's input)."""
    messages, resume = _entries(input)
    new = _new_messages(messages, (state.values or {}).get(messages_key) or [])
    pending = {i.id: i for i in state.interrupts}
    answers: dict[str, Any] = {}
    for entry in resume:
        iid = entry["interruptId"]
        if iid not in pending:
            raise RunError("hxstate_resume_unknown", f"resume[] answers an interrupt that is not pending: {iid}")
        if iid in answers:
            raise _invalid(f"resume[] answers the interrupt {iid} twice")
        answers[iid] = value_of(entry)
    open_ = [iid for iid in pending if iid not in answers]
    if open_:
        raise RunError(
            "hxstate_interrupt_pending",
            f"the thread waits on interrupt(s) {', '.join(open_)}: answer each in resume[]",
        )
    if answers:
        if new:
            # the interrupted node runs again on the state it stopped on
            raise _invalid("a run that answers interrupts (resume[]) carries no new messages: send them in the next run")
        return True, Command(resume=answers)
    if new:
        return True, {messages_key: new}
    # nothing new: a run cut short goes on, a finished thread stays as it is
    return bool(state.next), None


def _result(state: StateSnapshot) -> RunResult:
    interrupts = [{"id": i.id, "value": i.value} for i in state.interrupts]
    configurable = (state.config or {}).get("configurable", {})
    return {
        "outcome": "interrupt" if interrupts else "success",
        "interrupts": interrupts,
        "checkpoint_id": configurable.get("checkpoint_id"),
    }


def _failed(err: BaseException) -> RunError:
    if isinstance(err, RunError):
        return err
    if isinstance(err, ThreadConflict):
        return RunError("hxstate_thread_conflict", "another run moved the thread on: run again")
    return RunError("hxstate_run_failed", f"{type(err).__name__}: {err}", expose=False)


def _run_id(input: Any) -> str:
    """The run's id for its markers: the input's runId, else a new one."""
    run_id = input.get("runId") if isinstance(input, Mapping) else None
    return run_id if isinstance(run_id, str) and run_id else f"run-{uuid.uuid4()}"


def _config(thread_id: str, config: RunnableConfig | None) -> RunnableConfig:
    """config (the caller's, if any) on the thread."""
    base = config or {}
    return {**base, "configurable": {**base.get("configurable", {}), "thread_id": thread_id}}


def run(
    graph: Pregel[Any, Any, Any, Any],
    input: Mapping[str, Any],
    *,
    thread_id: str,
    messages_key: str = "messages",
    resume: Callable[[Mapping[str, Any]], Any] = resume_value,
    config: RunnableConfig | None = None,
    live: LiveLog | None = None,
) -> RunResult:
    """Run a compiled graph (with its checkpointer, HxSaver) for an AG-UI
    RunAgentInput on thread ``thread_id``, to its next stop.  Raises
    ``RunError``; ``resume`` maps a resume entry to what ``interrupt()``
    returns; ``config`` is merged into the run's config.  With ``live``
    (a LiveLog on the thread's stream), the run's messages are written to
    it as they are made (live.py): its start and end markers, its chat
    models' tokens, tool calls and reasoning, its tools' results."""
    cfg = _config(thread_id, config)
    run_id = _run_id(input)
    try:
        go, graph_input = _plan(graph.get_state(cfg), input, messages_key, resume)
        if live is None:
            if go:
                graph.invoke(graph_input, cfg, durability="sync")
        else:
            live.push([run_marker(run_id, "started")], urgent=True)
            try:
                if go:
                    feed_run(live, graph.stream(graph_input, cfg, durability="sync", stream_mode=["messages", "updates"]))
            except BaseException as exc:
                with contextlib.suppress(LiveLogError):
                    live.push([run_marker(run_id, "failed", _failed(exc).code)], urgent=True)
                    live.flush()
                raise
            live.push([run_marker(run_id, "finished")], urgent=True)
            live.flush()
        return _result(graph.get_state(cfg))
    except Exception as err:
        raise _failed(err) from err


async def arun(
    graph: Pregel[Any, Any, Any, Any],
    input: Mapping[str, Any],
    *,
    thread_id: str,
    messages_key: str = "messages",
    resume: Callable[[Mapping[str, Any]], Any] = resume_value,
    config: RunnableConfig | None = None,
    live: LiveLog | None = None,
) -> RunResult:
    """``run`` for a graph on an async checkpointer (AsyncHxSaver); with
    ``live``, the LiveLog's waits run in a thread, not on the event loop."""
    cfg = _config(thread_id, config)
    run_id = _run_id(input)
    try:
        go, graph_input = _plan(await graph.aget_state(cfg), input, messages_key, resume)
        if live is None:
            if go:
                await graph.ainvoke(graph_input, cfg, durability="sync")
        else:
            live.push([run_marker(run_id, "started")], urgent=True, wait=False)
            try:
                if go:
                    await afeed_run(live, graph.astream(graph_input, cfg, durability="sync", stream_mode=["messages", "updates"]))
            except BaseException as exc:
                with contextlib.suppress(LiveLogError):
                    live.push([run_marker(run_id, "failed", _failed(exc).code)], urgent=True, wait=False)
                    await asyncio.to_thread(live.flush)
                raise
            live.push([run_marker(run_id, "finished")], urgent=True, wait=False)
            await asyncio.to_thread(live.flush)
        return _result(await graph.aget_state(cfg))
    except Exception as err:
        raise _failed(err) from err


def load_graph(spec: str, saver: Any) -> Pregel[Any, Any, Any, Any]:
    """``module:attribute`` (the module looked for in the current directory
    first) or ``path/to/file.py:attribute``: a StateGraph
    (compiled here with the saver), a compiled graph (its checkpointer
    replaced by the saver), or a function of the saver that returns a
    compiled graph."""
    where, _, attr = spec.rpartition(":")
    if not where or not attr:
        raise ValueError(f"the graph is module:attribute or file.py:attribute, not {spec!r}")
    if where.endswith(".py"):
        path = Path(where).resolve()
        loaded = importlib.util.spec_from_file_location(path.stem, path)
        if loaded is None or loaded.loader is None:
            raise ValueError(f"cannot load {where}")
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
    else:
        # a module of the current directory, as python -m finds it (a
        # console script's path does not have the directory)
        here = os.getcwd()
        if here not in sys.path:
            sys.path.insert(0, here)
        module = importlib.import_module(where)
    obj = getattr(module, attr)
    if isinstance(obj, StateGraph):
        return obj.compile(checkpointer=saver)
    if isinstance(obj, Pregel):
        return obj.copy(update={"checkpointer": saver})
    if callable(obj):
        graph = obj(saver)
        if isinstance(graph, Pregel):
            return graph
    raise ValueError(f"{spec} is not a StateGraph, a compiled graph, or a function of a saver that returns one")


def _json(value: Any) -> str:
    return json.dumps(value, default=repr, separators=(",", ":"))


# the options that take a value: "--thread VALUE" is read as "--thread=VALUE",
# so that a value beginning with "-" (a thread "-x") is not taken for an option
_VALUED = ("--thread", "--dsn", "--schema", "--messages-key", "--max-input-bytes")


def _joined(argv: Sequence[str]) -> list[str]:
    out: list[str] = []
    it = iter(argv)
    for a in it:
        if a == "--":
            out.append(a)
            out.extend(it)
            break
        if a in _VALUED:
            value = next(it, None)
            out.append(a if value is None else f"{a}={value}")
        else:
            out.append(a)
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hxstate-agui",
        description="Run a LangGraph graph on HxSaver for an AG-UI RunAgentInput (read whole from standard input "
        "and checked before the database is touched), to its next stop, and print where it stopped as JSON.",
    )
    parser.add_argument("graph", nargs="?", help="module:attribute or file.py:attribute: a StateGraph, a compiled graph, or a function of the saver")
    parser.add_argument("--thread", help="the thread id (the gateway's target key); --thread=ID for an id that begins with -")
    parser.add_argument("--dsn", default=os.environ.get("DATABASE_URL", ""), help="the database (default DATABASE_URL, else the PG* variables)")
    parser.add_argument("--schema", default="langgraph", help="the saver's schema (default langgraph)")
    parser.add_argument("--messages-key", default="messages", help="the state's key of the conversation (default messages)")
    parser.add_argument("--max-input-bytes", type=int, default=MAX_INPUT_BYTES,
                        help=f"the largest input read, in bytes (default {MAX_INPUT_BYTES})")
    parser.add_argument("--setup", action="store_true", help="run the saver's setup() (its tables and the threads source) and exit")
    parser.add_argument("--live", action="store_true",
                        help="write the run's messages to the thread's stream as they are made (tokens, tool calls, reasoning: "
                        "the graph's chat models then stream); without it followers see each message once its step's "
                        "checkpoint is written")
    return parser


def _report(out: Any, value: Any) -> None:
    print(_json(value), file=out, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """The command (console script ``hxstate-agui``): the RunAgentInput on
    standard input, read whole and checked before the database is touched;
    the report on standard output."""
    parser = _parser()
    args = parser.parse_args(_joined(sys.argv[1:] if argv is None else argv))
    if not args.setup and (not args.graph or args.thread is None):
        parser.error("a graph and --thread are required (or --setup)")
    if args.max_input_bytes < 1:
        parser.error("--max-input-bytes must be positive")

    out = sys.stdout
    if args.setup:
        with HxSaver.from_conn_string(args.dsn, schema=args.schema) as saver:
            saver.setup()
        return 0
    try:
        # all of the input, and the thread's id, checked first: a hook that
        # never finishes writing leaves this process waiting with nothing
        # open, and a bad input never costs a connection
        try:
            check_thread_id(args.thread)
        except HxError as bad:
            raise _invalid(str(bad)) from None
        payload = read_input(sys.stdin.buffer.read(args.max_input_bytes + 1), max_bytes=args.max_input_bytes)
        check_input(payload)
        run_id = payload.get("runId")
        if run_id is not None and (not isinstance(run_id, str) or not run_id):
            raise _invalid("runId is a string")
        with HxSaver.from_conn_string(args.dsn, schema=args.schema) as saver:
            # the run's admission, durable before anything else of it: a
            # crash from here on leaves a record of a run that did not end
            if run_id is not None:
                _admit(saver, args.thread, run_id, payload)
            try:
                # what the graph prints goes to standard error: standard output is the report's
                with contextlib.redirect_stdout(sys.stderr):
                    graph = load_graph(args.graph, saver)
                    config: RunnableConfig | None = {"metadata": {"run_id": run_id}} if run_id is not None else None
                    live = LiveLog(args.dsn, f"@{args.schema}:{args.thread}", schema=args.schema) if args.live else None
                    try:
                        result = run(graph, payload, thread_id=args.thread, messages_key=args.messages_key,
                                     config=config, live=live)
                    finally:
                        if live is not None:
                            with contextlib.suppress(LiveLogError):
                                live.close()
            except Exception as exc:
                if run_id is not None:
                    saver.finish(args.thread, run_id, "error", _failed(exc).code)
                raise
            if run_id is not None:
                saver.finish(args.thread, run_id, result["outcome"])
    except Exception as exc:
        err = _failed(exc)
        if not err.expose:
            traceback.print_exc(file=sys.stderr)
        _report(out, {"error": err.as_json()})
        return 1
    _report(out, result)
    return 0


def _admit(saver: HxSaver, thread_id: str, run_id: str, payload: Any) -> None:
    """Admit the run (HxSaver.admit), once: a run admitted before and ended
    is not run again, nor one admitted with another input; one admitted
    and lost (no end) runs again."""
    try:
        admission = saver.admit(thread_id, run_id, payload)
    except NonDeterministicRetry:
        raise RunError("hxstate_run_duplicate", f"run {run_id} was admitted before, with another input") from None
    if admission.outcome is not None:
        raise RunError("hxstate_run_duplicate", f"run {run_id} was admitted before and ended ({admission.outcome})")


if __name__ == "__main__":
    sys.exit(main())
