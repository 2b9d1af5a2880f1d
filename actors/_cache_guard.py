"""The cache guard: notices a system section that keeps changing.

Every system section sits inside the cached prefix of everything after it (the rest of
the system prompt and the whole history), so a section that changes often throws that
cache away each time. When a section changes on more than `threshold` of the last
`window` turns, the guard warns, naming the section and the tokens each change costs:
that section belongs in the notification center.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence

from ._messages import SystemSection
from ._tokens import estimate_tokens

__all__ = ["CacheGuard"]

log = logging.getLogger("frontmind.cache_guard")


class CacheGuard:
    def __init__(self, *, window: int, threshold: float, min_turns: int) -> None:
        self._window = window
        self._threshold = threshold
        self._min_turns = min_turns
        self._last: dict[str, bytes] = {}
        # Per section, whether it changed on each of the last `window` turns, as bits of
        # an int (newest lowest) and how many turns they cover: a deque would cost each
        # composer about 0.6 KiB a section.
        self._changes: dict[str, tuple[int, int]] = {}
        self._logged_at: dict[str, int] = {}
        self._turns = 0

    def observe(self, system: Sequence[SystemSection]) -> tuple[str, ...]:
        """Record this turn's cached system sections; return warnings for churning ones."""
        self._turns += 1
        warnings: list[str] = []
        tokens_after = 0
        costs: dict[str, int] = {}
        for section in reversed(system):  # a change re-writes its section and all after it
            tokens_after += estimate_tokens(section.text)
            costs[section.name] = tokens_after
        for section in system:
            if not section.cached:
                continue
            digest = hashlib.blake2b(section.text.encode(), digest_size=16).digest()
            previous = self._last.get(section.name)
            self._last[section.name] = digest
            bits, seen = self._changes.get(section.name, (0, 0))
            if previous is not None:
                bits = ((bits << 1) | (previous != digest)) & ((1 << self._window) - 1)
                seen = min(seen + 1, self._window)
                self._changes[section.name] = bits, seen
            if seen < self._min_turns:
                continue
            changed = bits.bit_count()
            share = changed / seen
            if share > self._threshold:
                warning = (
                    f"cache guard: system section {section.name!r} changed on {changed} "
                    f"of the last {seen} turns; each change re-writes about "
                    f"{costs[section.name]} cached system tokens plus the whole history. "
                    "Place it in the notification center."
                )
                warnings.append(warning)
                if self._turns - self._logged_at.get(section.name, -self._window) >= self._window:
                    self._logged_at[section.name] = self._turns
                    log.warning("%s", warning)
        return tuple(warnings)
