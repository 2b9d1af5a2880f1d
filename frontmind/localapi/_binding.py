"""Preserved thinking's prefix check: a thinking block is valid only while everything sent
before it is unchanged.

Docs (https://platform.claude.com/docs/en/build-with-claude/preserved-thinking#prefix-check
and .../preserved-thinking/prefix-checks), as simulated:

- Each thinking or redacted_thinking block this server writes records its binding in its
  signature: a digest of its prefix (the top-level `system`, the `tools`, and every
  message before it, thinking blocks and `cache_control` markers left out; with a
  `compaction` block, from the most recent one on) and the identity of the thinking
  block before it ("each thinking block records which thinking block came before it").
- On a model that runs the check (`prefix_check` in models.toml), a replayed block whose
  prefix differs is invalid, and so is every later thinking block. The kept blocks must
  be an unbroken run of the original sequence: removing blocks from the start, from the
  end, or all of them is valid; a gap (or a block put back) invalidates the ones after.
- Enforced (every account on "every_account" models; on "new_accounts" models the
  simulated account is new, or the request sets `prefix_mismatch_behavior`): "error" (the
  default) answers 400 naming the first failing block; "drop_block" drops it and every
  later thinking block. Not enforced: the blocks reach the model, and the beta header's
  `input_transformations` lists them as `thinking_mismatch_allowed`.
- Request parameters outside system, tools and messages (effort, max_tokens,
  tool_choice, thinking.display, ...) are not part of the prefix; neither are tools with
  `defer_loading` (chosen: the docs keep an unreferenced deferred tool out of it).
- Blocks another server signed are opaque here: not checked, but part of the chain.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import msgspec

from ._schema import (
    Block,
    CompactionBlock,
    MessageParam,
    MessagesRequest,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    blocks_of,
)
from ._thinking import BINDING_BYTES, ThinkingSigner

__all__ = [
    "BINDING_BETA",
    "BindingCheck",
    "PrefixChain",
    "check_bindings",
    "sealed",
]

BINDING_BETA = "thinking-binding-controls-2026-08-01"
_DIGEST = BINDING_BYTES // 2
_NONE = bytes(_DIGEST)  # "no thinking block before it"
_THINKING = (ThinkingBlock, RedactedThinkingBlock)


def sealed(block: ThinkingBlock | RedactedThinkingBlock) -> tuple[str, str]:
    """The block's kind for the signer ("thinking" or "redacted") and its sealed token
    (a thinking block's `signature`, a redacted one's `data`)."""
    if isinstance(block, ThinkingBlock):
        return "thinking", block.signature
    return "redacted", block.data


def _identity(block: ThinkingBlock | RedactedThinkingBlock) -> bytes:
    return hashlib.blake2b(sealed(block)[1].encode(), digest_size=_DIGEST).digest()


def _canonical(block: msgspec.Struct) -> bytes:
    if hasattr(block, "cache_control"):
        block = msgspec.structs.replace(block, cache_control=None)
    return msgspec.json.encode(block)


def _from_compaction(messages: list[MessageParam]) -> tuple[int, int]:
    """(message, block) where the checked prefix starts: the last compaction block."""
    for i in range(len(messages) - 1, -1, -1):
        blocks = blocks_of(messages[i])
        for j in range(len(blocks) - 1, -1, -1):
            if isinstance(blocks[j], CompactionBlock):
                return i, j
    return 0, 0


@dataclass
class PrefixChain:
    """The running prefix digest and the last thinking block seen, block by block."""

    hasher: hashlib.blake2b
    role: str | None = None
    previous: bytes = _NONE

    @classmethod
    def start(cls, request: MessagesRequest) -> PrefixChain:
        hasher = hashlib.blake2b(digest_size=_DIGEST)
        system = request.system
        if isinstance(system, str):
            system = [TextBlock(text=system)] if system else []
        for block in system or ():
            hasher.update(b"S" + _canonical(block))
        for tool in request.tools or ():
            if not tool.defer_loading:
                hasher.update(b"T" + _canonical(tool))
        return cls(hasher)

    def binding(self) -> bytes:
        """What a thinking block written at this point records."""
        return self.hasher.digest() + self.previous

    def add(self, role: str, block: Block) -> None:
        if isinstance(block, _THINKING):
            self.previous = _identity(block)
            return
        if role != self.role:
            self.hasher.update(b"R" + role.encode())
            self.role = role
        self.hasher.update(b"B" + _canonical(block))

    def walk(self, messages: list[MessageParam]) -> Iterator[tuple[int, int, Block]]:
        """Each block from the checked prefix's start on, added after it is yielded."""
        first, offset = _from_compaction(messages)
        for i in range(first, len(messages)):
            blocks = blocks_of(messages[i])
            for j in range(offset if i == first else 0, len(blocks)):
                yield i, j, blocks[j]
                self.add(messages[i].role, blocks[j])


@dataclass
class BindingCheck:
    """The check's outcome: the failing blocks (path and position) in request order."""

    failing: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def first(self) -> str | None:
        return self.failing[0][0] if self.failing else None


def check_bindings(request: MessagesRequest, signer: ThinkingSigner) -> BindingCheck:
    """Which replayed thinking blocks fail the prefix check (`request` merged)."""
    chain = PrefixChain.start(request)
    result = BindingCheck()
    seen_thinking = False
    failed = False
    for i, j, block in chain.walk(request.messages):
        if not isinstance(block, _THINKING):
            continue
        where = f"messages.{i}.content.{j}"
        if failed:
            result.failing.append((where, i, j))
            continue
        kind, token = sealed(block)
        recorded = signer.binding(kind, token) if signer.made_here(token) else None
        if recorded is not None:
            prefix, previous = recorded[:_DIGEST], recorded[_DIGEST:]
            # The first block kept may follow removed ones (oldest first is valid).
            if prefix != chain.hasher.digest() or (seen_thinking and previous != chain.previous):
                failed = True
                result.failing.append((where, i, j))
        seen_thinking = True
    return result


def without_blocks(
    messages: Iterable[MessageParam], drop: set[tuple[int, int]]
) -> list[MessageParam]:
    """The messages with the blocks at `drop` left out (an emptied message too)."""
    out: list[MessageParam] = []
    for i, message in enumerate(messages):
        blocks = blocks_of(message)
        kept = [b for j, b in enumerate(blocks) if (i, j) not in drop]
        if len(kept) == len(blocks):
            out.append(message)
        elif kept:
            out.append(MessageParam(message.role, kept))
    merged: list[MessageParam] = []
    for message in out:
        if merged and merged[-1].role == message.role:
            merged[-1] = MessageParam(message.role, [*blocks_of(merged[-1]), *blocks_of(message)])
        else:
            merged.append(message)
    return merged
