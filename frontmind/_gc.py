"""The `idle` garbage-collection policy: no full collection on a turn's path.

CPython (3.11) runs a full collection once more than `threshold2` (10) young collections
of generation 1 have passed since the last one, and what they moved into the oldest
generation is over a quarter of what the last full collection left there. A full
collection walks every tracked object the process holds; landing inside a turn it is
that turn's tail (110–240 ms at 400 turns of history, issue 14). `gc.freeze()` makes
each walk cheaper but, since frozen objects no longer count as long-lived, it makes the
quarter easy to reach: full collections come more often, not less.

Under `idle`, young collections stay automatic and untouched. The full collection
CPython would have run is run instead when no turn is in flight and none has started or
ended for a moment (`SETTLE_S`): between a reply's last byte and the next request.
`threshold2` is raised tenfold, not removed: a process that is never idle (constant
load) still gets its full collections, ten times more rarely, so memory held in cycles
stays bounded. Installing the policy collects once and freezes what is alive (the
modules, the SDK's models, the config: long-lived, walked by every full collection for
nothing); closing the last instance that installed it restores the thresholds and, if it
froze them, unfreezes those objects.

The policy is process-wide state, so a library never changes it unasked: the daemon
uses `idle` by default, the library only with `[runtime] gc = "idle"`.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

import anyio

__all__ = ["SETTLE_S", "VALVE", "IdleCollector", "full_collections"]

T = TypeVar("T")

# Quiet time (no turn started or ended) before an idle collection: long enough for a
# reply's last bytes to leave and a client's immediate next request to arrive first.
SETTLE_S = 0.05
# The automatic full collection's threshold, as a multiple of CPython's: the safety valve.
VALVE = 10


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
        # Full collections while the policy was installed: with a turn in flight, the
        # idle ones, and any other (the safety valve, or a gc.collect() between turns).
        self.full: dict[Moment, int] = {"turn": 0, "idle": 0, "other": 0}


_process = _Process()


def full_collections() -> dict[Moment, int] | None:
    """Full collections while the policy was in use, by when they ran; None if it is not
    in use now (CPython's own schedule: nothing of this is counted)."""
    return dict(_process.full) if _process.users else None


def _observe(phase: str, info: dict[str, Any]) -> None:
    """A gc callback (any thread, inside the collector): count full collections."""
    if phase != "start" or info["generation"] != 2:
        return
    moment: Moment = "idle" if _process.collecting else "turn" if _process.in_flight else "other"
    _process.full[moment] += 1


class IdleCollector:
    """One Frontmind instance's part in the `idle` policy.

    `installed()` holds the policy for the instance's life, `run()` is its task, and
    the engine tells it when each turn begins and ends (`Engine.watch_turns`), which is
    how it knows when no turn is in flight.
    """

    def __init__(self, settle_s: float = SETTLE_S) -> None:
        self.settle_s = settle_s
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

    def due(self) -> bool:
        """Whether CPython would want a full collection by now (its count, not ours)."""
        return gc.get_count()[2] >= self._threshold

    async def run(self) -> None:
        """Forever: after the last turn in flight ends and a quiet moment, collect."""
        while True:
            self._ended = anyio.Event()
            await self._ended.wait()
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
