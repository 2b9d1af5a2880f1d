"""The persistence port: everything Frontmind remembers goes through this interface.

Adapters keep their SQL dialect to themselves: SQLite (aiosqlite) is the embedded
default; PostgreSQL (asyncpg) serves replicas. tests/test_storage.py is the contract both
adapters pass.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Literal, Protocol

from ._records import (
    Continuum,
    ContinuumModel,
    Document,
    Memory,
    MemoryHit,
    Message,
    MessageHit,
    Reminder,
    Segment,
    TurnRecord,
    TurnUsage,
    TurnWrite,
)

__all__ = ["Storage"]


class Storage(Protocol):
    # True when other processes may write to the same store (PostgreSQL replicas): a
    # continuum's cached history must then be checked against the store before a turn.
    shared: bool

    async def close(self) -> None: ...

    def continuum_lease(self, continuum_id: str) -> AbstractAsyncContextManager[None]:
        """Hold the right to run the continuum's next turn, across every process that
        shares the store; waiters are served in arrival order."""
        ...

    # -- continuums and turns ------------------------------------------------------
    async def continuum(self, continuum_id: str) -> Continuum:
        """The continuum's summary; `UnknownContinuum` if it has never had a turn."""
        ...

    async def continuums(
        self, *, limit: int = -1, after: tuple[float, str] | None = None
    ) -> list[Continuum]:
        """Most recently active first; `after` is the (last activity, id) of the last seen."""
        ...

    async def usage_by_continuum(self, ids: list[str]) -> dict[str, tuple[int, TurnUsage]]:
        """Turn count and summed usage of each continuum in `ids` that has turns."""
        ...

    async def delete_continuum(self, continuum_id: str) -> None:
        """Delete it with its turns, messages, segments and their search index entries."""
        ...

    async def history(self, continuum_id: str, *, missing_ok: bool = False) -> list[Message]:
        """The messages inside the continuum's history window, oldest first."""
        ...

    async def all_messages(
        self, continuum_id: str, *, limit: int = -1, after: int = -1
    ) -> list[Message]: ...

    async def commit_turn(self, write: TurnWrite) -> bool:
        """Store a completed turn atomically; False if that turn id was already stored."""
        ...

    async def record_turn(self, record: TurnRecord) -> None:
        """Store the record of a failed or cancelled turn (no history).

        A turn's record is written when it starts (failed, "interrupted") and replaced
        when it ends, so a process killed mid-turn still leaves one; a completed turn's
        record is never replaced."""
        ...

    async def turns(
        self,
        continuum_id: str | None = None,
        *,
        limit: int = 100,
        before: tuple[float, str] | None = None,
    ) -> list[TurnRecord]: ...

    async def continuum_model(self, continuum_id: str) -> ContinuumModel:
        """The continuum's own model settings (all None when it has none)."""
        ...

    async def set_continuum_model(self, continuum_id: str, settings: ContinuumModel) -> None:
        """Replace the continuum's own model settings."""
        ...

    async def recent_segments(self, continuum_id: str, *, limit: int = 10) -> list[Segment]: ...

    # -- reminders -------------------------------------------------------------------
    async def add_reminder(
        self,
        text: str,
        *,
        due_at: datetime | None,
        origin: Literal["user", "agent"],
        now: float | None = None,
    ) -> Reminder: ...

    async def complete_reminder(
        self, reminder_id: int, *, now: float | None = None
    ) -> Reminder: ...

    async def reminder(self, reminder_id: int) -> Reminder:
        """One reminder by id, completed or not; `NotFound` if there is none."""
        ...

    async def active_reminders(self, *, limit: int = 50) -> list[Reminder]: ...

    async def reminders_due_between(self, start: datetime, end: datetime) -> list[Reminder]: ...

    async def reminders(
        self, *, include_completed: bool = False, limit: int = 200, after: int = 0
    ) -> list[Reminder]: ...

    async def delete_reminder(self, reminder_id: int) -> None: ...

    # -- memories ----------------------------------------------------------------------
    async def add_memory(
        self,
        text: str,
        *,
        importance: float = 0.5,
        expires_at: datetime | None = None,
        now: float | None = None,
    ) -> Memory: ...

    async def memories(self, *, limit: int = 100, before: int | None = None) -> list[Memory]: ...

    async def delete_memory(self, memory_id: int) -> None:
        """Delete it and its search index entry; `NotFound` if there is none."""
        ...

    async def search_memories(
        self, query: str, *, limit: int = 5, now: float | None = None
    ) -> list[MemoryHit]: ...

    async def search_messages(
        self, query: str, *, continuum_id: str | None = None, limit: int = 5
    ) -> list[MessageHit]: ...

    # -- documents ---------------------------------------------------------------------
    async def put_document(
        self, label: str, content: str, *, now: float | None = None
    ) -> Document: ...

    async def documents(self, *, limit: int = -1, after: str = "") -> list[Document]: ...

    async def delete_document(self, label: str) -> None: ...
