"""Input checks at the port: refuse bad input before anything is written."""

from __future__ import annotations

import math
import re
import unicodedata
from datetime import UTC, datetime

from ._exceptions import InvalidInput, MessageTooLarge

__all__ = [
    "DEFAULT_USER",
    "EARLIEST",
    "LABEL_PATTERN",
    "LATEST",
    "MAX_DOCUMENT_CHARS",
    "MAX_MEMORY_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_REMINDER_CHARS",
    "MAX_ROW_ID",
    "MIN_THINKING_BUDGET",
    "MODEL_NAME_PATTERN",
    "NAME_PATTERN",
    "check_continuum_id",
    "check_document",
    "check_importance",
    "check_instant",
    "check_int64",
    "check_label",
    "check_message",
    "check_model_name",
    "check_model_settings",
    "check_row_id",
    "check_storable",
    "check_text",
    "check_token_hash",
    "check_user_name",
    "excerpt",
    "storable",
    "to_epoch",
    "visible",
]

MAX_MESSAGE_CHARS = 100_000
MAX_REMINDER_CHARS = 1_000
MAX_MEMORY_CHARS = 4_000
MAX_DOCUMENT_CHARS = 100_000

# SQLite integers are signed 64-bit: a larger id cannot even be bound to a query.
MAX_ROW_ID = 2**63 - 1

# "budget_tokens must be ≥1024" (the extended thinking docs,
# https://platform.claude.com/docs/en/build-with-claude/extended-thinking).
MIN_THINKING_BUDGET = 1024

# The instants storage accepts: every one of them renders in every timezone (Python's
# datetime stops at years 1 and 9999, and a zone offset of up to a day either side moves
# an instant near those ends out of range). 1900-01-01 to 9000-01-01 UTC leaves wide
# margins on both sides.
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
_EARLIEST_EPOCH = EARLIEST.timestamp()
_LATEST_EPOCH = LATEST.timestamp()

# The forms of a user name and a continuum id, and of a document label (whole strings).
NAME_PATTERN = r"[A-Za-z0-9_-]{1,64}"
LABEL_PATTERN = r"[A-Za-z0-9_.-]{1,64}"
_CONTINUUM_ID = re.compile(NAME_PATTERN)
_LABEL = re.compile(LABEL_PATTERN)
_USER_NAME = _CONTINUUM_ID  # no "/" or ":" either, so "user/continuum" names stay unambiguous
_TOKEN_HASH = re.compile(r"[0-9a-f]{64}")
# A model id as the Messages API and the Models API take them (`claude-opus-4-6`,
# `claude-3-5-sonnet-v2@20241022`, `anthropic.claude-v2:1`): no "/" (it goes into the
# Models API's path), no space or control character, at most 256 characters.
MODEL_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,255}"
_MODEL_NAME = re.compile(MODEL_NAME_PATTERN)

# The owner of everything when no users are configured (and of every row written before
# users existed): a single-person setup never names a user at all.
DEFAULT_USER = "default"


def excerpt(text: str, limit: int = 40) -> str:
    """`text`, or its start and end with the count of what was left out between: what an
    error quotes of a rejected input (which may be megabytes), and the cap on an error's
    message as the daemon sends it."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 3 // 4], text[len(text) - limit // 4 :]
    return f"{head}…({len(text) - len(head) - len(tail)} more characters)…{tail}"


def _quoted(value: object) -> str:
    if isinstance(value, str):
        return repr(excerpt(value))
    if isinstance(value, int) and value.bit_length() > 128:
        # repr() itself fails past 4,300 digits (ValueError): the size says enough.
        return f"an integer of {value.bit_length()} bits"
    return excerpt(repr(value))


def check_user_name(name: str) -> str:
    if not isinstance(name, str) or not _USER_NAME.fullmatch(name):
        raise InvalidInput(
            f"user name {_quoted(name)} is malformed: use 1 to 64 of A-Z a-z 0-9 _ -"
        )
    return name


def check_token_hash(token_hash: str) -> str:
    """A token's SHA-256 digest, lowercase hex: the only form in which a token is stored."""
    if not isinstance(token_hash, str) or not _TOKEN_HASH.fullmatch(token_hash):
        raise InvalidInput("a token hash is the SHA-256 digest of the token, in lowercase hex")
    return token_hash


def check_continuum_id(continuum_id: str) -> str:
    if not isinstance(continuum_id, str) or not _CONTINUUM_ID.fullmatch(continuum_id):
        raise InvalidInput(
            f"continuum id {_quoted(continuum_id)} is malformed: use 1 to 64 of A-Z a-z 0-9 _ -"
        )
    return continuum_id


def check_label(label: str) -> str:
    if not isinstance(label, str) or not _LABEL.fullmatch(label):
        raise InvalidInput(
            f"document label {_quoted(label)} is malformed: use 1 to 64 of A-Z a-z 0-9 _ . -"
        )
    if not label.strip("."):  # `.` and `..` are path steps: no URL could reach them
        raise InvalidInput(f"document label {label!r} is dots alone: give it a letter or digit")
    return label


def visible(text: str) -> bool:
    """Whether `text` has a character that shows: not blank, nor format characters
    alone (zero-width spaces, direction marks, soft hyphens), which the notification
    center's neutralizing drops, leaving an empty text the Messages API refuses."""
    return any(not c.isspace() and unicodedata.category(c) != "Cf" for c in text)


def check_storable(text: str, what: str) -> str:
    """Text both databases store as it is: no NUL (PostgreSQL's `text` refuses U+0000,
    SQLite keeps it) and no lone surrogate (not Unicode: UTF-8 cannot encode one, and
    a JSON parser hands one over for an escape like `\\ud800`)."""
    at = text.find("\x00")
    if at >= 0:
        raise InvalidInput(f"{what} holds a NUL character (U+0000) at position {at}")
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        raise InvalidInput(
            f"{what} holds a lone surrogate (U+{code:04X}) at position {exc.start}: "
            "not valid Unicode"
        ) from None
    return text


def storable(text: str) -> str:
    """`text` with what `check_storable` refuses replaced by U+FFFD: for text that comes
    from code, not from a user (a tool's result), which is kept, not refused."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode()
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(text: str, what: str, limit: int) -> str:
    if not isinstance(text, str):
        raise InvalidInput(f"{what} must be text, got {type(text).__name__}")
    if not visible(text):
        raise InvalidInput(f"{what} is empty (or holds only invisible characters)")
    if len(text) > limit:
        raise InvalidInput(f"{what} is {len(text)} characters; the limit is {limit}")
    return check_storable(text, what)


def check_document(label: str, content: str) -> None:
    """A document to store: its label's form, its text, its length."""
    check_label(label)
    check_text(content, f"document {label!r}", MAX_DOCUMENT_CHARS)


def check_importance(importance: object) -> float:
    """A memory's importance: a number from 0 to 1 (not a word, not NaN)."""
    if isinstance(importance, bool) or not isinstance(importance, int | float):
        raise InvalidInput(
            f"importance must be a number from 0 to 1, not {type(importance).__name__}"
        )
    if not 0.0 <= importance <= 1.0:
        raise InvalidInput(f"importance must be between 0 and 1, not {_quoted(importance)}")
    return float(importance)


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
        shown = _quoted(value)
        raise InvalidInput(f"{what} must be an integer from 1 to {MAX_ROW_ID}, not {shown}")
    return value


def check_int64(value: object, what: str) -> int:
    """A page size or position that SQL can bind (a signed 64-bit integer): one past it
    would fail in the driver, not here, with no word of which argument it was."""
    bound = MAX_ROW_ID
    if isinstance(value, int) and not isinstance(value, bool) and -bound - 1 <= value <= bound:
        return value
    raise InvalidInput(f"{what} must be a 64-bit integer, not {_quoted(value)}")


def check_model_name(name: str) -> str:
    """A model id safe to store, look up and send; a known model is the catalog's call."""
    if not isinstance(name, str) or not _MODEL_NAME.fullmatch(name):
        raise InvalidInput(
            f"model: {_quoted(name)} is not a model name: use 1 to 256 of A-Z a-z 0-9 . _ - : @,"
            " starting with a letter or digit"
        )
    return name


def _count(value: int | None, what: str, lowest: int) -> None:
    if value is not None and not lowest <= value <= MAX_ROW_ID:
        raise InvalidInput(
            f"{what}: must be at least {lowest} (and at most {MAX_ROW_ID}), got {_quoted(value)}"
        )


def check_model_settings(
    model: str | None, max_tokens: int | None, budget_tokens: int | None
) -> None:
    """The ranges a continuum's own model settings have whatever the model: each value as
    given (before the config's fill the gaps), whatever the thinking mode, so that
    nothing stored is one the API refuses. The model's own limits (its maximum output,
    a budget below max_tokens) are the actors' check against the model data."""
    if model is not None:
        check_model_name(model)
    _count(max_tokens, "max_tokens", 1)
    _count(budget_tokens, "budget_tokens", MIN_THINKING_BUDGET)


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
