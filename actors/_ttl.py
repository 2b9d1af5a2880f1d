"""Choosing each turn's cache TTLs (5m or 1h) from the price model and the pauses seen.

Prices relative to base input (prompt caching, "Pricing"): a 5m write costs 1.25x, a 1h
write 2x, a read 0.1x; an entry lives for its TTL from its last use, and each read
refreshes it. A 1h breakpoint may not follow a 5m one in processing order (tools,
system, messages: "Mixing different TTLs"), so with a system and a history breakpoint
the choices are (system, history) = (1h, 1h), (1h, 5m) or (5m, 5m).

The adaptive policy takes the choice with the lowest expected input cost per turn if it
were kept, the next pause drawn from the pauses this continuum has seen (`steady_cost`):

    price(history TTL) × what the turn adds to the history
  + P(pause > history TTL) × history tokens × (price(history TTL) − 0.1)
  + P(pause > system TTL)  × system tokens  × (price(system TTL) − 0.1)

A miss re-writes what a hit would have read: that difference is the penalty. All of it
is weighed by the share of recent turns whose prefix was reusable at all (`reusable`); the
rest re-write everything at the chosen price, so a layout whose system prompt changes
every turn (the legacy placement) gains nothing from a longer TTL and pays the cheaper
write. A per-turn cost, not this turn's alone: right after a long pause everything is
re-written anyway, and a policy that looked only one pause ahead would keep choosing the
cheaper 5m write there and keep missing after the next medium pause.

The oracle (`frontmind simulate`) knows the next pause and uses `expected_cost`: this
turn's writes (what is still alive decides what is written) plus the next turn's
re-writes for that pause. It costs a pass over at most `MAX_PAUSES` pauses per turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, Protocol

import msgspec

from storage import TtlChoice

__all__ = [
    "CHOICES",
    "MAX_PAUSES",
    "PRICE",
    "READ_PRICE",
    "TTL_SECONDS",
    "AdaptivePolicy",
    "CacheView",
    "FixedPolicy",
    "TtlPolicy",
    "expected_cost",
    "policy_for",
    "steady_cost",
]

Ttl = Literal["5m", "1h"]
TTL_SECONDS: Final[dict[str, float]] = {"5m": 300.0, "1h": 3600.0}
PRICE: Final[dict[str, float]] = {"5m": 1.25, "1h": 2.0}
READ_PRICE: Final = 0.1
# (system, history): never a 1h breakpoint after a 5m one.
CHOICES: Final[tuple[tuple[Ttl, Ttl], ...]] = (("1h", "1h"), ("1h", "5m"), ("5m", "5m"))
MAX_PAUSES: Final = 64  # the most recent pauses weigh in; older habits fade out


class CacheView(msgspec.Struct, frozen=True, kw_only=True):
    """What a policy knows when a turn starts."""

    now: float
    pauses: tuple[float, ...]  # seconds between this continuum's turns, oldest first
    since_last: float | None  # seconds since the previous turn (None: the first turn)
    previous: TtlChoice | None  # what the previous turn chose
    system_tokens: int  # tools and system prompt: the system breakpoint's prefix
    history_tokens: int  # the history after the system prompt, through its breakpoint
    increment_tokens: int  # what the previous turn added to the history
    reusable: float = 1.0  # share of recent turns whose cached prefix was still valid


class TtlPolicy(Protocol):
    def choose(self, view: CacheView) -> TtlChoice: ...


def _alive(view: CacheView) -> tuple[bool, bool]:
    """Whether the previous turn's system and history entries are still alive."""
    if view.previous is None or view.since_last is None:
        return False, False
    return (
        view.since_last <= TTL_SECONDS[view.previous.system],
        view.since_last <= TTL_SECONDS[view.previous.history],
    )


def expected_cost(view: CacheView, system: Ttl, history: Ttl, pauses: Sequence[float]) -> float:
    """Expected input cost (base-price tokens) of the cache writes this turn and of the
    re-writes the next pause would cause, for one choice; `pauses` the distribution."""
    system_alive, history_alive = _alive(view)
    # An entry still alive is read, unless the prefix changed (1 - reusable of the time).
    churn = 1.0 - view.reusable
    written_system = view.system_tokens * (churn if system_alive else 1.0)
    if history_alive:
        written_history = view.increment_tokens + churn * (
            view.history_tokens - view.increment_tokens
        )
    else:
        written_history = view.history_tokens
    now = PRICE[system] * written_system + PRICE[history] * written_history
    if not pauses:
        return now
    short, long = TTL_SECONDS[history], TTL_SECONDS[system]
    history_loss = view.history_tokens * (PRICE[history] - READ_PRICE)
    system_loss = view.system_tokens * (PRICE[system] - READ_PRICE)
    penalty = sum(
        (history_loss if g > short else 0.0) + (system_loss if g > long else 0.0) for g in pauses
    )
    return now + view.reusable * penalty / len(pauses)


def steady_cost(view: CacheView, system: Ttl, history: Ttl, pauses: Sequence[float]) -> float:
    """Expected input cost per turn (base-price tokens) of keeping one choice, over the
    distribution of `pauses`: the writes and the re-writes of the cached prefix."""
    n = len(pauses) or 1
    history_miss = sum(1 for g in pauses if g > TTL_SECONDS[history]) / n
    system_miss = sum(1 for g in pauses if g > TTL_SECONDS[system]) / n
    kept = (
        PRICE[history] * view.increment_tokens
        + history_miss * view.history_tokens * (PRICE[history] - READ_PRICE)
        + system_miss * view.system_tokens * (PRICE[system] - READ_PRICE)
    )
    churned = PRICE[system] * view.system_tokens + PRICE[history] * view.history_tokens
    return view.reusable * kept + (1.0 - view.reusable) * churned


class FixedPolicy:
    """The configured TTLs, every turn."""

    def __init__(self, system: Ttl, history: Ttl) -> None:
        self._choice = TtlChoice(system, history, "fixed: cache.system_ttl and cache.history_ttl")

    def choose(self, view: CacheView) -> TtlChoice:
        return self._choice


class AdaptivePolicy:
    """The cheapest choice in expectation over the pauses this continuum has seen; the
    configured TTLs until it has seen one."""

    def __init__(self, system: Ttl, history: Ttl) -> None:
        self._default = (system, history)

    def choose(self, view: CacheView) -> TtlChoice:
        pauses = view.pauses[-MAX_PAUSES:]
        if not pauses:
            system, history = self._default
            return TtlChoice(system, history, "adaptive: no pause seen yet, the configured TTLs")
        costs = {c: steady_cost(view, c[0], c[1], pauses) for c in CHOICES}
        best = min(CHOICES, key=lambda c: (costs[c], CHOICES.index(c)))
        mid = sum(1 for g in pauses if 300 < g <= 3600)
        over = sum(1 for g in pauses if g > 3600)
        runner_up = min(costs[c] for c in CHOICES if c != best)
        return TtlChoice(
            best[0],
            best[1],
            f"adaptive: of {len(pauses)} pauses, {mid} between 5 and 60 min and {over} over "
            f"an hour; expected {costs[best]:,.0f} base-price tokens a turn, "
            f"{runner_up - costs[best]:,.0f} below the next best choice",
        )


def policy_for(system: Ttl, history: Ttl, name: str) -> TtlPolicy:
    """The policy `cache.policy` names, around the configured TTLs."""
    return AdaptivePolicy(system, history) if name == "adaptive" else FixedPolicy(system, history)
