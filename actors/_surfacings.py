"""The memory surfacings not yet counted, shared by the memories sections and the
background worker that counts them (the `uses` term of recall's ranking)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

__all__ = ["Surfacings"]


class Surfacings:
    """A tally: user -> memory id -> times shown in a notification center.

    A section tells the worker each surfacing (`MemoriesSurfaced`) and the worker adds
    it here; when the worker's mailbox is full (it is running a segment's summary, or a
    long pass of embedding) the section adds it here itself, where the worker's next
    count takes it: a surfacing told into a full mailbox was lost, and with it a use
    the README says is counted."""

    def __init__(self) -> None:
        self._counts: defaultdict[str, Counter[int]] = defaultdict(Counter)
        self.pending = 0  # surfacings added since the last `take`

    def add(self, user: str, memory_ids: Iterable[int]) -> None:
        for memory_id in set(memory_ids):
            self._counts[user][memory_id] += 1
        self.pending += 1

    def take(self) -> dict[str, Counter[int]]:
        """Everything counted so far, leaving the tally empty."""
        counts, self._counts, self.pending = self._counts, defaultdict(Counter), 0
        return counts
