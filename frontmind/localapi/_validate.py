"""Request validation with the API's error shapes and messages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, TypeVar

import msgspec

from ._schema import (
    Block,
    CacheControl,
    CountTokensRequest,
    MessageParam,
    MessagesRequest,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = ["VERSIONS", "ApiError", "decode_request", "merge_consecutive", "validate"]

VERSIONS = frozenset({"2023-06-01", "2026-10-21"})
_SAMPLING_REJECTED_FROM = "2026-10-21"
MAX_BREAKPOINTS = 4
MAX_BODY_BYTES = 32 * 1024 * 1024

_R = TypeVar("_R", MessagesRequest, CountTokensRequest)


class ApiError(Exception):
    """An error answered with the API's shape: {"type": "error", "error": {...}}."""

    _TYPES: ClassVar[dict[int, str]] = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        405: "invalid_request_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        529: "overloaded_error",
    }

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.type = self._TYPES.get(status, "api_error")
        self.message = message
        self.headers = headers or {}


def decode_request(body: bytes, type_: type[_R]) -> _R:
    if len(body) > MAX_BODY_BYTES:
        raise ApiError(413, f"Request exceeds the maximum size of {MAX_BODY_BYTES} bytes.")
    try:
        msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise ApiError(400, f"Malformed JSON in the request body: {exc}") from None
    try:
        return msgspec.json.decode(body, type=type_)
    except msgspec.ValidationError as exc:
        raise ApiError(400, f"Invalid request: {exc}") from None


def _blocks(message: MessageParam) -> list[Block]:
    content = message.content
    return [TextBlock(text=content)] if isinstance(content, str) else list(content)


def merge_consecutive(messages: list[MessageParam]) -> list[MessageParam]:
    """Consecutive same-role messages become one turn, as the API does first of all."""
    merged: list[MessageParam] = []
    for message in messages:
        if merged and merged[-1].role == message.role:
            merged[-1] = MessageParam(message.role, _blocks(merged[-1]) + _blocks(message))
        else:
            merged.append(message)
    return merged


def _controls(request: MessagesRequest) -> Iterator[CacheControl]:
    for tool in request.tools or ():
        if tool.cache_control is not None:
            yield tool.cache_control
    if isinstance(request.system, list):
        for block in request.system:
            if block.cache_control is not None:
                yield block.cache_control
    for message in request.messages:
        if isinstance(message.content, list):
            for part in message.content:
                if part.cache_control is not None:
                    yield part.cache_control


def _check_text(text: str, where: str) -> None:
    if not text:
        raise ApiError(400, f"{where}: text content blocks must be non-empty")
    if not text.strip():
        raise ApiError(400, f"{where}: text content blocks must contain non-whitespace text")


def validate(request: MessagesRequest, version: str) -> MessagesRequest:
    """Return the request with its messages merged, or raise `ApiError`."""
    if not request.model:
        raise ApiError(400, "model: Field required")
    if request.max_tokens < 1:
        raise ApiError(400, "max_tokens: must be greater than or equal to 1")
    if version >= _SAMPLING_REJECTED_FROM:
        for name in ("temperature", "top_p", "top_k"):
            if getattr(request, name) is not None:
                raise ApiError(
                    400, f"{name}: not supported with anthropic-version {version}; remove it"
                )
    if isinstance(request.system, list):
        for i, system_block in enumerate(request.system):
            _check_text(system_block.text, f"system.{i}")
    messages = merge_consecutive(request.messages)
    if not messages:
        raise ApiError(400, "messages: at least one message is required")
    for i, message in enumerate(messages):
        if isinstance(message.content, list) and not message.content:
            raise ApiError(400, f"messages.{i}: all messages must have non-empty content")
        for j, block in enumerate(_blocks(message)):
            where = f"messages.{i}.content.{j}"
            if isinstance(block, TextBlock):
                _check_text(block.text, where)
            elif isinstance(block, ToolUseBlock) and message.role != "assistant":
                raise ApiError(400, f"{where}: tool_use belongs to assistant turns")
            elif isinstance(block, ToolResultBlock) and message.role != "user":
                raise ApiError(400, f"{where}: tool_result belongs to user turns")
    _check_tool_pairs(messages)
    if messages[-1].role != "user":
        raise ApiError(400, "The conversation must end with a user message")
    controls = list(_controls(request))
    if len(controls) > MAX_BREAKPOINTS:
        raise ApiError(
            400,
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(controls)}.",
        )
    seen_short = False
    for control in controls:
        if control.ttl == "5m":
            seen_short = True
        elif seen_short:
            raise ApiError(
                400,
                "a ttl='1h' cache_control block must not come after a ttl='5m' "
                "cache_control block (tools, then system, then messages)",
            )
    return msgspec.structs.replace(request, messages=messages)


def _check_tool_pairs(messages: list[MessageParam]) -> None:
    for i, message in enumerate(messages):
        if message.role != "assistant":
            continue
        uses = [b.id for b in _blocks(message) if isinstance(b, ToolUseBlock)]
        if not uses:
            continue
        following = _blocks(messages[i + 1]) if i + 1 < len(messages) else []
        leading: list[str] = []
        for block in following:
            if not isinstance(block, ToolResultBlock):
                break
            leading.append(block.tool_use_id)
        missing = [u for u in uses if u not in leading]
        if missing:
            raise ApiError(
                400,
                f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message.",
            )
    for i, message in enumerate(messages):
        previous = _blocks(messages[i - 1]) if i > 0 else []
        known = {b.id for b in previous if isinstance(b, ToolUseBlock)}
        for block in _blocks(message):
            if isinstance(block, ToolResultBlock) and block.tool_use_id not in known:
                raise ApiError(
                    400,
                    f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{block.tool_use_id}. Each `tool_result` block must have a corresponding "
                    "`tool_use` block in the previous message.",
                )
