"""Persistence: the storage port and its adapters: SQLite through aiosqlite (the
embedded default) and PostgreSQL through asyncpg (the `postgres` extra).

Knows nothing of actors or the process edges.
"""

from ._effects import (
    AddMemory,
    AddReminder,
    CompleteReminder,
    Effect,
    add_memory_effect,
    add_reminder_effect,
    complete_reminder_effect,
)
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
    EARLIEST,
    LATEST,
    MAX_DOCUMENT_CHARS,
    MAX_MEMORY_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_REMINDER_CHARS,
    MAX_ROW_ID,
    check_continuum_id,
    check_instant,
    check_message,
    check_row_id,
)

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_DOCUMENT_CHARS",
    "MAX_MEMORY_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_REMINDER_CHARS",
    "MAX_ROW_ID",
    "SCHEMA_VERSION",
    "AddMemory",
    "AddReminder",
    "CompleteReminder",
    "ContentBlock",
    "Continuum",
    "Document",
    "Effect",
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
    "add_memory_effect",
    "add_reminder_effect",
    "check_continuum_id",
    "check_instant",
    "check_message",
    "check_row_id",
    "complete_reminder_effect",
]
