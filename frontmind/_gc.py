"""The `idle` garbage-collection policy: no full collection on a turn's path.

CPython (3.11) runs a full collection once more than `threshold2` (10) young collections
of generation 1 have passed since the last one, and what they moved into the oldest
generation is over a quarter of what the last full collection left there. A full
collection walks every tracked object the process holds; landing inside a turn it is
that turn's tail (110–240 ms at 400 turns of history, issue 14). `gc.freeze()` makes
each walk cheaper but, since frozen objects no longer count as long-lived, it makes the
quarter easy to reach: full collections come more often, not less.

Under `idle`, young collections stay automatic, outside compositions (below). The full
collection CPython would have run is run instead when no turn is in flight and none has
started or ended for a moment (`SETTLE_S`): between a reply's last byte and the next
request.
`threshold2` is raised tenfold, not removed: a process that is never idle (constant
load) still gets its full collections, ten times more rarely, so memory held in cycles
stays bounded. Installing the policy collects once and freezes what is alive (the
modules, the SDK's models, the config: long-lived, walked by every full collection for
nothing); closing the last instance that installed it restores the thresholds and, if it
froze them, unfreezes those objects.

Nor does an automatic collection run inside a composition, if it can wait. A
composition is a gather under a deadline, a few milliseconds of work; under load
CPython's young collections (10–26 ms each with a thousand requests open, a generation-1
walk among them) and the valve's full ones (30–80 ms) land in the middle of it often
enough to be its tail. While any composition runs, automatic collection is held
(`gc.disable()`); the last one to end enables it again, and what was allocated meanwhile
is collected at the next allocation (at 500 continuums at once the compositions leave a
gap 68 times a second). Should they overlap back to back, with no gap for the collector,
the young generation's count is the bound: past `HOLD_MAX` times its threshold (looked at
when a composition starts or ends, and every second by the collector's task, should a
composition never end), the hold lets one collection through, inside whichever
composition is running (CPython's own choice of generation, at its next allocation), and
then holds again. If the application turned collection off itself before a composition,
the hold leaves it so; it cannot tell an application's own `gc.disable()` or
`gc.enable()` made while it holds from its own, and the last composition to end enables
collection. Measured at 200, 500 and 1,000 continuums × 4 turns at once, three runs each
alternating (bench/README): composition p99 8.4–17.9 ms held, 12.4–23.1 ms not.

The policy is process-wide state, so a library never changes it unasked: the daemon
uses `idle` by default, the library only with `[runtime] gc = "idle"`.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

import anyio

__all__ = ["BACKSTOP_S", "HOLD_MAX", "SETTLE_S", "VALVE", "IdleCollector", "full_collections"]

T = TypeVar("T")

# Quiet time (no turn started or ended) before an idle collection: long enough for a
# reply's last bytes to leave and a client's immediate next request to arrive first.
SETTLE_S = 0.05
# The automatic full collection's threshold, as a multiple of CPython's: the safety valve.
VALVE = 10
# While compositions overlap back to back, the young generation may grow to this many
# times its threshold (CPython's current one) before a collection is let through, checked
# at each composition's start and end and by the collector's task once a second.
HOLD_MAX = 100
# How often the collector's task looks at that bound itself (a composition that never ends).
BACKSTOP_S = 1.0


Moment = Literal["turn", "idle", "other"]


class _Process:
    """What the policy changed in this process, shared by every instance using it."""

    def __init__(self) -> None:
        self.users = 0
        self.saved: tuple[int, int, int] = gc.get_threshold()
        self.froze = False
        self.in_flight = 0  # turns in flight, across every instance using the policy
        self.changed_at = 0.0  # monotonic time a turn last started or ended
        self.collecting = False  # an idle collection is running
        self.composing = 0  # compositions running, across every instance
        # Guards `composing` and `hold`. Reentrant: a collection started by an allocation
        # while it is held runs finalizers, on this thread.
        self.lock = threading.RLock()
        # The hold: "off" (collection as the application has it), "held" (disabled by
        # us), "venting" (enabled by us until one collection has run, then held again).
        self.hold: Literal["off", "held", "venting"] = "off"
        self.vented = False  # a collection ran while venting
        # Full collections while the policy was installed: with a turn in flight, the
        # idle ones, and any other (the safety valve, or a gc.collect() between turns).
        self.full: dict[Moment, int] = {"turn": 0, "idle": 0, "other": 0}


_process = _Process()


def full_collections() -> dict[Moment, int] | None:
    """Full collections while the policy was in use, by when they ran; None if it is not
    in use now (CPython's own schedule: nothing of this is counted)."""
    return dict(_process.full) if _process.users else None


def _observe(phase: str, info: dict[str, Any]) -> None:
    """A gc callback (any thread, inside the collector): count full collections, and
    note that the collection a hold let through has run."""
    if phase != "start":
        return
    _process.vented = True
    if info["generation"] != 2:
        return
    moment: Moment = "idle" if _process.collecting else "turn" if _process.in_flight else "other"
    _process.full[moment] += 1


class IdleCollector:
    """One Frontmind instance's part in the `idle` policy.

    `installed()` holds the policy for the instance's life, `run()` is its task, and
    the engine tells it when each turn begins and ends (`Engine.watch_turns`), which is
    how it knows when no turn is in flight.
    """

    def __init__(
        self, settle_s: float = SETTLE_S, hold_max: int = HOLD_MAX, backstop_s: float = BACKSTOP_S
    ) -> None:
        self.settle_s = settle_s
        self.hold_max = hold_max
        self.backstop_s = backstop_s
        self.collections = 0  # idle collections this instance ran (tests, the benchmark)
        self._ended: anyio.Event | None = None
        self._threshold = 10  # CPython's threshold2, read when installed

    @contextmanager
    def installed(self) -> Iterator[None]:
        if _process.users == 0:
            _process.saved = gc.get_threshold()
            young, middle, full = _process.saved
            gc.collect()
            _process.froze = gc.get_freeze_count() == 0
            if _process.froze:
                gc.freeze()
                # Once more, over what is left: CPython then measures "a quarter of the
                # long-lived" against the few unfrozen objects, as it will after its own
                # next full collection anyway, so the safety valve acts on its count.
                gc.collect()
            gc.set_threshold(young, middle, max(full, 1) * VALVE)
            gc.callbacks.append(_observe)
        _process.users += 1
        self._threshold = max(_process.saved[2], 1)
        try:
            yield
        finally:
            _process.users -= 1
            if _process.users == 0:
                with _process.lock:
                    if _process.hold != "off":  # closed inside a composition
                        gc.enable()
                        _process.hold = "off"
                gc.callbacks.remove(_observe)
                gc.set_threshold(*_process.saved)
                if _process.froze:
                    gc.unfreeze()
                    _process.froze = False

    def turn_began(self) -> None:
        """A turn is in flight (from when it is submitted until it has ended)."""
        _process.in_flight += 1
        _process.changed_at = time.monotonic()

    def turn_ended(self) -> None:
        _process.in_flight -= 1
        _process.changed_at = time.monotonic()
        if _process.in_flight == 0 and self._ended is not None:
            self._ended.set()

    @contextmanager
    def composing(self) -> Iterator[None]:
        """No automatic collection while this composition runs (the module's docstring)."""
        # Instances on event loops in other threads share the count: a count that
        # drifted would leave collection off for good.
        with _process.lock:
            if _process.users:
                self._steer(entering=True)
            _process.composing += 1
        try:
            yield
        finally:
            with _process.lock:
                _process.composing -= 1
                if _process.hold != "off":
                    self._steer(entering=False)

    def _steer(self, *, entering: bool) -> None:
        """The hold's one transition function, at each composition's start and end."""
        if _process.composing == 0 and not entering:  # the last composition ended
            gc.enable()
            _process.hold = "off"
        elif _process.hold == "off":
            # The first composition of an overlap holds collection, unless the
            # application keeps it off itself (then there is nothing to hold).
            if entering and _process.composing == 0 and gc.isenabled():
                gc.disable()
                _process.hold = "held"
        elif _process.hold == "held":
            self._vent_if_due()
        elif _process.vented:  # venting, and the collection it let through has run
            gc.disable()
            _process.hold = "held"

    def _vent_if_due(self) -> None:
        """Past the bound, let one collection through (`_process.hold` is "held")."""
        threshold = gc.get_threshold()[0]  # 0: the application turned collection off
        if threshold and gc.get_count()[0] > threshold * self.hold_max:
            _process.vented = False
            _process.hold = "venting"
            gc.enable()  # CPython's own choice of generation, at its next allocation

    def _backstop(self) -> None:
        """The bound, even if no composition starts or ends (one that never ends)."""
        with _process.lock:
            if _process.hold == "held":
                self._vent_if_due()

    def due(self) -> bool:
        """Whether CPython would want a full collection by now (its count, not ours)."""
        return gc.get_count()[2] >= self._threshold

    async def run(self) -> None:
        """Forever: after the last turn in flight ends and a quiet moment, collect; and
        once a second, the composition hold's bound (`_backstop`)."""
        while True:
            self._ended = anyio.Event()
            while not self._ended.is_set():
                with anyio.move_on_after(self.backstop_s):
                    await self._ended.wait()
                self._backstop()
            while _process.in_flight == 0:
                quiet = time.monotonic() - _process.changed_at
                if quiet < self.settle_s:
                    await anyio.sleep(self.settle_s - quiet)
                    continue
                if self.due():
                    _process.collecting = True
                    try:
                        gc.collect()
                    finally:
                        _process.collecting = False
                    self.collections += 1
                break
