"""Input checks at the port: refuse bad input before anything is written."""

from __future__ import annotations

import math
import re
from datetime import datetime

from ._exceptions import InvalidInput, MessageTooLarge

__all__ = [
    "MAX_DOCUMENT_CHARS",
    "MAX_MEMORY_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_REMINDER_CHARS",
    "check_continuum_id",
    "check_label",
    "check_message",
    "check_text",
    "to_epoch",
]

MAX_MESSAGE_CHARS = 100_000
MAX_REMINDER_CHARS = 1_000
MAX_MEMORY_CHARS = 4_000
MAX_DOCUMENT_CHARS = 100_000

_CONTINUUM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_LABEL = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def check_continuum_id(continuum_id: str) -> str:
    if not isinstance(continuum_id, str) or not _CONTINUUM_ID.fullmatch(continuum_id):
        raise InvalidInput(
            f"continuum id {continuum_id!r} is malformed: use 1 to 64 of A-Z a-z 0-9 _ -"
        )
    return continuum_id


def check_label(label: str) -> str:
    if not isinstance(label, str) or not _LABEL.fullmatch(label):
        raise InvalidInput(
            f"document label {label!r} is malformed: use 1 to 64 of A-Z a-z 0-9 _ . -"
        )
    return label


def check_text(text: str, what: str, limit: int) -> str:
    if not isinstance(text, str):
        raise InvalidInput(f"{what} must be text, got {type(text).__name__}")
    if not text.strip():
        raise InvalidInput(f"{what} is empty")
    if len(text) > limit:
        raise InvalidInput(f"{what} is {len(text)} characters; the limit is {limit}")
    return text


def check_message(text: str) -> str:
    """A user message: refused before anything is composed, sent or stored."""
    if isinstance(text, str) and len(text) > MAX_MESSAGE_CHARS:
        raise MessageTooLarge(
            f"message is {len(text)} characters; the limit is {MAX_MESSAGE_CHARS}"
        )
    return check_text(text, "message", MAX_MESSAGE_CHARS)


def to_epoch(moment: datetime, what: str) -> float:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidInput(f"{what} must be timezone-aware (got the naive {moment.isoformat()})")
    value = moment.timestamp()
    if not math.isfinite(value):
        raise InvalidInput(f"{what} is not a valid time")
    return value
