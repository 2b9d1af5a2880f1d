"""What both adapters do the same way: the stored encoding of content and records, the
text that search indexes, segment titles, and the checks on a turn before it is written.

Keeping these in one place is what makes the SQLite and PostgreSQL adapters replay the
same bytes and refuse the same input.
"""

from __future__ import annotations

import msgspec

from ._exceptions import InvalidInput
from ._records import ContentBlock, TextBlock, ToolResultBlock, TurnRecord, TurnWrite
from ._validation import MAX_MESSAGE_CHARS, check_continuum_id

__all__ = [
    "check_record",
    "check_write",
    "content_decoder",
    "content_encoder",
    "record_decoder",
    "searchable_text",
    "segment_title",
]

content_encoder = msgspec.json.Encoder()
content_decoder = msgspec.json.Decoder(tuple[ContentBlock, ...])
record_decoder = msgspec.json.Decoder(TurnRecord)
SEGMENT_TITLE_CHARS = 60


def searchable_text(content: tuple[ContentBlock, ...]) -> str:
    parts: list[str] = []
    for block in content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolResultBlock):
            parts.append(block.content)
    return "\n".join(parts)


def segment_title(user_text: str) -> str:
    """A new segment's title: its first user message, on one line, shortened."""
    title = " ".join(user_text.split())
    if len(title) > SEGMENT_TITLE_CHARS:
        title = title[: SEGMENT_TITLE_CHARS - 1] + "…"
    return title


def check_record(record: TurnRecord) -> None:
    check_continuum_id(record.continuum_id)
    if not record.turn_id or len(record.turn_id) > 64:
        raise InvalidInput(f"turn id {record.turn_id!r} must be 1 to 64 characters")
    if len(record.user_text) > MAX_MESSAGE_CHARS:
        raise InvalidInput(
            f"the user message is {len(record.user_text)} characters; "
            f"the limit is {MAX_MESSAGE_CHARS}"
        )


def check_write(write: TurnWrite) -> list[tuple[str, bytes, str, float]]:
    """Check a completed turn; its messages as (role, content bytes, text, created_at)."""
    record = write.record
    check_record(record)
    if record.status != "completed":
        raise InvalidInput(f"commit_turn takes completed turns, not {record.status!r} ones")
    if not write.messages or write.messages[0].role != "user":
        raise InvalidInput("a turn starts with the user's message")
    rows: list[tuple[str, bytes, str, float]] = []
    for message in write.messages:
        if not message.content:
            raise InvalidInput("a stored message needs at least one content block")
        rows.append(
            (
                message.role,
                content_encoder.encode(message.content),
                searchable_text(message.content),
                message.created_at or record.finished_at,
            )
        )
    return rows
