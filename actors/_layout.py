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

With `composer.channel = "system_message"` the notification center is instead one
`role: "system"` message right after the current user message (see `build_request`).

Blocks Frontmind does not interpret (thinking, images, documents, server tools) go out
as the exact JSON they were stored as. A breakpoint goes on the last block at or before
the chosen position that takes `cache_control` (`CACHEABLE_KINDS`: thinking blocks
cannot carry it at all); on a stored block it is spliced in before the closing brace,
every other byte unchanged. So a `pause_turn` continuation, or any request whose last
message ends in server-tool blocks (web search results can be thousands of tokens),
marks those blocks and reads them from the cache on the next call.

Nothing per-turn carries a breakpoint, there is no top-level `cache_control` and no
sampling parameter. At most 4 breakpoints, and TTLs never increase along the prefix.
When a turn grew the history by more than the API's 20-position lookback (counting the
breakpoint itself; a run of tool_use or of tool_result blocks is one position), one
intermediate breakpoint sits 19 positions after the previous turn's, so this request
still reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from storage import ContentBlock, Message, RawBlock, TextBlock, ToolResultBlock, ToolUseBlock

from ._messages import SystemSection
from ._notification import DELIMITER
from ._server_tools import ServerTool
from ._settings import CacheSettings
from ._tools import OfferedTool

__all__ = [
    "CACHEABLE_KINDS",
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "CacheControl",
    "ModelRequest",
    "OutMessage",
    "block_kind",
    "build_request",
    "out_tool",
    "previous_boundary",
    "tool_name",
    "tool_text",
]

LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4
# The content blocks that take `cache_control` (prompt caching, "What can be cached":
# text, images and documents, tool use and tool results, in user and assistant turns;
# not thinking or redacted thinking, nor sub-blocks such as citations. The server tools'
# use and result blocks are tool use and results: the API's block params for each of
# these kinds carry `cache_control`,
# https://platform.claude.com/docs/en/build-with-claude/prompt-caching#what-can-be-cached).
# So do the beta blocks a conversation carries back: a `compaction` block ("You can add a
# `cache_control` breakpoint on compaction blocks to cache the summarized content",
# https://platform.claude.com/docs/en/build-with-claude/compaction#prompt-caching), the
# advisor tool's result and the mid-conversation tool changes (their block params in the
# SDK's beta types: "Create a cache control breakpoint at this content block").
CACHEABLE_KINDS = frozenset(
    {
        "text",
        "image",
        "document",
        "search_result",
        "tool_use",
        "tool_result",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "container_upload",
        "tool_reference",
        "mcp_tool_use",
        "mcp_tool_result",
        "compaction",
        "advisor_tool_result",
        "tool_addition",
        "tool_removal",
    }
)
_CACHE_KEY = b'"cache_control"'
_encoder = msgspec.json.Encoder()


# The request's per-message structs are `gc=False`: a turn builds one of each per history
# block (thousands at 400 turns), and as collector-tracked objects they alone set off four
# young collections per turn. They hold only strings, raw JSON and each other, frozen, so
# they can never be part of a reference cycle, which is what makes untracking safe
# (msgspec, "Disabling Garbage Collection":
# https://jcristharif.com/msgspec/structs.html#struct-gc).


class CacheControl(msgspec.Struct, frozen=True, gc=False):
    ttl: Literal["5m", "1h"]
    type: Literal["ephemeral"] = "ephemeral"


class OutText(
    msgspec.Struct, frozen=True, gc=False, tag="text", tag_field="type", omit_defaults=True
):
    text: str
    cache_control: CacheControl | None = None


class OutToolUse(
    msgspec.Struct, frozen=True, gc=False, tag="tool_use", tag_field="type", omit_defaults=True
):
    id: str
    name: str
    input: msgspec.Raw
    cache_control: CacheControl | None = None


class OutToolResult(
    msgspec.Struct, frozen=True, gc=False, tag="tool_result", tag_field="type", omit_defaults=True
):
    tool_use_id: str
    content: str | msgspec.Raw
    is_error: bool = False
    cache_control: CacheControl | None = None


# msgspec.Raw: a stored block Frontmind does not interpret, sent as its exact bytes.
OutBlock = OutText | OutToolUse | OutToolResult | msgspec.Raw


def block_kind(block: OutBlock) -> str:
    """The block's "type" (for display; decodes a raw block's JSON)."""
    if isinstance(block, msgspec.Raw):
        return str(msgspec.json.decode(block, type=dict).get("type", "raw"))
    return str(type(block).__struct_config__.tag)


def _marked(block: OutBlock) -> bool:
    if isinstance(block, msgspec.Raw):
        return _CACHE_KEY in bytes(block)
    return block.cache_control is not None


def _takes_cache_control(block: ContentBlock) -> bool:
    """Whether a breakpoint may go on this stored block."""
    if isinstance(block, RawBlock):
        # A block of its own `cache_control` (never stored by Frontmind) is left alone.
        return block.kind in CACHEABLE_KINDS and '"cache_control"' not in block.json
    return True


class OutMessage(msgspec.Struct, frozen=True, gc=False):
    role: Literal["user", "assistant", "system"]
    content: tuple[OutBlock, ...]


class ThinkingConfig(msgspec.Struct, frozen=True, omit_defaults=True):
    type: Literal["enabled", "adaptive", "disabled"]
    budget_tokens: int | None = None
    display: str | None = None  # "summarized" or "omitted"; None: the model's default


class OutputConfig(msgspec.Struct, frozen=True):
    effort: str


class ToolChoice(msgspec.Struct, frozen=True):
    """`tool_choice`, sent only to ask for one call a reply: with `auto` and
    `disable_parallel_tool_use` the model "uses at most one tool" (docs: "Parallel tool
    use", https://platform.claude.com/docs/en/agents-and-tools/tool-use/parallel-tool-use).
    The same on every call of a continuum: a change of tool_choice re-writes the cached
    messages."""

    type: Literal["auto"] = "auto"
    disable_parallel_tool_use: bool = True


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
    # Client tools, then server tools as the exact JSON of their `[[server_tool]]` entry.
    tools: tuple[OutTool | msgspec.Raw, ...] = ()
    diagnostics: Diagnostics | None = None
    thinking: ThinkingConfig | None = None
    output_config: OutputConfig | None = None
    tool_choice: ToolChoice | None = None

    def breakpoints(self) -> int:
        blocks = [*self.system, *(b for m in self.messages for b in m.content)]
        return sum(1 for b in blocks if _marked(b))


def _out(block: ContentBlock, cache: CacheControl | None = None) -> OutBlock:
    if isinstance(block, TextBlock):
        return OutText(block.text, cache)
    if isinstance(block, ToolUseBlock):
        return OutToolUse(block.id, block.name, msgspec.Raw(block.input_json.encode()), cache)
    if isinstance(block, RawBlock):
        if cache is None:
            return msgspec.Raw(block.json.encode())
        # The mark goes in before the closing brace; the stored bytes stay as they were.
        mark = b',"cache_control":' + _encoder.encode(cache) + b"}"
        return msgspec.Raw(block.json.rstrip().removesuffix("}").encode() + mark)
    content = msgspec.Raw(block.content_json.encode()) if block.content_json else block.content
    return OutToolResult(block.tool_use_id, content, block.is_error, cache)


def out_tool(tool: OfferedTool) -> OutTool | msgspec.Raw:
    if isinstance(tool, ServerTool):
        return msgspec.Raw(tool.json.encode())
    return OutTool(tool.name, tool.description, tool.input_schema)


def tool_text(tool: OutTool | msgspec.Raw) -> str:
    """A tool definition's text, for token estimates."""
    if isinstance(tool, msgspec.Raw):
        return bytes(tool).decode()
    return tool.name + tool.description + bytes(tool.input_schema).decode()


def tool_name(tool: OutTool | msgspec.Raw) -> str:
    if isinstance(tool, msgspec.Raw):
        return str(msgspec.json.decode(tool, type=dict).get("name", ""))
    return tool.name


def _lookback_end(history: Sequence[Message], boundary: int, history_bp: int) -> int | None:
    """The last block still within the lookback of the breakpoint at `boundary`, when
    `history_bp` lies beyond it; else None.

    The lookback counts 20 positions including the breakpoint itself (an entry at 15
    and a breakpoint at 35 is a miss), and a run of consecutive tool_use blocks is one
    position, as is a run of consecutive tool_result blocks (prompt caching docs).
    Only the blocks after the previous turn's breakpoint are walked, and nothing is
    copied: this runs on every request.
    """
    position = 0
    index = 0
    last_within = boundary
    for message in history:
        if index + len(message.content) <= boundary + 1:
            index += len(message.content)
            continue
        previous: type | None = None
        for block in message.content:
            if index > boundary:
                kind = type(block)
                if not (kind is previous and kind in (ToolUseBlock, ToolResultBlock)):
                    position += 1
                if position > LOOKBACK_BLOCKS - 1:
                    return last_within if history_bp > last_within else None
                last_within = index
                previous = kind
            index += 1
    return None


def _typed_at_or_before(history: Sequence[Message], index: int, floor: int) -> int | None:
    """The last block index <= `index` (and > `floor`) that may carry a breakpoint
    (`CACHEABLE_KINDS`): walked back from the end, without copying the history."""
    first = sum(len(m.content) for m in history)
    for message in reversed(history):
        first -= len(message.content)
        if first > index:
            continue
        for j in range(min(len(message.content) - 1, index - first), -1, -1):
            if first + j <= floor:
                return None
            if _takes_cache_control(message.content[j]):
                return first + j
    return None


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
    tools: Sequence[OfferedTool],
    system: Sequence[SystemSection],
    history: Sequence[Message],
    boundary: int | None,
    notification: str,
    tail: Sequence[Message],
    cache: CacheSettings,
    rolling: bool,
    previous_message_id: str | None,
    channel: str = "frame",
    thinking: ThinkingConfig | None = None,
    effort: str | None = None,
    delimiter: str = DELIMITER,
    parallel_tools: bool = True,
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
        end = sum(len(m.content) for m in history[: last_assistant + 1]) - 1
        history_bp = _typed_at_or_before(history, end, -1)
        if history_bp is not None:
            marks.add(history_bp)
            last = None if boundary is None else _lookback_end(history, boundary, history_bp)
            if last is not None and boundary is not None:
                middle = _typed_at_or_before(history, last, boundary)
                if middle is not None:
                    marks.add(middle)

    messages: list[OutMessage] = []
    index = 0
    for message in history:
        blocks = []
        for block in message.content:
            blocks.append(_out(block, history_cc if index in marks else None))
            index += 1
        messages.append(OutMessage(message.role, tuple(blocks)))
    if notification and channel == "frame":
        messages.append(OutMessage("user", (OutText(delimiter),)))
        messages.append(OutMessage("assistant", (OutText(notification),)))
    for position, message in enumerate(tail):
        last_message = position == len(tail) - 1
        last_typed = max(
            (j for j, b in enumerate(message.content) if _takes_cache_control(b)), default=-1
        )
        blocks = [
            _out(block, rolling_cc if rolling and last_message and j == last_typed else None)
            for j, block in enumerate(message.content)
        ]
        messages.append(OutMessage(message.role, tuple(blocks)))
        if position == 0 and notification and channel == "system_message":
            # A role-system message must follow a user turn and be the last message or
            # be followed by an assistant turn, never open `messages` (Mid-conversation
            # system messages, https://platform.claude.com/docs/en/build-with-claude/
            # mid-conversation-system-messages): so it sits right after the current
            # user message, where it also stays put through the turn's tool loop.
            messages.append(OutMessage("system", (OutText(notification),)))
    return ModelRequest(
        model=model,
        max_tokens=max_tokens,
        messages=tuple(messages),
        system=system_blocks,
        tools=tuple(out_tool(t) for t in tools),
        diagnostics=Diagnostics(previous_message_id) if cache.diagnostics else None,
        thinking=thinking,
        output_config=None if effort is None else OutputConfig(effort),
        tool_choice=None if parallel_tools or not tools else ToolChoice(),
    )
