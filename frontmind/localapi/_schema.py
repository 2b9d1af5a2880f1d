"""The Messages API request body, as the local server decodes and validates it.

This is the wire format at the HTTP edge, so tool inputs, schemas and the settings the
local API accepts without acting on them (container, output_config, ...) stay free-form
JSON here; nothing of this crosses into the actors.

Content blocks the API documents are accepted in the places the API accepts them: text,
image and document blocks (base64, URL or file sources) in user turns and inside
`tool_result`; `thinking` and `redacted_thinking` in assistant turns; server tool use and
results (web search, web fetch, code execution).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "BETA_ONLY_FIELDS",
    "Block",
    "CacheControl",
    "CountTokensRequest",
    "Diagnostics",
    "DocumentBlock",
    "ImageBlock",
    "MessageParam",
    "MessagesRequest",
    "RedactedThinkingBlock",
    "SearchResultBlock",
    "ServerToolResultBlock",
    "ServerToolUseBlock",
    "TextBlock",
    "ThinkingBlock",
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


class ImageBlock(msgspec.Struct, frozen=True, tag="image", tag_field="type"):
    source: dict[str, Any]
    cache_control: CacheControl | None = None


class DocumentBlock(msgspec.Struct, frozen=True, tag="document", tag_field="type"):
    source: dict[str, Any]
    title: str | None = None
    context: str | None = None
    citations: Any = None
    cache_control: CacheControl | None = None


class SearchResultBlock(msgspec.Struct, frozen=True, tag="search_result", tag_field="type"):
    source: str
    title: str
    content: list[TextBlock]
    citations: Any = None
    cache_control: CacheControl | None = None


class ToolUseBlock(msgspec.Struct, frozen=True, tag="tool_use", tag_field="type"):
    id: str
    name: str
    input: dict[str, Any]
    cache_control: CacheControl | None = None
    caller: Any = None


ToolResultPart = TextBlock | ImageBlock | DocumentBlock | SearchResultBlock


class ToolResultBlock(msgspec.Struct, frozen=True, tag="tool_result", tag_field="type"):
    tool_use_id: str
    content: str | list[ToolResultPart] | None = None
    is_error: bool = False
    cache_control: CacheControl | None = None


class ThinkingBlock(msgspec.Struct, frozen=True, tag="thinking", tag_field="type"):
    thinking: str
    signature: str


class RedactedThinkingBlock(msgspec.Struct, frozen=True, tag="redacted_thinking", tag_field="type"):
    data: str


class ServerToolUseBlock(msgspec.Struct, frozen=True, tag="server_tool_use", tag_field="type"):
    id: str
    name: str
    input: dict[str, Any]
    cache_control: CacheControl | None = None
    caller: Any = None


class ServerToolResultBlock(
    msgspec.Struct, frozen=True, tag="web_search_tool_result", tag_field="type"
):
    tool_use_id: str
    content: Any
    cache_control: CacheControl | None = None
    caller: Any = None


class WebFetchToolResultBlock(
    msgspec.Struct, frozen=True, tag="web_fetch_tool_result", tag_field="type"
):
    tool_use_id: str
    content: Any
    cache_control: CacheControl | None = None
    caller: Any = None


class CodeExecutionToolResultBlock(
    msgspec.Struct, frozen=True, tag="code_execution_tool_result", tag_field="type"
):
    tool_use_id: str
    content: Any
    cache_control: CacheControl | None = None


Block = (
    TextBlock
    | ImageBlock
    | DocumentBlock
    | SearchResultBlock
    | ToolUseBlock
    | ToolResultBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ServerToolUseBlock
    | ServerToolResultBlock
    | WebFetchToolResultBlock
    | CodeExecutionToolResultBlock
)

# Blocks that belong to assistant turns; every other kind belongs to user turns.
ASSISTANT_BLOCKS = (
    ThinkingBlock,
    RedactedThinkingBlock,
    ToolUseBlock,
    ServerToolUseBlock,
    ServerToolResultBlock,
    WebFetchToolResultBlock,
    CodeExecutionToolResultBlock,
)
SERVER_TOOL_BLOCKS = (
    ServerToolUseBlock,
    ServerToolResultBlock,
    WebFetchToolResultBlock,
    CodeExecutionToolResultBlock,
)
USER_ONLY_BLOCKS = (ImageBlock, DocumentBlock, SearchResultBlock, ToolResultBlock)


class MessageParam(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    role: Literal["user", "assistant", "system"]
    content: str | list[Block]


class ToolDef(msgspec.Struct, frozen=True):
    """A client tool (`input_schema`, type absent or "custom") or a server tool (`type`)."""

    name: str
    input_schema: dict[str, Any] | None = None
    description: str = ""
    cache_control: CacheControl | None = None
    type: str | None = None
    allowed_callers: Any = None
    defer_loading: Any = None
    eager_input_streaming: Any = None
    input_examples: Any = None
    strict: Any = None
    max_uses: Any = None
    allowed_domains: Any = None
    blocked_domains: Any = None
    user_location: Any = None


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
    output_config: dict[str, Any] | None = None
    inference_geo: str | None = None
    speed: str | None = None
    container: Any = None
    thread: Any = None
    # beta-only fields (`/v1/messages?beta=true`), accepted there and refused elsewhere
    billing_policy: Any = None
    compaction: Any = None
    context_management: Any = None
    fallback_credit_token: Any = None
    fallbacks: Any = None
    mcp_servers: Any = None


BETA_ONLY_FIELDS = (
    "billing_policy",
    "compaction",
    "context_management",
    "fallback_credit_token",
    "fallbacks",
    "mcp_servers",
)


class CountTokensRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    model: str
    messages: list[MessageParam]
    system: str | list[TextBlock] | None = None
    tools: list[ToolDef] | None = None
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    cache_control: CacheControl | None = None
    output_config: dict[str, Any] | None = None
    speed: str | None = None
    billing_policy: Any = None
    compaction: Any = None
    context_management: Any = None
    mcp_servers: Any = None
