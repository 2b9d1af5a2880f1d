"""A reply as it goes out: the responder's blocks cut to max_tokens and the stop
sequences, the context window's room and the thinking configuration, with ids and
signed thinking blocks (their bindings recording what they were written after)."""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass
from typing import Any

import msgspec

from ._binding import PrefixChain
from ._models import ModelInfo
from ._responder import (
    Reply,
    ReplyBlock,
    ReplyRawBlock,
    ReplyText,
    ReplyThinking,
    default_thinking,
)
from ._schema import Block, CompactionBlock, MessagesRequest
from ._thinking import BINDING_BYTES, ThinkingSigner, effective_thinking
from ._tokens import canonical_json, cut_to_tokens, estimate_text_tokens

__all__ = ["Planned", "plan"]

_block_of = msgspec.json.Decoder(Block)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


@dataclass(frozen=True, slots=True)
class Planned:
    """A reply cut to max_tokens and stop sequences, with ids and signatures, ready to send."""

    blocks: list[dict[str, Any]]
    stop_reason: str
    output_tokens: int
    stop_sequence: str | None = None


def _first_stop(text: str, sequences: list[str]) -> tuple[int, str] | None:
    found = [(text.find(seq), seq) for seq in sequences if seq and seq in text]
    return min(found) if found else None


def _reply_blocks(
    reply: Reply, request: MessagesRequest, model: ModelInfo
) -> tuple[list[ReplyBlock], dict[str, Any]]:
    """The reply's blocks with thinking put first when on (and dropped when off)."""
    thinking = effective_thinking(request.thinking, model.thinks_by_default)
    blocks = list(reply.blocks)
    if thinking["type"] == "disabled":
        return [b for b in blocks if not isinstance(b, ReplyThinking)], thinking
    if not any(isinstance(b, ReplyThinking) for b in blocks):
        blocks.insert(0, default_thinking(request))
    return blocks, thinking


def _chain(sent: MessagesRequest | None, compaction: CompactionBlock | None) -> PrefixChain | None:
    """Where this reply's thinking blocks are written: after the request as sent (or,
    past a compaction this reply makes, after its block), for their bindings."""
    if sent is None:
        return None
    chain = PrefixChain.start(sent)
    if compaction is not None:
        chain.add("assistant", compaction)
    else:
        for _ in chain.walk(sent.messages):
            pass
    return chain


def _extend(chain: PrefixChain | None, block: dict[str, Any]) -> None:
    if chain is None:
        return
    # A block no request may carry back is in no later prefix.
    with contextlib.suppress(msgspec.ValidationError):
        chain.add("assistant", _block_of.decode(msgspec.json.encode(block)))


def plan(
    reply: Reply,
    request: MessagesRequest,
    model: ModelInfo,
    signer: ThinkingSigner,
    room: int | None = None,
    *,
    sent: MessagesRequest | None = None,
    compaction: CompactionBlock | None = None,
) -> Planned:
    """`room`: what the context window leaves for output. Docs (context windows, "Context
    window exceeded"): when input plus max_tokens exceeds the window the model writes
    until the window is full and stops with `model_context_window_exceeded`. `sent`: the
    request as the client sent it, which the thinking blocks' bindings record."""
    budget = request.max_tokens
    window_stop = room is not None and room < budget
    if room is not None:
        budget = min(budget, max(room, 0))
    blocks: list[dict[str, Any]] = []
    used = 0
    stop: str | None = None
    stop_sequence: str | None = None
    reply_blocks, thinking = _reply_blocks(reply, request, model)
    # Docs: "What's new in Claude Opus 4.7", "Thinking content omitted by default"
    # (https://platform.claude.com/docs/en/about-claude/models/whats-new-claude-4-7#thinking-content-omitted-by-default):
    # a request that sends no thinking.display gets the model's default, "omitted" from
    # Opus 4.7 on ("Opus 4.6 and earlier defaulted to 'summarized'", as
    # anthropics/claude-code#49268 sums up the page): thinking blocks with empty text and
    # their signature. The default is the row's thinking_display in models.toml.
    display = (request.thinking or {}).get("display") or model.thinking_display
    omitted = display == "omitted"
    thinks = any(isinstance(b, ReplyThinking) for b in reply_blocks)
    chain = _chain(sent, compaction) if thinks else None
    for block in reply_blocks:
        if isinstance(block, ReplyThinking):
            text = block.thinking
            limit = thinking.get("budget_tokens")
            if isinstance(limit, int) and estimate_text_tokens(text) > limit:
                text = cut_to_tokens(text, limit)
            tokens = estimate_text_tokens(text)
            if used + tokens > budget:
                text, tokens, stop = cut_to_tokens(text, budget - used), budget - used, "max_tokens"
            binding = chain.binding() if chain is not None else bytes(BINDING_BYTES)
            if block.redacted:
                data = signer.redact(text, binding, model.canonical)
                blocks.append({"type": "redacted_thinking", "data": data})
            else:
                shown = "" if omitted else text
                signature = signer.sign(text, binding, model.canonical)
                blocks.append({"type": "thinking", "thinking": shown, "signature": signature})
            _extend(chain, blocks[-1])
            used += tokens
        elif isinstance(block, ReplyText):
            text = block.text
            hit = _first_stop(text, request.stop_sequences or [])
            if hit is not None:
                text, stop, stop_sequence = text[: hit[0]], "stop_sequence", hit[1]
            tokens = estimate_text_tokens(text)
            if used + tokens > budget:
                text = cut_to_tokens(text, budget - used)
                tokens, stop, stop_sequence = estimate_text_tokens(text), "max_tokens", None
            if text and block.citations:
                blocks.append({"type": "text", "text": text, "citations": list(block.citations)})
            elif text:
                blocks.append({"type": "text", "text": text})
            if text:
                _extend(chain, blocks[-1])
            used += tokens
        elif isinstance(block, ReplyRawBlock):
            tokens = estimate_text_tokens(canonical_json(block.block))
            if used + tokens > budget:
                stop = "max_tokens"
                break
            blocks.append(dict(block.block))
            _extend(chain, blocks[-1])
            used += tokens
        else:
            tokens = estimate_text_tokens(block.name + canonical_json(block.input))
            if used + tokens > budget:
                stop = "max_tokens"
                break
            blocks.append(
                {
                    "type": "tool_use",
                    "id": block.id or _new_id("toolu"),
                    "name": block.name,
                    "input": block.input,
                }
            )
            _extend(chain, blocks[-1])
            used += tokens
        if stop is not None:
            break
    if stop == "max_tokens" and window_stop:
        stop = "model_context_window_exceeded"
    if stop is None:
        if reply.stop_reason is not None:
            stop = reply.stop_reason
        else:
            stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return Planned(blocks, stop, max(used, 1), stop_sequence)
