"""Choosing each turn's cache TTLs (5m or 1h) from the price model and the pauses seen.

Prices relative to base input (prompt caching, "Pricing"): a 5m write costs 1.25x, a 1h
write 2x, a read 0.1x (the model's own figures, from its row of the model data: the view
carries them, so Fable 5.1's 0.025x reads weigh in); an entry lives for its TTL from its
last use, and each read refreshes it. A 1h breakpoint may not follow a 5m one in
processing order (tools, system, messages: "Mixing different TTLs"), so with a system
and a history breakpoint the choices are (system, history) = (1h, 1h), (1h, 5m) or (5m, 5m).

A turn starts in one of three states, by the pause since the previous turn: its history
entry is alive (only what the previous turn added is written), only the system entry is
alive (the history is re-written), or nothing is (all of it is). Each entry lives by the
TTL it was written with: the history entry by the previous turn's history TTL, the
system entry by the TTL of the last turn that wrote it, since a read refreshes an entry
for its own TTL and a 1h mark at or before the highest hit writes nothing (only what
lies after it is billed as a write, "Mixing different TTLs"), so a system prompt cached
at 5m stays a 5m entry under later 1h marks. The choice sets the price of this turn's
writes and, with the next pause, the state of the next turn. That is a small Markov
decision problem over (state, the system entry's TTL if it is alive):

    cost(state, choice) = price(system TTL) × system tokens written
                        + price(history TTL) × history tokens written + 0.1 × the rest
    next state          = alive if pause <= history TTL, system-only if the system
                          entry (written now at the system TTL, or kept) outlives the
                          pause, else nothing

weighed by the share of recent turns whose prefix was reusable at all (`reusable`; the
rest re-write everything: a system prompt that changes every turn gains nothing from a
longer TTL). The adaptive policy draws the next pause from the pauses this continuum has
seen plus a weak prior (`PRIOR_PAUSES`: one pause's worth, spread evenly over quick,
medium and long pauses, so that three quick pauses do not make a medium one impossible)
and takes the choice with the lowest expected discounted cost over the coming turns
(`plan`: value iteration over 6 states x 3 choices x 3 kinds of pause, well under a
millisecond). Looking one pause ahead only would keep choosing the cheaper 5m write
right after a long pause, when everything is re-written anyway, and keep missing after
the next medium pause.

What no policy that sees only the past can avoid: after a full re-write, 5m is the
cheaper bet whenever medium pauses are not the rule, and it loses when a medium pause
follows; writing only part of the prefix at 1h does not soften that, since the cost is
linear in where the split lies (its ends are the choices above).

The oracle (`frontmind simulate`) knows every later pause and solves the same problem
exactly over them (`oracle_plan`): the floor for any policy with these sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, Protocol

import msgspec

from storage import TtlChoice, TurnRecord

from ._catalog import CACHE_READ, CACHE_WRITE_1H, CACHE_WRITE_5M

__all__ = [
    "CHOICES",
    "DISCOUNT",
    "FULL_STATES",
    "MAX_PAUSES",
    "PRICE",
    "PRIOR_PAUSES",
    "READ_PRICE",
    "STATES",
    "TTL_SECONDS",
    "AdaptivePolicy",
    "CacheView",
    "FixedPolicy",
    "TtlPolicy",
    "full_state_of",
    "history_entry_after",
    "next_full",
    "next_state",
    "oracle_plan",
    "plan",
    "policy_for",
    "state_of",
    "system_entry_after",
    "turn_cost",
    "warm_cost",
    "warm_plan",
]

Ttl = Literal["5m", "1h"]
TTL_SECONDS: Final[dict[str, float]] = {"5m": 300.0, "1h": 3600.0}
PRICE: Final[dict[str, float]] = {"5m": CACHE_WRITE_5M, "1h": CACHE_WRITE_1H}
READ_PRICE: Final = CACHE_READ
# (system, history): never a 1h breakpoint after a 5m one.
CHOICES: Final[tuple[tuple[Ttl, Ttl], ...]] = (("1h", "1h"), ("1h", "5m"), ("5m", "5m"))
MAX_PAUSES: Final = 64  # the most recent pauses weigh in; older habits fade out
# One pause's worth of doubt, spread evenly over quick, medium and long pauses (a uniform
# Dirichlet prior): a few quick pauses seen do not yet make medium ones impossible, and
# the first turn, with none seen, is planned on this alone.
PRIOR_PAUSES: Final = 1.0


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
    # The TTL the system entry was written with, if it was alive at the previous turn
    # (which refreshed it); None: none was. Unknown (older records): `previous.system`.
    system_entry: Ttl | None = None
    system_entry_known: bool = False
    # The choice is for the next turn's history entry, written ahead of that turn (a
    # background request riding the cache right after a turn puts its history breakpoint
    # where the next turn's falls, so the next turn's own mark there writes nothing).
    ahead: bool = False
    # The model's prices relative to its base input (its row of the model data: 5m and
    # 1h writes, reads; Fable 5.1 reads at 0.025x, Opus 5.5 at 0.05x) and its minimum
    # cacheable prefix: a breakpoint whose prefix is shorter caches nothing.
    write_5m: float = PRICE["5m"]
    write_1h: float = PRICE["1h"]
    read: float = READ_PRICE
    min_cacheable: int = 0


class TtlPolicy(Protocol):
    def choose(self, view: CacheView) -> TtlChoice: ...


State = Literal["alive", "history", "all"]  # what a turn must write beyond its increment
STATES: Final[tuple[State, ...]] = ("alive", "history", "all")
# A turn's full state: what it must write, and the TTL of the system entry that is alive
# (None: none is). The system entry keeps the TTL it was written with: a later 1h mark
# on it is read, not written (see `system_entry_after`).
Full = tuple[State, Ttl | None]
FULL_STATES: Final[tuple[Full, ...]] = (
    ("alive", None), ("alive", "5m"), ("alive", "1h"), ("history", "5m"), ("history", "1h"),
    ("all", None),
)  # fmt: skip
DISCOUNT: Final = 0.9  # a turn ten turns ahead weighs about a third
_ITERATIONS: Final = 60  # 0.9 ** 60 < 0.002: converged for choosing


def _system_entry(view: CacheView) -> Ttl | None:
    if view.system_entry_known:
        return view.system_entry
    return None if view.previous is None else view.previous.system


def full_state_of(view: CacheView) -> Full:
    """What this turn finds alive: the previous turn's history entry (its TTL), the
    system entry (the TTL it was written with), and the pause since."""
    if view.previous is None or view.since_last is None:
        return ("all", None)
    entry = _system_entry(view)
    if entry is not None and view.since_last > TTL_SECONDS[entry]:
        entry = None
    if view.since_last <= TTL_SECONDS[view.previous.history]:
        return ("alive", entry)
    return ("history", entry) if entry is not None else ("all", None)


def state_of(view: CacheView) -> State:
    return full_state_of(view)[0]


def system_entry_after(
    entry: tuple[Ttl, float] | None, at: float, wrote_system: bool, chosen: TtlChoice | None
) -> tuple[Ttl, float] | None:
    """The system entry (its TTL, when last used) after a turn that started at `at`.

    A turn that wrote its whole prefix wrote the system entry with the TTL it chose.
    Otherwise the turn read through the system breakpoint: a live entry is refreshed for
    the TTL it was written with, and a 1h mark does not lengthen it, since only what lies
    after the highest cache hit is written ("Mixing different TTLs", https://
    platform.claude.com/docs/en/build-with-claude/prompt-caching)."""
    if wrote_system and chosen is not None:
        return (chosen.system, at)
    if entry is not None and at - entry[1] <= TTL_SECONDS[entry[0]]:
        return (entry[0], at)
    return None


def history_entry_after(entry: Ttl | None, record: TurnRecord) -> Ttl | None:
    """The TTL of the history entry after a completed turn, from what its first call
    wrote: a 5m write means the history breakpoint was 5m (it is the last one written);
    1h writes alone, a 1h entry through it. A call that wrote nothing read its history
    breakpoint's entry as it was: a mark at or before the highest hit writes nothing and
    a read keeps an entry's TTL ("Mixing different TTLs", https://platform.claude.com/
    docs/en/build-with-claude/prompt-caching), so a 1h mark there leaves a 5m entry 5m."""
    first = record.call_usage[0] if record.call_usage else None
    if first is None:
        return entry
    if first.cache_creation_5m > 0:
        return "5m"
    if first.cache_creation_1h > 0:
        return "1h"
    if first.cache_creation_input_tokens > 0:  # no split reported: the mark's TTL
        return record.cache_ttl.history if record.cache_ttl else entry
    return entry


def turn_cost(view: CacheView, state: State, system: Ttl, history: Ttl) -> float:
    """Input cost of the cached prefix (base-price tokens) for one turn in `state`."""
    s, h, inc = view.system_tokens, view.history_tokens, view.increment_tokens
    if s + h < view.min_cacheable:
        return float(s + h)  # below the model's minimum nothing is cached: all base price
    price = {"5m": view.write_5m, "1h": view.write_1h}
    written_system = s if state == "all" else 0
    written_history = inc if state == "alive" else h
    kept = (
        price[system] * written_system
        + price[history] * written_history
        + view.read * (s + h - written_system - written_history)
    )
    churned = price[system] * s + price[history] * h
    return view.reusable * kept + (1.0 - view.reusable) * churned


def next_state(pause: float, system: Ttl, history: Ttl) -> State:
    """The next state when this turn wrote the system entry at `system` (or it stays
    alive at that TTL)."""
    return next_full(("all", None), pause, system, history)[0]


def next_full(state: Full, pause: float, system: Ttl, history: Ttl) -> Full:
    """The state of the next turn, `pause` after a turn in `state` that chose
    (system, history)."""
    phase, entry = state
    after: Ttl | None = system if phase == "all" else entry
    if after is not None and pause > TTL_SECONDS[after]:
        after = None
    if pause <= TTL_SECONDS[history]:
        return ("alive", after)
    return ("history", after) if after is not None else ("all", None)


def _kinds(pauses: Sequence[float]) -> list[tuple[float, float]]:
    """(a representative pause, its probability) for quick, medium and long pauses: the
    pauses seen, plus `PRIOR_PAUSES` spread evenly over the three kinds."""
    n = len(pauses) + PRIOR_PAUSES
    quick = sum(1 for g in pauses if g <= TTL_SECONDS["5m"]) + PRIOR_PAUSES / 3
    medium: float = sum(1 for g in pauses if TTL_SECONDS["5m"] < g <= TTL_SECONDS["1h"])
    medium += PRIOR_PAUSES / 3
    return [(60.0, quick / n), (1800.0, medium / n), (7200.0, (n - quick - medium) / n)]


def plan(view: CacheView, pauses: Sequence[float]) -> dict[tuple[Ttl, Ttl], float]:
    """Expected discounted cost of each choice now, then the best choices after it, with
    the next pauses drawn from `pauses` (which must not be empty)."""
    kinds = _kinds(pauses)
    costs = {(st, c): turn_cost(view, st[0], *c) for st in FULL_STATES for c in CHOICES}
    moves = {
        (st, c): [(next_full(st, g, *c), p) for g, p in kinds]
        for st in FULL_STATES
        for c in CHOICES
    }
    value = dict.fromkeys(FULL_STATES, 0.0)
    for _ in range(_ITERATIONS):
        value = {
            st: min(
                costs[st, c] + DISCOUNT * sum(p * value[nx] for nx, p in moves[st, c])
                for c in CHOICES
            )
            for st in FULL_STATES
        }
    state = full_state_of(view)
    return {
        c: costs[state, c] + DISCOUNT * sum(p * value[nx] for nx, p in moves[state, c])
        for c in CHOICES
    }


def oracle_plan(view: CacheView, later: Sequence[float]) -> dict[tuple[Ttl, Ttl], float]:
    """The cost of each choice now, then the best choices for the known later turns
    (`later`: their times, after `view.now`), by backward induction."""
    times = [view.now, *later]
    value = dict.fromkeys(FULL_STATES, 0.0)
    for t in range(len(times) - 1, 0, -1):
        pause_after = times[t + 1] - times[t] if t + 1 < len(times) else None
        value = {
            st: min(
                turn_cost(view, st[0], *c)
                + (0.0 if pause_after is None else value[next_full(st, pause_after, *c)])
                for c in CHOICES
            )
            for st in FULL_STATES
        }
    state = full_state_of(view)
    first = times[1] - times[0] if len(times) > 1 else None
    return {
        c: turn_cost(view, state[0], *c)
        + (0.0 if first is None else value[next_full(state, first, *c)])
        for c in CHOICES
    }


class FixedPolicy:
    """The configured TTLs, every turn."""

    def __init__(self, system: Ttl, history: Ttl) -> None:
        self._choice = TtlChoice(system, history, "fixed: cache.system_ttl and cache.history_ttl")

    def choose(self, view: CacheView) -> TtlChoice:
        return self._choice


class AdaptivePolicy:
    """The cheapest choice in expectation over the pauses this continuum has seen (and a
    weak prior: `PRIOR_PAUSES`); the configured TTLs break ties."""

    def __init__(self, system: Ttl, history: Ttl) -> None:
        self._default = (system, history)

    def choose(self, view: CacheView) -> TtlChoice:
        pauses = view.pauses[-MAX_PAUSES:]
        costs = plan(view, pauses)
        best = min(CHOICES, key=lambda c: (costs[c], c != self._default, CHOICES.index(c)))
        mid = sum(1 for g in pauses if 300 < g <= 3600)
        over = sum(1 for g in pauses if g > 3600)
        runner_up = min(costs[c] for c in CHOICES if c != best)
        seen = (
            f"of {len(pauses)} pauses, {mid} between 5 and 60 min and {over} over an hour"
            if pauses
            else "no pause seen yet, the prior alone"
        )
        return TtlChoice(
            best[0],
            best[1],
            f"adaptive: {seen}; {state_of(view)} to write; expected {costs[best]:,.0f} "
            f"base-price tokens over the coming turns, {runner_up - costs[best]:,.0f} below "
            "the next best",
        )


def policy_for(system: Ttl, history: Ttl, name: str) -> TtlPolicy:
    """The policy `cache.policy` names, around the configured TTLs."""
    return AdaptivePolicy(system, history) if name == "adaptive" else FixedPolicy(system, history)


# -- the cache warm-up --------------------------------------------------------------------
#
# A continuum idle for `warm_after` seconds (270 by default: before a 5m entry expires)
# whose history entry is 5m can send one small request that reads the cached prefix
# (0.1x) and writes the last exchange, which the next turn would write anyway, under a
# 1h breakpoint, then a few uncached tokens and max_tokens=1. Only what lies after the
# highest cache hit is written, at the TTL of the breakpoints after it ("Mixing
# different TTLs", https://platform.claude.com/docs/en/build-with-claude/prompt-caching):
# the small delta written at 1h makes a 1h entry of the whole prefix, so a pause of 5 to
# 60 minutes then costs a read instead of a re-write. A read refreshes an entry for the
# TTL it was written with ("each hit refreshes it"), so the warm-up does not lengthen
# the 5m entry it reads; it adds the 1h one.

WARM_UNCACHED_TOKENS: Final = 12  # the tiny user message after the breakpoint, framed


def warm_cost(view: CacheView) -> float:
    """The warm-up's input cost (base-price tokens): the cached prefix read, the last
    exchange written at 1h, the tiny message uncached."""
    cached = view.system_tokens + view.history_tokens - view.increment_tokens
    return view.read * cached + view.write_1h * view.increment_tokens + WARM_UNCACHED_TOKENS


def warm_plan(view: CacheView, warm_after: float) -> tuple[float, float, str]:
    """(expected cost of the coming turns without a warm-up now, with one, the pauses
    weighed), for a continuum idle for `warm_after` seconds since its last turn.

    `view` is the next turn's view as it stands (sizes, pauses seen, the last turn's
    choice). The next pause, given that it is longer than `warm_after`, is drawn from
    the pauses seen that were (plus `PRIOR_PAUSES` spread evenly over three kinds): one
    that still finds the 5m entry alive (the warm-up only pre-pays the next turn's
    write, at 2x instead of 1.25x), a medium one (the warm-up turns a re-write into a
    read), a long one (both re-write; the warm-up is wasted)."""
    w = warm_after
    five, hour = TTL_SECONDS["5m"], TTL_SECONDS["1h"]
    pauses = view.pauses[-MAX_PAUSES:]
    prior = PRIOR_PAUSES / 3
    late = sum(1 for g in pauses if w < g <= five) + prior
    medium = sum(1 for g in pauses if five < g <= hour + w) + prior
    long = sum(1 for g in pauses if g > hour + w) + prior
    total = late + medium + long
    previous = view.previous
    assert previous is not None
    warmed = TtlChoice(previous.system, "1h", previous.reason)
    inc = view.increment_tokens

    def best(since: float, chosen: TtlChoice, prepaid: bool) -> float:
        turn = msgspec.structs.replace(view, since_last=since, previous=chosen)
        costs = plan(turn, pauses or (60.0,))
        if prepaid:  # the last exchange is already written: the turn reads it
            price = {"5m": view.write_5m, "1h": view.write_1h}
            return min(costs[c] - (price[c[1]] - view.read) * inc for c in CHOICES)
        return min(costs.values())

    without = (
        late * best(five, previous, False)
        + medium * best(1800.0, previous, False)
        + long * best(hour + 2 * w + 1, previous, False)
    ) / total
    with_ = (
        warm_cost(view)
        + (
            (late + medium) * best(60.0, warmed, True)
            + long * best(hour + 2 * w + 1, previous, False)
        )
        / total
    )
    seen = (
        f"of {len(pauses)} pauses, {late - prior:.0f} past {w:.0f} s within 5 min, "
        f"{medium - prior:.0f} within the hour, {long - prior:.0f} longer"
    )
    return without, with_, seen
