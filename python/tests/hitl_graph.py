"""A graph that asks a human before it runs a tool, for the AG-UI tests
(test_agui.py): MessagesState, a fake chat model from langchain-core (no
network), a tool node, and interrupt() for the approval.

The model's replies follow the conversation, so that each process that runs
the graph (the gateway's run hook starts one per run) answers the same: to
a question "a + b?" it calls the tool add(a, b); to the tool's result it
answers "a + b = <result>"; to a declined call, "I did not add them.".  The
approval asks {reason, message, toolCallId}; interrupt() returns the
resume's payload, {"approved": true} to run the tool.  Anything else
declines it: the tool call gets an error result instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def reply(messages: Sequence[BaseMessage]) -> AIMessage:
    """What the model says next."""
    n = len(messages)
    last = messages[-1]
    if isinstance(last, ToolMessage):
        if last.status == "error":
            return AIMessage("I did not add them.", id=f"ai-{n}")
        return AIMessage(f"the sum is {last.content}", id=f"ai-{n}")
    if isinstance(last, HumanMessage):
        found = re.search(r"(-?\d+)\s*\+\s*(-?\d+)", last.text)
        if found:
            a, b = int(found[1]), int(found[2])
            return AIMessage("", id=f"ai-{n}", tool_calls=[{"name": "add", "args": {"a": a, "b": b}, "id": f"call-{n}"}])
    return AIMessage("ask me a sum", id=f"ai-{n}")


class FakeChat(GenericFakeChatModel):
    """langchain-core's fake chat model, whose replies' tool calls stream
    too: its own yields no chunk for a reply with tool calls and no text,
    and the run hook with --live streams the graph's messages
    (stream_mode="messages"), which makes its models stream."""

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        message = self._generate(messages, stop=stop, run_manager=run_manager, **kwargs).generations[0].message
        assert isinstance(message, AIMessage)
        words = re.split(r"(\s)", message.text) if message.text else []
        chunks = [AIMessageChunk(content=w, id=message.id) for w in words if w]
        chunks += [AIMessageChunk(content="", id=message.id, tool_call_chunks=[{
            "name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i, "type": "tool_call_chunk"}])
            for i, c in enumerate(message.tool_calls)]
        chunks[-1].chunk_position = "last"
        for c in chunks:
            chunk = ChatGenerationChunk(message=c)
            if run_manager:
                run_manager.on_llm_new_token(c.text, chunk=chunk)
            yield chunk


def agent(state: MessagesState) -> dict[str, Any]:
    model = FakeChat(messages=iter([reply(state["messages"])]))
    return {"messages": [model.invoke(state["messages"])]}


def route(state: MessagesState) -> str:
    last = state["messages"][-1]
    return "approve" if isinstance(last, AIMessage) and last.tool_calls else END


def approve(state: MessagesState) -> Command[Literal["tools", "agent"]]:
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    call = last.tool_calls[0]
    answer = interrupt(
        {"reason": "tool_call", "message": f"add {call['args']['a']} and {call['args']['b']}?", "toolCallId": call["id"]}
    )
    if isinstance(answer, dict) and answer.get("approved") is True:
        return Command(goto="tools")
    declined = ToolMessage("declined by the user", tool_call_id=call["id"], status="error", id=f"declined-{call['id']}")
    return Command(goto="agent", update={"messages": [declined]})


builder = StateGraph(MessagesState)
builder.add_node("agent", agent)
builder.add_node("approve", approve)
builder.add_node("tools", ToolNode([add]))
builder.add_edge(START, "agent")
builder.add_conditional_edges("agent", route, ["approve", END])
builder.add_edge("tools", "agent")


def failing(saver: Any) -> Any:
    """The same graph, whose tool fails (a function of the saver, as the
    command also takes)."""

    def explode(state: MessagesState) -> dict[str, Any]:
        raise RuntimeError("the tool exploded: secret detail")

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("approve", approve)
    g.add_node("tools", explode)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["approve", END])
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=saver)
