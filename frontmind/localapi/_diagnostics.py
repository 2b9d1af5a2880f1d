"""Cache diagnostics: why a request could not reuse the previous request's prefix.

The reusable part of a previous request is its prefix through its last breakpoint;
whatever came after (a notification center, the then-current user message) was never
cached, so a request that keeps that prefix and drops or replaces the tail reports no
miss. Otherwise the first section that differs names the reason.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ._cache import CacheUsage, PrefixBlock

__all__ = ["DiagnosticsBook"]


@dataclass(frozen=True, slots=True)
class _Snapshot:
    model: str
    tools_end: bytes | None
    system_end: bytes | None
    anchor: bytes | None
    anchor_tokens: int


def _section_end(blocks: list[PrefixBlock], section: str) -> bytes | None:
    keys = [b.key for b in blocks if b.section == section]
    return keys[-1] if keys else None


class DiagnosticsBook:
    """Remembers the last `capacity` responses' prefixes by message id."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._snapshots: OrderedDict[str, _Snapshot] = OrderedDict()

    def record(self, message_id: str, model: str, usage: CacheUsage) -> None:
        blocks = usage.blocks
        anchor: bytes | None = None
        anchor_tokens = 0
        running = 0
        for block in blocks:
            running += block.tokens
            if block.ttl is not None:
                anchor, anchor_tokens = block.key, running
        self._snapshots[message_id] = _Snapshot(
            model,
            _section_end(blocks, "tools"),
            _section_end(blocks, "system"),
            anchor,
            anchor_tokens,
        )
        while len(self._snapshots) > self._capacity:
            self._snapshots.popitem(last=False)

    def diagnose(self, previous_id: str, model: str, usage: CacheUsage) -> dict[str, Any] | None:
        previous = self._snapshots.get(previous_id)
        if previous is None:
            return {"type": "previous_message_not_found"}
        missed = max(previous.anchor_tokens - usage.read, 0)
        if previous.model != model:
            return {"type": "model_changed", "cache_missed_input_tokens": missed}
        blocks = usage.blocks
        if _section_end(blocks, "tools") != previous.tools_end:
            return {"type": "tools_changed", "cache_missed_input_tokens": missed}
        if _section_end(blocks, "system") != previous.system_end:
            return {"type": "system_changed", "cache_missed_input_tokens": missed}
        if previous.anchor is None or any(b.key == previous.anchor for b in blocks):
            return None
        return {"type": "messages_changed", "cache_missed_input_tokens": missed}
