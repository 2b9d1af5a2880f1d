"""Context editing and server-side compaction: `context_management.edits`.

Each rule as the docs give it, simulated on the request before the model reads it. The
client keeps its full history; the edits apply to this request's copy only ("Context
editing happens server-side"), so their cache effects follow from the edited prefix:
clearing re-writes the cache from the first changed block on, kept blocks keep it.

Context editing (https://platform.claude.com/docs/en/build-with-claude/context-editing;
beta header `context-management-2025-06-27`):
- `clear_tool_uses_20250919`: when the context exceeds `trigger` (default 100,000 input
  tokens; or a number of `tool_uses`), the oldest tool results are replaced with
  placeholder text, all but the `keep` most recent tool uses (default 3); tools named in
  `exclude_tools` are never cleared; `clear_tool_inputs` (true, or a list of tool
  names) clears the calls' inputs too; `clear_at_least`: when less than that many tokens
  would be cleared, nothing is. The placeholder's wording is not documented: chosen
  from a public report of the live text.
- `clear_thinking_20251015`: keeps the thinking blocks of the `keep` most recent
  assistant turns that have any (`{"type": "thinking_turns", "value": N}`, N > 0, or
  `"all"`), clearing older ones; it replaces the model's default (keep all on newer
  models, the last turn on older ones). A turn runs from a user message that is not only
  tool results to the next (chosen: a tool loop is one turn, "Assistant conversation
  turns may include multiple content blocks (e.g. when using tools)"). It needs thinking
  on (chosen: "manages thinking blocks when extended thinking is enabled"), and must be
  listed before `clear_tool_uses_20250919` ("must be listed first in the edits array").
- The response's `context_management.applied_edits` names each edit that changed the
  request, with what it cleared.

Compaction (https://platform.claude.com/docs/en/build-with-claude/compaction; beta header
`compact-2026-01-12`): `compact_20260112` with `trigger` (`input_tokens`, default
150,000, at least 50,000), `pause_after_compaction` and `instructions`. When the input
reaches the trigger, the conversation is summarized into a `compaction` block at the
start of the reply and the reply continues on the compacted context (system, tools and
the block); with `pause_after_compaction` the reply is the block alone, `stop_reason`
"compaction". The summary is an extra sampling step: its usage is the `compaction` entry
of `usage.iterations`, outside the top-level figures. It reads the cache as the request
would and writes nothing (chosen: the docs say only that it is billed). Its length is
about 2% of what it summarizes, 200 to 4,000 tokens (chosen from the docs' usage
example: 180,000 tokens in, 3,500 out). A later request that carries the block is read
from the block on (`_cache.context_messages`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from ._models import ModelInfo
from ._schema import (
    SERVER_RESULT_BLOCKS,
    Block,
    CompactionBlock,
    McpToolResultBlock,
    McpToolUseBlock,
    MessageParam,
    MessagesRequest,
    RedactedThinkingBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    blocks_of,
)
from ._tokens import cut_to_tokens, estimate_text_tokens
from ._validate import ApiError, validation_message

__all__ = [
    "COMPACTION_BETAS",
    "COMPACT_BETA",
    "CONTEXT_BETA",
    "PLACEHOLDER",
    "Compact",
    "ContextPlan",
    "Edited",
    "apply_clearing",
    "compacted",
    "parse_context_management",
    "summarize",
]

CONTEXT_BETA = "context-management-2025-06-27"
COMPACT_BETA = "compact-2026-01-12"
# Either compaction beta lets a request carry `compaction` blocks (the on-demand kind's
# block is the same block type).
COMPACTION_BETAS = frozenset({COMPACT_BETA, "compact-2026-09-04"})
PLACEHOLDER = "[cleared to save context]"
_CLEAR_TOOL_USES = "clear_tool_uses_20250919"
_CLEAR_THINKING = "clear_thinking_20251015"
_COMPACT = "compact_20260112"
_MIN_COMPACT_TRIGGER = 50_000


# -- the request's edits, as the beta API's types give them ---------------------------------


class _InputTokens(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="input_tokens"):
    value: int


class _ToolUses(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="tool_uses"):
    value: int


class _ThinkingTurns(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="thinking_turns"):
    value: int


class _AllTurns(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="all"):
    pass


class _ClearToolUsesEdit(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag=_CLEAR_TOOL_USES
):
    trigger: _InputTokens | _ToolUses | None = None
    keep: _ToolUses | None = None
    clear_at_least: _InputTokens | None = None
    exclude_tools: list[str] | None = None
    clear_tool_inputs: bool | list[str] | None = None


class _ClearThinkingEdit(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag=_CLEAR_THINKING
):
    keep: _ThinkingTurns | _AllTurns | Literal["all"] | None = None


class _CompactEdit(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag=_COMPACT):
    trigger: _InputTokens | None = None
    pause_after_compaction: bool = False
    instructions: str | None = None


class _Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    edits: list[_ClearToolUsesEdit | _ClearThinkingEdit | _CompactEdit] = []


@dataclass(frozen=True, slots=True)
class ClearToolUses:
    trigger: tuple[str, int]  # ("input_tokens" | "tool_uses", value)
    keep: int
    clear_at_least: int
    exclude: frozenset[str]
    clear_inputs: bool | frozenset[str]


@dataclass(frozen=True, slots=True)
class ClearThinking:
    keep: int | None  # None: every turn's


@dataclass(frozen=True, slots=True)
class Compact:
    trigger: int
    pause: bool
    instructions: str | None


@dataclass(frozen=True, slots=True)
class ContextPlan:
    clearing: tuple[ClearToolUses | ClearThinking, ...] = ()
    compact: Compact | None = None


def parse_context_management(
    raw: Any, model: ModelInfo, betas: frozenset[str], thinking_on: bool
) -> ContextPlan:
    """The request's edits, checked; or `ApiError` naming what is wrong."""
    try:
        config = msgspec.convert(raw, _Config)
    except msgspec.ValidationError as exc:
        raise ApiError(400, "context_management." + validation_message(str(exc))) from None
    clearing: list[ClearToolUses | ClearThinking] = []
    compact: Compact | None = None
    kinds = [type(e).__struct_config__.tag for e in config.edits]
    for i, edit in enumerate(config.edits):
        where = f"context_management.edits.{i}"
        kind = str(kinds[i])
        if kind not in model.context_management:
            raise ApiError(400, f"{where}.type: '{kind}' is not supported for {model.name}")
        beta = COMPACT_BETA if kind == _COMPACT else CONTEXT_BETA
        if beta not in betas:
            raise ApiError(
                400, f"{where}: '{kind}' needs the `{beta}` value in the `anthropic-beta` header"
            )
        if isinstance(edit, _ClearToolUsesEdit):
            clearing.append(_clear_tool_uses(edit, where))
        elif isinstance(edit, _ClearThinkingEdit):
            if _CLEAR_TOOL_USES in kinds[:i]:
                raise ApiError(
                    400,
                    f"{where}: {_CLEAR_THINKING} must be listed first in the edits array, "
                    f"before {_CLEAR_TOOL_USES}",
                )
            if not thinking_on:
                raise ApiError(
                    400, f"{where}: {_CLEAR_THINKING} requires thinking to be enabled or adaptive"
                )
            keep = edit.keep
            if isinstance(keep, _ThinkingTurns):
                if keep.value < 1:
                    raise ApiError(400, f"{where}.keep.value: Input should be greater than 0")
                clearing.append(ClearThinking(keep.value))
            elif keep is None:
                default = None if model.keeps_previous_thinking else 1
                clearing.append(ClearThinking(default))
            else:
                clearing.append(ClearThinking(None))
        else:
            trigger = 150_000 if edit.trigger is None else edit.trigger.value
            if trigger < _MIN_COMPACT_TRIGGER:
                raise ApiError(
                    400,
                    f"{where}.trigger.value: Input should be greater than or equal to "
                    f"{_MIN_COMPACT_TRIGGER}",
                )
            compact = Compact(trigger, edit.pause_after_compaction, edit.instructions)
    return ContextPlan(tuple(clearing), compact)


def _clear_tool_uses(edit: _ClearToolUsesEdit, where: str) -> ClearToolUses:
    trigger = edit.trigger or _InputTokens(100_000)
    kind = "input_tokens" if isinstance(trigger, _InputTokens) else "tool_uses"
    keep = 3 if edit.keep is None else edit.keep.value
    least = 0 if edit.clear_at_least is None else edit.clear_at_least.value
    for name, value in (("trigger", trigger.value), ("keep", keep), ("clear_at_least", least)):
        if value < 0:
            raise ApiError(400, f"{where}.{name}.value: Input should be greater than or equal to 0")
    inputs = edit.clear_tool_inputs
    clear_inputs: bool | frozenset[str] = (
        frozenset(inputs) if isinstance(inputs, list) else bool(inputs)
    )
    exclude = frozenset(edit.exclude_tools or ())
    return ClearToolUses((kind, trigger.value), keep, least, exclude, clear_inputs)


# -- applying the clearing edits ----------------------------------------------------------


@dataclass
class Edited:
    """The request as the model reads it, and what each applied edit cleared."""

    request: MessagesRequest
    applied: list[dict[str, Any]] = field(default_factory=list)
    original_tokens: int = 0


Count = Callable[[MessagesRequest], int]


def apply_clearing(request: MessagesRequest, plan: ContextPlan, count: Count) -> Edited:
    """The clearing edits in their order, each measured by `count` (the input tokens)."""
    tokens = count(request)
    edited = Edited(request, [], tokens)
    for edit in plan.clearing:
        if isinstance(edit, ClearThinking):
            messages, turns = _clear_thinking(edited.request.messages, edit.keep)
            if turns:
                candidate = msgspec.structs.replace(edited.request, messages=messages)
                after = count(candidate)
                edited.applied.append(
                    {
                        "type": _CLEAR_THINKING,
                        "cleared_thinking_turns": turns,
                        "cleared_input_tokens": tokens - after,
                    }
                )
                edited.request, tokens = candidate, after
        else:
            uses = _tool_uses(edited.request.messages)
            kind, value = edit.trigger
            if (tokens if kind == "input_tokens" else len(uses)) <= value:
                continue
            messages, cleared = _clear_uses(edited.request.messages, uses, edit)
            if not cleared:
                continue
            candidate = msgspec.structs.replace(edited.request, messages=messages)
            after = count(candidate)
            if tokens - after < edit.clear_at_least:
                continue  # not worth breaking the cache for ("clear_at_least")
            edited.applied.append(
                {
                    "type": _CLEAR_TOOL_USES,
                    "cleared_tool_uses": cleared,
                    "cleared_input_tokens": tokens - after,
                }
            )
            edited.request, tokens = candidate, after
    return edited


def _turns(messages: list[MessageParam]) -> list[int]:
    """Each message's turn: a new one at every user message that is not only results."""
    turn, out = 0, []
    for message in messages:
        if message.role == "user" and any(
            not isinstance(b, ToolResultBlock) for b in blocks_of(message)
        ):
            turn += 1
        out.append(turn)
    return out


def _clear_thinking(
    messages: list[MessageParam], keep: int | None
) -> tuple[list[MessageParam], int]:
    if keep is None:
        return messages, 0
    turns = _turns(messages)
    thinking = (ThinkingBlock, RedactedThinkingBlock)
    with_thinking = sorted(
        {
            turns[i]
            for i, m in enumerate(messages)
            if m.role == "assistant" and any(isinstance(b, thinking) for b in blocks_of(m))
        }
    )
    cleared = set(with_thinking[: max(len(with_thinking) - keep, 0)])
    if not cleared:
        return messages, 0
    out: list[MessageParam] = []
    for i, message in enumerate(messages):
        if message.role == "assistant" and turns[i] in cleared:
            kept: list[Block] = [b for b in blocks_of(message) if not isinstance(b, thinking)]
            if not kept:
                continue
            message = MessageParam(message.role, kept)
        out.append(message)
    return out, len(cleared)


@dataclass(frozen=True, slots=True)
class _Use:
    message: int
    block: int
    id: str
    name: str


def _tool_uses(messages: list[MessageParam]) -> list[_Use]:
    uses = []
    for i, message in enumerate(messages):
        if message.role != "assistant":
            continue
        for j, block in enumerate(blocks_of(message)):
            if isinstance(block, ToolUseBlock | ServerToolUseBlock | McpToolUseBlock):
                uses.append(_Use(i, j, block.id, block.name))
    return uses


def _clear_uses(
    messages: list[MessageParam], uses: list[_Use], edit: ClearToolUses
) -> tuple[list[MessageParam], int]:
    """The oldest tool uses cleared (their results, and inputs where asked)."""
    chosen = [u for u in uses[: max(len(uses) - edit.keep, 0)] if u.name not in edit.exclude]
    if not chosen:
        return messages, 0
    ids = {u.id for u in chosen}
    inputs = {
        (u.message, u.block)
        for u in chosen
        if edit.clear_inputs is True
        or (isinstance(edit.clear_inputs, frozenset) and u.name in edit.clear_inputs)
    }
    results = (ToolResultBlock, McpToolResultBlock, *SERVER_RESULT_BLOCKS)
    out: list[MessageParam] = []
    for i, message in enumerate(messages):
        blocks = blocks_of(message)
        new: list[Block] = []
        for j, block in enumerate(blocks):
            if isinstance(block, results) and block.tool_use_id in ids:
                # A client tool's result, or a server tool's (web search, ...): its
                # content becomes the placeholder.
                block = msgspec.structs.replace(block, content=PLACEHOLDER)
            elif (i, j) in inputs and isinstance(
                block, ToolUseBlock | ServerToolUseBlock | McpToolUseBlock
            ):
                block = msgspec.structs.replace(block, input={})
            new.append(block)
        out.append(message if new == blocks else MessageParam(message.role, new))
    return out, len(chosen)


# -- compaction -----------------------------------------------------------------------------


def summarize(request: MessagesRequest, tokens: int, instructions: str | None) -> str:
    """The summary a compaction writes: deterministic, about 2% of what it summarizes."""
    target = min(max(math.ceil(tokens * 0.02), 200), 4000)
    asks = []
    for message in request.messages:
        if message.role != "user":
            continue
        words = " ".join(b.text for b in blocks_of(message) if isinstance(b, TextBlock)).split()
        if words:
            asks.append(" ".join(words[:12]))
    lead = "Summary of the conversation so far"
    if instructions is not None and instructions.strip():
        lead += f" (as asked: {' '.join(instructions.split()[:12])})"
    body = f"{lead}. The user asked, in order: " + "; ".join(asks) + "."
    filler = " State and next steps: continue from the last request; keep what was decided."
    while estimate_text_tokens(body) < target:
        body += filler
    return f"<summary>{cut_to_tokens(body, target)}</summary>"


def compacted(request: MessagesRequest, block: CompactionBlock) -> MessagesRequest:
    """The context the reply continues on: system and tools, then the block."""
    return msgspec.structs.replace(request, messages=[MessageParam("assistant", [block])])
