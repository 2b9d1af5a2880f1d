"""Small builders for stored turns, shared by tests and the kill-during-write child."""

from __future__ import annotations

import msgspec

from storage import (
    ContentBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TurnRecord,
    TurnUsage,
    TurnWrite,
    moment,
)


def every_block_type(turn_id: str) -> tuple[Message, ...]:
    """user text → assistant text + tool_use → user tool_result → assistant text."""
    weird_input = '{"z": 1.50, "a":[1, 2e3, "\\u00e9"], "nested": {"k": null}}'
    use_id = f"toolu_{turn_id}"
    return (
        Message("user", (TextBlock(f"hello from {turn_id} — café"),)),
        Message(
            "assistant",
            (TextBlock("Let me look."), ToolUseBlock(use_id, "search_context", weird_input)),
        ),
        Message(
            "user",
            (
                ToolResultBlock(use_id, "found 2 passages", is_error=True),
                TextBlock("[update] reminder #1 added"),
            ),
        ),
        Message("assistant", (TextBlock(f"Done with {turn_id}."),)),
    )


def turn(
    continuum_id: str,
    turn_id: str,
    *,
    at: float = 1_000_000.0,
    messages: tuple[Message, ...] | None = None,
    user_text: str | None = None,
) -> TurnWrite:
    messages = messages or (
        Message("user", (TextBlock(user_text or f"question {turn_id}"),)),
        Message("assistant", (TextBlock(f"answer {turn_id}"),)),
    )
    first = messages[0].content[0]
    text = first.text if isinstance(first, TextBlock) else ""
    record = TurnRecord(
        turn_id=turn_id,
        continuum_id=continuum_id,
        status="completed",
        started_at=moment(at),
        finished_at=moment(at + 1.0),
        model="claude-sonnet-4-6",
        user_text=text,
        reply_text="",
        usage=TurnUsage(input_tokens=10, output_tokens=5),
        message_id=f"msg_{turn_id}",
    )
    return TurnWrite(record, messages)


def content_bytes(blocks: tuple[ContentBlock, ...]) -> bytes:
    return msgspec.json.encode(blocks)
