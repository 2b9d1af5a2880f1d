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

from collections.abc import Sequence
from typing import Any, Literal

import msgspec

__all__ = [
    "ASSISTANT_BLOCKS",
    "BETA_BLOCKS",
    "BETA_ONLY_FIELDS",
    "SERVER_RESULT_BLOCKS",
    "SERVER_TOOL_BLOCKS",
    "USER_ONLY_BLOCKS",
    "AdvisorToolResultBlock",
    "BashCodeExecutionToolResultBlock",
    "Block",
    "CacheControl",
    "CodeExecutionToolResultBlock",
    "CompactionBlock",
    "ContainerUploadBlock",
    "CountTokensRequest",
    "Diagnostics",
    "DocumentBlock",
    "ImageBlock",
    "McpToolListingBlock",
    "McpToolResultBlock",
    "McpToolUseBlock",
    "MessageParam",
    "MessagesRequest",
    "RedactedThinkingBlock",
    "SearchResultBlock",
    "ServerToolResultBlock",
    "ServerToolUseBlock",
    "TextBlock",
    "TextEditorCodeExecutionToolResultBlock",
    "ThinkingBlock",
    "ToolAdditionBlock",
    "ToolDef",
    "ToolReferenceBlock",
    "ToolRemovalBlock",
    "ToolResultBlock",
    "ToolSearchToolResultBlock",
    "ToolUseBlock",
    "WebFetchToolResultBlock",
    "blocks_of",
    "has_thinking",
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


class ToolReferenceBlock(msgspec.Struct, frozen=True, tag="tool_reference", tag_field="type"):
    """A deferred tool the tool search found: loads its definition (tool search tool)."""

    tool_name: str
    cache_control: CacheControl | None = None


ToolResultPart = TextBlock | ImageBlock | DocumentBlock | SearchResultBlock | ToolReferenceBlock


class ToolResultBlock(msgspec.Struct, frozen=True, tag="tool_result", tag_field="type"):
    tool_use_id: str
    content: str | list[ToolResultPart] | None = None
    is_error: bool = False
    cache_control: CacheControl | None = None
    toolset_name: str | None = None


class ThinkingBlock(msgspec.Struct, frozen=True, tag="thinking", tag_field="type"):
    thinking: str
    signature: str
    # Refused by the API ("cache_control" cannot be set on thinking blocks); decoded so
    # the refusal can say so instead of "Extra inputs are not permitted".
    cache_control: CacheControl | None = None


class RedactedThinkingBlock(msgspec.Struct, frozen=True, tag="redacted_thinking", tag_field="type"):
    data: str
    cache_control: CacheControl | None = None


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


class _ResultOfServerTool(msgspec.Struct, frozen=True):
    """A server tool's result block: replayed as the API returned it."""

    tool_use_id: str
    content: Any = None
    cache_control: CacheControl | None = None
    caller: Any = None


class BashCodeExecutionToolResultBlock(
    _ResultOfServerTool, frozen=True, tag="bash_code_execution_tool_result", tag_field="type"
):
    pass


class TextEditorCodeExecutionToolResultBlock(
    _ResultOfServerTool,
    frozen=True,
    tag="text_editor_code_execution_tool_result",
    tag_field="type",
):
    pass


class ToolSearchToolResultBlock(
    _ResultOfServerTool, frozen=True, tag="tool_search_tool_result", tag_field="type"
):
    pass


class AdvisorToolResultBlock(
    _ResultOfServerTool, frozen=True, tag="advisor_tool_result", tag_field="type"
):
    pass


class McpToolUseBlock(msgspec.Struct, frozen=True, tag="mcp_tool_use", tag_field="type"):
    id: str
    name: str
    server_name: str
    input: dict[str, Any]
    cache_control: CacheControl | None = None


class McpToolResultBlock(msgspec.Struct, frozen=True, tag="mcp_tool_result", tag_field="type"):
    tool_use_id: str
    content: str | list[TextBlock] | None = None
    is_error: bool = False
    cache_control: CacheControl | None = None


class ContainerUploadBlock(msgspec.Struct, frozen=True, tag="container_upload", tag_field="type"):
    file_id: str
    cache_control: CacheControl | None = None


class CompactionBlock(msgspec.Struct, frozen=True, tag="compaction", tag_field="type"):
    """A server-side compaction's summary: what replaces the turns before it."""

    content: str | None = None
    encrypted_content: str | None = None
    signature: str | None = None
    tool_changes: Any = None
    cache_control: CacheControl | None = None


class ToolAdditionBlock(msgspec.Struct, frozen=True, tag="tool_addition", tag_field="type"):
    tool: dict[str, Any]
    cache_control: CacheControl | None = None


class ToolRemovalBlock(msgspec.Struct, frozen=True, tag="tool_removal", tag_field="type"):
    tool: dict[str, Any]
    cache_control: CacheControl | None = None


class McpToolListingBlock(msgspec.Struct, frozen=True, tag="mcp_tool_listing", tag_field="type"):
    mcp_server_name: str
    tools: list[dict[str, Any]]


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
    | BashCodeExecutionToolResultBlock
    | TextEditorCodeExecutionToolResultBlock
    | ToolSearchToolResultBlock
    | AdvisorToolResultBlock
    | McpToolUseBlock
    | McpToolResultBlock
    | ContainerUploadBlock
    | CompactionBlock
    | ToolAdditionBlock
    | ToolRemovalBlock
    | McpToolListingBlock
)

# Blocks the API takes only on beta requests (the beta client's types): the response
# blocks of beta features, sent back as history.
BETA_BLOCKS = (
    AdvisorToolResultBlock,
    McpToolUseBlock,
    McpToolResultBlock,
    CompactionBlock,
    ToolAdditionBlock,
    ToolRemovalBlock,
    McpToolListingBlock,
)

# Blocks that belong to assistant turns; every other kind belongs to user turns.
SERVER_RESULT_BLOCKS = (
    ServerToolResultBlock,
    WebFetchToolResultBlock,
    CodeExecutionToolResultBlock,
    BashCodeExecutionToolResultBlock,
    TextEditorCodeExecutionToolResultBlock,
    ToolSearchToolResultBlock,
    AdvisorToolResultBlock,
)
SERVER_TOOL_BLOCKS = (
    ServerToolUseBlock,
    McpToolUseBlock,
    McpToolResultBlock,
    *SERVER_RESULT_BLOCKS,
)
ASSISTANT_BLOCKS = (
    ThinkingBlock,
    RedactedThinkingBlock,
    ToolUseBlock,
    CompactionBlock,
    *SERVER_TOOL_BLOCKS,
)
USER_ONLY_BLOCKS = (ImageBlock, DocumentBlock, SearchResultBlock, ToolResultBlock)


class MessageParam(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    role: Literal["user", "assistant", "system"]
    content: str | list[Block]


def blocks_of(message: MessageParam) -> Sequence[Block]:
    """A message's content blocks (a string is one text block). Not a copy: a request's
    checks walk its history several times, and none of them changes it."""
    content = message.content
    return (TextBlock(text=content),) if isinstance(content, str) else content


def has_thinking(messages: Sequence[MessageParam]) -> bool:
    """Whether any message holds a thinking block (most requests hold none, and the
    checks of thinking blocks can then skip their walk of the history)."""
    return any(
        isinstance(block, ThinkingBlock | RedactedThinkingBlock)
        for message in messages
        if not isinstance(message.content, str)
        for block in message.content
    )


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


class Metadata(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A request's `metadata`: the API reference (and the SDK's `MetadataParam`) give it
    `user_id` alone; any other key is refused like any unknown field."""

    user_id: str | None = None


class MessagesRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    model: str
    max_tokens: int
    messages: list[MessageParam]
    system: str | list[TextBlock] | None = None
    tools: list[ToolDef] | None = None
    tool_choice: dict[str, Any] | None = None
    stream: bool = False
    metadata: Metadata | None = None
    stop_sequences: list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    diagnostics: Diagnostics | None = None
    cache_control: CacheControl | None = None
    thinking: dict[str, Any] | None = None
    # The values the API takes (its reference; the SDK's `service_tier` and `speed`
    # literals): "priority" or "batch" are what `usage.service_tier` reports, not a request's.
    service_tier: Literal["auto", "standard_only"] | None = None
    output_config: dict[str, Any] | None = None
    inference_geo: str | None = None
    speed: Literal["standard", "fast"] | None = None
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
    speed: Literal["standard", "fast"] | None = None
    billing_policy: Any = None
    compaction: Any = None
    context_management: Any = None
    mcp_servers: Any = None
