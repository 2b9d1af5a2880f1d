"""The Messages API request of one model call, with its cache breakpoints.

    tools                                     (fixed order, part of every prefix)
    system     [cached sections]              breakpoint on the last one (system TTL)
    history    [stored turns, as stored]      breakpoint on the last block of the last
                                              assistant message (history TTL)
    user       "═" × 60                       \\  only when the notification center
    assistant  the notification center        /  has content; never cached or stored
    user       the current message
    ...        this turn's tool loop          rolling breakpoint on the tail from the
                                              second call of a loop on (always 5m)

Nothing per-turn carries a breakpoint, there is no top-level `cache_control` and no
sampling parameter. At most 4 breakpoints, and TTLs never increase along the prefix.
When a turn grew the history past the API's lookback (20 positions counting the
breakpoint itself), one intermediate breakpoint sits 19 blocks after the previous turn's,
so this request still reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from storage import ContentBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock

from ._messages import SystemSection
from ._notification import DELIMITER
from ._settings import CacheSettings
from ._tools import ToolDefinition

__all__ = [
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "CacheControl",
    "ModelRequest",
    "OutMessage",
    "build_request",
    "previous_boundary",
]

LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4


class CacheControl(msgspec.Struct, frozen=True):
    ttl: Literal["5m", "1h"]
    type: Literal["ephemeral"] = "ephemeral"


class OutText(msgspec.Struct, frozen=True, tag="text", tag_field="type", omit_defaults=True):
    text: str
    cache_control: CacheControl | None = None


class OutToolUse(msgspec.Struct, frozen=True, tag="tool_use", tag_field="type", omit_defaults=True):
    id: str
    name: str
    input: msgspec.Raw
    cache_control: CacheControl | None = None


class OutToolResult(
    msgspec.Struct, frozen=True, tag="tool_result", tag_field="type", omit_defaults=True
):
    tool_use_id: str
    content: str
    is_error: bool = False
    cache_control: CacheControl | None = None


OutBlock = OutText | OutToolUse | OutToolResult


class OutMessage(msgspec.Struct, frozen=True):
    role: Literal["user", "assistant"]
    content: tuple[OutBlock, ...]


class OutTool(msgspec.Struct, frozen=True):
    name: str
    description: str
    input_schema: msgspec.Raw


class Diagnostics(msgspec.Struct, frozen=True):
    previous_message_id: str | None


class ModelRequest(msgspec.Struct, frozen=True, omit_defaults=True):
    """The request body. JSON-only: it carries raw JSON and never crosses a mailbox encoded."""

    model: str
    max_tokens: int
    messages: tuple[OutMessage, ...]
    system: tuple[OutText, ...] = ()
    tools: tuple[OutTool, ...] = ()
    diagnostics: Diagnostics | None = None

    def breakpoints(self) -> int:
        blocks = [*self.system, *(b for m in self.messages for b in m.content)]
        return sum(1 for b in blocks if b.cache_control is not None)


def _out(block: ContentBlock, cache: CacheControl | None = None) -> OutBlock:
    if isinstance(block, TextBlock):
        return OutText(block.text, cache)
    if isinstance(block, ToolUseBlock):
        return OutToolUse(block.id, block.name, msgspec.Raw(block.input_json.encode()), cache)
    assert isinstance(block, ToolResultBlock)
    return OutToolResult(block.tool_use_id, block.content, block.is_error, cache)


def previous_boundary(history: Sequence[Message]) -> int | None:
    """Block index of the previous turn's history breakpoint, if it had one.

    That breakpoint was on the last block of the history that preceded the most recent
    turn; the most recent turn's messages come after it.
    """
    if not history:
        return None
    last_turn = history[-1].turn_id
    first = len(history)
    while first > 0 and history[first - 1].turn_id == last_turn:
        first -= 1
    if first == 0:
        return None
    return sum(len(m.content) for m in history[:first]) - 1


def build_request(
    *,
    model: str,
    max_tokens: int,
    tools: Sequence[ToolDefinition],
    system: Sequence[SystemSection],
    history: Sequence[Message],
    boundary: int | None,
    notification: str,
    tail: Sequence[Message],
    cache: CacheSettings,
    rolling: bool,
    previous_message_id: str | None,
    delimiter: str = DELIMITER,
) -> ModelRequest:
    system_cc = CacheControl(cache.system_ttl)
    history_cc = CacheControl(cache.history_ttl)
    # The rolling breakpoint's prefix holds this turn's notification center: only the
    # calls of this tool loop, seconds apart, can read it, so the cheaper 5m write is
    # always enough; and as the last breakpoint it never precedes a longer TTL.
    rolling_cc = CacheControl("5m")
    last_cached = max((i for i, s in enumerate(system) if s.cached), default=-1)
    system_blocks = tuple(
        OutText(s.text, system_cc if i == last_cached else None) for i, s in enumerate(system)
    )

    # Breakpoints in the history, as block indices over all history blocks.
    marks: set[int] = set()
    last_assistant = max((i for i, m in enumerate(history) if m.role == "assistant"), default=-1)
    if last_assistant >= 0:
        history_bp = sum(len(m.content) for m in history[: last_assistant + 1]) - 1
        marks.add(history_bp)
        # A breakpoint sees LOOKBACK_BLOCKS positions counting its own: 19 blocks back.
        if boundary is not None and history_bp - boundary >= LOOKBACK_BLOCKS:
            marks.add(boundary + LOOKBACK_BLOCKS - 1)

    messages: list[OutMessage] = []
    index = 0
    for message in history:
        blocks = []
        for block in message.content:
            blocks.append(_out(block, history_cc if index in marks else None))
            index += 1
        messages.append(OutMessage(message.role, tuple(blocks)))
    if notification:
        messages.append(OutMessage("user", (OutText(delimiter),)))
        messages.append(OutMessage("assistant", (OutText(notification),)))
    for position, message in enumerate(tail):
        last_message = position == len(tail) - 1
        blocks = [
            _out(
                block,
                rolling_cc if rolling and last_message and j == len(message.content) - 1 else None,
            )
            for j, block in enumerate(message.content)
        ]
        messages.append(OutMessage(message.role, tuple(blocks)))
    return ModelRequest(
        model=model,
        max_tokens=max_tokens,
        messages=tuple(messages),
        system=system_blocks,
        tools=tuple(OutTool(t.name, t.description, t.input_schema) for t in tools),
        diagnostics=Diagnostics(previous_message_id) if cache.diagnostics else None,
    )
