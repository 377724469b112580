"""hxstate for Python.

- ``merge``, ``stage``, ``promote``, ``state_at``, ``events``: hxstate's
  functions on a psycopg connection (``hxstate.aio`` has them async);
- ``hxstate.errors``: every SQLSTATE of hxstate's README as an exception;
- ``hxstate.aio.follow``: a stream's AG-UI events, as an async iterator;
- ``hxstate.langgraph.HxSaver``: a LangGraph checkpointer on hxstate.
"""

from hxstate.errors import HxError
from hxstate.patch import apply_event, apply_patch
from hxstate.sync import events, hx_schema, merge, promote, stage, state_at

__version__ = "0.7.0"
__all__ = [
    "HxError",
    "__version__",
    "apply_event",
    "apply_patch",
    "events",
    "hx_schema",
    "merge",
    "promote",
    "stage",
    "state_at",
]
