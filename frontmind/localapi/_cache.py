"""A prompt-cache simulator that accounts the way the Messages API does.

The prefix is flattened into blocks in processing order: tools, system, then message
content blocks. Each block's key is a hash chained over everything before it (model
first, `cache_control` left out), so a key names one exact prefix through one block
boundary.

- Entries are written only at breakpoints, and only when the prefix through the
  breakpoint reaches the model's minimum cacheable length (no error below it).
- Each breakpoint looks for an entry at its own boundary and at up to `LOOKBACK` block
  boundaries before it; the longest prefix found by any breakpoint is read.
- A request looks its prefix up when it arrives, and its entries are written when its
  response starts: a request that arrived before that never reads them (so identical
  requests sent in parallel all write).
- An entry lives for its TTL (5m or 1h) counted from its last use; each hit refreshes it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import msgspec

from ._clock import Clock
from ._schema import (
    CacheControl,
    MessagesRequest,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ._tokens import BLOCK_FRAMING_TOKENS, canonical_json, estimate_text_tokens

__all__ = ["LOOKBACK", "CacheSimulator", "CacheUsage", "PrefixBlock", "min_cacheable_tokens"]

LOOKBACK = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}

# Minimum cacheable prefix by model family (longest matching prefix wins).
_MIN_CACHEABLE: tuple[tuple[str, int], ...] = (
    ("claude-3-haiku", 2048),
    ("claude-3-5-haiku", 2048),
    ("claude-haiku-4", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-7", 4096),
    ("claude-opus-4-8", 4096),
)
_DEFAULT_MIN_CACHEABLE = 1024


def min_cacheable_tokens(model: str) -> int:
    best = ("", _DEFAULT_MIN_CACHEABLE)
    for prefix, tokens in _MIN_CACHEABLE:
        if model.startswith(prefix) and len(prefix) > len(best[0]):
            best = (prefix, tokens)
    return best[1]


@dataclass(frozen=True, slots=True)
class PrefixBlock:
    key: bytes
    tokens: int
    section: str  # "tools" | "system" | "messages"
    ttl: str | None  # the breakpoint's TTL, or None when the block is no breakpoint


@dataclass(slots=True)
class _Entry:
    ttl: float
    expires_at: float


@dataclass(slots=True)
class CacheUsage:
    total: int
    read: int
    written_5m: int
    written_1h: int
    blocks: list[PrefixBlock] = field(default_factory=list)
    writes: list[tuple[bytes, float]] = field(default_factory=list)  # (key, TTL seconds)

    @property
    def written(self) -> int:
        return self.written_5m + self.written_1h

    @property
    def uncached(self) -> int:
        return self.total - self.read - self.written


def _block_text(block: TextBlock | ToolUseBlock | ToolResultBlock) -> str:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ToolUseBlock):
        return block.name + canonical_json(block.input)
    content = block.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content)


def _strip_cache_control(block: msgspec.Struct) -> bytes:
    return msgspec.json.encode(msgspec.structs.replace(block, cache_control=None))


def _ttl(control: CacheControl | None) -> str | None:
    return None if control is None else control.ttl


def flatten(request: MessagesRequest) -> Iterator[tuple[str, bytes, int, str | None]]:
    """(section, canonical bytes, tokens, breakpoint TTL) for every prefix block."""
    for tool in request.tools or ():
        text = tool.name + tool.description + canonical_json(tool.input_schema)
        tokens = estimate_text_tokens(text) + BLOCK_FRAMING_TOKENS + 2
        yield "tools", _strip_cache_control(tool), tokens, _ttl(tool.cache_control)
    system = request.system
    if isinstance(system, str):
        system = [TextBlock(text=system)] if system else []
    for system_block in system or ():
        tokens = estimate_text_tokens(system_block.text) + BLOCK_FRAMING_TOKENS
        yield "system", _strip_cache_control(system_block), tokens, _ttl(system_block.cache_control)
    for index, message in enumerate(request.messages):
        content = message.content
        blocks = [TextBlock(text=content)] if isinstance(content, str) else content
        for position, block in enumerate(blocks):
            # Role and message boundary belong to the prefix as much as the text does.
            marker = f"{index}:{message.role}:{position}".encode()
            tokens = estimate_text_tokens(_block_text(block)) + BLOCK_FRAMING_TOKENS
            yield (
                "messages",
                marker + _strip_cache_control(block),
                tokens,
                _ttl(block.cache_control),
            )


def prefix_blocks(request: MessagesRequest) -> list[PrefixBlock]:
    chain = hashlib.blake2b(request.model.encode(), digest_size=16).digest()
    blocks: list[PrefixBlock] = []
    for section, data, tokens, ttl in flatten(request):
        chain = hashlib.blake2b(chain + data, digest_size=16).digest()
        blocks.append(PrefixBlock(chain, tokens, section, ttl))
    return blocks


class CacheSimulator:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._entries: dict[bytes, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def account(self, request: MessagesRequest) -> CacheUsage:
        """Look up and write at once (for requests that respond immediately)."""
        usage = self.lookup(request)
        self.commit(usage)
        return usage

    def commit(self, usage: CacheUsage) -> None:
        """Write the request's entries: called when its response starts."""
        now = self._clock.now()
        for key, seconds in usage.writes:
            entry = self._entries.get(key)
            if entry is None or entry.expires_at <= now:
                self._entries[key] = _Entry(seconds, now + seconds)
            else:
                entry.expires_at = max(entry.expires_at, now + seconds)
        self._evict(now)

    def lookup(self, request: MessagesRequest) -> CacheUsage:
        """Read what can be read now (refreshing the hit) and plan the writes."""
        now = self._clock.now()
        blocks = prefix_blocks(request)
        cumulative: list[int] = []
        running = 0
        for block in blocks:
            running += block.tokens
            cumulative.append(running)
        breakpoints = [i for i, block in enumerate(blocks) if block.ttl is not None]

        read_at = -1
        for bp in breakpoints:
            for j in range(bp, max(bp - LOOKBACK, 0) - 1, -1):
                entry = self._entries.get(blocks[j].key)
                if entry is not None and entry.expires_at > now:
                    read_at = max(read_at, j)
                    break
        if read_at >= 0:
            hit = self._entries[blocks[read_at].key]
            hit.expires_at = now + hit.ttl
        read = cumulative[read_at] if read_at >= 0 else 0

        minimum = min_cacheable_tokens(request.model)
        covered = read
        written = {"5m": 0, "1h": 0}
        writes: list[tuple[bytes, float]] = []
        for bp in breakpoints:
            ttl = blocks[bp].ttl
            assert ttl is not None
            if cumulative[bp] < minimum:
                continue
            if cumulative[bp] > covered:
                written[ttl] += cumulative[bp] - covered
                covered = cumulative[bp]
            writes.append((blocks[bp].key, TTL_SECONDS[ttl]))
        return CacheUsage(running, read, written["5m"], written["1h"], blocks, writes)

    def _evict(self, now: float) -> None:
        if len(self._entries) > 50_000:
            self._entries = {k: e for k, e in self._entries.items() if e.expires_at > now}
