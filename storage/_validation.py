"""Input checks at the port: refuse bad input before anything is written."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from ._exceptions import InvalidInput, MessageTooLarge

__all__ = [
    "DEFAULT_USER",
    "EARLIEST",
    "LATEST",
    "MAX_DOCUMENT_CHARS",
    "MAX_MEMORY_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_REMINDER_CHARS",
    "MAX_ROW_ID",
    "check_continuum_id",
    "check_instant",
    "check_label",
    "check_message",
    "check_row_id",
    "check_text",
    "check_token_hash",
    "check_user_name",
    "to_epoch",
]

MAX_MESSAGE_CHARS = 100_000
MAX_REMINDER_CHARS = 1_000
MAX_MEMORY_CHARS = 4_000
MAX_DOCUMENT_CHARS = 100_000

# SQLite integers are signed 64-bit: a larger id cannot even be bound to a query.
MAX_ROW_ID = 2**63 - 1

# The instants storage accepts: every one of them renders in every timezone (Python's
# datetime stops at years 1 and 9999, and a zone offset of up to a day either side moves
# an instant near those ends out of range). 1900-01-01 to 9000-01-01 UTC leaves wide
# margins on both sides.
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
_EARLIEST_EPOCH = EARLIEST.timestamp()
_LATEST_EPOCH = LATEST.timestamp()

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


MAX_DIMENSIONS = 4096  # an embedder's widest vector


def check_vector(vector: object, what: str = "a vector") -> tuple[float, ...]:
    """A vector as an embedder returns it: 1 to MAX_DIMENSIONS finite numbers, not all
    zeros (its direction is all a cosine reads). Its dimension against the embedder in
    use is the store's to check."""
    if isinstance(vector, (str, bytes)):
        raise InvalidInput(f"{what} must be a sequence of numbers")
    try:  # a list, a tuple, or a library's array row
        values = tuple(float(x) for x in vector)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise InvalidInput(f"{what} must be a sequence of numbers") from None
    if not 1 <= len(values) <= MAX_DIMENSIONS:
        raise InvalidInput(f"{what} must have 1 to {MAX_DIMENSIONS} dimensions, not {len(values)}")
    if not all(math.isfinite(x) for x in values) or not any(values):
        raise InvalidInput(f"{what} must be finite and not all zeros")
    return values


def check_row_id(value: object, what: str) -> int:
    """A positive id that SQLite can bind (bool is not an id, though it is an int)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ROW_ID:
        raise InvalidInput(f"{what} must be an integer from 1 to {MAX_ROW_ID}, not {value!r}")
    return value


def check_instant(epoch: float, what: str) -> float:
    """An instant (seconds since the epoch) within [EARLIEST, LATEST)."""
    if not math.isfinite(epoch) or not _EARLIEST_EPOCH <= epoch < _LATEST_EPOCH:
        raise InvalidInput(
            f"{what} must be from {EARLIEST.date().isoformat()} up to "
            f"{LATEST.date().isoformat()} UTC"
        )
    return epoch


def to_epoch(moment: datetime, what: str) -> float:
    if not isinstance(moment, datetime):
        raise InvalidInput(f"{what} must be a datetime, not {type(moment).__name__}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidInput(f"{what} must be timezone-aware (got the naive {moment.isoformat()})")
    try:
        value = moment.timestamp()
    except (OverflowError, ValueError):  # e.g. year 9999 with a negative offset
        raise InvalidInput(f"{what} is not a valid time") from None
    return check_instant(value, what)
