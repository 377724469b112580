"""A small real graph for the tests and the benchmark: MessagesState, a fake
chat model from langchain-core (no network), a tool node, and a human's
approval by interrupt() before the tool runs."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def build(replies: Iterable[AIMessage], *, approval: bool = True) -> StateGraph[Any]:
    model = GenericFakeChatModel(messages=iter(replies))

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def approve(state: MessagesState) -> dict[str, Any]:
        answer = interrupt({"question": "run the tool?", "call": state["messages"][-1].tool_calls[0]["name"]})
        return {"messages": [HumanMessage(content=f"approved: {answer}", id=f"approval-{len(state['messages'])}")]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return "approve" if approval else "tools"
        return END

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([add]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["approve", "tools", END] if approval else ["tools", END])
    if approval:
        g.add_node("approve", approve)
        g.add_edge("approve", "tools")
    g.add_edge("tools", "agent")
    return g


def compile_graph(replies: Iterable[AIMessage], saver: Any, *, approval: bool = True) -> CompiledStateGraph[Any, Any, Any, Any]:
    return build(replies, approval=approval).compile(checkpointer=saver)


def tool_call(n: int, a: int, b: int) -> AIMessage:
    return AIMessage(
        content="",
        id=f"ai-{n}",
        tool_calls=[{"name": "add", "args": {"a": a, "b": b}, "id": f"call-{n}"}],
    )


def answer(n: int, text: str) -> AIMessage:
    return AIMessage(content=text, id=f"ai-{n}")


def normalize(value: Any, ids: dict[str, str] | None = None) -> Any:
    """A value with every message id (random where LangGraph made it) and
    interrupt id replaced by its order of appearance, for comparing runs."""
    ids = {} if ids is None else ids

    def nid(i: Any) -> Any:
        if not isinstance(i, str):
            return i
        return ids.setdefault(i, f"#{len(ids)}")

    if isinstance(value, BaseMessage):
        d = value.model_dump()
        d["id"] = nid(d.get("id"))
        return normalize(d, ids)
    if isinstance(value, dict):
        return {k: normalize(v, ids) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize(v, ids) for v in value]
    if type(value).__name__ == "Interrupt":
        return {"interrupt": normalize(value.value, ids), "id": nid(value.id)}
    return value


def snapshot(s: Any) -> dict[str, Any]:
    """What a StateSnapshot says, without the ids that differ between runs."""
    return {
        "values": normalize(s.values),
        "next": tuple(s.next),
        "source": s.metadata.get("source") if s.metadata else None,
        "step": s.metadata.get("step") if s.metadata else None,
        "has_parent": s.parent_config is not None,
        "tasks": [(t.name, normalize(list(t.interrupts))) for t in s.tasks],
        "interrupts": normalize(list(s.interrupts)),
    }


def history(graph: Any, config: Any) -> list[dict[str, Any]]:
    return [snapshot(s) for s in graph.get_state_history(config)]


def chunks(stream: Iterator[Any]) -> list[Any]:
    return [normalize(c) for c in stream]
