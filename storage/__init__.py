"""Persistence: the storage port and its adapters: SQLite through aiosqlite (the
embedded default) and PostgreSQL through asyncpg (the `postgres` extra).

Knows nothing of actors or the process edges.
"""

from ._exceptions import (
    InvalidInput,
    MessageTooLarge,
    NotFound,
    SchemaTooNew,
    StorageError,
    StorageUnavailable,
    UnknownContinuum,
)
from ._migrations import SCHEMA_VERSION
from ._port import Storage
from ._postgres import PostgresStorage
from ._records import (
    ContentBlock,
    Continuum,
    Document,
    Memory,
    MemoryHit,
    Message,
    MessageHit,
    Reminder,
    SectionStatus,
    Segment,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TurnRecord,
    TurnStatus,
    TurnUsage,
    TurnWrite,
)
from ._sqlite import SQLiteStorage
from ._validation import (
    MAX_DOCUMENT_CHARS,
    MAX_MEMORY_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_REMINDER_CHARS,
    check_continuum_id,
    check_message,
)

__all__ = [
    "MAX_DOCUMENT_CHARS",
    "MAX_MEMORY_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_REMINDER_CHARS",
    "SCHEMA_VERSION",
    "ContentBlock",
    "Continuum",
    "Document",
    "InvalidInput",
    "Memory",
    "MemoryHit",
    "Message",
    "MessageHit",
    "MessageTooLarge",
    "NotFound",
    "PostgresStorage",
    "Reminder",
    "SQLiteStorage",
    "SchemaTooNew",
    "SectionStatus",
    "Segment",
    "Storage",
    "StorageError",
    "StorageUnavailable",
    "TextBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "TurnRecord",
    "TurnStatus",
    "TurnUsage",
    "TurnWrite",
    "UnknownContinuum",
    "check_continuum_id",
    "check_message",
]
