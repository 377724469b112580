"""hxstate for Python: helpers for hx_merge, hx_stage and hx_promote,
hxstate's SQLSTATEs as exceptions, a follower of a stream's AG-UI events,
and (hxstate.langgraph) HxSaver, a LangGraph checkpointer."""

from hxstate.errors import HxError

__version__ = "0.6.0"
__all__ = ["HxError", "__version__"]
