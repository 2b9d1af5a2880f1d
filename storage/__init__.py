"""Persistence: the storage port and its adapters: SQLite through aiosqlite (the
embedded default) and PostgreSQL through asyncpg (the `postgres` extra).

Knows nothing of actors or the process edges.
"""

from typing import TYPE_CHECKING

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
    FrontmindError,
    ImportCollision,
    InvalidInput,
    MessageTooLarge,
    NotFound,
    SchemaTooNew,
    StorageError,
    StorageUnavailable,
    UnknownContinuum,
    UserExists,
    error_type,
)
from ._fts import memory_score
from ._jobs import (
    LEASE_SECONDS,
    MAX_ATTEMPTS,
    SEGMENT_SUMMARY,
    SegmentJob,
    backoff,
    segment_job_payload,
)
from ._migrate import Migration, MigrationMismatch, migrate
from ._migrations import SCHEMA_VERSION
from ._port import Storage
from ._records import (
    INTERRUPTED_TURN,
    ContentBlock,
    ContextSearch,
    Continuum,
    ContinuumModel,
    Document,
    Job,
    JobState,
    JobUsage,
    Memory,
    MemoryHit,
    MemoryProposal,
    Message,
    MessageHit,
    Passage,
    RawBlock,
    Reminder,
    SectionStatus,
    Segment,
    SegmentDigest,
    SpaceReclaimed,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TtlChoice,
    TurnOutcome,
    TurnRecord,
    TurnStatus,
    TurnUsage,
    TurnWrite,
    User,
    UserForgotten,
)
from ._searches import MAX_SEARCH_ATTEMPTS, SEARCH_LEASE_SECONDS
from ._sql import MAX_NEAREST, MAX_SEARCH_HITS
from ._time import EPOCH, moment, moment_or_none
from ._transfer import EXPORT_FORMAT, TableRows, decode_line, encode_header, encode_row
from ._validation import (
    DEFAULT_USER,
    EARLIEST,
    LABEL_PATTERN,
    LATEST,
    MAX_DOCUMENT_CHARS,
    MAX_MEMORY_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_REMINDER_CHARS,
    MAX_ROW_ID,
    MIN_THINKING_BUDGET,
    check_continuum_id,
    check_document,
    check_instant,
    check_label,
    check_message,
    check_model_name,
    check_row_id,
    check_storable,
    check_token_hash,
    check_user_name,
    check_vector,
    excerpt,
    storable,
    to_epoch,
    visible,
)

if TYPE_CHECKING:
    from ._postgres import PostgresStorage
    from ._sqlite import SQLiteStorage

__all__ = [
    "DEFAULT_USER",
    "EARLIEST",
    "EPOCH",
    "EXPORT_FORMAT",
    "INTERRUPTED_TURN",
    "LABEL_PATTERN",
    "LATEST",
    "LEASE_SECONDS",
    "MAX_ATTEMPTS",
    "MAX_DOCUMENT_CHARS",
    "MAX_MEMORY_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_NEAREST",
    "MAX_REMINDER_CHARS",
    "MAX_ROW_ID",
    "MAX_SEARCH_ATTEMPTS",
    "MAX_SEARCH_HITS",
    "MIN_THINKING_BUDGET",
    "SCHEMA_VERSION",
    "SEARCH_LEASE_SECONDS",
    "SEGMENT_SUMMARY",
    "AddMemory",
    "AddReminder",
    "CompleteReminder",
    "ContentBlock",
    "ContextSearch",
    "Continuum",
    "ContinuumModel",
    "Document",
    "Effect",
    "FrontmindError",
    "ImportCollision",
    "InvalidInput",
    "Job",
    "JobState",
    "JobUsage",
    "Memory",
    "MemoryHit",
    "MemoryProposal",
    "Message",
    "MessageHit",
    "MessageTooLarge",
    "Migration",
    "MigrationMismatch",
    "NotFound",
    "Passage",
    "PostgresStorage",
    "RawBlock",
    "Reminder",
    "SQLiteStorage",
    "SchemaTooNew",
    "SectionStatus",
    "Segment",
    "SegmentDigest",
    "SegmentJob",
    "SpaceReclaimed",
    "Storage",
    "StorageError",
    "StorageUnavailable",
    "TableRows",
    "TextBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "TtlChoice",
    "TurnOutcome",
    "TurnRecord",
    "TurnStatus",
    "TurnUsage",
    "TurnWrite",
    "UnknownContinuum",
    "User",
    "UserExists",
    "UserForgotten",
    "add_memory_effect",
    "add_reminder_effect",
    "backoff",
    "check_continuum_id",
    "check_document",
    "check_instant",
    "check_label",
    "check_message",
    "check_model_name",
    "check_row_id",
    "check_storable",
    "check_token_hash",
    "check_user_name",
    "check_vector",
    "complete_reminder_effect",
    "decode_line",
    "encode_header",
    "encode_row",
    "error_type",
    "excerpt",
    "memory_score",
    "migrate",
    "moment",
    "moment_or_none",
    "segment_job_payload",
    "storable",
    "to_epoch",
    "visible",
]

# The adapters load on first use: their drivers and numpy (the vector cache) cost some
# 0.3 s, which a process that only reads the records' types (a client of the daemon,
# the CLI's remote commands) never needs.
_ADAPTERS = {"SQLiteStorage": "._sqlite", "PostgresStorage": "._postgres"}


def __getattr__(name: str) -> object:
    module = _ADAPTERS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    adapter = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = adapter
    return adapter
