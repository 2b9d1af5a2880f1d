"""The Messages API request body, as the local server decodes and validates it.

This is the wire format at the HTTP edge, so tool inputs and schemas stay free-form JSON
objects here; nothing of this crosses into the actors.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "Block",
    "CacheControl",
    "Diagnostics",
    "MessageParam",
    "MessagesRequest",
    "TextBlock",
    "ToolDef",
    "ToolResultBlock",
    "ToolUseBlock",
]


class CacheControl(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    type: Literal["ephemeral"]
    ttl: Literal["5m", "1h"] = "5m"


class TextBlock(msgspec.Struct, frozen=True, tag="text", tag_field="type"):
    text: str
    cache_control: CacheControl | None = None
    citations: Any = None


class ToolUseBlock(msgspec.Struct, frozen=True, tag="tool_use", tag_field="type"):
    id: str
    name: str
    input: dict[str, Any]
    cache_control: CacheControl | None = None
    caller: Any = None


class ToolResultBlock(msgspec.Struct, frozen=True, tag="tool_result", tag_field="type"):
    tool_use_id: str
    content: str | list[TextBlock] | None = None
    is_error: bool = False
    cache_control: CacheControl | None = None


Block = TextBlock | ToolUseBlock | ToolResultBlock


class MessageParam(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    role: Literal["user", "assistant"]
    content: str | list[Block]


class ToolDef(msgspec.Struct, frozen=True):
    name: str
    input_schema: dict[str, Any]
    description: str = ""
    cache_control: CacheControl | None = None


class Diagnostics(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    previous_message_id: str | None = None


class MessagesRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    model: str
    max_tokens: int
    messages: list[MessageParam]
    system: str | list[TextBlock] | None = None
    tools: list[ToolDef] | None = None
    tool_choice: dict[str, Any] | None = None
    stream: bool = False
    metadata: dict[str, Any] | None = None
    stop_sequences: list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    diagnostics: Diagnostics | None = None
    cache_control: CacheControl | None = None
    thinking: dict[str, Any] | None = None
    service_tier: str | None = None


class CountTokensRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    model: str
    messages: list[MessageParam]
    system: str | list[TextBlock] | None = None
    tools: list[ToolDef] | None = None
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
