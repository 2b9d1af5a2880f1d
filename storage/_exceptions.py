"""Every error the storage layer raises, and the root of every error Frontmind raises.

`FrontmindError` is defined here, in the lowest layer that raises errors to callers,
because imports run one way (storage imports nothing of the rest): storage's errors
derive from it, and so do those of the actors and of the process edge above. Each error
class names its kind with `type`, one string per error, inherited until a subclass gives
its own; the library's `TurnError` events, the daemon's SSE `error` events and its HTTP
error bodies all carry it. The whole tree, with each type and HTTP status, is drawn in
`frontmind/_exceptions.py`, whose table maps it to the wire.
"""

from __future__ import annotations

__all__ = [
    "FrontmindError",
    "InvalidInput",
    "MessageTooLarge",
    "NotFound",
    "SchemaTooNew",
    "StorageError",
    "StorageUnavailable",
    "UnknownContinuum",
    "UserExists",
    "error_type",
]


class FrontmindError(Exception):
    """Root of every error Frontmind raises on purpose."""

    type = "internal_error"


class StorageError(FrontmindError):
    """Root of every storage error."""

    type = "storage_unavailable"


class InvalidInput(StorageError, ValueError):
    """The call was refused before anything was written: the message says what was wrong."""

    type = "invalid_request"


class MessageTooLarge(InvalidInput):
    """A user message is over `MAX_MESSAGE_CHARS` (the daemon answers 413)."""

    type = "request_too_large"


class NotFound(StorageError, LookupError):
    """The record the call names does not exist."""

    type = "not_found"


class UnknownContinuum(NotFound):
    """A read-only query named a continuum that has never had a turn (`continuum_id`
    says which: a caller reading several need not parse the message)."""

    def __init__(self, continuum_id: str) -> None:
        super().__init__(f"no continuum {continuum_id!r}")
        self.continuum_id = continuum_id

    def __reduce__(self) -> tuple[type[UnknownContinuum], tuple[str]]:
        return (type(self), (self.continuum_id,))  # pickled (a process pool) as it came


class UserExists(StorageError):
    """`add_user` named a user that already exists (a token is issued once, never again)."""

    type = "conflict"


class ImportCollision(StorageError):
    """An import met rows the store already has (the same user, continuum or id)."""

    type = "conflict"


class SchemaTooNew(StorageError):
    """The database was written by a newer Frontmind; opening it could corrupt it."""


class StorageUnavailable(StorageError):
    """The database could not be opened, read or written (the cause is chained)."""


def error_type(exc: BaseException) -> str:
    """The type string `exc` is reported with: its class's `type`, or `internal_error`
    for anything that is not a `FrontmindError` (a bug, or the actor kernel's)."""
    return exc.type if isinstance(exc, FrontmindError) else FrontmindError.type
