"""Input checks at the port: refuse bad input before anything is written."""

from __future__ import annotations

import math
import re
from datetime import datetime

from ._exceptions import InvalidInput, MessageTooLarge

__all__ = [
    "DEFAULT_USER",
    "MAX_DOCUMENT_CHARS",
    "MAX_MEMORY_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_REMINDER_CHARS",
    "check_continuum_id",
    "check_label",
    "check_message",
    "check_text",
    "check_token_hash",
    "check_user_name",
    "to_epoch",
]

MAX_MESSAGE_CHARS = 100_000
MAX_REMINDER_CHARS = 1_000
MAX_MEMORY_CHARS = 4_000
MAX_DOCUMENT_CHARS = 100_000

_CONTINUUM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_LABEL = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_USER_NAME = _CONTINUUM_ID  # no "/" or ":" either, so "user/continuum" names stay unambiguous
_TOKEN_HASH = re.compile(r"[0-9a-f]{64}")

# The owner of everything when no users are configured (and of every row written before
# users existed): a single-person setup never names a user at all.
DEFAULT_USER = "default"


def check_user_name(name: str) -> str:
    if not isinstance(name, str) or not _USER_NAME.fullmatch(name):
        raise InvalidInput(f"user name {name!r} is malformed: use 1 to 64 of A-Z a-z 0-9 _ -")
    return name


def check_token_hash(token_hash: str) -> str:
    """A token's SHA-256 digest, lowercase hex: the only form in which a token is stored."""
    if not isinstance(token_hash, str) or not _TOKEN_HASH.fullmatch(token_hash):
        raise InvalidInput("a token hash is the SHA-256 digest of the token, in lowercase hex")
    return token_hash


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
