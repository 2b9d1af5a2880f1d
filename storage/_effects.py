"""Writes a turn's tools ask for, applied in the turn's own commit.

A tool that adds or completes a reminder, or stores a memory, does not write at once: it
stages an effect, checked here as the direct call would be, and `commit_turn` applies
every staged effect in the same transaction as the turn's messages. A turn that fails or
is cancelled leaves nothing behind, and a retried turn (a new turn) cannot duplicate
what the failed one did.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

import msgspec

from ._exceptions import InvalidInput
from ._validation import (
    MAX_MEMORY_CHARS,
    MAX_REMINDER_CHARS,
    check_importance,
    check_row_id,
    check_text,
    check_vector,
    to_epoch,
)

__all__ = [
    "AddMemory",
    "AddReminder",
    "CompleteReminder",
    "Effect",
    "add_memory_effect",
    "add_reminder_effect",
    "complete_reminder_effect",
]


class AddReminder(msgspec.Struct, frozen=True, tag="add_reminder"):
    text: str
    due_at: float | None
    created_at: float
    origin: Literal["user", "agent"] = "agent"


class CompleteReminder(msgspec.Struct, frozen=True, tag="complete_reminder"):
    reminder_id: int
    at: float


class AddMemory(msgspec.Struct, frozen=True, tag="add_memory"):
    text: str
    importance: float
    created_at: float
    expires_at: float | None = None
    # The id of a stored memory this one repeats: that memory is updated in place (its
    # text, and the higher importance) rather than copied.
    replaces: int | None = None
    # The text's vector by the embedder in use, when the caller has it: written with the
    # text, in the same transaction (else the background worker embeds it later).
    vector: tuple[float, ...] | None = None


Effect = AddReminder | CompleteReminder | AddMemory


def add_reminder_effect(
    text: str, due_at: datetime | None, *, now: float, origin: Literal["user", "agent"] = "agent"
) -> AddReminder:
    """The one check of a new reminder: staged by a tool, or written at once by an adapter."""
    check_text(text, "reminder text", MAX_REMINDER_CHARS)
    if origin not in ("user", "agent"):
        raise InvalidInput(f"reminder origin must be 'user' or 'agent', not {origin!r}")
    due = None if due_at is None else to_epoch(due_at, "the reminder's due time")
    return AddReminder(text, due, now, origin)


def complete_reminder_effect(reminder_id: object, *, now: float) -> CompleteReminder:
    return CompleteReminder(check_row_id(reminder_id, "reminder id"), now)


def add_memory_effect(
    text: str,
    importance: float,
    *,
    now: float,
    expires_at: datetime | None = None,
    replaces: int | None = None,
    vector: Sequence[float] | None = None,
) -> AddMemory:
    """The one check of a new memory: staged by a tool, or written at once by an adapter."""
    check_text(text, "memory text", MAX_MEMORY_CHARS)
    importance = check_importance(importance)
    expires = None if expires_at is None else to_epoch(expires_at, "the memory's expiry")
    memory_id = None if replaces is None else check_row_id(replaces, "memory id")
    checked = None if vector is None else check_vector(vector, "the memory's vector")
    return AddMemory(text, importance, now, expires, memory_id, checked)
