"""The daemon's JSON bodies, and how stored records are shown over HTTP."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

import msgspec

from storage import ContinuumModel, Message, RawBlock, TextBlock, ToolResultBlock, ToolUseBlock

from ._exceptions import BadBody

T = TypeVar("T")

__all__ = [
    "DocumentBody",
    "MemoryBody",
    "ModelSettingsBody",
    "ReminderBody",
    "TurnBody",
    "UserBody",
    "decode_body",
    "message_json",
]


class TurnBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`{"message": "text"}` or `{"content": [blocks]}`; each block is kept as the
    exact JSON the client sent."""

    message: str | None = None
    content: list[msgspec.Raw] | None = None

    def user_input(self) -> str | list[msgspec.Raw]:
        if (self.message is None) == (self.content is None):
            raise BadBody("give either 'message' (text) or 'content' (a list of blocks)")
        return self.message if self.message is not None else list(self.content or ())


# PUT /v1/continuums/{id}/settings: the continuum's own model settings (null: config's).
ModelSettingsBody = ContinuumModel


class ReminderBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str
    due_at: datetime | None = None  # ISO 8601 with a UTC offset


class MemoryBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str
    importance: float = 0.5
    expires_at: datetime | None = None


class DocumentBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    label: str
    content: str


class UserBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str


def decode_body(body: bytes, type_: type[T]) -> T:
    if not body:
        raise BadBody("the request needs a JSON body")
    try:
        return msgspec.json.decode(body, type=type_)
    except msgspec.ValidationError as exc:
        raise BadBody(f"invalid request body: {exc}") from None
    except msgspec.DecodeError as exc:
        raise BadBody(f"malformed JSON: {exc}") from None


def _block_json(block: Any) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolUseBlock):
        return {
            "type": "tool_use",
            "id": block.id,
            "name": block.name,
            "input": msgspec.json.decode(block.input_json),
        }
    if isinstance(block, RawBlock):
        return msgspec.json.decode(block.json)  # type: ignore[no-any-return]
    assert isinstance(block, ToolResultBlock)
    return {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": msgspec.json.decode(block.content_json) if block.content_json else block.content,
        "is_error": block.is_error,
    }


def message_json(message: Message) -> dict[str, Any]:
    return {
        "seq": message.seq,
        "turn_id": message.turn_id,
        "role": message.role,
        "created_at": message.created_at,
        "content": [_block_json(b) for b in message.content],
    }
