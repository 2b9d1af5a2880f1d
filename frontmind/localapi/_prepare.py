"""What the model reads of an accepted request: preserved thinking's model and prefix
checks, then the request's context editing, then (when its trigger is reached) a compaction.

`_binding.py` and `_context.py` hold the rules and their docs; this is their order, on
one request, for `/v1/messages` and `/v1/messages/count_tokens` alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from ._binding import BINDING_BETA, check_bindings, sealed, without_blocks
from ._context import (
    COMPACTION_BETAS,
    ContextPlan,
    apply_clearing,
    compacted,
    parse_context_management,
    summarize,
)
from ._models import ModelInfo
from ._schema import (
    CompactionBlock,
    MessagesRequest,
    RedactedThinkingBlock,
    ThinkingBlock,
    blocks_of,
    has_thinking,
)
from ._thinking import ThinkingSigner, effective_thinking
from ._tokens import estimate_text_tokens
from ._validate import ApiError

__all__ = ["Compaction", "Prepared", "plan_compaction", "prepare"]

_BEHAVIOURS = ("error", "drop_block")


@dataclass
class Prepared:
    sent: MessagesRequest  # merged, as the client sent it (what the prefix check compares)
    request: MessagesRequest  # what the model reads
    plan: ContextPlan | None = None
    applied: list[dict[str, Any]] | None = None  # None: the request had no context_management
    original_tokens: int = 0
    transformations: list[dict[str, Any]] | None = None  # None: no binding beta header


@dataclass(frozen=True, slots=True)
class Compaction:
    block: dict[str, Any]  # as the reply carries it
    struct: CompactionBlock  # the same block, as a later request carries it back
    summarized_tokens: int  # the input the summary was written from
    output_tokens: int
    context: MessagesRequest  # what the reply continues on
    pause: bool = False


def _binding_setting(request: MessagesRequest, betas: frozenset[str]) -> str | None:
    """`thinking.block_binding.prefix_mismatch_behavior`, checked (preserved thinking,
    "Set the mismatch behavior and read input_transformations")."""
    thinking = request.thinking or {}
    binding = thinking.get("block_binding")
    if binding is None:
        return None
    kind = thinking.get("type")
    if BINDING_BETA not in betas:
        raise ApiError(400, f"thinking.{kind}.block_binding: Extra inputs are not permitted")
    if kind not in ("adaptive", "enabled"):
        raise ApiError(
            400, "thinking.block_binding: accepted with thinking.type 'adaptive' or 'enabled'"
        )
    if not isinstance(binding, dict) or set(binding) - {"prefix_mismatch_behavior"}:
        raise ApiError(400, "thinking.block_binding: only prefix_mismatch_behavior is accepted")
    behaviour = binding.get("prefix_mismatch_behavior")
    if behaviour not in _BEHAVIOURS:
        raise ApiError(
            400,
            "thinking.block_binding.prefix_mismatch_behavior: Input should be 'error' or "
            "'drop_block'",
        )
    return str(behaviour)


def _unreadable(
    sent: MessagesRequest, model: ModelInfo, signer: ThinkingSigner
) -> list[tuple[str, int, int]]:
    """The thinking blocks the requested model cannot read (path and position).

    Docs (preserved thinking): "Each model reads its own thinking blocks and those of a
    fixed set of other models ... If the current model can't read a block, the API drops
    it from that request without an error"; the check "applies to every account". Who
    reads whom is `reads_thinking_of` in models.toml. A block another server signed, or
    one from before signatures named their model, names no model: it is kept."""
    found: list[tuple[str, int, int]] = []
    for i, message in enumerate(sent.messages):
        for j, block in enumerate(blocks_of(message)):
            if not isinstance(block, ThinkingBlock | RedactedThinkingBlock):
                continue
            kind, token = sealed(block)
            made_by = signer.producer(kind, token) if signer.made_here(token) else None
            if made_by and made_by != model.canonical and made_by not in model.reads_thinking_of:
                found.append((f"messages.{i}.content.{j}", i, j))
    return found


def _check_bindings(
    sent: MessagesRequest,
    model: ModelInfo,
    betas: frozenset[str],
    signer: ThinkingSigner,
    new_account: bool,
) -> tuple[MessagesRequest, list[dict[str, Any]] | None]:
    """The request without the thinking blocks the model check and the prefix check
    drop, and the beta header's `input_transformations` (None without it). A block
    failing both reports the model check: the docs' order of precedence puts
    `model_binding_mismatch` before `prefix_binding_mismatch`, and a block dropped for
    its model fails no request."""
    behaviour = _binding_setting(sent, betas)
    reported: list[dict[str, Any]] | None = [] if BINDING_BETA in betas else None
    if not has_thinking(sent.messages):
        return sent, reported  # no block to drop, and no prefix to hash for the check
    unreadable = _unreadable(sent, model, signer)
    dropped = {(i, j) for _, i, j in unreadable}
    failing: list[tuple[str, int, int]] = []
    enforced = False
    if model.prefix_check != "none":
        failing = [f for f in check_bindings(sent, signer).failing if (f[1], f[2]) not in dropped]
        enforced = model.prefix_check == "every_account" or new_account or behaviour is not None
    if failing and enforced and (behaviour or "error") == "error":
        where, i, j = failing[0]
        redacted = isinstance(blocks_of(sent.messages[i])[j], RedactedThinkingBlock)
        kind, field_name = ("redacted_thinking", "data") if redacted else ("thinking", "signature")
        message = (
            f"{where}: Invalid `{field_name}` in `{kind}` block. The block is bound to a "
            "different conversation. Remove the block, or set "
            '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
        )
        if BINDING_BETA not in betas:
            message += (
                f" That setting requires the `{BINDING_BETA}` value in the `anthropic-beta` header."
            )
        raise ApiError(400, message)
    if reported is not None:
        model_drop = ("thinking_dropped", "model_binding_mismatch")
        notes = [(i, j, where, *model_drop) for where, i, j in unreadable]
        kind = "thinking_dropped" if enforced else "thinking_mismatch_allowed"
        notes += [(i, j, where, kind, "prefix_binding_mismatch") for where, i, j in failing]
        reported.extend(
            {"type": kind, "path": where, "reason": reason}
            for _, _, where, kind, reason in sorted(notes)
        )
    if enforced:
        dropped |= {(i, j) for _, i, j in failing}
    if not dropped:
        return sent, reported
    # Dropped blocks are not billed and the model reads without them.
    kept = without_blocks(sent.messages, dropped)
    return msgspec.structs.replace(sent, messages=kept), reported


def _check_compaction_blocks(
    request: MessagesRequest, betas: frozenset[str], signer: ThinkingSigner
) -> None:
    """A `compaction` block needs a compaction beta header (chosen: the docs ask for the
    header on every request of the feature), and comes back as it was signed ("send it
    exactly as it came": a changed block is a 400)."""
    for i, message in enumerate(request.messages):
        for j, block in enumerate(blocks_of(message)):
            if not isinstance(block, CompactionBlock):
                continue
            where = f"messages.{i}.content.{j}"
            if not COMPACTION_BETAS & betas:
                raise ApiError(
                    400,
                    f"{where}: `compaction` blocks need the `compact-2026-01-12` (or "
                    "`compact-2026-09-04`) value in the `anthropic-beta` header",
                )
            signature = block.signature
            if (
                signature
                and signer.made_here(signature)
                and not signer.compaction_intact(block.content, signature)
            ):
                raise ApiError(400, f"{where}: Invalid `signature` in `compaction` block")


def prepare(
    sent: MessagesRequest,
    model: ModelInfo,
    betas: frozenset[str],
    signer: ThinkingSigner,
    count: Callable[[MessagesRequest], int],
    *,
    new_account: bool,
) -> Prepared:
    """The prefix check, then the clearing edits (`count`: a request's input tokens)."""
    _check_compaction_blocks(sent, betas, signer)
    request, reported = _check_bindings(sent, model, betas, signer, new_account)
    prepared = Prepared(sent, request, transformations=reported)
    if sent.context_management is None:
        return prepared
    thinking = effective_thinking(sent.thinking, model.thinks_by_default)
    plan = parse_context_management(
        sent.context_management, model, betas, thinking["type"] != "disabled"
    )
    edited = apply_clearing(request, plan, count)
    prepared.request = edited.request
    prepared.plan = plan
    prepared.applied = edited.applied
    prepared.original_tokens = edited.original_tokens
    return prepared


def plan_compaction(prepared: Prepared, tokens: int, signer: ThinkingSigner) -> Compaction | None:
    """The compaction this request triggers (its input `tokens` reach the trigger)."""
    compact = prepared.plan.compact if prepared.plan is not None else None
    if compact is None or tokens < compact.trigger:
        return None
    summary = summarize(prepared.request, tokens, compact.instructions)
    signature = signer.sign_compaction(summary)
    block = CompactionBlock(content=summary, signature=signature)
    return Compaction(
        block={"type": "compaction", "content": summary, "signature": signature},
        struct=block,
        summarized_tokens=tokens,
        output_tokens=estimate_text_tokens(summary),
        context=compacted(prepared.request, block),
        pause=compact.pause,
    )
