"""What the turn being run is, for the logs: a context variable set where a turn runs.

The daemon's log formatter reads it, so every line logged while a turn runs carries
its turn id (actors run each turn in their own task, so the caller's context would not
reach them).
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["current_turn"]

current_turn: ContextVar[str | None] = ContextVar("frontmind_turn", default=None)
