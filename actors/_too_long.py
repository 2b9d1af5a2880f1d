"""Each continuum's token scale, and what a request refused as longer than the model's
window teaches it: the scale the refusal's count says.

A turn learns so in the conversation actor (`_learn_too_long`, actors/_conversation.py),
from the estimate of the request it composed. A segment's summary rides the
conversation's prefix (`RideCache`) and is sent by the background worker, which has the
request alone: its estimate is counted here as the conversation counts a request's
parts (4 bytes a token, a framing cost per block: `_sent_estimate`), so the scale
learnt means what the conversation's own does, and the next request it builds (the
summary's again, or the next turn's) is fitted on it.

The scale is of the estimated text alone. A request that gives `tools` also carries the
tool-use system prompt the API adds (`models.toml`, `[tool_prompt_tokens]`: some 450
tokens), whose size is known in the API's own tokens: `tool_prompt_tokens` gives it,
the scale is measured on the count without it, and a fit adds it unscaled. Left out,
the estimate of a request with tools was short by that much (a request at the
window's edge was refused as too long), and the scale measured on a small request
counted the prompt as the text's density.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import msgspec

from storage import ContentBlock, Message, RawBlock, TextBlock, ToolResultBlock, ToolUseBlock

from ._exceptions import ModelRejected
from ._history_cost import message_tokens
from ._layout import (
    ModelRequest,
    OutBlock,
    OutText,
    OutTool,
    OutToolResult,
    OutToolUse,
    block_kind,
    tool_text,
)
from ._tokens import BLOCK_FRAMING_TOKENS, estimate_tokens

__all__ = [
    "MAX_TOKEN_SCALE",
    "TokenScales",
    "learn_too_long",
    "prefix_estimate",
    "request_estimate",
    "request_tool_prompt",
    "tool_prompt_tokens",
]

# The scale never goes above the largest ratio of the API's count to the estimate seen
# for any text (digits, punctuation: about 5); after a request refused as too long, it
# is a little over what that request took, so the next one is not at the window's edge.
MAX_TOKEN_SCALE = 8.0
TOO_LONG_MARGIN = 1.1
# The API's refusal of a request longer than the window ("Context windows": "prompt is
# too long: N tokens > M maximum"), whose N says how long it really was.
_TOO_LONG = re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum")


class TokenScales:
    """Tokens the API counted per token of Frontmind's estimate, by (user, continuum), in
    each continuum's last measured request (at least 1). The estimate (4 bytes a token)
    is close for prose but counts dense text (JSON, CSV, code, numbers) at a quarter of
    what the API does: a history budget kept in estimated tokens let such a history
    outgrow the model's window, and every turn after was refused as too long. Held by
    the process, not the continuum's actor (a lane let go after a failed turn takes its
    actor with it), shared by the turns and the summaries; the `limit` most recently
    measured continuums are kept."""

    def __init__(self, limit: int = 100_000) -> None:
        self._limit = limit
        self._scales: dict[tuple[str, str], float] = {}

    def get(self, key: tuple[str, str]) -> float:
        return self._scales.get(key, 1.0)

    def set(self, key: tuple[str, str], scale: float) -> None:
        self._scales.pop(key, None)
        if scale > 1.0:
            self._scales[key] = min(MAX_TOKEN_SCALE, scale)
            if len(self._scales) > self._limit:
                del self._scales[next(iter(self._scales))]


def tool_prompt_tokens(table: Mapping[str, int], tools: bool, choice: str | None = None) -> int:
    """The tool-use system prompt the API adds to a request, in the API's tokens: none
    without `tools`; else the catalog's figure (`table`, `ModelCatalog.tool_prompt_tokens`)
    for the request's tool_choice type (None: none sent, which the API takes as auto)."""
    if not tools:
        return 0
    auto = table.get("auto", 0)
    return table.get(choice or "auto", auto)


def request_tool_prompt(table: Mapping[str, int], request: ModelRequest) -> int:
    """`tool_prompt_tokens` of a request as built."""
    choice = None if request.tool_choice is None else request.tool_choice.type
    return tool_prompt_tokens(table, bool(request.tools), choice)


def prefix_estimate(tools: Iterable[OutTool | msgspec.Raw], system: Iterable[str]) -> int:
    """Tools and system prompt blocks in estimated tokens, each block framed: what a
    turn's request (the conversation) and a summary's (the worker) both hold."""
    return sum(estimate_tokens(tool_text(t)) + BLOCK_FRAMING_TOKENS for t in tools) + sum(
        estimate_tokens(text) + BLOCK_FRAMING_TOKENS for text in system
    )


def request_estimate(request: ModelRequest) -> int:
    """The request in estimated tokens: its tools, system prompt and messages (the
    tool-use system prompt apart: `request_tool_prompt`)."""
    prefix = prefix_estimate(request.tools, (b.text for b in request.system))
    # Each message as the history stores it, weighed as the history weighs it (images
    # and documents by what the API counts for them, not by their base64's length).
    messages = sum(
        message_tokens(Message("user", tuple(_stored(b) for b in m.content)))
        for m in request.messages
    )
    return prefix + messages


def _stored(block: OutBlock) -> ContentBlock:
    """A request's block as the stored block it was made from."""
    if isinstance(block, OutText):
        return TextBlock(block.text)
    if isinstance(block, OutToolUse):
        return ToolUseBlock(block.id, block.name, bytes(block.input).decode())
    if isinstance(block, OutToolResult):
        if isinstance(block.content, msgspec.Raw):
            return ToolResultBlock(
                block.tool_use_id, "", block.is_error, bytes(block.content).decode()
            )
        return ToolResultBlock(block.tool_use_id, block.content, block.is_error)
    return RawBlock(block_kind(block), bytes(block).decode())


def learn_too_long(
    scales: TokenScales,
    key: tuple[str, str],
    estimate: int,
    refusal: ModelRejected,
    tool_prompt: int = 0,
) -> bool:
    """Whether `refusal` is the API's "prompt is too long" for a request of `estimate`
    estimated tokens besides its `tool_prompt` (`tool_prompt_tokens`); if so, the
    continuum `key`'s scale is at least what its count says, a little over
    (`TOO_LONG_MARGIN`), so the next request is not at the edge."""
    found = _TOO_LONG.search(str(refusal))
    if found is None or estimate <= 0:
        return False
    counted = max(0, int(found[1]) - tool_prompt)
    scales.set(key, max(scales.get(key), counted / estimate * TOO_LONG_MARGIN))
    return True
