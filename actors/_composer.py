"""The composer: gathers every trinket's section under a deadline, once per turn.

It keeps one dict from section name to one record (content, cache policy, placement),
so nothing can drift between parallel dicts. A trinket that misses the deadline, fails,
or was given up on never delays or breaks the turn: its last good content is used and
marked stale with its age, or its section is left out; the statuses say which.

A deadline is the trinkets' budget for their own work. When the daemon is busier than
its CPU allows (hundreds of turns at once, or a machine shared with other work), every
step of a composition waits for the event loop: the scatter, each storage read's
result, the reply. That wait is not the trinket's, and cutting sections for it drops
context exactly when the daemon is busy (bench/load.py --cpu-share, --probe: there it
was the loop, not the renders or the reader connections, that the sections waited on).
So the composer measures the loop's lag from the `Compose` message's own trip through
the loop (stamped as it is made, just before it is sent, and read as the composer takes
it up: no round trip of its own inside the composition) and allows the gather that lag
for each step it takes, up to
`LAG_ALLOWANCE` times the deadline more. An idle loop answers at once: below
`LAG_FLOOR_S` nothing is added, and deadlines stay exact.

A system section has one more allowance: in the composer's first gather, nothing older
can stand in for it, so it is waited for up to `first_system_deadline_ms` (a busy
machine's first turn in a process cut the base prompt, and with it the cached prefix).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal

import msgspec

from runtime import Actor, ActorRef, Failed, Replied, scatter_gather
from storage import SectionStatus

from ._cache_guard import CacheGuard
from ._markup import neutralize_frame
from ._messages import (
    Compose,
    Composed,
    ComposerMessage,
    SectionLate,
    SectionReply,
    SystemSection,
    TurnStart,
)
from ._notification import fit_notification_center, wrap_section
from ._observe import current_turn, record_span
from ._placement import PLACEMENT_SYSTEM, PlacementRegistry, SectionSpec
from ._settings import ComposerSettings
from ._tokens import estimate_tokens

__all__ = ["ComposerActor", "SectionRecord", "longest_gather"]

LAG_STEPS = 8  # loop round trips in a composition with reads: scatter, reads, reply
LAG_ALLOWANCE = 2.0  # the most a lagging loop adds, as a multiple of the deadline
LAG_FLOOR_S = 0.002  # a lag below this is an idle loop's: nothing is added


def longest_gather(settings: ComposerSettings) -> float:
    """The longest a gather may take by these settings, in seconds: its longest
    deadline (a section's own, or in a first gather a system section's
    `first_system_deadline_ms`) and the most a lagging loop adds to that."""
    longest = max([settings.deadline_ms, *settings.deadlines.values()]) / 1000
    return max(longest, settings.first_system_deadline_ms / 1000) + longest * LAG_ALLOWANCE


# The operator's own base prompt explains the frame (it names the header), so it is the
# one section not neutralized; every other section's text can come from outside.
TRUSTED_SECTIONS = frozenset({"base_prompt"})


class SectionRecord(msgspec.Struct):
    """The one record the composer keeps per section."""

    spec: SectionSpec
    content: str = ""  # as the turn gets it: the frame neutralized
    rendered_at: float | None = None  # when `content` was produced

    @property
    def placement(self) -> str:
        return self.spec.placement

    @property
    def cached(self) -> bool:
        return self.spec.cached


class ComposerActor(Actor[ComposerMessage, Composed | None]):
    protocol = ComposerMessage
    replies = Composed | None

    def __init__(
        self,
        registry: PlacementRegistry,
        trinkets: Sequence[tuple[str, ActorRef[Any, Any]]],
        settings: ComposerSettings,
        hold: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> None:
        # What each composition runs inside. The `idle` GC policy holds automatic
        # collection here: a collection landing in a deadline-bound gather (10-26 ms for a
        # young one under load, 30-80 ms for a full one) is the composition's tail.
        self._hold = hold
        self._sections: dict[str, SectionRecord] = {}
        self._neutral: dict[str, tuple[str, str]] = {}  # section -> (content, neutralized)
        refs: list[ActorRef[Any, Any]] = []
        for name, ref in trinkets:
            self._sections[name] = SectionRecord(registry.spec(name))  # refuses unknown names
            refs.append(ref)
        self._names = [name for name, _ in trinkets]
        self._order = [s.name for s in registry.ordered() if s.name in self._sections]
        self._refs = refs
        self._settings = settings
        # Each section's own deadline (seconds); the gather waits for the longest.
        self._deadlines = [
            settings.deadlines.get(name, settings.deadline_ms) / 1000 for name in self._names
        ]
        self._deadline = max(self._deadlines, default=settings.deadline_ms / 1000)
        self._first_system = settings.first_system_deadline_ms / 1000
        self._first_done = False  # the first gather (system sections' long wait) is done
        self._guard = CacheGuard(
            window=settings.guard_window,
            threshold=settings.guard_threshold,
            min_turns=settings.guard_min_turns,
        )

    async def handle(self, message: ComposerMessage) -> Composed | None:
        if isinstance(message, SectionLate):
            record = self._sections.get(message.section)
            if record is not None:
                content = self._neutralized(message.section, message.content)
                # Nothing (once neutralized) is the section's latest word too: no older
                # content stands in for it as stale any more.
                record.content = content if content.strip() else ""
                record.rendered_at = message.rendered_at
            return None
        return await self._compose(message)

    async def _compose(self, message: Compose) -> Composed:
        with self._hold():
            return await self._gather(message)

    async def _gather(self, message: Compose) -> Composed:
        started = time.perf_counter()
        started_ns = time.time_ns()
        turn = message.turn
        current_turn.set(turn.turn_id)  # e.g. the cache guard's warnings name the turn
        extra = self._lag_allowance(started - message.sent_at)
        deadlines = self._section_deadlines()
        deadline = max(deadlines, default=self._deadline) + extra
        result = await scatter_gather(
            self._refs,
            # The trinkets' own due time stays the usual one, also in a first gather that
            # waits longer for system sections: past it a trinket hands a late answer
            # in as `SectionLate` for the next turn (a first answer is never skipped:
            # actors/_trinket.py), where a due time this far off would have it answer a
            # gather that stopped waiting for it.
            TurnStart(turn, time.time() + self._deadline + extra),
            deadline=deadline,
            deadlines=[d + extra for d in deadlines] if extra else deadlines,
        )
        statuses: dict[str, SectionStatus] = {}
        for name, outcome in zip(self._names, result.outcomes, strict=True):
            record = self._sections[name]
            elapsed_ms = outcome.elapsed * 1000
            ended_ns = started_ns + int(outcome.elapsed * 1e9)
            failed = not isinstance(outcome, Replied)
            record_span("frontmind.trinket", turn.turn_id, started_ns, ended_ns, failed=failed,
                        **{"frontmind.section": name})  # fmt: skip
            if isinstance(outcome, Replied) and isinstance(outcome.value, SectionReply):
                content = self._neutralized(name, outcome.value.content)
                # Nothing, or nothing once neutralized, is an empty section.
                record.content = content if content.strip() else ""
                record.rendered_at = turn.now
                state: Literal["fresh", "empty"] = "fresh" if record.content else "empty"
                statuses[name] = SectionStatus(name, record.placement, state, elapsed_ms)
                continue
            detail: Literal["timeout", "failed"] = (
                "failed" if isinstance(outcome, Failed) else "timeout"
            )
            if record.content and record.rendered_at is not None:
                age = max(turn.now - record.rendered_at, 0.0)
                statuses[name] = SectionStatus(name, record.placement, "stale", elapsed_ms, age)
            else:
                statuses[name] = SectionStatus(name, record.placement, detail, elapsed_ms)
        return self._assemble(statuses, started)

    def _section_deadlines(self) -> list[float]:
        """Each section's deadline for this gather (seconds): its own, and in the first
        gather, `first_system_deadline_ms` for a system section if longer (see
        ComposerSettings: nothing older can stand in for it yet). Only the first: a
        system trinket that hangs costs one long wait, not one per turn (its late
        answer is kept for the next turn, as any section's)."""
        if self._first_done:
            return self._deadlines
        self._first_done = True
        return [
            max(d, self._first_system)
            if self._sections[name].placement == PLACEMENT_SYSTEM
            and self._sections[name].rendered_at is None
            else d
            for name, d in zip(self._names, self._deadlines, strict=True)
        ]

    def _neutralized(self, name: str, content: str) -> str:
        """`content` as the turn gets it. Whatever any trinket returns, it cannot forge or
        imitate the frame, in the system prompt or in the notification center: this is
        the one place every section passes, fresh or handed in late (the trusted base
        prompt stays as written). Most sections say what they said last turn, and
        neutralizing is a pass over every character: the last result is kept."""
        if name in TRUSTED_SECTIONS:
            return content
        last = self._neutral.get(name)
        if last is not None and last[0] == content:
            return last[1]
        text = neutralize_frame(content)
        if text == content:  # the usual case: one string kept, not a copy beside it
            text = content
        self._neutral[name] = (content, text)
        return text

    def _lag_allowance(self, lag: float) -> float:
        """Seconds added to this gather for the event loop's current lag (0 when idle).

        `lag` is how long the `Compose` took from its sender to here: one pass through the
        loop's ready queue, and any wait behind this composer's previous message (a
        preview composed beside a turn), which the bound below caps."""
        if not self._refs:
            return 0.0
        if lag < LAG_FLOOR_S:
            return 0.0
        return min(lag * LAG_STEPS, self._deadline * LAG_ALLOWANCE)

    def _assemble(self, statuses: dict[str, SectionStatus], started: float) -> Composed:
        system: list[SystemSection] = []
        notification: list[tuple[str, str, int]] = []
        for name in self._order:
            record = self._sections[name]
            if not record.content or statuses[name].status in ("timeout", "failed"):
                continue
            content = record.content  # neutralized as it came in (`_neutralized`)
            if record.placement == PLACEMENT_SYSTEM:
                text = content if name in TRUSTED_SECTIONS else wrap_section(name, content)
                system.append(SystemSection(name, text, record.cached))
            else:
                notification.append((name, content, record.spec.priority))
        center, sent, shortened = fit_notification_center(
            notification, self._settings.notification_budget_tokens, self._settings.frame
        )
        warnings = list(self._guard.observe(system))
        warnings.extend(
            f"section {name!r} was shortened to fit the notification center budget"
            for name in sorted(shortened)
        )
        tokens = {s.name: estimate_tokens(s.text) for s in system}
        # Counted on what the center holds: a shortened section's tokens are the ones
        # sent (a dropped one has none), not those of the text it was cut from.
        tokens.update(
            {
                n: estimate_tokens(sent.get(n, "") if n in shortened else c)
                for n, c, _ in notification
            }
        )
        ordered = tuple(
            msgspec.structs.replace(statuses[n], tokens=tokens.get(n, 0)) for n in self._order
        )
        return Composed(
            system=tuple(system),
            notification=center,
            sections=ordered,
            warnings=tuple(warnings),
            compose_ms=(time.perf_counter() - started) * 1000,
        )
