"""The sizes of the keys HxSaver stores, checked before anything is written.

A thread's id names its log stream (``@<schema>:<thread_id>``), which every
notification of the thread carries, and it is the first column of the
primary keys of ``checkpoints`` and ``writes``, whose B-tree entries hold
at most 2,704 bytes together.  So the saver refuses, before a statement
runs:

- a thread id, or a namespace, longer than 1,024 bytes in UTF-8 (the
  gateway refuses longer keys in its URLs too), with ``ProgramLimitExceeded``
  (SQLSTATE 54000);
- a checkpoint id, a task id or a run id longer than 256 bytes, likewise
  (LangGraph's are 36);
- any of them holding a NUL character, or text that is not Unicode (lone
  surrogates), with ``InvalidParameterValue`` (22023): PostgreSQL's text
  cannot hold them.
"""

from __future__ import annotations

from hxstate.errors import InvalidParameterValue, ProgramLimitExceeded

__all__ = ["MAX_ID_BYTES", "MAX_KEY_BYTES", "check_id", "check_key", "check_thread_id"]

#: the longest thread id and namespace, in bytes of UTF-8
MAX_KEY_BYTES = 1024
#: the longest checkpoint id, task id and run id, in bytes of UTF-8
MAX_ID_BYTES = 256


def check_key(what: str, value: str, limit: int = MAX_KEY_BYTES) -> str:
    """``value`` (a thread id, a namespace, ...) if the saver can store it;
    raises ProgramLimitExceeded or InvalidParameterValue otherwise."""
    if "\x00" in value:
        raise InvalidParameterValue(
            f"a {what} cannot contain a NUL character",
            hint="PostgreSQL's text holds no NUL: choose another.",
        )
    try:
        n = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidParameterValue(
            f"a {what} must be Unicode text",
            detail="It holds a lone surrogate, which UTF-8 cannot encode.",
        ) from None
    if n > limit:
        raise ProgramLimitExceeded(
            f"a {what} of {n} bytes is longer than the {limit} bytes HxSaver stores",
            detail=f"The {what} begins {value[:40]!r}.",
            hint="Keys name the thread's log stream, whose notifications carry them, and "
            "index entries: use a shorter one (a UUID, or a hash of the long one).",
        )
    return value


def check_thread_id(thread_id: str) -> str:
    return check_key("thread id", thread_id, MAX_KEY_BYTES)


def check_id(what: str, value: str) -> str:
    return check_key(what, value, MAX_ID_BYTES)
