"""What a conversation actor knows of its continuum's prompt-cache entries.

The TTL policy and the cache warm-up (actors/_ttl.py) decide from it: when recent turns
started, what the last one chose, whether each recent turn could reuse its
predecessor's prefix, and the system and history entries as they were written. It is
fed the record of each turn whose messages the history stores through `absorb` (when
the history is loaded, the stored records oldest first; after each commit, the new
one): every completed turn, and a failed one that kept its tool rounds (its record
holds its first call's message id: it paid its calls and wrote the cache as a
completed turn does). It is told what the two requests between turns wrote: a
summary riding the cache (`rode`) and a warm-up (`warmed`).
"""

from __future__ import annotations

from collections import deque
from itertools import pairwise
from typing import Literal

from storage import TtlChoice, TurnRecord

from ._ttl import MAX_PAUSES, TTL_SECONDS, history_entry_after, system_entry_after

__all__ = ["CacheBook"]

Ttl = Literal["5m", "1h"]
# Miss reasons that mean the prefix itself changed (not that an entry expired).
_CHANGED = frozenset({"model_changed", "tools_changed", "system_changed", "messages_changed"})


class CacheBook:
    """One continuum's cache bookkeeping; see the module's docstring."""

    __slots__ = (
        "history_entry",
        "last_exchange_cached",
        "last_model",
        "last_ttl",
        "reused",
        "system_entry",
        "turn_ended",
        "turn_times",
        "warmed_at",
    )

    def __init__(self) -> None:
        self.turn_times: deque[float] = deque(maxlen=MAX_PAUSES + 1)
        self.last_ttl: TtlChoice | None = None
        # The model the last turn ran with: caches are per model, a switch re-writes all.
        self.last_model: str | None = None
        self.reused: deque[bool] = deque(maxlen=MAX_PAUSES)
        # The system prompt's entry after the last turn: its TTL and when last used.
        self.system_entry: tuple[Ttl, float] | None = None
        # When the last turn ended (its last call used the cache), and when a warm-up
        # after it moved the prefix into a 1h entry (None: none since).
        self.turn_ended: float | None = None
        self.warmed_at: float | None = None
        # The TTL of the entry the next turn's history breakpoint will hit, as written
        # (`history_entry_after`); None: unknown, the last turn's mark is assumed. And
        # whether the last exchange is already cached (a background request wrote it).
        self.history_entry: Ttl | None = None
        self.last_exchange_cached = False

    def absorb(self, record: TurnRecord) -> None:
        """A turn the history stores (completed, or failed with its tool rounds kept),
        in order: its start, its TTL choice and model, whether it could reuse the prefix
        before it, and the entries it left."""
        self.turn_times.append(record.started_at.timestamp())
        self.last_ttl = record.cache_ttl
        self.last_model = record.model
        self.reused.append(record.cache_miss_reason not in _CHANGED)
        # Its system entry: written (at the TTL it chose) when its first call read
        # nothing from the cache, else refreshed if it was still alive.
        first = record.call_usage[0] if record.call_usage else None
        wrote = first is not None and first.cache_read_input_tokens == 0
        wrote = wrote and first is not None and first.cache_creation_input_tokens > 0
        self.system_entry = system_entry_after(
            self.system_entry, record.started_at.timestamp(), wrote, record.cache_ttl
        )
        self.turn_ended = record.finished_at.timestamp()
        self.warmed_at = None
        self.history_entry = history_entry_after(self.history_entry, record)
        self.last_exchange_cached = False

    def rode(self, history_ttl: Ttl) -> None:
        """A background request rode the cache: it wrote the last exchange, under a
        history mark at `history_ttl` (a 1h entry stays 1h)."""
        self.last_exchange_cached = True  # the warm-up then has nothing left to write
        if self.history_entry != "1h":
            self.history_entry = history_ttl

    def warmed(self, now: float) -> None:
        """A warm-up wrote the prefix into a 1h entry, reading the system entry."""
        self.warmed_at = now
        self.history_entry = "1h"
        self.system_entry = system_entry_after(self.system_entry, now, False, None)

    def timing(
        self, now: float, *, pending: bool
    ) -> tuple[tuple[float, ...], float | None, TtlChoice | None]:
        """The pauses seen, the time since the last turn, and the last turn's choice as
        the policy should read it now; `pending`: the next turn has not come yet (its
        pause is unknown, not counted among the pauses)."""
        times = self.turn_times
        pauses = tuple(b - a for a, b in pairwise(times))
        since_last = now - times[-1] if times else None
        if since_last is not None and not pending:
            pauses = (*pauses, since_last)
        previous = self.last_ttl
        entry = self.history_entry
        if pending and previous is not None and entry is not None and entry != previous.history:
            # For the warm-up: the entry as written, not as marked (`history_entry_after`).
            # A turn's own choice keeps planning on the mark: measured, planning turns on
            # the written entry cost more (seed 6 of the realistic script: +16%), since
            # it then keeps betting on 5m after each re-write.
            previous = TtlChoice(previous.system, entry, previous.reason)
        warmed = self.warmed_at
        if warmed is not None and previous is not None and since_last is not None:
            # A warm-up since the last turn wrote the history at 1h, counted from then.
            previous = TtlChoice(previous.system, "1h", previous.reason)
            since_last = now - warmed
        return pauses, since_last, previous

    def reusable(self) -> float:
        """The share of recent turns that could reuse their predecessor's prefix."""
        reused = self.reused
        return sum(reused) / len(reused) if reused else 1.0

    def warm_refusal(self, now: float, warm_after: float) -> str | None:
        """Why no warm-up is due now, from the cache alone; None: one may be."""
        if self.last_ttl is None or self.turn_ended is None:
            return "no turn to warm after"
        if self.warmed_at is not None:
            return "already warmed since the last turn"
        if (self.history_entry or self.last_ttl.history) == "1h":
            return "the history entry is already 1h"
        if self.last_exchange_cached:
            # Its breakpoint would fall at or before the highest hit: nothing written.
            return "the last exchange is already cached: nothing to write"
        idle = now - self.turn_ended
        if idle < warm_after:
            return f"idle {idle:.0f} s only: a turn came since"
        if idle >= TTL_SECONDS["5m"]:
            return f"idle {idle:.0f} s: the 5m entry has expired"
        return None
