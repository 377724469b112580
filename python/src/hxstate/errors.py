"""hxstate's SQLSTATEs as Python exceptions.

Every condition of the README's SQLSTATE table has a class here, so that a
caller tells a locked column from a busy slot or a non-deterministic retry
without reading the message.  ``translate(err)`` turns a psycopg error into
the matching class (an ``HxError`` that keeps the psycopg error as its
``__cause__`` and the server's diagnostics as attributes); ``errors()`` is a
context manager that does it for a block.  Conditions that core PostgreSQL
names keep core's codes, and psycopg's own classes still catch them through
``HxError.pgerror``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

import psycopg


class HxError(Exception):
    """An error the server raised with one of hxstate's SQLSTATEs."""

    sqlstate: ClassVar[str] = ""
    #: the psycopg error it was translated from (None when raised by Python)
    pgerror: psycopg.Error | None

    def __init__(
        self,
        message: str,
        *,
        detail: str | None = None,
        hint: str | None = None,
        context: str | None = None,
        pgerror: psycopg.Error | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.hint = hint
        self.context = context
        self.pgerror = pgerror

    def __str__(self) -> str:
        return self.message if not self.detail else f"{self.message}\nDETAIL:  {self.detail}"


# hxstate's own class XH
class TestFailed(HxError):
    """XH001: a ``test`` op failed (re-read and retry)."""

    __test__ = False  # not a pytest test class
    sqlstate = "XH001"


class TypeConflict(HxError):
    """XH002: hx_merge met the wrong type."""

    sqlstate = "XH002"


class LockedColumn(HxError):
    """XH101: hx_lock_once: a locked column or member was changed."""

    sqlstate = "XH101"


class SlotBusy(HxError):
    """XH102: hx_slot_guard: a value replaced by another value."""

    sqlstate = "XH102"


class InvalidTransition(HxError):
    """XH103: no such edge of the phase machine."""

    sqlstate = "XH103"


class NonDeterministicRetry(HxError):
    """XH201: a call of a step staged again with other writes."""

    sqlstate = "XH201"


class StepPromoted(HxError):
    """XH202: a call staged into a step that was promoted."""

    sqlstate = "XH202"


class StepPromotedIntoAnotherRow(HxError):
    """XH203: a statement promoted steps of other streams only, and changed
    this row's state (hx_stream)."""

    sqlstate = "XH203"


class Trimmed(HxError):
    """XH301: the events needed were trimmed from the log."""

    sqlstate = "XH301"


class OutOfSequence(HxError):
    """XH302: an event inserted into hx_event by SQL whose seq is not its
    stream's next, or that is dated out of order (hx_event_guard)."""

    sqlstate = "XH302"


class NoSuchRow(HxError):
    """P0002: hx_stream_emit names a row that does not exist, or that the
    caller may not update."""

    sqlstate = "P0002"


# core's codes that the README's table lists
class InvalidParameterValue(HxError):
    """22023: a malformed patch or op list, an unknown option, a seq not reached."""

    sqlstate = "22023"


class InvalidTextRepresentation(HxError):
    """22P02: a malformed JSON Pointer or JSON text, a key its type rejects."""

    sqlstate = "22P02"


class UntranslatableCharacter(HxError):
    """22P05: \\u0000 in a JSON string."""

    sqlstate = "22P05"


class NumericValueOutOfRange(HxError):
    """22003: an increment beyond numeric's range."""

    sqlstate = "22003"


class NullValueNotAllowed(HxError):
    """22004: hx_stage with a NULL argument."""

    sqlstate = "22004"


class ArraySubscriptError(HxError):
    """2202E: arrays of different lengths."""

    sqlstate = "2202E"


class ObjectNotInPrerequisiteState(HxError):
    """55000: a publication that does not publish hx_event."""

    sqlstate = "55000"


class ReadOnlyTransaction(HxError):
    """25006: hx_stream_send (or a change a streamed table logs directly) in
    a read-only transaction or on a standby."""

    sqlstate = "25006"


class DatetimeFieldOverflow(HxError):
    """22008: hx_event_ring of infinity or -infinity."""

    sqlstate = "22008"


class DataCorrupted(HxError):
    """XX001: the log holds an event hxstate did not write (a delta that is
    not an array), or a checkpoint HxSaver rebuilds from is missing."""

    sqlstate = "XX001"


class DuplicateObject(HxError):
    """42710: two tables whose streams would be named alike."""

    sqlstate = "42710"


class InvalidJsonSubscript(HxError):
    """22033: an array index that is not an index."""

    sqlstate = "22033"


class PathNotFound(HxError):
    """2203A: a path that does not exist."""

    sqlstate = "2203A"


class SerializationFailure(HxError):
    """40001: retry the transaction."""

    sqlstate = "40001"


class StatementTooComplex(HxError):
    """54001: nesting deeper than max_stack_depth allows."""

    sqlstate = "54001"


class ProgramLimitExceeded(HxError):
    """54000: a result larger than jsonb can hold."""

    sqlstate = "54000"


class TriggerProtocolViolated(HxError):
    """39P01: a trigger function misused."""

    sqlstate = "39P01"


class UndefinedColumn(HxError):
    """42703: a trigger argument names no column."""

    sqlstate = "42703"


class DatatypeMismatch(HxError):
    """42804: a column of the wrong type."""

    sqlstate = "42804"


class UndefinedTable(HxError):
    """42P01: one of the extension's tables is missing (ALTER EXTENSION hxstate UPDATE)."""

    sqlstate = "42P01"


class UndefinedObject(HxError):
    """42704: an unknown machine, or a table without an hx_stream trigger."""

    sqlstate = "42704"


class AmbiguousParameter(HxError):
    """42P08: a table with two hx_stream triggers."""

    sqlstate = "42P08"


class InvalidColumnReference(HxError):
    """42P10: an hx_stream key column without a unique index."""

    sqlstate = "42P10"


class InsufficientPrivilege(HxError):
    """42501: a missing privilege (e.g. on hx_event)."""

    sqlstate = "42501"


class UndefinedFunction(HxError):
    """42883: a key type with no equality operator."""

    sqlstate = "42883"


class StaleDocument(HxError):
    """XH401: an hxdoc value whose pieces later writes of its row deleted
    (held across two writes), or a row holding another row's document."""

    sqlstate = "XH401"


class DuplicateColumn(HxError):
    """42701: a column stored by two hx_store triggers, or named twice."""

    sqlstate = "42701"


class WrongObjectType(HxError):
    """42809: hx_store_backfill of a relation that is not a table."""

    sqlstate = "42809"


class InvalidBinaryRepresentation(HxError):
    """22P03: an hxdoc in binary form whose version is not jsonb's."""

    sqlstate = "22P03"


class FeatureNotSupported(HxError):
    """0A000: an hxdoc segment stored with lz4, read by a server without lz4."""

    sqlstate = "0A000"


class StateTooLarge(ProgramLimitExceeded):
    """A followed stream whose state (its JSON text) would be longer than
    the follower's bound, max_state_bytes: the follower stops (54000)."""


# raised by the LangGraph saver itself
class ThreadConflict(SerializationFailure):
    """A run's checkpoint whose parent another writer already continued from:
    the thread moved on.  Retry the run from the thread's head."""


class TypeNotAllowed(InvalidParameterValue):
    """A value whose type the saver's serializer does not rebuild: a stored
    value that names a type off its allow-list (planted, or stored by a
    saver that allowed more), or a value of such a type being written."""


class Tampered(DataCorrupted):
    """An encrypted saver's row that does not open where it is: a ciphertext
    moved from elsewhere (another thread, checkpoint, channel, version or
    write), replayed, altered, or a plaintext value where ciphertext is
    expected (XX001)."""


class OwnerSuperseded(ObjectNotInPrerequisiteState):
    """A write to a thread that another writer owns (it acquired the thread
    after this writer did, or this writer released it), or without the
    owner's token: nothing was written.  The writer was fenced off: it
    should stop, not retry."""


class NotOwner(InsufficientPrivilege):
    """setup() found, in the saver's schema, what its role does not own: the
    schema, a table or function another role made, a trigger or rule on
    its tables, another role that may create objects there."""


class NotSetUp(HxError):
    """The saver's tables are missing or older than the package: call setup()."""

    sqlstate = "42P01"


BY_SQLSTATE: dict[str, type[HxError]] = {
    cls.sqlstate: cls
    for cls in (
        TestFailed,
        TypeConflict,
        LockedColumn,
        SlotBusy,
        InvalidTransition,
        NonDeterministicRetry,
        StepPromoted,
        StepPromotedIntoAnotherRow,
        Trimmed,
        OutOfSequence,
        NoSuchRow,
        InvalidParameterValue,
        InvalidTextRepresentation,
        UntranslatableCharacter,
        NumericValueOutOfRange,
        NullValueNotAllowed,
        ArraySubscriptError,
        ObjectNotInPrerequisiteState,
        ReadOnlyTransaction,
        DatetimeFieldOverflow,
        DataCorrupted,
        DuplicateObject,
        InvalidJsonSubscript,
        PathNotFound,
        SerializationFailure,
        StatementTooComplex,
        ProgramLimitExceeded,
        TriggerProtocolViolated,
        UndefinedColumn,
        DatatypeMismatch,
        UndefinedTable,
        UndefinedObject,
        AmbiguousParameter,
        InvalidColumnReference,
        InsufficientPrivilege,
        UndefinedFunction,
        StaleDocument,
        DuplicateColumn,
        WrongObjectType,
        InvalidBinaryRepresentation,
        FeatureNotSupported,
    )
}


def translate(err: psycopg.Error) -> HxError | psycopg.Error:
    """The HxError for a psycopg error whose SQLSTATE hxstate documents; the
    error itself otherwise."""
    cls = BY_SQLSTATE.get(err.sqlstate or "")
    if cls is None:
        return err
    d = err.diag
    return cls(
        d.message_primary or str(err),
        detail=d.message_detail,
        hint=d.message_hint,
        context=d.context,
        pgerror=err,
    )


@contextmanager
def errors() -> Iterator[None]:
    """Raise hxstate's exceptions for the psycopg errors of a block."""
    try:
        yield
    except psycopg.Error as err:
        new = translate(err)
        if new is err:
            raise
        raise new from err
