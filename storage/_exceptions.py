"""Every error the storage layer raises, under one root."""

from __future__ import annotations

__all__ = [
    "InvalidInput",
    "MessageTooLarge",
    "NotFound",
    "SchemaTooNew",
    "StorageError",
    "StorageUnavailable",
    "UnknownContinuum",
    "UserExists",
]


class StorageError(Exception):
    """Root of every storage error."""


class InvalidInput(StorageError, ValueError):
    """The call was refused before anything was written: the message says what was wrong."""


class MessageTooLarge(InvalidInput):
    """A user message is over `MAX_MESSAGE_CHARS` (the daemon answers 413)."""


class NotFound(StorageError, LookupError):
    """The record the call names does not exist."""


class UnknownContinuum(NotFound):
    """A read-only query named a continuum that has never had a turn."""


class UserExists(StorageError):
    """`add_user` named a user that already exists (a token is issued once, never again)."""


class ImportCollision(StorageError):
    """An import met rows the store already has (the same user, continuum or id)."""


class SchemaTooNew(StorageError):
    """The database was written by a newer Frontmind; opening it could corrupt it."""


class StorageUnavailable(StorageError):
    """The database could not be opened, read or written (the cause is chained)."""
