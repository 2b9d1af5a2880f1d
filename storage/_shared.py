"""What the SQL core (storage/_sql.py) stores the same way in both databases: the
encoding of content and records, the text that search indexes, segment titles, and the
checks on a turn before it is written (so both replay the same bytes and refuse the same
input).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import msgspec

from ._exceptions import InvalidInput
from ._records import (
    ContentBlock,
    MemoryProposal,
    SegmentDigest,
    TextBlock,
    ToolResultBlock,
    TurnRecord,
    TurnWrite,
)
from ._time import EPOCH, epoch
from ._validation import (
    MAX_MEMORY_CHARS,
    MAX_MESSAGE_CHARS,
    check_continuum_id,
    check_importance,
    check_text,
    check_vector,
    storable,
    to_epoch,
)

__all__ = [
    "check_digest",
    "check_record",
    "check_write",
    "content_decoder",
    "content_encoder",
    "continues",
    "decode_vector",
    "encode_vector",
    "record_decoder",
    "searchable_text",
    "segment_title",
]

content_encoder = msgspec.json.Encoder()
content_decoder = msgspec.json.Decoder(tuple[ContentBlock, ...])
# A record is stored with its times as epoch floats (`stored_fields`); not strict, so that
# msgspec may read those floats as the datetimes they were.
record_decoder = msgspec.json.Decoder(TurnRecord, strict=False)
SEGMENT_TITLE_CHARS = 60


def searchable_text(content: tuple[ContentBlock, ...]) -> str:
    """A message's text for search. The model's text is stored as it came (it replays
    byte for byte) and may hold a NUL, which PostgreSQL's text refuses (the turn failed
    at its commit): here it is U+FFFD."""
    parts: list[str] = []
    for block in content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolResultBlock):
            parts.append(block.content)
    return storable("\n".join(parts))


def segment_title(user_text: str) -> str:
    """A new segment's title: its first user message, on one line, shortened."""
    title = " ".join(user_text.split())
    if len(title) > SEGMENT_TITLE_CHARS:
        title = title[: SEGMENT_TITLE_CHARS - 1] + "…"
    return title


def check_record(record: TurnRecord) -> None:
    check_continuum_id(record.continuum_id)
    to_epoch(record.started_at, "a turn's started_at")
    to_epoch(record.finished_at, "a turn's finished_at")
    if not record.turn_id or len(record.turn_id) > 64:
        raise InvalidInput(f"turn id {record.turn_id!r} must be 1 to 64 characters")
    if len(record.user_text) > MAX_MESSAGE_CHARS:
        raise InvalidInput(
            f"the user message is {len(record.user_text)} characters; "
            f"the limit is {MAX_MESSAGE_CHARS}"
        )


def check_write(write: TurnWrite) -> list[tuple[str, bytes, str, float]]:
    """Check a turn to commit: a completed one, or a failed or cancelled one that keeps
    the tool rounds it completed (the tools ran: a retry must not run them again); its
    messages as (role, content bytes, text, created_at)."""
    record = write.record
    check_record(record)
    if record.status not in ("completed", "failed", "cancelled"):
        raise InvalidInput(
            f"commit_turn takes completed, failed or cancelled turns, not {record.status!r} ones"
        )
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
                (
                    epoch(record.finished_at)
                    if message.created_at == EPOCH
                    else to_epoch(message.created_at, "a message's created_at")
                ),
            )
        )
    return rows


MAX_SUMMARY_TITLE_CHARS = 120
MAX_SUMMARY_CHARS = 4000


def check_digest(digest: SegmentDigest | None) -> tuple[MemoryProposal, ...]:
    """Check a segment digest before it is written; its memory proposals."""
    if digest is None:
        return ()
    check_text(digest.title, "segment title", MAX_SUMMARY_TITLE_CHARS)
    check_text(digest.summary, "segment summary", MAX_SUMMARY_CHARS)
    for proposal in digest.memories:
        check_text(proposal.text, "memory text", MAX_MEMORY_CHARS)
        check_importance(proposal.importance)
        if proposal.vector is not None:
            check_vector(proposal.vector, "a proposed memory's vector")
    return digest.memories


def encode_vector(vector: Sequence[float]) -> bytes:
    """An embedding as stored: float32, little-endian."""
    if len(vector) == 0:  # len(): an embedder's numpy array has no truth value
        raise InvalidInput("an embedding needs at least one dimension")
    packed = array("f", vector)
    if packed.itemsize != 4:  # pragma: no cover - every platform Python runs on
        raise InvalidInput("float32 is not 4 bytes here")
    return packed.tobytes()


def decode_vector(raw: bytes) -> tuple[float, ...]:
    return tuple(array("f", raw))


def continues(
    record: TurnRecord,
    last_ended_at: float,
    last_first_seq: int,
    history_start: int | None,
    gap: float,
) -> bool:
    """Whether the turn extends the continuum's last segment. It closes it instead after
    a pause longer than the gap, or when the turn trims the history window into it: a
    conversation that never pauses still has its segments summarised before they leave."""
    if epoch(record.started_at) - last_ended_at > gap:
        return False
    return history_start is None or last_first_seq >= history_start
